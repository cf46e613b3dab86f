"""The named reads, one module per domain, in the style of datasette's canned queries: each a small
function that groups in DuckDB and returns a DataFrame (or a few), so no caller pulls a whole table
into pandas. The runner, the CLI and the dashboard read through these; the store only writes.

    from evaluators.storage import queries
    queries.runs.catalog(db)    queries.items.item_detail(db, run, item)    queries.diagnosis.rule_counts(...)

- sql: what the reads share: the uncertainty band applied on read, thresholds, run tables;
- runs, items: a run and its items; diagnosis: Table 2 over run tables; compare: two runs side by side;
- trust: people's labels; ledger: the source ledger; trends: points over runs or time; grammar: GRAMMAR's.
"""

from evaluators.storage.queries import compare, diagnosis, grammar, items, ledger, runs, sql, trends, trust

__all__ = ["compare", "diagnosis", "grammar", "items", "ledger", "runs", "sql", "trends", "trust"]
