"""Nvidia's prompts (seed 001): the ratings' parsers and the offline judge's answers."""

from __future__ import annotations

from evaluators.core.records import Answer, Status
from evaluators.core.text import has_content, split_claims, split_questions
from evaluators.judges.evidence import covers
from evaluators.judges.peers.common import knowledge, mean, rating_parser, supported_share

parse_accuracy = rating_parser((0, 2, 4))
parse_rating = rating_parser((0, 1, 2))


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
    return _rating(
        supported_share(split_claims(response), reference), 4, "share of the answer's claims the other answer supports:"
    )


def offline_context_relevance(query: str, sources: list[str]) -> Answer:
    """The share of the query's sub-questions the context answers, as a 0/1/2 rating."""
    share = mean([float(covers(knowledge(sources), q)[0]) for q in split_questions(query) if has_content(q)])
    return _rating(share, 2, "share of the query's sub-questions the context answers:")


def offline_groundedness(sources: list[str], response: str) -> Answer:
    """The share of the response's claims the context supports, as a 0/1/2 rating."""
    return _rating(
        supported_share(split_claims(response), knowledge(sources)),
        2,
        "share of the response's claims the context supports:",
    )
