"""A real login end to end: `streamlit run app.py` with login configured in a temporary secrets.toml,
a local OpenID provider (oidc-provider-mock) on 127.0.0.1, and Debian's Chromium driving both.

The round trip goes through Streamlit's st.login (Authlib), the provider's authorize form and the
/oauth2callback back into the app. A viewer then finds no way to save a triage note, a triager saves
one under their login email, and no request leaves 127.0.0.1 (anything else is aborted and recorded).
"""
from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from evaluators.storage import queries
from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, ROOT, outside, streamlit_server
from tests.seed import seed

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `make browser` installs "
                                                                "Debian's chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
oidc = pytest.importorskip("oidc_provider_mock", reason="oidc-provider-mock is not installed")
expect = sync_api.expect

ARTIFACTS = ROOT / "test-artifacts" / "browser"
TIMEOUT_MS = 45_000
VIEWER, TRIAGER = "guest@example.com", "ann@qa.example.com"


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """The OpenID provider on 127.0.0.1, port 0; its pages are served without their CDN stylesheet."""
    import jinja2
    import werkzeug.serving

    # The provider verified both addresses (email_verified: true); an unverified one grants no role.
    flask_app = oidc.app(user_claims=[oidc.User(sub=who, claims={"email": who, "email_verified": True})
                                      for who in (VIEWER, TRIAGER)])
    original = flask_app.jinja_loader
    # The provider's pages link a stylesheet on a CDN: drop the link so the login stays on loopback.
    base = re.sub(r"<link[^>]*>", "", original.get_source(flask_app.jinja_env, "_base.html")[0])
    flask_app.jinja_loader = jinja2.ChoiceLoader([jinja2.DictLoader({"_base.html": base}), original])
    server = werkzeug.serving.make_server("127.0.0.1", 0, flask_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


@pytest.fixture(scope="module")
def app_url(provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The dashboard with login and roles configured in a temp .streamlit/secrets.toml; (URL, database)."""
    tmp = tmp_path_factory.mktemp("login")
    db = seed(tmp / "seed.duckdb")
    secrets = tmp / ".streamlit" / "secrets.toml"
    secrets.parent.mkdir()
    secrets.write_text(f'''
[auth]
redirect_uri = "http://127.0.0.1:{{port}}/oauth2callback"
cookie_secret = "a-test-cookie-secret-that-is-long-enough-0123456789"
client_id = "rag-triage-test"
client_secret = "test-secret"
server_metadata_url = "{provider}/.well-known/openid-configuration"

[roles]
triagers = ["@qa.example.com"]
''')
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMLIT_SECRETS_FILES", str(secrets))  # Streamlit's secrets.files option
        with streamlit_server(db, tmp / "streamlit.log") as url:
            yield url, db


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        expect.set_options(timeout=TIMEOUT_MS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def traffic() -> list[str]:
    return []


@pytest.fixture
def tab(browser: Any, traffic: list[str], request: pytest.FixtureRequest) -> Iterator[Any]:
    """A tab in a fresh context (no login cookie yet) that records every request, redirects included,
    and aborts any request for another host, so nothing leaves the machine even if something tried."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.on("request", lambda request: traffic.append(request.url))
    # A route sees each request's first hop only (not redirects), which is enough to stop it.
    ctx.route("**/*", lambda route: route.abort() if outside([route.request.url]) else route.continue_())
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("websocket", lambda ws: traffic.append(ws.url))
    failed_before = request.session.testsfailed
    yield page
    if request.session.testsfailed > failed_before:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"FAILED_{request.node.name}.png"), full_page=True)
    ctx.close()


def log_in(page: Any, url: str, email: str) -> None:
    """The whole round trip: the app's Log in button, the provider's form, the callback into the app."""
    page.goto(url)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r".*/oauth2/authorize.*"))
    page.locator("input[name=sub]").fill(email)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(re.compile(re.escape(url) + r"/?(\?.*)?$"))
    expect(page.get_by_test_id("stSidebar").get_by_text(email)).to_be_visible()


def open_triage_tab(page: Any, url: str) -> None:
    page.goto(f"{url}/Item?run=weak-retriever&item=q01")
    expect(page.get_by_role("heading", name="Item", exact=True).first).to_be_visible()
    page.get_by_role("tab", name="Triage").click()


def test_a_viewer_logs_in_and_cannot_save_a_note(tab: Any, app_url: tuple[str, Path]) -> None:
    url, db = app_url
    tab.goto(url)
    expect(tab.get_by_role("button", name="Log in")).to_be_visible()
    expect(tab.get_by_test_id("stDataFrame")).to_have_count(0)  # nothing is shown before login
    log_in(tab, url, VIEWER)
    expect(tab.get_by_test_id("stSidebar").get_by_text("viewer")).to_be_visible()
    open_triage_tab(tab, url)
    expect(tab.get_by_text("saving triage notes needs the triager role")).to_be_visible()
    expect(tab.get_by_role("button", name="Save triage note")).to_have_count(0)
    expect(tab.get_by_label("Note")).to_have_count(0)
    assert queries.items.triage_notes(db).empty


def test_a_triager_logs_in_and_saves_a_note_as_their_email(tab: Any, app_url: tuple[str, Path]) -> None:
    url, db = app_url
    log_in(tab, url, TRIAGER)
    open_triage_tab(tab, url)
    tab.get_by_label("Note").fill("checked after a real login")
    tab.get_by_role("button", name="Save triage note").click()
    expect(tab.get_by_text("Triage note saved.")).to_be_visible()
    saved = queries.items.triage_notes(db)
    assert list(zip(saved["note"], saved["author"])) == [("checked after a real login", TRIAGER)]


def test_a_deep_link_opened_logged_out_lands_on_the_same_view_after_login(tab: Any, app_url: tuple[str, Path]) -> None:
    url, _ = app_url
    wanted = {"run": "llm-judge", "item": "q04", "rule": "T2.3", "tab": "Verdicts", "th_gr": "0.8"}
    tab.goto(f"{url}/Item?{urlencode(wanted)}")
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url(re.compile(r".*/oauth2/authorize.*"))
    tab.locator("input[name=sub]").fill(VIEWER)
    tab.get_by_role("button", name="Authorize").click()
    # the callback lands on the app's root; the app sends the tab on to the page the link named
    tab.wait_for_url(re.compile(re.escape(url) + r"/Item\?.*"))
    expect(tab.get_by_test_id("stSidebar").get_by_text(VIEWER)).to_be_visible()
    expect(tab.get_by_text("Evidence for T2.3").first).to_be_visible()
    landed = urlsplit(tab.url)
    assert landed.path == "/Item"
    assert {k: v for k, v in parse_qsl(landed.query) if k in wanted} == wanted
    # once used, the remembered link is gone: the root stays the root
    tab.goto(url)
    expect(tab.get_by_role("heading", name="Runs", exact=True).first).to_be_visible()
    assert urlsplit(tab.url).path == "/"


def test_no_request_leaves_loopback(traffic: list[str]) -> None:
    """Runs last in this module: every request of the logins above, app and provider alike."""
    assert any("/oauth2/authorize" in u for u in traffic) and any("/oauth2callback" in u for u in traffic)
    assert not outside(traffic), outside(traffic)
