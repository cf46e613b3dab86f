"""Adding a metric takes its Metric record (what a suite file holds) and one registry line: a toy metric
added so is evaluated, stored, read back and shown on the dashboard with its own name and threshold,
with nothing else told about it."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from evaluators.core.records import SOURCE, Item, Status, Verdict
from evaluators.metrics import registry
from evaluators.metrics.thelma import ItemWork, Metric
from evaluators.runs import runner
from evaluators.storage import queries, store
from tests.conftest import app_db

ROOT = Path(__file__).resolve().parents[1]
TOY_ID = "toy_overlap"
TOY_NAME = "Toy overlap: sources that share a word with the response"


async def match_overlap(work: ItemWork) -> list[Verdict]:
    """Does each source share a word with the response? (No judge: the toy needs no prompt file.)"""
    said = set(work.item.response.lower().split())
    return [Verdict(item_id=work.item.id, metric=TOY_ID, component_kind=SOURCE, component_idx=j, target="response",
                    value=float(bool(said & set(source.lower().split()))), status=Status.OK,
                    detail="shares a word with the response")
            for j, source in enumerate(work.item.sources)]


# The suite file's part: the whole metric in one record.
TOY = Metric(TOY_ID, TOY_NAME, match_overlap, threshold=0.6, reads=("response",), components=(SOURCE,),
             description="Toy: share of sources that share a word with the response")

ITEMS = [Item("a", "Where is the ferry?", ("the ferry leaves from pier one", "tickets cost ten euros"),
              "The ferry leaves from pier one."),
         Item("b", "When does it leave?", ("boats depart hourly", "the cafe opens at nine", "pier two is closed"),
              "Departures are hourly.")]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Metric]:
    # The registry's one line for it.
    monkeypatch.setitem(registry.METRICS, TOY_ID, TOY)
    yield TOY


def test_a_toy_metric_flows_from_evaluate_to_the_store_the_reads_and_a_page(
        toy: Metric, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "toy.duckdb"
    summary = runner.evaluate(ITEMS, db, "toy", metrics=[TOY_ID])
    assert summary.metrics == {TOY_ID: {"ok": 2}}

    stored = store.query(db, "SELECT item_id, value, n_scored, n_total FROM scores WHERE metric = ? ORDER BY item_id",
                         [TOY_ID])
    assert stored.values.tolist() == [["a", 0.5, 2, 2], ["b", 0.0, 3, 3]]  # "the" and "pier": only a's first

    assert queries.runs.catalog(db)[1]["toy"] == [TOY_ID]
    overview = queries.runs.run_summary(db, "toy")[0].set_index("metric")
    assert overview.loc[TOY_ID, "mean"] == pytest.approx(0.25)
    assert queries.runs.run_table(db, "toy", [TOY_ID])[TOY_ID].tolist() == [0.5, 0.0]

    for _ in app_db(db, monkeypatch):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
        at.query_params["run"] = "toy"
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        card = next(m for m in at.metric if m.label == TOY_ID.upper())
        assert card.value == "0.25" and card.proto.help == TOY_NAME  # its name, from its record
        slider = next(s for s in at.slider if s.label == f"{TOY_ID.upper()} threshold")
        assert slider.value == pytest.approx(0.6)  # its threshold, from its record
