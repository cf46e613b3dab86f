"""Reads that set two runs side by side: run tables aligned by item id, the items that crossed a threshold,
pairwise preference, the components whose verdicts flipped (matched by their text), and the sources
the retriever added or dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Sequence

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.metrics import registry
from evaluators.storage import store
from evaluators.storage.queries.ledger import key_sql, name_sql, norm_sql
from evaluators.storage.queries.sql import RunTable, ids_sql, scores_sql, threshold_sql, unsure_sql
from evaluators.storage.wide import column


def _pairs_cte(metrics: Sequence[str]) -> str:
    """`pairs`: per metric and item id, the scores in run tables a and b, where both scored it
    (one join on item id, then one row per metric)."""
    cols = ", ".join(f'a.{column(m)} AS "a:{m}", b.{column(m)} AS "b:{m}"' for m in metrics)
    rows = " UNION ALL ".join(
        f'SELECT \'{m}\' AS metric, item_id, "a:{m}" AS a, "b:{m}" AS b FROM joined '
        f'WHERE "a:{m}" IS NOT NULL AND "b:{m}" IS NOT NULL'
        for m in metrics
    )
    return f"joined AS MATERIALIZED (SELECT item_id, {cols} FROM a JOIN b USING (item_id)), pairs AS ({rows})"


def compare_tables(
    a: RunTable, b: RunTable, metrics: Sequence[str], thresholds: Mapping[str, float]
) -> dict[str, pd.DataFrame]:
    """Two run tables aligned by item id, per metric over the items both scored, in one pass.

    summary: n_pairs, mean_a, mean_b, delta (b - a), n_worse (fell below the threshold in b),
    n_better (rose above it); deltas: per-item deltas rounded to 1e-3 with counts (for a paired bootstrap).
    """
    cases = " ".join(f"WHEN '{m}' THEN {threshold_sql(thresholds, m)}" for m in metrics)
    grouped = store.frame_query(
        f"""WITH {_pairs_cte(metrics)},
        t AS (SELECT *, CASE metric {cases} END AS th FROM pairs)
        SELECT metric, round(b - a, 3) AS delta, count(*) AS n, sum(a) AS sum_a, sum(b) AS sum_b,
               sum(b - a) AS sum_delta, count(*) FILTER (WHERE a >= th AND b < th) AS n_worse,
               count(*) FILTER (WHERE a < th AND b >= th) AS n_better
        FROM t GROUP BY ALL ORDER BY metric, delta""",
        {"a": a, "b": b},
    )
    sums = grouped.groupby("metric", as_index=False)[["n", "sum_a", "sum_b", "sum_delta", "n_worse", "n_better"]].sum()
    summary = pd.DataFrame(
        {
            "metric": sums["metric"],
            "n_pairs": sums["n"],
            "mean_a": sums["sum_a"] / sums["n"],
            "mean_b": sums["sum_b"] / sums["n"],
            "delta": sums["sum_delta"] / sums["n"],
            "n_worse": sums["n_worse"],
            "n_better": sums["n_better"],
        }
    )
    return {"summary": summary, "deltas": grouped[["metric", "delta", "n"]]}


def crossed_items(
    a: RunTable, b: RunTable, metric: str, threshold: float, direction: str, limit: int = 200
) -> pd.DataFrame:
    """Items whose `metric` crossed `threshold` from a to b: direction 'worse' or 'better'."""
    th = threshold_sql({metric: threshold}, metric)
    cond = f"a >= {th} AND b < {th}" if direction == "worse" else f"a < {th} AND b >= {th}"
    return store.frame_query(
        f"""WITH {_pairs_cte([metric])}
        SELECT item_id, a, b, b - a AS delta FROM pairs WHERE {cond}
        ORDER BY abs(b - a) DESC, item_id LIMIT {int(limit)}""",
        {"a": a, "b": b},
    )


def preference_agreement(better: RunTable, worse: RunTable, metrics: Sequence[str]) -> pd.DataFrame:
    """Per metric, over items scored in both runs: how often the declared better run scores strictly higher."""
    return store.frame_query(
        f"""WITH {_pairs_cte(metrics)}
        SELECT metric, count(*) AS n_pairs, count(*) FILTER (WHERE a > b) AS agree,
               count(*) FILTER (WHERE a = b) AS ties, count(*) FILTER (WHERE a < b) AS disagree
        FROM pairs GROUP BY metric""",
        {"a": better, "b": worse},
    )


def pair_scores(path: str | Path, run_id: str) -> pd.DataFrame:
    """The scores of a run of validation pairs (items whose metadata names a pair and a side):
    pair, metric, better, worse (NULL when that side was not scored), one row per pair and metric
    the pair was written for.

    The Trust page reads it on every visit: a text search for the key "pair" (the store writes metadata
    with json.dumps, which never escapes it) skips parsing the JSON of a million items that hold none."""
    return store.query(
        path,
        """
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
        GROUP BY s.pair, s.metric ORDER BY s.metric, s.pair""",
        {"run": run_id},
    )


def _component_states_sql(band: Band | None) -> str:
    """CTEs `states`: per run in $runs, item, metric and component, a hash of its text (`norm`: lower
    case, whitespace collapsed; a hash, so joins and partitions compare numbers, not long source texts)
    and its verdict folded over the targets it was judged against, as SQC's coverage folds it: a
    confident 1 anywhere makes 1, all confident makes 0, else unsure or the failure."""
    failure = "first(state ORDER BY state) FILTER (WHERE state NOT IN ('ok', 'unsure'))"
    return f"""v AS (
            SELECT run_id, item_id, metric, component_kind AS kind, component_idx AS idx, value, p,
                   CASE WHEN status <> 'ok' THEN status WHEN {unsure_sql(band)} THEN 'unsure' ELSE 'ok' END AS state
            FROM verdicts WHERE list_contains($runs, run_id) AND metric IN {ids_sql(registry.component_metrics())}
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


def component_states(
    path: str | Path, run_id: str, band: Band | None = None, item_ids: Sequence[str] | None = None
) -> pd.DataFrame:
    """Every claim, sub-question and source of a run with its verdict per metric (registry.component_metrics()),
    folded over targets: item_id, metric, kind, idx, text, value (1, 0 or NULL), state ('ok',
    'unsure' at the band, or the failure status), p (the highest p behind it). `item_ids`: only these."""
    return store.query(
        path,
        f"""WITH {_component_states_sql(band)}
        SELECT s.item_id, s.metric, s.kind, s.idx, c.text, s.value, s.state, s.p FROM states s
        JOIN components c ON c.run_id = s.run_id AND c.item_id = s.item_id AND c.kind = s.kind AND c.idx = s.idx
        WHERE $all OR s.item_id IN (SELECT unnest($items))
        ORDER BY s.item_id, s.metric, s.idx""",
        {"runs": [run_id], "all": item_ids is None, "items": list(item_ids or [])},
    )


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
    both = store.query(
        path,
        f"""{joined}
        SELECT j.item_id, j.metric, j.kind, j.idx_a, ca.text AS text_a, j.value_a, j.state_a, j.p_a,
               j.idx_b, cb.text AS text_b, j.value_b, j.state_b, j.p_b, NULL::BIGINT AS n_same
        FROM j LEFT JOIN components ca ON ca.run_id = $a AND ca.item_id = j.item_id AND ca.kind = j.kind
                                          AND ca.idx = j.idx_a
               LEFT JOIN components cb ON cb.run_id = $b AND cb.item_id = j.item_id AND cb.kind = j.kind
                                          AND cb.idx = j.idx_b
        WHERE NOT j.same
        UNION ALL
        SELECT NULL, metric, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, count(*)
        FROM j WHERE same GROUP BY metric""",
        {"a": run_a, "b": run_b, "runs": [run_a, run_b]},
    )
    counted = both["item_id"].isna()
    rows = (
        both[~counted]
        .drop(columns="n_same")
        .sort_values(["item_id", "metric", "idx_a", "idx_b"], na_position="last")
        .reset_index(drop=True)
    )
    same = both.loc[counted, ["metric", "n_same"]].rename(columns={"n_same": "n"}).reset_index(drop=True)
    return {"rows": rows, "same": same}


def shared_item_count(path: str | Path, run_a: str, run_b: str) -> int:
    """How many item ids two runs both hold."""
    frame = store.query(
        path,
        """SELECT count(*) AS n FROM (SELECT item_id FROM items WHERE run_id = $a
                                 INTERSECT SELECT item_id FROM items WHERE run_id = $b)""",
        {"a": run_a, "b": run_b},
    )
    return int(frame["n"].iloc[0])


# The metrics a retriever's change moves: its sources' precision, their coverage of the query, and
# whether the response stays grounded in them.
RETRIEVAL_METRICS = ("sp1", "sqc", "gr")


def _side_scores_sql(side: str, per_metric: Sequence[tuple[str, str]], band: Band | None, corrected: bool) -> str:
    """The scores of run $a or $b (`side`) at the band, one row per item of `moved`, one value and one
    status column per metric (named `column`_`side`, `column`_status_`side`)."""
    cols = ", ".join(
        f"max(CASE WHEN isnan(value) THEN NULL ELSE value END) FILTER (WHERE metric = '{m}') AS {c}_{side}, "
        f"any_value(status) FILTER (WHERE metric = '{m}') AS {c}_status_{side}"
        for m, c in per_metric
    )
    # the generated relation reads $run: here the side's run
    return f"""SELECT item_id, {cols} FROM {scores_sql(band, corrected).replace("$run", f"${side}")}
        WHERE run_id = ${side} AND item_id IN (SELECT item_id FROM moved)
          AND metric IN {ids_sql([m for m, _ in per_metric])} GROUP BY item_id"""


def retrieval_changes(
    path: str | Path,
    run_a: str,
    run_b: str,
    band: Band | None = None,
    corrected: bool = False,
    metrics: Sequence[str] = RETRIEVAL_METRICS,
    limit: int = 500,
) -> pd.DataFrame:
    """The sources the retriever dropped (retrieved in run_a only) or added (in run_b only), per item both
    runs hold, matched by their text key (ledger.source_key); with the item's scores in each run at the band.

    One row per moved source: item_id, change ('dropped' or 'added'), idx (its position in its run),
    key (its text key), name (its first words), sp1 ('yes', 'no', 'unsure', 'failed' or NULL: SP1's
    verdict on it in its run), then per metric m: m_a, m_b (NULL when unscored), m_status_a, m_status_b
    and m_delta (b - a where both scored). On every row: n_items (items whose sources moved), n_dropped,
    n_added and per metric m_n (items scored in both) and m_mean_delta, over all of them (the rows stop
    at `limit`, by item id)."""
    per_metric = [(m, column(m)[1:-1]) for m in metrics]  # checked ids, usable in column names
    deltas = ", ".join(f"{c}_b - {c}_a AS {c}_delta" for _, c in per_metric)
    totals = ", ".join(f"count({c}_delta) AS {c}_n, avg({c}_delta) AS {c}_mean_delta" for _, c in per_metric)
    state = (
        f"CASE WHEN status <> 'ok' OR value IS NULL OR value NOT IN (0, 1) THEN 'failed' "
        f"WHEN {unsure_sql(band)} THEN 'unsure' WHEN value = 1 THEN 'yes' ELSE 'no' END"
    )
    return store.query(
        path,
        f"""WITH pairs AS MATERIALIZED (
            SELECT item_id, a.sources AS sa, b.sources AS sb FROM items a JOIN items b USING (item_id)
            WHERE a.run_id = $a AND b.run_id = $b AND a.sources IS DISTINCT FROM b.sources),
        listed AS (SELECT 'a' AS side, item_id, unnest(sa) AS text, generate_subscripts(sa, 1) - 1 AS idx FROM pairs
                   UNION ALL
                   SELECT 'b', item_id, unnest(sb), generate_subscripts(sb, 1) - 1 FROM pairs),
        normed AS (SELECT *, {norm_sql("text")} AS norm FROM listed),
        hashed AS MATERIALIZED (SELECT side, item_id, idx, norm, hash(norm) AS h FROM normed),
        moved AS MATERIALIZED (  -- matched by a 64-bit hash; keys and names are made for the rows shown only
            SELECT k.side, k.item_id, k.idx, k.norm
            FROM hashed k ANTI JOIN hashed o ON o.item_id = k.item_id AND o.side <> k.side AND o.h = k.h),
        shown AS MATERIALIZED (SELECT * FROM moved ORDER BY item_id, side, idx LIMIT {int(limit)}),
        sp1 AS (SELECT CASE WHEN run_id = $a THEN 'a' ELSE 'b' END AS side, item_id, component_idx AS idx,
                       {state} AS sp1
                FROM verdicts WHERE run_id IN ($a, $b) AND metric = 'sp1' AND component_kind = 'source'
                  AND item_id IN (SELECT item_id FROM shown)),
        scored AS MATERIALIZED (
            SELECT *, {deltas}
            FROM (SELECT DISTINCT item_id FROM moved) LEFT JOIN ({_side_scores_sql("a", per_metric, band, corrected)})
                 USING (item_id) LEFT JOIN ({_side_scores_sql("b", per_metric, band, corrected)}) USING (item_id)),
        totals AS (SELECT count(*) AS n_items, {totals} FROM scored),
        counts AS (SELECT count(*) FILTER (WHERE side = 'a') AS n_dropped, count(*) FILTER (WHERE side = 'b') AS n_added
                   FROM moved)
        SELECT m.item_id, CASE m.side WHEN 'a' THEN 'dropped' ELSE 'added' END AS change, m.idx,
               {key_sql("m.norm")} AS key, {name_sql("m.norm")} AS name, v.sp1, s.* EXCLUDE (item_id), t.*, c.*
        FROM shown m JOIN scored s USING (item_id) LEFT JOIN sp1 v USING (side, item_id, idx)
             CROSS JOIN totals t CROSS JOIN counts c
        ORDER BY m.item_id, m.side, m.idx""",
        {"a": run_a, "b": run_b},
    )
