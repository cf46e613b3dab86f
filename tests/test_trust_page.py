"""The Trust page (AppTest): label the next item, see the trust figure move, apply a suggested threshold."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evaluators.core.records import Label
from evaluators.runs import labelling
from evaluators.storage import store, writes
from tests.seed import set_scores
from tests.test_pages import all_text, frame_with, open_page

RUN = "weak-retriever"


def _row(at, target_prefix: str):
    table = frame_with(at, "labelled")
    return table[table["target"].str.startswith(target_prefix)].iloc[0]


def test_labelling_the_next_item_moves_the_trust_figures(db: Path) -> None:
    assert _row(open_page("pages/8_Trust.py", run=RUN), "T2.2")["labelled"] == 0
    at = open_page("pages/8_Trust.py", run=RUN, tab="Label next")
    first = frame_with(at, "reason")["item_id"].iloc[0]
    # Mark every fired rule of the first queued item wrong, and save.
    for radio in at.radio:
        if radio.key and radio.key.startswith("q_T2"):
            radio.set_value("wrong")
    at.button(key="queue_save").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Saved" in str(s.value) for s in at.success)
    saved = store.query(db, "SELECT count(*) AS n FROM labels WHERE item_id = ?", [first])
    assert int(saved["n"][0]) >= 1
    # The next item follows, and every rule now has one label more.
    assert frame_with(at, "reason")["item_id"].iloc[0] != first
    assert _row(open_page("pages/8_Trust.py", run=RUN), "T2.2")["labelled"] == 1


def test_a_suggested_threshold_applies_with_one_link(db: Path) -> None:
    # RP scores spread out, and people who call RP "low" up to 0.6: T2.5 (RP low, SP1 high) is right on
    # q01, q05 and q06, and T2.1 (SD low, RP high) is wrong on q06. At RP 0.5 the judge misses two. SP1
    # and RP are set in the URL, whatever the defaults: SP1 0.5 keeps q01's and q06's 0.5 high.
    rp = {"q01": 0.6, "q02": 0.8, "q03": 0.9, "q04": 0.7, "q05": 0.3, "q06": 0.55}
    set_scores(db, RUN, "rp", rp)
    writes.add_labels(db, RUN, [Label(i, int(i in ("q01", "q05", "q06")), rule="T2.5") for i in rp]
                     + [Label(i, 0, rule="T2.1") for i in rp])
    at = open_page("pages/8_Trust.py", run=RUN, th_rp="0.5", th_sp1="0.5")
    (link,) = [link for link in at.get("page_link") if "Apply RP" in link.proto.label]
    # 0.65 and 0.75 both agree fully (q04 never fires T2.5: its SP1 is low); the tie goes to the nearer one.
    assert "th_rp=0.65" in link.proto.query_string
    before = _row(at, "T2.5")
    applied = open_page("pages/8_Trust.py", run=RUN, th_rp="0.65", th_sp1="0.5")
    after = _row(applied, "T2.5")
    assert before["agreement"] < 1.0 and after["agreement"] == 1.0
    # one table of who made each call: at 0.65 the judge fires T2.5 on the three items people called
    confusions = frame_with(applied, "judge only")
    t25 = confusions[confusions["target"].str.startswith("T2.5")].iloc[0]
    assert (t25["judge and people"], t25["judge only"], t25["people only"], t25["neither"]) == (3, 0, 0, 3)
    assert len(applied.dataframe) == 2  # the agreement table and this one: no grid per target
    assert not [link for link in applied.get("page_link") if "Apply RP" in link.proto.label]


def test_a_correction_changes_the_corrected_score_and_never_the_raw_one(db: Path) -> None:
    from evaluators.storage import queries

    at = open_page("pages/2_Item.py", run=RUN, item="q01", tab="Verdicts")
    (gr,) = store.query(db, """SELECT component_idx, value FROM verdicts WHERE run_id = ? AND item_id = 'q01'
                               AND metric = 'gr' AND status = 'ok' AND value = 0 LIMIT 1""", [RUN]).values.tolist()
    at.selectbox(key="fix_component").set_value(("gr", "claim", int(gr[0])))
    at.radio(key="fix_value").set_value("1")
    at.button(key="FormSubmitter:fix_form-Save correction").click().run()
    assert any("Correction saved" in s.value for s in at.success), [w.value for w in at.warning]
    raw = store.query(db, "SELECT value FROM scores WHERE run_id = ? AND item_id = 'q01' AND metric = 'gr'", [RUN])
    corrected = store.query(db, f"SELECT value FROM {queries.sql.scores_sql(None, corrected=True)} "
                                "WHERE item_id = 'q01' AND metric = 'gr'", {"run": RUN})
    assert float(corrected["value"][0]) > float(raw["value"][0])
    # The raw score is the one the judge gave: recomputing without corrections gives it back.
    stored = store.query(db, "SELECT * FROM verdicts WHERE run_id = ? AND item_id = 'q01' AND metric = 'gr'", [RUN])
    assert float(raw["value"][0]) == pytest.approx(float(stored.loc[stored["status"] == "ok", "value"].mean()))
    # The pages read corrected scores behind the switch kept in the URL.
    detail = queries.items.item_detail(db, RUN, "q01", None, True)["scores"].set_index("metric")
    assert float(detail.loc["gr", "value"]) == pytest.approx(float(corrected["value"][0]))
    shown = open_page("pages/1_Run.py", run=RUN, scores="corrected")
    assert shown.radio(key="scores").value == "corrected"
    table = next(e.value for e in shown.dataframe if "gr" in e.value.columns and "item_id" in e.value.columns)
    assert float(table.set_index("item_id").loc["q01", "gr"]) == pytest.approx(float(corrected["value"][0]))


def test_disagreements_name_a_corrected_component_and_leave_a_rule_s_cell_empty(db: Path) -> None:
    # A GR claim verdict of 0 corrected to 1, and every rule called right on q01: some rule does not
    # fire there (T2.2 and T2.4 never fire together), so a rule's disagreement has no component.
    (gr,) = store.query(db, """SELECT component_idx FROM verdicts WHERE run_id = ? AND item_id = 'q01'
                               AND metric = 'gr' AND status = 'ok' AND value = 0 LIMIT 1""", [RUN]).values.tolist()
    writes.add_labels(db, RUN, [Label("q01", 1, metric="gr", component_idx=int(gr[0]))]
                     + [Label("q01", 1, rule=rule) for rule in labelling.RULE_IDS])
    table = frame_with(open_page("pages/8_Trust.py", run=RUN), "people")
    # whole numbers with empty cells: a column Arrow takes as it is (mixed "" and ints it cannot)
    assert str(table["component"].dtype) == "Int64"
    assert table.loc[table["target"] == "GR", "component"].tolist() == [int(gr[0])]
    assert table.loc[table["target"].str.startswith("T2"), "component"].isna().all()
    assert table["target"].str.startswith("T2").any()


def test_a_label_on_an_unsure_verdict_is_neither_agreement_nor_disagreement(db: Path) -> None:
    # q01's GR claim verdicts: the judge is unsure of one (p 0.50, inside the offline band), sure of another.
    (unsure, judged), (sure, sure_value) = store.query(
        db, """SELECT component_idx, value FROM verdicts WHERE run_id = ? AND item_id = 'q01' AND metric = 'gr'
               AND status = 'ok' ORDER BY component_idx LIMIT 2""", [RUN]).values.tolist()
    with store.connect(db) as con:
        con.execute("""UPDATE verdicts SET p = 0.5, p_kind = 'calibrated' WHERE run_id = ? AND item_id = 'q01'
                       AND metric = 'gr' AND component_idx = ?""", [RUN, int(unsure)])
    # A person settles the unsure verdict the way the judge leaned: that is not agreement with the judge.
    writes.add_labels(db, RUN, [Label("q01", int(judged), metric="gr", component_idx=int(unsure))])
    at = open_page("pages/8_Trust.py", run=RUN)
    gr = _row(at, "GR")
    assert gr["labelled"] == 0 and pd.isna(gr["agreement"]) and pd.isna(gr["kappa"])
    shown = all_text(at)
    assert not any("every labelled call agrees" in text for text in shown)
    assert f"**Labels on unsure verdicts: 1, of which people said 1: {int(judged)}.**" in shown
    # A correction of a sure verdict is a disagreement; the unsure one stays out of every figure.
    writes.add_labels(db, RUN, [Label("q01", 1 - int(sure_value), metric="gr", component_idx=int(sure))])
    at = open_page("pages/8_Trust.py", run=RUN)
    gr = _row(at, "GR")
    assert gr["labelled"] == 1 and gr["agreement"] == 0.0
    assert frame_with(at, "people")["component"].tolist() == [int(sure)]
    # Where the band holds p 0.50 no longer, the judge's call on it is sure, and both labels count.
    gr = _row(open_page("pages/8_Trust.py", run=RUN, band="0.5,0.5"), "GR")
    assert gr["labelled"] == 2 and gr["agreement"] == 0.5
