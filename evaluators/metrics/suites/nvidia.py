"""Nvidia (seed 001): answer accuracy, context relevance and groundedness, each rated by two templates.

Metric ids:
    nv_answer_accuracy    agreement with the reference, 2 templates rated 0/2/4 (roles swapped), averaged
    nv_context_relevance  relevance of the retrieved context to the query, 2 templates rated 0/1/2
    nv_groundedness       grounding of the response in the context, 2 templates rated 0/1/2
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from evaluators.core.records import Status, Verdict
from evaluators.judges.prompts import BARE_REPLY
from evaluators.metrics.suites.common import unsteered
from evaluators.metrics.thelma import ItemWork, Metric

RATING = "rating"  # component kind of one template's rating (verdicts only)


def normalise_rating(rating: float, top: int) -> float:
    """A rating on 0..top as a value in [0, 1]."""
    return float(rating) / top


async def _dual_rating(
    work: ItemWork, metric: str, top: int, asks: Sequence[tuple[str, dict[str, Any], str]]
) -> list[Verdict]:
    """One verdict per template, value = rating / top, the raw rating kept as the evidence; each template
    reads the texts with their sentences addressed to the judge left out (common.unsteered)."""
    cleaned = [unsteered(variables) for _, variables, _ in asks]
    answers = await asyncio.gather(*(work.judge.ask(prompt, **v) for (prompt, _, _), (v, _) in zip(asks, cleaned)))
    out: list[Verdict] = []
    for k, ((_, _, what), answer, (_, left)) in enumerate(zip(asks, answers, cleaned)):
        if answer.status is Status.OK:
            bare = f"; {BARE_REPLY}" if answer.detail == BARE_REPLY else ""
            bare += left
            out.append(
                work.verdict(
                    metric,
                    RATING,
                    k,
                    f"template:{k + 1}",
                    answer,
                    value=normalise_rating(answer.value, top),
                    prob=float(answer.value),
                    detail=f"rating {answer.value} of {top} ({what}{bare})",
                )
            )
        else:
            out.append(work.verdict(metric, RATING, k, f"template:{k + 1}", answer))
    return out


async def match_answer_accuracy(work: ItemWork) -> list[Verdict]:
    """Two templates rated 0/2/4; the second sees the reference as the answer to rate (roles swapped)."""
    item = work.item
    return await _dual_rating(
        work,
        "nv_answer_accuracy",
        4,
        [
            (
                "nv_answer_accuracy_1",
                dict(query=item.query, response=item.response, reference=item.reference),
                "response rated against the reference",
            ),
            (
                "nv_answer_accuracy_2",
                dict(query=item.query, response=item.reference, reference=item.response),
                "roles swapped: reference rated against the response",
            ),
        ],
    )


async def match_context_relevance(work: ItemWork) -> list[Verdict]:
    """Two templates rate the whole retrieved context's relevance to the query, 0/1/2."""
    variables = dict(query=work.item.query, sources=list(work.item.sources))
    return await _dual_rating(
        work,
        "nv_context_relevance",
        2,
        [
            ("nv_context_relevance_1", variables, "context relevance, template 1"),
            ("nv_context_relevance_2", variables, "context relevance, template 2"),
        ],
    )


async def match_groundedness(work: ItemWork) -> list[Verdict]:
    """Two templates rate how well the context supports the response, 0/1/2."""
    variables = dict(sources=list(work.item.sources), response=work.item.response)
    return await _dual_rating(
        work,
        "nv_groundedness",
        2,
        [
            ("nv_groundedness_1", variables, "groundedness, template 1"),
            ("nv_groundedness_2", variables, "groundedness, template 2"),
        ],
    )


def _two(prompt: str) -> tuple[str, str]:
    return f"{prompt}_1", f"{prompt}_2"


ANSWER_ACCURACY = Metric(
    "nv_answer_accuracy",
    "Nvidia answer accuracy",
    match_answer_accuracy,
    needs_reference=True,
    prompts=_two("nv_answer_accuracy"),
    reads=("response", "reference"),
    description="Nvidia answer accuracy: 2 templates rated 0/2/4 against the reference (roles swapped), averaged",
)
CONTEXT_RELEVANCE = Metric(
    "nv_context_relevance",
    "Nvidia context relevance",
    match_context_relevance,
    prompts=_two("nv_context_relevance"),
    reads=("query",),
    description="Nvidia context relevance: 2 templates rate the context's relevance 0/1/2, averaged",
)
GROUNDEDNESS = Metric(
    "nv_groundedness",
    "Nvidia groundedness",
    match_groundedness,
    prompts=_two("nv_groundedness"),
    reads=("response",),
    description="Nvidia response groundedness: 2 templates rate the response's grounding 0/1/2, averaged",
)
