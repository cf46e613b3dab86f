"""Nothing cut off at scale: the walk test's check of every table at 1280 x 800, on a large database.

    .venv/bin/python -m benchmarks.cut_at_scale [--db /tmp/scale100k.duckdb] [--items 100000]

The Chromium test `tests/test_walk_browser.py` checks the demo's and the seeded runs' tables: no text
wider than its column, no cell taller than its row, no grid wider than its frame, no "None". Ids, counts
and texts grow with a run (six-digit counts, ids such as i050000), so this runs the same check on the
runs `base` and `candidate` that `benchmarks.dashboard_scale` builds (built first when --db is missing),
on the walk test's views with their item ids swapped for the scale run's. It prints each cut cell, or
"nothing cut", and exits 1 when something is cut.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests import test_walk_browser as walk  # noqa: E402
from tests.browser_util import CANVAS_TEXTS_JS, CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

# The scale runs have no triage notes, and their items are named i000000 on.
ITEMS = {"q02": "i050000", "q04": "i050001"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/scale100k.duckdb"))
    ap.add_argument("--items", type=int, default=100_000, help="items per run, when the database is built")
    args = ap.parse_args()
    if not args.db.exists():
        build = ["-m", "benchmarks.dashboard_scale", "--items", str(args.items), "--db", str(args.db), "--build-only"]
        subprocess.run([sys.executable, *build], check=True, cwd=ROOT)
    views = [v for v in walk.CELL_VIEWS if not v.startswith("/Triage")]
    for old, new in ITEMS.items():
        views = [v.replace(f"item={old}", f"item={new}") for v in views]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        with streamlit_server(args.db, args.db.with_suffix(".cut.log"), timeout_s=300) as base:
            page = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base).new_page()
            page.add_init_script(CANVAS_TEXTS_JS)
            page.set_default_timeout(120_000)
            found = walk.cut_in_views(page, base, "base", "candidate", views=views)
    print(f"{args.db}: {len(views)} views of runs base and candidate at 1280 x 800")
    print("\n".join(found) or "nothing cut")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
