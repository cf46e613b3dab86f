"""`python -m evaluators serve` (the launcher `make run` and every browser test use) and plain
`streamlit run app.py`, in real Chromium over the seeded DuckDB.

The launcher reads the runs catalog into the dashboard's cache before the first visit, then opens each
page's default view once itself; the cache is keyed by the database file's version, so a run written
after that read must still show on the first visit (a stale catalog would leave it out of the run picker).
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evaluators import cli
from evaluators.core.records import Run
from evaluators.dashboard import serve, ui
from evaluators.storage import ownership, store
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, streamlit_server
from tests.seed import seed

sync_api = pytest.importorskip("playwright.sync_api")
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (make browser)", allow_module_level=True)

TIMEOUT_MS = 60_000


def _run_heading(page: Any, url: str, run_id: str) -> None:
    """Open url and wait for the Runs page's header of run_id, with no exception on the page."""
    page.goto(url)
    sync_api.expect(page.get_by_role("heading", name=f"Run {run_id}", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    page.wait_for_function("""() => document.querySelector('[data-testid=stApp]')
        ?.getAttribute('data-test-script-state') === 'notRunning'""", timeout=TIMEOUT_MS)
    assert page.get_by_test_id("stException").count() == 0


def _wait_for(log: Path, text: str, timeout_s: float = 120) -> None:
    """Wait until the server's log holds `text`."""
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.1)


def test_serve_is_a_cli_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--port" in out and "--db" in out
    assert cli.main(["serve", "--port", "eighty"]) == 2
    assert "--port" in capsys.readouterr().err


def test_warmed_catalog_still_shows_a_run_written_after_it(tmp_path: Path) -> None:
    db = seed(tmp_path / "seed.duckdb")
    log = tmp_path / "serve.log"
    with streamlit_server(db, log) as base, sync_api.sync_playwright() as pw:
        _wait_for(log, "dashboard cache warmed", 60)
        assert "3 runs" in log.read_text()  # the seeded catalog was read before any visit
        ownership.start_run(db, Run("late-run", "offline", {}, {}), 1)
        ownership.finish_run(db, "late-run", "finished", {})
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        _run_heading(page, f"{base}/?run=late-run", "late-run")
        sync_api.expect(page.get_by_text("No scores in this run yet.")).to_be_visible()
        browser.close()
    assert "Traceback" not in log.read_text()


def test_serve_opens_every_page_so_a_first_visit_reads_nothing(tmp_path: Path) -> None:
    """Every page's default view runs once at start, logged as `session=warmup`, and so do the Runs, Run,
    Diagnosis, Trust and Sources pages of each run and the comparison the Runs page links to (the run before the newest, then the
    newest). Then a writer holds the file, so a view that still had to read it would say the database is
    busy: the first visits of those views don't."""
    db = seed(tmp_path / "seed.duckdb")
    log = tmp_path / "serve.log"
    with streamlit_server(db, log, warm_pages=True) as base, sync_api.sync_playwright() as pw:
        _wait_for(log, "dashboard pages warmed")
        warmed = re.findall(r"page=(/\S*) ms=[\d.]+ session=warmup outcome=(\S+)", log.read_text())
        # every page's default view, then the Runs, Run, Diagnosis, Trust and Sources pages of each of the three runs, and
        # one Compare
        views = [f"/{p.url_path}" for p in ui.PAGES.values()] + ["/", "/Run", "/Diagnosis", "/Trust", "/Sources"] * 3 + ["/Compare"]
        assert sorted(p for p, _ in warmed) == sorted(views)
        assert {outcome for _, outcome in warmed} <= {"ok", "stop"}, warmed
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        # read-write: the file is locked against every other process, once the server's parked reader closes
        with store.connect(db):
            linked = ("Run?run=weak-retriever", "Diagnosis?run=weak-retriever", "Trust?run=weak-retriever",
                      "Sources?run=weak-retriever", "Compare?run=better-retriever&other=llm-judge")
            for path in ("", "Run", "Compare", "Diagnosis", *linked):
                page = browser.new_page()
                page.goto(f"{base}/{path}")
                page.wait_for_function("""() => document.querySelector('[data-testid=stApp]')
                    ?.getAttribute('data-test-script-state') === 'notRunning'""", timeout=TIMEOUT_MS)
                sync_api.expect(page.get_by_role("heading", level=1)).to_be_visible(timeout=TIMEOUT_MS)
                assert page.get_by_text(re.compile("busy|locked")).count() == 0, path
                assert page.get_by_test_id("stException").count() == 0, path
        browser.close()
    visits = re.findall(r"page=(/\S*) ms=[\d.]+ session=[0-9a-f]{8} outcome=ok", log.read_text())
    assert visits == ["/", "/Run", "/Compare", "/Diagnosis", "/Run", "/Diagnosis", "/Trust", "/Sources", "/Compare"], \
        log.read_text()[-2000:]
    assert "Traceback" not in log.read_text()


def test_serve_opens_the_views_again_once_a_new_run_is_written(tmp_path: Path) -> None:
    """A run written while serve runs (an `evaluate` finishing): once the file is quiet, serve opens its
    views again, so the new run's first visit reads nothing; with the file then held by a writer, that
    visit shows the run and no "busy" message."""
    db = seed(tmp_path / "seed.duckdb")
    log = tmp_path / "serve.log"
    with streamlit_server(db, log, warm_pages=True) as base, sync_api.sync_playwright() as pw:
        _wait_for(log, "dashboard pages warmed in")
        ownership.start_run(db, Run("late-run", "offline", {}, {}), 1)
        ownership.finish_run(db, "late-run", "finished", {})
        _wait_for(log, "dashboard pages warmed again (the runs changed)", 60 + serve.REWARM_QUIET_S)
        assert "the Runs, Run, Diagnosis, Trust and Sources pages of 4 runs" in log.read_text()
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        # read-write: the file is locked against every other process, once the server's parked reader closes
        with store.connect(db):
            page = browser.new_page()
            _run_heading(page, f"{base}/?run=late-run", "late-run")
            assert page.get_by_text(re.compile("busy|locked")).count() == 0
        browser.close()
    assert "Traceback" not in log.read_text()


def test_serve_started_on_a_busy_file_warms_once_the_writer_lets_go(tmp_path: Path) -> None:
    """A file held by a writer at start: serve says the cache is not warmed, serves anyway, and opens
    the start-up views once the file is free."""
    db = seed(tmp_path / "seed.duckdb")
    log = tmp_path / "serve.log"
    writer = duckdb.connect(str(db))  # read-write: the file is locked against every other process
    with streamlit_server(db, log, warm_pages=True):
        _wait_for(log, "dashboard cache not warmed")
        assert "dashboard cache warmed" not in log.read_text()
        writer.close()
        _wait_for(log, "dashboard pages warmed in")
        warmed = re.findall(r"session=warmup outcome=(\S+)", log.read_text())
        # every page, 5 pages of each of the 3 runs, one Compare
        assert len(warmed) == len(ui.PAGES) + 5 * 3 + 1 and set(warmed) <= {"ok", "stop"}, warmed
    assert "Traceback" not in log.read_text()


def test_plain_streamlit_run_still_serves_the_app(tmp_path: Path) -> None:
    db = seed(tmp_path / "seed.duckdb")
    log = tmp_path / "streamlit.log"
    with streamlit_server(db, log, plain=True) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        _run_heading(page, f"{base}/?run=weak-retriever", "weak-retriever")
        browser.close()
    assert "dashboard cache warmed" not in log.read_text()  # nothing of the launcher ran


def test_behind_login_serve_warms_the_pages_and_a_forged_warmup_header_still_meets_the_login(tmp_path: Path) -> None:
    """With login configured, serve's start-up views pass the login gate as a viewer (before, each stopped at
    it and read nothing, so the first visitor behind login met cold pages), while a visit that sends the
    warm-up header itself, without the server's secret, is an ordinary logged-out visit."""
    import asyncio

    from evaluators.dashboard.timing import WARMUP_HEADER

    db = seed(tmp_path / "seed.duckdb")
    log = tmp_path / "serve.log"
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://127.0.0.1:1/oauth2callback"\n'
                       'cookie_secret = "a-test-cookie-secret-that-is-long-enough-0123456789"\n'
                       'client_id = "c"\nclient_secret = "s"\n'
                       'server_metadata_url = "http://127.0.0.1:1/.well-known/openid-configuration"\n')
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMLIT_SECRETS_FILES", str(secrets))
        with streamlit_server(db, log, warm_pages=True) as base:
            _wait_for(log, "dashboard pages warmed in")
            warmed = dict(re.findall(r"page=(/\S*) ms=[\d.]+ session=warmup outcome=(\S+)", log.read_text()))
            assert {warmed[p] for p in ("/", "/Run", "/Diagnosis", "/Compare", "/Sources")} == {"ok"}, warmed

            async def forged() -> list[str]:
                texts = []
                async for msg in serve.view_messages(base, "Run", "run=weak-retriever", {WARMUP_HEADER: "1"}):
                    texts.append(str(msg))
                return texts

            assert any("Log in to see the evaluation runs" in t for t in asyncio.run(forged()))
    assert re.search(r"page=/Run ms=[\d.]+ session=[0-9a-f]{8} outcome=stop", log.read_text())  # not warmup
