"""One frozen record type per grain: Item, Component, Verdict, Score, JudgeCall, Run.

Everything the engine computes is one of these, and the store keeps every one of them,
so the dashboard can show why a score is what it is. A judge's parsed reply is an `Answer`, and
`Judge` is what metric code asks: metrics depend on this protocol, never on a concrete judge.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, NamedTuple, Protocol


class Status(str, Enum):
    """Outcome of a judge step. Only OK carries a value; every other status is a visible failure.

    UNSURE is shown like a failure (neither 0 nor 1), but the judge did answer: moving the band can score it.
    """

    OK = "ok"
    UNPARSED = "unparsed"  # the judge answered, twice, with something we could not parse
    ERROR = "error"  # the call failed after bounded retries (5xx, connection, ...)
    TIMEOUT = "timeout"  # the call hung past its deadline, after retries
    NOT_APPLICABLE = "not_applicable"  # the metric needs an input this item lacks, or one the judge cannot read
    EMPTY = "empty"  # nothing to score: no claims, or a text that states nothing ("...", "Yes")
    # Never stored on a verdict: an OK verdict whose p fell inside the uncertainty band reads as
    # unsure (decided on read, evaluators/core/confidence.py), and so does a score with nothing else to go on.
    UNSURE = "unsure"


# How a verdict's probability p was obtained.
# Read from the judge's first-token logprobs, P("1") / (P("0") + P("1")); the local judge's mapped through
# the curve fitted for it on development data (judges/local_calibration.py), its raw P("1") kept as evidence.
LOGPROB = "logprob"
CALIBRATED = "calibrated"  # the offline judge's evidence mapped to a probability fitted on development data
LABEL = "label"  # only the parsed label: p is the value itself, uncalibrated (never unsure)


class Confidence(NamedTuple):
    """How sure a judge is of one match: p = P(the match is 1), how p was obtained, and who decided."""

    p: float
    kind: str  # LOGPROB | CALIBRATED | LABEL
    tier: str  # the judge that decided it: "offline", "local", a litellm model


# Component kinds: what a decomposition produced.
SOURCE = "source"  # identity decomposition of the source set (SP1)
SOURCE_FACT = "source_fact"  # B.1 claims of the sources (SP2)
CLAIM = "claim"  # B.1 claims of the response (RP, GR)
SUBQUESTION = "subquestion"  # B.3 sub-questions of the query (SQC, RQC)
SENTENCE = "sentence"  # sentences of the response (SD)

# The item metadata key under which peer scores travel with an imported item ({origin: {metric: value
# or None}}): runs/traces.py writes it, the store keeps them in their own table.
IMPORTED = "imported_scores"


@dataclass(frozen=True)
class Item:
    """One (query, retrieved sources, response) triplet to evaluate."""

    id: str
    query: str
    sources: tuple[str, ...]
    response: str
    reference: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @staticmethod
    def content_id(query: str, sources: tuple[str, ...] | list[str], response: str) -> str:
        """A stable id for items that come without one: a hash of their content."""
        blob = json.dumps([query, list(sources), response], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def content_hash(self) -> str:
        """A hash of everything the run stores for this item: a rerun compares it to spot edited input."""
        blob = json.dumps(
            [self.query, list(self.sources), self.response, self.reference, self.metadata],
            ensure_ascii=False,
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Component:
    """One decomposed piece of an item: a source, a fact, a claim, a sub-question or a sentence."""

    item_id: str
    kind: str
    idx: int
    text: str
    parent: int | None = None  # for source facts: the index of the source they came from
    call_key: str | None = None  # the judge call that produced it (None for identity/sentence split)


@dataclass(frozen=True)
class Verdict:
    """One match: a component judged against a target, with its status and the call behind it.

    `target` names what the component was matched against: "query", "sources" (the whole set),
    "source:J" (one source), "response", or "sentence:J" (SD's most similar other sentence).
    """

    item_id: str
    metric: str
    component_kind: str
    component_idx: int
    target: str
    value: float | None  # 1.0 / 0.0 when status is OK, else None
    status: Status
    evidence: float | None = None  # the judge's continuous evidence: P("1"), a cosine, a rating
    call_key: str | None = None
    detail: str = ""
    p: float | None = None  # P(match is 1) for a binary match; None for ratings and failures
    p_kind: str | None = None  # LOGPROB | CALIBRATED | LABEL
    tier: str | None = None  # the judge that decided this verdict (a cascade's tier)


@dataclass(frozen=True)
class Score:
    """One metric for one item: the aggregate of its OK verdicts, with counts and a status."""

    item_id: str
    metric: str
    value: float | None
    n_scored: int
    n_total: int
    status: Status
    n_unsure: int = 0  # OK verdicts left out because their p fell inside the uncertainty band
    # The score the judge expects: the mean of its verdicts' p, unsure ones included (metrics.thelma.
    # expected_of); None for a metric with no such mean (a rating, SQC's coverage) or with no p to read.
    expected: float | None = None


@dataclass(frozen=True)
class JudgeCall:
    """One exchange with a judge. `key` is sha256(model, messages, params): the cache key."""

    key: str
    model: str
    prompt_name: str
    prompt_hash: str
    messages: list[dict[str, str]]
    params: dict[str, Any]
    reply: str | None
    status: Status
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    latency_ms: float = 0.0
    error: str = ""
    endpoint: str | None = None  # the api base that answered (or was tried last); None: the provider's own


@dataclass(frozen=True)
class Run:
    """A named evaluation run: which judge, which prompts, which metrics."""

    name: str
    judge: str
    params: dict[str, Any]
    prompt_hashes: dict[str, str]
    status: str = "running"


# Characters Python calls printable that still show nothing: variation selectors, the combining
# grapheme joiner, the Hangul fillers and the braille blank.
_SHOWS_NOTHING = re.compile("[\u034f\u115f\u1160\u2800\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def run_name_problem(name: str) -> str | None:
    """Why `name` cannot name a new run ("must ..."), or None: a name must show as itself, so that two
    runs never look alike (`weak_retriever` and `weak_retriever` with a zero-width space)."""
    if not name:
        return "must not be empty"
    if name != name.strip():
        return f"must not begin or end with a space, got {name!r}"
    for k, ch in enumerate(name):
        if not ch.isprintable() or _SHOWS_NOTHING.match(ch):
            return (
                f"must hold no invisible or control character, got {name!r} (U+{ord(ch):04X} "
                f"{unicodedata.name(ch, 'control character')} at position {k + 1})"
            )
    return None


@functools.cache
def _look_alike() -> dict[str, str]:
    """Each character that looks like another, mapped to one character of its class: Unicode's confusables
    (as confusable-homoglyphs ships them), joined into classes. Among ASCII only l, I, 1 and | share one,
    and O and 0."""
    from confusable_homoglyphs.confusables import confusables_data  # a 1 MB table, read when first asked

    parent: dict[str, str] = {}

    def root(c: str) -> str:
        while parent.setdefault(c, c) != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for char, glyphs in confusables_data.items():
        for glyph in (g["c"] for g in glyphs):
            if len(char) == 1 and len(glyph) == 1:
                parent[root(char)] = root(glyph)
    return {c: root(c) for c in parent}


def looks_like(name: str, others: Iterable[str]) -> str | None:
    """The first of `others` that is another name but looks the same as `name` ('weak-rеtriever' with a
    Cyrillic е, 'weak-retriever'), or None."""
    table = _look_alike()

    def skeleton(text: str) -> str:
        return "".join(table.get(c, c) for c in unicodedata.normalize("NFKC", text))

    mine = skeleton(name)
    return next((other for other in others if other != name and skeleton(other) == mine), None)


def printable(text: str) -> str:
    """`text` on one line as a log or a message shows it: control and other invisible characters escaped
    ('\\n', '\\x1b'), so a name from elsewhere cannot forge a line of its own."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def check_run_name(name: str) -> str:
    """`name`, or ValueError (one line) when it cannot name a new run (see run_name_problem)."""
    problem = run_name_problem(name)
    if problem:
        raise ValueError(f"run name {problem}")
    return name


class Elements(dict):
    """A batched reply's readable elements by key, plus `failed`: elements given but not usable.

    `failed` maps a key to (status, why): an element the reply gave twice is UNPARSED (never the
    last one wins), an element the offline judge cannot read is NOT_APPLICABLE. It compares equal
    to the plain dict of its readable elements.
    """

    def __init__(self, items: Any = (), failed: dict[Any, tuple[Status, str]] | None = None) -> None:
        super().__init__(items)
        self.failed: dict[Any, tuple[Status, str]] = dict(failed or {})


def unit(x: float) -> float:
    """A probability, or a cosine used as one, clipped into [0, 1] (float32 cosines reach 1.0000001)."""
    return min(1.0, max(0.0, float(x)))


@dataclass(frozen=True)
class Answer:
    """A judge's parsed answer to one prompt. `value` is None unless status is OK."""

    value: Any
    status: Status
    call_key: str | None = None
    raw: str | None = None
    prob: float | None = None  # P("1") where the judge exposes it (logprobs, similarity)
    detail: str = ""
    # Batched answers from judges that explain each element: {element key: (prob, detail)}.
    evidence: dict[Any, tuple[float | None, str]] = field(default_factory=dict)
    # How sure the judge is: of a single answer, and of each element of a batched one. None (or a
    # missing element) means the judge gave only a label.
    confidence: Confidence | None = None
    confidences: dict[Any, Confidence] = field(default_factory=dict)
    # Batched answers merged from several calls (a cascade): {element key: the call that decided it},
    # None for a tier that makes no stored call. A missing element was decided by `call_key`.
    call_keys: dict[Any, str | None] = field(default_factory=dict)


class Judge(Protocol):
    """What the metrics need from any judge."""

    name: str

    async def ask(self, prompt: str, **variables: Any) -> Answer: ...


LABEL_ORIGINS = ("review", "import", "triage")  # where a Label came from (see Label.origin)


@dataclass(frozen=True)
class Label:
    """A person's judgement of the judge, on one item: a Table-2 rule or one verdict.

    A rule label says whether `rule` names the component to fix (1) or not (0). A verdict correction
    gives the right value (1 supported / covered / essential, 0 not) of `metric`'s component
    `component_idx`. `origin` is "review" (the Item page), "import" (a labelling team's file) or
    "triage" (a triage note read as rule labels).
    """

    item_id: str
    label: int
    rule: str | None = None
    metric: str | None = None
    component_idx: int | None = None
    note: str = ""
    author: str = ""
    origin: str = "review"
