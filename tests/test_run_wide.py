"""The stored per-run score table (run_wide, migration 9): equal to the scores grouped on read after
every kind of write (a new run, a second write, a resumed item, an input update, a deleted run, a
database from before it), and read by the dashboard through queries.runs.run_table()."""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evaluators.core.records import Component, Item, Run, Score, Status, Verdict
from evaluators.metrics.registry import THELMA
from evaluators.storage import health, ownership, queries, store, writes
from tests.seed import RUNS, seed

EXTRA = ["faithfulness"]  # a suite metric beside THELMA's, with its own columns


def _rows(frame: pd.DataFrame) -> list[tuple]:
    """Rows with every missing value as None and numbers as floats, so two reads compare by value."""
    def norm(v: object) -> object:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return None
        return float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else str(v)
    return [tuple(norm(v) for v in row) for row in frame.itertuples(index=False)]


def assert_stored_equals_grouped(db: Path, run_id: str, metrics: list[str] = list(THELMA)) -> None:
    """The dashboard's table from run_wide equals the table grouped from scores and verdicts now."""
    grouped = queries.runs.run_scores_wide(db, run_id, metrics)
    stored = queries.runs.run_table(db, run_id, metrics)
    assert list(stored.columns) == list(grouped.columns)
    assert _rows(stored) == _rows(grouped)


def item(item_id: str, gr: float | None, status: Status = Status.OK, extra: float | None = None) -> dict:
    """One item written whole: a claim with a GR verdict and its score (and a suite metric's)."""
    verdicts = [Verdict(item_id, "gr", "claim", 0, "sources", gr, status, detail="")]
    scores = [Score(item_id, "gr", gr, int(gr is not None), 1, Status.OK if gr is not None else status)]
    if extra is not None:
        scores.append(Score(item_id, "faithfulness", extra, 1, 1, Status.OK))
    return dict(items=[Item(item_id, f"query of {item_id}", ("a source",), "a response.")],
                components=[Component(item_id, "claim", 0, "a claim")], verdicts=verdicts, scores=scores)


@pytest.fixture(scope="module")
def seeded_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed(tmp_path_factory.mktemp("wide") / "seed.duckdb")


def test_every_seeded_run_is_stored_as_grouped(seeded_db: Path) -> None:
    for run_id in RUNS:
        assert_stored_equals_grouped(seeded_db, run_id)
    assert len(queries.runs.run_table(seeded_db, RUNS[0], THELMA)) == 6


def test_a_second_write_a_resumed_item_and_a_new_metric(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    ownership.start_run(db, Run("r", "m", {}, {}), 3)
    writes.write_batch(db, "r", **item("a", 1.0))
    writes.write_batch(db, "r", **item("b", None, Status.TIMEOUT, extra=0.25))  # a second write, a new metric
    assert_stored_equals_grouped(db, "r", EXTRA)
    table = queries.runs.run_table(db, "r", EXTRA).set_index("item_id")
    assert table.loc["b", "failed_metrics"] == "gr:timeout" and table.loc["b", "n_failed"] == 1
    assert table.loc["b", "faithfulness"] == 0.25 and math.isnan(table.loc["a", "faithfulness"])

    owner = ownership.Owner.this_process()
    hashes = {i: Item(i, f"query of {i}", ("a source",), "a response.").content_hash() for i in "ab"}
    claim = ownership.claim_run(db, Run("r", "m", {}, {}), hashes, owner, 5.0, retry_failed=True)
    assert claim.todo == ["b"]
    ownership.write_results(db, "r", owner, **item("b", 0.0), replace=claim.replace)  # resumed: b now scored
    assert_stored_equals_grouped(db, "r", EXTRA)
    table = queries.runs.run_table(db, "r", EXTRA).set_index("item_id")
    assert table.loc["b", "gr"] == 0.0 and table.loc["b", "n_failed"] == 0 and table.loc["b", "failed_metrics"] == ""
    assert math.isnan(table.loc["b", "faithfulness"])  # the replaced item's old suite score is gone


def test_an_input_update_removes_items_and_delete_run_removes_the_run(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    ownership.start_run(db, Run("r", "m", {}, {}), 2)
    ownership.start_run(db, Run("s", "m", {}, {}), 1)
    for i in "ab":
        writes.write_batch(db, "r", **item(i, 1.0))
    writes.write_batch(db, "s", **item("a", 0.0))
    owner = ownership.Owner.this_process()
    only_a = {"a": Item("a", "query of a", ("a source",), "a response.").content_hash()}
    ownership.claim_run(db, Run("r", "m", {}, {}), only_a, owner, 5.0, update=True)  # b left the input
    assert list(queries.runs.run_table(db, "r", THELMA)["item_id"]) == ["a"]
    assert_stored_equals_grouped(db, "r")
    writes.delete_run(db, "r")
    assert store.query(db, "SELECT DISTINCT run_id FROM run_wide")["run_id"].tolist() == ["s"]
    assert_stored_equals_grouped(db, "s")


def test_bulk_frames_are_stored_as_grouped(tmp_path: Path) -> None:
    """writes.write_frames (the scale benchmark's bulk path), past the size where ids go in as a frame."""
    db = tmp_path / "w.duckdb"
    ownership.start_run(db, Run("r", "m", {}, {}), 1500)
    ids = [f"i{k:04d}" for k in range(1500)]
    writes.write_frames(db, {
        "items": pd.DataFrame({"run_id": "r", "item_id": ids, "query": "q", "sources": [["s"]] * 1500,
                               "response": "r", "reference": None, "metadata": "{}"}),
        "verdicts": pd.DataFrame({"run_id": "r", "item_id": ids, "metric": "sp1", "component_kind": "source",
                                  "component_idx": 0, "target": "query", "value": [k % 2 * 1.0 for k in range(1500)],
                                  "status": ["error" if k % 7 == 0 else "ok" for k in range(1500)], "detail": ""}),
        "scores": pd.DataFrame({"run_id": "r", "item_id": ids, "metric": "sp1",
                                "value": [k % 2 * 1.0 for k in range(1500)], "n_scored": 1, "n_total": 1,
                                "status": "ok"}),
    })
    assert_stored_equals_grouped(db, "r")
    assert int(queries.runs.run_table(db, "r", THELMA)["n_failed"].sum()) == len(range(0, 1500, 7))


def test_a_database_from_before_the_table_is_filled_on_migration(seeded_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    db.write_bytes(seeded_db.read_bytes())
    with store.connect(db) as con:  # the file as the version before migration 10 left it
        con.execute("DROP TABLE run_wide")
        con.execute("DROP TABLE run_imports")  # and what the migrations after it add
        con.execute("ALTER TABLE judge_calls DROP COLUMN imported_for")
        con.execute("ALTER TABLE scores DROP COLUMN expected")
        con.execute("DELETE FROM schema_version WHERE version >= 10")
    assert health.check_database(db).state == "older"
    store.migrate(db)
    assert health.check_database(db).state == "ok"
    for run_id in RUNS:
        assert_stored_equals_grouped(db, run_id)


def test_banded_table_is_recomputed_not_stored(seeded_db: Path) -> None:
    """At another band the dashboard's table comes from the verdicts (queries.sql.scores_sql), as the CLI's."""
    band = (0.2, 0.8)
    grouped = queries.runs.run_scores_wide(seeded_db, "llm-judge", list(THELMA), queries.sql.scores_sql(band))
    assert _rows(queries.runs.run_table(seeded_db, "llm-judge", THELMA, queries.sql.scores_sql(band))) == _rows(grouped)


def test_pages_and_summaries_in_the_file_equal_those_in_memory(seeded_db: Path) -> None:
    """Every read over run tables answers the same from the stored table in the file (StoredRun) as from
    the table in memory, and SQL paging returns each matching item once, in order, with the count."""
    metrics = list(THELMA)
    stored = {r: store.StoredRun(str(seeded_db), r, tuple(metrics)) for r in RUNS}
    memory = {r: queries.runs.run_scores_wide(seeded_db, r, metrics) for r in RUNS}
    th = {"sp1": 0.6}
    for kw in ({}, {"sort": "gr", "descending": True}, {"rules": ["T2.2", "T2.5"]}, {"below": ["sqc"]},
               {"failed_only": True}, {"levels": {"sqc": "low", "rqc": "high"}},
               {"ids": pd.DataFrame({"item_id": ["q02", "q05"]})}):
        for run_id in RUNS:
            whole, total = queries.diagnosis.filter_items(memory[run_id], metrics, th, **kw)
            got, n = queries.diagnosis.filter_items(stored[run_id], metrics, th, **kw)
            assert (_rows(got), n) == (_rows(whole), total)
            paged = [queries.diagnosis.filter_items(stored[run_id], metrics, th, limit=2, offset=o, **kw) for o in range(0, 8, 2)]
            assert [i for frame, _ in paged for i in frame["item_id"]] == list(whole["item_id"])
            assert {count for _, count in paged} == {total}
    a, b = RUNS[0], RUNS[1]
    def counts(table: Any, *args: Any) -> Any:
        return queries.diagnosis.rule_counts(queries.diagnosis.profile(table), *args)

    for fn, args in ((queries.diagnosis.profile, ()), (counts, (th, [("sqc", "rqc")])),
                     (queries.diagnosis.sample_points, (metrics,)), (queries.diagnosis.correlations, (metrics,))):
        got, want = fn(stored[a], *args), fn(memory[a], *args)
        assert got == want if isinstance(want, dict) else sorted(_rows(got), key=str) == sorted(_rows(want), key=str)
    assert queries.diagnosis.first_items(counts(stored[a], th)) == queries.diagnosis.first_items(counts(memory[a], th))
    for key in ("summary", "deltas"):
        assert (_rows(queries.compare.compare_tables(stored[a], stored[b], metrics, th)[key])
                == _rows(queries.compare.compare_tables(memory[a], memory[b], metrics, th)[key]))
    assert (_rows(queries.compare.crossed_items(stored[a], stored[b], "sp1", 0.5, "better"))
            == _rows(queries.compare.crossed_items(memory[a], memory[b], "sp1", 0.5, "better")))
    assert (sorted(_rows(queries.compare.preference_agreement(stored[b], stored[a], metrics)))
            == sorted(_rows(queries.compare.preference_agreement(memory[b], memory[a], metrics))))


def test_text_search_matches_the_text_literally_in_any_case(tmp_path: Path) -> None:
    """search_ids reads %, _ and \\ as themselves (not as patterns), in any case, as `in` does in Python."""
    db = tmp_path / "s.duckdb"
    ownership.start_run(db, Run("r", "m", {}, {}), 4)
    texts = {"a": "Save 50% OFF_now", "b": "Save 50 percent off now", "c": "path C:\\Temp\\x", "d": "ÉCOLE ünïcode"}
    for item_id, text in texts.items():
        writes.write_batch(db, "r", items=[Item(item_id, text, ("s",), "r.")])
    for search in ("% off_", "50%", "_", "\\temp\\", "c:\\", "école", "ÜNÏ", "percent", "zzz"):
        want = sorted(i for i, t in texts.items() if search.lower() in t.lower())
        assert sorted(queries.items.search_ids(db, "r", search)["item_id"]) == want, search
