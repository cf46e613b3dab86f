"""GRAMMAR end to end over the engine's runner: judge a run's correctness, run the reference
pipeline into a stored run, and build the offline demo runs.

These open judges the way the runner does (offline, local, or a litellm model, with the request
cache of the database), so they sit above the runner; the CLI and data/build_demo.py call them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from evaluators.core.records import Item, Judge, JudgeCall, Status
from evaluators.grammar import COMPANY_SQL, META_GROUP, TEMPLATES
from evaluators.grammar.generate import Case, generate, load_templates, open_source
from evaluators.grammar.pipeline import RETRIEVERS, Doc, answer_cases, render_corpus
from evaluators.grammar.robustness import Correctness, grammar_items, judge_items, write_correctness
from evaluators.judges import factory
from evaluators.judges.factory import JudgeConfig
from evaluators.metrics.registry import THELMA
from evaluators.runs import runner
from evaluators.storage import queries, store, writes


class NoGrammarItems(ValueError):
    """A run holds no item with GRAMMAR metadata, so there is no correctness to judge."""


async def open_judge(
    stack: AsyncExitStack, config: JudgeConfig, db: str | Path | None, calls: list[JudgeCall]
) -> Judge:
    """The judge `config` names (offline, local, a litellm model, or a chain of them like `evaluate`'s
    "offline>openai/gpt-4o-mini") answering from the cache of `db` (when given) and appending every new
    call to `calls`. ValueError (one line) for a bad chain."""
    tiers, _ = factory.check_chain(config.spec, config.decompose_with)
    caches = {
        tier: queries.runs.load_cache(db, factory.judge_name(tier)) for tier in tiers if db and tier != factory.OFFLINE
    }
    judge, _ = await factory.open_chain(stack, config, caches, calls.append)
    return judge


@dataclass
class CorrectnessSummary:
    """What `evaluate_correctness` did: items judged, correct, and failures by status."""

    run: str
    judge: str
    items: int
    skipped: int  # run items without GRAMMAR metadata
    correct: int
    statuses: dict[str, int]

    def text(self) -> str:
        fails = ", ".join(f"{s} {n}" for s, n in sorted(self.statuses.items()) if s != Status.OK.value)
        return (
            f"correctness of run {self.run} by {self.judge}: {self.correct} correct of "
            f"{self.statuses.get(Status.OK.value, 0)} judged, {self.items} items"
            + (f" ({fails})" if fails else "")
            + (f"; {self.skipped} items without GRAMMAR metadata skipped" if self.skipped else "")
        )


def evaluate_correctness(
    db: str | Path,
    run: str,
    judge: str = "offline",
    api_base: str | None = None,
    concurrency: int = 8,
    timeout: float = 60.0,
    key_env: str | None = None,
) -> CorrectnessSummary:
    """Judge every GRAMMAR item of a stored run against its ground truth and store the verdicts.

    Items need `grammar_group` in their metadata and the ground truth as `reference`. Judge calls
    are stored in judge_calls (so reruns are answered from the cache).
    """
    total = queries.runs.count_items(db, run)
    items = grammar_items(db, run)
    if not items:
        raise NoGrammarItems(f"run {run!r} has no items with GRAMMAR metadata ({META_GROUP})")

    async def go() -> tuple[list[Correctness], list[JudgeCall], str]:
        calls: list[JudgeCall] = []
        async with AsyncExitStack() as stack:
            config = JudgeConfig(judge, api_base, key_env, concurrency, timeout)
            judge_obj = await open_judge(stack, config, db, calls)
            return await judge_items(items, judge_obj), calls, judge_obj.name

    rows, calls, name = asyncio.run(go())
    if calls:
        writes.write_batch(db, run, calls=calls)
    write_correctness(db, run, rows)
    statuses = Counter(r.status.value for r in rows)
    return CorrectnessSummary(
        run, name, len(rows), total - len(items), sum(bool(r.correct) for r in rows), dict(statuses)
    )


@dataclass
class PipelineResult:
    """A finished pipeline run: the THELMA summary and the correctness summary."""

    run: str
    thelma: runner.RunSummary
    correctness: CorrectnessSummary


def run_pipeline(
    cases: Sequence[Case],
    docs: Sequence[Doc],
    db: str | Path,
    run: str,
    retriever: str = "bm25",
    top_k: int = 1,
    generator: str = "offline",
    judge: str = "offline",
    correctness_judge: str = "offline",
    api_base: str | None = None,
    metrics: Sequence[str] | None = None,
    concurrency: int = 8,
    decompose_with: str | None = None,
    on_progress: Callable[[runner.Progress], None] | None = None,
    key_env: str | None = None,
) -> PipelineResult:
    """Answer `cases` over `docs`, store them as run `run` with THELMA scores, then judge correctness.

    `judge` may be a chain ("offline>openai/gpt-4o-mini"), whose tier `decompose_with` decomposes.
    """
    if retriever not in RETRIEVERS:
        raise ValueError(f"unknown retriever {retriever!r}; known: {', '.join(RETRIEVERS)}")
    metrics = runner.check_metrics(metrics or THELMA)
    factory.check_chain(judge, decompose_with)  # a bad chain fails before the generator is asked
    store.migrate(db)

    async def go() -> tuple[list[Item], list[JudgeCall]]:
        calls: list[JudgeCall] = []
        async with AsyncExitStack() as stack:
            config = JudgeConfig(generator, api_base, key_env, concurrency)
            gen = await open_judge(stack, config, db, calls)
            return await answer_cases(cases, docs, retriever, top_k, gen), calls

    items, calls = asyncio.run(go())
    if calls:
        writes.write_batch(db, run, calls=calls)
    thelma = runner.evaluate(
        items,
        db,
        run,
        judge,
        api_base=api_base,
        key_env=key_env,
        metrics=metrics,
        concurrency=concurrency,
        decompose_with=decompose_with,
        on_progress=on_progress,
    )
    correctness = evaluate_correctness(db, run, correctness_judge, api_base, concurrency, key_env=key_env)
    return PipelineResult(run, thelma, correctness)


# Documents the demo retrieves per question. At one, BM25 and the dense retriever return the same document,
# the one naming the question's entity, for every question of the demo set, and their runs are the same run;
# at two they differ on 30 of its 72 questions, as retrievers do.
DEMO_TOP_K = 2


def build_demo(
    db: str | Path,
    retrievers: Sequence[str] = ("bm25", "dense"),
    max_groups: int | None = None,
    metrics: Sequence[str] | None = None,
    on_progress: Callable[[runner.Progress], None] | None = None,
) -> list[PipelineResult]:
    """The offline demo: test set from data/grammar, one run per retriever (`grammar-<retriever>`), each
    retrieving DEMO_TOP_K documents per question."""
    with open_source(COMPANY_SQL) as con:
        testset = generate(con, load_templates(TEMPLATES), max_groups=max_groups)
        docs = render_corpus(con)
    return [
        run_pipeline(
            testset.cases,
            docs,
            db,
            f"grammar-{r}",
            retriever=r,
            top_k=DEMO_TOP_K,
            metrics=metrics,
            on_progress=on_progress,
        )
        for r in retrievers
    ]
