"""RAGAS (seed 004): faithfulness, answer relevance and context relevance.

Metric ids:
    ragas_faithfulness       share of the answer's statements supported by the context
    ragas_answer_relevance   mean cosine (MiniLM) between the query and 3 questions generated from the answer
    ragas_context_relevance  context sentences extracted as relevant / all context sentences
"""

from __future__ import annotations

import html
import re
from typing import Sequence

from evaluators.core.records import Component, Status, Verdict, unit
from evaluators.core.text import has_content, split_sentences, unreadable
from evaluators.judges.embeddings import embed
from evaluators.judges.peers.common import YES_NO
from evaluators.judges.peers.ragas import N_QUESTIONS
from evaluators.metrics.suites.common import decompose, judge_lines
from evaluators.metrics.thelma import ItemWork, Metric

# Component kinds (the dashboard reads kinds from the data).
RAGAS_STATEMENT = "ragas_statement"  # RAGAS statements of the response
GENERATED_QUESTION = "generated_question"  # questions generated from the response
CONTEXT_SENTENCE = "context_sentence"  # sentences of the sources (parent: source index)
EXTRACTED_SENTENCE = "extracted_sentence"  # what the judge extracted (parent: matched context sentence)


# ---------------------------------------------------------------- pure steps


def similarity_verdicts(
    item_id: str, metric: str, cosines: Sequence[float], call_key: str | None = None
) -> list[Verdict]:
    """One verdict per generated question: value = cosine to the query, clipped into [0, 1]."""
    return [
        Verdict(
            item_id=item_id,
            metric=metric,
            component_kind=GENERATED_QUESTION,
            component_idx=i,
            target="query",
            value=unit(c),
            status=Status.OK,
            evidence=unit(c),
            call_key=call_key,
            detail=f"cosine {c:.3f} to the query",
        )
        for i, c in enumerate(cosines)
    ]


def _words(text: str) -> str:
    """Lower-case words, space-separated and space-padded, so containment respects word boundaries.

    Entities are unescaped first: a judge may copy the prompt's escaped `AT&amp;T` back.
    """
    return " " + " ".join(re.findall(r"\w+", html.unescape(text).lower())) + " "


def _extracts(line: str, sentence: str) -> bool:
    """The line holds the whole sentence, or is a fragment keeping at least half of it."""
    if sentence in line:
        return True
    return bool(line.strip()) and line in sentence and len(line.strip()) >= len(sentence.strip()) / 2


def match_extracted(sentences: Sequence[str], extracted: Sequence[str]) -> list[int | None]:
    """For each context sentence, the index of the extracted line that contains it, else None.

    Case and punctuation are ignored, and words stay whole. A fragment counts when it keeps at
    least half of its sentence (a judge that splits one sentence in two still extracted it).
    A line that is exactly its sentence, the usual case, is found without scanning every line.
    """
    found = [_words(e) for e in extracted]
    exact: dict[str, int] = {}
    for i, line in enumerate(found):
        exact.setdefault(line, i)

    def hit(sentence: str) -> int | None:
        if not sentence.strip():
            return None
        if sentence in exact:
            return exact[sentence]
        return next((i for i, line in enumerate(found) if _extracts(line, sentence)), None)

    return [hit(sentence) for sentence in map(_words, sentences)]


# ---------------------------------------------------------------- match steps


async def match_faithfulness(work: ItemWork) -> list[Verdict]:
    """Statements of the answer, then one support verdict (Yes/No) per statement against the context."""
    statements = await decompose(
        work,
        "ragas_statements",
        RAGAS_STATEMENT,
        "ragas_statements",
        query=work.item.query,
        response=work.item.response,
    )
    if not isinstance(statements, list):
        return work.decompose_failure("ragas_faithfulness", RAGAS_STATEMENT, statements)
    return await judge_lines(
        work,
        "ragas_faithfulness",
        RAGAS_STATEMENT,
        statements,
        "sources",
        "ragas_faithfulness",
        "claims",
        YES_NO,
        sources=list(work.item.sources),
    )


async def answer_relevance(work: ItemWork, metric: str) -> list[Verdict]:
    """N_QUESTIONS questions generated from the answer, each scored by its cosine to the query."""
    questions = await decompose(
        work, "ragas_questions", GENERATED_QUESTION, "ragas_questions", response=work.item.response
    )
    if not isinstance(questions, list):
        return work.decompose_failure(metric, GENERATED_QUESTION, questions)
    questions = questions[:N_QUESTIONS]
    if not questions:
        return []
    why = next(
        (
            f"the {name} is {w}"
            for name, text in (("query", work.item.query), ("response", work.item.response))
            if (w := unreadable(text))
        ),
        None,
    )
    if why:  # MiniLM's cosines mean nothing on text it cannot read
        return [
            Verdict(
                item_id=work.item.id,
                metric=metric,
                component_kind=GENERATED_QUESTION,
                component_idx=-1,
                target="query",
                value=None,
                status=Status.NOT_APPLICABLE,
                detail=f"the MiniLM encoder reads English only: {why}",
            )
        ]
    vectors = embed([work.item.query] + [q.text for q in questions])
    return similarity_verdicts(work.item.id, metric, list(vectors[1:] @ vectors[0]), questions[0].call_key)


async def match_answer_relevance(work: ItemWork) -> list[Verdict]:
    """Mean cosine between the query and questions generated from the answer."""
    return await answer_relevance(work, "ragas_answer_relevance")


async def match_context_relevance(work: ItemWork) -> list[Verdict]:
    """Sentences the judge extracts as needed for the query, over all sentences of the context."""
    metric = "ragas_context_relevance"
    answer = await work.judge.ask("ragas_context_sentences", query=work.item.query, sources=list(work.item.sources))
    texts = [(j, s) for j, source in enumerate(work.item.sources) for s in split_sentences(source) if has_content(s)]
    sentences = [Component(work.item.id, CONTEXT_SENTENCE, i, s, j) for i, (j, s) in enumerate(texts)]
    work.components.extend(sentences)
    if answer.status is not Status.OK:
        return work.decompose_failure(metric, EXTRACTED_SENTENCE, answer)
    hits = match_extracted([c.text for c in sentences], answer.value)
    matched: dict[int, int] = {}  # extracted line -> the first context sentence it contains
    for idx, line in enumerate(hits):
        if line is not None:
            matched.setdefault(line, idx)
    work.components.extend(
        Component(work.item.id, EXTRACTED_SENTENCE, i, text, matched.get(i), answer.call_key)
        for i, text in enumerate(answer.value)
    )
    return [
        work.verdict(
            metric,
            CONTEXT_SENTENCE,
            c.idx,
            "query",
            answer,
            value=float(hit is not None),
            detail=f"extracted (line {hit + 1})"
            if hit is not None
            else ("not extracted" if answer.value else "not extracted: Insufficient Information"),
        )
        for c, hit in zip(sentences, hits)
    ]


FAITHFULNESS = Metric(
    "ragas_faithfulness",
    "RAGAS faithfulness",
    match_faithfulness,
    prompts=("ragas_statements", "ragas_faithfulness"),
    reads=("response",),
    description="RAGAS faithfulness: share of the answer's statements supported by the context",
)
ANSWER_RELEVANCE = Metric(
    "ragas_answer_relevance",
    "RAGAS answer relevance",
    match_answer_relevance,
    prompts=("ragas_questions",),
    reads=("query", "response"),
    description="RAGAS answer relevance: mean cosine between the query and 3 questions generated from the answer",
)
CONTEXT_RELEVANCE = Metric(
    "ragas_context_relevance",
    "RAGAS context relevance",
    match_context_relevance,
    prompts=("ragas_context_sentences",),
    reads=("query",),
    description="RAGAS context relevance: extracted relevant sentences / all context sentences",
)
