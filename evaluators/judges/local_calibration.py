"""The local judge's first-token P("1") mapped to a calibrated p = P(match is 1).

The local judge (local_llm.py) reads P("1") / (P("0") + P("1")) from the first token of its answer. That
is the model's own belief, not how often it is right: this module maps it, per match type, through a
monotone curve fitted on licensed development matches the local model answered (local_calibration.json,
plain data reviewed in git, written by `python -m benchmarks.logprob_band --fit`). A match type without a
curve of its own (too few examples when it was fitted) uses the pooled curve. The verdict's p is the
mapped value and its decision is that p at 0.5; the raw P("1") stays the answer's `prob`, which verdicts
keep as their evidence.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from evaluators.core.records import LOGPROB, Answer, Confidence, Status
from evaluators.judges import calibration
from evaluators.judges.calibration import Curve

TABLE = Path(__file__).with_name("local_calibration.json")
POOLED = "pooled"  # the curve fitted on every match type together


class LocalCurves:
    """The fitted curves of the local judge: {match type or POOLED: Curve}."""

    def __init__(self, curves: dict[str, Curve]) -> None:
        if POOLED not in curves:
            raise ValueError(f"the local calibration needs a {POOLED!r} curve")
        self.curves = curves

    def probability(self, match_type: str | None, raw: float) -> float:
        """The calibrated p of a raw P("1") on a match of this type (the pooled curve when it has none)."""
        return self.curves.get(match_type or POOLED, self.curves[POOLED])(raw)

    def answer(self, prompt: str, variables: dict[str, Any], answer: Answer) -> Answer:
        """A logprob answer with the calibrated p as its confidence and decision, its raw P("1") kept as prob."""
        if answer.status is not Status.OK or answer.prob is None or answer.confidence is None:
            return answer
        p = self.probability(calibration.match_type(prompt, variables), answer.prob)
        return replace(answer, value=int(p >= 0.5), confidence=Confidence(p, LOGPROB, answer.confidence.tier))


def read_table(path: Path = TABLE) -> LocalCurves:
    """The curves of a table file."""
    return parse(json.loads(path.read_text(encoding="utf-8")))


def parse(data: dict[str, Any]) -> LocalCurves:
    """The curves of a table: {"curves": {match type or POOLED: {"knots": [[raw, p], ...]}}, ...}."""
    return LocalCurves({name: Curve.of(fit["knots"]) for name, fit in data["curves"].items()})


@lru_cache(maxsize=1)
def fitted() -> LocalCurves:
    """The shipped curves (read once per process)."""
    return read_table()
