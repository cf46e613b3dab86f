"""Reads of runs: the catalog, a run's summary at a band, its per-item score table, its metadata, its
imported peer scores, what resuming it needs (the items done, the judge's cache), and the run a page
opens on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence, cast

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.core.records import JudgeCall, Status
from evaluators.metrics.registry import THELMA, order_metrics
from evaluators.storage import store, wide
from evaluators.storage.ownership import RUN_STATUS_SQL
from evaluators.storage.queries.sql import ids_sql, json_pointer, rows, run_columns, scores_sql, unsure_sql
from evaluators.storage.store import FAILED_STATUSES
from evaluators.storage.wide import NOT_FAILED


def runs(path: str | Path) -> pd.DataFrame:
    """All runs with their item counts, newest first; a run whose process died reads `interrupted`. `who`:
    who started it, or for a run imported from a run file who imported it and when, beside what the file
    claims ("imported by ana@example.com on 2026-12-07 19:02; written as ci@example.com in the file")."""
    return store.query(
        path,
        f"""
        SELECT r.run_id, r.judge, {RUN_STATUS_SQL} AS status, r.n_items,
               (SELECT count(*) FROM items i WHERE i.run_id = r.run_id) AS n_done,
               r.created_at, r.finished_at, r.prompt_hashes, r.params, r.stats, r.error, r.started_by,
               CASE WHEN m.run_id IS NULL THEN r.started_by
                    ELSE concat_ws('; ', 'imported by ' || m.imported_by || ' on ' || strftime(m.imported_at, '%Y-%m-%d %H:%M'),
                                   nullif(r.started_by, '')) END AS who
        FROM runs r LEFT JOIN run_imports m USING (run_id) ORDER BY r.created_at DESC""",
    )


def catalog(path: str | Path) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """All runs (newest first, as runs() lists them) and, per run, its metric ids in display order."""
    with store.reading(path):
        frame = runs(path)
        pairs = store.query(path, "SELECT DISTINCT run_id, metric FROM scores")
    metrics = {
        str(run): order_metrics(m for m in group["metric"] if wide.is_metric_id(m))
        for run, group in pairs.groupby("run_id")
    }
    return frame, metrics


def run_summary(
    path: str | Path, run_id: str, band: Band | None = None, corrected: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A run's summary at the band, from one pass over its scores (a million items: 7M scores, which
    a recomputed band also builds once) and one over its failed or unsure verdicts:

    - overview, per metric: n_items (items in the run), n_scored, n_unsure and the mean score;
    - dist: the scored values per metric with their counts (exact values, grouped): histograms, the
      share below any threshold and the bootstrap all come from this one small table;
    - fails: failures per metric and status, of items (scores) and of verdicts: metric, grain, status,
      n; unsure scores and verdicts at the band count here too, as status 'unsure'.
    """
    ids = {"run": run_id}
    with store.reading(path):
        groups = store.query(
            path,
            f"""
            SELECT metric, value, status, count(*) AS n, (SELECT count(*) FROM items WHERE run_id = $run) AS n_items
            FROM {scores_sql(band, corrected)} WHERE run_id = $run GROUP BY metric, value, status""",
            ids,
        )
        verdict_fails = store.query(
            path,
            f"""
            SELECT metric, 'verdicts' AS grain, CASE WHEN {unsure_sql(band)} THEN 'unsure' ELSE status END AS status,
                   count(*) AS n FROM verdicts
            WHERE run_id = $run AND (status NOT IN {NOT_FAILED} OR {unsure_sql(band)}) GROUP BY ALL""",
            ids,
        )
    scored = groups[groups["value"].notna()]  # NULL and NaN both read NaN here: neither is scored
    n_items = int(groups["n_items"].iloc[0]) if len(groups) else 0
    by_metric = groups.groupby("metric")
    overview = pd.DataFrame(
        {
            "n_items": n_items,
            "n_scored": scored.groupby("metric")["n"].sum(),
            "n_unsure": groups[groups["status"] == "unsure"].groupby("metric")["n"].sum(),
            "mean": (scored["value"] * scored["n"]).groupby(scored["metric"]).sum()
            / scored.groupby("metric")["n"].sum(),
        },
        index=by_metric.size().index,
    )
    overview = overview.fillna({"n_scored": 0, "n_unsure": 0}).astype({"n_scored": int, "n_unsure": int})
    dist = cast(pd.DataFrame, scored.groupby(["metric", "value"], as_index=False)["n"].sum()).sort_values(
        ["metric", "value"], ignore_index=True
    )
    item_fails = (
        groups[~groups["status"].isin(["ok", "not_applicable"])]
        .groupby(["metric", "status"], as_index=False)["n"]
        .sum()
        .assign(grain="items")
    )
    fails = pd.concat([item_fails[["metric", "grain", "status", "n"]], verdict_fails], ignore_index=True).sort_values(
        ["metric", "grain", "status"], ignore_index=True
    )
    return overview.rename_axis("metric").reset_index(), dist, fails


def run_scores_wide(path: str | Path, run_id: str, metrics: Sequence[str], scores: str = "scores") -> pd.DataFrame:
    """One row per item of a run, grouped in DuckDB: item_id, a query snippet, one column per metric
    (THELMA's seven always, then `metrics`; NULL when unscored, NaN included), its counts "m:scored"
    and "m:unsure" (verdicts behind the score: the quiet diagnosis reads them), n_failed (failed
    verdicts) and failed_metrics (the unscored metrics with their status: 'gr:timeout, sqc:unsure').

    `scores` is the relation the scores come from: the stored table (the default band), or
    sql.scores_sql(band), the same columns recomputed from the verdicts at another band ($run).
    The CLI's export and diagnosis read it; the dashboard reads run_table(), the same table kept
    stored for the default band.
    """
    return store.query(path, wide.wide_sql(run_columns(metrics), scores), {"run": run_id})


def run_table(path: str | Path, run_id: str, metrics: Sequence[str], scores: str = "scores") -> pd.DataFrame:
    """run_scores_wide()'s table for the dashboard, fetched through Arrow (a million rows in a tenth of
    a second, where building Python rows takes seconds): from the stored run_wide at the default band,
    recomputed from the verdicts for another relation `scores`. Columns as run_scores_wide(); numbers
    come as floats, NULL as NaN or None: the dashboard queries it again in DuckDB (frame_query)."""
    if scores != "scores":
        return store.query(path, wide.wide_sql(run_columns(metrics), scores), {"run": run_id}, arrow=True)
    return store.frame_query(
        "SELECT * FROM stored ORDER BY item_id", {"stored": stored_table(path, run_id, metrics)}, arrow=True
    )


def stored_table(path: str | Path, run_id: str, metrics: Sequence[str]) -> store.StoredRun:
    """A run's stored per-item score table (the default band) as a relation the run-table reads query in
    the file, with run_table()'s columns for these metrics."""
    return store.StoredRun(str(path), run_id, tuple(run_columns(metrics)))


def metadata_keys(path: str | Path, run_id: str) -> list[str]:
    """The metadata field names used by a run's items."""
    frame = store.query(
        path,
        """SELECT DISTINCT unnest(json_keys(metadata)) AS k FROM items
                                 WHERE run_id = ? ORDER BY k LIMIT 100""",
        [run_id],
    )
    return list(frame["k"])


def metadata_values(path: str | Path, run_id: str, key: str, limit: int = 200) -> pd.DataFrame:
    """The most common values of one metadata field, with counts."""
    return store.query(
        path,
        f"""
        SELECT value, count(*) AS n
        FROM (SELECT json_extract_string(metadata, ?) AS value FROM items WHERE run_id = ?)
        WHERE value IS NOT NULL GROUP BY value ORDER BY n DESC, value LIMIT {int(limit)}""",
        [json_pointer(key), run_id],
    )


def _grammar_cte(path: str | Path) -> str:
    """`grammar`: the GRAMMAR robustness runs, whose items carry `grammar_group` or which have GRAMMAR
    correctness stored (a file written before that table has none of the latter)."""
    has_grammar = store.query(
        path, "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'grammar_correctness'"
    )["n"].iloc[0]
    return f"""WITH grammar AS (
        SELECT run_id FROM (SELECT run_id, any_value(metadata) AS m FROM items GROUP BY run_id)
        WHERE json_exists(m, '$.grammar_group')
        {"UNION SELECT run_id FROM grammar_correctness" if has_grammar else ""})"""


def thelma_runs(path: str | Path) -> list[str]:
    """Runs with THELMA scores that are not GRAMMAR robustness runs (_grammar_cte), newest first: where a
    first visit should land."""
    with store.reading(path):
        frame = store.query(
            path,
            f"""{_grammar_cte(path)}
            SELECT r.run_id FROM runs r
            WHERE r.run_id IN (SELECT run_id FROM scores WHERE metric IN {ids_sql(THELMA)})
              AND r.run_id NOT IN (SELECT run_id FROM grammar)
            ORDER BY r.created_at DESC, r.run_id""",
        )
    return list(frame["run_id"])


def robustness_runs(path: str | Path) -> list[str]:
    """The GRAMMAR robustness runs (_grammar_cte), newest first: the home page lists them apart."""
    with store.reading(path):
        frame = store.query(
            path,
            f"""{_grammar_cte(path)}
            SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM grammar) ORDER BY created_at DESC, run_id""",
        )
    return list(frame["run_id"])


def sharing_items(path: str | Path, run_id: str) -> list[str]:
    """The other runs that hold an item id of `run_id`'s, newest first: a comparison needs shared items."""
    frame = store.query(
        path,
        """SELECT run_id FROM runs WHERE run_id <> $run
             AND run_id IN (SELECT DISTINCT run_id FROM items
                            WHERE item_id IN (SELECT item_id FROM items WHERE run_id = $run))
           ORDER BY created_at DESC, run_id""",
        {"run": run_id},
    )
    return list(frame["run_id"])


def imported_summary(path: str | Path, run_id: str) -> pd.DataFrame:
    """Per imported peer score (origin, metric): its mean over the items that have one, n_scored of
    n_total (the run's items). Kept apart from our metrics: nothing else reads this table."""
    return store.query(
        path,
        """
        SELECT s.origin, s.metric, avg(s.value) AS mean, count(s.value) AS n_scored,
               (SELECT count(*) FROM items WHERE run_id = $run) AS n_total
        FROM imported_scores s JOIN items i ON i.run_id = s.run_id AND i.item_id = s.item_id
        WHERE s.run_id = $run GROUP BY s.origin, s.metric ORDER BY s.origin, s.metric""",
        {"run": run_id},
    )


def run_exists(path: str | Path, run_id: str) -> bool:
    """Whether the database holds a run of this name (False when the file does not exist yet, or has no
    schema yet: evaluating creates it)."""
    if not Path(path).exists():
        return False
    with store.reading(path):
        if not store.query(path, "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'runs'")[
            "n"
        ].iloc[0]:
            return False
        return bool(store.query(path, "SELECT count(*) AS n FROM runs WHERE run_id = ?", [run_id])["n"].iloc[0] > 0)


def count_items(path: str | Path, run_id: str) -> int:
    """How many items of a run are stored."""
    return int(store.query(path, "SELECT count(*) AS n FROM items WHERE run_id = ?", [run_id])["n"].iloc[0])


def done_item_ids(path: str | Path, run_id: str) -> set[str]:
    """Ids of the items of a run that are completely written."""
    if not Path(path).exists():
        return set()
    frame = store.query(path, "SELECT item_id FROM items WHERE run_id = ?", [run_id])
    return set(frame["item_id"])


def run_metric_ids(path: str | Path, run_id: str) -> set[str]:
    """The metric ids a run has scores for."""
    return set(store.query(path, "SELECT DISTINCT metric FROM scores WHERE run_id = ?", [run_id])["metric"])


def score_status_counts(path: str | Path, run_id: str) -> pd.DataFrame:
    """Scores of a run counted by metric and status: columns metric, status, n."""
    return store.query(
        path,
        """
        SELECT metric, status, count(*) AS n FROM scores WHERE run_id = ?
        GROUP BY metric, status ORDER BY metric, status""",
        [run_id],
    )


def failed_steps(path: str | Path, run_id: str) -> tuple[dict[str, int], int]:
    """A run's failed judge steps: verdicts counted by failure status, and the items with any failure."""
    failed = f"status IN {FAILED_STATUSES}"
    steps = store.query(
        path, f"SELECT status, count(*) AS n FROM verdicts WHERE run_id = ? AND {failed} GROUP BY status", [run_id]
    )
    items = store.query(
        path,
        f"""SELECT count(*) AS n FROM (
        SELECT item_id FROM verdicts WHERE run_id = $run AND {failed}
        UNION SELECT item_id FROM scores WHERE run_id = $run AND {failed})""",
        {"run": run_id},
    )
    return {r.status: int(r.n) for r in rows(steps)}, int(items["n"].iloc[0])


def verdicts_by_tier(path: str | Path, run_id: str) -> dict[str, int]:
    """A run's decided (ok) verdicts counted by the tier that decided them."""
    frame = store.query(
        path,
        """SELECT tier, count(*) AS n FROM verdicts
                                 WHERE run_id = ? AND status = 'ok' AND tier IS NOT NULL GROUP BY tier""",
        [run_id],
    )
    return {row.tier: int(row.n) for row in rows(frame)}


def load_cache(path: str | Path, model: str) -> dict[str, JudgeCall]:
    """Every call of `model` this database made that got a reply: the request cache, keyed by call key.
    Calls imported with a run file are not in it: a file from elsewhere never answers our evaluations."""
    if not Path(path).exists():
        return {}
    frame = store.query(
        path,
        """
        SELECT key, model, prompt_name, prompt_hash, params, reply, status,
               prompt_tokens, completion_tokens, cost, latency_ms, error
        FROM judge_calls WHERE model = ? AND reply IS NOT NULL AND imported_for IS NULL""",
        [model],
    )
    cache: dict[str, JudgeCall] = {}
    for row in rows(frame):
        cache[row.key] = JudgeCall(
            key=row.key,
            model=row.model,
            prompt_name=row.prompt_name,
            prompt_hash=row.prompt_hash,
            messages=[],
            params=json.loads(row.params),
            reply=row.reply,
            status=Status(row.status),
            prompt_tokens=int(row.prompt_tokens),
            completion_tokens=int(row.completion_tokens),
            cost=None if pd.isna(row.cost) else float(row.cost),
            latency_ms=float(row.latency_ms),
            error=row.error,
        )
    return cache


def row_counts(
    path: str | Path, tables: Sequence[str] = ("items", "components", "verdicts", "judge_calls")
) -> dict[str, int]:
    """Rows per table, for reports on a database's size."""
    unknown = set(tables) - {"runs", "items", "components", "verdicts", "scores", "judge_calls", "triage"}
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}")
    row = store.query(path, "SELECT " + ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in tables)).iloc[0]
    return {t: int(row[t]) for t in tables}
