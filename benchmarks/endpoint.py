"""How busy `python -m evaluators evaluate` keeps a slow judge endpoint, end to end through the CLI.

Starts the loopback OpenAI-protocol server (tests/openai_server.py) in its own process with a fixed
latency and a request log, then runs the real CLI in another process on 200 WikiEval-sized triplets
(../shared/datasets/wikieval: each question with its answer, ungrounded answer and poor answer, over
its short and long contexts), once per concurrency level, each into a fresh database so nothing is
cached. Start-up (imports, migrations, the run's claim) is excluded: the span measured runs from the
first request's arrival to the last reply, both read from the server's log. The concurrency bound is
calls x latency / concurrency; the ratio printed is bound / span (1.0 is an endpoint never idle
below the bound). Beside it: the CLI's CPU per call (start-up and its worker processes included) and
the loopback server's (it shares the machine's cores with the client), and the machine's load
average before and after every level.

    .venv/bin/python benchmarks/endpoint.py [--latency 0.2] [--items 200] [--levels 32,64]
                                            [--replicas 1] [--extra "--per-component"]
                                            [--model openai/test-judge]

--model names the judge through another litellm provider of the same protocol, e.g.
hosted_vllm/test-judge (litellm's own HTTP path, not the OpenAI SDK).

--replicas N starts N servers and passes each with its own --api-base: the ratio is then over all
replicas together, and the calls each one answered are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKIEVAL = ROOT.parent / "shared" / "datasets" / "wikieval" / "wikieval.jsonl"
MODEL = "openai/test-judge"  # unless --model


def triplets(n: int) -> list[dict[str, object]]:
    """`n` WikiEval triplets: question x (answer, ungrounded, poor) x (context_v1, context_v2)."""
    rows = [json.loads(line) for line in WIKIEVAL.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: list[dict[str, object]] = []
    for answer in ("answer", "ungrounded_answer", "poor_answer"):
        for context in ("context_v1", "context_v2"):
            for row in rows:
                text = row[answer].removeprefix("Answer: ")
                out.append({"id": f"{row['row_idx']}-{answer}-{context}", "query": row["question_text"],
                            "sources": row[context], "response": text})
    if n > len(out):
        raise SystemExit(f"at most {len(out)} WikiEval triplets, asked for {n}")
    return out[:n]


def load() -> str:
    """The 1-minute load average and the core count, as printed beside every figure."""
    return f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


def start_servers(n: int, latency: float, logs: list[Path]) -> tuple[list[subprocess.Popen[str]], list[str]]:
    """N loopback servers in their own processes; their base URLs."""
    procs, urls = [], []
    for log in logs[:n]:
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"), "--latency", str(latency),
                                 "--log", str(log)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        urls.append(proc.stdout.readline().strip())  # type: ignore[union-attr]
    return procs, urls


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_log(path: Path) -> list[dict[str, float | str]]:
    """The server's log lines (one per answered request)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure(items: Path, db: Path, urls: list[str], logs: list[Path], servers: list[int], level: int,
            latency: float, extra: list[str], model: str = MODEL) -> None:
    """Run the CLI once at `level` calls in flight and print its row."""
    for log in logs:
        log.unlink(missing_ok=True)
    before = load()
    cmd = [sys.executable, "-m", "evaluators", "evaluate", str(items), "--db", str(db), "--run", f"c{level}",
           "--judge", model, "--concurrency", str(level), "--quiet", *extra]
    for url in urls:
        cmd += ["--api-base", url]
    server0 = sum(cpu_s(pid) for pid in servers)
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": "x"}, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = sum(cpu_s(pid) for pid in servers) - server0
    if done.returncode != 0:
        raise SystemExit(f"evaluate exited {done.returncode}: {done.stderr[-2000:]}")
    per_log = [read_log(log) for log in logs]
    lines = [line for found in per_log for line in found]
    calls = len(lines)
    digests = {line["digest"] for line in lines}
    span = max(float(x["finished"]) for x in lines) - min(float(x["arrived"]) for x in lines)
    bound = calls * latency / level
    cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    spread = " + ".join(str(len(found)) for found in per_log)
    print(f"{level:>11} {calls:>6} {len(digests):>8} {span:>7.2f} {bound:>7.2f} {bound / span:>6.2f} "
          f"{wall:>7.2f} {cpu * 1000 / max(calls, 1):>15.1f} {server_cpu * 1000 / max(calls, 1):>18.1f}  "
          f"{spread:<12} {before} -> {load()}", flush=True)


def main() -> None:
    """Build the items, start the server(s), run each level through the CLI, print one row per level."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--levels", default="32,64")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--extra", default="", help="more evaluate options, e.g. --per-component")
    parser.add_argument("--model", default=MODEL, help="the judge's litellm model name")
    args = parser.parse_args()
    if not WIKIEVAL.exists():
        raise SystemExit(f"WikiEval is not at {WIKIEVAL}: nothing to measure")
    with tempfile.TemporaryDirectory() as tmp:
        items = Path(tmp) / "items.jsonl"
        items.write_text("".join(json.dumps(t) + "\n" for t in triplets(args.items)), encoding="utf-8")
        logs = [Path(tmp) / f"server{k}.log" for k in range(args.replicas)]
        procs, urls = start_servers(args.replicas, args.latency, logs)
        try:
            print(f"{args.items} WikiEval triplets through `python -m evaluators evaluate`, {args.latency * 1000:.0f} ms "
                  f"per call, {args.model}, {args.replicas} server(s) in their own process(es) "
                  f"{' '.join(args.extra.split())}")
            print(f"{'concurrency':>11} {'calls':>6} {'distinct':>8} {'span s':>7} {'bound':>7} {'ratio':>6} "
                  f"{'CLI s':>7} {'CLI CPU ms/call':>15} {'server CPU ms/call':>18}  {'per server':<12} "
                  "load before -> after")
            for level in (int(x) for x in args.levels.split(",")):
                measure(items, Path(tmp) / f"c{level}.duckdb", urls, logs, [p.pid for p in procs], level,
                        args.latency, shlex.split(args.extra), args.model)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)


if __name__ == "__main__":
    main()
