"""Trends: metric means with bootstrap intervals over runs in time order, or over time buckets of one
run's items, each compared with a chosen baseline point. Pure: the counts come grouped from
queries.trends.trend_scores / queries.trends.trend_buckets.

A change against the baseline is real, as in Compare, when its 95% interval excludes 0. Two runs that
scored exactly the same items are compared with the paired bootstrap of per-item deltas (Compare's
test); otherwise (different items, or time buckets, which never share an item) the two means are
resampled independently: the unpaired bootstrap of the difference of means.
"""

from __future__ import annotations

from typing import Sequence, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from evaluators.core.stats import RESAMPLES, SEED, Interval, bootstrap_ci

PAIRED, UNPAIRED = "paired", "unpaired"
UNITS = ("day", "week")
POINT_COLUMNS = [
    "point",
    "metric",
    "mean",
    "low",
    "high",
    "n_scored",
    "n_total",
    "delta",
    "delta_low",
    "delta_high",
    "real",
    "test",
    "baseline",
]


def unpaired_diff_ci(
    before: tuple[npt.ArrayLike, npt.ArrayLike],
    after: tuple[npt.ArrayLike, npt.ArrayLike],
    *,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval | None:
    """Bootstrap interval of mean(after) - mean(before) with each side resampled on its own, from
    (values, counts) tables; None when either side has nothing scored."""
    sides = []
    for values, counts in (before, after):
        vals, cnts = np.asarray(values, dtype=float), np.asarray(counts, dtype=np.int64)
        keep = (cnts > 0) & ~np.isnan(vals)
        vals, cnts = vals[keep], cnts[keep]
        if cnts.sum() == 0:
            return None
        sides.append((vals, cnts, int(cnts.sum())))
    rng = np.random.default_rng(seed)
    means = [rng.multinomial(n, cnts / n, size=resamples) @ vals / n for vals, cnts, n in sides]
    diffs = means[1] - means[0]
    (va, ca, na), (vb, cb, nb) = sides
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return Interval(float(vb @ cb / nb - va @ ca / na), float(low), float(high), na + nb)


def points(
    dist: pd.DataFrame,
    totals: pd.DataFrame,
    order: Sequence[str],
    baseline: str | None,
    pairs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per point (run or bucket) and metric: the mean and its interval, "n scored of N", and
    the change against `baseline` with its interval, whether it is real and which test gave it.

    dist: point, metric, value, n (scored values, grouped); totals: point, n_items (N per point);
    pairs: point, metric, delta, n (per-item deltas against the baseline, for points that share items
    with it) and n_pairs; a point whose pairs cover every item both it and the baseline scored is
    compared paired, any other unpaired. The baseline itself has no change.
    """
    n_items = dict(zip(totals["point"], totals["n_items"]))
    groups = {
        cast(tuple[str, str], key): (g["value"].to_numpy(float), g["n"].to_numpy(np.int64))
        for key, g in dist.groupby(["point", "metric"])
    }
    paired = {
        cast(tuple[str, str], key): (g["delta"].to_numpy(float), g["n"].to_numpy(np.int64))
        for key, g in (pairs if pairs is not None else pd.DataFrame(columns=["point", "metric", "delta", "n"])).groupby(
            ["point", "metric"]
        )
    }
    rows = []
    for point in order:
        for metric in sorted({m for p, m in groups if p == point} | {m for p, m in groups if p == baseline}):
            values, counts = groups.get((point, metric), (np.array([]), np.array([], dtype=np.int64)))
            ci = bootstrap_ci(values, counts)
            change, test = None, None
            if baseline is not None and point != baseline and (baseline, metric) in groups and ci is not None:
                n_base = int(groups[(baseline, metric)][1].sum())
                deltas = paired.get((point, metric))
                if deltas is not None and int(deltas[1].sum()) == n_base == ci.n:
                    change, test = bootstrap_ci(*deltas), PAIRED
                else:
                    change, test = unpaired_diff_ci(groups[(baseline, metric)], (values, counts)), UNPAIRED
            rows.append(
                {
                    "point": point,
                    "metric": metric,
                    "mean": None if ci is None else ci.mean,
                    "low": None if ci is None else ci.low,
                    "high": None if ci is None else ci.high,
                    "n_scored": 0 if ci is None else ci.n,
                    "n_total": int(n_items.get(point, 0)),
                    "delta": None if change is None else change.mean,
                    "delta_low": None if change is None else change.low,
                    "delta_high": None if change is None else change.high,
                    "real": bool(change is not None and change.excludes_zero),
                    "test": test,
                    "baseline": point == baseline,
                }
            )
    return pd.DataFrame(rows, columns=POINT_COLUMNS)
