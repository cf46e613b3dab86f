"""Item page benchmark in a real browser: an item with 200 sources and an item with 10,000 claims.

    .venv/bin/python benchmarks/item_page.py [--sources 200] [--claims 10000] [--repeat 2]

Builds both items in a temporary DuckDB, as the engine writes them (writes.write_batch): sources with
two facts each and SP1 / SP2 / SQC verdicts, claims and sentences with RP / GR / SD verdicts, and one
batched judge call per 25 components carrying its prompt. Then it serves the app with `streamlit run`
on a free loopback port, opens each item's page on the tab of its long list (only the open tab is drawn)
in Debian's Chromium (Playwright) and prints the time from navigation until `[data-testid=stApp]`'s
`data-test-script-state` goes from running to notRunning: cold (first open, nothing cached) and warm
(opened again), with the machine's load average, against the target of 2 s.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.core.records import Component, Item, JudgeCall, Run, Score, Status, Verdict  # noqa: E402
from evaluators.storage import ownership, writes  # noqa: E402
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

TARGET_S = 2.0
BATCH = 25
RUN = "bench"
# Records every change of the app's script state with its time since navigation started. A script run
# shorter than a frame sets "running" and "notRunning" before the observer is called: each record's
# oldValue is the state before it, so the state it set is the next record's oldValue (the last: the
# attribute now), and no run is missed.
WATCH = """
window.__states = [];
new MutationObserver((records) => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app) return;
  const now = performance.now(), changes = records.filter(r => r.target === app && r.attributeName);
  const states = [...changes.slice(1).map(r => r.oldValue), app.getAttribute('data-test-script-state')];
  for (const state of states) {
    const last = window.__states[window.__states.length - 1];
    if (state && (!last || last[1] !== state)) window.__states.push([now, state]);
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ['data-test-script-state']});
"""


def _call(key: str, prompt: str, texts: list[str]) -> JudgeCall:
    content = f"{prompt}:\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(texts))
    reply = "<output>\n" + "\n".join(f"{i + 1}: {i % 3 != 0:d}" for i in range(len(texts))) + "\n</output>"
    return JudgeCall(key=key, model="openai/bench-judge", prompt_name=prompt, prompt_hash="b3nchb3nchb3",
                     messages=[{"role": "system", "content": "You are a strict evaluator."},
                               {"role": "user", "content": content}],
                     params={"temperature": 0}, reply=reply, status=Status.OK, prompt_tokens=len(content) // 4,
                     completion_tokens=len(texts) * 3, latency_ms=900.0)


def many_sources(n: int) -> tuple[Item, list, list, list, list]:
    """One item whose query has 4 sub-questions, answered from n sources of about 1 KB, 2 facts each."""
    sources = tuple(f"Source {j} explains rule {j} of the fare policy in detail. " * 16 for j in range(n))
    item = Item("many-sources", "What do the fare rules say about refunds, passes, pets and bikes?", sources,
                "Refunds are possible within 30 days. Passes are personal. Pets travel free. Bikes need a ticket.")
    comps, verdicts, calls = [], [], []
    subqs = ["What about refunds?", "What about passes?", "What about pets?", "What about bikes?"]
    comps += [Component(item.id, "subquestion", i, q) for i, q in enumerate(subqs)]
    for start in range(0, n, BATCH):
        chunk = range(start, min(start + BATCH, n))
        key = f"sp1:{start}"
        calls.append(_call(key, "sp1_batch", [sources[j] for j in chunk]))
        for j in chunk:
            comps.append(Component(item.id, "source", j, sources[j]))
            verdicts.append(Verdict(item.id, "sp1", "source", j, "query", float(j % 3 != 0), Status.OK, call_key=key))
            for f in range(2):
                idx = 2 * j + f
                comps.append(Component(item.id, "source_fact", idx, f"rule {j} of the fare policy", parent=j))
                verdicts.append(Verdict(item.id, "sp2", "source_fact", idx, "query", float(f == 0), Status.OK,
                                        call_key=key))
            for i in range(len(subqs)):
                verdicts.append(Verdict(item.id, "sqc", "subquestion", i, f"source:{j}", float(j == i), Status.OK,
                                        call_key=key))
    for i in range(len(subqs)):
        verdicts.append(Verdict(item.id, "sqc", "subquestion", i, "sources", 1.0, Status.OK))
        verdicts.append(Verdict(item.id, "rqc", "subquestion", i, "response", 1.0, Status.OK))
    scores = [Score(item.id, m, 0.6, 1, 1, Status.OK) for m in ("sp1", "sp2", "sqc", "rqc")]
    return item, comps, verdicts, scores, calls


def many_claims(n: int) -> tuple[Item, list, list, list, list]:
    """One item whose response is n sentences, each a claim with RP and GR verdicts and an SD verdict."""
    claims = [f"Claim {i}: the ferry to island {i % 40} leaves at {i % 24:02d}:15 from pier {i % 7}." for i in range(n)]
    item = Item("many-claims", "When do the ferries leave?", ("Ferries leave every hour from the piers.",),
                " ".join(claims))
    comps, verdicts, calls = [], [], []
    for start in range(0, n, BATCH):
        chunk = range(start, min(start + BATCH, n))
        key = f"gr:{start}"
        calls.append(_call(key, "groundedness_batch", [claims[i] for i in chunk]))
        for i in chunk:
            comps += [Component(item.id, "claim", i, claims[i]), Component(item.id, "sentence", i, claims[i])]
            verdicts += [
                Verdict(item.id, "rp", "claim", i, "query", float(i % 5 != 0), Status.OK, evidence=0.7,
                        detail="offline judge: cosine 0.70 against threshold 0.60"),
                Verdict(item.id, "gr", "claim", i, "sources", float(i % 3 != 0), Status.OK, call_key=key),
                Verdict(item.id, "sd", "sentence", i, f"sentence:{(i + 1) % n}", 1.0, Status.OK, evidence=0.4,
                        detail="most similar sentence: cosine 0.40")]
    scores = [Score(item.id, m, 0.7, n, n, Status.OK) for m in ("rp", "gr", "sd")]
    return item, comps, verdicts, scores, calls


def build(path: Path, n_sources: int, n_claims: int) -> None:
    ownership.start_run(path, Run(RUN, "openai/bench-judge", {}, {"claims": "b3nchb3nchb3"}), 2)
    for item, comps, verdicts, scores, calls in (many_sources(n_sources), many_claims(n_claims)):
        writes.write_batch(path, RUN, items=[item], components=comps, verdicts=verdicts, scores=scores, calls=calls)
    ownership.finish_run(path, RUN, "finished", {})


def ready_s(page, url: str) -> float:
    """Seconds from navigation start until the script state went from running to notRunning."""
    page.goto(url, wait_until="commit")
    page.wait_for_function("""() => {
        const s = window.__states || [];
        const run = s.findIndex(x => x[1] === 'running');
        return run >= 0 && s.slice(run).some(x => x[1] === 'notRunning');
    }""", timeout=300_000, polling=50)
    states = page.evaluate("() => window.__states")
    run = next(i for i, (_, s) in enumerate(states) if s == "running")
    done = next(t for t, s in states[run:] if s == "notRunning")
    if page.get_by_test_id("stException").count():
        raise RuntimeError(f"the page shows an exception: {url}")
    return done / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=200)
    ap.add_argument("--claims", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2, help="warm opens per item (the best is reported)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "item_page.duckdb"
        t0 = time.perf_counter()
        build(db, args.sources, args.claims)
        print(f"built {args.sources} sources and {args.claims} claims in {time.perf_counter() - t0:.1f} s "
              f"({db.stat().st_size / 1e6:.1f} MB)")
        with streamlit_server(db, Path(tmp) / "streamlit.log") as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_init_script(WATCH)
            page = context.new_page()
            ready_s(page, f"{base}/?run={RUN}")  # the server's first page run (imports), as after start-up
            print(f"{'item':<14} {'cold s':>7} {'warm s':>7}  load avg (1, 5 min)   target <= {TARGET_S:g} s")
            for item, tab in (("many-sources", "Sources"), ("many-claims", "Response")):  # its long list's tab
                url = f"{base}/Item?run={RUN}&item={quote(item)}&tab={tab}"
                cold = ready_s(page, url)
                warm = min(ready_s(page, url) for _ in range(args.repeat))
                load = os.getloadavg()
                verdict = "ok" if max(cold, warm) <= TARGET_S else "SLOW"
                print(f"{item:<14} {cold:>7.2f} {warm:>7.2f}  {load[0]:.2f}, {load[1]:.2f}"
                      f"{'':<12}{verdict}")
            browser.close()


if __name__ == "__main__":
    main()
