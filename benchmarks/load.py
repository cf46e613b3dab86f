"""Load benchmark for the dashboard: ten sessions at once on a 100k-item run, timed on the server.

    .venv/bin/python benchmarks/load.py [--client browser|ws] [--sessions 10] [--browsers 10] [--views 8]
                                        [--items 100000]

Builds once, and reuses afterwards, benchmarks/out/load-<items>.duckdb: two runs ("base" and
"candidate", for Compare) of the same items from dashboard_scale.py's generator. Starts
`streamlit run app.py` on a free 127.0.0.1 port with RAG_TRIAGE_DB pointing at it and its log in
benchmarks/out/load-server.log, opens the root page once (Streamlit's start-up and the app's first
imports), then drives --sessions sessions at once. Each session opens --views different views in turn
(Run with different filters, sorts and pages; Items of different ids; Diagnosis; Compare), each a
page load as a pasted link is, so each view is a new Streamlit session, and waits until the app's
script run is over. Two kinds of client:
- `--client browser` (the default): a headless Debian Chromium tab in its own browser context per
  session, spread over --browsers Chromium processes. On a small machine the browsers take most of the
  CPU and so lengthen the server's page runs; --nice runs them at the lowest priority.
- `--client ws`: no browser. Each view is a websocket client speaking Streamlit's own protocol, as
  its frontend does on a page load: it connects to /_stcore/stream (subprotocol "streamlit", a
  same-origin Origin header), sends a rerun_script BackMsg with the page's name (its URL path) and
  query string, and reads ForwardMsgs until a script_finished other than "early for a rerun". This
  measures the server: the clients cost a few percent of its CPU.

It prints page views, errors (exception elements and compile errors the server sent, "page not
found", views that did not finish; with browsers also HTTP errors, script errors and requests off
loopback), the server-side page-run durations parsed from the log lines of evaluators/dashboard/timing.py
(p50 / p95 / max, per page) with the server's CPU seconds per view beside the p95 (and the views per
second the host served, and its CPU would allow), the server's peak RSS (VmHWM) and CPU time, the
clients' CPU time, and the machine's load average before and after, against the targets: p95 <= 1.5 s,
no error, server memory <= 1 GB. Everything stays on 127.0.0.1 (Chromium resolves no other host), and the benchmark
ends by itself after --time-limit seconds at most.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import urlencode

import websockets

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.dashboard_scale import generate  # noqa: E402
from evaluators.dashboard.serve import view_messages  # noqa: E402
from evaluators.dashboard.timing import LOGGER_NAME  # noqa: E402
from evaluators.storage import queries  # noqa: E402
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, free_port, outside  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
P95_S, MEMORY_MB = 1.5, 1024
VIEW_TIMEOUT_S = 90.0  # one view may wait this long before it counts as an error
# Any host but loopback fails to resolve: nothing the pages ask for can leave the machine.
ARGS = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
LINE = re.compile(rf"{re.escape(LOGGER_NAME)}: page=(\S+) ms=([\d.]+) session=\S+ outcome=(\S+)")
# On a deep link such as /Item?..., Streamlit's frontend first asks for /Item/_stcore/health and
# /Item/_stcore/host-config (in case the app is served under /Item), gets 404, then finds it at the root.
PROBE = re.compile(r"^http://127\.0\.0\.1:\d+/[A-Za-z]+/_stcore/(health|host-config)$")
# The app's script run is over, and nothing is waiting to be drawn.
DONE_JS = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    return app && app.getAttribute('data-test-script-state') === 'notRunning'
        && !document.querySelector('[data-testid=stSkeleton]');
}"""
RUN_FILTERS = [{"sort": "gr", "desc": "1"}, {"rule": "T2.2"}, {"below": "sp1,sqc"}, {"failed": "1"},
               {"q": "topic 42?"}, {"mk": "topic", "mv": "billing"}, {"page": "37"},
               {"quad": "sqc:low,rqc:low"}, {"sort": "n_failed", "desc": "1", "page": "3"},
               {"rule": "T2.5", "sort": "sp1"}, {"th_sp1": "0.6", "below": "sp1"}, {"sort": "sd", "page": "120"}]
KINDS = ["run", "item", "diagnosis", "item", "compare", "run", "item", "compare_item"]


def build(items: int) -> Path:
    """The benchmark database for this many items: reused when a complete one exists, else built.

    It is built under a temporary name and renamed when complete, so an interrupted build is never reused.
    """
    path = OUT / f"load-{items}.duckdb"
    if path.exists():
        return path
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / f"load-{items}.building.duckdb"
    for p in (tmp, Path(f"{tmp}.wal")):
        p.unlink(missing_ok=True)
    start = time.perf_counter()
    generate(tmp, "base", items, quality=0.7, seed=1)
    generate(tmp, "candidate", items, quality=0.75, seed=2)
    tmp.rename(path)
    print(f"built {path.name} in {time.perf_counter() - start:.0f} s")
    return path


def views(session: int, n: int, items: int) -> list[str]:
    """Session `session`'s n views as relative URLs: every session starts on another kind of page
    and no two views of the benchmark open the same item or the same Run filter and page."""
    out = []
    for v in range(n):
        k = session * n + v
        run = ("base", "candidate")[k % 2]
        item = f"i{(k * 7919 + 12345) % items:06d}"
        kind = KINDS[(session + v) % len(KINDS)]
        if kind == "run":
            params = {"run": run, **RUN_FILTERS[k % len(RUN_FILTERS)]}
            if "page" not in params:
                params["page"] = str(1 + k % 50)
            path = "Run"
        elif kind == "item":
            path, params = "Item", {"run": run, "item": item}
        elif kind == "diagnosis":
            path, params = "Diagnosis", {"run": run, "th_sqc": f"{0.4 + 0.05 * (k % 5):.2f}"}
        elif kind == "compare":
            path, params = "Compare", {"run": "base", "other": "candidate", "xm": ("gr", "sp1", "rqc")[k % 3]}
        else:
            path, params = "Compare", {"run": "base", "other": "candidate", "item": item}
        out.append(f"{path}?{urlencode(params)}")
    return out


@dataclass
class Tally:
    """What the clients saw over all sessions: finished views and their times (load to script run over),
    errors, and with browsers Streamlit's base-path probes and every URL requested."""
    views: int = 0
    view_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    probes: int = 0
    requests: list[str] = field(default_factory=list)


@dataclass
class Load:
    """One load phase: the tally, where the server log stood when it began, how long it took, and the
    CPU seconds the server and the clients (browser processes, or this process's websockets) used meanwhile."""
    tally: Tally
    log_offset: int
    took_s: float
    server_cpu_s: float
    clients_cpu_s: float


async def browser_session(ctx: Any, base: str, urls: list[str], deadline: float, tally: Tally) -> None:
    """Open the views one after another in one tab, recording what went wrong, until the deadline."""
    page = await ctx.new_page()

    def http_error(response: Any) -> None:
        if response.status < 400:
            return
        if PROBE.search(response.url):  # Streamlit's frontend looking for its base path: answered, not an error
            tally.probes += 1
        else:
            tally.errors.append(f"HTTP {response.status} {response.url}")

    page.on("response", http_error)
    page.on("pageerror", lambda error: tally.errors.append(f"script error on {page.url}: {error}"))
    ctx.on("request", lambda request: tally.requests.append(request.url))
    for url in urls:
        if time.monotonic() > deadline:
            break
        start = time.perf_counter()
        try:
            await page.goto(f"{base}/{url}", timeout=VIEW_TIMEOUT_S * 1000)
            await page.wait_for_function(DONE_JS, timeout=VIEW_TIMEOUT_S * 1000, polling=100)
        except Exception as exc:  # a view that never finished is an error of the benchmark, not a crash
            tally.errors.append(f"{url}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        tally.views += 1
        tally.view_s.append(time.perf_counter() - start)
        boxes = await page.locator("[data-testid=stException]").count()
        if boxes:
            tally.errors.append(f"{url}: {boxes} exception box(es)")


async def ws_view(base: str, url: str) -> list[str]:
    """Open one view (a relative URL) as a browser's page load does (serve.view_messages). Returns the
    errors the server sent: exception elements, compile errors, and "page not found"."""
    page_name, _, query = url.partition("?")
    errors = []
    async for msg in view_messages(base, page_name, query):
        kind = msg.WhichOneof("type")
        if (kind == "delta" and msg.delta.WhichOneof("type") == "new_element"
                and msg.delta.new_element.WhichOneof("type") == "exception"):
            errors.append(f"{url}: exception {msg.delta.new_element.exception.type}")
        elif kind == "session_event" and msg.session_event.HasField("script_compilation_exception"):
            errors.append(f"{url}: compile error {msg.session_event.script_compilation_exception.type}")
        elif kind == "page_not_found":
            errors.append(f"{url}: page not found")
    return errors


async def ws_session(base: str, urls: list[str], deadline: float, tally: Tally) -> None:
    """Open the views one after another, each as a new websocket session, until the deadline."""
    for url in urls:
        if time.monotonic() > deadline:
            break
        start = time.perf_counter()
        try:
            errors = await asyncio.wait_for(ws_view(base, url), VIEW_TIMEOUT_S)
        except (TimeoutError, OSError, websockets.WebSocketException) as exc:  # an error of the view, not a crash
            tally.errors.append(f"{url}: {type(exc).__name__}: {exc}")
            continue
        tally.views += 1
        tally.view_s.append(time.perf_counter() - start)
        tally.errors.extend(errors)


async def warm_up(log: Path, open_root: Callable[[Tally], Awaitable[Any]]) -> None:
    """Open the root page once and wait for its page-run line: the server has started and imported."""
    tally = Tally()
    await open_root(tally)
    for _ in range(100):  # its line reaches the log a moment after the client sees the run end
        if LINE.search(log.read_text()):
            break
        await asyncio.sleep(0.1)
    if tally.errors or not LINE.search(log.read_text()):
        raise RuntimeError(f"the warm-up view failed: {tally.errors or 'no page-run line in the log'}")


async def measure(log: Path, server_pid: int, clients_cpu: Callable[[], float],
                  sessions: Callable[[Tally], Awaitable[Any]]) -> Load:
    """Run the sessions at once and measure them: time, the server's and the clients' CPU, the log's offset."""
    offset, tally = log.stat().st_size, Tally()
    clients, server, started = clients_cpu(), cpu_seconds(server_pid), time.monotonic()
    await sessions(tally)
    took = time.monotonic() - started
    await asyncio.sleep(1)  # the last page runs reach the log a moment after the clients see them end
    return Load(tally, offset, took, cpu_seconds(server_pid) - server, clients_cpu() - clients)


async def drive_browsers(base: str, log: Path, n_sessions: int, n_browsers: int, n_views: int, items: int,
                         deadline: float, server_pid: int) -> Load:
    """Open the root page once, then run the sessions at once over n_browsers Chromium processes."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browsers = [await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS) for _ in range(n_browsers)]

        async def open_root(tally: Tally) -> None:
            warm = await browsers[0].new_context()
            await browser_session(warm, base, [""], deadline, tally)
            await warm.close()

        await warm_up(log, open_root)
        contexts = [await browsers[s % n_browsers].new_context(viewport={"width": 1400, "height": 1000})
                    for s in range(n_sessions)]
        load = await measure(log, server_pid, lambda: descendants_cpu(server_pid), lambda tally: asyncio.gather(
            *(browser_session(c, base, views(s, n_views, items), deadline, tally) for s, c in enumerate(contexts))))
        for b in browsers:
            await b.close()
    return load


async def drive_ws(base: str, log: Path, n_sessions: int, n_views: int, items: int, deadline: float,
                   server_pid: int) -> Load:
    """Open the root page once, then run the sessions at once as websocket clients in this process
    (whose CPU time is then the clients')."""
    await warm_up(log, lambda tally: ws_session(base, [""], deadline, tally))
    return await measure(log, server_pid, time.process_time, lambda tally: asyncio.gather(
        *(ws_session(base, views(s, n_views, items), deadline, tally) for s in range(n_sessions))))


def proc_status(pid: int, field_name: str) -> int:
    """A kB figure (VmHWM, VmRSS) from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1])
    raise KeyError(field_name)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants_cpu(exclude: int) -> float:
    """CPU seconds of this process's live descendants (Playwright's driver and the Chromium processes),
    leaving out the server process `exclude` and its own children."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # the process ended meanwhile
                continue
    total, stack = 0.0, [p for p, pp in parent.items() if pp == os.getpid() and p != exclude]
    while stack:
        pid = stack.pop()
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue
        stack.extend(p for p, pp in parent.items() if pp == pid)
    return total


def server_cost(server_cpu_s: float, views: int, took_s: float, cores: int) -> str:
    """The server's CPU per view, and what the host serves at that cost: the views per second it served,
    the cores the server kept busy meanwhile, and the views per second its CPU would allow on one core
    (one Python process runs the page scripts) and on every core."""
    if not views or took_s <= 0:
        return "server CPU per view: no view finished"
    per_view = server_cpu_s / views
    limits = (f"; CPU-bound at {1 / per_view:.1f} views/s on one core, {cores / per_view:.1f} on {cores}"
              if per_view > 0 else "")
    return (f"server CPU {per_view:.3f} s per view ({server_cpu_s:.1f} s for {views} views): "
            f"{views / took_s:.2f} views/s served, the server busy on {server_cpu_s / took_s:.2f} of {cores} "
            f"cores{limits}")


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """(p50, p95, max); p95 by the nearest-rank method, so it is a measured value."""
    s = sorted(values)
    return statistics.median(s), s[max(0, -(-len(s) * 95 // 100) - 1)], s[-1]


def serve(db: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """Start `streamlit run app.py` on a free loopback port over `db`; wait until it is healthy."""
    port = free_port()
    env = {**os.environ, "RAG_TRIAGE_DB": str(db)}
    env.pop("RAG_TRIAGE_READ_ONLY", None)
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless",
           "true", "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"streamlit not healthy after 60 s: {log.read_text()[-2000:]}")
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--client", choices=("browser", "ws"), default="browser",
                        help="Chromium tabs, or websocket clients speaking Streamlit's protocol (no browser)")
    parser.add_argument("--sessions", type=int, default=10, help="sessions at once")
    parser.add_argument("--browsers", type=int, default=10,
                        help="Chromium processes holding the sessions (--client browser)")
    parser.add_argument("--views", type=int, default=8, help="views per session")
    parser.add_argument("--time-limit", type=float, default=900, help="seconds for the sessions at most")
    parser.add_argument("--nice", action="store_true",
                        help="run the clients at the lowest CPU priority, as if they were on the users' machines")
    args = parser.parse_args()
    if args.client == "browser" and not 1 <= args.browsers <= args.sessions:
        parser.error("--browsers must be between 1 and --sessions")
    db = build(args.items)
    counts = queries.runs.row_counts(db)
    print(f"DB {db.relative_to(ROOT)}: {db.stat().st_size / 1e6:.0f} MB, {counts['items']:,} items in 2 runs, "
          f"{counts['verdicts']:,} verdicts")
    log = OUT / "load-server.log"
    load_before = os.getloadavg()
    proc, base = serve(db, log)
    if args.nice:  # after the server started: this process and Playwright's driver and Chromium (which
        os.nice(19)  # inherit it) run at nice 19, the server does not
    try:
        deadline = time.monotonic() + args.time_limit
        if args.client == "ws":
            driving = drive_ws(base, log, args.sessions, args.views, args.items, deadline, proc.pid)
        else:
            driving = drive_browsers(base, log, args.sessions, args.browsers, args.views, args.items, deadline,
                                     proc.pid)
        # Every view has its own timeout; the outer one only guards against a hung client.
        load = asyncio.run(asyncio.wait_for(driving, args.time_limit + 2 * VIEW_TIMEOUT_S + 60))
        peak_mb, rss_mb = proc_status(proc.pid, "VmHWM") / 1024, proc_status(proc.pid, "VmRSS") / 1024
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    load_after = os.getloadavg()
    with open(log, "rb") as f:
        f.seek(load.log_offset)
        runs = [(m[1], float(m[2]) / 1000, m[3]) for m in LINE.finditer(f.read().decode(errors="replace"))]
    failed_runs = [f"page run {page}: {outcome}" for page, _, outcome in runs
                   if outcome not in ("ok", "stop", "rerun")]
    tally, took = load.tally, load.took_s
    errors = tally.errors + failed_runs + [f"request off loopback: {u}" for u in outside(tally.requests)]

    clients = ("websocket clients (this process)" if args.client == "ws"
               else f"{args.browsers} Chromium process(es)")
    print(f"\n{args.sessions} sessions at once, {clients}" + (" at nice 19" if args.nice else "")
          + f", {args.views} views each: {took:.0f} s; server log {log.relative_to(ROOT)}")
    print(f"page views: {tally.views} of {args.sessions * args.views}; server page runs: {len(runs)}")
    print(f"errors: {len(errors)}" + "".join(f"\n  {e}" for e in errors[:20]))
    if args.client == "browser":
        print(f"(not counted: {tally.probes} 404s of Streamlit's base-path probes on deep links)")
    print(f"\n{'page':<12} {'runs':>5} {'p50 s':>7} {'p95 s':>7} {'max s':>7}   (server-side page runs)")
    for page in sorted({p for p, _, _ in runs}):
        print(f"{page:<12} {len([1 for p, _, _ in runs if p == page]):>5} "
              + " ".join(f"{q:>7.2f}" for q in quantiles([d for p, d, _ in runs if p == page])))
    p50, p95, top = quantiles([d for _, d, _ in runs]) if runs else (float("nan"),) * 3
    print(f"{'all':<12} {len(runs):>5} {p50:>7.2f} {p95:>7.2f} {top:>7.2f}")
    print(server_cost(load.server_cpu_s, tally.views, took, os.cpu_count() or 1))
    if tally.view_s:
        print(f"{args.client} view (load to script run over) p50 / p95 / max: "
              + " / ".join(f"{q:.2f}" for q in quantiles(tally.view_s)) + " s")
    print(f"\nserver memory: peak {peak_mb:.0f} MB (VmHWM), at the end {rss_mb:.0f} MB")
    print(f"CPU during the sessions: server {load.server_cpu_s:.0f} s "
          f"({load.server_cpu_s / max(len(runs), 1):.2f} s per page run), clients {load.clients_cpu_s:.1f} s, "
          f"of {os.cpu_count()} cores x {took:.0f} s = {os.cpu_count() * took:.0f} s")
    print(f"load average (1/5/15 min) before: {' '.join(f'{x:.1f}' for x in load_before)}, "
          f"after: {' '.join(f'{x:.1f}' for x in load_after)}")
    met = {"p95 <= 1.5 s": p95 <= P95_S, "no error": not errors,
           "server memory <= 1 GB": peak_mb <= MEMORY_MB}
    print("targets: " + "; ".join(f"{k} {'met' if ok else 'NOT met'}" for k, ok in met.items()))


if __name__ == "__main__":
    main()
