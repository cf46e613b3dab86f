"""The dashboard's reads: named queries that return DataFrames, run through evaluators/store.py.

Every grouping happens here in SQL, so a page never pulls a whole table into pandas. Two kinds:
- file reads (path first): they run on store.query(), so reads inside store.reading() share one
  read-only connection;
- reads over run tables (one row per item, one column per metric): filters and pages, Table 2,
  samples, correlations and Compare, answered by store.frame_query() over a RunTable: the run's
  stored table in the file (store.StoredRun, the default band: a million items stay in DuckDB and
  only the answer comes back) or a table recomputed at another band (a DataFrame, in memory).
Metric ids become SQL identifiers only through store.column(), which checks them; thresholds are
checked finite floats; every other value is a query parameter.
"""
from __future__ import annotations

import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from evaluators.core.confidence import DEFAULT_BANDS, LABEL, Band, band_for
from evaluators.core.records import Score, Status
from evaluators.judges import registry
from evaluators.metrics import ledger
from evaluators.metrics.diagnosis import (
    CONDITIONS,
    DEFAULT_THRESHOLDS,
    LEVELS,
    MAX_UNSURE_SHARE,
    MIN_SCORED,
    READINGS,
    RULES,
)
from evaluators.metrics.suites import reference
from evaluators.metrics.thelma import aggregate_coverage, aggregate_mean
from evaluators.storage import store
from evaluators.storage.store import NOT_FAILED, column, count_column
from evaluators.vocabulary import THELMA, order_metrics

_DEFAULT_THRESHOLD = 0.5
# How scores_sql() recomputes a metric at another band: the mean of its verdicts, SQC's coverage
# (folded per sub-question) or the F1 of two means (ref_f1); any other aggregate keeps its stored score.
MEAN_METRICS = tuple(m for m, spec in registry.METRICS.items() if spec.aggregate is aggregate_mean)
COVERAGE_METRICS = tuple(m for m, spec in registry.METRICS.items() if spec.aggregate is aggregate_coverage)
F1_METRICS = tuple(m for m, spec in registry.METRICS.items() if spec.aggregate is reference.aggregate_f1)
_SQL_OPERATORS = {operator.lt: "<", operator.ge: ">="}
RunTable = pd.DataFrame | store.StoredRun  # a run table: stored in the file, or recomputed in memory


# ---------------------------------------------------------------- the band, applied on read

def _literal(x: float) -> str:
    return f"{float(x)!r}::DOUBLE"


def unsure_sql(band: Band | None = None) -> str:
    """metrics.is_unsure_verdict over a verdicts row (status, value, p, p_kind) as SQL: TRUE when the
    verdict is unsure at `band` (None: each kind's default band), FALSE otherwise, never NULL."""
    kinds = " ".join(f"WHEN '{kind}' THEN p > {_literal(lo)} AND p < {_literal(hi)}"
                     for kind in DEFAULT_BANDS if kind != LABEL for lo, hi in [band_for(kind, band)])
    return (f"(status = 'ok' AND value IN (0, 1) AND p IS NOT NULL "
            f"AND coalesce(CASE p_kind {kinds} ELSE FALSE END, FALSE))")


def _names(metrics: Sequence[str]) -> str:
    return "(" + ", ".join(f"'{column(m)[1:-1]}'" for m in metrics) + ")" if metrics else "(NULL)"


def scores_sql(band: Band | None = None, corrected: bool = False) -> str:
    """The scores of run $run recomputed from its verdicts at `band`, as a relation with the scores
    table's columns: metrics.aggregate() in one generated SQL (tests/test_queries.py holds them equal).

    None reads the stored table, which the runner wrote at the default bands. Metrics whose aggregate
    is a mean, SQC's coverage or ref_f1's F1 are recomputed; any other (a rank-weighted precision, a
    metric this version does not know) keeps its stored score. Unsure verdicts are left out like
    failures; a score with nothing scored reads `unsure` when any verdict was unsure, else its most
    common failure (an F1: as reference.aggregate_f1 reads its two sides).
    `corrected`: every verdict of a component people corrected (the latest label) takes their value
    as a decided verdict (labelling.corrected_verdicts in Python); the raw scores never change.
    """
    if band is None and not corrected:
        return "scores"
    mean, cover, f1 = list(MEAN_METRICS), list(COVERAGE_METRICS), list(F1_METRICS)
    failure = "first(state ORDER BY n DESC, state) FILTER (WHERE state NOT IN ('ok', 'unsure'))"
    # A mean's columns from per-state counts: value, n_scored, n_total, n_unsure and status.
    mean_of = f"""sum(total) FILTER (WHERE state = 'ok') / sum(n) FILTER (WHERE state = 'ok') AS value,
                  coalesce(sum(n) FILTER (WHERE state = 'ok'), 0) AS n_scored, sum(n) AS n_total,
                  coalesce(sum(n) FILTER (WHERE state = 'unsure'), 0) AS n_unsure,
                  CASE WHEN sum(n) FILTER (WHERE state = 'ok') > 0 THEN 'ok'
                       WHEN sum(n) FILTER (WHERE state = 'unsure') > 0 THEN 'unsure'
                       ELSE coalesce({failure}, 'empty') END AS status"""
    recall_kinds = ", ".join(f"'{k}'" for k in reference.RECALL_KINDS)
    judged = f"""SELECT item_id, metric, component_kind, component_idx, value,
                   CASE WHEN status <> 'ok' THEN status WHEN {unsure_sql(band)} THEN 'unsure' ELSE 'ok' END AS state
            FROM verdicts WHERE run_id = $run AND metric IN {_names(mean + cover + f1)}"""
    if corrected:
        judged = f"""SELECT j.item_id, j.metric, j.component_kind, j.component_idx,
                   coalesce(c.label::DOUBLE, j.value) AS value,
                   CASE WHEN c.label IS NOT NULL THEN 'ok' ELSE j.state END AS state
            FROM ({judged}) j LEFT JOIN (
                SELECT item_id, metric, component_idx, arg_max(label, created_at) AS label FROM labels
                WHERE run_id = $run AND metric IS NOT NULL GROUP BY ALL) c USING (item_id, metric, component_idx)"""
    return f"""(WITH v AS ({judged}),
        -- SQC folds each sub-question first: a confident 1 covers; all confident: 0; else unsure or failed
        per_state AS (SELECT item_id, metric, component_idx, state, count(*) AS n, bool_or(value = 1) AS has_one
                      FROM v WHERE metric IN {_names(cover)} GROUP BY ALL),
        folded AS (SELECT item_id, metric,
                          CASE WHEN bool_or(state = 'ok' AND has_one) THEN 1.0
                               WHEN bool_and(state = 'ok') THEN 0.0 END AS value,
                          CASE WHEN bool_or(state = 'ok' AND has_one) OR bool_and(state = 'ok') THEN 'ok'
                               WHEN bool_or(state = 'unsure') THEN 'unsure' ELSE {failure} END AS state
                   FROM per_state GROUP BY item_id, metric, component_idx),
        units AS (SELECT item_id, metric, value, state FROM v WHERE metric IN {_names(mean)}
                  UNION ALL SELECT item_id, metric, value, state FROM folded),
        per_metric AS (SELECT item_id, metric, state, count(*) AS n, sum(value) AS total FROM units GROUP BY ALL),
        means AS (SELECT item_id, metric, {mean_of} FROM per_metric GROUP BY item_id, metric),
        -- ref_f1: a mean per side (the reference's claims, or the response's), then their F1; a side
        -- without a value leaves none, with its status (unsure first, then precision's)
        sides AS (SELECT item_id, metric, CASE WHEN component_kind IN ({recall_kinds}) THEN 'r' ELSE 'p' END AS side,
                         state, count(*) AS n, sum(value) AS total FROM v WHERE metric IN {_names(f1)} GROUP BY ALL),
        side_means AS (SELECT item_id, metric, side, {mean_of} FROM sides GROUP BY item_id, metric, side),
        pr AS (SELECT item_id, metric, any_value(value) FILTER (WHERE side = 'p') AS p,
                      any_value(value) FILTER (WHERE side = 'r') AS r,
                      coalesce(any_value(status) FILTER (WHERE side = 'p'), 'empty') AS p_status,
                      coalesce(any_value(status) FILTER (WHERE side = 'r'), 'empty') AS r_status,
                      sum(n_scored) AS n_scored, sum(n_total) AS n_total, sum(n_unsure) AS n_unsure
               FROM side_means GROUP BY item_id, metric),
        f1s AS (SELECT item_id, metric, CASE WHEN p + r = 0 THEN 0.0 ELSE 2 * p * r / (p + r) END AS value,
                       n_scored, n_total, n_unsure,
                       CASE WHEN p IS NOT NULL AND r IS NOT NULL THEN 'ok'
                            WHEN (p IS NULL AND p_status = 'unsure') OR (r IS NULL AND r_status = 'unsure') THEN 'unsure'
                            WHEN p IS NULL THEN p_status ELSE r_status END AS status FROM pr),
        banded AS (SELECT item_id, metric, value, n_scored, n_total, n_unsure, status FROM means
                   UNION ALL SELECT item_id, metric, value, n_scored, n_total, n_unsure, status FROM f1s)
        SELECT s.run_id, s.item_id, s.metric,
               CASE WHEN b.metric IS NULL THEN s.value ELSE b.value END AS value,
               CASE WHEN b.metric IS NULL THEN s.n_scored ELSE b.n_scored END::INTEGER AS n_scored,
               CASE WHEN b.metric IS NULL THEN s.n_total ELSE b.n_total END::INTEGER AS n_total,
               CASE WHEN b.metric IS NULL THEN s.status ELSE b.status END AS status,
               CASE WHEN b.metric IS NULL THEN coalesce(s.n_unsure, 0) ELSE b.n_unsure END::INTEGER AS n_unsure
        FROM scores s LEFT JOIN banded b ON b.item_id = s.item_id AND b.metric = s.metric
        WHERE s.run_id = $run) AS banded_scores"""


def decided_sql(metric: str) -> str:
    """diagnosis.decided() for one metric of a run table, as SQL over its count columns."""
    scored, unsure = count_column(metric, "scored"), count_column(metric, "unsure")
    return (f"({scored} >= {int(MIN_SCORED)} AND "
            f"{unsure} <= {_literal(MAX_UNSURE_SHARE)} * ({scored} + {unsure}))")


def wide_score(row: Mapping[str, Any], metric: str) -> Score | None:
    """One metric of a run table row as a Score with its counts (None when the item has no score row),
    for diagnosis.diagnose() and fired() in Python. The row does not carry failed verdicts, so n_total
    counts the verdicts the judge answered (scored and unsure)."""
    scored, unsure = row.get(f"{metric}:scored"), row.get(f"{metric}:unsure")
    if scored is None or scored != scored:
        return None
    value = row.get(metric)
    value = None if value is None or value != value else float(value)
    return Score(str(row["item_id"]), metric, value, int(scored), int(scored) + int(unsure),
                 Status.OK if value is not None else Status.UNSURE if unsure else Status.EMPTY, int(unsure))


# ---------------------------------------------------------------- reads of the database file

def catalog(path: str | Path) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """All runs (newest first, as store.runs() lists them) and, per run, its metric ids in display order."""
    with store.reading(path):
        frame = store.runs(path)
        pairs = store.query(path, "SELECT DISTINCT run_id, metric FROM scores")
    metrics = {run: order_metrics(m for m in group["metric"] if store.is_metric_id(m))
               for run, group in pairs.groupby("run_id")}
    return frame, metrics


def _json_pointer(key: str) -> str:
    """A JSON pointer to a top-level field: any key (quotes, dots, slashes) without quoting rules."""
    return "/" + key.replace("~", "~0").replace("/", "~1")


def run_summary(path: str | Path, run_id: str, band: Band | None = None,
                corrected: bool = False) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
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
        groups = store.query(path, f"""
            SELECT metric, value, status, count(*) AS n, (SELECT count(*) FROM items WHERE run_id = $run) AS n_items
            FROM {scores_sql(band, corrected)} WHERE run_id = $run GROUP BY metric, value, status""", ids)
        verdict_fails = store.query(path, f"""
            SELECT metric, 'verdicts' AS grain, CASE WHEN {unsure_sql(band)} THEN 'unsure' ELSE status END AS status,
                   count(*) AS n FROM verdicts
            WHERE run_id = $run AND (status NOT IN {NOT_FAILED} OR {unsure_sql(band)}) GROUP BY ALL""", ids)
    scored = groups[groups["value"].notna()]  # NULL and NaN both read NaN here: neither is scored
    n_items = int(groups["n_items"].iloc[0]) if len(groups) else 0
    by_metric = groups.groupby("metric")
    overview = pd.DataFrame({"n_items": n_items, "n_scored": scored.groupby("metric")["n"].sum(),
                             "n_unsure": groups[groups["status"] == "unsure"].groupby("metric")["n"].sum(),
                             "mean": (scored["value"] * scored["n"]).groupby(scored["metric"]).sum()
                             / scored.groupby("metric")["n"].sum()}, index=by_metric.size().index)
    overview = overview.fillna({"n_scored": 0, "n_unsure": 0}).astype({"n_scored": int, "n_unsure": int})
    dist = (scored.groupby(["metric", "value"], as_index=False)["n"].sum()
            .sort_values(["metric", "value"], ignore_index=True))
    item_fails = (groups[~groups["status"].isin(["ok", "not_applicable"])]
                  .groupby(["metric", "status"], as_index=False)["n"].sum().assign(grain="items"))
    fails = (pd.concat([item_fails[["metric", "grain", "status", "n"]], verdict_fails], ignore_index=True)
             .sort_values(["metric", "grain", "status"], ignore_index=True))
    return overview.rename_axis("metric").reset_index(), dist, fails


def metadata_keys(path: str | Path, run_id: str) -> list[str]:
    """The metadata field names used by a run's items."""
    frame = store.query(path, """SELECT DISTINCT unnest(json_keys(metadata)) AS k FROM items
                                 WHERE run_id = ? ORDER BY k LIMIT 100""", [run_id])
    return list(frame["k"])


def metadata_values(path: str | Path, run_id: str, key: str, limit: int = 200) -> pd.DataFrame:
    """The most common values of one metadata field, with counts."""
    return store.query(path, f"""
        SELECT value, count(*) AS n
        FROM (SELECT json_extract_string(metadata, ?) AS value FROM items WHERE run_id = ?)
        WHERE value IS NOT NULL GROUP BY value ORDER BY n DESC, value LIMIT {int(limit)}""",
        [_json_pointer(key), run_id])


def search_ids(path: str | Path, run_id: str, search: str = "",
               meta: tuple[str, str] | None = None) -> pd.DataFrame:
    """Ids of the items whose id, query or response contains `search` (any case) and whose metadata
    field meta[0] equals meta[1]."""
    where, params = ["run_id = $run"], {"run": run_id}
    if search:
        # ILIKE on the text as stored (lower-casing every text first costs more). With an ESCAPE clause
        # DuckDB matches through its generic matcher, twice the CPU of a plain '%text%' pattern at a
        # million items, so only a text holding a wildcard is escaped (without ESCAPE a backslash is plain text).
        if "%" in search or "_" in search:
            params["q"] = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            escape = " ESCAPE '\\'"
        else:
            params["q"], escape = f"%{search}%", ""
        where.append(f"(item_id ILIKE $q{escape} OR query ILIKE $q{escape} OR response ILIKE $q{escape})")
    if meta:
        params["mk"], params["mv"] = _json_pointer(meta[0]), meta[1]
        where.append("json_extract_string(metadata, $mk) = $mv")
    return store.query(path, f"SELECT item_id FROM items WHERE {' AND '.join(where)}", params)


ITEM_CALLS = 40  # an item with up to this many judge calls gets them with its other rows (4 in a usual item)


def item_detail(path: str | Path, run_id: str, item_id: str, band: Band | None = None,
                corrected: bool = False) -> dict[str, pd.DataFrame]:
    """Everything stored for one item: item, scores and verdicts at the band, components, and the judge
    calls behind its verdicts when there are at most ITEM_CALLS of them (else none: judge_calls() reads
    those of the verdicts a page shows). A verdict unsure at the band reads status 'unsure', with its
    value, p, p_kind and the tier that decided it kept."""
    ids = {"run": run_id, "item": item_id}
    with store.reading(path):
        item = store.query(path, "SELECT * FROM items WHERE run_id = $run AND item_id = $item", ids)
        scores = store.query(path, f"""SELECT item_id, metric, value, n_scored, n_total, status,
                                              coalesce(n_unsure, 0) AS n_unsure
                                       FROM {scores_sql(band, corrected)} WHERE run_id = $run AND item_id = $item""", ids)
        comps = store.query(path, """SELECT kind, idx, text, coalesce(parent, -1) AS parent, call_key
                                     FROM components WHERE run_id = $run AND item_id = $item
                                     ORDER BY kind, idx""", ids)
        verdicts = store.query(path, f"""
            SELECT metric, component_kind, component_idx, target, value,
                   CASE WHEN {unsure_sql(band)} THEN 'unsure' ELSE status END AS status,
                   evidence, call_key, detail, p, p_kind, tier
            FROM verdicts WHERE run_id = $run AND item_id = $item
            ORDER BY metric, component_kind, component_idx, target""", ids)
        keys = sorted(verdicts["call_key"].dropna().unique())
        calls = judge_calls(path, keys if len(keys) <= ITEM_CALLS else [])  # on this connection: no second open
    return {"item": item, "scores": scores, "components": comps, "verdicts": verdicts, "calls": calls}


def judge_calls(path: str | Path, keys: Sequence[str]) -> pd.DataFrame:
    """The stored judge calls with these keys: prompt, reply, status, tokens, cost, latency, error, endpoint."""
    if not keys:
        return pd.DataFrame(columns=["key"])
    marks = ", ".join("?" for _ in keys)  # an IN list of constants lets DuckDB use the primary-key index
    return store.query(path, f"""SELECT key, model, prompt_name, prompt_hash, messages, params, reply, status,
                                        prompt_tokens, completion_tokens, cost, latency_ms, error, endpoint
                                 FROM judge_calls WHERE key IN ({marks})""", list(keys))


def item_neighbours(path: str | Path, run_id: str, item_id: str) -> tuple[str | None, str | None]:
    """The previous and next item ids of a run, in id order."""
    frame = store.query(path, """
        SELECT (SELECT max(item_id) FROM items WHERE run_id = $run AND item_id < $item) AS prev,
               (SELECT min(item_id) FROM items WHERE run_id = $run AND item_id > $item) AS next""",
        {"run": run_id, "item": item_id})
    prev, nxt = frame.iloc[0]
    return (None if pd.isna(prev) else prev, None if pd.isna(nxt) else nxt)


def claim_verdicts(path: str | Path, run_id: str, item_id: str, band: Band | None = None) -> pd.DataFrame:
    """The response claims of one item with their RP and GR verdicts (value, status; 'unsure' at the
    band) side by side."""
    return store.query(path, f"""
        WITH v AS (SELECT item_id, metric, component_kind, component_idx, value,
                          CASE WHEN {unsure_sql(band)} THEN 'unsure' ELSE status END AS status
                   FROM verdicts WHERE run_id = $run AND item_id = $item)
        SELECT c.idx, c.text,
               any_value(v.value) FILTER (WHERE v.metric = 'rp') AS rp,
               any_value(v.status) FILTER (WHERE v.metric = 'rp') AS rp_status,
               any_value(v.value) FILTER (WHERE v.metric = 'gr') AS gr,
               any_value(v.status) FILTER (WHERE v.metric = 'gr') AS gr_status
        FROM components c LEFT JOIN v
          ON v.item_id = c.item_id AND v.component_kind = 'claim' AND v.component_idx = c.idx
        WHERE c.run_id = $run AND c.item_id = $item AND c.kind = 'claim'
        GROUP BY c.idx, c.text ORDER BY c.idx""", {"run": run_id, "item": item_id})


def triage_notes(path: str | Path, run_id: str | None = None, item_id: str | None = None) -> pd.DataFrame:
    """Triage notes, newest first, optionally for one run or one item."""
    return store.query(path, """
        SELECT created_at, run_id, item_id, label, component, note, author FROM triage
        WHERE ($run IS NULL OR run_id = $run) AND ($item IS NULL OR item_id = $item)
        ORDER BY created_at DESC""", {"run": run_id, "item": item_id})


# ---------------------------------------------------------------- Table 2 in SQL, from diagnosis's rules

def _threshold(thresholds: Mapping[str, float], metric: str) -> str:
    """A metric's threshold as a SQL literal: the given one, else Table 2's default, else 0.5."""
    value = float(thresholds.get(metric, DEFAULT_THRESHOLDS.get(metric, _DEFAULT_THRESHOLD)))
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"threshold for {metric} is not finite")
    return repr(value)


def _level_sql(metric: str, want: str, thresholds: Mapping[str, float]) -> str:
    """diagnosis.level(metric) == want as SQL over run table columns: NULL when unscored or not decided.

    Written from diagnosis.READINGS, LEVELS and decided() alone, so the rules have one definition.
    """
    reads = READINGS.get(metric, (metric,))
    op = _SQL_OPERATORS[LEVELS[want]]

    def compare(m: str) -> str:
        return f"(CASE WHEN {decided_sql(m)} THEN {column(m)} {op} {_threshold(thresholds, m)} END)"

    if len(reads) == 1:
        return compare(metric)
    cases = " ".join(f"WHEN {column(m)} IS NOT NULL THEN {compare(m)}" for m in reads[:-1])
    return f"(CASE {cases} ELSE {compare(reads[-1])} END)"


def rule_sql(rule_id: str, thresholds: Mapping[str, float]) -> str:
    """A boolean SQL expression over run table columns: does this Table-2 rule fire?"""
    conds = " AND ".join(_level_sql(m, want, thresholds) for m, want in CONDITIONS[rule_id])
    return f"coalesce({conds}, FALSE)"


# The levels Table 2's rules read, (metric or reading, "low" | "high"): each computed once per item.
_RULE_LEVELS = sorted({cond for conds in CONDITIONS.values() for cond in conds})


def _level_column(metric: str, want: str) -> str:
    return f'"level:{metric}:{want}"'


def _rules_cte(thresholds: Mapping[str, float]) -> str:
    """`base`: the run table `wide` plus one flag per Table-2 rule and the list of rules fired (by their
    shown names: 'X1 (ours)'), and the levels the rules read (_RULE_LEVELS, as _level_column()): each
    level is computed once however many rules read it (spelling out rule_sql() for every rule costs a
    quarter more at a million items)."""
    levels = ", ".join(f"{_level_sql(m, want, thresholds)} AS {_level_column(m, want)}" for m, want in _RULE_LEVELS)
    flags = ", ".join(f"coalesce({' AND '.join(_level_column(m, want) for m, want in conds)}, FALSE) AS \"{r}\""
                      for r, conds in CONDITIONS.items())
    fired = ", ".join(f"CASE WHEN \"{r}\" THEN '{RULES[r].name}' END" for r in CONDITIONS)
    return (f"WITH levels AS (SELECT *, {levels} FROM wide), flagged AS (SELECT *, {flags} FROM levels), "
            f"base AS (SELECT *, concat_ws(', ', {fired}) AS rules FROM flagged)")


# ---------------------------------------------------------------- reads over run tables (stored or recomputed)

def filter_items(
    table: RunTable, metrics: Sequence[str], thresholds: Mapping[str, float], *,
    below: Sequence[str] = (), rules: Sequence[str] = (), levels: Mapping[str, str] | None = None,
    failed_only: bool = False, ids: pd.DataFrame | None = None,
    sort: str = "item_id", descending: bool = False, limit: int = 200, offset: int = 0,
) -> tuple[pd.DataFrame, int]:
    """One page of a run table, filtered and sorted, and the number of matching items.

    below: below threshold on ANY of these metrics; rules: firing ANY of these rules; levels:
    {metric: 'low'|'high'} that must ALL hold (a quadrant); failed_only: items with a failed verdict
    or an unscored metric; ids: only these item ids (a search_ids() result).
    """
    frames = {"wide": table}
    where = ["TRUE"]
    if below:
        where.append("(" + " OR ".join(_level_sql(m, "low", thresholds) for m in below) + ")")
    known = [r for r in rules if r in CONDITIONS]
    if known:
        where.append("(" + " OR ".join(f'"{r}"' for r in known) + ")")
    for m, want in (levels or {}).items():
        where.append(f"coalesce({_level_sql(m, 'low' if want == 'low' else 'high', thresholds)}, FALSE)")
    if failed_only:
        where.append("(n_failed > 0 OR failed_metrics <> '')")
    if ids is not None:
        frames["ids"] = ids
        where.append("item_id IN (SELECT item_id FROM ids)")
    order = "item_id" if sort == "item_id" else ("n_failed" if sort == "n_failed" else column(sort))
    # The count, the page's ids (a top-N that computes no rule flags unless a rule filter needs them),
    # then the rules fired by the page's rows alone: a million items cost a scan, not a million flags.
    match = f"{_rules_cte(thresholds)} SELECT * FROM base WHERE {' AND '.join(where)}"
    ordered = f"ORDER BY {order} {'DESC' if descending else 'ASC'} NULLS LAST, item_id"
    count = store.frame_query(f"SELECT count(*) AS n FROM ({match})", frames)
    page = store.frame_query(f"SELECT item_id FROM ({match}) {ordered} LIMIT {int(limit)} OFFSET {int(offset)}",
                             frames)
    frame = store.frame_query(f"""{_rules_cte(thresholds)}
        SELECT item_id, query, {''.join(f"{column(m)}, " for m in metrics)} n_failed, failed_metrics, rules
        FROM base WHERE item_id IN (SELECT item_id FROM page) {ordered}""", {"wide": table, "page": page})
    return frame, int(count["n"].iloc[0])


def rule_counts(table: RunTable, thresholds: Mapping[str, float],
                pairs: Sequence[tuple[str, str]] = ()) -> pd.DataFrame:
    """Items per combination of fired Table-2 rules (one bool column per rule), n, and the first item
    id of the combination (in id order: first_items() reads it, so one pass serves both).

    For each metric pair (x, y) in `pairs` it adds columns "x_low:x|y" and "y_low:x|y": True/False for
    low/high, NULL when unscored, so quadrant counts come from the same pass.
    """
    flags = [f'"{r}"' for r in CONDITIONS]

    def low(m: str) -> str:  # a level the rules read already is a column of `base`
        return _level_column(m, "low") if (m, "low") in _RULE_LEVELS else _level_sql(m, "low", thresholds)

    for x, y in pairs:
        flags.append(f'{low(x)} AS "x_low:{x}|{y}"')
        flags.append(f'{low(y)} AS "y_low:{x}|{y}"')
    return store.frame_query(f"""{_rules_cte(thresholds)}
        SELECT {', '.join(flags)}, count(*) AS n, min(item_id) AS first FROM base GROUP BY ALL ORDER BY n DESC""",
                             {"wide": table})


def first_items(combos: pd.DataFrame) -> dict[str, str | None]:
    """Per Table-2 rule, the first item id (in id order) that fires it, or None: where its evidence
    shows; from rule_counts()'s combinations, without another pass over the run."""
    return {r: (None if not combos[r].any() else str(combos.loc[combos[r], "first"].min())) for r in CONDITIONS}


def sample_points(table: RunTable, metrics: Sequence[str], limit: int = 2000) -> pd.DataFrame:
    """At most `limit` items with their scores: a stable pseudo-random sample for scatter plots."""
    cols = ", ".join(column(m) for m in metrics)
    return store.frame_query(f"SELECT item_id, {cols} FROM wide ORDER BY hash(item_id) LIMIT {int(limit)}",
                             {"wide": table})


def correlations(table: RunTable, metrics: Sequence[str]) -> pd.DataFrame:
    """Pearson correlation of every metric pair over the items that have both: columns a, b, r, n."""
    pairs = [(a, b) for i, a in enumerate(metrics) for b in metrics[i + 1:]]
    if not pairs:
        return pd.DataFrame(columns=["a", "b", "r", "n"])
    cols = ", ".join(f"corr({column(a)}, {column(b)}) AS \"r{i}\", count({column(a)} + {column(b)}) AS \"n{i}\""
                     for i, (a, b) in enumerate(pairs))
    row = store.frame_query(f"SELECT {cols} FROM wide", {"wide": table}).iloc[0]
    return pd.DataFrame([{"a": a, "b": b, "r": row[f"r{i}"], "n": int(row[f"n{i}"])}
                         for i, (a, b) in enumerate(pairs)])


def _pairs_cte(metrics: Sequence[str]) -> str:
    """`pairs`: per metric and item id, the scores in run tables a and b, where both scored it
    (one join on item id, then one row per metric)."""
    cols = ", ".join(f"a.{column(m)} AS \"a:{m}\", b.{column(m)} AS \"b:{m}\"" for m in metrics)
    rows = " UNION ALL ".join(
        f"SELECT '{m}' AS metric, item_id, \"a:{m}\" AS a, \"b:{m}\" AS b FROM joined "
        f"WHERE \"a:{m}\" IS NOT NULL AND \"b:{m}\" IS NOT NULL" for m in metrics)
    return f"joined AS MATERIALIZED (SELECT item_id, {cols} FROM a JOIN b USING (item_id)), pairs AS ({rows})"


def compare_tables(a: RunTable, b: RunTable, metrics: Sequence[str],
                   thresholds: Mapping[str, float]) -> dict[str, pd.DataFrame]:
    """Two run tables aligned by item id, per metric over the items both scored, in one pass.

    summary: n_pairs, mean_a, mean_b, delta (b - a), n_worse (fell below the threshold in b),
    n_better (rose above it); deltas: per-item deltas rounded to 1e-3 with counts (for a paired bootstrap).
    """
    cases = " ".join(f"WHEN '{m}' THEN {_threshold(thresholds, m)}" for m in metrics)
    grouped = store.frame_query(f"""WITH {_pairs_cte(metrics)},
        t AS (SELECT *, CASE metric {cases} END AS th FROM pairs)
        SELECT metric, round(b - a, 3) AS delta, count(*) AS n, sum(a) AS sum_a, sum(b) AS sum_b,
               sum(b - a) AS sum_delta, count(*) FILTER (WHERE a >= th AND b < th) AS n_worse,
               count(*) FILTER (WHERE a < th AND b >= th) AS n_better
        FROM t GROUP BY ALL ORDER BY metric, delta""", {"a": a, "b": b})
    sums = grouped.groupby("metric", as_index=False)[["n", "sum_a", "sum_b", "sum_delta", "n_worse", "n_better"]].sum()
    summary = pd.DataFrame({
        "metric": sums["metric"], "n_pairs": sums["n"], "mean_a": sums["sum_a"] / sums["n"],
        "mean_b": sums["sum_b"] / sums["n"], "delta": sums["sum_delta"] / sums["n"],
        "n_worse": sums["n_worse"], "n_better": sums["n_better"]})
    return {"summary": summary, "deltas": grouped[["metric", "delta", "n"]]}


def crossed_items(a: RunTable, b: RunTable, metric: str, threshold: float, direction: str,
                  limit: int = 200) -> pd.DataFrame:
    """Items whose `metric` crossed `threshold` from a to b: direction 'worse' or 'better'."""
    th = _threshold({metric: threshold}, metric)
    cond = f"a >= {th} AND b < {th}" if direction == "worse" else f"a < {th} AND b >= {th}"
    return store.frame_query(f"""WITH {_pairs_cte([metric])}
        SELECT item_id, a, b, b - a AS delta FROM pairs WHERE {cond}
        ORDER BY abs(b - a) DESC, item_id LIMIT {int(limit)}""", {"a": a, "b": b})


def preference_agreement(better: RunTable, worse: RunTable, metrics: Sequence[str]) -> pd.DataFrame:
    """Per metric, over items scored in both runs: how often the declared better run scores strictly higher."""
    return store.frame_query(f"""WITH {_pairs_cte(metrics)}
        SELECT metric, count(*) AS n_pairs, count(*) FILTER (WHERE a > b) AS agree,
               count(*) FILTER (WHERE a = b) AS ties, count(*) FILTER (WHERE a < b) AS disagree
        FROM pairs GROUP BY metric""", {"a": better, "b": worse})


# ---------------------------------------------------------------- people's labels of the judge

def rule_labels(path: str | Path, run_id: str) -> pd.DataFrame:
    """The latest rule label per (item, rule), as saved: item_id, rule, label, origin, author, created_at.

    Triage notes become rule labels in trust.rule_pairs, which knows which rules fire.
    """
    return store.query(path, """
        SELECT item_id, rule, arg_max(label, created_at) AS label, arg_max(origin, created_at) AS origin,
               arg_max(author, created_at) AS author, max(created_at) AS created_at
        FROM labels WHERE run_id = ? AND rule IS NOT NULL
        GROUP BY item_id, rule ORDER BY item_id, rule""", [run_id])


def triage_verdicts(path: str | Path, run_id: str) -> pd.DataFrame:
    """The latest confirmed / false-alarm triage note per item: item_id, label (1 confirmed, 0 false alarm)."""
    return store.query(path, """
        SELECT item_id, arg_max(CASE label WHEN 'confirmed' THEN 1 ELSE 0 END, created_at) AS label
        FROM triage WHERE run_id = ? AND label IN ('confirmed', 'false alarm')
        GROUP BY item_id ORDER BY item_id""", [run_id])


def verdict_corrections(path: str | Path, run_id: str) -> pd.DataFrame:
    """The latest correction per (item, metric, component) beside the judge's verdict for it.

    Columns item_id, metric, component_idx, label, judge, note, author, created_at. `judge` is the
    component's value: for SQC, 1 when any source (or the whole set) covers the sub-question; NULL
    when a verdict it depends on failed, or the component no longer exists.
    """
    return store.query(path, f"""
        WITH latest AS (
            SELECT item_id, metric, component_idx, arg_max(label, created_at) AS label,
                   arg_max(note, created_at) AS note, arg_max(author, created_at) AS author,
                   max(created_at) AS created_at
            FROM labels WHERE run_id = $run AND metric IS NOT NULL GROUP BY ALL),
        judged AS (
            SELECT item_id, metric, component_idx,
                   CASE WHEN max(value) FILTER (WHERE status = 'ok') = 1 THEN 1
                        WHEN count(*) FILTER (WHERE status NOT IN {NOT_FAILED}) = 0
                             AND count(*) FILTER (WHERE status = 'ok') > 0 THEN 0 END AS judge
            FROM verdicts WHERE run_id = $run AND component_idx >= 0
                                AND item_id IN (SELECT item_id FROM latest) GROUP BY ALL)
        SELECT l.item_id, l.metric, l.component_idx, l.label, j.judge, l.note, l.author, l.created_at
        FROM latest l LEFT JOIN judged j USING (item_id, metric, component_idx)
        ORDER BY l.item_id, l.metric, l.component_idx""", {"run": run_id})


def label_targets(path: str | Path, run_id: str) -> tuple[set[str], set[tuple[str, str, int]]]:
    """What labels of this run may name: its item ids, and its (item, metric, component) triples."""
    with store.reading(path):
        items = store.query(path, "SELECT item_id FROM items WHERE run_id = ?", [run_id])
        parts = store.query(path, """SELECT DISTINCT item_id, metric, component_idx FROM verdicts
                                     WHERE run_id = ? AND component_idx >= 0""", [run_id])
    return set(items["item_id"]), set(parts.itertuples(index=False, name=None))


def pair_scores(path: str | Path, run_id: str) -> pd.DataFrame:
    """The scores of a run of validation pairs (items whose metadata names a pair and a side):
    pair, metric, better, worse (NULL when that side was not scored), one row per pair and metric
    the pair was written for.

    The Trust page reads it on every visit: a text search for the key "pair" (the store writes metadata
    with json.dumps, which never escapes it) skips parsing the JSON of a million items that hold none."""
    return store.query(path, """
        WITH sides AS (
            SELECT item_id, json_extract_string(metadata, '$.pair') AS pair,
                   json_extract_string(metadata, '$.side') AS side,
                   unnest(string_split(json_extract_string(metadata, '$.metrics'), ',')) AS metric
            FROM items WHERE run_id = $run AND contains(metadata, '"pair"')
                             AND json_extract_string(metadata, '$.pair') IS NOT NULL)
        SELECT s.pair, s.metric,
               max(sc.value) FILTER (WHERE s.side = 'better' AND NOT isnan(sc.value)) AS better,
               max(sc.value) FILTER (WHERE s.side = 'worse' AND NOT isnan(sc.value)) AS worse
        FROM sides s LEFT JOIN scores sc ON sc.run_id = $run AND sc.item_id = s.item_id AND sc.metric = s.metric
        GROUP BY s.pair, s.metric ORDER BY s.metric, s.pair""", {"run": run_id})


def unsure_counts(path: str | Path, run_id: str, band: Band | None = None, skip: Sequence[str] = (),
                  limit: int | None = None) -> pd.DataFrame:
    """Items with verdicts unsure at `band` (unsure_sql): item_id, n_unsure, most unsure first;
    leaving out the items in `skip`, at most `limit` of them (None: all)."""
    return store.query(path, f"""
        SELECT item_id, count(*) AS n_unsure FROM verdicts
        WHERE run_id = ? AND {unsure_sql(band)} AND NOT list_contains(?::VARCHAR[], item_id)
        GROUP BY item_id ORDER BY n_unsure DESC, min(abs(p - 0.5)), item_id
        {'' if limit is None else f'LIMIT {int(limit)}'}""", [run_id, list(skip)])


def _ids(item_ids: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({"item_id": pd.Series(list(item_ids), dtype=object)})


def run_rows(table: RunTable, item_ids: Sequence[str]) -> pd.DataFrame:
    """The rows of a run table for these items (those that are in the run), by id: a lookup by key."""
    return store.frame_query("SELECT * FROM wide WHERE item_id IN (SELECT item_id FROM ids) ORDER BY item_id",
                             {"wide": table, "ids": _ids(item_ids)})


def score_midpoints(table: RunTable, metrics: Sequence[str]) -> pd.DataFrame:
    """Per metric, the midpoints between its consecutive distinct scores in a run table (the threshold
    candidates of trust.suggest_threshold), only the least and greatest of each 0.0001-wide bucket:
    rounded to 4 places they give the same set, and a million items give at most 20,002 rows.
    Columns metric, midpoint."""
    if not metrics:
        return pd.DataFrame({"metric": [], "midpoint": []})
    cols = ", ".join(column(m) for m in metrics)
    return store.frame_query(f"""
        WITH v AS (UNPIVOT (SELECT {cols} FROM wide) ON {cols} INTO NAME metric VALUE value),
        d AS (SELECT DISTINCT metric, value::DOUBLE AS value FROM v WHERE NOT isnan(value)),
        m AS (SELECT metric, (value + lead(value) OVER (PARTITION BY metric ORDER BY value)) / 2 AS mid FROM d),
        b AS (SELECT metric, min(mid) AS lo, max(mid) AS hi FROM m WHERE mid IS NOT NULL
              GROUP BY metric, floor(mid * 10000))
        SELECT metric, lo AS midpoint FROM b UNION SELECT metric, hi FROM b ORDER BY metric, midpoint""",
                             {"wide": table})


def thin_items(table: RunTable, thresholds: Mapping[str, float], thin: int, skip: Sequence[str],
               limit: int) -> pd.DataFrame:
    """Items of a run table where a Table-2 rule fires on thin evidence: a metric the rule reads
    (through a reading too) has a score from `thin` scored verdicts or fewer. Their rows by id, leaving
    out the items in `skip`, at most `limit`: labelling.review_queue's second reason."""
    def weak(m: str) -> str:
        return f"({column(m)} IS NOT NULL AND NOT isnan({column(m)}) AND {count_column(m, 'scored')} <= {int(thin)})"

    cases = " OR ".join(
        f"({rule_sql(r, thresholds)} AND ("
        + " OR ".join(weak(m) for m in dict.fromkeys(m for name, _ in conds for m in READINGS.get(name, (name,))))
        + "))" for r, conds in CONDITIONS.items())
    return store.frame_query(f"""SELECT * FROM wide WHERE ({cases}) AND item_id NOT IN (SELECT item_id FROM skip)
                                 ORDER BY item_id LIMIT {int(limit)}""", {"wide": table, "skip": _ids(skip)})


def count_items(table: RunTable, skip: Sequence[str]) -> int:
    """The number of items in a run table, leaving out those in `skip`."""
    frame = store.frame_query("SELECT count(*) AS n FROM wide WHERE item_id NOT IN (SELECT item_id FROM skip)",
                              {"wide": table, "skip": _ids(skip)})
    return int(frame["n"].iloc[0])


def items_at(table: RunTable, skip: Sequence[str], ranks: Sequence[int]) -> dict[int, str]:
    """The items of a run table at these ranks (0 first) in id order, leaving out those in `skip`:
    {rank: item_id}. Picks from a seeded shuffle of the ranks, without sending every id to Python."""
    frame = store.frame_query("""
        SELECT rank, item_id FROM (SELECT item_id, row_number() OVER (ORDER BY item_id) - 1 AS rank FROM wide
                                   WHERE item_id NOT IN (SELECT item_id FROM skip))
        WHERE rank IN (SELECT rank FROM ranks)""",
                              {"wide": table, "skip": _ids(skip), "ranks": pd.DataFrame({"rank": list(ranks)},
                                                                                        dtype="int64")})
    return dict(zip(frame["rank"].astype(int), frame["item_id"]))


def labelled_items(path: str | Path, run_id: str) -> list[str]:
    """Items of a run that carry a label or a confirmed / false-alarm triage note."""
    frame = store.query(path, """
        SELECT item_id FROM labels WHERE run_id = $run
        UNION SELECT item_id FROM triage WHERE run_id = $run AND label IN ('confirmed', 'false alarm')""",
                        {"run": run_id})
    return sorted(frame["item_id"])


def run_labels(path: str | Path, run_id: str) -> pd.DataFrame:
    """Every label saved on a run, oldest first, in the columns a labels file is imported from:
    item_id, rule, metric, component, label, note, author, origin, created_at."""
    return store.query(path, """
        SELECT item_id, rule, metric, component_idx AS component, label, note, author, origin, created_at
        FROM labels WHERE run_id = ? ORDER BY created_at, item_id""", [run_id])


# ---------------------------------------------------------------- flips, the CI gate and regression suites

# The metrics whose verdicts belong to one component each (a claim, a sub-question, a source): the
# ones a flip or an expectation can name.
COMPONENT_METRICS = ("sp1", "sqc", "rp", "rqc", "gr")


def _component_states_sql(band: Band | None) -> str:
    """CTEs `states`: per run in $runs, item, metric and component, a hash of its text (`norm`: lower
    case, whitespace collapsed; a hash, so joins and partitions compare numbers, not long source texts)
    and its verdict folded over the targets it was judged against, as SQC's coverage folds it: a
    confident 1 anywhere makes 1, all confident makes 0, else unsure or the failure."""
    failure = "first(state ORDER BY state) FILTER (WHERE state NOT IN ('ok', 'unsure'))"
    return f"""v AS (
            SELECT run_id, item_id, metric, component_kind AS kind, component_idx AS idx, value, p,
                   CASE WHEN status <> 'ok' THEN status WHEN {unsure_sql(band)} THEN 'unsure' ELSE 'ok' END AS state
            FROM verdicts WHERE list_contains($runs, run_id) AND metric IN {_names(COMPONENT_METRICS)}
                  AND component_idx >= 0),
        folded AS (
            SELECT run_id, item_id, metric, kind, idx,
                   CASE WHEN bool_or(state = 'ok' AND value = 1) THEN 1 WHEN bool_and(state = 'ok') THEN 0 END AS value,
                   CASE WHEN bool_or(state = 'ok' AND value = 1) OR bool_and(state = 'ok') THEN 'ok'
                        WHEN bool_or(state = 'unsure') THEN 'unsure' ELSE {failure} END AS state,
                   max(p) AS p
            FROM v GROUP BY ALL),
        states AS (
            SELECT f.*, hash(lower(regexp_replace(trim(c.text), '\\s+', ' ', 'g'))) AS norm
            FROM folded f JOIN components c
              ON c.run_id = f.run_id AND c.item_id = f.item_id AND c.kind = f.kind AND c.idx = f.idx)"""


def component_states(path: str | Path, run_id: str, band: Band | None = None,
                     item_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Every claim, sub-question and source of a run with its verdict per metric (COMPONENT_METRICS),
    folded over targets: item_id, metric, kind, idx, text, value (1, 0 or NULL), state ('ok',
    'unsure' at the band, or the failure status), p (the highest p behind it). `item_ids`: only these."""
    return store.query(path, f"""WITH {_component_states_sql(band)}
        SELECT s.item_id, s.metric, s.kind, s.idx, c.text, s.value, s.state, s.p FROM states s
        JOIN components c ON c.run_id = s.run_id AND c.item_id = s.item_id AND c.kind = s.kind AND c.idx = s.idx
        WHERE $all OR s.item_id IN (SELECT unnest($items))
        ORDER BY s.item_id, s.metric, s.idx""", {"runs": [run_id], "all": item_ids is None, "items": list(item_ids or [])})


def flip_rows(path: str | Path, run_a: str, run_b: str, band: Band | None = None) -> dict[str, pd.DataFrame]:
    """The components of the items both runs hold, matched across runs by normalised text (the n-th
    copy of a text with the n-th), per metric.

    rows: every matched pair that is not the same confident verdict in both runs, and every
    component found in one run only: item_id, metric, kind, then idx, text, value, state and p for
    each side (suffix _a, _b; NULL where the side has no such component). same: per metric, how
    many matched pairs kept the same confident verdict (n)."""
    joined = f"""WITH shared AS (SELECT item_id FROM items WHERE run_id = $a
                               INTERSECT SELECT item_id FROM items WHERE run_id = $b),
        {_component_states_sql(band)},
        s AS (SELECT *, row_number() OVER (PARTITION BY run_id, item_id, metric, norm ORDER BY idx) AS occ
              FROM states WHERE item_id IN (SELECT item_id FROM shared)),
        a AS (SELECT * FROM s WHERE run_id = $a), b AS (SELECT * FROM s WHERE run_id = $b),
        j AS MATERIALIZED (SELECT coalesce(a.item_id, b.item_id) AS item_id, coalesce(a.metric, b.metric) AS metric,
                     coalesce(a.kind, b.kind) AS kind,
                     a.idx AS idx_a, a.value AS value_a, a.state AS state_a, a.p AS p_a,
                     b.idx AS idx_b, b.value AS value_b, b.state AS state_b, b.p AS p_b,
                     coalesce(a.state = 'ok' AND b.state = 'ok' AND a.value = b.value, FALSE) AS same
              FROM a FULL OUTER JOIN b
                ON a.item_id = b.item_id AND a.metric = b.metric AND a.norm = b.norm AND a.occ = b.occ)"""
    # one pass: the rows that differ, with their texts, then one row per metric counting the same
    # ones (item_id NULL); texts are read for the differing rows only
    both = store.query(path, f"""{joined}
        SELECT j.item_id, j.metric, j.kind, j.idx_a, ca.text AS text_a, j.value_a, j.state_a, j.p_a,
               j.idx_b, cb.text AS text_b, j.value_b, j.state_b, j.p_b, NULL::BIGINT AS n_same
        FROM j LEFT JOIN components ca ON ca.run_id = $a AND ca.item_id = j.item_id AND ca.kind = j.kind
                                          AND ca.idx = j.idx_a
               LEFT JOIN components cb ON cb.run_id = $b AND cb.item_id = j.item_id AND cb.kind = j.kind
                                          AND cb.idx = j.idx_b
        WHERE NOT j.same
        UNION ALL
        SELECT NULL, metric, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, count(*)
        FROM j WHERE same GROUP BY metric""", {"a": run_a, "b": run_b, "runs": [run_a, run_b]})
    counted = both["item_id"].isna()
    rows = both[~counted].drop(columns="n_same").sort_values(["item_id", "metric", "idx_a", "idx_b"],
                                                             na_position="last").reset_index(drop=True)
    same = both.loc[counted, ["metric", "n_same"]].rename(columns={"n_same": "n"}).reset_index(drop=True)
    return {"rows": rows, "same": same}


def item_inputs(path: str | Path, run_ids: Sequence[str], item_ids: Sequence[str]) -> pd.DataFrame:
    """The query, sources and response of these items in these runs: run_id, item_id, query, sources,
    response, reference, metadata (JSON text)."""
    return store.query(path, """SELECT run_id, item_id, query, sources, response, reference, metadata FROM items
                                WHERE list_contains($runs, run_id) AND item_id IN (SELECT unnest($items))
                                ORDER BY run_id, item_id""", {"runs": list(run_ids), "items": list(item_ids)})


def shared_item_count(path: str | Path, run_a: str, run_b: str) -> int:
    """How many item ids two runs both hold."""
    frame = store.query(path, """SELECT count(*) AS n FROM (SELECT item_id FROM items WHERE run_id = $a
                                 INTERSECT SELECT item_id FROM items WHERE run_id = $b)""", {"a": run_a, "b": run_b})
    return int(frame["n"].iloc[0])
# ---------------------------------------------------------------- imported peer scores

def imported_summary(path: str | Path, run_id: str) -> pd.DataFrame:
    """Per imported peer score (origin, metric): its mean over the items that have one, n_scored of
    n_total (the run's items). Kept apart from our metrics: nothing else reads this table."""
    return store.query(path, """
        SELECT s.origin, s.metric, avg(s.value) AS mean, count(s.value) AS n_scored,
               (SELECT count(*) FROM items WHERE run_id = $run) AS n_total
        FROM imported_scores s JOIN items i ON i.run_id = s.run_id AND i.item_id = s.item_id
        WHERE s.run_id = $run GROUP BY s.origin, s.metric ORDER BY s.origin, s.metric""", {"run": run_id})


def imported_item_scores(path: str | Path, run_id: str, item_id: str) -> pd.DataFrame:
    """One item's imported peer scores: origin, metric, value (NULL: the peer tool gave no score)."""
    return store.query(path, """SELECT origin, metric, value FROM imported_scores
                                WHERE run_id = $run AND item_id = $item ORDER BY origin, metric""",
                       {"run": run_id, "item": item_id})


# ---------------------------------------------------------------- the source ledger (evaluators/ledger.py)

def _norm_sql(expr: str) -> str:
    """ledger.normalise() as SQL: whitespace runs (Python's str.split() set) collapsed, ends trimmed.
    Most texts are already normal (single spaces, none at the ends): one match test passes them as they
    are, three times faster than the two replacements."""
    ws = ledger.WHITESPACE_CLASS
    odd = "[" + ws[1:-1].replace("\\x{0020}", "") + "]|  |^ | $"
    return (f"CASE WHEN regexp_matches({expr}, '{odd}') THEN "
            f"regexp_replace(regexp_replace({expr}, '^{ws}+|{ws}+$', '', 'g'), '{ws}+', ' ', 'g') ELSE {expr} END")


def _quote_sql() -> str:
    """ledger.supporting_quote() over a verdicts row's detail as SQL: NULL when it names no source."""
    found = ", ".join(f"nullif(regexp_extract(detail, '{p.replace(chr(39), chr(39) * 2)}', 1), '')"
                      for p in ledger.QUOTE_PATTERNS)
    quote = _norm_sql(f"regexp_replace(coalesce({found}), '…$', '')")
    return (f"CASE WHEN starts_with(detail, '{ledger.SUPPORTED_PREFIX}') THEN nullif(left("
            f"split_part({quote}, '{ledger.SENTENCE_END}', 1), {int(ledger.QUOTE_MATCH)}), '') END")


def _ledger_rows_sql(band: Band | None, keyed: bool) -> str:
    """CTEs ending in `rows`: one row per retrieval (run, item, source position) of the runs in $runs,
    with the source's identity, SP1's state on it, the GR claims it supports and its item's GR counts.
    keyed: only the retrievals of the source $source (its id or its text key), the other sources of
    their items read too so that a claim another source supports is not counted as unattributed."""
    runs = "run_id IN (SELECT unnest($runs::VARCHAR[]))"
    only_items = ("WHERE (run_id, item_id) IN (SELECT run_id, item_id FROM hashed WHERE $source IN (source_id, text_key))"
                  if keyed else "")
    state = (f"CASE WHEN status <> 'ok' OR value IS NULL OR value NOT IN (0, 1) THEN 'failed' "
             f"WHEN {unsure_sql(band)} THEN 'unsure' WHEN value = 1 THEN 'yes' ELSE 'no' END")
    return f"""WITH src AS (
            SELECT run_id, item_id, pos - 1 AS idx, text, {_norm_sql('text')} AS norm,
                   CASE WHEN json_array_length(metadata, '$.source_ids') = len(sources)
                        THEN json_extract_string(metadata, '$.source_ids[' || (pos - 1) || ']') END AS source_id
            FROM (SELECT run_id, item_id, metadata, sources, unnest(sources) AS text,
                         generate_subscripts(sources, 1) AS pos FROM items WHERE {runs})),
        hashed AS (SELECT *, left(sha256(norm), {ledger.KEY_LENGTH}) AS text_key FROM src),
        keyed AS MATERIALIZED (
            SELECT *, coalesce(source_id, text_key) AS source FROM hashed
            {only_items}),
        judged AS (
            SELECT run_id, item_id, metric, component_kind, component_idx, detail, {state} AS state
            FROM verdicts WHERE {runs} AND metric IN ('sp1', 'gr')
              {"AND (run_id, item_id) IN (SELECT run_id, item_id FROM keyed)" if keyed else ""}),
        sp1 AS (SELECT run_id, item_id, component_idx AS idx, state AS sp1, detail AS sp1_detail
                FROM judged WHERE metric = 'sp1' AND component_kind = 'source'),
        gr AS (SELECT run_id, item_id, component_idx, state,
                      CASE WHEN state = 'yes' THEN {_quote_sql()} END AS quote
               FROM judged WHERE metric = 'gr'),
        matches AS MATERIALIZED (
            SELECT g.run_id, g.item_id, g.component_idx, k.idx
            FROM (SELECT * FROM gr WHERE quote IS NOT NULL) g JOIN keyed k USING (run_id, item_id)
            WHERE contains(k.norm, g.quote)),
        supports AS (SELECT run_id, item_id, idx, count(*) AS supports, list(component_idx ORDER BY component_idx) AS claims
                     FROM matches GROUP BY ALL),
        gr_item AS (SELECT g.run_id, g.item_id, count(*) FILTER (WHERE g.state = 'no') AS n_unsupported,
                           count(*) FILTER (WHERE g.state IN ('yes', 'no')) AS n_decided,
                           count(*) FILTER (WHERE g.state = 'yes' AND m.component_idx IS NULL) AS n_unattributed
                    FROM gr g LEFT JOIN (SELECT DISTINCT run_id, item_id, component_idx FROM matches) m
                         USING (run_id, item_id, component_idx) GROUP BY ALL),
        rows AS (SELECT k.run_id, k.item_id, k.idx, k.source, k.source_id, k.text_key, k.text, s.sp1, s.sp1_detail,
                        coalesce(m.supports, 0) AS supports, m.claims, g.n_unsupported, g.n_decided, g.n_unattributed
                 FROM keyed k LEFT JOIN sp1 s USING (run_id, item_id, idx) LEFT JOIN supports m USING (run_id, item_id, idx)
                      LEFT JOIN gr_item g USING (run_id, item_id)
                 {"WHERE $source IN (k.source_id, k.text_key)" if keyed else ""})"""


_LEDGER_COLUMNS = """
        count(*) AS n_retrieved, count(DISTINCT run_id) AS n_runs,
        count(*) FILTER (WHERE sp1 = 'yes') AS sp1_essential, count(*) FILTER (WHERE sp1 = 'no') AS sp1_not,
        count(*) FILTER (WHERE sp1 = 'unsure') AS sp1_unsure, count(*) FILTER (WHERE sp1 = 'failed') AS sp1_failed,
        count(*) FILTER (WHERE sp1 IS NULL) AS sp1_missing,
        sum(supports)::BIGINT AS claims_supported, coalesce(sum(n_unattributed), 0)::BIGINT AS claims_source_unknown,
        count(*) FILTER (WHERE n_unsupported > 0) AS beside_unsupported,
        count(*) FILTER (WHERE n_decided > 0) AS gr_decided"""


def _ledger_flags(th: ledger.Thresholds) -> str:
    """ledger.is_dead_weight and ledger.is_stale over a ledger row as SQL (tests hold them equal)."""
    least = int(th.min_retrieved)
    return (f"n_retrieved >= {least} AND sp1_essential + sp1_not > 0 AND "
            f"sp1_essential / (sp1_essential + sp1_not) <= {_literal(th.dead_max_essential)} AS dead_weight, "
            f"n_retrieved >= {least} AND gr_decided > 0 AND "
            f"beside_unsupported / gr_decided >= {_literal(th.stale_min_unsupported)} AS stale")


def _ledger_sql(band: Band | None, th: ledger.Thresholds) -> str:
    """`ledger`: one row per source over the runs in $runs, with its counts, shares and list flags."""
    return f"""{_ledger_rows_sql(band, keyed=False)},
        grouped AS (SELECT source, any_value(source_id) AS source_id, any_value(text_key) AS text_key,
                           left(any_value(text), 300) AS text, {_LEDGER_COLUMNS}
                    FROM rows GROUP BY source),
        ledger AS MATERIALIZED (
            SELECT *, sp1_essential / nullif(sp1_essential + sp1_not, 0) AS essential_share,
                   beside_unsupported / nullif(gr_decided, 0) AS unsupported_share, {_ledger_flags(th)}
            FROM grouped)"""


def source_ledger(path: str | Path, run_ids: Sequence[str], th: ledger.Thresholds = ledger.DEFAULT_THRESHOLDS,
                  band: Band | None = None, limit: int | None = 100) -> pd.DataFrame:
    """The source ledger of these runs, grouped in DuckDB.

    With a limit: at most `limit` rows of each list, in a column `list`: 'retrieved' (most retrieved
    first), 'dead weight' (most retrieved, then least essential first) and 'stale' (most often beside
    unsupported claims first), with the whole ledger's counts n_sources, n_dead and n_stale on every row.
    Without: every source, most retrieved first (the export).
    """
    params = {"runs": list(run_ids)}
    if limit is None:
        return store.query(path, f"""{_ledger_sql(band, th)}
            SELECT * FROM ledger ORDER BY n_retrieved DESC, source""", params)
    n = int(limit)
    return store.query(path, f"""{_ledger_sql(band, th)},
        lists AS (
            (SELECT 'retrieved' AS list, * FROM ledger ORDER BY n_retrieved DESC, source LIMIT {n})
            UNION ALL
            (SELECT 'dead weight', * FROM ledger WHERE dead_weight
             ORDER BY n_retrieved DESC, essential_share, source LIMIT {n})
            UNION ALL
            (SELECT 'stale', * FROM ledger WHERE stale
             ORDER BY beside_unsupported DESC, unsupported_share DESC, source LIMIT {n}))
        SELECT *, (SELECT count(*) FROM ledger) AS n_sources,
               (SELECT count(*) FILTER (WHERE dead_weight) FROM ledger) AS n_dead,
               (SELECT count(*) FILTER (WHERE stale) FROM ledger) AS n_stale
        FROM lists""", params)


def source_retrievals(path: str | Path, run_ids: Sequence[str], source: str, band: Band | None = None,
                      limit: int = 500) -> pd.DataFrame:
    """Where one source (its id or its text key) was retrieved in these runs: run_id, item_id, idx
    (its position), the item's query, SP1's state and detail on it, the GR claims it supports (claim
    indexes and texts), and its item's GR counts; with n_match, the number of retrievals, on every row."""
    return store.query(path, f"""{_ledger_rows_sql(band, keyed=True)}
        SELECT r.run_id, r.item_id, r.idx, r.source, r.source_id, r.text_key, r.text, i.query, r.sp1, r.sp1_detail,
               r.supports, (SELECT list(c.text ORDER BY c.idx) FROM components c
                            WHERE c.run_id = r.run_id AND c.item_id = r.item_id AND c.kind = 'claim'
                              AND list_contains(r.claims, c.idx)) AS claims,
               r.n_unsupported, r.n_decided, r.n_unattributed, count(*) OVER () AS n_match
        FROM rows r JOIN items i USING (run_id, item_id)
        ORDER BY r.run_id, r.item_id, r.idx LIMIT {int(limit)}""", {"runs": list(run_ids), "source": source})


# ---------------------------------------------------------------- which runs a page opens on

def thelma_runs(path: str | Path) -> list[str]:
    """Runs with THELMA scores that are not GRAMMAR robustness runs (whose items carry `grammar_group`,
    or which have GRAMMAR correctness stored), newest first: where a first visit should land."""
    with store.reading(path):
        has_grammar = store.query(path, """SELECT count(*) AS n FROM information_schema.tables
                                           WHERE table_name = 'grammar_correctness'""")["n"].iloc[0]
        frame = store.query(path, f"""
            WITH grammar AS (
                SELECT run_id FROM (SELECT run_id, any_value(metadata) AS m FROM items GROUP BY run_id)
                WHERE json_exists(m, '$.grammar_group')
                {"UNION SELECT run_id FROM grammar_correctness" if has_grammar else ""})
            SELECT r.run_id FROM runs r
            WHERE r.run_id IN (SELECT run_id FROM scores WHERE metric IN {_names(THELMA)})
              AND r.run_id NOT IN (SELECT run_id FROM grammar)
            ORDER BY r.created_at DESC, r.run_id""")
    return list(frame["run_id"])


# ---------------------------------------------------------------- trends (evaluators/trends.py)

def _scored(relation: str) -> str:
    return f"SELECT metric, value, count(*) AS n FROM {relation} WHERE run_id = $run AND value IS NOT NULL AND NOT isnan(value)"


def trend_scores(path: str | Path, run_ids: Sequence[str], baseline: str | None = None,
                 band: Band | None = None) -> dict[str, pd.DataFrame]:
    """Per run (a trend point): its scored values grouped (dist: point, metric, value, n), its items
    (totals: point, n_items) and, against `baseline`, the per-item deltas of the items both scored
    (pairs: point, metric, delta rounded to 1e-3, n), all at the band."""
    dist, totals, pairs = [], [], []
    relation = scores_sql(band)
    with store.reading(path):
        for run in run_ids:
            ids = {"run": run}
            dist.append(store.query(path, f"SELECT $run AS point, * FROM ({_scored(relation)} GROUP BY ALL)", ids))
            totals.append(store.query(path, "SELECT $run AS point, count(*) AS n_items FROM items WHERE run_id = $run", ids))
            if baseline is not None and run != baseline:
                # the same generated relation twice, one for each run: the baseline's reads $base
                pairs.append(store.query(path, f"""
                    SELECT $run AS point, a.metric, round(b.value - a.value, 3) AS delta, count(*) AS n
                    FROM (SELECT * FROM {relation.replace('$run', '$base')}) a
                         JOIN (SELECT * FROM {relation}) b USING (item_id, metric)
                    WHERE a.run_id = $base AND b.run_id = $run AND NOT isnan(a.value) AND NOT isnan(b.value)
                    GROUP BY ALL""", {"run": run, "base": baseline}))
    empty = pd.DataFrame(columns=["point", "metric", "delta", "n"])
    return {"dist": pd.concat(dist, ignore_index=True), "totals": pd.concat(totals, ignore_index=True),
            "pairs": pd.concat(pairs, ignore_index=True) if pairs else empty}


def _timestamp_sql(value: str) -> str:
    """A metadata value as a UTC TIMESTAMP: ISO text (an offset or Z converted to UTC, none read as is),
    or a number of seconds (milliseconds from 1e11 up) since the epoch; NULL otherwise. Numbers below
    1e8 (before 1973) are counts, not timestamps."""
    number = f"TRY_CAST({value} AS DOUBLE)"
    return (f"CASE WHEN regexp_matches({value}, '(Z|[+-]\\d\\d:?\\d\\d)$') "
            f"THEN TRY_CAST({value} AS TIMESTAMPTZ) AT TIME ZONE 'UTC' "
            f"WHEN {number} >= 1e8 THEN make_timestamp((CASE WHEN {number} >= 1e11 THEN {number} * 1e3 "
            f"ELSE {number} * 1e6 END)::BIGINT) WHEN {number} IS NULL THEN TRY_CAST({value} AS TIMESTAMP) END")


def trend_buckets(path: str | Path, run_id: str, key: str, unit: str, band: Band | None = None) -> dict[str, pd.DataFrame]:
    """One run's items bucketed by the metadata timestamp `key`, truncated to `unit` ('day' or 'week',
    weeks start on Monday): dist (point 'YYYY-MM-DD', metric, value, n) and totals (point, n_items),
    where point NULL counts the items without a readable timestamp."""
    if unit not in ("day", "week"):
        raise ValueError(f"unit must be day or week, got {unit!r}")
    params = {"run": run_id, "key": _json_pointer(key)}
    buckets = f"""buckets AS (
        SELECT item_id, strftime(date_trunc('{unit}', {_timestamp_sql('v')}), '%Y-%m-%d') AS point
        FROM (SELECT item_id, json_extract_string(metadata, $key) AS v FROM items WHERE run_id = $run))"""
    with store.reading(path):
        dist = store.query(path, f"""WITH {buckets}
            SELECT b.point, s.metric, s.value, count(*) AS n FROM {scores_sql(band)} s JOIN buckets b USING (item_id)
            WHERE s.run_id = $run AND b.point IS NOT NULL AND s.value IS NOT NULL AND NOT isnan(s.value)
            GROUP BY ALL ORDER BY b.point""", params)
        totals = store.query(path, f"""WITH {buckets}
            SELECT point, count(*) AS n_items FROM buckets GROUP BY ALL ORDER BY point NULLS LAST""", params)
    return {"dist": dist, "totals": totals}
