"""Bootstrap confidence intervals for the dashboard: pure numpy, seeded, so a link shows the same numbers.

Scores take few distinct values (k/n fractions), and the store returns them grouped as (value, count).
Resampling n items with replacement from such a table is the same as drawing the counts from a
multinomial, so a 1000-resample bootstrap over 100k items costs 1000 draws over the distinct values
instead of 10^8 index lookups. A paired bootstrap of a difference is the bootstrap of the per-item
deltas, so Compare uses the same function on the (delta, count) table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

RESAMPLES = 1000
SEED = 20261122


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap interval over n observations."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0: the change counts as real."""
        return self.low > 0 or self.high < 0


def bootstrap_ci(
    values: npt.ArrayLike,
    counts: npt.ArrayLike | None = None,
    *,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval | None:
    """Percentile bootstrap interval of the mean of `values`, each repeated `counts` times.

    Returns None when there is nothing to average: an unscored metric has no interval, not a 0.
    """
    vals = np.asarray(values, dtype=float)
    cnts = np.ones(len(vals), dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    keep = (cnts > 0) & ~np.isnan(vals)
    vals, cnts = vals[keep], cnts[keep]
    n = int(cnts.sum())
    if n == 0:
        return None
    mean = float(vals @ cnts / n)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, cnts / n, size=resamples)  # (resamples, distinct values)
    means = draws @ vals / n
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(mean, float(low), float(high), n)


def paired_bootstrap_ci(before: Sequence[float], after: Sequence[float], **kwargs: Any) -> Interval | None:
    """Paired bootstrap interval of mean(after - before) over aligned items (for raw, ungrouped arrays)."""
    deltas = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    values, counts = np.unique(deltas[~np.isnan(deltas)], return_counts=True)
    return bootstrap_ci(values, counts, **kwargs)
