"""The expected value where a person ranks, and rules that agree with each other (issue 55, parts 4 and 5):

- a score keeps its expected value (the mean of its verdicts' p), stored beside it and in run_wide;
- the Run table sorts a metric by it (the judge's surest bad items first among equal scores) and opens
  worst first; Compare's flips open on the item whose expectation moved most;
- the home page's top rule is the one with the most items no other rule explains;
- where X1 and T2.5 fire together, the Diagnosis page says which explains more, from the claims.
Rules, the gate and trends keep reading the 0/1 score (tests/test_gate.py, test_trends.py hold them)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evaluators.metrics.diagnosis import DEFAULT_THRESHOLDS, explained_by
from evaluators.metrics.expected import expected_scores
from evaluators.metrics.registry import THELMA
from evaluators.runs import flips
from evaluators.storage import queries, store, wide
from evaluators.storage.queries.items import verdict_records
from tests.test_band_pages import RUN as BAND_RUN
from tests.test_band_pages import band_db  # noqa: F401  (a fixture)
from tests.test_pages import frame_with, open_page

RUN = "weak-retriever"


def test_a_stored_score_keeps_the_expected_value_of_its_verdicts(band_db: Path) -> None:  # noqa: F811
    scores = store.query(band_db, "SELECT item_id, metric, value, expected FROM scores WHERE run_id = ?", [BAND_RUN])
    verdicts = verdict_records(store.query(band_db, "SELECT * FROM verdicts WHERE run_id = ?", [BAND_RUN]))
    want = {k: s.value for k, s in expected_scores(verdicts).items()}
    got = {(r.item_id, r.metric): r.expected for r in scores.itertuples() if r.expected == r.expected}
    assert got == pytest.approx(want) and got[("x", "rqc")] == pytest.approx(0.45)
    assert scores.set_index("metric").loc["sqc", "expected"] != scores.set_index("metric").loc["sqc", "expected"]  # none
    table = queries.runs.run_table(band_db, BAND_RUN, THELMA)
    assert table["rqc:ev"].iloc[0] == pytest.approx(0.45) and pd.isna(table["rqc"].iloc[0])  # unscored, yet expected


def _with_expected(db: Path, values: dict[str, float]) -> None:
    """Give RUN's GR scores these expected values (by item), as the runner would have stored them."""
    with store.connect(db) as con:
        for item, ev in values.items():
            con.execute("UPDATE scores SET expected = ? WHERE run_id = ? AND item_id = ? AND metric = 'gr'", [ev, RUN, item])
        wide.refresh_wide(con, RUN)


def test_a_metric_sorts_by_its_expected_value_then_its_score(db: Path) -> None:
    gr = queries.runs.run_table(db, RUN, THELMA).set_index("item_id")["gr"]
    evs = {i: 0.9 - 0.1 * k for k, i in enumerate(gr.index)}  # reversed against the ids
    _with_expected(db, evs)
    table = queries.runs.stored_table(db, RUN, THELMA)
    listed = list(queries.diagnosis.filter_items(table, THELMA, DEFAULT_THRESHOLDS, sort="gr")[0]["item_id"])
    assert listed == sorted(gr.index, key=lambda i: evs[i])
    at = open_page("pages/1_Run.py", run=RUN, sort="gr")
    assert list(frame_with(at, "rules")["item_id"]) == listed


def test_the_run_table_opens_worst_first(db: Path) -> None:
    """With no sort in the URL: each item's lowest expected value (its score where it has none) first."""
    table = queries.runs.run_table(db, RUN, THELMA).set_index("item_id")
    worst = {i: min(r[m] for m in THELMA if r[m] == r[m]) for i, r in table.iterrows()}
    at = open_page("pages/1_Run.py", run=RUN)
    assert at.selectbox(key="sort").value == "worst"
    listed = list(frame_with(at, "rules")["item_id"])
    assert listed == sorted(worst, key=lambda i: (worst[i], i)) and listed != sorted(worst)


def test_compare_s_flips_open_on_the_item_whose_expectation_moved_most() -> None:
    row = {"metric": "gr", "kind": "claim", "idx_a": 0.0, "idx_b": 0.0, "state_a": "ok", "state_b": "ok"}
    rows = pd.DataFrame([
        {**row, "item_id": "a", "text_a": "x", "text_b": "x", "value_a": 1.0, "value_b": 0.0, "p_a": 0.55, "p_b": 0.45},
        {**row, "item_id": "a", "idx_a": 1.0, "idx_b": 1.0, "text_a": "y", "text_b": "y", "value_a": 1.0,
         "value_b": 0.0, "p_a": 0.6, "p_b": 0.4},
        {**row, "item_id": "b", "text_a": "z", "text_b": "z", "value_a": 1.0, "value_b": 0.0, "p_a": 0.97, "p_b": 0.03},
    ])
    inputs = pd.DataFrame([{"run_id": r, "item_id": i, "sources": ["s"], "response": "same"}
                           for r in ("r1", "r2") for i in ("a", "b")])
    found = flips.attribute({"rows": rows, "same": pd.DataFrame({"metric": [], "n": []})}, inputs, "r1", "r2")
    moved = found.items.set_index("item_id")["moved"]
    assert moved.to_dict() == pytest.approx({"a": 0.3, "b": 0.94})
    from evaluators.dashboard.views import walk

    assert list(walk.flip_list(found)["item_id"]) == ["b", "a"]  # one sure flip before two at the band's edge


@pytest.mark.parametrize("unsupported,supported,rule", [(2, 0, "X1"), (1, 1, "X1"), (0, 3, "T2.5"), (1, 2, "T2.5"),
                                                        (0, 0, None)])
def test_which_rule_explains_an_item_x1_and_t2_5_share(unsupported: int, supported: int, rule: str | None) -> None:
    assert explained_by(unsupported, supported) == rule


def test_the_diagnosis_page_says_which_of_x1_and_t2_5_explains_more(db: Path) -> None:
    """Seeded q05 fires both: RP reads two of its claims as extraneous, and GR finds both unsupported."""
    split = queries.diagnosis.shared_claims(queries.runs.stored_table(db, RUN, THELMA), str(db), RUN,
                                            DEFAULT_THRESHOLDS, None)
    assert split.to_dict("records") == [{"item_id": "q05", "unsupported": 2, "supported": 0}]
    at = open_page("pages/4_Diagnosis.py", run=RUN)
    (shared,) = [e for e in at.expander if "fire together on 1 item" in e.label]
    at.session_state["shared_open"] = True
    at.run()
    assert any("**X1 (ours) explains more of them**: X1 (ours) 1 of the 1 items, T2.5 0" in m.value
               for m in at.markdown), [m.value for m in at.markdown]


def test_the_top_rule_counts_what_only_it_explains(db: Path) -> None:
    (row,) = queries.diagnosis.rule_tops(db, [RUN], DEFAULT_THRESHOLDS)
    table = queries.runs.run_table(db, RUN, THELMA)
    fired = {r["item_id"]: {f.rule.id for f in rules_fired(r)} for r in table.to_dict("records")}
    for rule in ("T2.1", "T2.2", "T2.3", "T2.4", "T2.5", "T2.6", "X1"):
        assert row[f"alone:{rule}"] == sum(f == {rule} for f in fired.values()), rule
        assert row[f"rule:{rule}"] == sum(rule in f for f in fired.values()), rule


def rules_fired(row: dict) -> list:
    """The rules Python's diagnosis fires on one run-table row."""
    from evaluators.metrics.diagnosis import fired
    from evaluators.storage.queries.diagnosis import wide_score

    return fired({m: wide_score(row, m) for m in THELMA}, DEFAULT_THRESHOLDS)

