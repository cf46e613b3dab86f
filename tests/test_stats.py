"""Bootstrap intervals for headline means and Compare deltas (evaluators/core/stats.py)."""
from __future__ import annotations

import numpy as np
import pytest

from evaluators.core.stats import bootstrap_ci, paired_bootstrap_ci


def test_nothing_scored_has_no_interval() -> None:
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([0.5], [0]) is None
    assert bootstrap_ci([float("nan")]) is None


def test_constant_scores_give_a_zero_width_interval() -> None:
    ci = bootstrap_ci([1.0], [500])
    assert (ci.mean, ci.low, ci.high, ci.n) == (1.0, 1.0, 1.0, 500)
    assert ci.excludes_zero


def test_grouped_counts_equal_the_expanded_sample() -> None:
    """(value, count) input is the bootstrap of the repeated values."""
    grouped = bootstrap_ci([0.0, 0.5, 1.0], [30, 20, 50])
    expanded = bootstrap_ci(np.repeat([0.0, 0.5, 1.0], [30, 20, 50]).tolist())
    assert grouped.mean == pytest.approx(0.6)
    # Different random streams, same distribution: the intervals agree to Monte-Carlo error.
    assert grouped.low == pytest.approx(expanded.low, abs=0.02)
    assert grouped.high == pytest.approx(expanded.high, abs=0.02)


def test_interval_matches_a_plain_index_bootstrap() -> None:
    rng = np.random.default_rng(1)
    values = rng.choice([0.0, 1 / 3, 2 / 3, 1.0], size=400, p=[0.2, 0.2, 0.3, 0.3])
    ci = bootstrap_ci(*np.unique(values, return_counts=True))
    means = [values[rng.integers(0, len(values), len(values))].mean() for _ in range(2000)]
    low, high = np.percentile(means, [2.5, 97.5])
    assert ci.low == pytest.approx(low, abs=0.01) and ci.high == pytest.approx(high, abs=0.01)
    assert ci.low < ci.mean < ci.high


def test_seeded_and_deterministic() -> None:
    assert bootstrap_ci([0, 1], [7, 9]) == bootstrap_ci([0, 1], [7, 9])


def test_interval_narrows_with_more_items() -> None:
    small = bootstrap_ci([0.0, 1.0], [10, 10])
    large = bootstrap_ci([0.0, 1.0], [1000, 1000])
    assert (large.high - large.low) < (small.high - small.low) / 5


def test_paired_delta_real_only_when_interval_excludes_zero() -> None:
    rng = np.random.default_rng(7)
    before = rng.choice([0.0, 0.5, 1.0], size=300)
    improved = np.clip(before + rng.choice([0.0, 0.5], size=300, p=[0.6, 0.4]), 0, 1)
    noise = rng.permutation(before)
    real = paired_bootstrap_ci(before, improved)
    assert real.mean > 0 and real.excludes_zero
    null = paired_bootstrap_ci(before, noise)
    assert null.low < 0 < null.high and not null.excludes_zero


def test_paired_bootstrap_uses_the_pairing() -> None:
    """A small shift on items that vary a lot is real when paired, though unpaired means overlap."""
    before = np.linspace(0, 1, 200)
    after = np.clip(before + 0.02, 0, 1)
    assert paired_bootstrap_ci(before, after).excludes_zero
    a, b = bootstrap_ci(before), bootstrap_ci(after)
    assert a.high > b.low  # the unpaired intervals overlap
