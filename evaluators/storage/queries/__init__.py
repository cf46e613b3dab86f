"""The named reads, one module per domain, grouped in DuckDB."""
