"""How close LLMJudge gets to ideal concurrency against a slow OpenAI-protocol server.

The loopback test server (tests/openai_server.py) sleeps a fixed latency before every reply. With
C calls in flight, N calls should take N * latency / C seconds; the ratio ideal / measured shows
what the client side (litellm's per-call CPU, the event loop, the adaptive limit) costs on top.
Every call has a distinct prompt and a fresh cache, so nothing is shared or cached.

    .venv/bin/python benchmarks/concurrency.py [--latency 0.2] [--calls 256] [--in-process]
                                               [--client-processes N] [--model openai/test-judge]

By default the server runs in its own process, so its threads don't compete with the client for
the GIL; --in-process shares one interpreter, as the tests do. --client-processes N sends the calls
from a judge.ClientPool of N worker processes: the CPU column is then the judge's own process (its
event loop), without the workers'. --model names the judge through another litellm provider
of the same protocol (hosted_vllm/test-judge takes litellm's own HTTP path, not the OpenAI SDK).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # run as a script from anywhere

from evaluators.core.records import Status  # noqa: E402
from evaluators.judges.clients import ClientPool  # noqa: E402
from evaluators.judges.llm import LLMJudge  # noqa: E402

MODEL = "openai/test-judge"  # unless --model
SOURCES = ["The sky is blue on a clear day because air scatters short wavelengths more than long ones."]


async def measure(base_url: str, concurrency: int, calls: int, tag: str,
                  pool: ClientPool | None = None, model: str = MODEL) -> tuple[float, float]:
    """(wall seconds, client CPU ms per call) for `calls` distinct asks at `concurrency`."""
    judge = LLMJudge(model, api_base=base_url, api_key="x", concurrency=concurrency, timeout=30.0, pool=pool)
    cpu0, t0 = time.process_time(), time.perf_counter()
    answers = await asyncio.gather(*(judge.ask("groundedness", sources=SOURCES, claim=f"Claim {tag}-{i}: sky is blue.")
                                     for i in range(calls)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    failed = [a for a in answers if a.status is not Status.OK]
    if failed or judge.stats.calls != calls:
        raise RuntimeError(f"{len(failed)} failed asks, {judge.stats.calls} calls made: {failed[:1]}")
    return wall, cpu * 1000 / calls


async def run(base_url: str, latency: float, calls: int, levels: list[int], processes: int, model: str) -> None:
    with ClientPool(processes) if processes > 1 else _no_pool() as pool:
        await _levels(base_url, latency, calls, levels, pool, model)


@contextlib.contextmanager
def _no_pool() -> Iterator[None]:
    yield None


async def _levels(base_url: str, latency: float, calls: int, levels: list[int], pool: ClientPool | None,
                  model: str) -> None:
    # Warm up: litellm's import and client set-up are one-off costs, not per-call ones.
    await measure(base_url, 4, 8 * (pool.processes if pool else 1), "warmup", pool, model)
    print(f"latency {latency * 1000:.0f} ms per call, {model} at {base_url}, "
          f"{pool.processes if pool else 'no'} client processes, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    # The event loop is one thread: calls * CPU-per-call is a floor on the wall time, whatever the concurrency.
    print(f"{'concurrency':>11} {'calls':>6} {'measured s':>11} {'ideal s':>8} {'ideal/measured':>15} "
          f"{'client CPU ms/call':>19} {'CPU-bound best ratio':>21}")
    for level in levels:
        n = min(calls, 32) if level == 1 else calls
        wall, cpu_ms = await measure(base_url, level, n, f"c{level}", pool, model)
        ideal = n * latency / level
        best = min(1.0, ideal / (n * cpu_ms / 1000))
        print(f"{level:>11} {n:>6} {wall:>11.2f} {ideal:>8.2f} {ideal / wall:>15.2f} {cpu_ms:>19.1f} {best:>21.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


def main() -> None:
    """Start the server (own process by default), run each concurrency level, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--calls", type=int, default=256)
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--in-process", action="store_true", help="serve from a thread of this process")
    parser.add_argument("--client-processes", type=int, default=1, help="worker processes sending the calls")
    parser.add_argument("--model", default=MODEL, help="the judge's litellm model name")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if args.in_process:
        from openai_server import OpenAIServer

        with OpenAIServer(latency=args.latency) as server:
            asyncio.run(run(server.base_url, args.latency, args.calls, levels, args.client_processes, args.model))
        return
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"), "--latency", str(args.latency)],
                            stdout=subprocess.PIPE, text=True)
    try:
        base_url = proc.stdout.readline().strip()
        asyncio.run(run(base_url, args.latency, args.calls, levels, args.client_processes, args.model))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
