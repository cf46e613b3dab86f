"""The offline judge's decisions and its answers to THELMA's prompts.

Every THELMA step has an offline counterpart, explained in its detail text so the drill-down shows why:
- claims and sub-questions: the text module's splits;
- support (GR): the best-matching source sentence or adjacent pair, and the numbers, dates, names and
  negation of the claim that the sources do not back;
- essentiality (RP, SP2): how close the component is to its best sub-question and to the query, with
  their focus and topic words and the kind of answer asked for;
- coverage (SQC, RQC, and SP1 per source): the window that best answers a sub-question, with the
  answer's kind, the question's focus words and names, and no refusal or mere restating.

signals.py measures these; a learned model per decision (learned.py, its weights fitted on licensed
development data by benchmarks/train_judge.py) weighs them into a probability, and the decision is that
probability at 0.5. Decisions are plain functions returning (value, probability, explanation); the
`offline_*` functions wrap them as Answers for the registry's offline answer table.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from evaluators.core.records import Answer, Status
from evaluators.core.text import (
    answer_phrase,
    resolved_sentences,
    split_claims,
    split_questions,
    split_sentences,
)
from evaluators.judges import learned, signals
from evaluators.judges.calibration import ADDRESSES, ANSWER_PHRASE, COVERS, ESSENTIAL, SOURCE_ESSENTIAL, SUPPORT


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# ---------------------------------------------------------------- decisions

Decision = tuple[int, float, str]  # (value, the learned model's probability, explanation)


def support(claim: str, sources: str) -> Decision:
    """Is the claim backed by the sources? The support model (learned.py) weighs its signals (signals.support):
    the best windows' cosine and words, and the numbers, dates, names and negation the sources do not back."""
    found = signals.support(claim, sources)
    p = learned.model(SUPPORT).probability(found.values)
    v = found.values
    where = (
        f"best source sentence {_quote(found.window)} (cosine {v['cosine']:.2f}, {v['words_best']:.0%} of claim words)"
    )
    if p >= 0.5:
        return 1, p, f"supported: {where}"
    label = "contradicted" if v["negation"] and len(found.notes) == 1 else "unsupported"
    why = "; ".join(found.notes) or f"{v['words_sources']:.0%} of the claim's words in the sources"
    return 0, p, f"{label}: {why}; {where}"


def essential(fact: str, query: str) -> Decision:
    """Is the fact essential to answer the query? The essential model weighs its signals (signals.essential):
    how close it is to its best sub-question and the query, their focus and topic words, names and answer type."""
    found = signals.essential(fact, query)
    p = learned.model(ESSENTIAL).probability(found.values)
    v = found.values
    detail = (
        f"best sub-question {_quote(found.window)} (cosine {v['cosine']:.2f}, {v['focus']:.0%} of its focus "
        f"words, {v['topic']:.0%} of the query's topic words{', no answer of the kind asked' if not v['untyped'] and not v['typed'] else ''})"
    )
    return int(p >= 0.5), p, f"{'essential' if p >= 0.5 else 'extraneous'}: {detail}"


def source_essential(source: str, query: str) -> Decision:
    """SP1: a source is essential when it answers some sub-question of the query, read from the
    sub-question it serves best (signals.covers) by the source-essential model.

    Being about the query's topic is not enough: in THELMA's A.1 a second source about the same
    clock tower, holding neither its completion date nor its namesake, scores 0.
    """
    found = signals.source_essential(source, query)
    p = learned.model(SOURCE_ESSENTIAL).probability(found.values)
    return (
        int(p >= 0.5),
        p,
        f"{'essential' if p >= 0.5 else 'not essential'} for {_quote(found.about)}: {_window(found, 'source')}",
    )


def covers(text: str, question: str, response: bool = False) -> Decision:
    """Does a source (or a response) carry an answer to the sub-question? The covers model weighs the
    signals of its best window (signals.covers): closeness to the question, its focus words and names,
    an answer of the right kind, and no refusal or mere restating."""
    found = signals.covers(text, question, response)
    kind = (ANSWER_PHRASE if answer_phrase(text) else ADDRESSES) if response else COVERS
    p = learned.model(kind).probability(found.values)
    return (
        int(p >= 0.5),
        p,
        f"{'answers' if p >= 0.5 else 'does not answer'}: {_window(found, 'response' if response else 'source')}",
    )


def _window(found: signals.Signals, what: str) -> str:
    v = found.values
    why = f", {found.notes[0]}" if found.notes else ""
    return (
        f"best {what} sentence {_quote(found.window)} (cosine {v['cosine']:.2f}, {v['focus']:.0%} of the "
        f"question's focus words{why})"
    )


# ---------------------------------------------------------------- prefetching


@lru_cache(maxsize=1024)
def _source_texts(text: str) -> tuple[str, ...]:
    """What prompts about a source embed: its pronoun-resolved sentences and its claims."""
    return resolved_sentences(text) + tuple(split_claims(text))


@lru_cache(maxsize=1024)
def _response_texts(text: str) -> tuple[str, ...]:
    """A source's texts, plus the plain sentences that SD compares."""
    return _source_texts(text) + tuple(split_sentences(text))


def needed_texts(prompt: str, v: dict[str, Any]) -> list[str]:
    """Every text the THELMA prompts about these variables will embed, to encode them in one call
    (other variables, such as those of other suites' prompts, are left to their handlers)."""
    texts: list[str] = []
    for name, value in v.items():
        values = [value] if isinstance(value, str) else list(value)
        if name in ("query", "question", "questions") or (name == "input" and prompt == "subquestions"):
            texts += [t for q in values for t in signals.query_texts(q)]
        elif name in ("source", "sources", "texts"):
            texts += [t for s in values for t in _source_texts(s)]
            if name == "sources" and len(values) > 1:
                texts += _source_texts("\n\n".join(values))  # coverage by the whole set
        elif name in ("response", "input"):
            texts += [t for r in values for t in _response_texts(r)]
        elif name in ("claim", "claims", "facts"):
            texts += values
    return texts


# ---------------------------------------------------------------- offline answers to THELMA's prompts


def _one(result: Decision) -> Answer:
    value, prob, detail = result
    return Answer(value, Status.OK, prob=prob, detail=detail)


def _many(results: dict[Any, Decision]) -> Answer:
    return Answer(
        {k: r[0] for k, r in results.items()}, Status.OK, evidence={k: (r[1], r[2]) for k, r in results.items()}
    )


def offline_claims(input: str) -> Answer:  # noqa: A002  (the prompt's variable name)
    """B.1 claims: sentence and clause split, pronouns resolved."""
    return Answer(split_claims(input), Status.OK, detail="sentence and clause split, pronouns resolved")


def offline_claims_batch(texts: list[str]) -> Answer:
    """B.1 claims of each text."""
    return Answer(
        {i: split_claims(t) for i, t in enumerate(texts, 1)},
        Status.OK,
        detail="sentence and clause split, pronouns resolved",
    )


def offline_subquestions(input: str) -> Answer:  # noqa: A002
    """B.3 sub-questions: question parts split, subject carried over."""
    return Answer(split_questions(input), Status.OK, detail="question parts split, subject carried over")


def offline_essential(query: str, response: str) -> Answer:
    """B.2 for one fact or claim."""
    return _one(essential(response, query))


def offline_essential_batch(query: str, facts: list[str]) -> Answer:
    """B.2 for numbered facts."""
    return _many({i: essential(f, query) for i, f in enumerate(facts, 1)})


def offline_source_essential(query: str, source: str) -> Answer:
    """SP1 for one source."""
    return _one(source_essential(source, query))


def offline_source_essential_batch(query: str, sources: list[str]) -> Answer:
    """SP1 for numbered sources."""
    return _many({i: source_essential(s, query) for i, s in enumerate(sources, 1)})


def offline_groundedness(sources: str, claim: str) -> Answer:
    """B.4 for one claim against the whole source set."""
    return _one(support(claim, sources))


def offline_groundedness_batch(sources: str, claims: list[str]) -> Answer:
    """B.4 for numbered claims."""
    return _many({i: support(c, sources) for i, c in enumerate(claims, 1)})


def offline_source_answers(source: str, question: str) -> Answer:
    """SQC: does one source (or the joined set) answer the sub-question?"""
    return _one(covers(source, question))


def offline_source_answers_batch(sources: list[str], questions: list[str]) -> Answer:
    """SQC for numbered sub-questions against each source and the whole set."""
    results: dict[Any, Decision] = {}
    whole = "\n\n".join(sources)
    for l, q in enumerate(questions, 1):
        for j, s in enumerate(sources, 1):
            results[(l, j)] = covers(s, q)
        results[(l, "all")] = covers(whole, q)
    return _many(results)


def offline_response_addresses(question: str, response: str) -> Answer:
    """RQC: does the response address the sub-question?"""
    return _one(covers(response, question, response=True))


def offline_response_addresses_batch(response: str, questions: list[str]) -> Answer:
    """RQC for numbered sub-questions."""
    return _many({i: covers(response, q, response=True) for i, q in enumerate(questions, 1)})
