"""The dashboard at an uncertainty band (AppTest): the band control kept in the URL, unsure verdicts
and scores shown neither 0 nor 1, a quiet Table 2, and each fired rule's evidence one click from the item."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from evaluators.core.confidence import CALIBRATED
from evaluators.core.records import Component, Item, Run, Status, Verdict
from evaluators.dashboard import ui
from evaluators.metrics import registry
from evaluators.metrics.thelma import rescore
from evaluators.storage import ownership, writes
from tests.conftest import app_db
from tests.test_bad_db import new_app

RUN, ITEM = "calibrated", "x"


def _verdict(metric: str, kind: str, idx: int, target: str, value: float, p: float, detail: str) -> Verdict:
    return Verdict(item_id=ITEM, metric=metric, component_kind=kind, component_idx=idx, target=target, value=value,
                   status=Status.OK, p=p, p_kind=CALIBRATED, tier="offline", detail=detail)


@pytest.fixture
def band_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """One item whose sources miss the one sub-question (SQC 0, sure) and whose response leaves it
    open, but the judge is unsure of that (RQC p 0.45): quiet at the default band, T2.2 at 0.5,0.5."""
    path = tmp_path / "band.duckdb"
    ownership.start_run(path, Run(RUN, "offline", {}, {}), 1)
    comps = [Component(ITEM, "subquestion", 0, "When does the ferry leave?"), Component(ITEM, "source", 0, "Parking.")]
    verdicts = [_verdict("sqc", "subquestion", 0, "source:0", 0.0, 0.08, "no source sentence names a time"),
                _verdict("rqc", "subquestion", 0, "response", 0.0, 0.45, "the answer mentions a ferry, no time")]
    specs = {m: registry.METRICS[m] for m in ("sqc", "rqc")}
    writes.write_batch(path, RUN, items=[Item(ITEM, "When does the ferry leave?", ("Parking.",), "Ferries are nice.")],
                      components=comps, verdicts=verdicts, scores=list(rescore(ITEM, verdicts, specs).values()))
    yield from app_db(path, monkeypatch)


def open_page(page: str, **params: str) -> AppTest:
    at = new_app()
    at.switch_page(ui.PAGES[page].file)
    at.query_params.update({"run": RUN, **params})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def frame_with(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_unsure_reads_neither_zero_nor_one_and_the_diagnosis_stays_quiet(band_db: Path) -> None:
    at = open_page("item", item=ITEM, tab="Verdicts")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["RQC"] == "?" and metrics["SQC"] == "0.00"  # a glyph on the card, its status beneath
    assert "? unsure · 0 scored of 1, 1 unsure" in [c.value for c in at.caption]
    assert any("No Table-2 rule fires" in s.value for s in at.success)
    table = frame_with(at, "p kind")
    rqc = table[table["metric"] == "RQC"].iloc[0]
    assert (rqc["verdict"], rqc["p"], rqc["p kind"], rqc["tier"]) == ("? unsure", 0.45, CALIBRATED, "offline")
    assert not at.expander or all("Evidence" not in e.label for e in at.expander)


def test_the_band_control_moves_the_band_in_the_url_and_a_rule_fires(band_db: Path) -> None:
    at = open_page("item", item=ITEM)
    at.text_input(key="band").input("0.5,0.5").run()
    assert not at.exception and at.query_params["band"] in ("0.5,0.5", ["0.5,0.5"])
    assert list(frame_with(at, "fix")["rule"]) == ["T2.2"]
    assert {m.label: m.value for m in at.metric}["RQC"] == "0.00"
    # the run table and the Diagnosis page read the same band
    run = open_page("run", band="0.5,0.5")
    assert list(frame_with(run, "item_id")["rules"]) == ["T2.2"]
    assert list(frame_with(open_page("run"), "item_id")["rules"]) == [""]
    diagnosis = open_page("diagnosis", band="0.5,0.5")
    rules = frame_with(diagnosis, "evidence").set_index("rule")
    assert rules.loc["T2.2", "items"] == 1 and "rule=T2.2" in rules.loc["T2.2", "evidence"]
    assert "band=0.5%2C0.5" in rules.loc["T2.2", "evidence"]


def test_a_fired_rule_opens_onto_its_evidence(band_db: Path) -> None:
    at = open_page("item", item=ITEM, band="0.5,0.5", rule="T2.2")
    expander = next(e for e in at.expander if "Evidence for T2.2" in e.label)
    assert expander.proto.expanded
    evidence = [d.value for d in at.dataframe if "p kind" in d.value.columns and len(d.value) == 1]
    by_metric = {f["metric"].iloc[0]: f.iloc[0] for f in evidence}
    assert (by_metric["SQC"]["p"], by_metric["SQC"]["tier"], by_metric["SQC"]["verdict"]) == (0.08, "offline", "✗ 0")
    assert by_metric["SQC"]["detail"] == "no source sentence names a time"
    assert by_metric["RQC"]["text"] == "When does the ferry leave?" and by_metric["RQC"]["p"] == 0.45
    assert any("SQC low" in m.value and "1 verdict(s) made it low" in m.value for m in at.markdown)
    # without ?rule= the expander is there, closed and not drawn: one click away
    closed = open_page("item", item=ITEM, band="0.5,0.5")
    shut = next(e for e in closed.expander if "Evidence for T2.2" in e.label)
    assert not shut.proto.expanded and not shut.children


def test_a_bad_band_is_named_and_ignored(band_db: Path) -> None:
    for bad in ("0.9,0.1", "nan,nan", "half", "0.2,0.8,0.9"):
        at = open_page("item", item=ITEM, band=bad)
        assert any("Uncertainty band ignored" in w.value for w in at.sidebar.warning), bad
        assert {m.label: m.value for m in at.metric}["RQC"] == "?"  # the default band applies: unsure
    runs = new_app()
    runs.query_params.update({"run": RUN, "band": "0.7,0.3"})
    runs.run()
    assert not runs.exception and any("Uncertainty band ignored" in w.value for w in runs.sidebar.warning)


def test_runs_page_counts_unsure_items_apart(band_db: Path) -> None:
    at = new_app()
    at.query_params["run"] = RUN
    at.run()
    table = frame_with(at, "95% CI").set_index("metric")
    assert table.loc["RQC", "n scored"] == "0 of 1"
    assert table.loc["RQC", "unscored items"] == "1 unsure" and table.loc["RQC", "unsure verdicts"] == 1
    assert table.loc["RQC", "failed verdicts"] == "none"  # an unsure verdict is not a failure
    assert "n scored 0 of 1 · 1 unsure" in [c.value for c in at.caption]
    at = new_app()
    at.query_params.update({"run": RUN, "band": "0.5,0.6"})
    at.run()
    table = frame_with(at, "95% CI").set_index("metric")
    assert table.loc["RQC", "n scored"] == "1 of 1" and table.loc["RQC", "unscored items"] == "none"


def test_a_score_s_expected_value_is_shown_beside_it_and_left_out_with_corrections(band_db: Path) -> None:
    expected = "expected 0.45 (mean p of 1 of 1 verdicts)"  # RQC's one verdict, unsure at the default band
    raw = [c.value for c in open_page("item", item=ITEM).caption]
    assert expected in raw
    assert sum(c.startswith("expected") for c in raw) == 1  # SQC's coverage has none
    assert expected in [c.value for c in open_page("item", item=ITEM, band="0.5,0.5").caption]  # no band moves it
    corrected = [c.value for c in open_page("item", item=ITEM, scores="corrected").caption]
    assert not any(c.startswith("expected") for c in corrected)
