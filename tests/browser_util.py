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
    timeouts set (a loaded 2-core machine makes Streamlit slow to settle), recording what its tables draw
    (CANVAS_TEXTS_JS: a row is clicked where its text is, whatever the rows' height)."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        tab = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=base_url).new_page()
        tab.set_default_timeout(timeout_ms)
        tab.add_init_script(CANVAS_TEXTS_JS)
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
                     warm_pages: bool = False, serve_args: Sequence[str] = (), app_dir: Path = ROOT) -> Iterator[str]:
    """Serve the dashboard on the database `db` the way `make run` does (`python -m evaluators serve`:
    libraries imported before the server answers), or with `plain` by `streamlit run app.py`, and
    yield its base URL; stop it afterwards. `serve` opens each page once at start only with
    `warm_pages`: elsewhere those views would compete with the test's own for the CPU. `serve_args` go
    to `serve` as they are (`--inbox DIR`). With `plain`, `app_dir` is the folder whose app.py runs (another
    app's, for a benchmark's baseline).

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
        proc = subprocess.Popen(cmd, cwd=app_dir if plain else ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
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


# st.dataframe draws its cells on a canvas (glide-data-grid), so no DOM element has a cell's drawn width.
# This script, added to a tab before the page loads (`add_init_script`), records every text a canvas
# draws: the text, its ink box (measureText with the canvas's own font, at its alignment) and the clip
# it is drawn under (the intersection of the rectangles clipped to), both in the canvas's pixels. The grid
# clips each column to its width, so a text wider than its cell has its box outside the clip. A wrapped
# cell whose lines are taller than the cell is drawn under one more clip, to the cell itself, that glide
# sets with save() and rect() and no beginPath() between (drawMultiLineText): such a text is `tall`.
CANVAS_TEXTS_JS = """(() => {
  const P = CanvasRenderingContext2D.prototype, calls = {};
  for (const name of ['save', 'restore', 'beginPath', 'rect', 'clip', 'fillText']) calls[name] = P[name];
  const states = new WeakMap();
  const of = (ctx) => states.get(ctx) || states.set(ctx, {stack: [], clip: null, tall: false, path: [], fresh: false}).get(ctx);
  const at = (ctx, x, y) => { const m = ctx.getTransform(); return [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]; };
  window.__canvasTexts = [];
  P.save = function (...a) { const s = of(this); s.stack.push([s.clip, s.tall]); s.fresh = true; return calls.save.apply(this, a); };
  P.restore = function (...a) { const s = of(this); [s.clip, s.tall] = s.stack.pop() || [null, false]; return calls.restore.apply(this, a); };
  P.beginPath = function (...a) { const s = of(this); s.path = []; s.fresh = false; return calls.beginPath.apply(this, a); };
  P.rect = function (x, y, w, h) {
    const s = of(this); s.path.push([...at(this, x, y), ...at(this, x + w, y + h), s.fresh]);
    return calls.rect.apply(this, [x, y, w, h]);
  };
  P.clip = function (...a) {
    const s = of(this), r = s.path[s.path.length - 1], c = s.clip;
    if (r) {
      s.clip = c ? [Math.max(c[0], r[0]), Math.max(c[1], r[1]), Math.min(c[2], r[2]), Math.min(c[3], r[3])] : r.slice(0, 4);
      s.tall = s.tall || r[4];
    }
    return calls.clip.apply(this, a);
  };
  P.fillText = function (text, x, y, ...rest) {
    const s = of(this), m = this.measureText(text);
    const box = [...at(this, x - m.actualBoundingBoxLeft, y - m.actualBoundingBoxAscent),
                 ...at(this, x + m.actualBoundingBoxRight, y + m.actualBoundingBoxDescent)];
    window.__canvasTexts.push({canvas: this.canvas, text: String(text), box, clip: s.clip, tall: s.tall});
    return calls.fillText.apply(this, [text, x, y, ...rest]);
  };
})();"""

# The texts recorded since the page loaded, drawn on a canvas of an st.dataframe now on the page: its
# grid (its index among the page's grids, and its column names), whether in its header row (the header
# canvas) and the text's box and clip in page pixels (x0, y0, x1, y1).
CANVAS_TEXTS_READ = """() => {
  const grids = [...document.querySelectorAll('[data-testid=stDataFrame]')];
  return (window.__canvasTexts || []).filter(t => t.canvas.isConnected && t.clip).map(t => {
    const frame = t.canvas.closest('[data-testid=stDataFrame]');
    if (!frame) return null;
    const r = t.canvas.getBoundingClientRect(), k = t.canvas.width / (t.canvas.clientWidth || t.canvas.width);
    const page = (b) => [r.left + b[0] / k, r.top + b[1] / k, r.left + b[2] / k, r.top + b[3] / k];
    return {grid: grids.indexOf(frame), header: t.canvas.dataset.testid !== 'data-grid-canvas', text: t.text,
            columns: [...frame.querySelectorAll('th[role=columnheader]')].map(th => th.textContent),
            box: page(t.box), clip: page(t.clip), tall: t.tall};
  }).filter(t => t !== null);
}"""


def canvas_texts(page: Any) -> list[dict[str, Any]]:
    """The texts the page's dataframes drew since it loaded, each once (its last draw at that place):
    grid, columns, header, text, box, clip, tall (see CANVAS_TEXTS_JS; none when the tab has not added it)."""
    return last_draws(page.evaluate(CANVAS_TEXTS_READ))


def last_draws(drawn: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Texts drawn (CANVAS_TEXTS_READ, in drawing order), each once: its last draw at that place."""
    last = {(t["grid"], t["text"], tuple(round(v) for v in t["box"])): t for t in drawn}
    return list(last.values())
