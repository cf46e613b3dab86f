"""The docs: the README is short and links into the site, the site builds with `mkdocs build --strict` offline
(a broken link, a missing anchor or a page left out of the navigation fails it), and every command a page shows
is either checked against the code here or marked as an example.

The convention (docs/index.md, "Commands on these pages"): a ```bash block's commands are checked: a `make`
target must exist, a `rag-triage` / `python -m evaluators` command and each of its options must be known to the
CLI's parser, and a benchmark or script must exist with each option it is shown with. A block titled
"example" (```bash title="example") needs the reader's own files, servers or accounts and is not checked.
Inline `python -m evaluators ...` and `rag-triage ...` in the text are checked like a block's."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md")) + [README]
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`((?:\.venv/bin/)?(?:python -m evaluators|rag-triage) [^`]+)`")
CLI_NAMES = ("rag-triage", ".venv/bin/rag-triage")
PYTHONS = ("python", "python3", ".venv/bin/python")


def _blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, attributes, body) of each fenced block."""
    return [(m.group(1), m.group(2), m.group(3)) for m in FENCE.finditer(text)]


def _commands(body: str) -> list[list[str]]:
    """The commands of a shell block, each as its words: continuation lines joined, comments dropped, split at
    `&&`, `;`, `|` and a trailing `&`, leading `VAR=value`, `nice -n N` and `time` dropped."""
    commands: list[list[str]] = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)  # a synopsis's [--option]
        current: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", ";", "|", "&", "||"):
                while current and re.match(r"^[A-Z_][A-Z0-9_]*=", current[0]):
                    current = current[1:]
                if current[:1] == ["nice"]:
                    current = current[3:] if current[1:2] == ["-n"] else current[1:]
                if current[:1] == ["time"]:
                    current = current[1:]
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(word)
    return commands


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from evaluators import cli

    action = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SUBPARSERS = _subparsers()
MAKE_TARGETS = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))


def _options(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if w.startswith("--")]


def _check_cli(words: list[str]) -> str | None:
    """None when `rag-triage WORDS` names a command and only options it has; else what is wrong."""
    if not words or words[0] in ("--help", "--version"):
        return None
    sub = SUBPARSERS.get(words[0])
    if sub is None:
        return f"no command {words[0]!r}"
    unknown = [o for o in _options(words[1:]) if o not in sub._option_string_actions]
    return f"{words[0]}: no option {', '.join(unknown)}" if unknown else None


def _check_script(path: Path, words: list[str]) -> str | None:
    """None when the script exists and names every option it is shown with."""
    if not path.is_file():
        return f"no file {path.relative_to(ROOT)}"
    source = path.read_text(encoding="utf-8")
    unknown = [o for o in _options(words) if f'"{o}"' not in source and o != "--help"]
    return f"{path.relative_to(ROOT)}: no option {', '.join(unknown)}" if unknown else None


def check_command(words: list[str]) -> str | None:
    """None when a shown command is one the code knows, with options it has; else what is wrong."""
    head, rest = words[0], words[1:]
    if head == "make":
        missing = [t for t in rest if not t.startswith("-") and "=" not in t and t not in MAKE_TARGETS]
        return f"no make target {', '.join(missing)}" if missing else None
    if head in CLI_NAMES:
        return _check_cli(rest)
    if head in PYTHONS and rest[:2] == ["-m", "evaluators"]:
        return _check_cli(rest[2:])
    if head in PYTHONS and rest[:1] == ["-m"] and rest[1].split(".")[0] in ("benchmarks", "data"):
        return _check_script(ROOT / (rest[1].replace(".", "/") + ".py"), rest[2:])
    if head in PYTHONS and rest[:3] == ["-m", "streamlit", "run"]:
        return None if (ROOT / rest[3]).is_file() else f"no file {rest[3]}"
    if head in PYTHONS and rest and rest[0].endswith(".py"):
        return _check_script(ROOT / rest[0], rest[1:])
    return "not a command this test checks: run it in a test, or mark its block as an example"


def _shown() -> list[tuple[str, list[str]]]:
    """Every checked command the pages show: (where, words)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = str(page.relative_to(ROOT))
        for lang, attrs, body in _blocks(text):
            if lang in ("bash", "sh", "shell", "console") and 'title="example"' not in attrs:
                found += [(where, words) for words in _commands(body)]
        prose = FENCE.sub("", text)
        found += [(where, shlex.split(m.replace("[", " ").replace("]", " "))) for m in INLINE.findall(prose)]
    return found


def test_every_command_shown_is_one_the_code_knows_or_an_example() -> None:
    shown = _shown()
    assert len(shown) > 30  # the pages show commands: the extraction found them
    wrong = [f"{where}: {' '.join(words)}: {problem}" for where, words in shown if (problem := check_command(words))]
    assert not wrong, "\n".join(wrong)


def test_the_checker_refuses_what_the_code_does_not_know() -> None:
    assert check_command(["make", "run"]) is None and check_command(["make", "nonsense"])
    assert check_command([".venv/bin/rag-triage", "evaluate", "x.jsonl", "--db", "d", "--run", "r"]) is None
    assert "no option --jugde" in check_command(["rag-triage", "evaluate", "x.jsonl", "--jugde", "offline"])
    assert "no command" in check_command(["python", "-m", "evaluators", "evalute"])
    assert "no option --rounds-of" in check_command(["python", "-m", "benchmarks.browser_scale", "--rounds-of", "3"])
    assert "mark its block as an example" in check_command(["vllm", "serve", "model"])
    assert _commands("A=1 nice -n 10 make test && make docs  # both\nrsync a b \\\n  c &") == [
        ["make", "test"], ["make", "docs"], ["rsync", "a", "b", "c"]]


def test_the_site_builds_strict_and_fetches_nothing(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, a page missing from the navigation or a failed
    generated page fails it. The built pages load no font, script or style from another host."""
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 30
    external = [f"{p.relative_to(site)}: {m}" for p in pages
                for m in re.findall(r'<(?:link|script|img)[^>]+(?:href|src)="(https?://[^"]+)"', p.read_text())]
    assert not external, external[:5]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert all(f"usage: rag-triage {name}" in cli for name in SUBPARSERS)  # generated from the parser
    from evaluators.storage.schema import MIGRATIONS
    schema = (site / "reference" / "schema" / "index.html").read_text()
    assert f"after all {len(MIGRATIONS)} migrations" in schema and "run_wide" in schema


def test_every_page_is_in_the_navigation_once() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = re.findall(r"([\w/-]+\.md)\s*$", nav, re.MULTILINE)
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages


def test_the_readme_is_short_and_its_first_screen_says_where_the_cli_is() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    first_screen = "\n".join(lines[:30])
    assert "make run" in first_screen and "make test" in first_screen and ".venv/bin/rag-triage" in first_screen
    assert re.search(r"!\[[^\]]*\]\(docs/screenshots/\w+\.png\)", "\n".join(lines))  # a screenshot
    links = re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines))
    assert len(links) >= 20 and all((ROOT / link).is_file() for link in links), links


def test_after_setup_the_cli_is_in_the_venv() -> None:
    """`make setup` (so `make run` and `make test`) installs the checkout into .venv: .venv/bin/rag-triage runs."""
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "-e ." in recipe
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "rag-triage"), "--help"], capture_output=True, text=True,
                          timeout=120, cwd="/")
    assert done.returncode == 0 and "usage: rag-triage" in done.stdout


def test_every_setting_the_code_reads_is_documented() -> None:
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "evaluators").rglob("*.py"))
    read = set(re.findall(r"\b(RAG_TRIAGE_[A-Z_]+)\b", code)) - {"RAG_TRIAGE_"}
    documented = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert read and not {v for v in read if f"`{v}" not in documented}


def test_figures_carry_a_commit_of_this_repository() -> None:
    """Figures moved from the README carry the commit their text was written at ("As of commit abc1234")."""
    tags = {c for p in PAGES for c in re.findall(r"As of commit ([0-9a-f]{7})", p.read_text(encoding="utf-8"))}
    assert len(tags) > 20
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() == "true":
        pytest.skip("no full git history here to look the commits up in")
    found = subprocess.run(["git", "cat-file", "--batch-check"], cwd=ROOT, input="\n".join(sorted(tags)) + "\n",
                           capture_output=True, text=True, check=True).stdout
    assert "missing" not in found, found
