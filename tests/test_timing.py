"""Every page run of the dashboard is timed on the server: one INFO line on "rag_triage.pages" with the
page's URL path, its duration, a short session hash and how the run ended (evaluators/dashboard/timing.py,
wrapped around `pg.run()` in app.py). Checked with AppTest on the root page (AppTest runs any other
page without app.py) and in the log of a real `streamlit run` server driven by Chromium, which is what
an operator greps."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from evaluators.dashboard import timing
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server

APP = str(ROOT / "app.py")
LINE = re.compile(r"page=(?P<page>/\S*) ms=(?P<ms>\d+\.\d) session=(?P<session>[0-9a-f]{8}|-)"
                  r" outcome=(?P<outcome>\S+)$")


def page_runs(caplog: pytest.LogCaptureFixture) -> list[dict[str, str]]:
    """The page-run lines logged so far, parsed; every line of the logger must have the format."""
    lines = [r for r in caplog.records if r.name == timing.LOGGER_NAME]
    assert all(r.levelno == logging.INFO for r in lines)
    parsed = [LINE.fullmatch(r.getMessage()) for r in lines]
    assert all(parsed), [r.getMessage() for r in lines]
    return [m.groupdict() for m in parsed]


def test_page_run_is_logged_with_its_duration(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=timing.LOGGER_NAME)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    assert not at.exception
    assert at.title[0].value == "Runs"
    [line] = page_runs(caplog)
    assert line["page"] == "/" and line["outcome"] == "ok" and line["session"] != "-"
    assert 0 < float(line["ms"]) < 60_000
    at.slider(key="th_sp1").set_value(0.6).run()  # an interaction is a script run too, in the same session
    first, second = page_runs(caplog)
    assert second["page"] == "/" and second["session"] == first["session"] and second["outcome"] == "ok"


def test_stopped_page_run_is_timed_and_the_stop_still_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=timing.LOGGER_NAME)
    monkeypatch.setenv("RAG_TRIAGE_DB", str(tmp_path / "missing.duckdb"))
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    assert not at.exception  # StopException went back to Streamlit, which ends the run quietly
    assert "No database at" in at.warning[0].value
    assert not at.dataframe  # nothing after st.stop() was drawn
    [line] = page_runs(caplog)
    assert line["page"] == "/" and line["outcome"] == "stop" and float(line["ms"]) > 0


def test_page_error_is_timed_and_reraised(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=timing.LOGGER_NAME)
    with pytest.raises(KeyError, match="boom"):
        with timing.page_run("Run"):
            raise KeyError("boom")
    [line] = page_runs(caplog)
    assert line == {"page": "/Run", "ms": line["ms"], "session": "-", "outcome": "KeyError"}


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs Debian's chromium")
def test_server_log_has_a_line_per_page_run(seeded: Path, tmp_path: Path) -> None:
    """Through `streamlit run` and Chromium: a page, a stopped page and a button's st.rerun(), each run
    one line in the server's log, in order, tagged with its browser session."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
    log = tmp_path / "streamlit.log"
    expected = [("/", "ok"), ("/Item", "stop"), ("/Run", "ok"), ("/Run", "rerun"), ("/Run", "ok")]

    def logged() -> list[re.Match[str]]:
        return [m for line in log.read_text().splitlines()
                if f" INFO    {timing.LOGGER_NAME}: " in line and (m := LINE.search(line))]

    def settle(page: Any, n_lines: int) -> None:
        """Wait for the n-th line: a run ends in the log a moment after the browser shows it."""
        page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")
        for _ in range(300):
            if len(logged()) >= n_lines:
                return
            page.wait_for_timeout(100)

    with streamlit_server(seeded, log) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(45_000)
        # (A deep link as a fresh server's first request is logged too: tests/test_deep_links.py.)
        page.goto(f"{base}/")
        page.get_by_role("heading", name="Runs", exact=True).wait_for()
        settle(page, 1)
        page.goto(f"{base}/Item?run=weak-retriever&item=nope")
        page.get_by_text("has no item with id 'nope'").wait_for()
        settle(page, 2)
        page.goto(f"{base}/Run?run=weak-retriever&quad=sqc:low,rqc:low")
        button = page.get_by_role("button", name="Clear quadrant filter")
        button.wait_for()
        settle(page, 3)  # the page's own run ends before the click starts the next one
        button.click()
        page.get_by_text("6 matching items").wait_for()
        settle(page, 5)
        browser.close()
    lines = logged()
    assert [(m["page"], m["outcome"]) for m in lines] == expected, log.read_text()
    assert all(float(m["ms"]) > 0 for m in lines)
    # Each page load is a new session; the button's rerun and the run after it are the same one.
    sessions = [m["session"] for m in lines]
    assert len(set(sessions[:3])) == 3 and sessions[2] == sessions[3] == sessions[4]
