"""Judging a run's items on a Ray cluster (`evaluate --ray [ADDRESS]`): the only module that imports ray.

Only where the items are judged differs from a run in one process (runner.py). The driver, this process,
claims the run, loads the request cache, holds the ONE writer and reports progress, as ever; the items are
cut into shards that Ray workers judge. A worker is an actor that opens the run's judge once (the offline
judge's model, or a litellm Router with its share of --concurrency) and evaluates each item of a shard with
the engine's evaluate_item. The driver polls every worker for what it finished: each judge call as soon as
it is answered, each finished item. Both join the writer's group commits: workers never open the database.

Nothing lost, nothing twice:
- Ray restarts a killed worker (max_restarts) and sends the calls that were on their way to it again. The
  driver sees the new process (its incarnation) and hands out the undelivered items of the old one's
  shards with the judge calls answered for them, so no answered call is asked again. Ray's own retry of a
  task is not used for shards: it replays a whole shard and drops its first outputs by position, while a
  shard's outputs come in the order its items finish.
- A killed driver takes its workers with it (they are its actors); `evaluate` again, with or without
  --ray, resumes the run as ever: stored items are skipped and stored calls come from the cache.
- An item delivered twice (a shard replayed after a restart) is written once.
- While the database cannot be written the driver takes nothing more, and a worker whose results wait
  (OUTBOX_MAX) starts no judge call, as a run in one process does.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import sys
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Protocol, Sequence
from urllib.parse import urlsplit

from evaluators.core.masking import mask_secrets, mask_url
from evaluators.core.records import Item, JudgeCall
from evaluators.judges.factory import JudgeConfig, judge_name, open_chain
from evaluators.judges.llm import JudgeFatal
from evaluators.judges.traffic import CallStats
from evaluators.metrics import registry
from evaluators.metrics import thelma as metrics_mod
from evaluators.runs.writer import Paused, Writer

INSTALL = "install rag-triage[cluster] (pip install 'rag-triage[cluster]')"
NAMESPACE = "rag-triage"  # the Ray namespace of the workers, named RUN/OWNER/N (`ray list actors` shows them)
MAX_RESTARTS = 4  # a worker killed more often than this is given up (its shards go to the others)
SHARD_MAX = 256  # items in a shard at most: a shard is what a worker is handed at a time
SHARDS_PER_WORKER = 4  # shards cut per worker, at least, so that the last ones balance the workers
POLL_S = 0.5  # the longest a worker's take() waits for something to hand over
OUTBOX_MAX = 512  # results a worker holds for the driver before its items stop asking the judge
CONNECT_S = 5.0  # how long an address given is tried before it counts as unreachable
START = "start one with `ray start --head`, or leave out the address for a local instance"

# A worker's actor options: one CPU each; Ray restarts a killed one and sends its calls on their way again.
WORKER: dict[str, Any] = {"num_cpus": 1, "max_restarts": MAX_RESTARTS, "max_task_retries": -1, "namespace": NAMESPACE}

# The shard an item of a worker belongs to, so that each judge call it makes is handed over with it.
_SHARD: ContextVar[int] = ContextVar("shard", default=-1)


@dataclass(frozen=True)
class ClusterOptions:
    """Where a run's items are judged instead of its own process (runner.RunOptions.cluster): Ray workers.

    address: None starts a local Ray instance; `auto`, `ray://HOST:PORT` or `HOST:PORT` joins a running
    cluster. workers: Ray workers (actors) judging at once (None: one per CPU of the cluster). shard_size:
    items handed to a worker at a time (None: shard_size() picks it).
    """

    address: str | None = None
    workers: int | None = None
    shard_size: int | None = None


class Evaluation(Protocol):
    """What the driver uses of the runner's evaluation (runner._Evaluation)."""

    run: str
    items: Sequence[Item]
    metrics: list[str]
    options: Any  # runner.RunOptions
    owner: Any  # ownership.Owner
    writer: Writer
    stats: Any  # traffic.CallStats
    done: int

    def report(self) -> None: ...


class ClusterUnavailable(ValueError):
    """Ray is missing, or the cluster named cannot be joined: one line, before the run is claimed."""


def address_problem(text: str) -> str | None:
    """Why `text` is no Ray address ("must ..."), or None: `auto`, `ray://HOST:PORT` or `HOST:PORT`."""
    if text == "auto":
        return None
    parts = urlsplit(text if "://" in text else f"gcs://{text}")
    try:
        port = parts.port
    except ValueError:  # not a number
        port = None
    if parts.scheme not in ("ray", "gcs") or not parts.hostname or port is None or parts.path.strip("/"):
        return f"must be auto, ray://HOST:PORT (Ray Client) or HOST:PORT (the head's GCS), got {mask_url(text)!r}"
    return None


def _ray(local: bool = False) -> Any:
    """Ray, imported now; `local`: for an instance of this machine alone, on the loopback address."""
    if local and "ray" not in sys.modules:  # Ray's switch for machines that join no cluster, read on import
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ClusterUnavailable(f"--ray needs Ray: {INSTALL}") from None
    return ray


def _reachable(address: str) -> None:
    """Raise ClusterUnavailable unless something answers at the address's host and port: Ray itself
    tries an address that does not answer for minutes, then exits the process."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        socket.create_connection((parts.hostname or "", parts.port or 0), timeout=CONNECT_S).close()
    except OSError as exc:
        raise ClusterUnavailable(
            f"--ray {mask_url(address)}: no Ray cluster answers at {parts.hostname}:{parts.port} "
            f"({exc.strerror or exc}); {START}"
        ) from None


@contextmanager
def joined(options: ClusterOptions) -> Iterator[Cluster]:
    """The Ray cluster of `options`: the address's (`auto`, `ray://...`, `HOST:PORT`), or a local instance
    started for this evaluation (on 127.0.0.1, no dashboard, no usage statistics) and shut down after it.
    A process already connected to Ray (a test, a notebook) uses that connection. Raises ClusterUnavailable
    (one line) when Ray is missing or the cluster cannot be joined."""
    ray = _ray(local=options.address is None)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray would otherwise report usage at start-up
    quiet = {"configure_logging": False, "logging_level": "ERROR", "log_to_driver": False}
    started = False
    if ray.is_initialized():
        where = ray.get_runtime_context().gcs_address
    elif options.address is None:
        # A new local instance (its token authentication's notice is not ours to print), its workers at this
        # process's priority: Ray's default of 15 steps nicer starves them beside anything else running.
        os.environ.setdefault("RAY_worker_niceness", "0")
        logging.getLogger("ray").setLevel(logging.ERROR)
        ray.init(include_dashboard=False, **quiet)
        started, where = True, "local"
    else:
        _reachable(options.address)
        try:
            ray.init(address=options.address, **quiet)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            reason = (mask_secrets(str(exc)).splitlines() or [type(exc).__name__])[0]
            if options.address == "auto" and isinstance(exc, ConnectionError):
                reason = f"no Ray cluster runs on this machine; {START}"
            raise ClusterUnavailable(f"--ray {mask_url(options.address)}: {reason}") from None
        started, where = True, mask_url(options.address)
    try:
        yield Cluster(ray, options, where)
    finally:
        if started:
            ray.shutdown()


def shard_size(n_items: int, workers: int, asked: int | None = None) -> int:
    """Items per shard: as asked, else SHARDS_PER_WORKER shards per worker at least, of SHARD_MAX items at most."""
    if asked:
        return asked
    return max(1, min(SHARD_MAX, -(-n_items // (workers * SHARDS_PER_WORKER))))


def shards(items: Sequence[Item], size: int) -> list[list[Item]]:
    """The items cut into shards of `size`, items with the same query in one shard where they fit: they
    share prompts (the query's sub-questions, its sources' essentiality), which one worker asks once."""
    ordered = sorted(items, key=lambda i: hashlib.sha256(i.query.encode("utf-8")).digest())
    return [ordered[k : k + size] for k in range(0, len(ordered), size)]


def credentials(config: JudgeConfig) -> dict[str, str]:
    """The variables the judge's keys are read from (--key-env, a judges file's os.environ/NAME), with this
    process's values: a worker on another machine reads its keys from them. A provider's own variable
    (OPENAI_API_KEY) is read from the workers' environment, as Ray started them."""
    names = {config.key_env} | {d.key_env for d in (config.judges.deployments if config.judges else ())}
    return {name: os.environ[name] for name in sorted(n for n in names if n) if name in os.environ}


@dataclass
class _Shard:
    """Items handed to a worker at once, and the answered judge calls it has handed back for them."""

    id: int
    items: list[Item]
    calls: list[JudgeCall] = field(default_factory=list)
    left: int = 0  # its items not delivered yet

    def __post_init__(self) -> None:
        self.left = len(self.items)


@dataclass
class _Seat:
    """A worker as the driver sees it: its actor, the process it last heard from, its shards."""

    actor: Any
    incarnation: str | None = None
    shards: dict[int, _Shard] = field(default_factory=dict)
    restarts: int = 0

    def undelivered(self) -> int:  # its items handed out and not delivered yet
        return sum(s.left for s in self.shards.values())


class Cluster:
    """A Ray cluster joined for one evaluation: where it is, how many workers judge on it."""

    def __init__(self, ray: Any, options: ClusterOptions, where: str) -> None:
        self.ray, self.options, self.where = ray, options, where

    def workers(self) -> int:
        """The workers asked for, else one per CPU of the cluster."""
        return self.options.workers or max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def sitting(self, n_items: int) -> dict[str, Any]:
        """Where this evaluation judges, as the run's params record it (ownership.SITTINGS)."""
        workers = self.workers()
        return {
            "where": "ray",
            "address": self.where,
            "workers": workers,
            "shard_size": shard_size(n_items, workers, self.options.shard_size),
        }

    async def judge(
        self, ev: Evaluation, items: list[Item], caches: dict[str, dict[str, JudgeCall]], per_component: bool
    ) -> None:
        """Judge `items` of the evaluation `ev` on the cluster's workers, handing each answered call and
        finished item to its writer; returns when every item was delivered."""
        if not items:
            return
        workers = self.workers()
        config = replace(
            ev.options.judge, concurrency=max(1, -(-ev.options.judge.concurrency // workers)), client_processes=1
        )
        size = shard_size(len(ev.items), workers, self.options.shard_size)
        actor = self.ray.remote(_Worker)
        in_flight = config.items_in_flight
        args = (config, list(ev.metrics), per_component, ev.options.sd_threshold, in_flight, credentials(config))
        named = (actor.options(name=f"{ev.run}/{ev.owner.token}/{k}", **WORKER) for k in range(workers))
        seats = [_Seat(worker.remote(*args)) for worker in named]
        try:
            # The cache goes once into the object store; a worker reads it when it opens its judge.
            cache = self.ray.put(caches)
            await _Driver(self.ray, ev, seats, shards(items, size), in_flight, cache).run()
        finally:
            for seat in seats:
                self.ray.kill(seat.actor, no_restart=True)


class _Driver:
    """Hands shards to the workers, polls each for what it finished, and feeds the writer."""

    def __init__(
        self, ray: Any, ev: Evaluation, seats: list[_Seat], cut: list[list[Item]], in_flight: int, cache: Any
    ) -> None:
        self.ray, self.ev, self.seats, self.cache = ray, ev, seats, cache
        self.pending = deque(_Shard(k, part) for k, part in enumerate(cut))
        self.next_id = len(cut)
        self.total = sum(len(part) for part in cut)
        self.items = {i.id: i for part in cut for i in part}
        self.delivered: set[str] = set()
        # A worker is handed shards while its undelivered items stay under this: its items in flight and
        # one shard more, so that it never idles between shards.
        self.room = max(2 * len(cut[0]), in_flight + len(cut[0]))
        self.tasks: dict[asyncio.Task[Any], tuple[str, _Seat, _Shard | None]] = {}
        self.lost = ""  # why the last worker given up died (its error's last line)

    async def run(self) -> None:
        for seat in self.seats:
            self._poll(seat)
        self._dispatch()
        try:
            while len(self.delivered) < self.total:
                await self.ev.writer.ready()  # a busy database: take nothing more, the workers pause
                done, _ = await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    kind, seat, shard = self.tasks.pop(task)
                    self._heard(task, kind, seat, shard)
                self._dispatch()
                if not self.tasks:  # a cluster that cannot run the engine (not installed there) ends here
                    raise ClusterUnavailable(f"every Ray worker died ({self.lost}); finished items are saved")
            if self.tasks:  # the last polls come back empty within POLL_S: then nothing is in flight
                await asyncio.wait(self.tasks)
        finally:
            for task in self.tasks:
                task.cancel()

    def _poll(self, seat: _Seat) -> None:
        self.tasks[asyncio.ensure_future(seat.actor.take.remote(POLL_S))] = ("take", seat, None)

    def _dispatch(self) -> None:
        live = [s for s in self.seats if s.restarts <= MAX_RESTARTS]
        while self.pending and live:
            seat = min(live, key=_Seat.undelivered)
            shard = self.pending[0]
            if seat.undelivered() + len(shard.items) > self.room and seat.shards:
                return
            self.pending.popleft()
            seat.shards[shard.id] = shard
            # The cache's reference inside a list: Ray hands it over as it is, for the worker to read once.
            ref = seat.actor.start.remote(shard.id, shard.items, shard.calls, [self.cache])
            self.tasks[asyncio.ensure_future(ref)] = ("start", seat, shard)

    def _heard(self, task: asyncio.Task[Any], kind: str, seat: _Seat, shard: _Shard | None) -> None:
        try:
            reply = task.result()
        except self.ray.exceptions.RayActorError as exc:
            # Restarted past MAX_RESTARTS, or gone with its node: the other workers take its shards.
            seat.restarts, self.lost = MAX_RESTARTS + 1, mask_secrets(str(exc).strip().splitlines()[-1])
            self._lost(seat)
            return
        except self.ray.exceptions.RayTaskError as exc:
            raise RuntimeError(f"a Ray worker failed: {mask_secrets(str(exc.cause or exc))}") from None
        if kind == "start":
            self._incarnation(seat, reply, shard)
            return
        incarnation, events, delta, waiting_s = reply
        self._incarnation(seat, incarnation, None)
        for event in events:
            self._event(seat, event)
        self._count(delta, waiting_s)
        self._poll(seat)

    def _incarnation(self, seat: _Seat, incarnation: str, started: _Shard | None) -> None:
        """Note the worker process that answered; a new one means the old one died with its shards."""
        if seat.incarnation is not None and incarnation != seat.incarnation:
            seat.restarts += 1
            self._lost(seat, keep=started)
        seat.incarnation = incarnation

    def _lost(self, seat: _Seat, keep: _Shard | None = None) -> None:
        """Hand the undelivered items of a dead worker's shards out again, with the calls answered for them."""
        for shard in list(seat.shards.values()):
            if shard is keep:
                continue
            del seat.shards[shard.id]
            rest = [i for i in shard.items if i.id not in self.delivered]
            if rest:
                self.pending.appendleft(_Shard(self.next_id, rest, shard.calls))
                self.next_id += 1

    def _event(self, seat: _Seat, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "call":
            _, shard_id, call = event
            shard = seat.shards.get(shard_id)
            if shard is not None and call.reply is not None:
                shard.calls.append(call)
            self.ev.writer.add_call(call)
        elif kind == "item":
            _, shard_id, item_id, result = event
            if item_id in self.delivered:
                return  # a replayed shard's item, written already
            if shard_id in seat.shards:
                seat.shards[shard_id].left -= 1
            self.delivered.add(item_id)
            self.ev.writer.add_item(self.items[item_id], result)
            self.ev.done += 1
            self.ev.report()
        elif kind == "done":
            seat.shards.pop(event[1], None)
        elif kind == "fatal":
            raise JudgeFatal(event[1])
        else:
            raise RuntimeError(f"a Ray worker failed: {event[1]}")

    def _count(self, delta: dict[str, Any], waiting_s: float) -> None:
        """Add a worker's call statistics since its last report to the run's, as its judge counted them."""
        stats: CallStats = self.ev.stats
        for name, value in delta.items():
            if name == "endpoints":
                for endpoint, n in value.items():
                    stats.endpoints[endpoint] = stats.endpoints.get(endpoint, 0) + n
            else:
                setattr(stats, name, getattr(stats, name) + value)
        stats.waiting_until = max(stats.waiting_until, time.monotonic() + waiting_s)


class _Worker:
    """A Ray actor that judges the shards it is handed with the run's judge, opened once, and keeps what
    it finished (judge calls, items) until the driver takes it."""

    def __init__(
        self,
        config: JudgeConfig,
        metrics: list[str],
        per_component: bool,
        sd_threshold: float,
        in_flight: int,
        env: dict[str, str],
    ) -> None:
        os.environ.update(env)
        self.incarnation = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.config, self.per_component, self.sd_threshold = config, per_component, sd_threshold
        self.chosen = {m: registry.METRICS[m] for m in metrics}
        self.caches: dict[str, dict[str, JudgeCall]] = {}
        self.slots = asyncio.Semaphore(in_flight)
        self.outbox: list[tuple[Any, ...]] = []
        self.running: dict[int, asyncio.Task[None]] = {}
        self.judge: Any = None
        self.sent: dict[str, Any] = {}
        self._stack = AsyncExitStack()
        self._opening = asyncio.Lock()
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()

    def pid(self) -> int:
        return os.getpid()

    async def start(self, shard: int, items: list[Item], calls: list[JudgeCall], cache_ref: list[Any]) -> str:
        """Begin judging a shard; `calls` were answered for its items before (by a worker that died), and
        cache_ref[0] is the reference of the run's request cache, read when the judge is opened."""
        async with self._opening:
            if self.judge is None:
                # One CPU: the offline judge's encoder passes (threads, outside the GIL) run one at a time.
                asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(WORKER["num_cpus"]))
                self.caches = await cache_ref[0]
                self.judge, _ = await open_chain(self._stack, self.config, self.caches, self._on_call)
        for tier, cache in self.caches.items():
            cache.update((c.key, c) for c in calls if c.model == judge_name(tier))
        if shard not in self.running:
            self.running[shard] = asyncio.create_task(self._shard(shard, items))
        return self.incarnation

    async def take(self, wait_s: float) -> tuple[str, list[tuple[Any, ...]], dict[str, Any], float]:
        """What was finished since the last take (waiting up to `wait_s` for something), with the judge's
        call statistics since then and how long it is held by a rate limit."""
        if not self.outbox:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait_s)
            except asyncio.TimeoutError:
                pass
        events, self.outbox = self.outbox, []
        self._drained.set()
        stats = getattr(self.judge, "stats", None)
        now = stats.as_dict() if stats is not None else {}
        delta = {k: v - self.sent.get(k, 0) for k, v in now.items() if k != "endpoints"}
        was = self.sent.get("endpoints", {})
        delta["endpoints"] = {e: n - was.get(e, 0) for e, n in now.get("endpoints", {}).items() if n > was.get(e, 0)}
        self.sent = now
        waiting = max(0.0, stats.waiting_until - time.monotonic()) if stats is not None else 0.0
        return self.incarnation, events, delta, waiting

    async def ready(self) -> None:
        """Return once the driver has room for more results (Paused waits on it before every judge call)."""
        while len(self.outbox) >= OUTBOX_MAX:
            self._drained.clear()
            await self._drained.wait()

    def _put(self, event: tuple[Any, ...]) -> None:
        self.outbox.append(event)
        self._wake.set()

    def _on_call(self, call: JudgeCall) -> None:
        self._put(("call", _SHARD.get(), call))

    async def _shard(self, shard: int, items: list[Item]) -> None:
        _SHARD.set(shard)  # the items' tasks copy this context: their calls are handed over with the shard
        try:
            async with asyncio.TaskGroup() as group:
                for item in items:
                    group.create_task(self._item(shard, item))
            self._put(("done", shard))
        except* JudgeFatal as fatal:
            self._put(("fatal", str(fatal.exceptions[0])))
        except* Exception as failed:
            error = failed.exceptions[0]
            self._put(("error", mask_secrets(f"{type(error).__name__}: {error}")))
        finally:
            self.running.pop(shard, None)

    async def _item(self, shard: int, item: Item) -> None:
        async with self.slots:
            await self.ready()
            result = await metrics_mod.evaluate_item(
                item, self.chosen, Paused(self.judge, self), self.per_component, self.sd_threshold, fatal=(JudgeFatal,)
            )
        self._put(("item", shard, item.id, result))
