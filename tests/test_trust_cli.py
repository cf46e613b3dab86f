"""`python -m evaluators trust`: labels imported into a run, and the trust CSV computed from them."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from evaluators.cli import main
from evaluators.metrics import diagnosis
from evaluators.metrics.registry import THELMA
from evaluators.storage import queries, store, writes

RUN = "weak-retriever"


def _fired(db: Path) -> dict[str, set[str]]:
    wide = queries.runs.run_scores_wide(db, RUN, list(THELMA))
    return {r["item_id"]: {rule.id for rule in diagnosis.diagnose({m: queries.diagnosis.wide_score(r, m) for m in THELMA})}
            for r in wide.to_dict("records")}


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return {row["target"]: row for row in csv.DictReader(f)}


def _gr_verdict(db: Path, item: str) -> tuple[int, int]:
    frame = store.query(db, """SELECT component_idx, value FROM verdicts WHERE run_id = ? AND item_id = ?
                               AND metric = 'gr' AND status = 'ok' ORDER BY component_idx LIMIT 1""", [RUN, item])
    return int(frame["component_idx"][0]), int(frame["value"][0])


def test_imported_labels_give_agreement_kappa_and_precision(db: Path, tmp_path: Path) -> None:
    fired = _fired(db)
    items = sorted(i for i, rules in fired.items() if rules)
    assert len(items) >= 2, "the seeded run fires rules on several items"
    rule = sorted(fired[items[0]])[0]
    quiet = next(i for i in sorted(fired) if rule not in fired[i])
    idx, value = _gr_verdict(db, "q01")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in [
        {"item_id": items[0], "rule": rule, "label": 1},          # fired, right
        {"item_id": quiet, "rule": rule, "label": 1},             # quiet, but should have fired
        {"item_id": "q01", "metric": "gr", "component": idx, "label": 1 - value, "note": "judge was wrong"},
    ]) + "\n")
    out = tmp_path / "trust.csv"
    assert main(["trust", "--db", str(db), "--run", RUN, "--labels", str(labels), "--out", str(out)]) == 0
    rows = _rows(out)
    assert list(rows) == [*THELMA, *diagnosis.RULES]
    assert rows[rule]["n_labelled"] == "2"
    assert float(rows[rule]["agreement"]) == pytest.approx(0.5)
    assert float(rows[rule]["precision"]) == pytest.approx(1.0)  # the one time it fired, it was right
    # observed 1/2; chance 0.5 * 1 + 0.5 * 0 = 1/2: no better than chance.
    assert float(rows[rule]["kappa"]) == pytest.approx(0.0)
    assert rows["gr"]["n_labelled"] == "1" and float(rows["gr"]["agreement"]) == 0.0
    # A target nobody labelled has an empty row, never a 0.
    assert rows["sd"] == {"target": "sd", "n_labelled": "0", "agreement": "", "kappa": "", "kappa_lo": "",
                          "kappa_hi": "", "precision": ""}
    # The labels are stored with the run (author and time) and go with it when it is deleted.
    saved = store.query(db, "SELECT count(*) AS n, min(author) AS a FROM labels WHERE run_id = ?", [RUN])
    assert int(saved["n"][0]) == 3 and saved["a"][0] != ""


def test_triage_notes_label_the_rules_that_fire(db: Path, tmp_path: Path) -> None:
    fired = _fired(db)
    item = next(i for i in sorted(fired) if fired[i])
    writes.add_triage(db, RUN, item, "false alarm", "Retriever", "", "ana@example.com")
    out = tmp_path / "trust.csv"
    assert main(["trust", "--db", str(db), "--run", RUN, "--out", str(out)]) == 0
    rows = _rows(out)
    for rule in fired[item]:
        assert rows[rule]["n_labelled"] == "1" and float(rows[rule]["precision"]) == 0.0


def test_bad_label_rows_are_located_and_nothing_is_written(db: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("item_id,rule,metric,component,label\n"
                      "q01,T2.5,,,1\n"
                      "q01,T9.9,,,1\n"
                      "nope,T2.5,,,0\n"
                      "q01,,gr,99,1\n"
                      "q01,,gr,0,maybe\n"
                      "q01,T2.5,gr,0,1\n")
    out = tmp_path / "trust.csv"
    assert main(["trust", "--db", str(db), "--run", RUN, "--labels", str(labels), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{labels}:3: field rule: unknown rule 'T9.9'" in err
    assert f"{labels}:4: field item_id: the run has no item 'nope'" in err
    assert f"{labels}:5: field component: item 'q01' has no gr component 99" in err
    assert f"{labels}:6: field label: must be 1 or 0, got 'maybe'" in err
    assert f"{labels}:7: give either rule or metric and component, not both" in err
    assert f"{labels}:2" not in err
    assert not out.exists()
    assert int(store.query(db, "SELECT count(*) AS n FROM labels")["n"][0]) == 0


def test_the_review_queue_puts_unsure_then_thin_then_random_and_skips_labelled(db: Path) -> None:
    from evaluators.core.records import Label
    from evaluators.runs import labelling

    with store.connect(db) as con:  # make one verdict of q03 unsure: a calibrated p of 0.55
        con.execute("""UPDATE verdicts SET p = 0.55, p_kind = 'calibrated' WHERE rowid = (
                         SELECT min(rowid) FROM verdicts WHERE run_id = ? AND item_id = 'q03' AND status = 'ok')""",
                    [RUN])
    queue = labelling.review_queue(db, RUN, {})
    assert queue.iloc[0].tolist()[:2] == ["q03", "unsure verdicts"]
    reasons = list(queue["reason"])
    assert reasons == sorted(reasons, key=labelling.QUEUE_REASONS.index)
    assert sorted(queue["item_id"]) == sorted(queries.runs.run_scores_wide(db, RUN, list(THELMA))["item_id"])
    writes.add_labels(db, RUN, [Label("q03", 1, rule="T2.5")])
    assert "q03" not in set(labelling.review_queue(db, RUN, {})["item_id"])
    # Seeded: the same run gives the same queue.
    assert labelling.review_queue(db, RUN, {}).equals(labelling.review_queue(db, RUN, {}))


def test_labels_of_two_people_saving_at_once_are_both_kept(db: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from evaluators.dashboard import access; from evaluators.storage import store\n"
            "from evaluators.core.records import Label\n"
            "me = access.User(None, access.TRIAGER)\n"
            "for k in range(10):\n"
            "    access.save_labels(me, sys.argv[1], 'weak-retriever', [Label('q01', k % 2, rule='T2.5')],\n"
            "                       sys.argv[2], deadline_s=20)\n")
    root = Path(__file__).resolve().parents[1]
    people = [subprocess.Popen([sys.executable, "-c", code, str(db), who], cwd=root, stderr=subprocess.PIPE,
                               text=True) for who in ("ana", "ben")]
    for p in people:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    saved = store.query(db, "SELECT author, count(*) AS n FROM labels GROUP BY author ORDER BY author")
    assert saved.values.tolist() == [["ana", 10], ["ben", 10]]


def test_labels_export_with_the_run_and_import_back(db: Path, tmp_path: Path) -> None:
    from evaluators.core.records import Label

    writes.add_labels(db, RUN, [Label("q01", 1, rule="T2.5", note="a, \"quoted\" note", author="ana"),
                               Label("q02", 0, metric="gr", component_idx=0, author="ben")])
    out, labels_out = tmp_path / "scores.csv", tmp_path / "labels.csv"
    assert main(["export", "--db", str(db), "--run", RUN, "--out", str(out), "--labels-out", str(labels_out)]) == 0
    with open(labels_out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["item_id"], r["rule"], r["metric"], r["component"], r["label"], r["author"]) for r in rows] == [
        ("q01", "T2.5", "", "", "1", "ana"), ("q02", "", "gr", "0", "0", "ben")]
    assert rows[0]["note"] == 'a, "quoted" note'
    # The file reads back into another copy of the run as the same labels.
    assert main(["trust", "--db", str(db), "--run", RUN, "--labels", str(labels_out),
                 "--out", str(tmp_path / "t.csv")]) == 0
    assert int(store.query(db, "SELECT count(*) AS n FROM labels")["n"][0]) == 4


def test_export_corrected_writes_scores_with_corrections_and_leaves_the_raw_ones(db: Path, tmp_path: Path) -> None:
    from evaluators.core.records import Label

    idx, value = _gr_verdict(db, "q01")
    writes.add_labels(db, RUN, [Label("q01", 1 - value, metric="gr", component_idx=idx, author="ana")])
    raw, fixed = tmp_path / "raw.csv", tmp_path / "fixed.csv"
    assert main(["export", "--db", str(db), "--run", RUN, "--out", str(raw)]) == 0
    assert main(["export", "--db", str(db), "--run", RUN, "--out", str(fixed), "--corrected"]) == 0
    with open(raw, newline="") as f:
        before = {r["item_id"]: r for r in csv.DictReader(f)}
    with open(fixed, newline="") as f:
        after = {r["item_id"]: r for r in csv.DictReader(f)}
    assert float(after["q01"]["gr"]) != float(before["q01"]["gr"])
    assert {i: r for i, r in after.items() if i != "q01"} == {i: r for i, r in before.items() if i != "q01"}
