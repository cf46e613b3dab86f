"""The package: `pip install` of the working tree into a fresh venv, then its `rag-triage` command from a
folder outside the checkout, with no checkout on the path.

Installing every pinned library again would take minutes, so the fresh venv sees the ones already
installed beside this interpreter through a .pth file; the package itself is built from a copy of the
working tree (the build writes build/ and *.egg-info beside its sources) and installed with --no-deps.
"""
from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

import evaluators
from benchmarks.load import ws_view
from evaluators import cli
from evaluators.dashboard import serve
from tests.browser_util import CHROMIUM, chromium_tab, free_port

ROOT = Path(__file__).resolve().parents[1]
# What a build never needs: the venv, git's files, databases, caches and outputs.
NOT_SOURCES = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".pytest_cache", "*.duckdb", "*.duckdb.wal",
                                     "test-artifacts", "build", "*.egg-info", "out")
ITEMS = [
    {"id": "refund", "query": "How long is the refund window?",
     "sources": ["Refunds are accepted within 30 days of purchase.", "Our offices close on public holidays."],
     "response": "You can get a refund within 30 days of purchase."},
    {"id": "moon", "query": "What is the capital of France?",
     "sources": ["The Moon orbits the Earth every 27 days."],
     "response": "Paris is the capital of France."},
]


@dataclass(frozen=True)
class Installed:
    venv: Path
    cwd: Path  # a folder outside the checkout
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`rag-triage ARGS` from the fresh venv, in the outside folder."""
        return subprocess.run([str(self.venv / "bin" / "rag-triage"), *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("package")
    shutil.copytree(ROOT, tmp / "src", ignore=NOT_SOURCES)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    # addsitedir, not a bare path: the libraries' own .pth files are read too, as in their venv.
    (purelib / "installed_libraries.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages()))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAG_TRIAGE_DB", "VIRTUAL_ENV")}
    build = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                            "--no-build-isolation", str(tmp / "src")],
                           cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    (tmp / "elsewhere").mkdir()
    return Installed(venv, tmp / "elsewhere", env)


def test_the_command_runs_the_installed_package_with_the_checkouts_commands(installed: Installed) -> None:
    version = installed.run("--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"rag-triage {evaluators.__version__}")

    # The engine is the venv's copy, and finds its shipped files there, not in a checkout.
    where = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import evaluators; from evaluators.core import resources; "
         "print(evaluators.__file__); print(resources.checkout()); print(resources.resource('prompts'))"],
        cwd=installed.cwd, env=installed.env, capture_output=True, text=True, check=True)
    module, checkout, prompts = where.stdout.splitlines()
    assert Path(module).is_relative_to(installed.venv) and checkout == "None"
    assert Path(prompts).is_relative_to(installed.venv)
    assert sorted(p.name for p in Path(prompts).iterdir()) == sorted(p.name for p in (ROOT / "prompts").iterdir())

    # Every module of the checkout's engine is in the package (pyproject.toml lists the packages).
    package = Path(module).parent
    ours = {p.relative_to(ROOT / "evaluators") for p in (ROOT / "evaluators").rglob("*")
            if p.suffix in (".py", ".json") and "__pycache__" not in p.parts}
    assert ours <= {p.relative_to(package) for p in package.rglob("*")}

    # Exactly the subcommands of `python -m evaluators`.
    help_text = installed.run("--help").stdout
    listed = re.search(r"\{([\w,-]+)\}", help_text)
    assert listed, help_text
    commands = next(a for a in cli.parser()._actions if a.dest == "command").choices
    assert listed.group(1).split(",") == list(commands)
    bad = installed.run("serve", "--port", "eighty")
    assert bad.returncode == 2 and "(see: rag-triage serve --help)" in bad.stderr, bad.stderr


@pytest.fixture(scope="module")
def evaluated(installed: Installed) -> str:
    """`rag-triage evaluate` of a small JSONL with the offline judge, paths relative to the outside folder."""
    (installed.cwd / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    done = installed.run("evaluate", "items.jsonl", "--db", "runs.duckdb", "--run", "pkg-run", "--judge", "offline",
                         "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    return "runs.duckdb"


def test_evaluate_then_export_from_another_folder(installed: Installed, evaluated: str, tmp_path: Path) -> None:
    assert installed.run("export", "--db", evaluated, "--run", "pkg-run", "--out", "scores.csv").returncode == 0
    with open(installed.cwd / "scores.csv", newline="") as f:
        rows = {r["item_id"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"refund", "moon"}
    assert (rows["refund"]["gr"], rows["moon"]["gr"]) == ("1.0", "0.0")  # grounded, and not
    # The installed package scores exactly as the checkout does.
    db = str(tmp_path / "checkout.duckdb")
    assert cli.main(["evaluate", str(installed.cwd / "items.jsonl"), "--db", db, "--run", "pkg-run",
                     "--judge", "offline", "--quiet"]) == 0
    assert cli.main(["export", "--db", db, "--run", "pkg-run", "--out", str(tmp_path / "scores.csv")]) == 0
    assert (tmp_path / "scores.csv").read_text() == (installed.cwd / "scores.csv").read_text()


@pytest.fixture(scope="module")
def served(installed: Installed, evaluated: str) -> Iterator[tuple[str, Path]]:
    """`rag-triage serve` in the outside folder: its base URL once healthy, and its log."""
    port = free_port()
    log = installed.cwd / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(installed.venv / "bin" / "rag-triage"), "serve", "--db", evaluated,
                                 "--port", str(port), "--no-warm-pages"],
                                cwd=installed.cwd, env=installed.env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.2)
        yield base, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serve_renders_every_page_from_another_folder(served: tuple[str, Path]) -> None:
    base, log = served
    # Each page of the shipped app.py runs with no exception and no "page not found".
    errors = asyncio.run(_open_pages(base))
    assert errors == [], errors
    page = asyncio.run(_page_bytes(base, "", "run=pkg-run"))
    # the run's two items scored on its metric cards (which item a rule names, if any, is the judge's call)
    assert b"Run pkg-run" in page and "n scored 2 of 2 · 0 unsure".encode() in page
    # The shipped .streamlit/config.toml applied (it hides the welcome banner), with no traceback.
    text = log.read_text()
    assert "You can now view" not in text and "Traceback" not in text, text[-2000:]


@pytest.mark.browser
def test_the_served_dashboard_in_chromium(served: tuple[str, Path]) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (make browser)")
    from playwright.sync_api import expect

    with chromium_tab(served[0]) as tab:
        tab.goto("/Item?run=pkg-run&item=refund")  # a page of the shipped pages/ folder, by its link
        expect(tab.get_by_role("heading", name="Item", exact=True)).to_be_visible()
        expect(tab.get_by_text("item refund").first).to_be_visible()
        tab.goto("/?run=pkg-run")
        expect(tab.get_by_role("heading", name="Run pkg-run", exact=True)).to_be_visible()
        assert tab.get_by_test_id("stException").count() == 0


async def _open_pages(base: str) -> list[str]:
    """The errors of every page's default view."""
    from evaluators.dashboard import ui

    return [e for p in ui.PAGES.values() for e in await ws_view(base, p.url_path)]


async def _page_bytes(base: str, url_path: str, query: str) -> bytes:
    """All the messages of one view, serialized: what the page showed."""
    return b"".join([m.SerializeToString() async for m in serve.view_messages(base, url_path, query)])
