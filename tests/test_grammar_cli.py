"""The GRAMMAR commands: grammar-generate writes a test set and refuses bad input in one line each."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators import grammar
from evaluators.cli import main
from evaluators.grammar import generate


def _cli(*argv: str) -> int:
    """The command as its users run it: options checked by the CLI's parser, errors on one line."""
    return main(list(argv))


def test_cli_generate_writes_a_test_set_and_refuses_bad_input(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "testset.jsonl"
    assert _cli("grammar-generate", "--out", str(out), "--max-groups", "1", "--per-group", "2") == 0
    cases = generate.read_testset(out)
    assert len(cases) == 12 * 2
    assert "12 SQL templates (M) -> 12 semantic groups -> 24 text queries" in capsys.readouterr().out
    row = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert set(row) == {"id", "query", "reference", "metadata"} and grammar.META_GROUP in row["metadata"]
    assert _cli("grammar-generate", "--source", str(tmp_path / "none.sql"), "--out", str(out)) == 2
    assert _cli("grammar-generate", "--source", str(grammar.COMPANY_SQL), "--templates", str(grammar.COMPANY_SQL),
                "--out", str(out)) == 2
    assert _cli("grammar-generate", "--out", str(out), "--from-schema") == 2  # no --judge
    assert _cli("grammar-eval", "--db", str(tmp_path / "none.duckdb"), "--run", "x") == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4 and all(e.startswith("error: ") for e in errors)
