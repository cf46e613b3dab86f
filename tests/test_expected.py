"""A score's expected value (metrics.expected): the mean of its verdicts' p, unsure ones included,
failures left out; only for a metric whose score is a mean or ref_f1, and never for ratings."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from evaluators.core.confidence import CALIBRATED, LABEL
from evaluators.core.records import CLAIM, Item, Run, Status, Verdict
from evaluators.metrics import registry
from evaluators.metrics.expected import expected, expected_scores
from evaluators.metrics.suites.reference import REFERENCE_CLAIM
from evaluators.metrics.thelma import aggregate_mean, rescore, with_band
from evaluators.storage import ownership, queries, store, writes
from evaluators.storage.queries.items import verdict_records


def verdict(p: float | None, status: Status = Status.OK, *, metric: str = "gr", kind: str = CLAIM, idx: int = 0,
            item: str = "x", value: float | None = None) -> Verdict:
    """A binary verdict decided by p (value 1 from p 0.5), or a failure with neither."""
    if value is None and p is not None:
        value = float(p >= 0.5)
    return Verdict(item, metric, kind, idx, "sources", value, status, p=p, p_kind=None if p is None else CALIBRATED)


def test_the_expected_gr_is_the_mean_p_of_the_answered_verdicts() -> None:
    vs = [verdict(0.9, idx=0), verdict(0.55, Status.UNSURE, idx=1), verdict(0.1, idx=2),
          verdict(None, Status.TIMEOUT, idx=3)]
    got = expected("x", "gr", vs)
    assert got is not None and got.value == pytest.approx(1.55 / 3) and (got.n_scored, got.n_total) == (3, 4)
    assert got.status is Status.OK
    assert aggregate_mean("x", "gr", vs).value == 0.5  # the 0/1 share of the two decided verdicts
    banded = with_band([verdict(0.9, idx=0), verdict(0.55, idx=1), verdict(0.1, idx=2)])  # the runner's reading
    assert banded[1].status is Status.UNSURE and banded[1].value is None
    again = expected("x", "gr", banded)
    assert again is not None and again.value == pytest.approx(got.value)


def test_with_p_at_0_or_1_it_is_the_score() -> None:
    rng = random.Random(3)
    for _ in range(50):
        vs = [verdict(float(rng.random() < 0.5), idx=k) for k in range(rng.randint(1, 6))]
        got = expected("x", "rp", vs)
        assert got is not None and got.value == aggregate_mean("x", "rp", vs).value


def test_ref_f1_is_the_f1_of_its_two_sides() -> None:
    vs = [verdict(0.8, metric="ref_f1", idx=0), verdict(0.6, metric="ref_f1", idx=1),
          verdict(0.2, metric="ref_f1", kind=REFERENCE_CLAIM, idx=0)]
    got = expected("x", "ref_f1", vs)
    assert got is not None and got.value == pytest.approx(2 * 0.7 * 0.2 / 0.9)
    one_side = expected("x", "ref_f1", vs[:2])
    assert one_side is not None and one_side.value is None and one_side.status is Status.EMPTY  # no reference claim


def test_none_where_a_score_is_no_mean_or_a_verdict_has_no_p() -> None:
    assert expected("x", "sqc", [verdict(0.9, metric="sqc")]) is None  # a coverage, not a mean
    assert expected("x", "unknown_metric", [verdict(0.9, metric="unknown_metric")]) is None
    rating = Verdict("x", "gr", CLAIM, 0, "sources", 0.7, Status.OK, evidence=0.7)  # a rating: no p
    assert expected("x", "gr", [verdict(0.9), rating]) is None
    assert expected("x", "gr", [verdict(0.9), verdict(0.4, value=0.5)]) is None  # a value that is not 0 or 1


def test_nothing_answered_reads_the_failure_and_labels_count_as_they_are() -> None:
    failed = expected("x", "gr", [verdict(None, Status.TIMEOUT), verdict(None, Status.TIMEOUT, idx=1),
                                  verdict(None, Status.ERROR, idx=2)])
    assert failed is not None and failed.value is None and failed.status is Status.TIMEOUT and failed.n_scored == 0
    labelled = Verdict("x", "gr", CLAIM, 0, "sources", 1.0, Status.OK, p=1.0, p_kind=LABEL)  # an LLM's plain 1
    got = expected("x", "gr", [labelled, verdict(0.3, idx=1)])
    assert got is not None and got.value == pytest.approx(0.65)


def test_expected_scores_groups_by_item_and_metric_and_leaves_out_metrics_without_one() -> None:
    vs = [verdict(0.9, item="a"), verdict(0.7, item="a", idx=1), verdict(0.2, item="b"),
          verdict(0.9, item="a", metric="sqc")]
    got = expected_scores(vs)
    assert set(got) == {("a", "gr"), ("b", "gr")}
    assert got["a", "gr"].value == pytest.approx(0.8) and got["b", "gr"].value == pytest.approx(0.2)
    assert all(m in registry.METRICS for _, m in got)


def test_stored_verdicts_come_back_as_the_records_written(tmp_path: Path) -> None:
    """queries.items.verdict_records over the verdicts table (a real DuckDB file): NULL p and value read
    None, statuses their members, and item_detail's rows (no item_id, unsure at the band) take the id given."""
    path = tmp_path / "v.duckdb"
    ownership.start_run(path, Run("r", "offline", {}, {}), 1)
    written = [verdict(0.9, idx=0), verdict(0.45, idx=1), verdict(None, Status.TIMEOUT, idx=2)]
    written = [replace(v, target="sources", detail="d", tier="offline") for v in written]
    writes.write_batch(path, "r", items=[Item("x", "Q?", ("S.",), "A. B. C.")], verdicts=written,
                       scores=list(rescore("x", written, {"gr": registry.METRICS["gr"]}).values()))
    frame = store.query(path, "SELECT * FROM verdicts WHERE run_id = 'r' ORDER BY component_idx")
    read = verdict_records(frame)
    assert [(v.item_id, v.component_idx, v.value, v.status, v.p, v.p_kind) for v in read] == [
        (v.item_id, v.component_idx, v.value, v.status, v.p, v.p_kind) for v in written]
    detail = queries.items.item_detail(path, "r", "x")  # p 0.45 is unsure at the default band
    assert [v.status for v in verdict_records(detail["verdicts"], "x")] == [Status.OK, Status.UNSURE, Status.TIMEOUT]
    assert detail["expected"].to_dict("records") == [
        {"metric": "gr", "value": pytest.approx((0.9 + 0.45) / 2), "n_scored": 2, "n_total": 3}]
    assert queries.items.item_detail(path, "r", "x", corrected=True)["expected"].empty  # people's reading: none
