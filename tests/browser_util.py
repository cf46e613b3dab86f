"""Plumbing for the real-browser tests: the dashboard's server on a free loopback port, Debian's
Chromium driven by Playwright, request recording, and small waits for Streamlit's DOM.

Playwright never downloads a browser here: it launches /usr/bin/chromium (apt) with the flags from
STACK.md. st.dataframe draws on a canvas, but its grid also renders each visible cell as an element
with data-testid "glide-cell-<col>-<row>" (for screen readers), which is what `grid_cells` reads.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


@contextmanager
def chromium_tab(base_url: str, timeout_ms: int = 45_000) -> Iterator[Any]:
    """A new tab of Debian's Chromium at 1400x1000 on base_url, with Playwright's action and `expect`
    timeouts set (a loaded 2-core machine makes Streamlit slow to settle)."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        tab = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=base_url).new_page()
        tab.set_default_timeout(timeout_ms)
        expect.set_options(timeout=timeout_ms)
        yield tab
        browser.close()


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that was free a moment ago (never a fixed port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(db: Path, log: Path, timeout_s: float = 60.0, plain: bool = False,
                     warm_pages: bool = False, serve_args: Sequence[str] = ()) -> Iterator[str]:
    """Serve the dashboard on the database `db` the way `make run` does (`python -m evaluators serve`:
    libraries imported before the server answers), or with `plain` by `streamlit run app.py`, and
    yield its base URL; stop it afterwards. `serve` opens each page once at start only with
    `warm_pages`: elsewhere those views would compete with the test's own for the CPU. `serve_args` go
    to `serve` as they are (`--inbox DIR`).

    Everything else comes from the app's own .streamlit/config.toml, which the tests thereby check:
    telemetry off, loopback only, headless, and the file watcher off (the app does not change during a
    test, and watching the repository, .venv included, overflows inotify and costs seconds of CPU).
    """
    port = free_port()
    env = {**os.environ, "RAG_TRIAGE_DB": str(db)}
    env.pop("RAG_TRIAGE_READ_ONLY", None)
    cmd = ([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)] if plain
           else [sys.executable, "-m", "evaluators", "serve", "--port", str(port)]
           + ([] if warm_pages else ["--no-warm-pages"]) + list(serve_args))
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit not healthy after {timeout_s:.0f} s: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def host_of(url: str) -> str | None:
    """The host a request goes to, or None for URLs that never leave the browser (data:, blob:, about:)."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome-error"):
        return None
    return parts.hostname or ""


def outside(urls: list[str]) -> list[str]:
    """The URLs whose host is not loopback."""
    return [u for u in urls if (h := host_of(u)) is not None and h not in LOCAL_HOSTS]
