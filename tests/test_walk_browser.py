"""A triage session's table work in real Chromium at 1280 x 800 on the seeded runs: a row's click opens the
item in the same tab, Back returns to the table with its filter and sort, ▶ Next walks that list; the
navigation's sections; and no table on the main pages scrolls sideways or shows "None"."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import parse_qs, urlsplit

import pytest

from evaluators.dashboard import ui
from evaluators.storage import writes
from tests.browser_util import (
    CANVAS_TEXTS_READ,
    CHROMIUM,
    canvas_texts,
    chromium_tab,
    last_draws,
    streamlit_server,
)
from tests.seed import seed
from tests.test_browser import check_page, click_cell, click_row, grid, settle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
expect = sync_api.expect



@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("walk_browser")
    db: Path = seed(tmp / "seed.duckdb")
    writes.add_triage(db, "weak-retriever", "q02", "confirmed", "Retriever", "the corpus lacks the founding facts", "a")
    with streamlit_server(db, tmp / "streamlit.log") as url:
        yield url


@pytest.fixture
def page(base_url: str) -> Iterator[Any]:
    with chromium_tab(base_url) as tab:
        tab.set_viewport_size({"width": 1280, "height": 800})
        yield tab


def test_a_click_opens_the_item_back_keeps_the_filter_and_next_walks_the_list(page: Any) -> None:
    page.goto("/Run?run=weak-retriever&below=gr,sp1&sort=gr&desc=1")
    check_page(page, "Run")
    listed = [r["item"] for r in grid(page, "item")]
    assert len(listed) >= 3 and listed != sorted(listed)  # sorted by GR, not by id
    click_row(page, "item", 1, re.compile(rf"/Item\?(?=.*item={listed[1]}(&|$))(?=.*from=run)(?=.*tab=Verdicts)"))
    check_page(page, "Item")
    assert len(page.context.pages) == 1  # the same tab
    page.get_by_role("link", name="▶ Next").click()
    page.wait_for_url(re.compile(rf"/Item\?(?=.*item={listed[2]}(&|$))(?=.*tab=Verdicts)"))
    check_page(page, "Item")
    page.get_by_role("link", name="◀ Previous").click()
    page.wait_for_url(re.compile(rf"/Item\?.*item={listed[1]}(&|$)"))
    check_page(page, "Item")
    page.get_by_role("link", name="Back to Run").click()
    page.wait_for_url(re.compile(r"/Run\?(?=.*below=gr%2Csp1)(?=.*sort=gr)(?=.*desc=1)"))
    check_page(page, "Run")
    assert [r["item"] for r in grid(page, "item")] == listed
    assert "item=" not in page.url and "from=" not in page.url
    nav = page.get_by_test_id("stSidebarNav")
    expect(nav.get_by_text("Robustness tests", exact=True)).to_be_visible()  # the navigation's own section
    expect(nav.get_by_role("link", name="Robustness")).to_have_attribute("href", re.compile(r"/Robustness$"))


def test_one_click_on_a_plain_cell_opens_the_item_on_the_tab_it_means(page: Any) -> None:
    page.goto("/Run?run=weak-retriever&below=gr,sp1&sort=gr&desc=1")
    check_page(page, "Run")
    listed = [r["item"] for r in grid(page, "item")]
    click_cell(page, "item", 1, re.compile(rf"/Item\?(?=.*item={listed[1]}(&|$))(?=.*from=run)(?=.*tab=Verdicts)"),
               cell="query")
    check_page(page, "Item")
    assert len(page.context.pages) == 1  # the same tab
    expect(page.get_by_role("link", name="▶ Next")).to_have_attribute("href", re.compile(rf"item={listed[2]}(&|$)"))
    page.go_back()  # the 🔎 link's cell too: one click, this tab, the list kept
    check_page(page, "Run")
    click_cell(page, "item", 2, re.compile(rf"/Item\?(?=.*item={listed[2]}(&|$))(?=.*from=run)"), cell="open")
    assert len(page.context.pages) == 1


# Every st.dataframe's grid in view (not in a closed expander), and whether it scrolls sideways (its scroller wider inside than shown) or
# shows "None" in a cell (the grid's accessible table holds the text of the cells in view).
VISIBLE = ("[...document.querySelectorAll('[data-testid=stDataFrame]')]"
           ".filter(f => f.offsetParent !== null && !f.closest('details:not([open])'))")
GRIDS_JS = "() => " + VISIBLE + """.map(frame => {
    const scroller = frame.querySelector('.dvn-scroller');
    return {
        columns: [...frame.querySelectorAll('th[role=columnheader]')].map(th => th.textContent).join(' | '),
        text: frame.innerText.slice(0, 80),
        inside: scroller ? scroller.scrollWidth : 0,
        shown: scroller ? scroller.clientWidth : 0,
        none: [...frame.querySelectorAll('td')].some(td => td.textContent === 'None'),
    };
})"""

VIEWS = [
    "/?run=weak-retriever",
    "/Run?run=weak-retriever",
    "/Item?run=weak-retriever&item=q02",
    "/Item?run=weak-retriever&item=q02&tab=Sources",
    "/Item?run=weak-retriever&item=q02&tab=Response",
    "/Item?run=weak-retriever&item=q02&tab=Verdicts",
    "/Compare?run=weak-retriever&other=better-retriever&xm=sqc&xd=better",
    "/Diagnosis?run=weak-retriever",
    "/Sources?run=weak-retriever",
    "/Trust?run=weak-retriever",
    "/Trust?run=weak-retriever&tab=Label+next",
    "/Triage",
    "/Trends?runs=weak-retriever,better-retriever,llm-judge",
]


def test_no_table_scrolls_sideways_or_shows_none_at_1280(page: Any) -> None:
    """At 1280 x 800, beside the open sidebar, every table's columns fit its width (long text wraps in
    its cell), and an empty cell is empty; the last view is a source's retrievals, opened from the ledger."""
    wide: list[str] = []
    none: list[str] = []
    for view in [*VIEWS, "source"]:
        if view == "source":
            page.goto("/Sources?run=weak-retriever")
            click_row(page, "retrieved", 0, re.compile(r"/Sources\?.*source="))
            check_page(page, "Sources")
        else:
            page.goto(view)
        expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
        settle(page)
        try:
            page.wait_for_function(  # a grid below the fold is drawn once scrolled to
                f"() => {VISIBLE}.every(f => f.querySelector('.dvn-scroller') || f.scrollIntoView())", timeout=20_000
            )
        except sync_api.TimeoutError:
            pass  # a grid not drawn is named below
        grids = page.evaluate(GRIDS_JS)
        wide += [f"{view}: a grid not drawn: {g['text']!r}" for g in grids if not g["shown"]]
        wide += [f"{view}: {g['columns']} ({g['inside']} > {g['shown']} px)" for g in grids
                 if g["inside"] > g["shown"] + 1]
        none += [f"{view}: {g['columns']}" for g in grids if g["none"]]
    assert not wide, "tables that scroll sideways:\n" + "\n".join(wide)
    assert not none, "tables showing None:\n" + "\n".join(none)


# The views whose every cell and header must be readable at 1280 x 800 (issue: Run, Item, Compare and Sources;
# and the runs board, Diagnosis's rules, Trust's tables, Triage's notes and Trends' points), with RUN
# and OTHER for two runs of the same items; "source" is a source's retrievals, opened from the ledger. Compare
# lists the items that crossed both ways (each run's name a header) and the items whose verdicts flipped.
CELL_VIEWS = [
    "/?run=RUN",
    "/Run?run=RUN",
    "/Run?run=RUN&below=gr,sp1&rule=T2.3",
    "/Item?run=RUN&item=q02&rule=T2.3",
    "/Item?run=RUN&item=q02&tab=Sources",
    "/Item?run=RUN&item=q02&tab=Response",
    "/Item?run=RUN&item=q02&tab=Verdicts",
    "/Item?run=RUN&item=q04",
    "/Compare?run=RUN&other=OTHER&xm=sqc&xd=better",
    "/Compare?run=OTHER&other=RUN&xm=gr",
    "/Sources?run=RUN",
    "/Sources?runs=RUN,OTHER",
    "source",
    "/Diagnosis?run=RUN",
    "/Trust?run=RUN",
    "/Trust?run=RUN&tab=Label+next",
    "/Triage",
    "/Trends?runs=RUN,OTHER",
]

# A grid draws only the rows in view: bring each grid into view and scroll it through all its rows. The grid
# keeps the rows in view as a table for screen readers, each cell's whole text: those texts go to __cellTexts.
DRAW_ALL_JS = "async () => { const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));" + \
    "const cells = window.__cellTexts = new Set(), keep = (f) => f.querySelectorAll('td').forEach(td => cells.add(td.textContent));" + \
    f"for (const f of {VISIBLE}) {{" + """
        f.scrollIntoView(); await frame();
        for (let n = 0; n < 50 && !f.querySelector('.dvn-scroller'); n++) await frame();
        const s = f.querySelector('.dvn-scroller');
        for (let y = 0; s && y < s.scrollHeight; y += s.clientHeight / 2) { s.scrollTop = y; await frame(); keep(f); }
        keep(f);
    } }"""


LINE_GAP_PX = 28  # a wrapped cell's lines are tables.LINE_PX apart; a row holding one line is 35 px or more high


def broken_words(drawn: Sequence[dict[str, Any]], cells: Sequence[str]) -> list[tuple[dict[str, Any], str]]:
    """The lines, of those a grid drew (CANVAS_TEXTS_READ, in drawing order), that end inside a word: a wrapped
    cell draws its lines one after another at the same left edge, each a line lower; where the cell's whole text (one
    of `cells`) holds two such lines with no space between them, the grid broke a word (it breaks one only
    when the word alone is wider than the cell). Each with the word as broken ("retrie|ver")."""
    found = []
    for a, b in zip(drawn, drawn[1:]):
        same_cell = (a["grid"] == b["grid"] and not a["header"] and not b["header"] and a["clip"] == b["clip"]
                     and abs(a["box"][0] - b["box"][0]) < 3 and 0 < b["box"][1] - a["box"][1] < LINE_GAP_PX)
        if not same_cell or not re.search(r"\w$", a["text"]) or not re.match(r"\w", b["text"]):
            continue
        if any(a["text"] + b["text"] in c for c in cells) and not any(
                re.search(re.escape(a["text"]) + r"\s+" + re.escape(b["text"]), c) for c in cells):
            word = re.search(r"\S+$", a["text"]).group() + "|" + re.match(r"\S+", b["text"]).group()
            found.append((a, word))
    return found


def cut_cells(page: Any, view: str) -> list[str]:
    """The columns of the page's tables with a header or cell whose text the grid drew wider than the column
    (its box beyond the column's clip), a cell taller (more wrapped lines than the row holds), a word broken
    across two lines (broken_words), or a cell that reads "None": one line per column and fault, with its first
    such text; and the tables wider than their frame."""
    settle(page)
    page.evaluate(DRAW_ALL_JS)
    settle(page)
    page.wait_for_timeout(500)  # the grids' last frames
    drawn = page.evaluate(CANVAS_TEXTS_READ)  # every draw, in order: broken_words reads a cell's lines in turn
    texts = last_draws(drawn)
    # a column's name, by its grid and where it starts: the header row is clipped to each column too
    names = {(t["grid"], round(t["clip"][0])): t["text"] for t in texts if t["header"]}
    broken = broken_words(drawn, page.evaluate("() => [...(window.__cellTexts || [])]"))
    found: dict[tuple[int, str, str], str] = {}
    for t in texts:
        (x0, _, x1, _), (c0, _, c1, _) = t["box"], t["clip"]
        if x0 < c0 - 0.5 or x1 > c1 + 0.5:
            kind, fault = "wide", f"{'header ' * t['header']}{t['text']!r} is {x1 - x0:.0f} px wide in a cell of {c1 - c0:.0f} px"
        elif t["header"]:
            continue
        elif t["tall"]:
            kind, fault = "tall", f"{t['text']!r} is a line of a text taller than its row"
        elif t["text"] == "None":
            kind, fault = "None", "a cell reads None"
        else:
            continue
        column = names.get((t["grid"], round(c0)), "?")
        found.setdefault((t["grid"], column, kind),
                         f"{view}: table {t['grid']} ({' | '.join(t['columns'])}), column {column!r}: {fault}")
    for t, word in broken:
        column = names.get((t["grid"], round(t["clip"][0])), "?")
        found.setdefault((t["grid"], column, "broken"), f"{view}: table {t['grid']} ({' | '.join(t['columns'])}), "
                         f"column {column!r}: the word {word!r} is broken across two lines")
    cards = [f"{view}: the {label} card's value {value!r} is cut to its box" for label, value in page.evaluate(CUT_CARDS_JS)]
    # a grid wider than its frame hides its last columns' right edge, whatever each cell holds
    sideways = [f"{view}: table ({g['columns']}) scrolls sideways: {g['inside']} > {g['shown']} px"
                for g in page.evaluate(GRIDS_JS) if g["inside"] > g["shown"] + 1]
    return list(found.values()) + cards + sideways


# A metric card whose value is wider than its box: Streamlit cuts it with an ellipsis ("⚠ u…").
CUT_CARDS_JS = """() => [...document.querySelectorAll('[data-testid=stMetric]')].flatMap(m => {
    const v = m.querySelector('[data-testid=stMetricValue]'), cut = [v, ...v.querySelectorAll('*')]
        .some(e => e.scrollWidth > e.clientWidth + 1);
    return cut ? [[m.querySelector('[data-testid=stMetricLabel]').innerText.trim(), v.innerText.trim()]] : [];
})"""


def open_view(page: Any, base: str, view: str, run: str) -> None:
    """Go to `view` of the server at `base`; "source" is the first source's retrievals, opened from RUN's ledger."""
    if view == "source":
        page.goto(f"{base}/Sources?run={run}")
        click_row(page, "retrieved", 0, re.compile(r"/Sources\?.*source="))
    else:
        page.goto(base + view)


# The keys of the tables a page drew whose rows take a click (Streamlit marks such a table's element with the
# class st-key-KEY; a table without a selection is not marked).
DRAWN_KEYS_JS = """() => [...document.querySelectorAll('[class*=st-key-]')]
    .filter(e => e.querySelector('[data-testid=stDataFrame]'))
    .flatMap(e => [...e.classList].filter(c => c.startsWith('st-key-')).map(c => c.slice(7)))"""


def cut_in_views(
    page: Any, base: str, run: str, other: str, drawn: set[str] | None = None, views: Sequence[str] = CELL_VIEWS
) -> list[str]:
    """cut_cells() over `views` of the server at `base`; the keys of the tables checked go to `drawn`."""
    found: list[str] = []
    for view in (v.replace("RUN", run).replace("OTHER", other) for v in views):
        open_view(page, base, view, run)
        check_page(page, "Sources" if view == "source" else view.split("?")[0].strip("/") or "Runs")
        found += cut_cells(page, view)
        (drawn if drawn is not None else set()).update(page.evaluate(DRAWN_KEYS_JS))
    return found


def test_no_cell_is_cut_off_or_reads_none_at_1280(page: Any, base_url: str) -> None:
    """Each text a table draws on its canvas fits its cell: no wider than its column, no more lines than
    its row holds, no word broken across lines; and no cell reads "None" (the seeded runs: failures, unsure
    verdicts, a triage note)."""
    found = cut_in_views(page, base_url, "weak-retriever", "better-retriever")
    assert not found, "cells cut off:\n" + "\n".join(found)


# A triager's note as people write them: a few sentences, which Triage's table wraps in their cell.
LONG_NOTE = ("The retriever returns the timetable page for a question about the app's launch; the press release "
             "that dates it is in the corpus but ranks below the cut. Re-index with titles and check again.")


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo (`make demo`: three runs of 48 queries, the offline judge), built afresh and served."""
    from data import build_demo

    tmp = tmp_path_factory.mktemp("walk_demo")
    build_demo.build(tmp / "demo.duckdb", emit=lambda _: None)
    writes.add_triage(tmp / "demo.duckdb", "weak_retriever", "q02", "confirmed", "Retriever", LONG_NOTE, "triager")
    with streamlit_server(tmp / "demo.duckdb", tmp / "streamlit.log") as url:
        yield url


# The demo's tables that list items beyond the Run and Sources pages': each must be drawn and checked on its
# long text (a rule's meaning, a disagreement's target, a queue's detail, a triager's note).
DEMO_TABLES = {"rules_table", "crossed_items", "flip_items", "disagreements", "queue_table", "triage_table"}


def test_no_cell_of_the_demo_is_cut_off_or_reads_none_at_1280(page: Any, demo_url: str) -> None:
    drawn: set[str] = set()
    found = cut_in_views(page, demo_url, "weak_retriever", "better_retriever", drawn)
    found += cut_in_views(page, demo_url, "verbose_generator", "better_retriever", drawn)  # its long answers
    found += cut_in_views(page, demo_url, "weak_retriever", "", views=["/Trends?by=time&run=RUN"])  # its days
    page.goto(f"{demo_url}/Robustness?run=grammar-dense")  # the newcomer's page: its cluster tables' headers
    check_page(page, "Robustness")
    expect(page.get_by_test_id("stDataFrame")).to_have_count(4)  # clusters, retrieval, groups, wrong answers
    found += cut_cells(page, "/Robustness")
    assert not found, "cells cut off:\n" + "\n".join(found)
    assert DEMO_TABLES <= drawn, f"tables not checked: {sorted(DEMO_TABLES - drawn)}"


@pytest.fixture(scope="module")
def many_sources_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One item that retrieved eight sources, each judged on both sub-questions: sure, unsure and failed
    verdicts; a column per source would be wider than the page."""
    from evaluators.core.confidence import CALIBRATED
    from evaluators.core.records import Component, Item, Run, Status, Verdict
    from evaluators.metrics import registry
    from evaluators.metrics.thelma import rescore
    from evaluators.storage import ownership

    path = tmp_path_factory.mktemp("many_sources") / "wide.duckdb"
    sources = tuple(f"Timetable page {j}: the ferry leaves at {8 + j}:00." for j in range(8))
    questions = ["When does the ferry leave?", "How long is the crossing?"]
    comps = [Component("x", "subquestion", i, q) for i, q in enumerate(questions)]
    comps += [Component("x", "source", j, s) for j, s in enumerate(sources)]
    outcomes = [(Status.OK, 1.0, 0.97), (Status.OK, 0.0, 0.02), (Status.OK, 0.0, 0.5), (Status.UNPARSED, None, None)]
    targets = [*(f"source:{j}" for j in range(8)), "sources", "response"]  # RQC's, on the response
    verdicts = [Verdict(item_id="x", metric="rqc" if target == "response" else "sqc", component_kind="subquestion",
                        component_idx=i, target=target, value=value, status=status, p=p,
                        p_kind=None if p is None else CALIBRATED, tier="offline", detail="it names a departure time")
                for i in range(2) for k, target in enumerate(targets) for status, value, p in [outcomes[(i + k) % 4]]]
    ownership.start_run(path, Run("wide", "offline", {}, {}), 1)
    specs = {m: registry.METRICS[m] for m in ("sqc", "rqc")}
    writes.write_batch(path, "wide", items=[Item("x", " ".join(questions), sources, "At eight.")], components=comps,
                       verdicts=verdicts, scores=list(rescore("x", verdicts, specs).values()))
    with streamlit_server(path, path.with_suffix(".log")) as url:
        yield url


def test_past_what_fits_the_sub_questions_sources_fold_into_one_column(page: Any, many_sources_url: str) -> None:
    page.goto(f"{many_sources_url}/Item?run=wide&item=x")
    check_page(page, "Item")
    found = cut_cells(page, "/Item?run=wide&item=x")
    assert not found, "cells cut off:\n" + "\n".join(found)
    texts = canvas_texts(page)
    headers = {t["text"] for t in texts if t["header"]}
    assert "each source" in headers and "source 7" not in headers
    lines = {t["text"].replace("\u00a0", " ") for t in texts if "each source" in t["columns"] and not t["header"]}
    # two sources to a line, each verdict whole on its line
    assert {"0: ✓ 1 · p 0.97; 1: ✗ 0 · p 0.02;", "6: ? unsure · p 0.50; 7: ⚠ unparsed"} <= lines


# Every other table that lists items (the Run page's is above): its view, a column to click a row's cell in
# (the first grid headed so), the Item URL one click opens (this run, this list, the tab the link means), and
# the keys of the table's URL state that Back must bring back.
ITEM_TABLES = {
    "diagnosis": ("/Diagnosis?run=weak-retriever", "pattern", r"(?=.*from=diagnosis)(?=.*rule=T2\.\d)", ()),
    "compare": ("/Compare?run=weak-retriever&other=better-retriever", "sources added",
                r"(?=.*from=compare)(?=.*run=better-retriever)(?=.*tab=Verdicts)(?=.*cl=flips)", ("other",)),
    "sources": ("source", "rank", r"(?=.*from=sources)(?=.*tab=Sources)(?=.*source=)", ("source",)),
    "trust": ("/Trust?run=weak-retriever&tab=Label+next", "reason", r"(?=.*from=trust)(?=.*ft=Label)", ("tab",)),
    "triage": ("/Triage?run=weak-retriever&labels=confirmed", "note",
               r"(?=.*from=triage)(?=.*item=q02)(?=.*tab=Triage)", ("labels",)),
}


@pytest.mark.parametrize("origin", ITEM_TABLES)
def test_one_click_on_a_row_opens_its_item_and_back_returns_to_the_table(page: Any, origin: str) -> None:
    """One click on a row's cell opens the item in this tab, on the tab the table's link means; the browser's
    Back returns to the table at the URL it had, and the Item page's Back link carries the same state."""
    view, column, opened, state = ITEM_TABLES[origin]
    open_view(page, "", view, "weak-retriever")
    title = ui.PAGES[origin].title
    check_page(page, title)
    table_url = page.url
    click_cell(page, column, 0, re.compile(r"/Item\?" + opened))
    check_page(page, "Item")
    assert len(page.context.pages) == 1  # the same tab
    kept = {k: v for k, v in parse_qs(urlsplit(table_url).query).items() if k in ("run", *state)}

    def the_table(url: str) -> bool:  # the table's path and state, and none of the item's keys
        query = parse_qs(urlsplit(url).query)
        return (urlsplit(url).path.strip("/") == urlsplit(table_url).path.strip("/") and "from" not in query
                and {k: query.get(k) for k in kept} == kept)

    assert the_table(page.get_by_role("link", name=f"Back to {title}").get_attribute("href"))
    entries = page.evaluate("history.length")
    page.go_back()
    page.wait_for_url(the_table, timeout=20_000)
    assert page.evaluate("history.length") == entries  # Back left no new entry behind: Forward is the item
    check_page(page, title)
    expect(page.get_by_test_id("stDataFrame").filter(has_text=column).first).to_be_visible()


def test_the_home_pages_evidence_opens_in_this_tab_and_both_backs_return_to_the_board(page: Any) -> None:
    """The board's 🔎 (its top rule's first item) opened a new tab, where Back led to the Run page; it opens the
    item in this tab now, as every other table does, and the Item page's Back and the browser's return to the board."""
    page.goto("/")
    check_page(page, "Runs")
    click_cell(page, "run", 0, re.compile(r"/Item\?(?=.*from=runs)(?=.*rule=)"), cell="item")
    check_page(page, "Item")
    assert len(page.context.pages) == 1  # the same tab
    page.get_by_role("link", name="Back to Runs").click()
    page.wait_for_url(re.compile(r"/(\?(?!.*item=).*)?$"))
    check_page(page, "Runs")
    click_cell(page, "run", 0, re.compile(r"/Item\?(?=.*from=runs)"), cell="item")
    check_page(page, "Item")
    page.go_back()
    page.wait_for_url(re.compile(r"/(\?(?!.*item=).*)?$"))
    check_page(page, "Runs")
    assert len(page.context.pages) == 1
