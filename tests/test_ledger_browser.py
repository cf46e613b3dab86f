"""The Sources and Trends pages in real Chromium: from the dead-weight list to one source's retrievals
(?source=) and on to an item that retrieved it; the trend chart over runs with a baseline."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from evaluators import cli
from evaluators.metrics import ledger
from tests.browser_util import CHROMIUM, chromium_tab, streamlit_server
from tests.test_browser import charts_drawn, check_page, click_row, grid
from tests.test_ledger import RUN, B, build_ledger_db
from tests.test_trends import build_trend_db

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
expect = sync_api.expect
KEY = ledger.source_key(B)


@pytest.fixture(scope="module")
def served_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One database holding the ledger's hand-built run and the trend runs."""
    return build_trend_db(build_ledger_db(tmp_path_factory.mktemp("ledger_browser") / "ledger.duckdb"))


@pytest.fixture(scope="module")
def base_url(served_db: Path) -> Iterator[str]:
    """The app over served_db."""
    with streamlit_server(served_db, served_db.with_name("streamlit.log")) as url:
        yield url


@pytest.fixture
def page(base_url: str) -> Iterator[Any]:
    with chromium_tab(base_url) as tab:
        yield tab


def test_dead_weight_opens_the_source_and_then_its_item(page: Any) -> None:
    page.goto(f"/Sources?run={RUN}&lr_min=2")
    check_page(page, "Sources")
    expect(page.get_by_test_id("stMetric").filter(has_text="Dead weight")).to_contain_text("1")
    assert [r["source"] for r in grid(page, "source")] == [B]  # named by its words, not by its key
    click_row(page, "source", 0, re.compile(rf"/Sources\?.*source={KEY}"))  # one click, same tab
    check_page(page, "Sources")
    expect(page.get_by_role("heading", name=B)).to_be_visible()
    rows = grid(page, "item")
    assert [r["item"] for r in rows] == ["i1", "i2", "i3"]
    assert [r["essential"] for r in rows] == ["✗ not essential", "⚠ failed", "✗ not essential"]
    expect(page.get_by_test_id("stMetric").filter(has_text="Retrieved")).to_contain_text("3")
    click_row(page, "item", 0, re.compile(r"/Item\?.*item=i1.*tab=Sources"))  # on its sources
    check_page(page, "Item")
    expect(page.get_by_text("Bravo text two.").first).to_be_visible()


def test_a_pasted_source_link_takes_the_id_or_the_text_key(page: Any) -> None:
    page.goto(f"/Sources?run={RUN}&source=doc-a")
    check_page(page, "Sources")
    assert [r["item"] for r in grid(page, "item")] == ["i1"]
    expect(page.get_by_role("heading", name="Alpha text one. Alpha has more to say.")).to_be_visible()  # its name
    expect(page.get_by_text("Alpha text one. Alpha has more to say.")).to_have_count(2)  # and its full text


def test_trends_render_with_a_baseline(page: Any) -> None:
    page.goto("/Trends?runs=base,fixed,same&base=base")
    check_page(page, "Trends")
    charts_drawn(page, 1)
    rows = grid(page, "point")
    assert [r["point"] for r in rows] == ["base", "fixed", "same"]
    assert [r["real"] for r in rows] == ["", "✓ real", "noise (CI spans 0)"]


def test_the_download_is_the_clis_export(page: Any, served_db: Path, tmp_path: Path) -> None:
    page.goto(f"/Sources?run={RUN}&lr_min=2")
    check_page(page, "Sources")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the whole ledger (CSV)").click()
    got = tmp_path / "page.csv"
    download.value.save_as(got)
    out = tmp_path / "cli.csv"
    assert cli.main(["ledger", "--db", str(served_db), "--run", RUN, "--min-retrieved", "2", "--out", str(out)]) == 0
    assert got.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    assert f"{KEY},{B},," in got.read_text(encoding="utf-8")
