"""The runner's group commit: everything finished since the last write goes into the next transaction,
with the judge calls answered meanwhile. A busy database is waited for, never the end of a run, and
while nothing can be written the workers start no judge call."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from evaluators.core.records import Answer, Item, Judge, JudgeCall
from evaluators.metrics import thelma as metrics_mod
from evaluators.storage import ownership, store, writes

BUSY_TRY_S = 1.0  # one attempt at a busy database file; the writer tries again, without a deadline
# Finished items with no new judge call among them wait this long after the last write for others to join
# their commit: a commit opens, checkpoints and closes the file (tens of ms of CPU), and the offline judge's
# items, arriving one by one, would otherwise keep a core of a small machine writing. A judge call answered
# meanwhile is written at once: a crash would ask it again.
ITEMS_GAP_S = 1.0


async def patiently(prepare: Callable[[], Callable[[], None]], waiting: Callable[[float | None], None]) -> None:
    """Run the write `prepare()` returns, in a thread, until the database file lets it.

    Each attempt gives up on a busy file after BUSY_TRY_S and calls `prepare` again (in the event
    loop's thread), so what arrived meanwhile joins the retry. `waiting` hears the seconds waited
    so far after each busy attempt, and None once the write went through.
    """
    since: float | None = None
    delay = 0.1
    while True:
        try:
            await asyncio.to_thread(prepare())
            break
        except store.StoreBusy:
            since = since if since is not None else time.monotonic()
            waiting(time.monotonic() - since)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    if since is not None:
        waiting(None)


class Writer:
    """Group commit: everything finished since the last write goes into the next transaction.

    A busy database file is waited for, holding everything in memory; meanwhile `ready()` holds
    the workers back, so no judge call is started for a result that could not be stored. Writing
    at least every `heartbeat_s` keeps the run's heartbeat fresh.
    """

    def __init__(
        self, db: str | Path, run: str, owner: ownership.Owner, heartbeat_s: float, on_wait: Callable[[], None]
    ) -> None:
        self.db, self.run, self.owner, self.heartbeat_s = db, run, owner, heartbeat_s
        self.replace: frozenset[str] = frozenset()  # item ids whose stored results these replace
        self.calls: list[JudgeCall] = []
        self.results: list[tuple[Item, metrics_mod.ItemResult]] = []
        self._held_calls: list[JudgeCall] = []
        self._held_results: list[tuple[Item, metrics_mod.ItemResult]] = []
        self.waiting_s: float | None = None
        self.error: BaseException | None = None
        self._on_wait = on_wait
        self._writable = asyncio.Event()
        self._writable.set()
        self._wake = asyncio.Event()
        self._paid = asyncio.Event()  # a judge call came (or the run ends): write now
        self._last_write = float("-inf")
        self._closed = False

    def add_call(self, call: JudgeCall) -> None:
        self.calls.append(call)
        self._wake.set()
        self._paid.set()

    def add_item(self, item: Item, result: metrics_mod.ItemResult) -> None:
        self.results.append((item, result))
        self._wake.set()

    async def ready(self) -> None:
        """Return once results can be stored; raise what stopped the writer."""
        await self._writable.wait()
        if self.error is not None:
            raise self.error

    def waiting(self, seconds: float | None) -> None:
        """Pause the workers while the database is busy (seconds waited), resume them on None."""
        self.waiting_s = seconds
        if seconds is None:
            self._writable.set()
        else:
            self._writable.clear()
        self._on_wait()

    async def loop(self) -> None:
        try:
            while True:
                try:
                    await asyncio.wait_for(self._wake.wait(), self.heartbeat_s)
                except asyncio.TimeoutError:
                    pass  # nothing new: write anyway, it is the heartbeat
                left = self._last_write + ITEMS_GAP_S - time.monotonic()
                if left > 0 and not self.calls:
                    try:
                        await asyncio.wait_for(self._paid.wait(), left)
                    except asyncio.TimeoutError:
                        pass  # the items gathered meanwhile go together
                self._wake.clear()
                self._paid.clear()
                closing = self._closed
                await patiently(self._prepare, self.waiting)
                self._last_write = time.monotonic()
                if closing and not self.calls and not self.results:
                    return
        except BaseException as exc:
            self.error = exc
            self._writable.set()  # paused workers wake up to the error
            raise

    def _prepare(self) -> Callable[[], None]:
        # What a busy attempt could not write stays held and joins the next attempt.
        self._held_calls += self.calls
        self._held_results += self.results
        self.calls, self.results = [], []
        calls, results = self._held_calls, self._held_results

        def write() -> None:
            try:
                ownership.write_results(
                    self.db,
                    self.run,
                    self.owner,
                    items=[i for i, _ in results],
                    components=[c for _, r in results for c in r.components],
                    verdicts=[v for _, r in results for v in r.verdicts],
                    scores=[s for _, r in results for s in r.scores],
                    calls=calls,
                    replace=self.replace,
                    deadline_s=BUSY_TRY_S,
                )
            except (store.StoreBusy, ownership.RunBusy):
                raise  # busy: tried again; taken over: the calls are stored already
            except Exception:
                if calls:  # the items cannot be stored: keep the paid answers at least
                    writes.write_batch(self.db, self.run, calls=calls)
                raise
            self._held_calls, self._held_results = [], []

        return write

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._paid.set()


class Ready(Protocol):
    """What a paused judge waits on: the writer, or a Ray worker's room for results (runs/cluster.py)."""

    async def ready(self) -> None: ...


class Paused:
    """A judge whose asks wait while their results could not be stored: no paid call for nothing."""

    def __init__(self, judge: Judge, writer: Ready) -> None:
        self.judge, self.writer, self.name = judge, writer, judge.name

    async def ask(self, prompt: str, **variables: Any) -> Answer:
        await self.writer.ready()
        return await self.judge.ask(prompt, **variables)
