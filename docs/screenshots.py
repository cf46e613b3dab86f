"""The screenshots of the five main pages (docs/guides/triage-session.md; the README shows the first), taken
from the demo in Debian's Chromium.

    .venv/bin/python docs/screenshots.py [--db DEMO.duckdb] [--out docs/screenshots] [--chromium /usr/bin/chromium]

Without --db it builds a fresh demo database in a temporary folder (`python -m data.build_demo`, about
20 s), so the pictures show what the demo shows today. It serves the dashboard as `make run` does on a
free loopback port, opens each page of SHOTS at 1280 x 800 on its deep link, waits until the page has
finished its run (no skeleton, every plotly chart drawn, no exception box) and writes the viewport (scrolled
to a shot's heading where the page's point is below the fold) as `<out>/<name>.png`. Chromium is Debian's (`make browser`); Playwright never downloads one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 120_000  # a busy 2-core machine: plotly's first draw alone can take seconds


class Shot(NamedTuple):
    """One screenshot: its file name, the page's title (its heading), the deep link it opens and the
    heading it is scrolled to, if not the top."""

    name: str
    title: str
    link: str
    scroll_to: str | None = None


SHOTS = (
    Shot("runs", "Runs", "/?run=weak_retriever"),
    Shot("run", "Run", "/Run?run=weak_retriever"),
    Shot("item", "Item", "/Item?run=weak_retriever&item=q02&rule=T2.3"),
    Shot("compare", "Compare", "/Compare?run=weak_retriever&other=better_retriever"),
    Shot("diagnosis", "Diagnosis", "/Diagnosis?run=weak_retriever", scroll_to="Fix this first"),
)

# Ready: the script run is over (no running-man widget, skeleton or stale element), animations have
# ended, and every plotly chart has drawn its SVG.
READY = """() =>
    !document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton], [data-stale=true]')
    && document.getAnimations().every(a => a.playState !== 'running'
                                         || a.effect?.getTiming().iterations === Infinity)
    && [...document.querySelectorAll('[data-testid=stPlotlyChart]')].every(c => c.querySelector('svg.main-svg'))"""


def _take(tab: Any, shot: Shot, out: Path) -> Path:
    """Open one deep link, wait until the page is drawn, and write its viewport."""
    tab.goto(shot.link)
    tab.get_by_role("heading", name=shot.title, exact=True).first.wait_for()
    tab.wait_for_function(READY)
    tab.wait_for_timeout(1000)  # the tables' canvases paint a frame after the DOM settles
    tab.wait_for_function(READY)
    if tab.get_by_test_id("stException").count():
        raise RuntimeError(f"{shot.link} shows an exception box")
    if shot.scroll_to:
        tab.get_by_role("heading", name=shot.scroll_to).first.evaluate("h => h.scrollIntoView({block: 'start'})")
        tab.wait_for_timeout(500)
    path = out / f"{shot.name}.png"
    tab.screenshot(path=str(path))
    return path


def take_all(db: Path, out: Path, chromium: Path, log: Path) -> list[Path]:
    """Serve `db` and write one PNG per shot into `out`."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with streamlit_server(db, log) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        tab = browser.new_context(viewport=VIEWPORT, base_url=base).new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        try:
            return [_take(tab, shot, out) for shot in SHOTS]
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: 0 when every screenshot was written, 2 when Chromium is missing."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, help="a demo database to show (default: build a fresh one)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="folder for the PNGs")
    parser.add_argument("--chromium", type=Path, default=CHROMIUM, help=f"Chromium to drive (default {CHROMIUM})")
    args = parser.parse_args(argv)
    if not (args.chromium.is_file() and os.access(args.chromium, os.X_OK)):
        print(f"screenshots: no Chromium at {args.chromium}; install Debian's with `make browser`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "demo.duckdb"
            subprocess.run([sys.executable, "-m", "data.build_demo", "--db", str(db)], cwd=ROOT, check=True)
        for path in take_all(db, args.out, args.chromium, Path(tmp) / "streamlit.log"):
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
