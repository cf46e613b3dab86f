"""Pairwise validation: does the judge score the better variant of an item strictly higher?

THELMA's Table 1 as a product feature: an owner writes pairs of one item (the better and a worse
variant, say a grounded and an ungrounded answer) and learns, per metric, how often the judge
prefers the better one. Ties and failures (a side not scored) are counted apart, never as wins or
losses. Pure tallying over scores; evaluating the sides is the runner's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

CSV_COLUMNS = ("metric", "n_pairs", "agree", "ties", "disagree", "failed", "agreement")


@dataclass
class Tally:
    """Outcome counts of the pairs of one metric."""

    agree: int = 0
    ties: int = 0
    disagree: int = 0
    failed: int = 0

    @property
    def scored(self) -> int:
        return self.agree + self.ties + self.disagree

    def rate(self) -> float | None:
        """Agreement: the share of scored pairs whose better side scores strictly higher."""
        return self.agree / self.scored if self.scored else None

    def row(self, metric: str) -> list[Any]:
        return [metric, self.scored + self.failed, self.agree, self.ties, self.disagree, self.failed, self.rate()]


def tally(outcomes: Sequence[tuple[str, float | None, float | None]]) -> dict[str, Tally]:
    """Per key (a metric, or a set of pairs), from (key, better side's score, worse side's score); None
    is a side not scored."""
    out: dict[str, Tally] = {}
    for metric, a, b in outcomes:
        t = out.setdefault(metric, Tally())
        if a is None or b is None:
            t.failed += 1
        elif a > b:
            t.agree += 1
        elif a == b:
            t.ties += 1
        else:
            t.disagree += 1
    return out
