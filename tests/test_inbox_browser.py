"""The inbox in real Chromium: a run file that CI drops into the inbox of a running `serve --inbox DIR`
(written under a temporary name, then renamed into place) shows on the dashboard's home page within
10 s, with who sent it."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from evaluators.runs import inbox
from evaluators.storage import runfile, store
from tests.browser_util import CHROMIUM, chromium_tab, streamlit_server
from tests.seed import seed
from tests.test_browser import check_page, grid

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
SENT = "ci-nightly"
SENDER = "ci-bot@example.com"


@pytest.fixture
def ci_file(tmp_path: Path) -> Path:
    """The seeded llm-judge run, as CI would send it: named SENT, started by SENDER."""
    made = seed(tmp_path / "ci.duckdb")
    first = runfile.export_run(made, "llm-judge", tmp_path / "first.duckdb") and tmp_path / "first.duckdb"
    runfile.import_run(first, tmp_path / "renamed.duckdb", SENT)
    with store.connect(tmp_path / "renamed.duckdb") as con:
        con.execute("UPDATE runs SET started_by = ?", [SENDER])
    runfile.export_run(tmp_path / "renamed.duckdb", SENT, tmp_path / "sent.duckdb")
    return tmp_path / "sent.duckdb"


@pytest.fixture
def hosted(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The dashboard served on a seeded database with an inbox: its URL and the inbox folder."""
    db, box = tmp_path / "hosted" / "hosted.duckdb", tmp_path / "inbox"
    db.parent.mkdir()
    box.mkdir()
    seed(db)
    with streamlit_server(db, tmp_path / "streamlit.log", serve_args=["--inbox", str(box)]) as url:
        yield url, box


def _runs(page: Any) -> dict[str, dict[str, str]]:
    """The home page's runs by name (the grid holds each run's link: Run?run=NAME)."""
    return {r["run"].rpartition("run=")[2]: r for r in grid(page, "run")}


def test_a_run_file_dropped_into_the_inbox_shows_within_10_s(hosted: tuple[str, Path], ci_file: Path) -> None:
    url, box = hosted
    with chromium_tab(url) as page:
        page.goto("/")
        check_page(page, "Runs")
        assert SENT not in _runs(page)
        part = box / ".sent.duckdb.part"
        shutil.copy(ci_file, part)
        part.rename(box / "sent.duckdb")
        dropped = time.monotonic()
        while True:  # a visitor opening the page again
            page.goto("/")
            check_page(page, "Runs")
            rows = _runs(page)
            if SENT in rows:
                break
            assert time.monotonic() - dropped < 10, f"the dropped run is not on the dashboard after 10 s: {list(rows)}"
            time.sleep(0.5)
        shown = time.monotonic() - dropped
        # The grid draws only the columns in view, and "who" is far right: scroll the grid there.
        page.evaluate("() => document.querySelector('[data-testid=stDataFrame] .dvn-scroller').scrollLeft = 1e6")
        page.wait_for_timeout(500)
        who = {r["run"].rpartition("run=")[2]: r.get("who") for r in grid(page, "who")}
    # who imported it, and the sender the file names as its claim, never as a fact
    assert who.get(SENT, "").startswith("imported by ") and who[SENT].endswith(f"written as {SENDER} in the file"), who
    assert shown < 10 and list((box / inbox.IMPORTED).iterdir())
