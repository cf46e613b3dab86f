"""Trends: hand-built runs with controlled creation times and item timestamps, the baseline and the
real-change marking (paired when two runs scored the same items, unpaired otherwise), and the page."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from evaluators.core.records import Item, Run, Score, Status
from evaluators.dashboard import charts
from evaluators.metrics import trends
from evaluators.storage import ownership, queries, store, writes
from tests.conftest import app_db

ROOT = Path(__file__).resolve().parents[1]
N = 20


def _run(db: Path, name: str, created: str, values: dict[str, float | None], stamps: dict[str, object] | None = None) -> None:
    """A run whose items carry one GR score each (None: a failed score) and, optionally, a timestamp."""
    items = [Item(i, "q", ("s",), "r", metadata={} if stamps is None or i not in stamps else {"at": stamps[i]})
             for i in values]
    scores = [Score(i, "gr", v, 1 if v is not None else 0, 1, Status.OK if v is not None else Status.ERROR)
              for i, v in values.items()]
    ownership.start_run(db, Run(name, "hand", {}, {}), len(items))
    writes.write_batch(db, name, items=items, scores=scores)
    ownership.finish_run(db, name, "finished", {})
    with store.connect(db) as con:
        con.execute("UPDATE runs SET created_at = ?::TIMESTAMP WHERE run_id = ?", [created, name])


def build_trend_db(path: Path) -> Path:
    """Four runs, created out of name order:
    - base (day 1): items a0..a19, GR 0 on every item;
    - fixed (day 2): the same items, GR 1 on every item: a real rise, paired;
    - other (day 3): other items b0..b19, half 0 half 1 with one failed: unpaired, compared with base;
    - same (day 4): the same items as base, GR 0 again: no change, paired.
    """
    ids = [f"a{i}" for i in range(N)]
    _run(path, "fixed", "2026-01-02 09:00", dict.fromkeys(ids, 1.0))
    _run(path, "base", "2026-01-01 09:00", dict.fromkeys(ids, 0.0))
    _run(path, "other", "2026-01-03 09:00", {f"b{i}": (None if i == 0 else float(i % 2)) for i in range(N)})
    _run(path, "same", "2026-01-04 09:00", dict.fromkeys(ids, 0.0))
    # one run over time: Mon 5 Jan 2026 (two items, one as epoch seconds), Tue 6 Jan (one, with an
    # offset that UTC moves back to Tue), Mon 12 Jan (two, one in milliseconds), and two without a time
    stamps = {"t1": "2026-01-05T08:00:00Z", "t2": 1767603600, "t3": "2026-01-07T01:00:00+02:00",
              "t4": "2026-01-12", "t5": 1768212000000, "t6": "not a time", "t7": 3}
    _run(path, "timed", "2026-01-05 09:00", {"t1": 0.0, "t2": 1.0, "t3": 1.0, "t4": 1.0, "t5": 1.0, "t6": 0.0,
                                             "t7": 0.0}, stamps)
    return path


@pytest.fixture(scope="module")
def trend_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_trend_db(tmp_path_factory.mktemp("trends") / "trends.duckdb")


def _points(db: Path, runs: list[str], baseline: str):
    read = queries.trends.trend_scores(db, runs, baseline)
    frame = trends.points(read["dist"], read["totals"], runs, baseline, read["pairs"])
    return frame.set_index("point")


def test_runs_in_time_order_with_their_counts(trend_db: Path) -> None:
    frame = _points(trend_db, ["base", "fixed", "other"], "base")
    assert list(frame.index) == ["base", "fixed", "other"]
    assert frame.loc["base", "mean"] == 0.0 and frame.loc["fixed", "mean"] == 1.0
    assert (frame.loc["other", "n_scored"], frame.loc["other", "n_total"]) == (N - 1, N)  # the failure is not a 0
    assert frame.loc["other", "mean"] == pytest.approx(10 / 19)
    assert frame.loc["base", "baseline"] and pd.isna(frame.loc["base", "delta"])


def test_a_change_against_the_baseline_is_marked_real_with_the_right_test(trend_db: Path) -> None:
    frame = _points(trend_db, ["base", "fixed", "other", "same"], "base")
    fixed, other, same = frame.loc["fixed"], frame.loc["other"], frame.loc["same"]
    assert (fixed["test"], fixed["real"], fixed["delta"]) == ("paired", True, 1.0)
    assert (same["test"], same["real"], same["delta"]) == ("paired", False, 0.0)
    assert other["test"] == "unpaired" and other["real"]  # 0 everywhere vs about half 1s
    assert other["delta_low"] > 0 and other["delta"] == pytest.approx(10 / 19)
    # another baseline: 'fixed' vs 'same' is a real fall, paired
    moved = _points(trend_db, ["fixed", "same"], "fixed")
    assert (moved.loc["same", "test"], moved.loc["same", "real"], moved.loc["same", "delta"]) == ("paired", True, -1.0)


def test_unpaired_interval_holds_zero_for_equal_sides_and_excludes_it_for_separated_ones() -> None:
    values, counts = np.array([0.0, 1.0]), np.array([50, 50])
    same = trends.unpaired_diff_ci((values, counts), (values, counts))
    assert same.low < 0 < same.high and same.mean == 0.0
    apart = trends.unpaired_diff_ci((values, np.array([90, 10])), (values, np.array([10, 90])))
    assert apart.excludes_zero and apart.mean == pytest.approx(0.8)
    assert trends.unpaired_diff_ci((values, np.array([0, 0])), (values, counts)) is None


def test_buckets_by_day_and_week_from_an_item_timestamp(trend_db: Path) -> None:
    days = queries.trends.trend_buckets(trend_db, "timed", "at", "day")
    totals = dict(zip(days["totals"]["point"].fillna("none"), days["totals"]["n_items"]))
    assert totals == {"2026-01-05": 2, "2026-01-06": 1, "2026-01-12": 2, "none": 2}
    weeks = queries.trends.trend_buckets(trend_db, "timed", "at", "week")
    order = [p for p in weeks["totals"]["point"] if isinstance(p, str)]
    assert order == ["2026-01-05", "2026-01-12"]
    frame = trends.points(weeks["dist"], weeks["totals"], order, "2026-01-05").set_index("point")
    assert (frame.loc["2026-01-05", "n_scored"], frame.loc["2026-01-05", "n_total"]) == (3, 3)
    assert frame.loc["2026-01-05", "mean"] == pytest.approx(2 / 3)
    assert frame.loc["2026-01-12", "test"] == "unpaired" and frame.loc["2026-01-12", "mean"] == 1.0
    with pytest.raises(ValueError):
        queries.trends.trend_buckets(trend_db, "timed", "at", "month; DROP TABLE runs")


def test_a_value_that_is_no_time_is_left_out_and_never_breaks_the_read(tmp_path: Path) -> None:
    """Numbers past any timestamp (inf, nan, 1e400, 1e30) and words DuckDB would read as a time ("epoch",
    "infinity") are items without a readable timestamp, counted apart; before, the numbers failed the
    whole read with a conversion error."""
    db = tmp_path / "odd.duckdb"
    stamps: dict[str, object] = {"o1": "inf", "o2": "nan", "o3": "1e400", "o4": "1e30", "o5": "epoch",
                                 "o6": "infinity", "o7": "-infinity", "o8": " 2026-01-05T08:00:00Z"}
    _run(db, "odd", "2026-01-05 09:00", dict.fromkeys(stamps, 1.0), stamps)
    days = queries.trends.trend_buckets(db, "odd", "at", "day")
    assert dict(zip(days["totals"]["point"].fillna("none"), days["totals"]["n_items"])) == {"2026-01-05": 1, "none": 7}
    assert list(days["dist"]["n"]) == [1]


def test_trend_chart_marks_the_baseline_and_real_changes(trend_db: Path) -> None:
    frame = _points(trend_db, ["base", "fixed", "same"], "base").reset_index()
    fig = charts.trend_chart(frame, ["gr"], ["base", "fixed", "same"])
    trace = fig.data[0]
    assert list(trace.x) == ["base", "fixed", "same"]
    assert list(trace.marker.symbol) == ["star", "diamond", "circle"]
    assert "n scored 20 of 20" in trace.text[1] and "real (paired)" in trace.text[1]


@pytest.fixture
def served(trend_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "served.duckdb"
    path.write_bytes(trend_db.read_bytes())
    yield from app_db(path, monkeypatch)


def _open(**params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/10_Trends.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_trends_page_over_runs_with_a_baseline_from_the_url(served: Path) -> None:
    at = _open(runs="same,base,fixed", base="base")
    table = at.dataframe[0].value
    assert list(table["point"]) == ["base", "fixed", "same"]  # creation order, not the URL's
    assert list(table["n scored"]) == [f"{N} of {N}"] * 3
    assert list(table["real"]) == ["", "✓ real", "noise (CI spans 0)"]
    assert list(table["test"]) == ["", "paired", "paired"]
    assert any("unpaired" in c.value for c in at.caption)
    assert charts.TREND_KEY in [c.value for c in at.caption]  # the markers' key beside the chart
    default = _open()
    assert list(default.dataframe[0].value["point"]) == ["base", "fixed", "other", "same", "timed"]


def test_trends_page_over_time_buckets(served: Path) -> None:
    at = _open(by="time", run="timed", ts="at", unit="week")
    table = at.dataframe[0].value
    assert list(table["point"]) == ["2026-01-05", "2026-01-12"]
    assert list(table["n scored"]) == ["3 of 3", "2 of 2"]
    assert any("2 of 7 items have no readable timestamp" in c.value for c in at.caption)
