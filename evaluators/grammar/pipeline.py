"""The GRAMMAR demo corpus and a reference RAG pipeline to test against.

The domain is data/grammar/: a fictitious company database (company.sql), a corpus rendered from it
(corpus_spec.json, one document per project, client and employee, with deliberate coverage gaps),
and hand-written SQL and text templates (templates.json).

The pipeline retrieves with BM25 (sparse keywords, written here) or MiniLM embeddings (dense,
through evaluators.judges.embeddings), and answers through a judge with the `grammar_rag_answer` prompt: a
litellm model, or the offline extractive generator below (`offline_answer`). Its items carry the
retrieved document ids, the semantic group and the ground truth in their metadata; grammar.runs
stores them as a run and judges their correctness.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from evaluators.core.records import Item, Judge, Status
from evaluators.core.text import split_sentences
from evaluators.grammar import CORPUS_SPEC, META_GENERATOR_STATUS, META_RETRIEVED
from evaluators.grammar.generate import Case, as_text
from evaluators.judges.embeddings import embed
from evaluators.judges.peers.grammar import entity_words, without_entity, words


@dataclass(frozen=True)
class Doc:
    """One retrievable document."""

    id: str
    title: str
    text: str


def render_corpus(con: Any, spec_path: str | Path = CORPUS_SPEC) -> list[Doc]:
    """One document per row of each spec query, one sentence per spec key; the title is kept apart.

    A sentence is left out when one of its fields is NULL, or when the spec's `omit` lists it for
    that document (a fact the database holds but the corpus does not: a coverage gap).
    """
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    omit: dict[str, list[str]] = spec.get("omit", {})
    docs = []
    for kind in spec["documents"]:
        result = con.execute(kind["sql"])
        names = [d[0] for d in result.description]
        for row in result.fetchall():
            values = dict(zip(names, row))
            text = {k: as_text(v) for k, v in values.items() if v is not None}
            doc_id = text["doc_id"]
            sentences = [
                s.format_map(text)
                for key, s in kind["sentences"].items()
                if key not in omit.get(doc_id, []) and all(f in text for f in _fields(s))
            ]
            title = kind["title"].format_map(text)
            docs.append(Doc(doc_id, title, " ".join(sentences)))
    return docs


def _fields(template: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", template)


def write_corpus(docs: Sequence[Doc], path: str | Path) -> None:
    """JSONL rows {id, title, text}."""
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n")


def load_corpus(path: str | Path) -> list[Doc]:
    """Read a corpus JSONL; ValueError names the first bad line."""
    docs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    docs.append(Doc(str(row["id"]), str(row.get("title", "")), str(row["text"])))
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"{path}:{n}: not a document ({type(exc).__name__}: {exc})") from None
    if not docs:
        raise ValueError(f"{path}: no documents")
    return docs


# ---------------------------------------------------------------- retrievers


class BM25:
    """Okapi BM25 over whole documents: the sparse keyword retriever."""

    name = "bm25"

    def __init__(self, docs: Sequence[Doc], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs, self.k1, self.b = list(docs), k1, b
        self.tf = [Counter(words(d.text)) for d in self.docs]
        self.length = [sum(tf.values()) for tf in self.tf]
        self.avg = sum(self.length) / max(1, len(self.length))
        df = Counter(t for tf in self.tf for t in tf)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}

    def scores(self, query: str) -> np.ndarray:
        q = words(query)
        out = np.zeros(len(self.docs))
        for j, (tf, length) in enumerate(zip(self.tf, self.length)):
            norm = self.k1 * (1 - self.b + self.b * length / self.avg)
            out[j] = sum(self.idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in q if t in tf)
        return out


class Dense:
    """Cosine similarity of MiniLM embeddings of the query and each whole document."""

    name = "dense"

    def __init__(self, docs: Sequence[Doc]) -> None:
        self.docs = list(docs)
        self.vectors = embed([d.text for d in self.docs])

    def scores(self, query: str) -> np.ndarray:
        return self.vectors @ embed([query])[0]


def retrieve(retriever: BM25 | Dense, query: str, k: int) -> list[Doc]:
    """The top-k documents; ties keep corpus order, so results are deterministic."""
    scores = retriever.scores(query)
    order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
    return [retriever.docs[j] for j in order[:k]]


RETRIEVERS: dict[str, Callable[[Sequence[Doc]], BM25 | Dense]] = {"bm25": BM25, "dense": Dense}


# ---------------------------------------------------------------- the pipeline


async def answer_cases(
    cases: Sequence[Case], docs: Sequence[Doc], retriever: str, top_k: int, generator: Judge
) -> list[Item]:
    """Retrieve and answer each case; the Items carry retrieval ids, group and ground truth."""
    index = RETRIEVERS[retriever](docs)
    retrieved = [retrieve(index, c.query, top_k) for c in cases]
    if generator.name == "offline":  # batched encodes up front instead of hundreds of tiny ones
        sentences = {d.id: split_sentences(d.text) for d in docs}
        embed([s for ss in sentences.values() for s in ss])
        embed(
            [
                without_entity(c.query, entity_words(c.query, [s for d in found for s in sentences[d.id]]))
                for c, found in zip(cases, retrieved)
            ]
        )

    async def one(case: Case, found: list[Doc]) -> Item:
        answer = await generator.ask("grammar_rag_answer", sources=[d.text for d in found], question=case.query)
        meta = {
            **case.metadata(),
            META_RETRIEVED: [d.id for d in found],
            "retriever": retriever,
            "generator": generator.name,
            META_GENERATOR_STATUS: answer.status.value,
            "generator_detail": answer.detail or "",
        }
        response = answer.value if answer.status is Status.OK else ""
        return Item(case.id, case.query, tuple(d.text for d in found), response, case.answer, meta)

    return list(await asyncio.gather(*(one(c, f) for c, f in zip(cases, retrieved))))
