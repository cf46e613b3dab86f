"""Run an evaluation: resumable, cached, with progress, writing every item whole.

`evaluate` skips items the run already finished and answers repeated judge requests from the
DuckDB cache, so a killed run restarted with the same command continues where it stopped. One
writer task (writer.py) group-commits finished items and new judge calls: each write is one transaction. A
busy database is waited for, never the end of a run, and while nothing can be written no judge
call is started. The run records its owner (host, pid) and a heartbeat each write refreshes, so a
second process refuses to evaluate it and a dead one's run reads as interrupted.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Sequence

from evaluators.core.confidence import DEFAULT_BANDS, band_for
from evaluators.core.masking import mask_secrets
from evaluators.core.records import LABEL, Item, Judge, Run, Status
from evaluators.judges import cascade, prompts
from evaluators.judges.factory import OFFLINE, JudgeConfig, check_chain, judge_name, open_chain
from evaluators.judges.llm import JudgeFatal
from evaluators.judges.traffic import CallStats
from evaluators.metrics import registry
from evaluators.metrics import thelma as metrics_mod
from evaluators.metrics.registry import REFERENCE, THELMA
from evaluators.runs.cluster import ClusterOptions
from evaluators.runs.writer import BUSY_TRY_S, Paused, Writer, patiently
from evaluators.storage import ownership, queries, store
from evaluators.storage.ownership import FAILED, FINISHED, FINISHED_WITH_FAILURES

WAIT_TICK_S = 5.0  # how often the progress line is redrawn while the judge waits out a rate limit
HEARTBEAT_S = 20.0  # the longest pause between a run's writes; RAG_TRIAGE_HEARTBEAT_S overrides it


def check_metrics(names: Iterable[str]) -> list[str]:
    """Validate metric ids, keeping the caller's order."""
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in registry.METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {', '.join(unknown)}; known: {', '.join(registry.METRICS)}")
    if not names:
        raise ValueError("no metrics selected")
    return list(dict.fromkeys(names))


def default_metrics(items: Sequence[Item]) -> list[str]:
    """The metrics a run computes when none are named: THELMA's seven, and the reference-based ones
    when some item carries a reference (an owner with golden answers expects them; the others stay
    not_applicable). A file without references gets exactly THELMA's, as before they existed."""
    return [*THELMA, *(REFERENCE if any(item.reference for item in items) else ())]


@dataclass
class Progress:
    """What the progress bar shows; passed to `on_progress` after every item."""

    done: int
    total: int
    skipped: int
    calls: int
    cache_hits: int
    tokens: int
    cost: float
    elapsed_s: float
    rate_wait_s: float = 0.0  # seconds left before the rate-limited judge may call again
    db_wait_s: float | None = None  # how long the writer has waited for a busy database

    @property
    def eta_s(self) -> float | None:
        fresh = self.done - self.skipped
        if fresh <= 0:
            return None
        return self.elapsed_s / fresh * (self.total - self.done)

    def line(self) -> str:
        eta = "?" if self.eta_s is None else time.strftime("%H:%M:%S", time.gmtime(self.eta_s))
        line = (
            f"items {self.done}/{self.total} | calls {self.calls} | cache hits {self.cache_hits} | "
            f"tokens {self.tokens:,} | cost ${self.cost:.4f} | ETA {eta}"
        )
        if self.rate_wait_s > 0:
            line += f" | waiting for rate limit ({math.ceil(self.rate_wait_s)}s)"
        if self.db_wait_s is not None:
            line += f" | waiting for the database ({self.db_wait_s:.0f} s)"
        return line


@dataclass
class RunSummary:
    """The end-of-run report: per metric, scored out of total, and failures by status."""

    run: str
    items: int
    stats: dict[str, Any]
    metrics: dict[str, dict[str, int]] = field(default_factory=dict)  # metric -> {status: count}
    failed_steps: dict[str, int] = field(default_factory=dict)  # failed judge steps (verdicts) by status
    failed_items: int = 0  # items with a failed step or score
    tiers: dict[str, int] = field(default_factory=dict)  # a cascade's verdicts by the tier that decided them

    @property
    def status(self) -> str:
        """The stored status of a run that ran to its end: finished, or finished with failures."""
        return FINISHED_WITH_FAILURES if self.failed_items else FINISHED

    def text(self) -> str:
        lines = [
            f"run {self.run}: {self.items} items | judge calls {self.stats.get('calls', 0)} | "
            f"cache hits {self.stats.get('cache_hits', 0)} | tokens "
            f"{self.stats.get('prompt_tokens', 0) + self.stats.get('completion_tokens', 0):,}"
        ]
        for metric, counts in self.metrics.items():
            total = sum(counts.values())
            failures = ", ".join(f"{s} {n}" for s, n in sorted(counts.items()) if s != Status.OK.value)
            lines.append(
                f"  {metric:<22} scored {counts.get(Status.OK.value, 0)} of {total}"
                + (f"  ({failures})" if failures else "")
            )
        if self.stats.get("bare_replies"):
            lines.append(
                f"answers read from a bare reply (a rating without the <output> tags asked for): "
                f"{self.stats['bare_replies']}"
            )
        if len(self.stats.get("endpoints") or {}) > 1:
            lines.append("calls by endpoint: " + ", ".join(f"{e} {n}" for e, n in self.stats["endpoints"].items()))
        if self.tiers:
            lines.append("verdicts by tier: " + ", ".join(f"{tier} {n}" for tier, n in self.tiers.items()))
        if self.failed_items:
            steps = ", ".join(f"{s} {n}" for s, n in sorted(self.failed_steps.items()))
            lines.append(
                f"{self.status}: {sum(self.failed_steps.values())} judge steps failed ({steps or 'scores'}) "
                f"in {self.failed_items} item{'s' if self.failed_items != 1 else ''}"
            )
        return "\n".join(lines)


def run_params(
    metrics: Sequence[str], per_component: bool, sd_threshold: float, chain: cascade.CascadeJudge | None = None
) -> dict[str, Any]:
    """The options that define a run's results: resuming requires the same ones.

    A cascade's also record its tiers, the tier that decomposes and the bands that escalate a
    verdict, so resuming it with another chain, decomposer or band is a RunConflict.
    """
    params: dict[str, Any] = {"metrics": list(metrics), "per_component": per_component, "sd_threshold": sd_threshold}
    if chain is not None:
        params["cascade"] = {
            "tiers": chain.labels,
            "decompose_with": chain.decompose_with,
            "bands": {kind: list(band_for(kind, chain.band)) for kind in DEFAULT_BANDS if kind != LABEL},
        }
    return params


@dataclass(frozen=True)
class RunOptions:
    """What a run computes and with which judge: one record shared by evaluate(), the CLI's `evaluate`
    and the dashboard's Evaluate page. Resuming a run requires the options that define its results
    (run_params()).

    judge: the judge's configuration (judges/factory.py). metrics: metric ids, in order. per_component:
    one judge call per component, as in the paper (default: batched). sd_threshold: the cosine at which
    two response sentences repeat. update: the run recorded other content: re-evaluate exactly the
    changed and added items and delete the removed ones. retry_failed: ask the failed judge steps again.
    heartbeat_s: the longest pause between the run's writes (None: RAG_TRIAGE_HEARTBEAT_S, else
    HEARTBEAT_S). cluster: judge the items on Ray workers (ClusterOptions); None: in this process.
    """

    judge: JudgeConfig = field(default_factory=JudgeConfig)
    metrics: tuple[str, ...] = THELMA
    per_component: bool = False
    sd_threshold: float = metrics_mod.SD_THRESHOLD
    update: bool = False
    retry_failed: bool = False
    heartbeat_s: float | None = None
    cluster: ClusterOptions | None = None

    @staticmethod
    def of(judge: str = OFFLINE, **fields: Any) -> RunOptions:
        """The options evaluate() is given by name: a JudgeConfig's fields (api_base, key_env, concurrency,
        timeout, rate_limit_patience, client_processes, decompose_with) configure the judge, the others
        are the run's own. An unknown name is a TypeError."""
        config = {name: fields.pop(name) for name in list(fields) if name in _JUDGE_FIELDS}
        if "metrics" in fields:
            fields["metrics"] = tuple(fields["metrics"])
        return RunOptions(JudgeConfig(judge, **config), **fields)


_JUDGE_FIELDS = frozenset(f.name for f in dataclass_fields(JudgeConfig)) - {"spec"}


class _Evaluation:
    """One evaluation's moving parts: its options checked, its writer, its judge's statistics and the
    progress counts that on_progress hears about."""

    def __init__(
        self,
        items: Sequence[Item],
        db: str | Path,
        run: str,
        options: RunOptions,
        on_progress: Callable[[Progress], None] | None,
    ) -> None:
        self.items, self.db, self.run, self.on_progress = items, db, run, on_progress
        self.metrics = check_metrics(options.metrics)
        self.tiers, _ = check_chain(options.judge.spec, options.judge.decompose_with)
        self.chosen = {m: registry.METRICS[m] for m in self.metrics}
        self.options = options
        self.heartbeat_s = options.heartbeat_s or float(os.environ.get("RAG_TRIAGE_HEARTBEAT_S", HEARTBEAT_S))
        self.owner = ownership.Owner.this_process()
        self.started = time.monotonic()
        self.stats = CallStats()
        self.done = self.skipped = 0
        self.writer = Writer(db, run, self.owner, self.heartbeat_s, self.report)

    def report(self) -> None:
        if self.on_progress:
            now = time.monotonic()
            s = self.stats
            self.on_progress(
                Progress(
                    self.done,
                    len(self.items),
                    self.skipped,
                    s.calls,
                    s.cache_hits,
                    s.prompt_tokens + s.completion_tokens,
                    s.cost,
                    now - self.started,
                    max(0.0, s.waiting_until - now),
                    self.writer.waiting_s,
                )
            )

    def claim(self, judge: Judge, per_component: bool, sitting: dict[str, Any] | None) -> asyncio.Queue[Item]:
        """Record the run (or take it over) in one transaction, before any judge call; the items to evaluate.

        `sitting` says where this evaluation judges (a Ray cluster's address, workers and shard size): the
        run's params keep one record per sitting once one was judged on Ray, since a resumed run may be
        judged elsewhere than where it started. None: here, in this process."""
        chain = judge if isinstance(judge, cascade.CascadeJudge) else None
        used = sorted({p for metric in self.chosen.values() for p in metric.prompts})
        meta = Run(
            self.run,
            chain.chain if chain else judge.name,
            run_params(self.metrics, per_component, self.options.sd_threshold, chain),
            prompts.prompt_hashes(used),
        )
        claim = ownership.claim_run(
            self.db,
            meta,
            {i.id: i.content_hash() for i in self.items},
            self.owner,
            self.heartbeat_s,
            self.options.update,
            self.options.retry_failed,
            sitting or {"where": "process", "host": self.owner.host},
            record_new=sitting is not None,
        )
        self.writer.replace = claim.replace
        wanted = set(claim.todo)
        queue: asyncio.Queue[Item] = asyncio.Queue()
        for item in self.items:
            if item.id in wanted:
                queue.put_nowait(item)
        self.done = self.skipped = len(self.items) - queue.qsize()
        return queue

    async def worker(self, queue: asyncio.Queue[Item], judge: Judge, per_component: bool) -> None:
        while True:
            await self.writer.ready()  # start no item while its results could not be stored
            if queue.empty():
                return
            item = queue.get_nowait()
            # A bug or a bad input inside one item marks its metrics `error`; a refusing judge ends the run.
            result = await metrics_mod.evaluate_item(
                item, self.chosen, judge, per_component, self.options.sd_threshold, fatal=(JudgeFatal,)
            )
            self.writer.add_item(item, result)
            self.done += 1
            self.report()

    async def tick(self) -> None:
        # A rate-limited judge finishes no item for minutes: keep the wait on the progress line.
        while True:
            await asyncio.sleep(WAIT_TICK_S)
            if self.stats.waiting_until > time.monotonic():
                self.report()

    async def judge_here(self, queue: asyncio.Queue[Item], judge: Judge, per_component: bool) -> None:
        """Evaluate the queued items in this process, with as many workers as keep the judge busy."""
        workers = [
            asyncio.create_task(self.worker(queue, judge, per_component))
            for _ in range(self.options.judge.items_in_flight)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()

    async def judge_all(self, judging: Awaitable[None]) -> None:
        """Run `judging` (here, or on Ray workers) beside the writer; everything answered is stored before
        this returns, however it ends."""
        writer_task = asyncio.create_task(self.writer.loop())
        try:
            await judging
        finally:
            self.writer.close()
            await writer_task

    async def finish(self, error: str, tiers: Sequence[str] | None) -> RunSummary | None:
        """Record how the run ended (waiting out a busy database); the summary unless it failed."""
        summary = None if error else summarize(self.db, self.run, self.stats.as_dict(), tiers)
        finish = partial(
            ownership.finish_run,
            self.db,
            self.run,
            summary.status if summary else FAILED,
            summary.stats if summary else self.stats.as_dict(),
            error,
            self.owner,
            BUSY_TRY_S,
        )
        await patiently(lambda: finish, self.writer.waiting)
        return summary

    async def evaluate(self) -> RunSummary:
        async with AsyncExitStack() as stack:
            judging: Any = None
            if self.options.cluster is not None:  # joined first: a cluster that is not there writes nothing
                from evaluators.runs import cluster

                judging = stack.enter_context(cluster.joined(self.options.cluster))
            store.migrate(self.db)
            caches = {t: queries.runs.load_cache(self.db, judge_name(t)) for t in self.tiers if t != OFFLINE}
            # On Ray the workers judge; the judge opened here checks its access and names the run's judge.
            judge, forced = await open_chain(stack, self.options.judge, caches, self.writer.add_call)
            per_component = self.options.per_component or forced
            chain = judge if isinstance(judge, cascade.CascadeJudge) else None
            if judging is None:
                self.stats = getattr(judge, "stats", self.stats)  # a cascade's sums its tiers' as it is read
            queue = self.claim(judge, per_component, judging.sitting(len(self.items)) if judging else None)
            self.report()
            ticker = asyncio.create_task(self.tick())
            error = ""
            try:
                if judging is not None:
                    todo = [queue.get_nowait() for _ in range(queue.qsize())]
                    await self.judge_all(judging.judge(self, todo, caches, per_component))
                else:
                    await self.judge_all(self.judge_here(queue, Paused(judge, self.writer), per_component))
            except BaseException as exc:
                error = mask_secrets(str(exc)) or type(exc).__name__
                raise
            finally:
                ticker.cancel()
                summary = await self.finish(error, chain.labels if chain else None)
        assert summary is not None  # a failed run raised above
        return summary


async def evaluate_async(
    items: Sequence[Item],
    db: str | Path,
    run: str,
    options: RunOptions | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> RunSummary:
    """Evaluate `items` into run `run` of `db` with `options`; see `evaluate`."""
    return await _Evaluation(items, db, run, options or RunOptions(), on_progress).evaluate()


def evaluate(
    items: Sequence[Item],
    db: str | Path,
    run: str,
    judge: str = OFFLINE,
    options: RunOptions | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    **fields: Any,
) -> RunSummary:
    """Evaluate items into a named run of a DuckDB file; resumes an unfinished run of that name.

    The options are a RunOptions record, or its fields given by name with the judge's spec in `judge`
    (RunOptions.of: `evaluate(items, db, run, "openai/gpt-4o-mini", metrics=["gr"], api_base=URL)`).
    The judge is offline, local, a litellm model, or a chain of them ("offline>openai/gpt-4o-mini", see
    evaluators/judges/cascade.py) whose tiers each decide what they are sure of. on_progress hears a
    Progress after every item. The run must be what `items` say: if the run recorded other content,
    ownership.InputChanged names the changed, added and removed ids, unless `update` re-evaluates exactly
    those (and deletes the removed ones). ownership.RunBusy: another live process is evaluating the run
    (nothing was called). ownership.RunConflict: the run exists with another judge, options or prompt files.
    Raises JudgeUnavailable (a ValueError) before any call when a litellm judge lacks its key or
    endpoint, and JudgeFatal when the judge refuses requests (400/401) or stays rate limited past
    the patience: completed items stay stored. The summary's status is `finished with failures`
    when a judge step failed.
    """
    if options is None:
        options = RunOptions.of(judge, **fields)
    elif fields or judge != OFFLINE:
        raise TypeError("evaluate() takes options as a RunOptions record or by name, not both")
    return asyncio.run(evaluate_async(items, db, run, options, on_progress))


def summarize(
    db: str | Path, run: str, stats: dict[str, Any] | None = None, tiers: Sequence[str] | None = None
) -> RunSummary:
    """Counts of scores by metric and status for a stored run, and its failed judge steps.

    For a cascade (its `tiers`), the decided verdicts by tier too, also kept in the stats stored on the run.
    """
    counts: dict[str, dict[str, int]] = {}
    for row in queries.sql.rows(queries.runs.score_status_counts(db, run)):
        counts.setdefault(row.metric, {})[row.status] = int(row.n)
    order = {m: k for k, m in enumerate(registry.METRICS)}
    ordered = dict(sorted(counts.items(), key=lambda kv: order.get(kv[0], len(order))))
    steps, failed_items = queries.runs.failed_steps(db, run)
    stats = dict(stats or {})
    by_tier: dict[str, int] = {}
    if tiers:
        found = queries.runs.verdicts_by_tier(db, run)
        by_tier = {tier: found.pop(tier, 0) for tier in tiers} | found  # chain order; any other tier after
        stats["verdicts_by_tier"] = by_tier
    return RunSummary(run, queries.runs.count_items(db, run), stats, ordered, steps, failed_items, by_tier)


def print_progress(progress: Progress) -> None:
    """A one-line progress bar on stderr, redrawn in place on a terminal."""
    tty = sys.stderr.isatty()
    if (
        not tty
        and progress.db_wait_s is None
        and not progress.rate_wait_s
        and progress.done not in (progress.total,)
        and progress.done % max(1, progress.total // 20)
    ):
        return  # in logs, print about every 5 %, and every wait for the database or a rate limit
    # On a terminal, erase what a longer previous line left behind.
    print(progress.line() + ("\x1b[K" if tty else ""), end="\r" if tty else "\n", file=sys.stderr, flush=True)
