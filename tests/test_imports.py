"""The engine's import graph: no cycle anywhere in evaluators/, and one module per third-party library.

Every Import and ImportFrom node of every module counts, including those inside functions: a lazy
import still ties the two modules together.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "evaluators"

# Third-party library -> the only engine modules allowed to import it.
OWNERS = {
    "sentence_transformers": {"evaluators.judges.embeddings"},
    "torch": {"evaluators.judges.embeddings"},
    "transformers": {"evaluators.judges.embeddings"},
    "onnxruntime": {"evaluators.judges.embeddings"},
    "tokenizers": {"evaluators.judges.embeddings"},
    "litellm": {"evaluators.judges.llm"},
    "ray": {"evaluators.runs.cluster"},
    "duckdb": {"evaluators.storage.store", "evaluators.storage.queries.runs"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, tree: ast.AST, is_package: bool) -> set[str]:
    """Every module name `tree` imports (absolute, relative imports resolved), from any depth."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # `from evaluators import store` imports the module evaluators.store.
            found.update(f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in MODULES)
    return found


def engine_graph() -> dict[str, set[str]]:
    """Engine module -> the engine modules it imports, with the packages that importing them runs."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for module in imported(name, ast.parse(path.read_text(encoding="utf-8")), path.name == "__init__.py"):
            parts = module.split(".")
            targets.add(module)
            # Importing a.b.c first runs the packages a and a.b; the module's own packages already ran.
            packages = (".".join(parts[:k]) for k in range(1, len(parts)))
            targets.update(p for p in packages if not f"{name}.".startswith(f"{p}."))
        graph[name] = {t for t in targets if t in MODULES and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_walk_sees_lazy_imports_and_the_grammar_package() -> None:
    graph = engine_graph()
    assert "evaluators.cli.grammar" in graph and "evaluators.judges.registry" in graph
    assert "evaluators.judges.local_llm" in graph["evaluators.judges.factory"]  # imported inside a function
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_in_the_engine() -> None:
    cycle = find_cycle(engine_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_nothing_below_the_registry_imports_it_or_a_judge() -> None:
    graph = engine_graph()
    above = {"evaluators.judges.registry", "evaluators.judges.offline", "evaluators.judges.llm",
             "evaluators.runs.runner"}
    below = ["evaluators.metrics.thelma", "evaluators.judges.evidence", "evaluators.core.text",
             "evaluators.judges.embeddings", "evaluators.judges.prompts", "evaluators.core.records",
             "evaluators.metrics.suites.ragas", "evaluators.metrics.suites.nvidia", "evaluators.metrics.suites.deepeval", "evaluators.grammar.robustness", "evaluators.grammar.generate",
             "evaluators.grammar.pipeline"]
    for name in below:
        assert not graph[name] & above, f"{name} imports {sorted(graph[name] & above)}"


def test_one_engine_module_per_third_party_library() -> None:
    for name, path in MODULES.items():
        roots = {m.split(".")[0] for m in imported(name, ast.parse(path.read_text(encoding="utf-8")),
                                                    path.name == "__init__.py")}
        for library, owners in OWNERS.items():
            if library in roots:
                assert name in owners, f"{name} imports {library}; only {sorted(owners)} may"
