"""The SQL the named reads share: the uncertainty band applied on read (which verdicts are unsure,
scores recomputed at a band, when a score is decided enough for Table 2), thresholds, run tables and
parameters.

Metric ids become SQL identifiers only through wide.column(), which checks them; thresholds are
checked finite floats; every other value is a query parameter.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Sequence, cast

import pandas as pd

from evaluators.core.confidence import DEFAULT_BANDS, LABEL, Band, band_for
from evaluators.core.records import Score
from evaluators.metrics import registry
from evaluators.metrics.diagnosis import MAX_UNSURE_SHARE, MIN_SCORED
from evaluators.metrics.registry import THELMA, order_metrics
from evaluators.metrics.suites import reference
from evaluators.metrics.thelma import aggregate_coverage, aggregate_mean
from evaluators.storage import store
from evaluators.storage.wide import column, count_column


# How scores_sql() recomputes a metric at another band: the mean of its verdicts, SQC's coverage
# (folded per sub-question) or the F1 of two means (ref_f1); any other aggregate keeps its stored score.
def aggregated_by(aggregate: Callable[..., Score]) -> list[str]:
    """The metrics whose aggregate is this one, in registry order."""
    return [m for m, spec in registry.METRICS.items() if spec.aggregate is aggregate]


SQL_OPERATORS: dict[Callable[[float, float], bool], str] = {operator.lt: "<", operator.ge: ">="}


RunTable = pd.DataFrame | store.StoredRun  # a run table: stored in the file, or recomputed in memory


def number_sql(x: float) -> str:
    return f"{float(x)!r}::DOUBLE"


def unsure_sql(band: Band | None = None) -> str:
    """metrics.is_unsure_verdict over a verdicts row (status, value, p, p_kind) as SQL: TRUE when the
    verdict is unsure at `band` (None: each kind's default band), FALSE otherwise, never NULL."""
    kinds = " ".join(
        f"WHEN '{kind}' THEN p > {number_sql(lo)} AND p < {number_sql(hi)}"
        for kind in DEFAULT_BANDS
        if kind != LABEL
        for lo, hi in [band_for(kind, band)]
    )
    return (
        f"(status = 'ok' AND value IN (0, 1) AND p IS NOT NULL AND coalesce(CASE p_kind {kinds} ELSE FALSE END, FALSE))"
    )


def ids_sql(metrics: Sequence[str]) -> str:
    return "(" + ", ".join(f"'{column(m)[1:-1]}'" for m in metrics) + ")" if metrics else "(NULL)"


def scores_sql(band: Band | None = None, corrected: bool = False, one_item: bool = False) -> str:
    """The scores of run $run recomputed from its verdicts at `band`, as a relation with the scores
    table's columns: metrics.aggregate() in one generated SQL (tests/test_queries.py holds them equal).

    None reads the stored table, which the runner wrote at the default bands. Metrics whose aggregate
    is a mean, SQC's coverage or ref_f1's F1 are recomputed; any other (a rank-weighted precision, a
    metric this version does not know) keeps its stored score. Unsure verdicts are left out like
    failures; a score with nothing scored reads `unsure` when any verdict was unsure, else its most
    common failure (an F1: as reference.aggregate_f1 reads its two sides).
    `corrected`: every verdict of a component people corrected (the latest label) takes their value
    as a decided verdict (labelling.corrected_verdicts in Python); the raw scores never change.
    `one_item`: only item $item's scores, its filter inside every scan (DuckDB would recompute the whole
    run before filtering the relation: a third of a second at a million items).
    """
    if band is None and not corrected:
        return "scores"
    mean, cover = aggregated_by(aggregate_mean), aggregated_by(aggregate_coverage)
    f1 = aggregated_by(reference.aggregate_f1)
    failure = "first(state ORDER BY n DESC, state) FILTER (WHERE state NOT IN ('ok', 'unsure'))"
    # A mean's columns from per-state counts: value, n_scored, n_total, n_unsure and status.
    mean_of = f"""sum(total) FILTER (WHERE state = 'ok') / sum(n) FILTER (WHERE state = 'ok') AS value,
                  coalesce(sum(n) FILTER (WHERE state = 'ok'), 0) AS n_scored, sum(n) AS n_total,
                  coalesce(sum(n) FILTER (WHERE state = 'unsure'), 0) AS n_unsure,
                  CASE WHEN sum(n) FILTER (WHERE state = 'ok') > 0 THEN 'ok'
                       WHEN sum(n) FILTER (WHERE state = 'unsure') > 0 THEN 'unsure'
                       ELSE coalesce({failure}, 'empty') END AS status"""
    item = " AND item_id = $item" if one_item else ""
    return f"""(WITH v AS ({_judged_sql(band, corrected, mean + cover + f1, item)}),
        -- SQC folds each sub-question first: a confident 1 covers; all confident: 0; else unsure or failed
        per_state AS (SELECT item_id, metric, component_idx, state, count(*) AS n, bool_or(value = 1) AS has_one
                      FROM v WHERE metric IN {ids_sql(cover)} GROUP BY ALL),
        folded AS (SELECT item_id, metric,
                          CASE WHEN bool_or(state = 'ok' AND has_one) THEN 1.0
                               WHEN bool_and(state = 'ok') THEN 0.0 END AS value,
                          CASE WHEN bool_or(state = 'ok' AND has_one) OR bool_and(state = 'ok') THEN 'ok'
                               WHEN bool_or(state = 'unsure') THEN 'unsure' ELSE {failure} END AS state
                   FROM per_state GROUP BY item_id, metric, component_idx),
        units AS (SELECT item_id, metric, value, state FROM v WHERE metric IN {ids_sql(mean)}
                  UNION ALL SELECT item_id, metric, value, state FROM folded),
        per_metric AS (SELECT item_id, metric, state, count(*) AS n, sum(value) AS total FROM units GROUP BY ALL),
        means AS (SELECT item_id, metric, {mean_of} FROM per_metric GROUP BY item_id, metric),
        {_f1_ctes(mean_of, f1)},
        banded AS (SELECT item_id, metric, value, n_scored, n_total, n_unsure, status FROM means
                   UNION ALL SELECT item_id, metric, value, n_scored, n_total, n_unsure, status FROM f1s)
        SELECT s.run_id, s.item_id, s.metric,
               CASE WHEN b.metric IS NULL THEN s.value ELSE b.value END AS value,
               CASE WHEN b.metric IS NULL THEN s.n_scored ELSE b.n_scored END::INTEGER AS n_scored,
               CASE WHEN b.metric IS NULL THEN s.n_total ELSE b.n_total END::INTEGER AS n_total,
               CASE WHEN b.metric IS NULL THEN s.status ELSE b.status END AS status,
               CASE WHEN b.metric IS NULL THEN coalesce(s.n_unsure, 0) ELSE b.n_unsure END::INTEGER AS n_unsure,
               s.expected  -- the same at every band
        FROM scores s LEFT JOIN banded b ON b.item_id = s.item_id AND b.metric = s.metric
        WHERE s.run_id = $run{" AND s.item_id = $item" if one_item else ""}) AS banded_scores"""


def _judged_sql(band: Band | None, corrected: bool, metrics: Sequence[str], item: str = "") -> str:
    """The verdicts of run $run for these metrics with their state at `band` (ok, unsure or the failure);
    `corrected`: a component people corrected takes their latest label as a decided value; `item`: a
    further filter on item_id."""
    judged = f"""SELECT item_id, metric, component_kind, component_idx, value,
                   CASE WHEN status <> 'ok' THEN status WHEN {unsure_sql(band)} THEN 'unsure' ELSE 'ok' END AS state
            FROM verdicts WHERE run_id = $run{item} AND metric IN {ids_sql(metrics)}"""
    if not corrected:
        return judged
    return f"""SELECT j.item_id, j.metric, j.component_kind, j.component_idx,
                   coalesce(c.label::DOUBLE, j.value) AS value,
                   CASE WHEN c.label IS NOT NULL THEN 'ok' ELSE j.state END AS state
            FROM ({judged}) j LEFT JOIN (
                SELECT item_id, metric, component_idx, arg_max(label, created_at) AS label FROM labels
                WHERE run_id = $run{item} AND metric IS NOT NULL GROUP BY ALL) c USING (item_id, metric, component_idx)"""


def _f1_ctes(mean_of: str, f1: Sequence[str]) -> str:
    """CTEs ending in `f1s`: ref_f1 as a mean per side of `v` (the reference's claims, or the response's),
    then their F1; a side without a value leaves none, with its status (unsure first, then precision's)."""
    recall_kinds = ", ".join(f"'{k}'" for k in reference.RECALL_KINDS)
    return f"""sides AS (SELECT item_id, metric, CASE WHEN component_kind IN ({recall_kinds}) THEN 'r' ELSE 'p' END AS side,
                         state, count(*) AS n, sum(value) AS total FROM v WHERE metric IN {ids_sql(f1)} GROUP BY ALL),
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
                            WHEN p IS NULL THEN p_status ELSE r_status END AS status FROM pr)"""


def decided_sql(metric: str) -> str:
    """diagnosis.decided() for one metric of a run table, as SQL over its count columns."""
    scored, unsure = count_column(metric, "scored"), count_column(metric, "unsure")
    return f"({scored} >= {int(MIN_SCORED)} AND {unsure} <= {number_sql(MAX_UNSURE_SHARE)} * ({scored} + {unsure}))"


def threshold_sql(thresholds: Mapping[str, float], metric: str) -> str:
    """A metric's threshold as a SQL literal: the given one, else Table 2's default, else 0.5."""
    value = float(thresholds.get(metric, registry.threshold(metric)))
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"threshold for {metric} is not finite")
    return repr(value)


def json_pointer(key: str) -> str:
    """A JSON pointer to a top-level field: any key (quotes, dots, slashes) without quoting rules."""
    return "/" + key.replace("~", "~0").replace("/", "~1")


def ids_frame(item_ids: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({"item_id": pd.Series(list(item_ids), dtype=object)})


def run_columns(metrics: Sequence[str]) -> list[str]:
    """The metric columns of a run table: THELMA's seven always, then `metrics`, in display order."""
    return order_metrics([*metrics, *THELMA])


def rows(frame: pd.DataFrame) -> Iterable[Any]:
    """A read's rows as named tuples (row.metric, row.n), its fields typed Any: a read's columns are
    known by name, not by the frame's type."""
    return frame.itertuples(index=False)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A read's rows as dicts by column name."""
    return cast(list[dict[str, Any]], frame.to_dict("records"))
