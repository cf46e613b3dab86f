"""docs/screenshots.py, without a browser: its shots are the five main pages on their deep links, the triage
guide shows exactly the PNGs it writes (committed, 1280 x 800, small) and the README the first, and without
Chromium it stops with one line before building or writing anything."""
from __future__ import annotations

import importlib.util
import re
import struct
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from evaluators.dashboard import ui

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "screenshots.py"


def _script():
    spec = importlib.util.spec_from_file_location("docs_screenshots", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shots_are_the_five_main_pages_on_their_deep_links() -> None:
    shots = _script().SHOTS
    by_path = {page.url_path: page for page in ui.PAGES.values()}
    pages = [by_path[urlsplit(s.link).path.lstrip("/")] for s in shots]  # a link to no page: KeyError
    assert [p.title for p in pages] == ["Runs", "Run", "Item", "Compare", "Diagnosis"]
    assert [s.title for s in shots] == [p.title for p in pages]  # the heading each shot waits for
    assert all("run=weak_retriever" in s.link for s in shots)  # a demo run, not the newest by chance


def test_the_triage_guide_shows_exactly_the_committed_screenshots_and_the_readme_one() -> None:
    guide = (ROOT / "docs" / "guides" / "triage-session.md").read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]*\]\(\.\./(screenshots/[\w-]+\.png)\)", guide)
    assert sorted(shown) == sorted(f"screenshots/{s.name}.png" for s in _script().SHOTS)  # each once, in the walk's order
    assert "docs/screenshots.py" in guide  # the command that makes them again
    readme = re.findall(r"!\[[^\]]*\]\((docs/screenshots/[\w-]+\.png)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme == ["docs/screenshots/runs.png"]
    total = 0
    for path in shown:
        data = (ROOT / "docs" / path).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == (1280, 800), path
        total += len(data)
    assert total < 2_000_000


def test_without_chromium_it_stops_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "shots"
    done = subprocess.run([sys.executable, str(SCRIPT), "--chromium", str(tmp_path / "no-chromium"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"screenshots: no Chromium at {tmp_path / 'no-chromium'}; install Debian's with `make browser`"
    assert not out.exists() and not done.stdout
