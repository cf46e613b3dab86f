"""Regression suites: `export-suite` writes a run's items with their expectations, ingest keeps them,
and `evaluate SUITE --expect` reports each broken expectation on one located line (exit 1).

The round trip runs the real engine with the offline judge; the selection options, people's
corrections and the messages are checked on hand-built runs (tests/test_flips.write_run).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evaluators import cli
from evaluators.core.records import Label
from evaluators.runs import suite
from evaluators.runs.ingest import InputError, load_items
from evaluators.storage import store, writes
from tests.test_flips import write_run

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo" / "runs" / "weak_retriever.jsonl"
SRC = ["The museum opens at 10:00 and closes at 18:00.", "Entry costs 12 euros for adults."]
ITEMS: dict[str, dict[str, Any]] = {
    # every Table-2 rule quiet on decided scores; claim B unsupported (GR 1 of 2 with the query covered: our
    # X1 fires), claim C unsure
    "good": dict(query="When does the museum open, and what does entry cost?", sources=SRC,
                 response="It opens at 10:00. Entry is 12 euros. There is a cafe.",
                 claims=[("The museum opens at 10:00.", "1", "1"), ("Parking is free.", "1", "0"),
                         ("There is a cafe on the roof.", "1", "?")],
                 subq=[("When does the museum open?", "101", "1"), ("What does entry cost?", "011", "1")]),
    # T2.2 fires: neither the sources nor the response cover the question
    "bad": dict(query="Who designed the building?", sources=SRC, response="I do not know.", sp1="00",
                claims=[("The designer is unknown.", "1", "0")], subq=[("Who designed the building?", "000", "0")]),
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def hand_db(tmp_path: Path) -> Path:
    db = tmp_path / "hand.duckdb"
    write_run(db, "r", ITEMS)
    return db


# ---------------------------------------------------------------- the round trip, offline judge

def test_export_evaluate_round_trip_and_a_changed_response(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "weak.jsonl"
    source.write_text("\n".join(DEMO.read_text().splitlines()[:5]) + "\n")
    db = tmp_path / "runs.duckdb"
    assert _run(["evaluate", str(source), "--db", str(db), "--run", "weak", "--quiet"], capsys)[0] == 0
    out_file = tmp_path / "suite.jsonl"
    code, out, _ = _run(["export-suite", "--db", str(db), "--run", "weak", "--out", str(out_file)], capsys)
    assert code == 0
    rows = _lines(out_file)
    n_expect = sum(len(v) for r in rows for k, v in r["expect"].items() if k != "from_run")
    assert out.strip() == f"wrote 5 items with {n_expect} expectations to {out_file}"
    assert [r["id"] for r in rows] == ["q01", "q02", "q03", "q04", "q05"]
    originals = [json.loads(line) for line in source.read_text().splitlines()]
    for row, original in zip(rows, originals):
        assert {k: row[k] for k in ("query", "sources", "response", "metadata")} == \
            {k: original[k] for k in ("query", "sources", "response", "metadata")}
        assert row["expect"]["from_run"] == "weak"
    q01 = rows[0]["expect"]
    assert q01["gr_supported"] == ["An adult single ticket on the Red route costs 6.40 euros."]
    assert q01["sqc_covered"] == q01["rqc_covered"] == ["How much does an adult single ticket on the Red route cost?"]
    assert set(q01["rules_quiet"]) <= set(suite.RULES) and q01["rules_quiet"]

    # the same pipeline keeps every expectation
    code, out, _ = _run(["evaluate", str(out_file), "--db", str(tmp_path / "ci.duckdb"), "--run", "same", "--quiet",
                         "--expect"], capsys)
    assert code == 0, out
    assert out.splitlines()[-1] == f"expectations: {n_expect} of {n_expect} hold, 0 broke"

    # a response with a wrong figure breaks its claim's support, on its own line, and, the claim now surely
    # unsupported while retrieval covers the query, the quiet of our rule X1 (a generator making things up)
    changed = tmp_path / "changed.jsonl"
    rows[0]["response"] = rows[0]["response"].replace("6.40", "9.99")
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, _ = _run(["evaluate", str(changed), "--db", str(tmp_path / "ci.duckdb"), "--run", "changed",
                         "--quiet", "--expect"], capsys)
    assert code == 1
    broken = [line for line in out.splitlines() if line.startswith(str(changed))]
    assert len(broken) == 2, out
    assert re.fullmatch(re.escape(f'{changed}:1: item q01: claim "An adult single ticket on the Red route costs '
                                  '6.40 euros." no longer supported (') + r"p=0\.\d\d\)", broken[0])
    assert broken[1] == f"{changed}:1: item q01: rule X1 fires (SQC high, GR low: fix Generator)"
    assert out.splitlines()[-1] == f"expectations: {n_expect - 2} of {n_expect} hold, 2 broke"


# ---------------------------------------------------------------- ingest keeps the expect field

def test_ingest_keeps_expect_and_locates_a_bad_one(tmp_path: Path) -> None:
    good = tmp_path / "s.jsonl"
    good.write_text(json.dumps({"id": "a", "query": "Q?", "sources": ["S."], "response": "R.",
                                "metadata": {"team": "x"}, "expect": {"gr_supported": ["R."]}}) + "\n")
    (item,) = load_items(good)
    assert item.metadata == {"team": "x", "expect": {"gr_supported": ["R."]}}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a", "query": "Q?", "sources": ["S."], "response": "R."}) + "\n"
                   + json.dumps({"id": "b", "query": "Q?", "sources": ["S."], "response": "R.", "expect": ["x"]}) + "\n")
    with pytest.raises(InputError) as err:
        load_items(bad)
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith(f"{bad}:2: field expect: expected an object")
    csv = tmp_path / "s.csv"
    csv.write_text('id,query,sources,response,expect\na,Q?,"[""S.""]",R.,"{""rules_quiet"": [""T2.1""]}"\n'
                   'b,Q?,"[""S.""]",R.,not json\n')
    with pytest.raises(InputError) as err:
        load_items(csv)
    assert err.value.problems[0].startswith(f"{csv}:3: field expect: expected a JSON object")


def test_expect_without_expectations_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "a", "query": "Q?", "sources": ["S."], "response": "R."}) + "\n")
    db = tmp_path / "x.duckdb"
    code, out, err = _run(["evaluate", str(plain), "--db", str(db), "--run", "x", "--expect"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: --expect:") and "no item with an expect field" in err
    assert not db.exists()  # checked before any work


# ---------------------------------------------------------------- expectations and selections, hand-built

def test_expectations_come_from_confident_verdicts(hand_db: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "all.jsonl"
    assert _run(["export-suite", "--db", str(hand_db), "--run", "r", "--out", str(out_file)], capsys)[0] == 0
    good, bad = (r["expect"] for r in sorted(_lines(out_file), key=lambda r: r["id"], reverse=True))
    assert good["gr_supported"] == ["The museum opens at 10:00."]  # not the 0, not the unsure one
    assert good["sqc_covered"] == good["rqc_covered"] == ["When does the museum open?", "What does entry cost?"]
    assert good["rules_quiet"] == [r for r in suite.RULES if r != "X1"]  # X1 fires: no promise it stays quiet
    assert bad["gr_supported"] == bad["sqc_covered"] == bad["rqc_covered"] == []
    assert "T2.2" not in bad["rules_quiet"]  # it fires: nothing promises it stays quiet
    # the run checked against its own suite: everything holds
    items = load_items(out_file)
    assert suite.check(str(hand_db), "r", items, suite.item_lines(out_file, items)) == []


def test_corrections_and_rule_labels_override_the_judge(hand_db: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    store.migrate(hand_db)
    writes.add_labels(hand_db, "r", [Label("good", 0, metric="gr", component_idx=0, author="t"),
                                    Label("good", 1, metric="gr", component_idx=1, author="t"),
                                    Label("bad", 0, rule="T2.2", author="t"),
                                    Label("good", 1, rule="T2.5", author="t")])
    out_file = tmp_path / "fixed.jsonl"
    assert _run(["export-suite", "--db", str(hand_db), "--run", "r", "--out", str(out_file)], capsys)[0] == 0
    rows = {r["id"]: r for r in _lines(out_file)}
    assert rows["good"]["expect"]["gr_supported"] == ["Parking is free."]
    assert "T2.5" not in rows["good"]["expect"]["rules_quiet"] and "T2.2" in rows["bad"]["expect"]["rules_quiet"]
    # on the same run, what people said the pipeline should do is what it does not do yet
    items = load_items(out_file)
    broken = suite.check(str(hand_db), "r", items, suite.item_lines(out_file, items))
    line = {r["id"]: n for n, r in enumerate(_lines(out_file), start=1)}
    assert broken == [f"{out_file}:{line['bad']}: item bad: rule T2.2 fires (SQC low, RQC low: fix Retriever or "
                      "Source text)",
                      f'{out_file}:{line["good"]}: item good: claim "Parking is free." no longer supported (p=0.05)']


def test_a_changed_run_breaks_exactly_what_changed(hand_db: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "suite.jsonl"
    assert _run(["export-suite", "--db", str(hand_db), "--run", "r", "--items", "good", "--out", str(out_file)],
                capsys)[0] == 0
    changed = {"good": dict(ITEMS["good"], claims=[("There is a cafe on the roof.", "1", "1")],
                            subq=[("When does the museum open?", "000", "t"), ("What does entry cost?", "0?0", "1")])}
    write_run(hand_db, "r2", changed)
    items = load_items(out_file)
    broken = suite.check(str(hand_db), "r2", items, suite.item_lines(out_file, items))
    at = f"{out_file}:1: item good"
    assert broken == [f'{at}: claim "The museum opens at 10:00." is no longer there (gr has no such claim)',
                      f'{at}: sub-question "When does the museum open?" no longer covered by the sources (p=0.05)',
                      f'{at}: sub-question "What does entry cost?" no longer covered by the sources (unsure, p=0.50)',
                      f'{at}: sub-question "When does the museum open?" no longer covered by the response (timeout)']


@pytest.mark.parametrize("args, ids", [
    ([], ["bad", "good"]),
    (["--items", "good"], ["good"]),
    (["--rule", "t2.2"], ["bad"]),
    (["--filter", "gr<0.8"], ["bad", "good"]),
    (["--filter", "gr>=0.5,sqc>0.9"], ["good"]),
])
def test_which_items_are_exported(hand_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  args: list[str], ids: list[str]) -> None:
    out_file = tmp_path / "s.jsonl"
    code, out, err = _run(["export-suite", "--db", str(hand_db), "--run", "r", *args, "--out", str(out_file)], capsys)
    assert code == 0, err
    assert [r["id"] for r in _lines(out_file)] == ids


def test_triaged_items(hand_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "t.jsonl"
    code, _, err = _run(["export-suite", "--db", str(hand_db), "--run", "r", "--triaged", "--out", str(out_file)],
                        capsys)
    assert code == 2 and err.strip() == "error: --triaged: run 'r' has no triaged or labelled item"
    assert not out_file.exists()
    writes.add_triage(hand_db, "r", "bad", "confirmed", "Retriever", "no source on the designer", "t")
    assert _run(["export-suite", "--db", str(hand_db), "--run", "r", "--triaged", "--out", str(out_file)],
                capsys)[0] == 0
    assert [r["id"] for r in _lines(out_file)] == ["bad"]


@pytest.mark.parametrize("args, message", [
    (["--items", "good,zz"], "error: --items: run 'r' has no item 'zz'"),
    (["--rule", "T9"], "error: --rule: unknown rule 'T9'"),
    (["--rule", "T2.1"], "error: --rule: T2.1 fires on no item of run 'r'"),
    (["--filter", "gr<<1"], "error: --filter: 'gr<<1' is not METRIC<VALUE"),
    (["--filter", "gr<2"], "error: --filter: 'gr<2': the value must be within [0, 1]"),
    (["--filter", "gr>0.9"], "error: --filter: no item of run 'r' meets it"),
    (["--items", "good", "--triaged"], "error: --triaged: not allowed with argument --items"),
])
def test_bad_selections_exit_2_and_write_nothing(hand_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 args: list[str], message: str) -> None:
    out_file = tmp_path / "s.jsonl"
    code, out, err = _run(["export-suite", "--db", str(hand_db), "--run", "r", *args, "--out", str(out_file)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message), err
    assert not out_file.exists()
    code, _, err = _run(["export-suite", "--db", str(hand_db), "--run", "nope", "--out", str(out_file)], capsys)
    assert code == 2 and "no run named 'nope'" in err
