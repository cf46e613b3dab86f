"""A score's expected value under the judge's probabilities: ours, shown beside a score, never in it.

A mean score (GR, RP, ref_precision, ...) is the share of an item's decided 0/1 verdicts that are 1. With
one claim it is 0 or 1, and a claim the judge is unsure of drops out. Every binary verdict keeps
p = P(match is 1), calibrated on development data, so the share the judge expects is the mean of the
verdicts' p, unsure ones included. It orders answers more as people do than the 0/1 share does
(README, "Agreement with people"). The Item page shows it and benchmarks/people.py measures it; no
Table-2 rule, gate, trend or run aggregate reads it.
"""

from __future__ import annotations

from typing import Sequence

from evaluators.core.records import Score, Status, Verdict
from evaluators.metrics import registry, thelma
from evaluators.metrics.suites import reference

_JUDGED = (Status.OK, Status.UNSURE)  # the judge answered; a failure has no p


def expected(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score | None:
    """The expected value as a Score (thelma.expected_of), with the verdicts whose p it read as n_scored; None
    for a metric with none, or when a verdict the judge answered has no p (a rating, a label without
    probability). A score with nothing to read (ref_f1: a side with nothing) reads a failure status, as
    the score does."""
    spec = registry.METRICS.get(metric)
    if spec is None or (spec.expected is None and spec.aggregate is not thelma.aggregate_mean):
        return None
    judged = [v for v in verdicts if v.status in _JUDGED]
    if any(v.p is None or v.value not in (0.0, 1.0, None) for v in judged):  # None: unsure (thelma.with_band)
        return None
    value = thelma.expected_of(spec, verdicts)
    if value is None:  # a side with no p reads its failure, as the score does
        sides = [verdicts]
        if spec.expected is reference.expected_f1:
            sides = [[v for v in verdicts if (v.component_kind in reference.RECALL_KINDS) is r] for r in (False, True)]
        missing = next(side for side in sides if not any(v.status in _JUDGED for v in side))
        return Score(item_id, metric, None, 0, len(verdicts), thelma.failure_status(missing))
    return Score(item_id, metric, value, len(judged), len(verdicts), Status.OK, expected=value)


def expected_scores(verdicts: Sequence[Verdict]) -> dict[tuple[str, str], Score]:
    """expected() of every (item, metric) these verdicts hold that has one."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        groups.setdefault((v.item_id, v.metric), []).append(v)
    scores = {key: expected(*key, group) for key, group in groups.items()}
    return {key: score for key, score in scores.items() if score is not None}
