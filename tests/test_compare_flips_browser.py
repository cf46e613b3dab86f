"""Compare's "Why verdicts flipped" in real Chromium: open a flipped claim, see why it flipped, and
follow the changed source to the source ledger (/Sources?run=RUN&source=KEY), which opens on it."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from evaluators.runs import flips
from tests.browser_util import CHROMIUM, chromium_tab, streamlit_server
from tests.test_browser import check_page, grid, settle, shot
from tests.test_flips import BASE, CAND, SRC, ledger_key, write_run

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
expect = sync_api.expect


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("flips_browser")
    db = tmp / "flips.duckdb"
    write_run(db, "base", BASE)
    write_run(db, "cand", CAND)
    with streamlit_server(db, tmp / "streamlit.log") as url:
        yield url


@pytest.fixture
def page(base_url: str) -> Iterator[Any]:
    with chromium_tab(base_url) as tab:
        yield tab


def test_a_flipped_claim_explains_itself_and_links_its_source(page: Any) -> None:
    page.goto("/Compare?run=base&other=cand")
    check_page(page, "Compare")
    expect(page.get_by_role("heading", name="Why verdicts flipped")).to_be_visible()
    expect(page.get_by_text("5 verdicts flipped: 2 retriever or chunking · 1 prompt or generator · 2 judge")
           ).to_be_visible()
    causes = {r["item"]: r["cause"] for r in grid(page, "sources added")}
    assert causes == {"retr": flips.SOURCES, "gen": flips.RESPONSE, "judge": flips.JUDGE}

    item_box = page.get_by_test_id("stTextInput").filter(has_text="Item id to diff").locator("input")
    item_box.fill("retr")
    item_box.press("Enter")
    expect(page.get_by_text("Flips of retr")).to_be_visible()
    settle(page)
    mine = {r["text"]: r for r in grid(page, "p_before")}
    claim = mine["The ferry leaves at 9:00."]
    assert (claim["metric"], claim["before"], claim["after"], claim["cause"]) == ("GR", "1", "0", flips.SOURCES)

    removed = page.get_by_role("link", name=SRC[0])
    key = ledger_key(SRC[0])
    assert removed.get_attribute("href").endswith(f"Sources?run=base&source={key}")
    page.get_by_text("Flips of retr").scroll_into_view_if_needed()
    shot(page, "compare_flips")
    with page.context.expect_page() as opened:  # markdown links open in a new tab
        removed.click()
    ledger = opened.value
    ledger.wait_for_load_state()
    assert re.search(rf"/Sources\?run=base&source={key}$", ledger.url), ledger.url
    # The ledger opens on that source: its text and the base run's item that retrieved it.
    check_page(ledger, "Sources")
    expect(ledger.get_by_text(SRC[0]).first).to_be_visible()
    settle(ledger)
    assert ("base", "retr") in {(r["run"], r["item"]) for r in grid(ledger, "item")}
