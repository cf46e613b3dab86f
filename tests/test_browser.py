"""Real-browser tests of the dashboard: `streamlit run app.py` on a seeded DuckDB (tests/seed.py),
driven through Debian's Chromium with Playwright.

The flows follow a triage session: the runs page with its headlines, a drill-down from the item
table to a verdict's raw judge exchange, two runs compared, the Table-2 diagnosis, a triage note
saved and found again after a reload, evaluated HTML shown as text, and no request leaving
127.0.0.1. Screenshots of every step go to test-artifacts/browser/.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

from evaluators.core.records import Component, Item, JudgeCall, Run, Score, Status, Verdict
from evaluators.dashboard import tables
from evaluators.storage import ownership, store, writes
from tests.browser_util import CANVAS_TEXTS_JS, CHROMIUM, CHROMIUM_ARGS, ROOT, canvas_texts, outside, streamlit_server
from tests.seed import INJECTION, seed

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
expect = sync_api.expect

ARTIFACTS = ROOT / "test-artifacts" / "browser"
TIMEOUT_MS = 45_000  # generous: the first plotly draw takes seconds on a busy 2-core machine
VIEWPORT = {"width": 1400, "height": 1000}
# Evaluated text that would run script if any page rendered it as HTML: all of it sets window.__pwned.
XSS = {
    "query": 'Is <img src=x onerror="window.__pwned=1"> shown as text?',
    "source": "<script>window.__pwned=1</script> Our <i>docs</i> say yes.",
    "response": 'Yes. <img src=x onerror="window.__pwned=1"><svg onload="window.__pwned=1"></svg> <b>bold</b>',
}


@dataclass
class Traffic:
    """Everything the browser asked for or reported, across all tests of the module."""
    requests: list[str] = field(default_factory=list)
    websockets: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


def add_xss_run(path: Path) -> None:
    """A one-item run whose query, source, response, claim and judge exchange carry live HTML payloads.

    Created before the seeded runs so that the seeded newest run stays the default.
    """
    item = Item("x01", XSS["query"], (XSS["source"],), XSS["response"], metadata={"topic": "security"})
    key = "xss:x01:groundedness_batch"
    call = JudgeCall(key=key, model="openai/test", prompt_name="groundedness_batch", prompt_hash="feedc0de",
                     messages=[{"role": "user", "content": f"Claims:\n{XSS['response']}"}], params={},
                     reply="<output>1: 0</output><img src=x onerror=\"window.__pwned=1\">", status=Status.OK,
                     prompt_tokens=20, completion_tokens=5, latency_ms=120.0)
    claim = '<img src=x onerror="window.__pwned=1">'
    ownership.start_run(path, Run("xss", "openai/test", {}, {"groundedness": "feedc0de"}), 1)
    writes.write_batch(
        path, "xss", items=[item],
        components=[Component("x01", "source", 0, XSS["source"]), Component("x01", "claim", 0, claim)],
        verdicts=[Verdict(item_id="x01", metric="gr", component_kind="claim", component_idx=0, target="sources",
                          value=0.0, status=Status.OK, call_key=key),
                  Verdict(item_id="x01", metric="sp1", component_kind="source", component_idx=0, target="query",
                          value=1.0, status=Status.OK, detail=XSS["source"])],
        scores=[Score("x01", "gr", 0.0, 1, 1, Status.OK), Score("x01", "sp1", 1.0, 1, 1, Status.OK)],
        calls=[call])
    ownership.finish_run(path, "xss", "finished", {"calls": 1})
    with store.connect(path) as con:
        con.execute("UPDATE runs SET created_at = TIMESTAMP '2026-10-01 09:00:00' WHERE run_id = 'xss'")


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app served by `streamlit run` on a free loopback port over a fresh seeded database."""
    tmp = tmp_path_factory.mktemp("browser")
    db = seed(tmp / "seed.duckdb")
    add_xss_run(db)
    with streamlit_server(db, tmp / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def traffic() -> Traffic:
    return Traffic()


@pytest.fixture(scope="module")
def context(base_url: str, traffic: Traffic) -> Iterator[Any]:
    """One Chromium context for the module, recording every request it makes."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport=VIEWPORT, base_url=base_url, accept_downloads=True)
        ctx.on("request", lambda request: traffic.requests.append(request.url))
        ctx.on("dialog", lambda dialog: traffic.dialogs.append(dialog.message))
        # An alert() that slipped through would be a script run: record it as one.
        ctx.add_init_script("window.alert = (m) => { window.__pwned = 'alert: ' + m; };")
        ctx.add_init_script(CANVAS_TEXTS_JS)  # a row is clicked where its text is drawn (_click)
        expect.set_options(timeout=TIMEOUT_MS)
        yield ctx
        ctx.close()
        browser.close()


@pytest.fixture
def page(context: Any, traffic: Traffic, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh tab; its websockets and uncaught script errors are recorded, and a failed test leaves
    a screenshot of where it stopped."""
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    tab.on("websocket", lambda ws: traffic.websockets.append(ws.url))
    tab.on("pageerror", lambda error: traffic.page_errors.append(f"{tab.url}: {error}"))
    failed_before = request.session.testsfailed
    yield tab
    if request.session.testsfailed > failed_before:  # the call phase is reported before teardown
        tab.screenshot(path=str(ARTIFACTS / f"FAILED_{request.node.name}.png"), full_page=True)
    tab.close()


# ---------------------------------------------------------------- helpers

def click_row(page: Any, column: str, row: int, url: re.Pattern[str]) -> None:
    """Click one row's selection marker (the grid's left column) of the dataframe that has `column`, and
    wait for the view it opens in this tab; `column` holds one line a row (ids, counts)."""
    _click(page, column, row, None, url)


def click_cell(page: Any, column: str, row: int, url: re.Pattern[str], cell: str | None = None) -> None:
    """Click the middle of the plain cell in the column headed `cell` (else `column`) of one row of the
    dataframe that has `column`, and wait for the view it opens in this tab; `column` holds one line a row."""
    _click(page, column, row, cell or column, url)


def _click(page: Any, column: str, row: int, cell: str | None, url: re.Pattern[str]) -> None:
    """Click a row (its marker, or its cell in the column headed `cell`) of the dataframe that has `column`.
    Where the grid drew its texts (canvas_texts, when the tab has CANVAS_TEXTS_JS) places the row, by the
    row-th text of `column`, and the cell's column, by its header; else rows of tables.WRAP_PX under a 35 px
    header are assumed."""
    canvas = table_with(page, column).first.get_by_test_id("data-grid-canvas")
    for attempt in range(3):  # a grid drawn a moment ago may not take its first click on a loaded machine
        settle(page)
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        x, y = box["x"] + 15, box["y"] + 35 + tables.WRAP_PX * row + tables.WRAP_PX // 2
        texts = canvas_texts(page)
        first = min((t["grid"] for t in texts if t["header"] and column in t["columns"]), default=None)
        heads = {t["text"]: t for t in texts if t["header"] and t["grid"] == first}
        if column in heads:
            grid, (left, _, right, _) = heads[column]["grid"], heads[column]["clip"]
            lines = sorted({round((t["box"][1] + t["box"][3]) / 2) for t in texts if not t["header"]
                            and t["grid"] == grid and abs(t["clip"][0] - left) < 1 and abs(t["clip"][2] - right) < 1})
            y = lines[row]
            if cell is not None:
                x = (heads[cell]["clip"][0] + heads[cell]["clip"][2]) / 2
        elif cell is not None:
            raise AssertionError(f"no header {cell!r} drawn: the tab needs CANVAS_TEXTS_JS")
        page.mouse.click(x, y)
        try:
            page.wait_for_url(url, timeout=15_000)
            return
        except sync_api.TimeoutError:
            # The click's rerun may still be going on a loaded machine: clicking the same cell again would
            # deselect it and cancel that rerun, so wait for it to end before deciding the click was missed.
            settle(page)
            if url.search(page.url):
                return
            if attempt == 2:
                raise


def settle(page: Any) -> None:
    """Wait until Streamlit has finished the current script run (no stale or placeholder elements)
    and its animations, such as an expander opening, are over."""
    page.wait_for_function("""() =>
        !document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton], [data-stale=true]')
        && document.getAnimations().every(a => a.playState !== 'running'
                                             || a.effect?.getTiming().iterations === Infinity)""")


def check_page(page: Any, title: str) -> None:
    """The page's title is shown and no Streamlit exception box is on it."""
    expect(page.get_by_role("heading", name=title, exact=True).first).to_be_visible()
    settle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)


def shot(page: Any, name: str) -> None:
    """A screenshot of the whole page: the viewport is stretched to the app's scroll height first."""
    settle(page)
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(height, VIEWPORT["height"]), 8000)})
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.set_viewport_size(VIEWPORT)


def table_with(page: Any, column: str) -> Any:
    """The st.dataframes with a column headed exactly `column` (in the grid's accessible table)."""
    header = page.locator("th", has_text=re.compile(f"^{re.escape(column)}$"))
    return page.get_by_test_id("stDataFrame").filter(has=header)


def grid(page: Any, key_column: str) -> list[dict[str, str]]:
    """Rows of the first st.dataframe with this column, read from the grid's accessible table.

    The grid virtualises: only the rows and columns in view are there, enough for the small tables here."""
    header = page.locator("[data-testid=stDataFrame] th", has_text=re.compile(f"^{re.escape(key_column)}$"))
    expect(header.first).to_be_attached()  # the accessible table is hidden: no role or visibility queries
    return page.evaluate("""(key) => {
        for (const table of document.querySelectorAll('[data-testid=stDataFrame] table[role=grid]')) {
            const heads = [...table.querySelectorAll('th[role=columnheader]')].map(th => th.textContent);
            if (!heads.includes(key)) continue;
            return [...table.querySelectorAll('tbody tr')].map(tr => {
                const row = {};  // a repeated header keeps its first column
                [...tr.querySelectorAll('td')].forEach((td, i) => {
                    if (!(heads[i] in row)) row[heads[i]] = td.textContent;
                });
                return row;
            });
        }
        return [];
    }""", key_column)


def charts_drawn(page: Any, n: int) -> None:
    """At least n plotly charts have drawn their SVG (plotly's bundle loads lazily, on the first chart)."""
    page.wait_for_function("(n) => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                           ".filter(c => c.querySelector('svg.main-svg')).length >= n", arg=n)


def pick(page: Any, scope: Any, label: str, option: str) -> None:
    """Choose an option in the selectbox with this label."""
    scope.get_by_test_id("stSelectbox").filter(has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()


# ---------------------------------------------------------------- flows

def test_runs_page_shows_runs_and_headlines(page: Any) -> None:
    page.goto("/")
    check_page(page, "Runs")
    runs = grid(page, "run")  # the grid draws the columns in view: the run and its first metrics
    assert [r["run"] for r in runs] == ["llm-judge", "better-retriever", "weak-retriever", "xss"]
    # the runs side by side: each metric as "mean (scored/items, unsure)", every metric and the top rule
    # in view at 1400 px, no "None" anywhere
    assert runs[0]["SP1"] == "0.56 (6/6)" and runs[3]["SP2"] == "" and runs[0]["top rule"].startswith("T2.")
    assert not [r for r in runs if "None" in r.values()]
    # The newest run is shown: seven headlines; GR counts its error and its empty response apart.
    expect(page.get_by_role("heading", name="Run llm-judge")).to_be_visible()
    expect(page.get_by_test_id("stMetric")).to_have_count(7)
    captions = page.get_by_text(re.compile(r"^n scored \d+ of \d+ · \d+ unsure$"))
    expect(captions).to_have_count(7)
    assert "n scored 4 of 6 · 0 unsure" in captions.all_inner_texts()
    gr = page.get_by_test_id("stMetric").filter(has_text="GR")
    assert re.fullmatch(r"0\.\d\d", gr.get_by_test_id("stMetricValue").inner_text().strip())
    table = {r["metric"]: r for r in grid(page, "95% CI")}
    assert table["GR"]["unscored items"] == "1 empty, 1 error"
    assert re.fullmatch(r"\[0\.\d\d, [01]\.\d\d\]", table["GR"]["95% CI"])
    expect(page.get_by_test_id("stPlotlyChart")).to_have_count(0)  # drawn on demand: no plotly script yet
    page.get_by_text("Histograms with threshold lines").click()
    charts_drawn(page, 1)
    expect(page.locator("[data-testid=stPlotlyChart] .annotation-text", has_text="SQC")).to_be_attached()
    assert "hist=" in page.url
    shot(page, "01_runs")


def test_drill_down_to_a_verdicts_raw_exchange(page: Any) -> None:
    page.goto("/")
    check_page(page, "Runs")
    page.get_by_role("link", name="Item table").click()
    page.wait_for_url(re.compile(r"/Run\?.*run=llm-judge"))
    check_page(page, "Run")
    expect(page.get_by_text("matching items")).to_contain_text("6 matching items")
    row = [r["item"] for r in grid(page, "item")].index("q01")  # worst first: wherever q01's scores put it
    shot(page, "02a_run_items")
    click_row(page, "item", row, re.compile(r"/Item\?.*item=q01"))  # the grid is a canvas: its row's marker
    check_page(page, "Item")
    expect(page.get_by_text(re.compile(r"Run llm-judge · item\s*q01"))).to_be_visible()
    page.get_by_role("tab", name="Response").click()
    claims = {r["#"]: r for r in grid(page, "claim")}
    assert claims["1"]["RP"] == "⚠ unparsed"  # a failed verdict reads as a failure, not as 0
    expander = page.get_by_test_id("stExpander").filter(has_text="RP · claim 1 · ⚠ unparsed · raw exchange")
    expander.get_by_text("raw exchange").click()
    body = expander.get_by_test_id("stExpanderDetails")
    expect(body).to_be_visible()
    expect(body).to_contain_text("call status unparsed")
    expect(body).to_contain_text("You are a strict evaluator. Answer inside <output>.")  # the prompt
    expect(body).to_contain_text("Refunds are requested by email to billing.")
    expect(body.get_by_text("I believe these claims are mostly fine.")).to_be_visible()  # the judge's reply
    expect(body).to_contain_text(re.compile(r"tokens \d+ in / \d+ out · latency \d+ ms"))
    shot(page, "02b_item_raw_exchange")


def test_compare_two_runs(page: Any) -> None:
    page.goto("/Compare?run=weak-retriever")
    check_page(page, "Compare")
    # The default other run is the newest, judged by an LLM: the page must say the judges differ.
    expect(page.get_by_text("Different judges")).to_be_visible()
    pick(page, page.get_by_test_id("stSidebar"), "Other run (after)", "better-retriever")
    page.wait_for_url(re.compile(r"other=better-retriever"))
    expect(page.get_by_role("heading", name="better-retriever − weak-retriever")).to_be_visible()
    settle(page)
    expect(page.get_by_text("Different judges")).to_have_count(0)
    deltas = {r["metric"]: r for r in grid(page, "delta")}
    assert set(deltas) >= {"SP1", "SQC", "RQC", "GR"}
    assert float(deltas["SP1"]["delta"]) > 0 and float(deltas["RQC"]["delta"]) > 0  # q01 and q02 were fixed
    assert all(float(r["95% CI low"]) <= float(r["delta"]) <= float(r["95% CI high"]) for r in deltas.values())
    charts_drawn(page, 1)
    item_box = page.get_by_test_id("stTextInput").filter(has_text="Item id to diff").locator("input")
    item_box.fill("q01")
    item_box.press("Enter")
    expect(page.get_by_text(re.compile(r"changed verdict · \d+ new"))).to_contain_text("2 new · 2 gone · 1 same")
    # the diff opens on the first crossed item (q02) now that the crossed items open on a direction that has
    # some: wait until the grid's accessible table holds q01's claims, not q02's
    expect(table_with(page, "claim").first.locator("td", has_text=re.compile("^same$"))).to_be_attached()
    diff = grid(page, "claim")
    assert {r["change"] for r in diff} == {"new", "gone", "same"}
    shot(page, "03_compare")


def test_diagnosis_ranks_rules_with_components_to_fix(page: Any) -> None:
    page.goto("/Diagnosis?run=weak-retriever")
    check_page(page, "Diagnosis")
    expect(page.get_by_role("heading", name="Rules, ranked by the items that fire them")).to_be_visible()
    rules = grid(page, "pattern")
    assert sorted(r["rule"] for r in rules) == [*(f"T2.{i}" for i in range(1, 7)), "X1 (ours)"]  # X1: ours, marked
    assert all(r["fix"] for r in rules) and any("Retriever" in r["fix"] for r in rules)
    counts = [int(r["items"]) for r in rules]
    assert counts == sorted(counts, reverse=True) and all(counts)  # every rule fires in this run, ranked
    fix_first = page.locator("[data-testid=stMarkdownContainer] li").filter(
        has_text=re.compile(r"items? \(\d+%\), via T2"))
    expect(fix_first.first).to_be_visible()
    assert any(t.startswith("Retriever") for t in fix_first.all_inner_texts())
    page.get_by_text("Scatter plots of a sample of items").click()  # the quadrant scatters, on demand
    page.wait_for_url(re.compile(r"/Diagnosis\?.*plots="))
    charts_drawn(page, 5)
    shot(page, "04a_diagnosis")
    # A rule leads to its items: the Run page, filtered on that rule.
    t22 = next(r for r in rules if r["rule"] == "T2.2")
    page.get_by_role("link", name=re.compile(r"^T2\.2 · .*: \d+ items?$")).click()
    page.wait_for_url(re.compile(r"/Run\?.*rule=T2\.2"))
    check_page(page, "Run")
    n = int(t22["items"])
    expect(page.get_by_text("matching item")).to_contain_text(f"{n} matching item{'' if n == 1 else 's'}")
    shot(page, "04b_rule_items")


def test_a_fired_rule_opens_onto_its_evidence_from_the_item(page: Any) -> None:
    page.goto("/Run?run=weak-retriever&rule=T2.2")
    check_page(page, "Run")
    first = grid(page, "item")[0]["item"]
    # the item opens with the rule the list was filtered on: its evidence is open
    click_row(page, "item", 0, re.compile(rf"/Item\?.*item={first}.*rule=T2\.2|/Item\?.*rule=T2\.2.*item={first}"))
    check_page(page, "Item")
    evidence = page.get_by_test_id("stExpander").filter(has_text="Evidence for T2.2")
    expect(evidence.get_by_test_id("stExpanderDetails")).to_be_visible()
    expect(evidence).to_contain_text(re.compile(r"SQC low · \d\.\d\d · \d+ scored of \d+, \d+ unsure"))
    shot(page, "04c_rule_evidence")
    # without the rule in the link the evidence is one click away
    page.goto(f"/Item?run=weak-retriever&item={first}")
    check_page(page, "Item")
    evidence = page.get_by_test_id("stExpander").filter(has_text="Evidence for T2.2")
    expect(evidence.get_by_test_id("stExpanderDetails")).not_to_be_visible()
    evidence.get_by_text("Evidence for T2.2").click()
    expect(evidence.get_by_test_id("stExpanderDetails")).to_be_visible()
    expect(evidence).to_contain_text(re.compile(r"RQC low · .* made it low"))


def test_triage_note_survives_a_reload_and_is_listed(page: Any) -> None:
    note = f"Claim 1 is not in source 1 ({uuid.uuid4().hex[:8]})"
    page.goto("/Item?run=weak-retriever&item=q03")
    check_page(page, "Item")
    page.get_by_role("tab", name="Triage").click()
    form = page.get_by_test_id("stForm").filter(has_text="Save triage note")
    pick(page, form, "Label", "false alarm")
    pick(page, form, "Component to blame", "Generator")
    form.get_by_label("Note").fill(note)
    expect(form.get_by_text(f"Signed as {ownership.os_user()}.")).to_be_visible()  # no login: no name to type
    form.get_by_role("button", name="Save triage note").click()
    expect(page.get_by_text("Triage note saved.")).to_be_visible()
    shot(page, "05a_triage_saved")

    page.reload()
    check_page(page, "Item")
    page.get_by_role("tab", name="Triage").click()
    assert [r["note"] for r in grid(page, "note")] == [note]

    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Triage").click()
    check_page(page, "Triage")
    expect(page.get_by_text(re.compile(r"\d+ triage notes"))).to_contain_text("1 triage notes")
    rows = grid(page, "note")
    assert [(r["item"], r["label"], r["component"], r["note"], r["author"]) for r in rows] == [
        ("q03", "false alarm", "Generator", note, ownership.os_user())]
    with page.expect_download() as download:
        page.get_by_role("button", name="Download CSV").click()
    assert note in Path(download.value.path()).read_text()
    shot(page, "05b_triage_page")


def test_a_tab_is_drawn_when_opened_and_kept_in_the_url(page: Any) -> None:
    """Only the open tab reaches the browser; clicking another draws it and puts it in the URL, and
    Previous / Next and a reload keep it."""
    verdicts_caption = page.get_by_text(re.compile(r"^Every verdict with p = P"))
    page.goto("/Item?run=weak-retriever&item=q06")
    check_page(page, "Item")
    assert grid(page, "sub-question")
    expect(verdicts_caption).to_have_count(0)  # not hidden: absent
    page.get_by_role("tab", name="Verdicts").click()
    page.wait_for_url(re.compile(r"/Item\?.*tab=Verdicts"))
    expect(verdicts_caption).to_be_visible()
    settle(page)
    assert {r["metric"] for r in grid(page, "p kind")} >= {"GR", "RP"}  # the grid of every verdict (its first rows)
    expect(page.get_by_test_id("stDataFrame").filter(has_text="sub-question")).to_have_count(0)
    page.get_by_role("link", name="Previous").click()
    page.wait_for_url(re.compile(r"/Item\?(?=.*item=q05)(?=.*tab=Verdicts)"))
    check_page(page, "Item")
    expect(page.get_by_text(re.compile(r"item\s*q05"))).to_be_visible()
    expect(verdicts_caption).to_be_visible()
    page.reload()
    check_page(page, "Item")
    expect(verdicts_caption).to_be_visible()
    page.get_by_role("tab", name="Query").click()
    page.wait_for_url(lambda url: "tab=" not in url)  # the default tab is left out of the URL
    expect(verdicts_caption).to_have_count(0)
    assert grid(page, "sub-question")


def test_html_in_evaluated_text_renders_as_text(page: Any, traffic: Traffic) -> None:
    page.goto("/Item?run=weak-retriever&item=q05")
    check_page(page, "Item")
    page.get_by_role("tab", name="Response").click()
    expect(page.get_by_test_id("stHtml").filter(has_text=INJECTION)).to_be_visible()
    shot(page, "06a_injection_seed")

    page.goto("/Item?run=xss&item=x01")
    check_page(page, "Item")
    blocks = page.get_by_test_id("stHtml")  # the escaped text blocks of the three tabs
    expect(blocks.filter(has_text=XSS["query"])).to_be_visible()
    page.get_by_role("tab", name="Sources").click()
    expect(blocks.filter(has_text=XSS["source"])).to_be_visible()
    page.get_by_role("tab", name="Response").click()
    expect(blocks.filter(has_text=XSS["response"])).to_be_visible()
    expander = page.get_by_test_id("stExpander").filter(has_text="GR · claim 0")
    expander.get_by_text("raw exchange").click()
    reply = expander.get_by_test_id("stExpanderDetails").get_by_text('<output>1: 0</output><img src=x')
    expect(reply).to_be_visible()
    shot(page, "06b_injection_xss")
    # Nothing was parsed as markup: no injected element exists and no payload ran.
    main = page.get_by_test_id("stMain")
    assert main.locator("img[src=x], svg[onload], script, i, b").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert traffic.dialogs == []


def test_sidebar_titles_and_deep_links_under_their_url_paths(page: Any) -> None:
    page.goto("/")
    check_page(page, "Runs")
    names = page.get_by_test_id("stSidebarNav").get_by_role("link").all_inner_texts()
    assert names == ["Runs", "Run", "Item", "Compare", "Diagnosis", "Triage", "Trust", "Sources", "Trends",
                     "Evaluate", "Robustness"]
    links = {
        "/?run=weak-retriever": ("Runs", "Run weak-retriever"),
        "/Run?run=weak-retriever&rule=T2.2": ("Run", "1 matching item; row 1"),
        "/Item?run=weak-retriever&item=q02": ("Item", "item q02"),
        "/Compare?run=weak-retriever&other=better-retriever": ("Compare", "better-retriever − weak-retriever"),
        "/Diagnosis?run=weak-retriever": ("Diagnosis", "Run weak-retriever"),
        "/Triage?run=weak-retriever": ("Triage", "triage notes"),
        "/Evaluate": ("Evaluate", "Items file"),
        "/Robustness": ("Robustness", "No GRAMMAR runs"),
        "/Trust?run=weak-retriever": ("Trust", "labelled calls"),
        "/Sources?run=weak-retriever": ("Sources", "Most retrieved"),
        "/Trends?runs=weak-retriever,better-retriever": ("Trends", "difference of means"),
    }
    for url, (title, shown) in links.items():
        page.goto(url)
        check_page(page, title)
        expect(page.get_by_test_id("stMain")).to_contain_text(shown)
        assert urlsplit(page.url).path == url.split("?")[0], page.url  # the page stays under its path


def test_no_request_leaves_loopback(page: Any, traffic: Traffic) -> None:
    # Visit every page through the sidebar, so that each page's assets are requested at least once.
    page.goto("/")
    check_page(page, "Runs")
    links = page.get_by_test_id("stSidebarNav").get_by_role("link")
    names = links.all_inner_texts()
    assert {"Run", "Item", "Compare", "Diagnosis", "Triage", "Evaluate"} <= set(names)
    for i, name in enumerate(names[1:], start=1):
        links.nth(i).click()
        page.wait_for_url(re.compile(f"/{re.escape(name)}"))
        check_page(page, name)
        shot(page, f"07_{i}_{name}")
    assert len(traffic.requests) > 20 and traffic.websockets, "the browser's traffic was not recorded"
    assert not outside(traffic.requests + traffic.websockets), outside(traffic.requests + traffic.websockets)
    assert traffic.page_errors == []
