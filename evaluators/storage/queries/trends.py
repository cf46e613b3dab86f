"""The trend reads (evaluators/metrics/trends.py computes from them): scored values grouped per run, or
per day or week of a timestamp in one run's items, and the paired deltas against a baseline run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.storage import store
from evaluators.storage.queries.sql import json_pointer, scores_sql


def _scored(relation: str) -> str:
    return f"SELECT metric, value, count(*) AS n FROM {relation} WHERE run_id = $run AND value IS NOT NULL AND NOT isnan(value)"


def trend_scores(
    path: str | Path, run_ids: Sequence[str], baseline: str | None = None, band: Band | None = None
) -> dict[str, pd.DataFrame]:
    """Per run (a trend point): its scored values grouped (dist: point, metric, value, n), its items
    (totals: point, n_items) and, against `baseline`, the per-item deltas of the items both scored
    (pairs: point, metric, delta rounded to 1e-3, n), all at the band."""
    dist, totals, pairs = [], [], []
    relation = scores_sql(band)
    with store.reading(path):
        for run in run_ids:
            ids = {"run": run}
            dist.append(store.query(path, f"SELECT $run AS point, * FROM ({_scored(relation)} GROUP BY ALL)", ids))
            totals.append(
                store.query(path, "SELECT $run AS point, count(*) AS n_items FROM items WHERE run_id = $run", ids)
            )
            if baseline is not None and run != baseline:
                # the same generated relation twice, one for each run: the baseline's reads $base
                pairs.append(
                    store.query(
                        path,
                        f"""
                    SELECT $run AS point, a.metric, round(b.value - a.value, 3) AS delta, count(*) AS n
                    FROM (SELECT * FROM {relation.replace("$run", "$base")}) a
                         JOIN (SELECT * FROM {relation}) b USING (item_id, metric)
                    WHERE a.run_id = $base AND b.run_id = $run AND NOT isnan(a.value) AND NOT isnan(b.value)
                    GROUP BY ALL""",
                        {"run": run, "base": baseline},
                    )
                )
    empty = pd.DataFrame(columns=["point", "metric", "delta", "n"])
    return {
        "dist": pd.concat(dist, ignore_index=True),
        "totals": pd.concat(totals, ignore_index=True),
        "pairs": pd.concat(pairs, ignore_index=True) if pairs else empty,
    }


def _timestamp_sql(value: str) -> str:
    """A metadata value as a UTC TIMESTAMP: ISO text (an offset or Z converted to UTC, none read as is),
    or a number of seconds (milliseconds from 1e11 up) since the epoch; NULL otherwise. Numbers below
    1e8 (before 1973) are counts, not timestamps, and past 1e15 no time at all (inf, nan, 1e400)."""
    number = f"TRY_CAST({value} AS DOUBLE)"
    # A time starts with a digit: a word ('epoch', 'infinity', a topic) is refused before any cast, and a
    # failed cast is what costs most over a million values.
    return (
        f"CASE WHEN NOT regexp_matches({value}, '^\\s*\\d') THEN NULL "
        f"WHEN regexp_matches({value}, '(Z|[+-]\\d\\d:?\\d\\d)$') "
        f"THEN TRY_CAST({value} AS TIMESTAMPTZ) AT TIME ZONE 'UTC' "
        f"WHEN {number} BETWEEN 1e8 AND 1e15 THEN make_timestamp((CASE WHEN {number} >= 1e11 THEN {number} * 1e3 "
        f"ELSE {number} * 1e6 END)::BIGINT) WHEN {number} IS NULL THEN TRY_CAST({value} AS TIMESTAMP) END"
    )


def trend_buckets(
    path: str | Path, run_id: str, key: str, unit: str, band: Band | None = None
) -> dict[str, pd.DataFrame]:
    """One run's items bucketed by the metadata timestamp `key`, truncated to `unit` ('day' or 'week',
    weeks start on Monday): dist (point 'YYYY-MM-DD', metric, value, n) and totals (point, n_items),
    where point NULL counts the items without a readable timestamp."""
    if unit not in ("day", "week"):
        raise ValueError(f"unit must be day or week, got {unit!r}")
    params = {"run": run_id, "key": json_pointer(key)}
    # One query, its buckets read once: reading every item's timestamp is most of its cost.
    both = store.query(
        path,
        f"""WITH buckets AS MATERIALIZED (
            SELECT item_id, strftime(date_trunc('{unit}', {_timestamp_sql("v")}), '%Y-%m-%d') AS point
            FROM (SELECT item_id, json_extract_string(metadata, $key) AS v FROM items WHERE run_id = $run))
        SELECT true AS dist, b.point, s.metric, s.value, count(*) AS n FROM {scores_sql(band)} s JOIN buckets b USING (item_id)
        WHERE s.run_id = $run AND b.point IS NOT NULL AND s.value IS NOT NULL AND NOT isnan(s.value)
        GROUP BY ALL
        UNION ALL
        SELECT false, point, NULL, NULL, count(*) FROM buckets GROUP BY ALL""",
        params,
    )
    dist = both[both["dist"]].sort_values("point", kind="stable")[["point", "metric", "value", "n"]]
    totals = both[~both["dist"]].sort_values("point", na_position="last")[["point", "n"]]
    return {
        "dist": dist.reset_index(drop=True),
        "totals": totals.rename(columns={"n": "n_items"}).reset_index(drop=True),
    }
