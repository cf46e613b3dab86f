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
    """The mean of the verdicts' p, for a metric whose aggregate is a mean (ref_f1: the F1 of its two
    sides' expected values); None for any other metric, or when a verdict the judge answered has no p
    (a rating, a label without probability). n_scored counts the verdicts whose p was read; a score
    with none reads their failure status, as the score does."""
    spec = registry.METRICS.get(metric)
    if spec is None or spec.aggregate not in (thelma.aggregate_mean, reference.aggregate_f1):
        return None
    judged = [v for v in verdicts if v.status in _JUDGED]
    if any(v.p is None or v.value not in (0.0, 1.0, None) for v in judged):  # None: unsure (thelma.with_band)
        return None
    sides = [verdicts]
    if spec.aggregate is reference.aggregate_f1:
        sides = [
            [v for v in verdicts if (v.component_kind in reference.RECALL_KINDS) is recall] for recall in (False, True)
        ]
    means = [_mean_p([v for v in side if v.status in _JUDGED]) for side in sides]
    missing = [side for side, mean in zip(sides, means) if mean is None]
    if missing:  # a side with no p reads its failure, as the score does
        return Score(item_id, metric, None, 0, len(verdicts), thelma.failure_status(missing[0]))
    read = [mean for mean in means if mean is not None]
    value = read[0] if len(read) == 1 else reference.f1(*read)
    return Score(item_id, metric, value, len(judged), len(verdicts), Status.OK)


def _mean_p(verdicts: Sequence[Verdict]) -> float | None:
    ps = [v.p for v in verdicts if v.p is not None]
    return sum(ps) / len(ps) if ps else None


def expected_scores(verdicts: Sequence[Verdict]) -> dict[tuple[str, str], Score]:
    """expected() of every (item, metric) these verdicts hold that has one."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        groups.setdefault((v.item_id, v.metric), []).append(v)
    scores = {key: expected(*key, group) for key, group in groups.items()}
    return {key: score for key, score in scores.items() if score is not None}
