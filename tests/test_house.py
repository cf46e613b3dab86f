"""The house's rules, checked on the tree itself: the LLM judge loads no database or dashboard, no module
is over 500 lines unless the architecture page (docs/architecture/index.md) names it with its reason, no function
is over 60 lines, that page's "How the code is laid out" lists exactly the tree, and no page relies on Streamlit's magic.
(ruff, mypy and the import-linter contracts that write the layers down run in `make check`, part of
`make test`.)"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "evaluators"
ARCHITECTURE = (ROOT / "docs" / "architecture" / "index.md").read_text(encoding="utf-8")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


def _code() -> list[Path]:
    """The application's code: the engine, the pages and the app."""
    return sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]


def _section(title: str) -> str:
    """The architecture page's section under `## title`, up to the next section of that level."""
    start = ARCHITECTURE.index(f"\n## {title}\n")
    end = ARCHITECTURE.find("\n## ", start + 1)
    return ARCHITECTURE[start:end if end >= 0 else len(ARCHITECTURE)]


def test_importing_the_llm_judge_loads_no_database_and_no_dashboard() -> None:
    code = ("import json, sys; import evaluators.judges.llm; "
            "print(json.dumps(sorted(m for m in ('duckdb', 'streamlit', 'plotly') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_module_over_500_lines_is_named_on_the_architecture_page_with_its_reason() -> None:
    # "Modules over 500 lines: `evaluators/x.py` (N lines): why; ..." in the layout section
    named = re.findall(r"`(evaluators/[\w/]+\.py)`\s+\(\d+\s+lines\):\s+[^;.]+", _section("How the code is laid out"))
    long = {str(p.relative_to(ROOT)) for p in _code()
            if len(p.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES}
    assert long == set(named), f"over {MAX_MODULE_LINES} lines: {sorted(long)}; named on the architecture page: {sorted(named)}"


def test_no_function_is_over_60_lines() -> None:
    long = []
    for path in _code():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


def _layout() -> set[str]:
    """The packages and modules the architecture page's layout block lists, as paths ("evaluators/core/text.py")."""
    block = _section("How the code is laid out").split("```")[1]
    found: set[str] = set()
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = re.match(r"^( *)([\w.]+/|[\w]+\.(?:py|json))(?:\s|$)", line)
        if not match:
            continue
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = "".join(p for _, p in stack) + name
        found.add(path.rstrip("/"))
        if name.endswith("/"):
            stack.append((depth, name))
    return found


def test_the_architecture_page_lists_exactly_the_tree() -> None:
    tree = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*") if "__pycache__" not in p.parts
            and (p.is_dir() or (p.suffix in (".py", ".json") and p.name not in ("__init__.py", "__main__.py")))}
    tree.add("evaluators")
    listed = {p for p in _layout() if p.startswith("evaluators")}
    assert listed == tree, f"in the tree only: {sorted(tree - listed)}; on the page only: {sorted(listed - tree)}"


def test_no_page_displays_a_value_by_magic_so_it_stays_off() -> None:
    """.streamlit/config.toml turns Streamlit's magic off (it costs each page's compile a pass over its
    syntax tree): no page or app.py may hold a bare expression that magic would have written to the page."""
    from streamlit.runtime.scriptrunner import magic

    assert re.search(r"^magicEnabled = false", (ROOT / ".streamlit" / "config.toml").read_text(), re.MULTILINE)
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        tree = magic.add_magic(path.read_text(encoding="utf-8"), str(path))
        shown = [n.lineno for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "transparent_write"]
        assert not shown, f"{path.name}: lines {shown} would be shown by magic"
