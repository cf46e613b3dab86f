"""A pasted link is the first thing a freshly started server sees: it must open the titled dashboard.

Streamlit 1.67 serves an app with a pages/ folder next to its entry script the old way (the folder's
files, plus an "app" entry) until some session has run app.py's st.navigation in the process. ui.page()
notices it was served that way and runs app.py in its place (evaluators/dashboard/ui.py). Checked in Chromium against
a new `streamlit run app.py` whose very first request is a deep link, and with AppTest in that mode:
a deep link is handed over to app.py, a page file opened by itself (it has no app.py) is not.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from evaluators.dashboard import timing
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server

TIMEOUT_MS = 45_000
TITLES = ["Runs", "Run", "Item", "Compare", "Diagnosis", "Triage", "Trust", "Sources", "Trends", "Evaluate", "Robustness"]
LINE = re.compile(r"page=(?P<page>/\S*) ms=\d+\.\d session=[0-9a-f]{8} outcome=(?P<outcome>\S+)$")


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs Debian's chromium")
def test_deep_link_to_a_fresh_server_opens_the_titled_navigation(seeded: Path, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
    log = tmp_path / "streamlit.log"

    def logged() -> list[tuple[str, str]]:
        return [(m["page"], m["outcome"]) for line in log.read_text().splitlines()
                if f" INFO    {timing.LOGGER_NAME}: " in line and (m := LINE.search(line))]

    with streamlit_server(seeded, log) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        sync_api.expect.set_options(timeout=TIMEOUT_MS)
        page.goto(f"{base}/Item?run=weak-retriever&item=q02")  # the server's first request of all
        page.get_by_role("heading", name="Item", exact=True).wait_for()
        main = page.get_by_test_id("stMain")
        sync_api.expect(main).to_contain_text("item q02")
        sync_api.expect(main).to_contain_text("weak-retriever")
        nav = page.get_by_test_id("stSidebarNav").get_by_role("link")
        sync_api.expect(nav).to_have_count(len(TITLES))
        assert nav.all_inner_texts() == TITLES  # titled, and no "app" entry
        assert page.title() == "Item · RAG Triage"
        assert page.url == f"{base}/Item?run=weak-retriever&item=q02"  # the link stays what was pasted
        page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")
        for _ in range(300):  # the line lands in the log a moment after the browser shows the page
            if logged():
                break
            page.wait_for_timeout(100)
        browser.close()
    assert logged() == [("/Item", "ok")], log.read_text()
    assert "Traceback" not in log.read_text()


def test_deep_link_served_from_the_pages_folder_is_handed_over_to_app_py(
        seeded: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """AppTest starts every run as a fresh server does (it resets the mode), so a page opened through
    app.py is first served from the pages/ folder by itself, then handed over."""
    monkeypatch.setenv("RAG_TRIAGE_DB", str(seeded))
    monkeypatch.delenv("RAG_TRIAGE_READ_ONLY", raising=False)
    caplog.set_level(logging.INFO, logger=timing.LOGGER_NAME)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.switch_page("pages/2_Item.py")
    at.query_params["run"] = "weak-retriever"
    at.query_params["item"] = "q02"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Item" and "Run **weak-retriever** · item q02" in [m.value for m in at.markdown]
    # app.py ran the page (its timing line is the proof), once, and the process left the old mode.
    lines = [r.getMessage() for r in caplog.records if r.name == timing.LOGGER_NAME]
    assert len(lines) == 1 and lines[0].startswith("page=/Item ") and lines[0].endswith(" outcome=ok"), lines
    assert PagesManager.uses_pages_directory is False


def test_page_file_opened_alone_is_not_handed_over(seeded: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A page file that AppTest opens by itself has no pages/ folder beside it: it runs as it is."""
    monkeypatch.setenv("RAG_TRIAGE_DB", str(seeded))
    caplog.set_level(logging.INFO, logger=timing.LOGGER_NAME)
    at = AppTest.from_file(str(ROOT / "pages" / "7_Robustness.py"), default_timeout=30)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Robustness" and "grammar-demo" in at.info[0].value
    assert not [r for r in caplog.records if r.name == timing.LOGGER_NAME]  # app.py never ran
