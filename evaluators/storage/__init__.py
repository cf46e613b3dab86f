"""The DuckDB store (schema, health, writes) and the named reads of queries/."""
