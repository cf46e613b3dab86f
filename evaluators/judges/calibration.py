"""The offline judge's raw evidence mapped to a calibrated p = P(match is 1).

The offline judge decides each match from a raw score: for support, essentiality, a source's coverage,
the response's coverage (an answer phrase apart) and source essentiality the probability its learned model gives (learned.py); for SD the cosine of a sentence to
its most similar other one. This module maps (match type, the judge's value, that score) to the
probability that the match really is 1, read from a fitted table of plain data stored beside this
module (calibration.json, reviewed in git).

Fitted by `python -m benchmarks.train_judge` on licensed development data only, from out-of-fold
probabilities (a model never scores the examples it was fitted on); the table records what it was
fitted on. Held-out data is only measured (benchmarks/calibration.py).

The curve of each (match type, value) is a binned isotonic fit: knots (score, p), linear between
them and flat beyond them, non-decreasing in the score (non-increasing for SD, whose score is a
similarity that argues against distinctness). p is then clipped into the half that agrees with the
judge's value (value 1: p >= 0.5; value 0: p < 0.5), so for a calibrated verdict value = 1 exactly
when p >= 0.5, and a p near 0.5 is simply unsure.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from evaluators.core.records import CALIBRATED, Confidence
from evaluators.core.text import answer_phrase

# Match types: the kinds of decision the offline judge makes, each with its own curve.
SUPPORT = "support"  # a claim is backed by the sources (GR; the peers' support prompts)
ESSENTIAL = "essential"  # a fact or claim is essential to answer the query (RP, SP2)
SOURCE_ESSENTIAL = "source_essential"  # a whole source holds something essential (SP1)
COVERS = "covers"  # a source (or the whole set) answers a sub-question (SQC)
ADDRESSES = "addresses"  # the response addresses a sub-question (RQC)
ANSWER_PHRASE = "answer_phrase"  # RQC on a response that is a bare answer phrase (an extractive answer)
SD = "sd"  # a sentence is distinct from every other one (cosine)
# Decided by learned.py's models, each of its own (a bare phrase answers at any cosine: a model of its own).
LEARNED_TYPES: tuple[str, ...] = (SUPPORT, ESSENTIAL, SOURCE_ESSENTIAL, COVERS, ADDRESSES, ANSWER_PHRASE)
MATCH_TYPES: tuple[str, ...] = (*LEARNED_TYPES, SD)

# The prompts whose offline answer is one of these decisions, with the judge's value as the match
# value (yes = 1, no = 0 for the peers' line prompts). Prompts that turn a decision into something
# else (de_faithfulness's "idk" counts as 1, de_hallucination inverts, ratings) keep only a label.
PROMPT_TYPES: dict[str, str] = {
    "groundedness": SUPPORT,
    "groundedness_batch": SUPPORT,
    "ragas_faithfulness": SUPPORT,
    "de_contextual_recall": SUPPORT,
    "essential": ESSENTIAL,
    "essential_batch": ESSENTIAL,
    "de_answer_relevancy": ESSENTIAL,
    "source_essential": SOURCE_ESSENTIAL,
    "source_essential_batch": SOURCE_ESSENTIAL,
    "source_answers": COVERS,
    "source_answers_batch": COVERS,
    "response_addresses": ADDRESSES,
    "response_addresses_batch": ADDRESSES,
}

# The prompts asking whether the response answers: an answer phrase is decided and calibrated apart there,
# since the judge takes a phrase as written to answer whatever its cosine (evidence.covers).
RESPONSE_COVERS_PROMPTS = frozenset({"response_addresses", "response_addresses_batch"})


def match_type(prompt: str, variables: dict[str, Any]) -> str | None:
    """The match type of a prompt's decisions on these variables; None when the prompt has none."""
    kind = PROMPT_TYPES.get(prompt)
    if prompt in RESPONSE_COVERS_PROMPTS and answer_phrase(variables.get("response", "")):
        return ANSWER_PHRASE
    return kind


SD_TIER = "offline"  # SD is decided by the embedded encoder, the offline judge's tier, whatever judge a run uses

TABLE = Path(__file__).with_name("calibration.json")
BELOW_HALF = math.nextafter(0.5, 0.0)  # the largest p a value-0 verdict may carry: always < 0.5


class Curve(NamedTuple):
    """A monotone curve: p at each knot score, linear between knots, flat beyond them."""

    scores: tuple[float, ...]
    probs: tuple[float, ...]

    def __call__(self, score: float) -> float:
        xs, ys = self.scores, self.probs
        if score <= xs[0]:
            return ys[0]
        if score >= xs[-1]:
            return ys[-1]
        k = next(i for i in range(1, len(xs)) if score <= xs[i])
        x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
        return y0 if x1 == x0 else y0 + (y1 - y0) * (score - x0) / (x1 - x0)

    @classmethod
    def of(cls, knots: Sequence[Sequence[float]]) -> Curve:
        """The curve of a table's knots, [[score, p], ...]."""
        return cls(tuple(float(s) for s, _ in knots), tuple(float(p) for _, p in knots))


def read_table(path: Path = TABLE) -> dict[str, dict[int, Curve]]:
    """The fitted curves {match type: {value: Curve}} from a table file; every match type must be there."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    curves: dict[str, dict[int, Curve]] = {}
    for match_type in MATCH_TYPES:
        per_value = data["curves"][match_type]
        curves[match_type] = {int(value): Curve.of(fit["knots"]) for value, fit in per_value.items()}
        if set(curves[match_type]) != {0, 1}:
            raise ValueError(f"{path}: {match_type} needs a curve for value 0 and for value 1")
    return curves


@lru_cache(maxsize=1)
def _curves() -> dict[str, dict[int, Curve]]:
    return read_table()


def probability(match_type: str, value: int, score: float) -> float:
    """P(match is 1) for a decision of `value` (0 or 1) with this evidence score, in the half agreeing with value."""
    p = _curves()[match_type][int(value)](float(score))
    return max(p, 0.5) if value else min(p, BELOW_HALF)


def confidence(match_type: str, value: int, score: float, tier: str) -> Confidence:
    """The calibrated Confidence of one decision of the judge named `tier`."""
    return Confidence(probability(match_type, value, score), CALIBRATED, tier)
