"""THELMA Table 2: which component to fix, as pure rules over one item's scores.

Beside the paper's six rules (T2.1-T2.6) there is one of ours, X1, marked `ours` wherever it is shown:
SQC high, GR low names a generator that makes things up while retrieval covers the query, a case
Table 2 has no row for.

A metric is "low" when its score is below the metric's threshold and "high" when it is at or
above it; a metric that was not scored, or not decided from enough confident verdicts (`decided`),
is neither, so a rule that needs it does not fire: the diagnosis stays quiet where the judge is unsure.
Rules are computed on read, never stored, so changing a threshold or the band never calls a judge.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Union

from evaluators.core.records import Score, Status
from evaluators.metrics import registry

# Each THELMA metric's default threshold, from its Metric record (metrics/thelma.py says why each).
DEFAULT_THRESHOLDS: dict[str, float] = {m: spec.threshold for m, spec in registry.THELMA_METRICS.items()}

# What a triage note says of an item's diagnosis, and the component it blames (a rule's `fix` names one or two).
TRIAGE_LABELS = ("confirmed", "false alarm", "fixed")
COMPONENTS = ("Retriever", "Source text", "Source chunking", "Prompt", "Generator", "Judge", "Other")


@dataclass(frozen=True)
class Rule:
    """One row of Table 2, or a rule of ours beyond it (`ours`): the (metric or reading, "low" | "high")
    conditions that must all hold, what that means, the component to fix, and the metric pair whose
    quadrant scatter shows it."""

    id: str
    conditions: tuple[tuple[str, str], ...]
    meaning: str
    components: str
    plot: tuple[str, str]
    ours: bool = False

    @property
    def name(self) -> str:
        """The id as every view shows it: 'T2.2', or 'X1 (ours)' for a rule that is not THELMA's."""
        return f"{self.id} (ours)" if self.ours else self.id

    @property
    def origin(self) -> str:
        """Where the rule comes from: THELMA's Table 2, or ours."""
        return "ours, beyond THELMA's Table 2" if self.ours else "THELMA Table 2"

    @property
    def pattern(self) -> str:
        """The conditions as Table 2 writes them: 'SD low, RP high'."""
        return ", ".join(f"{metric.upper()} {want}" for metric, want in self.conditions)


RULES: dict[str, Rule] = {
    r.id: r
    for r in [
        Rule(
            "T2.1",
            (("sd", "low"), ("rp", "high")),
            "long, relevant but repetitive answers",
            "Prompt or Generator",
            ("rp", "sd"),
        ),
        Rule(
            "T2.2",
            (("sqc", "low"), ("rqc", "low")),
            "bad retrieval, or the corpus lacks the answer",
            "Retriever or Source text",
            ("sqc", "rqc"),
        ),
        Rule(
            "T2.3",
            (("sp", "low"), ("sqc", "high")),
            "the query is covered, but some sources are only loosely relevant",
            "Retriever",
            ("sp1", "sqc"),
        ),
        Rule(
            "T2.4",
            (("rqc", "low"), ("sqc", "high")),
            "the answer is in the sources but not used",
            "Prompt or Generator",
            ("sqc", "rqc"),
        ),
        Rule(
            "T2.5",
            (("rp", "low"), ("sp1", "high")),
            "extraneous answer content while the sources are essential",
            "Prompt or Source chunking",
            ("sp1", "rp"),
        ),
        Rule(
            "T2.6",
            (("sqc", "low"), ("rqc", "high"), ("gr", "low")),
            "the generator answers what the sources do not cover",
            "Prompt",
            ("sqc", "gr"),
        ),
        # Ours: the paper has no row for a generator that invents while retrieval is fine. It needs SQC
        # high, so it never fires with T2.6 (SQC low).
        Rule(
            "X1",
            (("sqc", "high"), ("gr", "low")),
            "the generator adds claims the sources do not back, though retrieval covers the query",
            "Generator",
            ("sqc", "gr"),
            ours=True,
        ),
    ]
}

# X1 and T2.5 fire together where a response holds claims RP reads as extraneous and GR as unsupported: which
# one explains such an item is told by those claims. When the extraneous claims are mostly unsupported, the
# generator made them up (X1); when the sources support them, they are grounded but off the question (T2.5).
SHARED_CLAIMS = ("X1", "T2.5")


def explained_by(unsupported: int, supported: int) -> str | None:
    """Which of SHARED_CLAIMS explains an item both fire on, from its claims RP decides are extraneous: X1 when
    GR decides at least as many of them unsupported as supported, T2.5 when fewer; None when GR decided none."""
    if not unsupported and not supported:
        return None
    return SHARED_CLAIMS[0] if unsupported >= supported else SHARED_CLAIMS[1]


# Each rule's conditions by id; a condition may name a reading (READINGS) instead of a metric.
CONDITIONS: dict[str, tuple[tuple[str, str], ...]] = {r.id: r.conditions for r in RULES.values()}

# The Diagnosis page's quadrant scatters, in the order it draws them: (x, y, the rules each shows).
QUADRANTS: tuple[tuple[str, str, str], ...] = tuple(
    (x, y, ", ".join(r.name for r in RULES.values() if r.plot == (x, y)))
    for x, y in (("sqc", "rqc"), ("sp1", "sqc"), ("rp", "sd"), ("sp1", "rp"), ("sqc", "gr"))
)


# A reading names the metrics it reads, in order: the first one scored counts, else the last.
# "sp" in T2.3 reads SP1, the chunk-level precision ("some retrieved sources"), and falls back to
# SP2 when SP1 is absent.
READINGS: dict[str, tuple[str, ...]] = {"sp": ("sp1", "sp2")}

# How a score compares with its metric's threshold for each level: low is below, high at or above.
LEVELS: dict[str, Callable[[float, float], bool]] = {"low": operator.lt, "high": operator.ge}

# When a score is decided enough for a rule to read its level: it rests on at least MIN_SCORED
# confident verdicts, and at most MAX_UNSURE_SHARE of the verdicts the judge answered were unsure.
# - MIN_SCORED 1: a score with no confident verdict has no value at all; one is enough for items
#   with one source or one sub-question, which are common.
# - MAX_UNSURE_SHARE 0.5: past half, the unsure verdicts outnumber the ones the level rests on, and
#   resolving them either way could move the score across any threshold; up to half, a level still
#   reads what most of the judged components say. (A tuning knob: tune it on development data only.)
# storage/queries/ writes the same test in SQL from these constants.
MIN_SCORED = 1
MAX_UNSURE_SHARE = 0.5

# A metric's score as diagnose() reads it: a Score (with its counts), or a bare value, which is taken
# as decided (it comes without counts: hand-written scores, a table of values).
Reading = Union[Score, float, None]


def _scored(value: float | None) -> bool:
    return value is not None and value == value  # None or NaN from a DataFrame: not scored


def _value(score: Reading) -> float | None:
    if isinstance(score, Score):
        return score.value if score.status is Status.OK else None
    return score


def decided(score: Reading) -> bool:
    """Whether a scored metric rests on enough confident verdicts for a rule to read its level."""
    if not isinstance(score, Score):
        return True
    answered = score.n_scored + score.n_unsure
    return score.n_scored >= MIN_SCORED and score.n_unsure <= MAX_UNSURE_SHARE * answered


def reading_metric(metric: str, scores: Mapping[str, Reading]) -> str:
    """The metric a condition reads: itself, or the first of a reading's metrics that was scored."""
    reads = READINGS.get(metric, (metric,))
    return next((m for m in reads if _scored(_value(scores.get(m)))), reads[-1])


def read(metric: str, scores: Mapping[str, Reading]) -> tuple[str, float] | None:
    """What a condition on `metric` (or a reading) reads of one item's scores, whatever the thresholds:
    the metric read and its value, or None when it was not scored or not decided."""
    metric = reading_metric(metric, scores)
    score = scores.get(metric)
    value = _value(score)
    if value is None or not _scored(value) or not decided(score):
        return None
    return metric, value


def level_of(reading: tuple[str, float] | None, thresholds: Mapping[str, float]) -> str | None:
    """'low' or 'high' for what read() returned, at these thresholds; None when it read nothing."""
    if reading is None:
        return None
    metric, value = reading
    threshold = thresholds.get(metric, DEFAULT_THRESHOLDS[metric])
    return next(name for name, holds in LEVELS.items() if holds(value, threshold))


def level(metric: str, scores: Mapping[str, Reading], thresholds: Mapping[str, float]) -> str | None:
    """'low', 'high', or None when the metric (or every metric of a reading) was not scored or not decided."""
    return level_of(read(metric, scores), thresholds)


# The metrics and readings Table 2's conditions name.
NAMED = tuple(dict.fromkeys(m for conds in CONDITIONS.values() for m, _ in conds))


def readings(scores: Mapping[str, Reading]) -> dict[str, tuple[str, float] | None]:
    """read() of every metric and reading the rules name: all that the rules need of one item, so an
    item read once can be diagnosed at many thresholds (rules_firing())."""
    return {m: read(m, scores) for m in NAMED}


def rules_firing(item: Mapping[str, tuple[str, float] | None], thresholds: Mapping[str, float]) -> list[str]:
    """The ids of the Table-2 rules that fire on an item's readings(), in table order."""
    levels = {m: level_of(r, thresholds) for m, r in item.items()}
    return [rid for rid, conds in CONDITIONS.items() if all(levels[m] == want for m, want in conds)]


def diagnose(scores: Mapping[str, Reading], thresholds: Mapping[str, float] | None = None) -> list[Rule]:
    """The Table-2 rules that fire for one item's scores ({metric: Score or value}), in table order."""
    return [RULES[rid] for rid in rules_firing(readings(scores), {**DEFAULT_THRESHOLDS, **(thresholds or {})})]


class Condition(NamedTuple):
    """One condition of a fired rule, as it held: the metric read, its level, and the score behind it."""

    metric: str
    level: str
    score: Reading


class Fired(NamedTuple):
    """A rule that fires, with the scores (value, n scored of N, k unsure) that made each condition hold."""

    rule: Rule
    conditions: tuple[Condition, ...]


def fired(scores: Mapping[str, Reading], thresholds: Mapping[str, float] | None = None) -> list[Fired]:
    """diagnose() with its evidence: for each rule that fires, the score behind each condition.

    Benchmarks call it on metrics.rescore(...) at any band, so they count what the dashboard shows.
    """
    return [
        Fired(
            rule,
            tuple(
                Condition(reading_metric(m, scores), want, scores.get(reading_metric(m, scores)))
                for m, want in CONDITIONS[rule.id]
            ),
        )
        for rule in diagnose(scores, thresholds)
    ]


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
