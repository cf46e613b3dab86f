"""Nvidia (seed 001): answer accuracy, context relevance and groundedness, each rated by two templates.

Metric ids:
    nv_answer_accuracy    agreement with the reference, 2 templates rated 0/2/4 (roles swapped), averaged
    nv_context_relevance  relevance of the retrieved context to the query, 2 templates rated 0/1/2
    nv_groundedness       grounding of the response in the context, 2 templates rated 0/1/2
"""
from __future__ import annotations

import asyncio
from typing import Any, Sequence

from evaluators.core.records import Answer, Status, Verdict
from evaluators.core.text import has_content, split_claims, split_questions
from evaluators.judges.evidence import covers
from evaluators.judges.prompts import BARE_REPLY
from evaluators.metrics.suites.common import knowledge, mean, rating_parser, supported_share
from evaluators.metrics.thelma import ItemWork, Metric

RATING = "rating"  # component kind of one template's rating (verdicts only)

parse_accuracy = rating_parser((0, 2, 4))
parse_rating = rating_parser((0, 1, 2))


def normalise_rating(rating: float, top: int) -> float:
    """A rating on 0..top as a value in [0, 1]."""
    return float(rating) / top


async def _dual_rating(work: ItemWork, metric: str, top: int,
                       asks: Sequence[tuple[str, dict[str, Any], str]]) -> list[Verdict]:
    """One verdict per template, value = rating / top, the raw rating kept as the evidence."""
    answers = await asyncio.gather(*(work.judge.ask(prompt, **variables) for prompt, variables, _ in asks))
    out: list[Verdict] = []
    for k, ((_, _, what), answer) in enumerate(zip(asks, answers)):
        if answer.status is Status.OK:
            bare = f"; {BARE_REPLY}" if answer.detail == BARE_REPLY else ""
            out.append(work.verdict(metric, RATING, k, f"template:{k + 1}", answer,
                                    value=normalise_rating(answer.value, top), prob=float(answer.value),
                                    detail=f"rating {answer.value} of {top} ({what}{bare})"))
        else:
            out.append(work.verdict(metric, RATING, k, f"template:{k + 1}", answer))
    return out


async def match_answer_accuracy(work: ItemWork) -> list[Verdict]:
    """Two templates rated 0/2/4; the second sees the reference as the answer to rate (roles swapped)."""
    item = work.item
    return await _dual_rating(work, "nv_answer_accuracy", 4, [
        ("nv_answer_accuracy_1", dict(query=item.query, response=item.response, reference=item.reference),
         "response rated against the reference"),
        ("nv_answer_accuracy_2", dict(query=item.query, response=item.reference, reference=item.response),
         "roles swapped: reference rated against the response"),
    ])


async def match_context_relevance(work: ItemWork) -> list[Verdict]:
    """Two templates rate the whole retrieved context's relevance to the query, 0/1/2."""
    variables = dict(query=work.item.query, sources=list(work.item.sources))
    return await _dual_rating(work, "nv_context_relevance", 2, [
        ("nv_context_relevance_1", variables, "context relevance, template 1"),
        ("nv_context_relevance_2", variables, "context relevance, template 2"),
    ])


async def match_groundedness(work: ItemWork) -> list[Verdict]:
    """Two templates rate how well the context supports the response, 0/1/2."""
    variables = dict(sources=list(work.item.sources), response=work.item.response)
    return await _dual_rating(work, "nv_groundedness", 2, [
        ("nv_groundedness_1", variables, "groundedness, template 1"),
        ("nv_groundedness_2", variables, "groundedness, template 2"),
    ])


def _two(prompt: str) -> tuple[str, str]:
    return f"{prompt}_1", f"{prompt}_2"


ANSWER_ACCURACY = Metric(
    match_answer_accuracy, needs_reference=True, prompts=_two("nv_answer_accuracy"), reads=("response", "reference"),
    description="Nvidia answer accuracy: 2 templates rated 0/2/4 against the reference (roles swapped), averaged")
CONTEXT_RELEVANCE = Metric(
    match_context_relevance, prompts=_two("nv_context_relevance"), reads=("query",),
    description="Nvidia context relevance: 2 templates rate the context's relevance 0/1/2, averaged")
GROUNDEDNESS = Metric(
    match_groundedness, prompts=_two("nv_groundedness"), reads=("response",),
    description="Nvidia response groundedness: 2 templates rate the response's grounding 0/1/2, averaged")


# ---------------------------------------------------------------- offline answers: bands of shares

def _rating(share: float | None, top: int, what: str) -> Answer:
    """All of it -> top, at least half -> the middle rating, less -> 0; nothing to count is empty, not 0."""
    if share is None:
        return Answer(None, Status.EMPTY, detail=f"offline: nothing to rate, no claims or questions ({what})")
    rating = top if share >= 1.0 else top // 2 if share >= 0.5 else 0
    return Answer(rating, Status.OK, prob=share, detail=f"offline: {what} {share:.0%} -> rating {rating} of {top}")


def offline_accuracy(query: str, response: str, reference: str) -> Answer:
    """The share of the answer's claims the other answer supports, as a 0/2/4 rating."""
    # Template 2 is called with the roles swapped, so the same rule reads the reverse direction.
    return _rating(supported_share(split_claims(response), reference), 4,
                   "share of the answer's claims the other answer supports:")


def offline_context_relevance(query: str, sources: list[str]) -> Answer:
    """The share of the query's sub-questions the context answers, as a 0/1/2 rating."""
    share = mean([float(covers(knowledge(sources), q)[0]) for q in split_questions(query) if has_content(q)])
    return _rating(share, 2, "share of the query's sub-questions the context answers:")


def offline_groundedness(sources: list[str], response: str) -> Answer:
    """The share of the response's claims the context supports, as a 0/1/2 rating."""
    return _rating(supported_share(split_claims(response), knowledge(sources)), 2,
                   "share of the response's claims the context supports:")
