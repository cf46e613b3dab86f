"""The dashboard's helpers: what pages share (ui), each page's view logic (views/), figures, serving, access."""
