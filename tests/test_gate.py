"""The CI gate (`python -m evaluators gate`): each exit code on runs built for it, the interval rule with
--max-drop, and the pull-request markdown.

Hand-built runs (tests/test_flips.write_run) pin the deltas exactly; one pair of runs goes through
the real engine with the offline judge, the way a CI job would build them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evaluators import cli
from evaluators.runs import gate
from tests.test_flips import write_run

ROOT = Path(__file__).resolve().parents[1]
SRC = ["Ferries leave every hour from Pier 2.", "Tickets cost 6 euros."]


def _items(n: int, gr: list[str], prefix: str = "i", response: str = "Ferries leave hourly.") -> dict[str, Any]:
    """n items; item k's claims have the GR codes gr[k] (one character per claim), RP all 1."""
    return {f"{prefix}{k:02d}": dict(query=f"Question {k}?", sources=SRC, response=response,
                                     claims=[(f"Claim {j} of item {k}.", "1", code) for j, code in enumerate(gr[k])],
                                     subq=[(f"Question {k}?", "101", "1")])
            for k in range(n)}


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base: 12 items, every claim supported. drop4: 4 of the 12 items lose their one claim's support.
    tenth: 10 claims per item, each item loses exactly one (delta -0.1 on every item). up: tenth back to
    base (improved). other: items with other ids."""
    db = tmp_path_factory.mktemp("gate") / "gate.duckdb"
    write_run(db, "base", _items(12, ["1"] * 12))
    write_run(db, "drop4", _items(12, ["0"] * 4 + ["1"] * 8))
    write_run(db, "ten", _items(12, ["1" * 10] * 12))
    write_run(db, "tenth", _items(12, ["1" * 9 + "0"] * 12))
    write_run(db, "other", _items(3, ["1"] * 3, prefix="x"))
    return db


def _gate(db: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["gate", "--db", str(db), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _row(out: str, metric: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.startswith(metric + " "))


def test_no_regression_exits_0(runs_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _gate(runs_db, capsys, "--baseline", "ten", "--candidate", "ten", "--metrics", "gr")
    assert code == 2 and "is the baseline itself" in err  # one run against itself is bad input
    code, out, err = _gate(runs_db, capsys, "--baseline", "tenth", "--candidate", "ten")
    assert code == 0, err
    assert _row(out, "gr")[-1] == "improved" and _row(out, "rp")[-1] == "ok"
    assert "no metric regressed" in out


def test_a_regression_exits_1_and_names_the_metric(runs_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _gate(runs_db, capsys, "--baseline", "base", "--candidate", "drop4")
    assert code == 1
    gr = _row(out, "gr")
    assert gr[1] == "12" and gr[4] == "-0.333" and gr[-1] == "regressed"
    assert float(gr[6].rstrip("]")) < 0  # the interval's upper end
    assert _row(out, "rp")[-1] == "ok" and "regressed: gr" in out
    # an allowed drop larger than the whole interval's reach lets it pass
    code, out, _ = _gate(runs_db, capsys, "--baseline", "base", "--candidate", "drop4", "--max-drop", "gr=0.9")
    assert code == 0 and _row(out, "gr")[-1] == "ok"
    # the gate reads only the metrics asked for
    code, out, _ = _gate(runs_db, capsys, "--baseline", "base", "--candidate", "drop4", "--metrics", "rp,sqc")
    assert code == 0 and not any(line.startswith("gr ") for line in out.splitlines())


def test_the_interval_rule_with_max_drop(runs_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # every item loses 0.1: the interval is [-0.1, -0.1]; it regresses past a drop of 0.09, not of 0.11
    code, out, _ = _gate(runs_db, capsys, "--baseline", "ten", "--candidate", "tenth", "--max-drop", "gr=0.11")
    assert code == 0 and _row(out, "gr")[-2:] == ["0.110", "ok"]
    code, out, _ = _gate(runs_db, capsys, "--baseline", "ten", "--candidate", "tenth", "--max-drop", "gr=0.09,rp=0.5")
    assert code == 1 and _row(out, "gr")[-2:] == ["0.090", "regressed"] and _row(out, "rp")[-2:] == ["0.500", "ok"]
    # the same rule as a function: upper end below -max_drop
    result = gate.run_gate(str(runs_db), "ten", "tenth", ["gr"], {"gr": 0.0})
    (gr,) = result.metrics
    assert gr.high == pytest.approx(-0.1) and gr.low == pytest.approx(-0.1) and gr.verdict == gate.REGRESSED
    assert result.exit_code == 1


@pytest.mark.parametrize("args, flag, words", [
    (["--baseline", "nope", "--candidate", "base"], "--baseline", "no run named 'nope'"),
    (["--baseline", "base", "--candidate", "nope"], "--candidate", "no run named 'nope'"),
    (["--baseline", "base", "--candidate", "drop4", "--metrics", "gr,zz"], "--metrics", "unknown metric 'zz'"),
    (["--baseline", "base", "--candidate", "drop4", "--metrics", "sp2"], "--metrics", "'sp2' is not scored in run 'base'"),
    (["--baseline", "base", "--candidate", "drop4", "--max-drop", "zz=0.1"], "--max-drop", "unknown metric 'zz'"),
    (["--baseline", "base", "--candidate", "drop4", "--max-drop", "gr"], "--max-drop", "'gr' is not METRIC=DROP"),
    (["--baseline", "base", "--candidate", "drop4", "--max-drop", "gr=much"], "--max-drop", "gr='much' is not a number"),
    (["--baseline", "base", "--candidate", "drop4", "--max-drop", "gr=2"], "--max-drop", "gr=2 must be within [0, 1]"),
    (["--baseline", "base", "--candidate", "drop4", "--max-drop", "gr=nan"], "--max-drop", "gr=nan must be within"),
    (["--baseline", "base", "--candidate", "drop4", "--metrics", "rp", "--max-drop", "gr=0.1"], "--max-drop",
     "'gr' is not gated"),
    (["--baseline", "base", "--candidate", "other"], "--candidate", "share no item ids"),
    (["--baseline", "base", "--candidate", "drop4", "--band", "0.7,0.2"], "--band", ""),
])
def test_bad_input_exits_2_with_one_line_naming_the_flag(runs_db: Path, capsys: pytest.CaptureFixture[str],
                                                         args: list[str], flag: str, words: str) -> None:
    code, out, err = _gate(runs_db, capsys, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {flag}") and words in err, err


def test_markdown_for_a_pull_request(runs_db: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    md = tmp_path / "gate.md"
    monkeypatch.setenv("RAG_TRIAGE_URL", "https://triage.example/")
    code, out, _ = _gate(runs_db, capsys, "--baseline", "base", "--candidate", "drop4", "--markdown", str(md))
    assert code == 1 and f"wrote {md}" in out
    text = md.read_text()
    assert "❌ **Regression**: `gr`" in text
    row = next(line for line in text.splitlines() if line.startswith("| `gr` |"))
    assert "| 12 of 12 |" in row and "| -0.333 |" in row and row.endswith("| ❌ regressed |")
    assert re.search(r"\| `gr` \| .*\| \[-\d\.\d{3}, -\d\.\d{3}\] \|", row)
    assert "[Open the comparison](https://triage.example/Compare?run=base&other=drop4)" in text
    # the 4 items that fell below GR's threshold, each linked to its Item page in the candidate run
    crossed = next(line for line in text.splitlines() if line.startswith("- `gr`: "))
    assert crossed.startswith("- `gr`: 4 item(s): ")
    assert crossed.count("](https://triage.example/Item?run=drop4&item=i0") == 4 and "more" not in crossed
    # why they flipped: the response and sources are the same, so the judge's verdicts moved
    assert "### Why verdicts flipped" in text
    assert "4 verdict(s) flipped: 0 retriever or chunking, 0 prompt or generator, 4 judge." in text
    assert next(line for line in text.splitlines() if line.startswith("| `gr` | 12 |")).startswith(
        "| `gr` | 12 | 4 | 0 | 0 | 4 | 0 | 0 |")



def test_a_candidate_judge_that_left_items_unscored_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The items both runs scored are equal, but the candidate's judge timed out or was unsure on most items:
    the gate fails on coverage, where the interval over the few shared scores alone would pass."""
    db = tmp_path / "cover.duckdb"
    write_run(db, "base", _items(20, ["1"] * 20))
    write_run(db, "flaky", _items(20, ["t"] * 10 + ["?"] * 4 + ["1"] * 6))  # 14 of 20 unscored
    write_run(db, "one", _items(20, ["t"] + ["1"] * 19))  # 1 of 20: within the default 5 %
    code, out, _ = _gate(db, capsys, "--baseline", "base", "--candidate", "flaky", "--metrics", "gr,rp")
    assert code == 1
    assert _row(out, "gr")[1] == "6" and _row(out, "gr")[-2:] == ["fewer", "scored"]
    assert "gr: the candidate left 14 of 20 shared items unscored (failed or unsure), the baseline 0" in out
    assert _row(out, "rp")[-1] == "ok" and "regressed: gr" in out
    code, out, _ = _gate(db, capsys, "--baseline", "base", "--candidate", "one", "--metrics", "gr")
    assert code == 0 and _row(out, "gr")[-1] == "ok"
    # a looser allowance lets the flaky run through; a bad one is refused on one line
    code, out, _ = _gate(db, capsys, "--baseline", "base", "--candidate", "flaky", "--max-unscored-rise", "0.8")
    assert code == 0, out
    code, out, err = _gate(db, capsys, "--baseline", "base", "--candidate", "flaky", "--max-unscored-rise", "2")
    assert code == 2 and "--max-unscored-rise" in err and len(err.strip().splitlines()) == 1
    # the markdown says why
    text = gate.markdown(gate.run_gate(str(db), "base", "flaky", ["gr"], {}))
    assert "❌ **Regression**: `gr`" in text and text.count("❌ fewer scored") == 1
    assert "- `gr` fewer scored: the candidate left 14 of 20 shared items unscored" in text

def test_markdown_caps_the_item_list_and_has_no_links_without_a_url(tmp_path: Path) -> None:
    db = tmp_path / "many.duckdb"
    write_run(db, "a", _items(30, ["1"] * 30))
    write_run(db, "b", _items(30, ["0"] * 25 + ["1"] * 5, response="Another response."))
    result = gate.run_gate(str(db), "a", "b", ["gr", "rp"], {})
    text = gate.markdown(result)
    crossed = next(line for line in text.splitlines() if line.startswith("- `gr`: "))
    assert crossed.startswith("- `gr`: 25 item(s): ") and crossed.endswith(", and 15 more")
    assert crossed.count("`i") == gate.SHOWN_ITEMS
    assert "http" not in text and "](" not in text
    assert "25 verdict(s) flipped: 0 retriever or chunking, 25 prompt or generator, 0 judge." in text
    assert "- and 15 more items" in text


DEMO = ROOT / "data" / "demo" / "runs" / "better_retriever.jsonl"


def test_real_runs_with_the_offline_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A CI job's steps: evaluate the main branch's outputs and the pull request's, then gate."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()[:12]]
    base, cand = tmp_path / "base.jsonl", tmp_path / "cand.jsonl"
    base.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the pull request's generator gets every figure wrong: the same claims lose their support
    rows = [r for r in rows if re.search(r"\d", r["response"])]
    broken = [dict(r, response=re.sub(r"\d", lambda d: str((int(d.group()) + 3) % 10), r["response"])) for r in rows]
    cand.write_text("".join(json.dumps(r) + "\n" for r in broken))
    db = tmp_path / "ci.duckdb"
    for name, path in (("main", base), ("pr", cand), ("main-again", base)):
        assert cli.main(["evaluate", str(path), "--db", str(db), "--run", name, "--quiet"]) in (0, 5)
    capsys.readouterr()
    code, out, _ = _gate(db, capsys, "--baseline", "main", "--candidate", "main-again", "--metrics", "gr,rp,sp1")
    assert code == 0 and "no metric regressed" in out  # the same outputs never regress
    md = tmp_path / "pr.md"
    # at the default band a figure the sources lack is sure evidence: every claim that lost its figure reads
    # unsupported, GR drops on every item, and the gate fails on it
    code, out, _ = _gate(db, capsys, "--baseline", "main", "--candidate", "pr", "--metrics", "gr,sp1")
    assert code == 1 and _row(out, "gr")[1:2] == [str(len(rows))] and _row(out, "gr")[-1] == "regressed"
    assert float(_row(out, "gr")[4]) < 0 and _row(out, "sp1")[-1] == "ok"
    # a band that decides them: every claim that lost its figure flipped, and the gate fails
    code, out, _ = _gate(db, capsys, "--baseline", "main", "--candidate", "pr", "--metrics", "gr,sp1",
                         "--band", "0.5,0.5", "--markdown", str(md))
    assert code == 1 and _row(out, "gr")[-1] == "regressed" and _row(out, "sp1")[-1] == "ok"
    text = md.read_text()
    found = re.search(r"(\d+) verdict\(s\) flipped: (\d+) retriever or chunking, (\d+) prompt or generator", text)
    assert found and int(found.group(3)) >= 1 and found.group(2) == "0"  # same sources: never the retriever
