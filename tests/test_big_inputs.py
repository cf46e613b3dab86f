"""Big inputs degrade, never crash; a failure inside one item stays inside that item.

A 150 KB response is evaluated offline with every THELMA metric beside ordinary items, into DuckDB
(the 1 MB figures come from benchmarks/big_input.py). SD's nearest neighbours are found a block of
rows at a time: its memory grows with n, not n x n. An exception inside one item's metric marks
that metric `error` with the message; the file's other items are stored.
"""
from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from benchmarks.big_input import PARAGRAPH, QUERY, SOURCE
from evaluators.core.records import Item
from evaluators.judges import evidence, factory
from evaluators.metrics.registry import THELMA
from evaluators.metrics.thelma import SD_BLOCK, Cosines, sd_verdicts
from evaluators.runs import runner
from evaluators.storage import queries, store


def with_small_items(big: Item) -> list[Item]:
    return [Item("small-1", QUERY, (SOURCE,), PARAGRAPH), big,
            Item("small-2", QUERY, (SOURCE,), "The tower was completed in 1896.")]


def scores(db: Path) -> dict[tuple[str, str], tuple[float | None, int, str]]:
    frame = store.query(db, "SELECT item_id, metric, value, n_total, status FROM scores")
    return {(r.item_id, r.metric): (None if r.value != r.value else r.value, r.n_total, r.status)
            for r in frame.itertuples()}


def run_status(db: Path) -> str:
    return store.query(db, "SELECT status FROM runs")["status"].iloc[0]


def test_sd_memory_grows_with_n_not_n_squared() -> None:
    n = 10_000  # a full cosine matrix would be 400 MB of float32
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[1] = vectors[0]  # one repeated pair
    tracemalloc.start()
    try:
        verdicts = sd_verdicts("x", Cosines(vectors))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * SD_BLOCK * n * 4 + 20_000_000  # a few blocks of rows and the verdicts, never n x n
    assert len(verdicts) == n
    assert [v.value for v in verdicts[:2]] == [0.0, 0.0] and verdicts[0].target == "sentence:1"
    assert all(0.0 <= v.evidence <= 1.0 for v in verdicts)


def test_a_150_kb_repetitive_response_is_evaluated_beside_the_other_items(tmp_path: Path) -> None:
    big = Item("big", QUERY, (SOURCE,), PARAGRAPH * (150_000 // len(PARAGRAPH)))
    db = tmp_path / "e.duckdb"
    runner.evaluate(with_small_items(big), db, "r", factory.OFFLINE, metrics=THELMA)
    got = scores(db)
    assert {item for item, _ in got} == {"small-1", "big", "small-2"}
    assert all(status == "ok" for (_, _), (_, _, status) in got.items())
    assert got[("big", "sd")][:2] == (0.0, 2984)  # every sentence repeats another
    assert run_status(db) == "finished"


def test_yes_repeated_30000_times_no_longer_crashes_and_states_nothing(tmp_path: Path) -> None:
    # Measured before: a segfault in SD's 30,000 x 30,000 matrix; the run stayed `running`.
    big = Item("big", QUERY, (SOURCE,), "Yes. " * 30_000)
    db = tmp_path / "e.duckdb"
    runner.evaluate(with_small_items(big), db, "r", factory.OFFLINE, metrics=THELMA)
    got = scores(db)
    assert {m: got[("big", m)][2] for m in ("rp", "rqc", "sd", "gr")} == dict.fromkeys(("rp", "rqc", "sd", "gr"),
                                                                                       "empty")
    assert got[("small-2", "gr")] == (1.0, 1, "ok")
    assert run_status(db) == "finished"


def test_a_failure_inside_one_item_marks_its_metric_error_and_the_others_are_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = evidence.support

    def poisoned(claim: str, sources: str, *args: object) -> evidence.Decision:
        if "POISON" in claim:
            raise RuntimeError("cannot read claim POISON")
        return real(claim, sources, *args)

    monkeypatch.setattr(evidence, "support", poisoned)
    bad = Item("bad", QUERY, (SOURCE,), "The tower was completed in 1896. POISON was here.")
    db = tmp_path / "e.duckdb"
    runner.evaluate(with_small_items(bad), db, "r", factory.OFFLINE, metrics=THELMA)
    got = scores(db)
    assert got[("bad", "gr")] == (None, 1, "error")
    assert all(status == "ok" for (item, metric), (_, _, status) in got.items() if (item, metric) != ("bad", "gr"))
    detail = store.query(db, "SELECT detail FROM verdicts WHERE item_id = 'bad' AND metric = 'gr'")["detail"].iloc[0]
    assert detail == "failed inside the engine: RuntimeError: cannot read claim POISON"
    assert len(queries.runs.done_item_ids(db, "r")) == 3
    assert run_status(db) == "finished with failures"
