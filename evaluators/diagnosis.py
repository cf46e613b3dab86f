"""THELMA Table 2: which component to fix, as pure rules over one item's scores.

A metric is "low" when its score is below the metric's threshold and "high" when it is at or
above it; a metric that was not scored is neither, so a rule that needs it does not fire.
Rules are computed on read, never stored, so changing a threshold never calls a judge.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Mapping

# Defaults, chosen so that one miss in a typical item counts as low:
# - sqc/rqc 0.75: a two-part query with one part uncovered (0.5) is low.
# - sd 0.8: one repeated pair among five sentences (0.6) is low.
# - gr 0.8: one unsupported claim in five (0.8) is still high; two (0.6) is low.
# - sp2 0.3: sources carry many true but extraneous facts; below 0.3 the chunk is mostly noise.
DEFAULT_THRESHOLDS: dict[str, float] = {
    "sp1": 0.5, "sp2": 0.3, "sqc": 0.75, "rp": 0.5, "rqc": 0.75, "sd": 0.8, "gr": 0.8,
}


@dataclass(frozen=True)
class Rule:
    """One row of Table 2."""

    id: str
    pattern: str
    meaning: str
    components: str


RULES: dict[str, Rule] = {r.id: r for r in [
    Rule("T2.1", "SD low, RP high", "long, relevant but repetitive answers", "Prompt or Generator"),
    Rule("T2.2", "SQC low, RQC low", "bad retrieval, or the corpus lacks the answer", "Retriever or Source text"),
    Rule("T2.3", "SP low, SQC high", "the query is covered, but some sources are only loosely relevant", "Retriever"),
    Rule("T2.4", "RQC low, SQC high", "the answer is in the sources but not used", "Prompt or Generator"),
    Rule("T2.5", "RP low, SP1 high", "extraneous answer content while the sources are essential", "Prompt or Source chunking"),
    Rule("T2.6", "SQC low, RQC high, GR low", "the generator answers what the sources do not cover", "Prompt"),
]}

# Each rule as (metric, "low" | "high") conditions that must all hold; a condition may name a
# reading (READINGS) instead of a metric.
CONDITIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "T2.1": (("sd", "low"), ("rp", "high")),
    "T2.2": (("sqc", "low"), ("rqc", "low")),
    "T2.3": (("sp", "low"), ("sqc", "high")),
    "T2.4": (("rqc", "low"), ("sqc", "high")),
    "T2.5": (("rp", "low"), ("sp1", "high")),
    "T2.6": (("sqc", "low"), ("rqc", "high"), ("gr", "low")),
}


# A reading names the metrics it reads, in order: the first one scored counts, else the last.
# "sp" in T2.3 reads SP1, the chunk-level precision ("some retrieved sources"), and falls back to
# SP2 when SP1 is absent.
READINGS: dict[str, tuple[str, ...]] = {"sp": ("sp1", "sp2")}

# How a score compares with its metric's threshold for each level: low is below, high at or above.
LEVELS: dict[str, Callable[[float, float], bool]] = {"low": operator.lt, "high": operator.ge}


def _scored(value: float | None) -> bool:
    return value is not None and value == value  # None or NaN from a DataFrame: not scored


def level(metric: str, scores: Mapping[str, float | None], thresholds: Mapping[str, float]) -> str | None:
    """'low', 'high', or None when the metric (or every metric of a reading) was not scored."""
    reads = READINGS.get(metric, (metric,))
    metric = next((m for m in reads if _scored(scores.get(m))), reads[-1])
    value = scores.get(metric)
    if not _scored(value):
        return None
    threshold = thresholds.get(metric, DEFAULT_THRESHOLDS[metric])
    return next(name for name, holds in LEVELS.items() if holds(value, threshold))


def diagnose(scores: Mapping[str, float | None], thresholds: Mapping[str, float] | None = None) -> list[Rule]:
    """The Table-2 rules that fire for one item's scores, in table order."""
    thresholds = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    return [RULES[rid] for rid, conds in CONDITIONS.items()
            if all(level(m, scores, thresholds) == want for m, want in conds)]


def parse_thresholds(text: str) -> dict[str, float]:
    """Parse 'sp1=0.5,gr=0.9' into a dict, rejecting unknown metrics and values outside [0, 1]."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, raw = part.partition("=")
        name = name.strip().lower()
        if name not in DEFAULT_THRESHOLDS:
            raise ValueError(f"unknown metric {name!r} in thresholds; known: {', '.join(DEFAULT_THRESHOLDS)}")
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"threshold for {name} is not a number: {raw!r}") from None
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"threshold for {name} must be within [0, 1], got {value}")
        out[name] = value
    return out
