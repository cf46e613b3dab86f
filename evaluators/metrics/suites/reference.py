"""Reference-based metrics (ours, not THELMA's), for owners who keep golden answers.

Metric ids:
    ref_precision  share of the response's claims that the reference supports
    ref_recall     share of the reference's claims that the response supports
    ref_f1         the harmonic mean of the two

They are THELMA's Decompose, Match and Aggregate steps with THELMA's prompts. The response claims
are the B.1 decomposition that RP and GR share (one per item); the reference is decomposed with the
same prompt. Each claim is matched with B.4 (`groundedness`), whose knowledge source is the reference
for precision and the response for recall, so every verdict carries p, its kind and tier as GR's do
(the offline judge's support curve) and is unsure at the same band. RAGChecker calls the first two
answer precision and recall; RAGAS's answer correctness (an F-score of statements against the
reference) is the nearest peer.

ref_f1's verdicts are both sides' verdicts again, under its own id, so it re-aggregates at any band
from what is stored, as every metric does. It has a value only when both sides have one: a side that
is empty (no claims), failed or unsure leaves it without a value, with that side's status (unsure
first), never a silent 0. Two decided sides of 0 give a real 0.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Sequence

from evaluators.core.records import CLAIM, Score, Status, Verdict
from evaluators.metrics.suites.common import decompose
from evaluators.metrics.thelma import ItemWork, Metric, aggregate_mean, expected_mean, judge_support

PRECISION, RECALL, F1 = "ref_precision", "ref_recall", "ref_f1"  # the ids
REFERENCE_CLAIM = "reference_claim"  # B.1 claims of the reference (component kind)
# The verdict kinds on ref_f1's recall side: the reference's claims, and the reference itself when it
# states nothing (metrics.nothing_to_judge names the text). Every other verdict is on the precision side.
RECALL_KINDS: tuple[str, ...] = (REFERENCE_CLAIM, "reference")


# ---------------------------------------------------------------- pure aggregation


def f1(precision: float, recall: float) -> float:
    """The harmonic mean of precision and recall; 0 when both are 0."""
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def aggregate_f1(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """F1 of the mean of the precision side's verdicts and the mean of the recall side's.

    n_scored, n_total and n_unsure count both sides' verdicts. With a side that has no value the score
    has none either: its status is unsure when a side without a value is unsure, else that side's
    status (precision's first).
    """
    recall = [v for v in verdicts if v.component_kind in RECALL_KINDS]
    precision = [v for v in verdicts if v.component_kind not in RECALL_KINDS]
    sides = [aggregate_mean(item_id, metric, side) for side in (precision, recall)]
    n_scored, n_unsure = sum(s.n_scored for s in sides), sum(s.n_unsure for s in sides)
    p, r = sides[0].value, sides[1].value
    if p is not None and r is not None:
        return Score(item_id, metric, f1(p, r), n_scored, len(verdicts), Status.OK, n_unsure)
    missing = [s.status for s in sides if s.value is None]
    status = Status.UNSURE if Status.UNSURE in missing else missing[0]
    return Score(item_id, metric, None, n_scored, len(verdicts), status, n_unsure)


def expected_f1(verdicts: Sequence[Verdict]) -> float | None:
    """ref_f1's expected value: the F1 of its two sides' expected values; None when a side has none."""
    recall = [v for v in verdicts if v.component_kind in RECALL_KINDS]
    precision = [v for v in verdicts if v.component_kind not in RECALL_KINDS]
    p, r = expected_mean(precision), expected_mean(recall)
    return None if p is None or r is None else f1(p, r)


# ---------------------------------------------------------------- match steps


async def match_precision(work: ItemWork) -> list[Verdict]:
    """ref_precision: is each claim of the response (shared with RP and GR) supported by the reference?
    Judged once per item, for ref_f1 too."""

    async def make() -> list[Verdict]:
        claims = await work.claims()
        if not isinstance(claims, list):
            return work.decompose_failure(PRECISION, CLAIM, claims)
        return await judge_support(work, PRECISION, CLAIM, claims, work.item.reference or "", "reference")

    return await work.once("reference:precision", make)


async def match_recall(work: ItemWork) -> list[Verdict]:
    """ref_recall: is each claim of the reference supported by the response? Judged once per item."""

    async def make() -> list[Verdict]:
        claims = await decompose(work, "reference_claims", REFERENCE_CLAIM, "claims", input=work.item.reference)
        if not isinstance(claims, list):
            return work.decompose_failure(RECALL, REFERENCE_CLAIM, claims)
        return await judge_support(work, RECALL, REFERENCE_CLAIM, claims, work.item.response, "response")

    return await work.once("reference:recall", make)


async def match_f1(work: ItemWork) -> list[Verdict]:
    """ref_f1: both sides' verdicts, under its own id."""
    sides = await asyncio.gather(match_precision(work), match_recall(work))
    return [replace(v, metric=F1) for side in sides for v in side]


_PROMPTS = ("claims", "groundedness", "groundedness_batch")
_READS = ("response", "reference")

REF_PRECISION = Metric(
    PRECISION,
    "Reference precision: response claims the reference supports (ours)",
    match_precision,
    needs_reference=True,
    prompts=_PROMPTS,
    reads=_READS,
    description="Reference precision (ours): share of the response's claims the reference supports",
)
REF_RECALL = Metric(
    RECALL,
    "Reference recall: reference claims the response supports (ours)",
    match_recall,
    needs_reference=True,
    prompts=_PROMPTS,
    reads=_READS,
    description="Reference recall (ours): share of the reference's claims the response supports",
)
REF_F1 = Metric(
    F1,
    "Reference F1 of precision and recall (ours)",
    match_f1,
    aggregate_f1,
    expected=expected_f1,
    needs_reference=True,
    prompts=_PROMPTS,
    reads=_READS,
    description="Reference F1 (ours): harmonic mean of reference precision and recall",
)
