"""Each run's per-item score table (run_wide, migration 10): one row per item, one column per metric with
its two count columns and its expected value ("gr:ev", migration 12), rewritten for the items of every
write, so the dashboard reads a run of a million items without regrouping its scores. Metric ids become
SQL identifiers only through column().
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

# Statuses that are not a failure: scored, or the metric does not apply to this item.
NOT_FAILED = "('ok', 'not_applicable')"


def column(metric: str) -> str:
    """A metric id as a quoted SQL identifier; ids are lower-case words, anything else is refused."""
    if not metric or not all(ch.isalnum() or ch == "_" for ch in metric) or metric.lower() != metric:
        raise ValueError(f"not a metric id: {metric!r}")
    return f'"{metric}"'


def count_column(metric: str, count: str) -> str:
    """The quoted name of a run table's count column: '"gr:scored"' or '"gr:unsure"' (checked metric id)."""
    if count not in ("scored", "unsure"):
        raise ValueError(f"not a count column: {count!r}")
    return f'"{column(metric)[1:-1]}:{count}"'


def ev_column(metric: str) -> str:
    """The quoted name of a run table's expected-value column: '"gr:ev"' (checked metric id)."""
    return f'"{column(metric)[1:-1]}:ev"'


# A metric's columns in run_wide, with their types: its score, its two counts and its expected value.
def metric_columns(metric: str) -> list[tuple[str, str]]:
    """The quoted names and types of one metric's run_wide columns."""
    return [
        (column(metric), "DOUBLE"),
        (count_column(metric, "scored"), "INTEGER"),
        (count_column(metric, "unsure"), "INTEGER"),
        (ev_column(metric), "DOUBLE"),
    ]


def add_columns(con: Any, metrics: Sequence[str]) -> None:
    """Give run_wide the columns of these metrics that it lacks (empty for the rows it holds)."""
    present = {
        c
        for (c,) in con.execute("""SELECT column_name FROM duckdb_columns() WHERE database_name = current_database()
                                   AND schema_name = 'main' AND table_name = 'run_wide'""").fetchall()
    }
    for m in metrics:
        for name, kind in metric_columns(m):
            if name.strip('"') not in present:
                con.execute(f"ALTER TABLE run_wide ADD COLUMN {name} {kind}")


def wide_metrics(con: Any) -> list[str]:
    """The metrics run_wide has columns for."""
    names = [
        c
        for (c,) in con.execute("""SELECT column_name FROM duckdb_columns() WHERE database_name = current_database()
                                   AND schema_name = 'main' AND table_name = 'run_wide'""").fetchall()
    ]
    return [c for c in names if ":" not in c and c not in _WIDE_FIXED]


def is_metric_id(metric: str) -> bool:
    """Whether a stored metric id can become a column: a file from elsewhere may hold anything."""
    try:
        column(metric)
    except ValueError:
        return False
    return True


def wide_sql(metrics: Sequence[str], scores: str, items: str = "") -> str:
    """The per-item score table of run $run as SQL (run_scores_wide() describes its columns); `items`
    narrows it to some items: a condition on the column {id}, added to every scan."""
    cols = ",\n".join(
        f"max(value) FILTER (WHERE metric = '{m}' AND NOT isnan(value)) AS {column(m)}, "  # ids checked
        f"max(n_scored) FILTER (WHERE metric = '{m}') AS {count_column(m, 'scored')}, "
        f"max(coalesce(n_unsure, 0)) FILTER (WHERE metric = '{m}') AS {count_column(m, 'unsure')}, "
        f"max(expected) FILTER (WHERE metric = '{m}' AND NOT isnan(expected)) AS {ev_column(m)}"
        for m in metrics
    )
    mine, theirs = items.format(id="item_id"), items.format(id="i.item_id")
    return f"""
        WITH s AS (SELECT * FROM {scores} WHERE run_id = $run {mine}),
        wide AS (SELECT item_id{", " + cols if cols else ""} FROM s GROUP BY item_id),
        failed AS (SELECT item_id, string_agg(metric || ':' || status, ', ' ORDER BY metric) AS failed_metrics
                   FROM s WHERE status NOT IN {NOT_FAILED} GROUP BY item_id),
        verdicts_failed AS (SELECT item_id, count(*) AS n_failed FROM verdicts
                            WHERE run_id = $run {mine} AND status NOT IN {NOT_FAILED} GROUP BY item_id)
        SELECT i.item_id, left(i.query, 120) AS query, {"w.* EXCLUDE (item_id)," if cols else ""}
               coalesce(v.n_failed, 0) AS n_failed, coalesce(f.failed_metrics, '') AS failed_metrics
        FROM items i LEFT JOIN wide w ON w.item_id = i.item_id LEFT JOIN failed f ON f.item_id = i.item_id
        LEFT JOIN verdicts_failed v ON v.item_id = i.item_id
        WHERE i.run_id = $run {theirs} ORDER BY i.item_id"""


def written_ids(frames: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    """The item ids a write touched: those of its items, verdicts and scores rows."""
    return sorted(
        {
            i
            for table, frame in frames
            if table in ("items", "verdicts", "scores") and not frame.empty
            for i in frame["item_id"].unique()
        }
    )


_WIDE_FIXED = ("run_id", "item_id", "query", "n_failed", "failed_metrics")  # run_wide's own columns


_INLINE_IDS = 1000  # up to this many ids go into the SQL as constants (an index lookup), more as a joined frame


def refresh_wide(con: Any, run_id: str, item_ids: Sequence[str] | None = None) -> None:
    """Rewrite the run_wide rows of these items of a run (None: every item) from its stored items,
    scores and verdicts, inside the caller's transaction: run_wide equals run_scores_wide() after
    every write. A metric seen for the first time gets its columns; an id that is not a metric id
    (a file from elsewhere) gets none and stays in the scores table only."""
    if item_ids is not None and not item_ids:
        return
    params: dict[str, Any] = {"run": run_id}
    items = ""
    if item_ids is not None and len(item_ids) <= _INLINE_IDS:
        params.update({f"i{k}": i for k, i in enumerate(item_ids)})
        items = f"AND {{id}} IN ({', '.join(f'$i{k}' for k in range(len(item_ids)))})"
    elif item_ids is not None:
        con.register("_wide_ids", pd.DataFrame({"item_id": list(item_ids)}))
        items = "AND {id} IN (SELECT item_id FROM _wide_ids)"
    mine = items.format(id="item_id")
    try:
        found = [
            m
            for (m,) in con.execute(f"SELECT DISTINCT metric FROM scores WHERE run_id = $run {mine}", params).fetchall()
        ]
        metrics = [m for m in found if is_metric_id(m) and m not in _WIDE_FIXED]
        add_columns(con, metrics)
        con.execute(f"DELETE FROM run_wide WHERE run_id = $run {mine}", params)
        rows = wide_sql(metrics, "scores", items)
        con.execute(f"INSERT INTO run_wide BY NAME SELECT $run AS run_id, * FROM ({rows})", params)
    finally:
        if item_ids is not None and len(item_ids) > _INLINE_IDS:
            con.unregister("_wide_ids")
