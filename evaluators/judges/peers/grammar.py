"""GRAMMAR's prompts (seed 003), pure: Table 6's correctness verdict and the reference RAG pipeline's answer.

- `grammar_correctness`: the judge's "Correct" / "Incorrect" (`parse_correctness`), or offline a
  normalised match of the ground truth in the response (`answer_match`);
- `grammar_rag_answer`: a free-text answer (`parse_answer`), or offline the extractive span of the
  retrieved sentence most like the question (`extract_answer`).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Callable, Sequence

import numpy as np

from evaluators.core.records import Answer, Status
from evaluators.core.text import split_sentences
from evaluators.judges import prompts
from evaluators.judges.embeddings import embed

# ---------------------------------------------------------------- correctness: Table 6's verdict

_OUTPUT_BODY = re.compile(r"<output>(.*?)(?:</output>|$)", re.S | re.I)


def _reply_body(reply: str) -> str:
    match = _OUTPUT_BODY.search(reply)
    return (match.group(1) if match else reply).strip()


def parse_correctness(reply: str) -> int:
    """Table 6's verdict: "Correct" is 1, "Incorrect" is 0; both or neither is unparseable."""
    words = set(re.findall(r"[a-z]+", _reply_body(reply).lower()))
    if ("correct" in words) == ("incorrect" in words):
        raise prompts.ParseError(f"expected Correct or Incorrect, got {reply[:60]!r}")
    return int("correct" in words)


# ---------------------------------------------------------------- offline correctness: normalised match

_MONTHS = {
    name: i
    for i, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        1,
    )
}
_MONTH = r"(" + "|".join(sorted({*_MONTHS, *(m[:3] for m in _MONTHS), "sept"}, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = [  # (pattern, (year, month, day) group order)
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), (1, 2, 3)),
    (re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+(\d{{4}})\b"), (3, 2, 1)),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+(\d{{4}})\b"), (3, 1, 2)),
]
_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)*")


def _iso_dates(text: str) -> str:
    """Rewrite recognised dates ("14 March 2022", "March 14th, 2022", "2022-03-14") as one token."""

    def token(order: tuple[int, int, int]) -> Callable[[re.Match[str]], str]:
        def sub(m: re.Match[str]) -> str:
            y, mo, d = (m.group(i) for i in order)
            month = (
                int(mo)
                if mo.isdigit()
                else _MONTHS.get(mo, 0) or next(i for n, i in _MONTHS.items() if n.startswith(mo[:3]))
            )
            try:
                return f" d{date(int(y), month, int(d)):%Y%m%d} "
            except ValueError:
                return m.group(0)

        return sub

    text = text.lower()
    for pattern, order in _DATES:
        text = pattern.sub(token(order), text)
    return text


def normalise(text: str) -> list[str]:
    """Lower-case word tokens with punctuation dropped and dates in one canonical form."""
    return _TOKEN.findall(_iso_dates(text))


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def answer_match(truth: str, response: str) -> tuple[bool, str]:
    """The offline correctness check: every comma-separated part of the truth appears in the response.

    Both sides are normalised (case, punctuation, date formats), and each part must occur as a
    contiguous token sequence, so "Cork, Ireland" is matched by "in Cork (Ireland)" but not by "Cork".
    """
    said = normalise(response)
    parts = [normalise(p) for p in _iso_dates(truth).split(",")]
    parts = [p for p in parts if p]
    if not parts:
        return False, "the ground truth is empty"
    missing = [" ".join(p) for p in parts if not _contains(said, p)]
    if missing:
        return False, f"not in the response: {', '.join(repr(m) for m in missing)}"
    return True, f"found: {', '.join(repr(' '.join(p)) for p in parts)}"


def offline_correctness(query: str, true_answer: str, given_response: str) -> Answer:
    """Table 6 offline: the normalised match of the ground truth in the response."""
    correct, why = answer_match(true_answer, given_response)
    return Answer(int(correct), Status.OK, detail=f"normalised match: {why}")


# ---------------------------------------------------------------- the RAG answer


def parse_answer(reply: str) -> str:
    """A free-text answer inside <output>; an empty one is re-asked."""
    try:
        body = prompts.output_body(reply)
    except prompts.ParseError:
        body = ""
    if not body:
        raise prompts.ParseError("no answer inside <output>")
    return body


_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case alphanumeric tokens."""
    return _WORD.findall(text.lower())


# ---------------------------------------------------------------- the offline extractive generator

# Where a fact sentence turns from its subject to its value.
_CUE = re.compile(r"\s(?:is|are|was|were|reports to|began on|as)\s", re.I)
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9-]*")


def entity_words(question: str, sentences: Sequence[str]) -> set[str]:
    """The question's words that the retrieved text writes capitalised: the entity asked about."""
    named = {w for s in sentences for w in words(" ".join(_CAPITALISED.findall(s)))}
    return set(words(question)) & named


def answer_span(sentence: str, entity: set[str]) -> str:
    """Split the sentence at its first cue ("is", "reports to", ...) and answer with the side that
    names the question's entity less (the value, not the subject); the whole sentence without a cue."""
    m = _CUE.search(sentence)
    if not m:
        return sentence.strip()
    before, after = sentence[: m.start()].strip(), sentence[m.end() :].strip().rstrip(".")
    return before if len(set(words(after)) & entity) > len(set(words(before)) & entity) else after


def without_entity(question: str, entity: set[str]) -> str:
    """The question with its entity words dropped (unchanged if nothing would be left)."""
    return " ".join(w for w in question.split() if not set(words(w)) & entity) or question


def extract_answer(question: str, sources: Sequence[str]) -> tuple[str, str]:
    """The answer span of the retrieved sentence most similar (MiniLM cosine) to the question.

    The entity words are dropped from the question first, so the sentence is chosen by what is
    asked ("director of ..."), not by whom it is about: every sentence of a profile names its subject.
    """
    sentences = [s for src in sources for s in split_sentences(src)]
    if not sentences:
        return "", "no retrieved text"
    entity = entity_words(question, sentences)
    asked = without_entity(question, entity)
    sims = embed(sentences) @ embed([asked])[0]
    best = int(np.argmax(sims))
    span = answer_span(sentences[best], entity)
    return span, (
        f"extractive: question without its entity {asked!r}; best sentence {sentences[best]!r} "
        f"(cosine {sims[best]:.2f}); answer span {span!r}"
    )


def offline_answer(sources: list[str], question: str) -> Answer:
    """The offline generator's answer to `grammar_rag_answer`: the extractive span."""
    span, why = extract_answer(question, sources)
    return Answer(span, Status.OK, detail=why)
