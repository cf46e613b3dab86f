"""Each page's own helpers, one module per page that has them."""
