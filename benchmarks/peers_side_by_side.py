"""Our RAGAS, Nvidia and DeepEval metrics beside the real libraries, on the same samples, through the same
OpenAI-compatible endpoint.

The libraries run in virtualenvs of their own that this script makes with pip, pinned (LIBRARIES below;
they never enter the project's requirements): RAGAS for its faithfulness, answer relevancy, context
precision and recall and Nvidia's three metrics (RAGAS's implementations of them), DeepEval for its
faithfulness, answer relevancy and contextual precision, recall and relevancy. Every call of every tool
goes to the endpoint given (`--api-base`, `--model`), by default the local tier's own server
(evaluators/judges/local_llm.py: Qwen2.5-Coder-1.5B on 127.0.0.1) with our side asking as the local judge
does. The libraries reach it through a proxy on 127.0.0.1 that counts each sample's calls, tokens and
seconds, and that also serves the embeddings RAGAS's answer relevancy asks for from our MiniLM
(evaluators/judges/embeddings.py), the model our own answer relevance uses. Our side is counted from its
judge calls: a step two of our metrics share (DeepEval's statements of the response) is paid once in a
run and counted for each metric here, so per metric the figures are as if it ran alone.

Samples: WikiEval development rows (0-19 only; rows 20-49 are held out and refused). A response metric
scores each row's answer, ungrounded answer and poor answer against context_v1; a context metric scores
each row's context_v1 and context_v2 with the answer as response and reference. WikiEval's pairs: the
answer over the ungrounded one (faithfulness, groundedness), over the poor one (answer relevancy), both
(answer accuracy, whose reference is the answer), and context_v1 over context_v2 (context metrics).

Per metric it prints: agreement with the library on the samples both scored (Spearman, mean absolute
difference); each tool's pair accuracy (better side strictly higher, over all pairs: a tie or a side
left unscored is no agreement); each tool's scored, unparsed and repaired shares; calls, tokens and
seconds per sample and ours over theirs. Each finished sample is kept in OUT/results.jsonl (our judge
calls in OUT/ours.duckdb), so a killed run resumes where it stopped, and a second run only reports.

    nice -n 10 .venv/bin/python -m benchmarks.peers_side_by_side [--rows 0-19] [--metrics ragas_faithfulness,...]
        [--tools ours,ragas,deepeval] [--api-base URL --model openai/NAME [--key-env VAR]] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from benchmarks.prompt_health import REASK, WIKIEVAL, parse_rows, stored_calls, strip_prefix  # noqa: E402
from evaluators.core.records import Item, JudgeCall, Status  # noqa: E402
from evaluators.judges import prompts, replies  # noqa: E402
from evaluators.judges import registry as judges  # noqa: E402
from evaluators.judges.llm import LLMJudge  # noqa: E402
from evaluators.metrics import registry  # noqa: E402
from evaluators.metrics import thelma as engine  # noqa: E402
from evaluators.runs.pairs import Tally, tally  # noqa: E402
from evaluators.storage import store, writes  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "peers"
PEERS = Path(__file__).resolve().parent / "peers"
# Each library's pins: the library, and what it needs pinned to import and run here. RAGAS 0.4.3 imports
# langchain_community.chat_models.vertexai, which langchain-community 0.4 no longer has.
LIBRARIES: dict[str, list[str]] = {
    "ragas": ["ragas==0.4.3", "langchain-community==0.3.31", "langchain-openai==1.7.4"],
    "deepeval": ["deepeval==4.3.1"],
}


@dataclass(frozen=True)
class Comparison:
    """One of our metrics beside one library metric: the samples it reads and the pairs it should order."""

    ours: str
    tool: str
    theirs: str
    kind: str  # "response": answer / ungrounded / poor against context_v1; "context": context_v1 / context_v2
    worse: tuple[str, ...]  # the variants the better side (the answer, or context_v1) should beat


COMPARISONS = [
    Comparison("ragas_faithfulness", "ragas", "faithfulness", "response", ("ungrounded",)),
    Comparison("ragas_answer_relevance", "ragas", "answer_relevancy", "response", ("poor",)),
    # Our RAGAS suite has no context precision or recall: DeepEval's, which define them alike, stand in.
    Comparison("de_contextual_precision", "ragas", "context_precision", "context", ("v2",)),
    Comparison("de_contextual_recall", "ragas", "context_recall", "context", ("v2",)),
    Comparison("nv_answer_accuracy", "ragas", "nv_answer_accuracy", "response", ("ungrounded", "poor")),
    Comparison("nv_context_relevance", "ragas", "nv_context_relevance", "context", ("v2",)),
    Comparison("nv_groundedness", "ragas", "nv_response_groundedness", "response", ("ungrounded",)),
    Comparison("de_faithfulness", "deepeval", "faithfulness", "response", ("ungrounded",)),
    Comparison("de_answer_relevancy", "deepeval", "answer_relevancy", "response", ("poor",)),
    Comparison("de_contextual_precision", "deepeval", "contextual_precision", "context", ("v2",)),
    Comparison("de_contextual_recall", "deepeval", "contextual_recall", "context", ("v2",)),
    Comparison("de_contextual_relevancy", "deepeval", "contextual_relevancy", "context", ("v2",)),
]
VARIANTS = {"response": ("answer", "ungrounded", "poor"), "context": ("v1", "v2")}


# ---------------------------------------------------------------- samples


def samples(rows: Sequence[int], kind: str, path: Path = WIKIEVAL) -> list[dict[str, Any]]:
    """The samples of one kind for the given development rows, as plain data both sides read."""
    data = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for r in rows:
        row = data[r]
        answer = row["answer_text"]
        for variant in VARIANTS[kind]:
            if kind == "response":
                field = {"answer": "answer_text", "ungrounded": "ungrounded_answer", "poor": "poor_answer"}[variant]
                response, sources = strip_prefix(row[field], "Answer: "), row["context_v1"]
            else:
                response, sources = answer, row[f"context_{variant}"]
            out.append({"id": f"r{r}-{variant}", "row": r, "variant": variant, "query": row["question_text"],
                        "sources": [s for s in sources if s.strip()], "response": response, "reference": answer})
    return out


def item(sample: dict[str, Any]) -> Item:
    return Item(sample["id"], sample["query"], tuple(sample["sources"]), sample["response"],
                reference=sample["reference"])


# ---------------------------------------------------------------- the libraries' environments


def environment(tool: str, out: Path) -> Path:
    """The python of the tool's pinned virtualenv under OUT/venvs, made (once) with pip."""
    venv = out / "venvs" / tool
    python = venv / "bin" / "python"
    marker = venv / "pins.txt"
    pins = "\n".join(LIBRARIES[tool])
    if marker.exists() and marker.read_text() == pins:
        return python
    print(f"[{tool}] making its virtualenv: {' '.join(LIBRARIES[tool])}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *LIBRARIES[tool]], check=True)
    marker.write_text(pins)
    return python


def version(python: Path, package: str) -> str:
    found = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                           capture_output=True, text=True)
    return found.stdout.strip() or "?"


# ---------------------------------------------------------------- the counting proxy


class Proxy:
    """A loopback server in front of the endpoint: /t/TOOL/METRIC/SAMPLE/v1/chat/completions is sent on to
    the endpoint and counted under (tool, metric, sample); /t/.../v1/embeddings is answered with our MiniLM."""

    def __init__(self, upstream: str, key: str | None) -> None:
        self.upstream, self.key = upstream.rstrip("/"), key
        self.tally: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "proxied", "object": "model"}]})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.split("/")
                if len(parts) < 7 or parts[1] != "t":
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                unit = (parts[2], parts[3], parts[4])
                if self.path.endswith("/embeddings"):
                    self._send(200, owner.embeddings(json.loads(body)))
                    return
                status, reply = owner.forward(unit, body)
                self._send(status, reply)

            def _send(self, status: int, payload: Any) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def forward(self, unit: tuple[str, str, str], body: bytes) -> tuple[int, bytes]:
        """Send one chat completion on and count it (a request that carries an earlier reply is a repair)."""
        request = json.loads(body)
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        started = time.monotonic()
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{self.upstream}/chat/completions", body, headers),
                                        timeout=1800) as reply:
                status, data = reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        seconds = time.monotonic() - started
        usage = json.loads(data).get("usage") or {} if status == 200 else {}
        with self.lock:
            c = self.tally[unit]
            c["calls"] += 1
            c["repaired"] += any(m.get("role") == "assistant" for m in request.get("messages", []))
            c["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            c["completion_tokens"] += int(usage.get("completion_tokens") or 0)
            c["ms"] += int(seconds * 1000)
        return status, data

    @staticmethod
    def embeddings(request: dict[str, Any]) -> dict[str, Any]:
        """OpenAI's embeddings reply for the texts asked, from our MiniLM (base64 floats when asked so)."""
        from evaluators.judges.embeddings import embed

        texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
        vectors = embed([str(t) for t in texts])
        as_base64 = request.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.astype(np.float32).tobytes()).decode() if as_base64 else v.tolist()}
                for i, v in enumerate(vectors)]
        return {"object": "list", "data": data, "model": "all-MiniLM-L6-v2",
                "usage": {"prompt_tokens": 0, "total_tokens": 0}}


# ---------------------------------------------------------------- results


def prompts_hash(metric: str) -> str:
    """What our requests of `metric` are made of: its prompt files' hashes, their reply bounds and the prefill."""
    names = list(registry.METRICS[metric].prompts)
    made = [prompts.prompt_hashes(names), [judges.REPLY_TOKENS[n] for n in names], replies.PREFILL]
    return hashlib.sha256(json.dumps(made).encode()).hexdigest()[:12]


class Results:
    """OUT/results.jsonl: one line per (tool, metric, sample), appended as each finishes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[(row["tool"], row["metric"], row["sample"])] = row

    def done(self, tool: str, metric: str, sample: str, stamp: str) -> bool:
        row = self.rows.get((tool, metric, sample))
        return row is not None and row.get("stamp") == stamp

    def add(self, row: dict[str, Any]) -> None:
        self.rows[(row["tool"], row["metric"], row["sample"])] = row
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


# ---------------------------------------------------------------- running each side


class Ledger(dict[str, JudgeCall]):
    """The judge's request cache, noting the stored calls it answers (a shared step is counted for each
    metric that asks it)."""

    def __init__(self, calls: dict[str, JudgeCall]) -> None:
        super().__init__(calls)
        self.hits: list[JudgeCall] = []

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        found = super().get(key, default)
        if found is not None:
            self.hits.append(found)
        return found


def run_ours(metric: str, todo: Sequence[dict[str, Any]], judge_of: Any, ledger: Ledger, db: Path,
             results: Results) -> None:
    """Our metric on each sample, alone, through the engine; each sample's calls counted from its judge calls."""
    stamp = prompts_hash(metric)
    for sample in todo:
        made: list[JudgeCall] = []
        ledger.hits = []
        judge = judge_of(made.append)
        result = asyncio.run(engine.evaluate_item(item(sample), {metric: registry.METRICS[metric]}, judge))
        (score,) = result.scores
        calls = made + ledger.hits
        if made:
            writes.write_batch(db, "peers-side-by-side", calls=made)
            ledger.update({c.key: c for c in made if c.reply is not None})
        results.add({
            "tool": "ours", "metric": metric, "sample": sample["id"], "stamp": stamp,
            "value": score.value, "status": score.status.value,
            "detail": next((v.detail for v in result.verdicts if v.status is not Status.OK), "")[:300],
            "calls": len(calls), "repaired": sum(any(m["role"] == "user" and m["content"].startswith(REASK)
                                                     for m in c.messages) for c in calls),
            "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls),
            "seconds": sum(c.latency_ms for c in calls) / 1000})
        print(f"[ours] {metric} {sample['id']}: {score.status.value} {score.value} ({len(calls)} calls)",
              file=sys.stderr, flush=True)


def run_library(tool: str, metric: str, todo: Sequence[dict[str, Any]], python: Path, proxy: Proxy, model: str,
                out: Path, results: Results, stamp: str) -> None:
    """The library's metric on each sample, in its virtualenv; each sample's calls as the proxy counted them."""
    batch = out / f"todo-{tool}-{metric}.jsonl"
    batch.write_text("".join(json.dumps(s) + "\n" for s in todo), encoding="utf-8")
    env = {**os.environ, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES", "RAGAS_DO_NOT_TRACK": "true",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    script = PEERS / f"{tool}_side.py"
    with subprocess.Popen([str(python), str(script), metric, proxy.url, model, str(batch)], stdout=subprocess.PIPE,
                          text=True, env=env, cwd=out) as child:
        assert child.stdout is not None
        for line in child.stdout:
            row = json.loads(line)
            c = proxy.tally.get((tool, metric, row["id"]), Counter())
            results.add({"tool": tool, "metric": metric, "sample": row["id"], "stamp": stamp, "value": row["value"],
                         "status": row["status"], "detail": row["detail"], "calls": c["calls"],
                         "repaired": c["repaired"], "prompt_tokens": c["prompt_tokens"],
                         "completion_tokens": c["completion_tokens"], "seconds": c["ms"] / 1000})
            print(f"[{tool}] {metric} {row['id']}: {row['status']} {row['value']} ({c['calls']} calls)",
                  file=sys.stderr, flush=True)
    if child.returncode:
        raise SystemExit(f"{tool} {metric}: its run exited with {child.returncode} (see the lines above)")


# ---------------------------------------------------------------- the report


def _fmt(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or x != x else f"{x:.{digits}f}"


def _pairs(rows: dict[str, dict[str, Any]], comparison: Comparison, ids: Sequence[str]) -> Tally:
    better = "answer" if comparison.kind == "response" else "v1"
    outcomes = []
    for sid in ids:
        r, variant = sid.split("-")
        if variant not in comparison.worse:
            continue
        a, b = rows.get(f"{r}-{better}"), rows.get(sid)
        outcomes.append(("x", a and a["value"], b and b["value"]))
    return tally(outcomes).get("x", Tally())


def _acc(t: Tally) -> str:
    pairs = t.scored + t.failed
    return f"{t.agree / pairs:.2f} ({t.agree}/{pairs}, {t.ties} ties, {t.failed} failed)" if pairs else "–"


def report(results: Results, rows_used: Sequence[int], versions: dict[str, str]) -> str:
    """The per-metric table and the cost table, over the samples of `rows_used`."""
    lines = ["| our metric | library metric | both scored | Spearman | mean abs. diff. | pair accuracy ours "
             "| pair accuracy library | scored / unparsed / repaired ours | scored / unparsed / repaired library |",
             "|---|---|---:|---:|---:|---|---|---|---|"]
    cost = ["| our metric | library metric | samples | calls / sample ours : library | tokens / sample ours : library "
            "| seconds / sample ours : library | ratio calls / tokens / seconds |", "|---|---|---:|---|---|---|---|"]
    suite: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for comp in COMPARISONS:
        ids = [s["id"] for s in samples(rows_used, comp.kind)]
        ours_stamp, their_stamp = prompts_hash(comp.ours), f"{comp.tool}=={versions.get(comp.tool)}"
        mine = {sid: results.rows[k] for sid in ids
                if results.done(*(k := ("ours", comp.ours, sid)), ours_stamp)}
        theirs = {sid: results.rows[k] for sid in ids
                  if results.done(*(k := (comp.tool, comp.theirs, sid)), their_stamp)}
        if not mine and not theirs:
            continue
        both = [sid for sid in ids if sid in mine and sid in theirs
                and mine[sid]["value"] is not None and theirs[sid]["value"] is not None]
        x = [mine[s]["value"] for s in both]
        y = [theirs[s]["value"] for s in both]
        rho = float(spearmanr(x, y).statistic) if len(both) >= 3 and len(set(x)) > 1 and len(set(y)) > 1 else None
        mad = sum(abs(a - b) for a, b in zip(x, y)) / len(both) if both else None

        def shares(found: dict[str, dict[str, Any]]) -> str:
            n = len(found)
            if not n:
                return "–"
            ok = sum(r["value"] is not None for r in found.values())
            bad = sum(r["status"] == "unparsed" for r in found.values())
            calls = sum(r["calls"] for r in found.values())
            fixed = sum(r["repaired"] for r in found.values())
            return f"{ok}/{n} / {bad}/{n} / {fixed}/{calls} calls"

        name = f"{comp.tool} {comp.theirs} {versions.get(comp.tool, '')}".strip()
        lines.append(f"| {comp.ours} | {name} | {len(both)} of {len(ids)} | {_fmt(rho)} | {_fmt(mad)} "
                     f"| {_acc(_pairs(mine, comp, ids))} | {_acc(_pairs(theirs, comp, ids))} "
                     f"| {shares(mine)} | {shares(theirs)} |")
        common = [sid for sid in ids if sid in mine and sid in theirs]
        if common:
            a = {k: sum(mine[s][k] for s in common) / len(common) for k in ("calls", "seconds")}
            b = {k: sum(theirs[s][k] for s in common) / len(common) for k in ("calls", "seconds")}
            a["tokens"] = sum(mine[s]["prompt_tokens"] + mine[s]["completion_tokens"] for s in common) / len(common)
            b["tokens"] = sum(theirs[s]["prompt_tokens"] + theirs[s]["completion_tokens"] for s in common) / len(common)
            ratio = " / ".join(_fmt(a[k] / b[k]) if b[k] else "–" for k in ("calls", "tokens", "seconds"))
            cost.append(f"| {comp.ours} | {name} | {len(common)} | {a['calls']:.1f} : {b['calls']:.1f} "
                        f"| {a['tokens']:,.0f} : {b['tokens']:,.0f} | {a['seconds']:.1f} : {b['seconds']:.1f} | {ratio} |")
            for side, got in (("ours", a), (comp.tool, b)):
                for k, v in got.items():
                    suite[f"{comp.tool}:{side}"][k] += v
    totals = []
    for tool in LIBRARIES:
        a, b = suite.get(f"{tool}:ours"), suite.get(f"{tool}:{tool}")
        if a and b:
            totals.append(f"- {tool}'s compared metrics together, per sample of each: ours {a['calls']:.1f} calls, "
                          f"{a['tokens']:,.0f} tokens, {a['seconds']:.0f} s; {tool} {b['calls']:.1f} calls, "
                          f"{b['tokens']:,.0f} tokens, {b['seconds']:.0f} s (ours over theirs: calls "
                          f"{a['calls'] / b['calls']:.2f}, tokens {a['tokens'] / b['tokens']:.2f}, seconds "
                          f"{a['seconds'] / b['seconds']:.2f})")
    return "\n".join([*lines, "", *cost, "", *totals])


# ---------------------------------------------------------------- command line


def endpoint(args: argparse.Namespace, stack: ExitStack) -> tuple[str, str, str | None, Any]:
    """(api base, litellm model, key, a factory of our judge given its on_call) for the endpoint of the run."""
    key = os.environ.get(args.key_env) if args.key_env else None
    if args.api_base:
        model = args.model or "openai/judge"

        def made(ledger: Ledger) -> Any:
            return lambda on_call: LLMJudge(model, api_base=args.api_base, key_env=args.key_env, timeout=1800,
                                            concurrency=1, cache=ledger, on_call=on_call)

        return args.api_base, model, key, made
    from evaluators.judges import local_llm

    server = stack.enter_context(local_llm.LocalServer())

    def local(ledger: Ledger) -> Any:
        return lambda on_call: local_llm.judge(server, 1800, cache=ledger, on_call=on_call)

    return server.base_url, server.model, None, local


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="0-19", help="WikiEval development rows, e.g. 0-4 (default 0-19)")
    p.add_argument("--metrics", default=None, help="our metric ids to compare (default: every one listed)")
    p.add_argument("--tools", default="ours,ragas,deepeval", help="the sides to run (default all three)")
    p.add_argument("--api-base", default=None, help="an OpenAI-compatible endpoint (default: the local tier's server)")
    p.add_argument("--model", default=None, help="the model at --api-base, as litellm names it (openai/NAME)")
    p.add_argument("--key-env", default=None, help="the environment variable holding the endpoint's key")
    p.add_argument("--out", type=Path, default=OUT, help="where the virtualenvs, results and judge calls go")
    p.add_argument("--report-only", action="store_true", help="print the table from the stored results")
    args = p.parse_args(argv)
    if not WIKIEVAL.exists():
        print(f"error: {WIKIEVAL} not found (the shared data sets sit beside the checkout)", file=sys.stderr)
        return 2
    rows = parse_rows(args.rows)
    chosen = [c for c in COMPARISONS if args.metrics is None or c.ours in args.metrics.split(",")]
    tools = set(args.tools.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    results = Results(args.out / "results.jsonl")
    pythons = {tool: environment(tool, args.out) for tool in LIBRARIES if tool in tools or args.report_only}
    versions = {tool: version(py, tool) for tool, py in pythons.items() if py.exists()}
    started, load = time.monotonic(), os.getloadavg()
    if not args.report_only:
        with ExitStack() as stack:
            base, model, key, judge_factory = endpoint(args, stack)
            proxy = stack.enter_context(Proxy(base, key))
            db = args.out / "ours.duckdb"
            store.migrate(db)
            ledger = Ledger({c.key: c for c in stored_calls(db, model)})
            for comp in chosen:
                todo = samples(rows, comp.kind)
                if "ours" in tools:
                    stamp = prompts_hash(comp.ours)
                    run_ours(comp.ours, [s for s in todo if not results.done("ours", comp.ours, s["id"], stamp)],
                             judge_factory(ledger), ledger, db, results)
                if comp.tool in tools:
                    stamp = f"{comp.tool}=={versions[comp.tool]}"
                    left = [s for s in todo if not results.done(comp.tool, comp.theirs, s["id"], stamp)]
                    if left:
                        run_library(comp.tool, comp.theirs, left, pythons[comp.tool], proxy,
                                    model.removeprefix("openai/"), args.out, results, stamp)
    end = os.getloadavg()
    print(f"WikiEval development rows {args.rows}; {time.monotonic() - started:.0f} s now, load {load[0]:.1f} -> "
          f"{end[0]:.1f}; results in {args.out / 'results.jsonl'}\n")
    print(report(results, rows, versions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
