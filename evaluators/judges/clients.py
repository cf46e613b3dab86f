"""Worker processes that send an LLM judge's calls (ClientPool), each through litellm on its own event
loop: litellm's per-call CPU on one loop, not the endpoint, bounds how busy a slow endpoint is kept."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import signal
from typing import Any

from evaluators.judges.llm import load_litellm, send
from evaluators.judges.replies import Failure


class ClientPool:
    """Worker processes that send judge calls, each through litellm on its own event loop.

    litellm spends milliseconds of CPU per call; on one event loop that, not the endpoint, caps
    the calls in flight. The pool spreads that work over processes (each with its own litellm Router
    of the judge's deployments) and keeps everything else (cache, retries, records) in the judge.
    Use as a context manager: the workers start on entry (importing litellm while the run gets
    ready) and stop on exit.
    """

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._conns: list[Any] = []
        self._workers: list[Any] = []
        self._pending: list[dict[int, asyncio.Future[dict[str, Any]]]] = []
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> "ClientPool":
        # spawn: a fork would copy the parent's event loop, threads and open database handles.
        context = multiprocessing.get_context("spawn")
        for _ in range(self.processes):
            ours, theirs = context.Pipe()
            worker = context.Process(target=_serve, args=(theirs,), daemon=True, name="judge-client")
            worker.start()
            theirs.close()
            self._conns.append(ours)
            self._workers.append(worker)
            self._pending.append({})
        return self

    def __exit__(self, *exc: object) -> None:
        for k, conn in enumerate(self._conns):
            if self._loop is not None:
                self._loop.remove_reader(conn.fileno())
            try:
                conn.send(None)  # finish what is in flight, then exit
            except OSError:
                pass
            self._fail_pending(k, "the judge's client processes stopped")
        for worker in self._workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.terminate()
        for conn in self._conns:
            conn.close()

    async def send(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """As llm.send, in the worker with the fewest calls pending."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            for k, conn in enumerate(self._conns):
                self._loop.add_reader(conn.fileno(), self._on_reply, k)
        k = min(range(len(self._conns)), key=lambda i: len(self._pending[i]))
        if not self._workers[k].is_alive():
            raise Failure("server", f"judge client process {self._workers[k].pid} exited")
        call_id = next(self._ids)
        future = self._loop.create_future()
        self._pending[k][call_id] = future
        try:
            self._conns[k].send((call_id, kwargs))
            return await future
        finally:
            self._pending[k].pop(call_id, None)

    def _on_reply(self, k: int) -> None:
        conn = self._conns[k]
        try:
            while conn.poll():
                call_id, outcome, value = conn.recv()
                future = self._pending[k].get(call_id)
                if future is None or future.done():
                    continue
                if outcome == "ok":
                    future.set_result(value)
                else:
                    future.set_exception(Failure(*value))
        except (EOFError, OSError):
            assert self._loop is not None
            self._loop.remove_reader(conn.fileno())
            self._fail_pending(k, f"judge client process {self._workers[k].pid} exited")

    def _fail_pending(self, k: int, why: str) -> None:
        for future in self._pending[k].values():
            if not future.done():
                future.set_exception(Failure("server", why))


def _serve(conn: Any) -> None:
    """A ClientPool worker: answer (id, kwargs) requests from the pipe until it sends None."""
    # Ctrl-C reaches the whole process group: the judge's process stops its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    load_litellm()  # now, while the run gets ready, not at the first call

    asyncio.run(_serve_async(conn))


async def _serve_async(conn: Any) -> None:
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()

    async def answer(call_id: int, kwargs: dict[str, Any]) -> None:
        reply: tuple[str, Any]
        try:
            reply = ("ok", await send(kwargs))
        except Failure as failure:
            reply = ("fail", (failure.kind, failure.message, failure.retry_after))
        except Exception as exc:  # a bug here must reach the judge as a failed attempt, not a lost call
            reply = ("fail", ("server", f"{type(exc).__name__}: {exc}", 0.0))
        conn.send((call_id, *reply))

    def readable() -> None:
        try:
            while conn.poll():
                message = conn.recv()
                if message is None:
                    raise EOFError
                task = loop.create_task(answer(*message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            done.set()

    loop.add_reader(conn.fileno(), readable)
    await done.wait()
    if tasks:
        await asyncio.wait(tasks)
