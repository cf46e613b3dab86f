"""A hostile run in a real browser: every user-supplied string carries markdown images and links, HTML
and a 60,000-character word pointing at a loopback recorder (tests/test_url_fuzz.py builds it).
Every page and tab is opened in Debian's Chromium: the recorder receives no request, no exception
box shows, the page stays within the viewport's width and no live link points at the recorder.
"""
from __future__ import annotations

import http.server
import threading
from typing import Any, Iterator
from urllib.parse import urlencode

import pytest

from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, streamlit_server
from tests.test_url_fuzz import hostile_db

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")

VIEWPORT = {"width": 1280, "height": 900}
TIMEOUT_MS = 60_000


class Recorder(http.server.ThreadingHTTPServer):
    """A loopback HTTP server that records every request path it receives."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                recorder.paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, recorder: Recorder) -> Iterator[tuple[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("hostile")
    names = hostile_db(tmp / "hostile.duckdb", recorder.url)
    with streamlit_server(tmp / "hostile.duckdb", tmp / "streamlit.log") as base:
        yield base, names


@pytest.fixture(scope="module")
def page(served: tuple[str, dict[str, str]]) -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT, base_url=served[0])
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        yield tab
        browser.close()


def settle(page: Any) -> None:
    """Wait for the script run to end and the page's elements to be drawn."""
    page.wait_for_function("""() => {
        const app = document.querySelector('[data-testid=stApp]');
        return app && app.getAttribute('data-test-script-state') === 'notRunning'
            && !document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton], [data-stale=true]');
    }""")
    page.wait_for_timeout(300)  # images and fonts a rendered payload would ask for


def open_tab(page: Any, name: str) -> None:
    """Click a tab and wait for its content: only the open tab is drawn, by the run the click starts."""
    page.get_by_role("tab", name=name).click()
    page.wait_for_function("""(name) => {
        const tab = [...document.querySelectorAll('[role=tab]')].find(t => t.textContent.trim() === name);
        const panel = tab && document.getElementById(tab.getAttribute('aria-controls'));
        return tab.getAttribute('aria-selected') === 'true' && panel && panel.querySelector('[data-testid]');
    }""", arg=name)
    settle(page)


def check(page: Any, recorder: Recorder, where: str) -> None:
    settle(page)
    assert page.get_by_test_id("stException").count() == 0, where
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= VIEWPORT["width"], (where, width)
    live = page.evaluate("""(host) => [...document.querySelectorAll('a[href], img[src], [srcset]')]
        .map(e => e.href || e.src || e.srcset).filter(u => u && u.includes(host))""", recorder.url)
    assert live == [], (where, live)
    assert recorder.paths == [], (where, recorder.paths)


PAGES = ["/", "/Run", "/Item", "/Compare", "/Diagnosis", "/Triage", "/Evaluate", "/Robustness"]


def test_every_page_and_tab_of_the_hostile_run(page: Any, served: tuple[str, dict[str, str]],
                                               recorder: Recorder) -> None:
    _, names = served
    for path in PAGES:
        for run in (names["run"], names["empty_run"]):
            query = {"run": run, "item": names["item"], "other": "weak-retriever", "mk": names["meta_key"],
                     "pref": "1"}
            page.goto(f"{path}?{urlencode(query)}")
            check(page, recorder, f"{path} {run}")
            if path == "/Item" and run == names["run"]:
                for tab in ("Query", "Sources", "Response", "Verdicts", "Triage"):
                    open_tab(page, tab)
                    for summary in page.locator("[data-testid=stExpander] summary:visible").all()[:4]:
                        summary.click()  # the raw exchanges: prompts, replies, errors
                    check(page, recorder, f"{path} tab {tab}")
    # the item given by a pasted link: shown, as text
    page.goto(f"/Item?{urlencode({'run': names['run'], 'item': names['item']})}")
    check(page, recorder, "pasted item link")
    assert names["item"] in page.get_by_test_id("stMain").inner_text().replace("\u2060", "")  # md()'s word joiners
