"""`python -m evaluators agreement --pairs FILE`: pairwise validation as a product feature."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from evaluators.cli import main
from evaluators.runs.pairs import tally

SOURCE = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. "
          "It is 330 metres tall and was designed by Gustave Eiffel's engineering company.")
QUERY = "When was the Eiffel Tower completed?"


def test_tally_counts_ties_and_failures_apart() -> None:
    t = tally([("gr", 1.0, 0.5), ("gr", 0.5, 0.5), ("gr", 0.2, 0.9), ("gr", None, 0.4), ("sd", 1.0, 0.0)])
    assert (t["gr"].agree, t["gr"].ties, t["gr"].disagree, t["gr"].failed) == (1, 1, 1, 1)
    assert t["gr"].rate() == pytest.approx(1 / 3)
    assert t["sd"].rate() == 1.0
    assert tally([("gr", None, None)])["gr"].rate() is None  # nothing scored: no figure, not 0


def test_agreement_evaluates_both_sides_and_tallies(tmp_path: Path) -> None:
    rows = [
        {"id": "repeated", "metric": "sd", "query": QUERY, "sources": [SOURCE],
         "better": {"response": "The Eiffel Tower was completed in 1889. It is 330 metres tall."},
         "worse": {"response": "The Eiffel Tower was completed in 1889. The Eiffel Tower was completed in 1889."}},
        {"id": "same", "metric": "sd", "query": QUERY, "sources": [SOURCE],
         "better": {"response": "It was completed in 1889."}, "worse": {"response": "It was completed in 1889."}},
        {"id": "nothing", "metric": "sd", "query": QUERY, "sources": [SOURCE],
         "better": {"response": "The tower was completed in 1889."}, "worse": {"response": "Yes."}},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "agreement.csv"
    db = tmp_path / "pairs.duckdb"
    assert main(["agreement", "--pairs", str(path), "--db", str(db), "--run", "pairs", "--out", str(out)]) == 0
    with open(out, newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row == {"metric": "sd", "n_pairs": "3", "agree": "1", "ties": "1", "disagree": "0", "failed": "1",
                   "agreement": "0.5"}


def test_bad_pairs_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join([
        json.dumps({"metric": "gr", "query": QUERY, "sources": [SOURCE], "better": {"response": "a"},
                    "worse": {"response": "b"}}),
        json.dumps({"metric": "nope", "better": {}, "worse": {}}),
        json.dumps({"metric": "gr", "query": QUERY, "better": {"response": "a", "sources": [SOURCE]}}),
        "{not json",
    ]) + "\n")
    assert main(["agreement", "--pairs", str(path), "--db", str(tmp_path / "x.duckdb"), "--run", "r"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: field metric: unknown metric 'nope'" in err
    assert f"{path}:3: field worse: missing" in err
    assert f"{path}:4: malformed JSON" in err
    assert f"{path}:1" not in err
    assert not (tmp_path / "x.duckdb").exists()
