"""Reads of people's labels of the judge, and of what the review queue picks from: rule labels, verdict
corrections, confirmed or false-alarm notes, unsure verdicts, thin evidence and score midpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Sequence

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.metrics.diagnosis import CONDITIONS, READINGS
from evaluators.storage import store
from evaluators.storage.queries.diagnosis import rule_sql
from evaluators.storage.queries.sql import RunTable, ids_frame, unsure_sql
from evaluators.storage.wide import NOT_FAILED, column, count_column


def rule_labels(path: str | Path, run_id: str) -> pd.DataFrame:
    """The latest rule label per (item, rule), as saved: item_id, rule, label, origin, author, created_at.

    Triage notes become rule labels in trust.rule_pairs, which knows which rules fire.
    """
    return store.query(
        path,
        """
        SELECT item_id, rule, arg_max(label, created_at) AS label, arg_max(origin, created_at) AS origin,
               arg_max(author, created_at) AS author, max(created_at) AS created_at
        FROM labels WHERE run_id = ? AND rule IS NOT NULL
        GROUP BY item_id, rule ORDER BY item_id, rule""",
        [run_id],
    )


def triage_verdicts(path: str | Path, run_id: str) -> pd.DataFrame:
    """The latest confirmed / false-alarm triage note per item: item_id, label (1 confirmed, 0 false alarm)."""
    return store.query(
        path,
        """
        SELECT item_id, arg_max(CASE label WHEN 'confirmed' THEN 1 ELSE 0 END, created_at) AS label
        FROM triage WHERE run_id = ? AND label IN ('confirmed', 'false alarm')
        GROUP BY item_id ORDER BY item_id""",
        [run_id],
    )


def verdict_corrections(path: str | Path, run_id: str, band: Band | None = None) -> pd.DataFrame:
    """The latest correction per (item, metric, component) beside the judge's call on it at `band`.

    Columns item_id, metric, component_idx, label, judge, unsure, note, author, created_at. `judge` is
    the component's value from the verdicts the judge was sure of (p outside the band; for SQC, 1 when
    any source or the whole set surely covers the sub-question); NULL when the judge was unsure of it
    (`unsure` is then true: p inside the band and no sure 1, as SQC folds), when a verdict it depends
    on failed, or when the component no longer exists.
    """
    unsure = unsure_sql(band)
    return store.query(
        path,
        f"""
        WITH latest AS (
            SELECT item_id, metric, component_idx, arg_max(label, created_at) AS label,
                   arg_max(note, created_at) AS note, arg_max(author, created_at) AS author,
                   max(created_at) AS created_at
            FROM labels WHERE run_id = $run AND metric IS NOT NULL GROUP BY ALL),
        judged AS (
            SELECT item_id, metric, component_idx,
                   coalesce(bool_or(status = 'ok' AND NOT {unsure} AND value = 1), FALSE) AS sure_one,
                   count(*) FILTER (WHERE status NOT IN {NOT_FAILED}) AS n_failed,
                   count(*) FILTER (WHERE {unsure}) AS n_unsure,
                   count(*) FILTER (WHERE status = 'ok') AS n_ok
            FROM verdicts WHERE run_id = $run AND component_idx >= 0
                                AND item_id IN (SELECT item_id FROM latest) GROUP BY ALL)
        SELECT l.item_id, l.metric, l.component_idx, l.label,
               CASE WHEN j.sure_one THEN 1 WHEN j.n_failed = 0 AND j.n_unsure = 0 AND j.n_ok > 0 THEN 0 END AS judge,
               coalesce(NOT j.sure_one AND j.n_unsure > 0, FALSE) AS unsure, l.note, l.author, l.created_at
        FROM latest l LEFT JOIN judged j USING (item_id, metric, component_idx)
        ORDER BY l.item_id, l.metric, l.component_idx""",
        {"run": run_id},
    )


def label_targets(path: str | Path, run_id: str) -> tuple[set[str], set[tuple[str, str, int]]]:
    """What labels of this run may name: its item ids, and its (item, metric, component) triples."""
    with store.reading(path):
        items = store.query(path, "SELECT item_id FROM items WHERE run_id = ?", [run_id])
        parts = store.query(
            path,
            """SELECT DISTINCT item_id, metric, component_idx FROM verdicts
                                     WHERE run_id = ? AND component_idx >= 0""",
            [run_id],
        )
    return set(items["item_id"]), set(parts.itertuples(index=False, name=None))


def unsure_counts(
    path: str | Path, run_id: str, band: Band | None = None, skip: Sequence[str] = (), limit: int | None = None
) -> pd.DataFrame:
    """Items with verdicts unsure at `band` (unsure_sql): item_id, n_unsure, most unsure first;
    leaving out the items in `skip`, at most `limit` of them (None: all)."""
    return store.query(
        path,
        f"""
        SELECT item_id, count(*) AS n_unsure FROM verdicts
        WHERE run_id = ? AND {unsure_sql(band)} AND NOT list_contains(?::VARCHAR[], item_id)
        GROUP BY item_id ORDER BY n_unsure DESC, min(abs(p - 0.5)), item_id
        {"" if limit is None else f"LIMIT {int(limit)}"}""",
        [run_id, list(skip)],
    )


def run_rows(table: RunTable, item_ids: Sequence[str]) -> pd.DataFrame:
    """The rows of a run table for these items (those that are in the run), by id: a lookup by key."""
    return store.frame_query(
        "SELECT * FROM wide WHERE item_id IN (SELECT item_id FROM ids) ORDER BY item_id",
        {"wide": table, "ids": ids_frame(item_ids)},
    )


def score_midpoints(table: RunTable, metrics: Sequence[str]) -> pd.DataFrame:
    """Per metric, the midpoints between its consecutive distinct scores in a run table (the threshold
    candidates of trust.suggest_threshold), only the least and greatest of each 0.0001-wide bucket:
    rounded to 4 places they give the same set, and a million items give at most 20,002 rows.
    Columns metric, midpoint."""
    if not metrics:
        return pd.DataFrame({"metric": [], "midpoint": []})
    cols = ", ".join(column(m) for m in metrics)
    return store.frame_query(
        f"""
        WITH v AS (UNPIVOT (SELECT {cols} FROM wide) ON {cols} INTO NAME metric VALUE value),
        d AS (SELECT DISTINCT metric, value::DOUBLE AS value FROM v WHERE NOT isnan(value)),
        m AS (SELECT metric, (value + lead(value) OVER (PARTITION BY metric ORDER BY value)) / 2 AS mid FROM d),
        b AS (SELECT metric, min(mid) AS lo, max(mid) AS hi FROM m WHERE mid IS NOT NULL
              GROUP BY metric, floor(mid * 10000))
        SELECT metric, lo AS midpoint FROM b UNION SELECT metric, hi FROM b ORDER BY metric, midpoint""",
        {"wide": table},
    )


def thin_items(
    table: RunTable, thresholds: Mapping[str, float], thin: int, skip: Sequence[str], limit: int
) -> pd.DataFrame:
    """Items of a run table where a Table-2 rule fires on thin evidence: a metric the rule reads
    (through a reading too) has a score from `thin` scored verdicts or fewer. Their rows by id, leaving
    out the items in `skip`, at most `limit`: labelling.review_queue's second reason."""

    def weak(m: str) -> str:
        return f"({column(m)} IS NOT NULL AND NOT isnan({column(m)}) AND {count_column(m, 'scored')} <= {int(thin)})"

    cases = " OR ".join(
        f"({rule_sql(r, thresholds)} AND ("
        + " OR ".join(weak(m) for m in dict.fromkeys(m for name, _ in conds for m in READINGS.get(name, (name,))))
        + "))"
        for r, conds in CONDITIONS.items()
    )
    return store.frame_query(
        f"""SELECT * FROM wide WHERE ({cases}) AND item_id NOT IN (SELECT item_id FROM skip)
                                 ORDER BY item_id LIMIT {int(limit)}""",
        {"wide": table, "skip": ids_frame(skip)},
    )


def count_items(table: RunTable, skip: Sequence[str]) -> int:
    """The number of items in a run table, leaving out those in `skip`."""
    frame = store.frame_query(
        "SELECT count(*) AS n FROM wide WHERE item_id NOT IN (SELECT item_id FROM skip)",
        {"wide": table, "skip": ids_frame(skip)},
    )
    return int(frame["n"].iloc[0])


def items_at(table: RunTable, skip: Sequence[str], ranks: Sequence[int]) -> dict[int, str]:
    """The items of a run table at these ranks (0 first) in id order, leaving out those in `skip`:
    {rank: item_id}. Picks from a seeded shuffle of the ranks, without sending every id to Python."""
    frame = store.frame_query(
        """
        SELECT rank, item_id FROM (SELECT item_id, row_number() OVER (ORDER BY item_id) - 1 AS rank FROM wide
                                   WHERE item_id NOT IN (SELECT item_id FROM skip))
        WHERE rank IN (SELECT rank FROM ranks)""",
        {"wide": table, "skip": ids_frame(skip), "ranks": pd.DataFrame({"rank": list(ranks)}, dtype="int64")},
    )
    return dict(zip(frame["rank"].astype(int), frame["item_id"]))


def labelled_items(path: str | Path, run_id: str) -> list[str]:
    """Items of a run that carry a label or a confirmed / false-alarm triage note."""
    frame = store.query(
        path,
        """
        SELECT item_id FROM labels WHERE run_id = $run
        UNION SELECT item_id FROM triage WHERE run_id = $run AND label IN ('confirmed', 'false alarm')""",
        {"run": run_id},
    )
    return sorted(frame["item_id"])


def run_labels(path: str | Path, run_id: str) -> pd.DataFrame:
    """Every label saved on a run, oldest first, in the columns a labels file is imported from:
    item_id, rule, metric, component, label, note, author, origin, created_at."""
    return store.query(
        path,
        """
        SELECT item_id, rule, metric, component_idx AS component, label, note, author, origin, created_at
        FROM labels WHERE run_id = ? ORDER BY created_at, item_id""",
        [run_id],
    )
