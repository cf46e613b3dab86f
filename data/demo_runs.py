"""The demo's three runs, generated deterministically from our corpus and query annotations.

The corpus (data/demo/corpus/*.md) is the handbook of a fictitious ferry company: one file per
document, one paragraph per chunk, chunk ids `<document>-<n>`. data/demo/queries.jsonl holds the
queries, each split into parts with the chunks that answer it, a grounded answer, and a made-up
answer (the kind of thing a generator invents when its sources do not cover the question).

Three pipelines answer the same queries, the way real ones differ:
- weak_retriever: a naive keyword retriever (raw term overlap, top 3) and a concise
  generator that answers only from what it got, sometimes inventing the part it did not get;
- better_retriever: the annotated chunks (standing in for a good retriever), plus a neighbouring
  chunk for every other query, and the same concise generator;
- verbose_generator: the same good retrieval, and a generator that repeats itself, pads the
  answer with extraneous facts and unsupported claims, and sometimes drops a part of the query.

`python -m data.demo_runs` rewrites data/demo/runs/*.jsonl; tests check the files match.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

DEMO = Path(__file__).resolve().parent / "demo"
CORPUS_DIR = DEMO / "corpus"
QUERIES = DEMO / "queries.jsonl"
RUNS_DIR = DEMO / "runs"
RUNS = ("weak_retriever", "better_retriever", "verbose_generator")
KEYWORD_K = 3
# When each query was asked, in the log the three pipelines replay: one every 6 hours from Monday 2
# November 2026, twelve days in two weeks, so the Trends page has item times to bucket by day or week.
ASKED_FROM, ASKED_EVERY = datetime(2026, 11, 2, 8, tzinfo=timezone.utc), timedelta(hours=6)

_WORD = re.compile(r"[a-z0-9]+(?:[.:,][0-9]+)*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


@dataclass(frozen=True)
class Chunk:
    """One retrievable paragraph of a corpus document."""

    id: str
    doc: str
    title: str
    text: str


@dataclass(frozen=True)
class Part:
    """One sub-question of a query, with the chunks that answer it and two candidate answers."""

    question: str
    answer: str
    chunks: tuple[str, ...]
    made_up: str


@dataclass(frozen=True)
class Query:
    """A demo query as a user asks it, and its parts (sub-questions) as annotated."""

    id: str
    topic: str
    text: str
    parts: tuple[Part, ...]

    @property
    def gold(self) -> list[str]:
        return list(dict.fromkeys(c for p in self.parts for c in p.chunks))


def load_corpus(folder: Path = CORPUS_DIR) -> list[Chunk]:
    """Chunks of every document, in file-name then paragraph order."""
    chunks = []
    for path in sorted(folder.glob("*.md")):
        title, *paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        for n, text in enumerate(paragraphs, 1):
            chunks.append(Chunk(f"{path.stem}-{n}", path.stem, title.lstrip("# "), " ".join(text.split())))
    return chunks


def load_queries(path: Path = QUERIES) -> list[Query]:
    """The annotated demo queries."""
    queries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            parts = tuple(Part(p["question"], p["answer"], tuple(p["chunks"]), p["made_up"]) for p in row["parts"])
            queries.append(Query(row["id"], row["topic"], row["query"], parts))
    return queries


def numbers(text: str) -> set[str]:
    """The numbers in a text, thousands separators dropped ("9,800" -> "9800")."""
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def check_annotations(corpus: list[Chunk], queries: list[Query]) -> list[str]:
    """Problems in the annotations: unknown chunk ids, grounded answers with numbers their
    chunks lack, made-up answers whose numbers the corpus does contain. Empty when all is well."""
    by_id = {c.id: c for c in corpus}
    corpus_numbers = set().union(*(numbers(c.text) for c in corpus))
    problems = []
    if len({q.id for q in queries}) != len(queries):
        problems.append("duplicate query ids")
    for q in queries:
        for p in q.parts:
            unknown = [c for c in p.chunks if c not in by_id]
            if unknown or not p.chunks:
                problems.append(f"{q.id}: unknown or no chunks {unknown}")
                continue
            gold_numbers = set().union(*(numbers(by_id[c].text) for c in p.chunks))
            if numbers(p.answer) - gold_numbers:
                problems.append(f"{q.id}: answer numbers {sorted(numbers(p.answer) - gold_numbers)} not in its chunks")
            if not numbers(p.made_up) - corpus_numbers:
                problems.append(f"{q.id}: made-up answer {p.made_up!r} has no number the corpus lacks")
    return problems


# ---------------------------------------------------------------- retrievers


def keyword_retrieve(query: str, corpus: list[Chunk], k: int = KEYWORD_K) -> list[Chunk]:
    """Top-k chunks by raw term overlap: every word counts, "the" and "how" as much as "Tidecard"
    (no stopwords, no IDF, no length normalisation), so long chunks full of common words win
    and one part of a two-part query often crowds out the other. Ties go in corpus order."""
    wanted = set(_WORD.findall(query.lower()))
    scored = []
    for n, chunk in enumerate(corpus):
        counts = Counter(_WORD.findall(chunk.text.lower()))
        score = sum(counts[w] for w in wanted)
        if score:
            scored.append((-score, n, chunk))
    return [chunk for _, _, chunk in sorted(scored)[:k]]


def gold_retrieve(query: Query, corpus: list[Chunk], extra: bool) -> list[Chunk]:
    """The chunks that answer the query, plus (when `extra`) the next chunk of the first one's
    document, or the previous one when it is the last: the near miss a good retriever brings."""
    by_id = {c.id: c for c in corpus}
    chosen = [by_id[c] for c in query.gold]
    if extra:
        first = by_id[query.gold[0]]
        siblings = [c for c in corpus if c.doc == first.doc]
        at = siblings.index(first)
        neighbour = siblings[at + 1] if at + 1 < len(siblings) else siblings[at - 1] if at else None
        if neighbour and neighbour not in chosen:
            chosen.append(neighbour)
    return chosen


# ---------------------------------------------------------------- generators

NOT_FOUND = "The documents I was given do not contain this information."

# Company boilerplate a verbose generator pads with: plausible, off-topic, and in no source.
FILLERS = (
    "Brackwater Ferries is proud to have served the Selmar Estuary for almost four decades.",
    "Customer surveys show that 94 percent of passengers would recommend the service to a friend.",
    "The company was named regional transport operator of the year in 2013.",
    "Passengers can often see the estuary's seal colonies from the outer decks.",
    "Hot drinks and snacks are sold on board every vessel throughout the day.",
    "Every year around 70 school classes discover the estuary by ferry.",
    "The crews are friendly and always happy to help visitors find their way.",
    "The estuary is home to more than 120 species of birds.",
)
# Unsupported claims a verbose generator adds to sound thorough.
EMBELLISHMENTS = (
    "This arrangement has been reviewed every 6 months since it was introduced.",
    "Around 85 percent of passengers say this works well for them.",
    "The same policy applies on all partner ferry services in the region since 2016.",
    "Most other operators on the coast charge about twice as much.",
)
REPEATS = ("To repeat: {}", "In short: {}", "So, to sum up: {}")


def concise(query: Query, got: list[Chunk], misses: Counter[str]) -> str:
    """Answer each part whose chunk was retrieved; for a part not covered, alternately say
    nothing or make the answer up (`misses` counts misses across the run, so the choice is fixed)."""
    ids = {c.id for c in got}
    sentences = []
    for part in query.parts:
        if ids & set(part.chunks):
            sentences.append(part.answer)
        else:
            misses["n"] += 1
            if misses["n"] % 2 == 0:
                sentences.append(part.made_up)
    return " ".join(sentences) or NOT_FOUND


def verbose(query: Query, got: list[Chunk], n: int) -> str:
    """A long answer whose defect depends on the query's position `n`, cycling through four styles:
    repeat (restates the answer), pad (extraneous facts), omit (drops the last part of a
    two-part query and pads), embellish (unsupported claims)."""
    answers = [p.answer for p in query.parts]
    style = ("repeat", "pad", "omit", "embellish")[n % 4]
    if style == "omit" and len(answers) == 1:
        style = "embellish"
    filler = [FILLERS[(n + k) % len(FILLERS)] for k in range(3)]
    extra_source = [c.text.split(". ")[0].rstrip(".") + "." for c in got if c.id not in query.gold][:1]
    if style == "repeat":
        body = answers + [REPEATS[(n + k) % len(REPEATS)].format(answers[0]) for k in range(2)]
    elif style == "pad":
        body = answers + extra_source + filler
    elif style == "omit":
        body = answers[:-1] + extra_source + filler[:2]
    else:
        body = answers + [EMBELLISHMENTS[n % len(EMBELLISHMENTS)], EMBELLISHMENTS[(n + 1) % len(EMBELLISHMENTS)]]
    return " ".join(body)


# ---------------------------------------------------------------- runs


def _item(query: Query, got: list[Chunk], response: str, retriever: str, generator: str, n: int) -> dict[str, Any]:
    """The item of query number `n` as a pipeline answered it."""
    return {
        "id": query.id,
        "query": query.text,
        "sources": [c.text for c in got],
        "response": response,
        "metadata": {
            "retriever": retriever,
            "generator": generator,
            "chunks": [c.id for c in got],
            "gold_chunks": query.gold,
            "topic": query.topic,
            "parts": len(query.parts),
            "asked_at": (ASKED_FROM + n * ASKED_EVERY).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }


def build_runs(corpus: list[Chunk], queries: list[Query]) -> dict[str, list[dict[str, Any]]]:
    """The items of every demo run, keyed by run name, in query order."""
    weak_misses: Counter[str] = Counter()
    good_misses: Counter[str] = Counter()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in RUNS}
    for n, q in enumerate(queries):
        weak = keyword_retrieve(q.text, corpus)
        runs["weak_retriever"].append(_item(q, weak, concise(q, weak, weak_misses), "keyword-top3", "concise", n))
        good = gold_retrieve(q, corpus, extra=n % 2 == 0)
        runs["better_retriever"].append(_item(q, good, concise(q, good, good_misses), "gold+neighbour", "concise", n))
        runs["verbose_generator"].append(_item(q, good, verbose(q, good, n), "gold+neighbour", "verbose", n))
    return runs


def render(items: list[dict[str, Any]]) -> str:
    """JSONL text of a run, one item per line."""
    return "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)


def write_runs(folder: Path = RUNS_DIR, emit: Callable[[str], None] = print) -> dict[str, Path]:
    """Check the annotations, then (re)write every run file; returns run name -> path."""
    corpus, queries = load_corpus(), load_queries()
    problems = check_annotations(corpus, queries)
    if problems:
        raise ValueError("demo annotations:\n" + "\n".join(problems))
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, items in build_runs(corpus, queries).items():
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text(render(items), encoding="utf-8")
        emit(f"wrote {paths[name]} ({len(items)} items)")
    return paths


def main(argv: list[str] | None = None) -> None:
    """Command line: rewrite the demo run files."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    write_runs()


if __name__ == "__main__":
    main()
