"""Scale benchmark in a real browser: every page of the dashboard on the two-run scale DB, in Chromium.

    .venv/bin/python benchmarks/browser_scale.py [--items 100000] [--db /tmp/dashboard_scale.duckdb] [--reuse]
                                                 [--deep-links] [--no-warm-pages] [--warm-visits 1] [--no-cold]
                                                 [--rounds 1] [--think 0]
    .venv/bin/python benchmarks/browser_scale.py --first-paint [--db data/demo.duckdb]

Builds the scale DB of benchmarks/dashboard_scale.py (two runs of N items, ~20 verdicts each) unless
--reuse finds it, serves the app with `python -m evaluators serve` (as `make run` does) on a free
loopback port, and drives Debian's Chromium (Playwright). Per page it starts two fresh servers, so
each figure below that says "first" is the server's first visit of the page's URL; every visit is timed
from navigation until `[data-testid=stApp]`'s `data-test-script-state` goes from running to notRunning,
once `serve` has done what it does at start: the imports, the runs catalog, one view of each page's
default and the newest runs' Runs pages (`--no-warm-pages` skips those views):

- first: as a user who has the dashboard open follows a link to the page: a browser context that has
  opened the home page `/` (the Triage page when the Runs page is timed), so Streamlit's JavaScript is
  in the browser's cache, opens the page's URL in a new tab; the server's first visit of that URL;
- cold: the page's URL in a new browser context (nothing cached in the browser: each figure holds the
  browser loading Streamlit's code, 1.1-1.5 s on 2 cores) on the second fresh server, its first visit
  (`--no-cold` skips it);
- warm: the page opened again in a new tab of the first context (a new session: cached reads); with
  `--warm-visits N`, the median of N such tabs (a shared machine's wall times vary from tab to tab);
- interaction: one widget change on the page, from the input until the rerun is notRunning; with
  `--think S`, S seconds after the page was ready, as a user who reads it first acts;
- with `--rounds N` every page is measured N times, the pages in turn (fresh servers each time), and
  the table gives each figure's median: one page's first visit varies by 0.5 s from run to run here;
- Streamlit's floor, before and after the pages: an app whose page draws one line, served with the
  dashboard's config and opened as `first` opens a page (median of 3 tabs). No page can be ready sooner in
  this browser at this load; the 1.5 s target less the floor is what a page has for its own work.

The pages open as a visitor who opens the dashboard and follows its navigation finds them: on the run
every picker opens on (the newest, "candidate"; Compare against "base"), the Item page on item i050000,
and again as the Run table opens it (`from=run`: its Previous / Next walk the table's list), on the last
item of the table's first page, whose Next reads the second page; and as a triager who reads corrected
scores at a band of their own ("Banded item": ?band=0.3,0.7&scores=corrected), each item's scores
recomputed from its verdicts. Trends, Evaluate and Robustness open as the navigation opens them; the scale
database holds no GRAMMAR run, so Robustness says so and has no interaction.
`--deep-links` opens them on run "base" instead (a link to an older run: nothing of it is read ahead).
Then it runs the AppTest benchmark (dashboard_scale.bench) on the same DB and prints its first render
and interaction beside, with the machine's load average. Targets: ready <= 1.5 s, interaction <= 0.5 s.

--first-paint: seconds from the server answering its health check until the Runs page shows its
title, its runs table, and no grey skeleton left, on the demo DB; target 2 s.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import dashboard_scale  # noqa: E402
from benchmarks.item_page import WATCH, ready_s  # noqa: E402
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

READY_S, INTERACTION_S, FIRST_PAINT_S = 1.5, 0.5, 2.0
TIMEOUT_MS = 300_000


def _settled_after(page: Any, before: int) -> float:
    """Seconds from the (already recorded) action time until a run started after state index `before`
    has ended."""
    page.wait_for_function("""(before) => {
        const s = window.__states.slice(before);
        const run = s.findIndex(x => x[1] === 'running');
        return run >= 0 && s.slice(run).some(x => x[1] === 'notRunning');
    }""", arg=before, timeout=TIMEOUT_MS, polling=20)
    states, start = page.evaluate("() => [window.__states, window.__action]")
    run = next(i for i in range(before, len(states)) if states[i][1] == "running")
    done = next(t for t, s in states[run:] if s == "notRunning")
    if page.get_by_test_id("stException").count():
        raise RuntimeError(f"the page shows an exception after the interaction: {page.url}")
    return (done - start) / 1000


def interact_s(page: Any, prepare: Callable[[Any], None], act: Callable[[Any], None], think_s: float = 0.0) -> float:
    """prepare(page) (open an expander, focus a field: not timed), then, `think_s` later (a user reading the
    page first), act(page), timed until its rerun ends."""
    prepare(page)
    page.wait_for_timeout(300 + 1000 * think_s)  # and a rerun the preparation caused (if any) is recorded
    page.wait_for_function("""() => {
        const a = document.querySelector('[data-testid=stApp]');
        return a && a.getAttribute('data-test-script-state') === 'notRunning'; }""", timeout=TIMEOUT_MS)
    before = page.evaluate("() => { window.__action = performance.now(); return window.__states.length; }")
    act(page)
    return _settled_after(page, before)


_SLIDERS = ["SP1", "SP2", "SQC", "RQC", "RP", "GR", "SD"]  # THELMA's order in the sidebar
_LEDGER_SLIDERS = ["dead weight", "stale"]  # the Sources page's list thresholds


def _slider(label: str, expander: str = "Thresholds (low < threshold ≤ high)",
            order: Sequence[str] = _SLIDERS) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    """Open the sidebar's `expander` and focus the `label` slider (`order`: its sliders in turn); the
    action moves it one step."""
    def prepare(page: Any) -> None:
        page.get_by_test_id("stSidebar").get_by_text(expander).click()
        page.get_by_test_id("stSidebar").get_by_role("slider").nth(list(order).index(label)).focus()
    return prepare, lambda page: page.keyboard.press("ArrowRight")


def _type(label: str, text: str) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    """Type `text` into the text field `label` (not timed); the action is pressing Enter."""
    def prepare(page: Any) -> None:
        page.get_by_label(label, exact=True).first.fill(text)
    return prepare, lambda page: page.get_by_label(label, exact=True).first.press("Enter")


def _click_link(name: str) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    return (lambda page: None), (lambda page: page.get_by_role("link", name=name).first.click())


def _radio(option: str) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    return (lambda page: None), (lambda page: page.get_by_text(option, exact=True).click())


def _multiselect(option: str) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    def prepare(page: Any) -> None:
        page.get_by_test_id("stMultiSelect").first.click()
    return prepare, lambda page: page.get_by_role("option", name=option).click()


DEFAULT_RUN = "candidate"  # the newest run of the scale DB: what every run picker opens on
# (page, URL path and query, interaction label, interaction); "{run}" is the run the pages open on
CASES = [
    ("Runs", "/?{run}", "SP1 threshold +0.01", _slider("SP1")),
    ("Run", "/Run?{run}", "text search", _type("Search text (id, query, response)", "topic 42?")),
    ("Item", "/Item?{run}&item=i050000", "next item", _click_link("Next")),
    # a triager reading corrected scores at a band of their own: each item's scores recomputed from its verdicts
    ("Banded item", "/Item?{run}&item=i050100&band=0.3,0.7&scores=corrected", "next item", _click_link("Next")),
    # opened from the Run table's last row of its first page: Next walks onto its second page
    ("Walk", "/Item?{run}&item=i000199&from=run", "next item (page 2)", _click_link("Next")),
    ("Compare", "/Compare?{run}&other=candidate", "claim diff of one item", _type("Item id to diff", "i000042")),
    ("Diagnosis", "/Diagnosis?{run}", "SQC threshold +0.01", _slider("SQC")),
    ("Triage", "/Triage", "label filter", _multiselect("confirmed")),
    ("Trust", "/Trust?{run}", "SP1 threshold +0.01", _slider("SP1")),
    ("Sources", "/Sources?{run}", "dead-weight share +0.05", _slider("dead weight", "List thresholds", _LEDGER_SLIDERS)),
    ("Trends", "/Trends", "trend over time", _radio("one run's item timestamps")),
    ("Evaluate", "/Evaluate", "run name", _type("Run name", "bench-upload")),
    # the scale database holds no GRAMMAR run: the page says so and offers nothing to act on
    ("Robustness", "/Robustness", "–", None),
]


def case_url(url: str, deep: bool) -> str:
    """A case's URL: with `deep`, on run "base"; else on the default run (no run in the URL, and
    Compare's default pair)."""
    if deep:
        return url.replace("{run}", "run=base")
    return url.replace("?{run}&other=candidate", "").replace("?{run}&", "?").replace("?{run}", "")


# The AppTest case shown beside each page (dashboard_scale.bench's page file and interaction).
APPTEST = {"Runs": ("app.py", None), "Run": ("pages/1_Run.py", "text search"), "Item": ("pages/2_Item.py", None),
           "Banded item": (None, None), "Walk": (None, None),
           "Compare": ("pages/3_Compare.py", "claim diff of one item"), "Diagnosis": ("pages/4_Diagnosis.py", None),
           "Triage": ("pages/5_Triage.py", None), "Trust": (None, None), "Sources": (None, None),
           "Trends": (None, None), "Evaluate": (None, None), "Robustness": (None, None)}


def server_cpu_s(port: int) -> float:
    """CPU seconds (user + system, every thread) the dashboard's server on `port` has used: its
    work, whatever the machine's load, where wall times on a shared machine also hold the waits."""
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"evaluators" in args and b"serve" in args and str(port).encode() in args:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError(f"no streamlit process on port {port}")


# (page, interaction, first, cold (None with --no-cold), warm and interaction s (None for a page without one),
# and the server's CPU s for each)
Row = tuple[str, str, float, float | None, float, float | None, tuple[float, float | None, float, float | None]]


def started(log: Path, warm_pages: bool, timeout_s: float = 600.0) -> None:
    """Wait for `serve`'s start-up to end: its cache warmed, and with `warm_pages` its pages' views."""
    done = ("dashboard pages warmed", "dashboard pages not warmed") if warm_pages else ("dashboard cache",)
    deadline = time.monotonic() + timeout_s
    while not any(line in log.read_text() for line in done):
        if time.monotonic() > deadline:
            raise RuntimeError(f"serve did not finish starting in {timeout_s:.0f} s: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    print("  " + next(line for line in log.read_text().splitlines() if line.startswith(done)), flush=True)


def _context(browser: Any) -> Any:
    """A new browser context (its own cache) that records the app's script states."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(WATCH)
    context.set_default_timeout(TIMEOUT_MS)
    return context


# Streamlit's own floor: an app of two pages that each write one line, with the dashboard's config.
FLOOR_APP = {
    "app.py": "import streamlit as st\n\nst.navigation([st.Page('home.py', default=True), st.Page('other.py')]).run()\n",
    "home.py": "import streamlit as st\n\nst.title('Home')\n",
    "other.py": "import streamlit as st\n\nst.title('Other')\nst.write('One line.')\n",
}
FLOOR_VISITS = 3


def floor_s(browser: Any, log: Path) -> float:
    """Streamlit's floor for a visit in a new tab: the median of FLOOR_VISITS new tabs of an app that draws
    one line (FLOOR_APP, served by `streamlit run` with the dashboard's .streamlit/config.toml), each
    opened as `first` opens a page (a context with the app's home page open). No page of the dashboard
    can be ready sooner on this machine at this load; the rest of its figure is its own."""
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp)
        for name, text in FLOOR_APP.items():
            (app / name).write_text(text)
        (app / ".streamlit").mkdir()
        shutil.copy(ROOT / ".streamlit/config.toml", app / ".streamlit/config.toml")
        with streamlit_server(app / "none.duckdb", log, timeout_s=120, plain=True, app_dir=app) as base:
            context = _context(browser)
            ready_s(context.new_page(), base + "/")
            visits = []
            for _ in range(FLOOR_VISITS):
                page = context.new_page()
                visits.append(ready_s(page, base + "/other"))
                page.close()  # as browse() holds at most the home page and the timed tab open
            context.close()
    return statistics.median(visits)


Figures = tuple[float, float | None, float, float | None, tuple[float, float | None, float, float | None], str]


def _measure(browser: Any, db: Path, log: Path, case: tuple, deep: bool, warm_pages: bool, warm_visits: int,
             cold: bool, think_s: float) -> Figures:
    """One page's first, cold, warm and interaction figures (see the module's docstring), its server's
    CPU for each, and its script runs: the first visit on a freshly started server once it has finished
    starting, the cold one on a second."""
    name, url, _, interaction = case
    url = case_url(url, deep)
    with streamlit_server(db, log, timeout_s=120, warm_pages=warm_pages) as base:
        port = int(base.rsplit(":", 1)[1])
        started(log, warm_pages)
        context = _context(browser)
        ready_s(context.new_page(), base + ("/Triage" if name == "Runs" else "/"))  # the dashboard open
        cpu = [server_cpu_s(port)]
        first = ready_s(context.new_page(), base + url)
        cpu.append(server_cpu_s(port))
        warms = []
        for _ in range(warm_visits):
            page = context.new_page()
            warms.append(ready_s(page, base + url))
        cpu.append(server_cpu_s(port))
        inter = None if interaction is None else interact_s(page, interaction[0], interaction[1], think_s)
        cpu.append(server_cpu_s(port))
        context.close()
        server = ", ".join(re.findall(r"page=\S* ms=([\d.]+)", log.read_text()))
    cold_s = cold_cpu = None
    if cold:
        with streamlit_server(db, log, timeout_s=120, warm_pages=warm_pages) as base:
            port = int(base.rsplit(":", 1)[1])
            started(log, warm_pages)
            context = _context(browser)
            before = server_cpu_s(port)
            cold_s = ready_s(context.new_page(), base + url)
            cold_cpu = server_cpu_s(port) - before
            context.close()
    # warm: per visit
    used = (cpu[1] - cpu[0], cold_cpu, (cpu[2] - cpu[1]) / warm_visits, None if inter is None else cpu[3] - cpu[2])
    return first, cold_s, statistics.median(warms), inter, used, server


def _median(figures: list[Any]) -> Any:
    """The median of each figure over rounds (a figure not measured stays None)."""
    if isinstance(figures[0], tuple):
        return tuple(_median(list(column)) for column in zip(*figures))
    return None if figures[0] is None else statistics.median(figures)


def browse(db: Path, log: Path, pages: Sequence[str], deep: bool = False, warm_pages: bool = True,
           warm_visits: int = 1, cold: bool = True, rounds: int = 1, think_s: float = 0.0
           ) -> tuple[list[Row], tuple[float, float]]:
    """Per page, the median over `rounds` of its figures (_measure; the rounds go over every page in turn,
    so the machine's load falls on each alike); and Streamlit's floor (floor_s) before and after the pages,
    in the same browser."""
    from playwright.sync_api import sync_playwright

    cases = [c for c in CASES if c[0] in pages]
    taken: dict[str, list[Figures]] = {c[0]: [] for c in cases}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        floor_before = floor_s(browser, log)
        for n in range(rounds):
            for case in cases:
                figures = _measure(browser, db, log, case, deep, warm_pages, warm_visits, cold, think_s)
                taken[case[0]].append(figures)
                first, cold_s, warm, inter, used, server = figures
                print(f"  {case[0]}{f' (round {n + 1})' if rounds > 1 else ''}: first {first:.2f} s, cold "
                      f"{_s(cold_s)}, warm {warm:.2f} s, interaction {_s(inter)} s; server CPU "
                      f"{' / '.join(_s(c) for c in used)}; its script runs (wall ms): {server}", flush=True)
        floor_after = floor_s(browser, log)
        browser.close()
    rows = [(name, label, *_median([f[:5] for f in taken[name]])) for name, _, label, _ in cases]
    return rows, (floor_before, floor_after)


def _s(seconds: float | None) -> str:
    """Seconds to two places, or a dash for a figure not measured."""
    return "–" if seconds is None else f"{seconds:.2f}"


# Marks the first time each sign of the Runs page shows, in ms since navigation started.
PAINT = """window.__paint = {};
new MutationObserver(() => {
  const m = window.__paint, now = performance.now(), q = (s) => document.querySelector(s);
  if (!m.title && q('h1')) m.title = now;
  if (!m.table && q('[data-testid=stDataFrame] canvas')) m.table = now;
  if (m.table && !m.whole && !q('[data-testid=stSkeleton]')) m.whole = now;
}).observe(document, {subtree: true, childList: true, attributes: true});"""


def first_paint(db: Path, log: Path) -> tuple[float, float, float]:
    """Seconds from the server's health check answering until the Runs page shows its title, its runs
    table, and nothing grey (no skeleton of an element whose code the browser is still loading)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(PAINT)
        with streamlit_server(db, log, timeout_s=120) as base:
            up = time.perf_counter()
            page.goto(base + "/", wait_until="commit")
            opened = time.perf_counter() - up  # navigation starts here: the marks count from it
            page.wait_for_function("() => window.__paint.whole", timeout=TIMEOUT_MS, polling=20)
            marks = page.evaluate("() => window.__paint")
        browser.close()
    return tuple(opened + marks[k] / 1000 for k in ("title", "table", "whole"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--db", type=Path, default=None, help="default: /tmp/dashboard_scale.duckdb, "
                        "or data/demo.duckdb with --first-paint")
    parser.add_argument("--reuse", action="store_true", help="reuse an existing generated DB")
    parser.add_argument("--first-paint", action="store_true", help="time the Runs page's first paint only")
    parser.add_argument("--no-apptest", action="store_true", help="skip the AppTest figures")
    parser.add_argument("--pages", default=",".join(c[0] for c in CASES),
                        help="the pages to time, comma-separated (default: all)")
    parser.add_argument("--labels", type=int, default=200,
                        help="rule labels and verdict corrections to add to the run the pages open on "
                             "(seeded; default 200 each)")
    parser.add_argument("--deep-links", action="store_true",
                        help='open the pages on run "base" (an older run) instead of the default run')
    parser.add_argument("--warm-visits", type=int, default=1,
                        help="new tabs opened for the warm figure, which is their median (default 1)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every page this many times, in turn, and report the medians")
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds between a page being ready and its interaction (a user reading it first)")
    parser.add_argument("--no-cold", dest="cold", action="store_false",
                        help="skip the cold visit (a new browser context on a second fresh server)")
    parser.add_argument("--no-warm-pages", dest="warm_pages", action="store_false",
                        help="serve without its start-up view of every page")
    args = parser.parse_args()
    log = Path("/tmp/browser_scale_streamlit.log")
    if args.first_paint:
        db = args.db or ROOT / "data/demo.duckdb"
        if not db.exists():
            sys.exit(f"{db}: no database (build the demo with `make demo`)")
        load = os.getloadavg()
        print(f"the Runs page on {db}, seconds after the server is up: title / runs table / nothing grey "
              f"(target <= {FIRST_PAINT_S:g} s)")
        for _ in range(3):
            title, table, whole = first_paint(db, log)
            print(f"  {title:.2f} / {table:.2f} / {whole:.2f}")
        print(f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores")
        return
    db = args.db or Path("/tmp/dashboard_scale.duckdb")
    dashboard_scale.build(db, args.items, args.reuse)
    dashboard_scale.add_labels(db, args.labels, run="base" if args.deep_links else DEFAULT_RUN)
    load_before = os.getloadavg()
    print(f"Chromium, one fresh server per page and round ({args.rounds} rounds, medians), pages on run "
          f"{'base' if args.deep_links else DEFAULT_RUN}"
          + ("" if args.warm_pages else ", serve --no-warm-pages") + ":")
    rows, floor = browse(db, log, args.pages.split(","), args.deep_links, args.warm_pages, args.warm_visits,
                         args.cold, args.rounds, args.think)
    load_browser = os.getloadavg()
    apptest = {} if args.no_apptest else {(p, label): (first, inter)
                                          for p, label, first, inter in dashboard_scale.bench(db)}
    print(f"\nload average (1, 5 min): {load_before[0]:.2f}, {load_before[1]:.2f} before the browser, "
          f"{load_browser[0]:.2f}, {load_browser[1]:.2f} after it, {os.getloadavg()[0]:.2f} after AppTest; "
          f"{os.cpu_count()} cores")
    print(f"{'':<35} {'Chromium, wall s':^32} {'server CPU s':^27} {'AppTest wall / CPU s':^27}")
    print(f"{'page':<10} {'interaction':<24} {'first':>7} {'cold':>7} {'warm':>7} {'inter.':>8} {'first':>6} "
          f"{'cold':>6} {'warm':>6} {'inter.':>6}   {'first render':>12} {'interaction':>12}")
    ok = ok_cpu = True
    for name, label, first, cold, warm, inter, (c_first, c_cold, c_warm, c_inter) in rows:
        path, at_label = APPTEST[name]
        found = [v for (p, lab), v in apptest.items() if p == path and (at_label is None or lab == at_label)]
        beside = (f"{found[0][0][0]:>5.2f} /{found[0][0][1]:>5.2f} {found[0][1][0]:>5.2f} /{found[0][1][1]:>5.2f}"
                  if found else f"{'–':>12} {'–':>12}")
        over = max(first, warm) > READY_S or (inter or 0.0) > INTERACTION_S
        ok &= not over
        ok_cpu &= max(c_first, c_warm) <= READY_S and (c_inter or 0.0) <= INTERACTION_S
        print(f"{name:<10} {label:<24} {first:>7.2f} {_s(cold):>7} {warm:>7.2f} {_s(inter):>8} {c_first:>6.2f} "
              f"{_s(c_cold):>6} {c_warm:>6.2f} {_s(c_inter):>6}   {beside}" + ("  OVER TARGET (wall)" if over else ""))
    print(f"\ntargets: ready <= {READY_S} s first and warm (cold, in a new browser context, also loads Streamlit's "
          f"code), interaction <= {INTERACTION_S} s: by the browser's wall time {'all met' if ok else 'NOT all met'}; "
          f"by the server's CPU time {'all met' if ok_cpu else 'NOT all met'}"
          + (" (the machine was shared: see the load average)" if load_browser[0] > (os.cpu_count() or 1) else ""))
    print(f"Streamlit's floor, a page of one line opened as `first` opens a page: {floor[0]:.2f} s before the pages, "
          f"{floor[1]:.2f} s after; of the {READY_S} s target, that leaves a page {READY_S - max(floor):.2f} s of its own")


if __name__ == "__main__":
    main()
