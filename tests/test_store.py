"""The DuckDB store: round trips, migrations, and two processes on one file."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evaluators import store
from evaluators.records import Component, Item, JudgeCall, Run, Score, Status, Verdict

ROOT = Path(__file__).resolve().parents[1]


def bundle(item_id: str) -> dict:
    item = Item(item_id, "q?", ("s1", "s2 ‹tag›"), "r. é ünïcode", reference=None, metadata={"team": "a", "n": 1})
    return dict(
        items=[item],
        components=[Component(item_id, "claim", 0, "c0", None, "k1"), Component(item_id, "source_fact", 0, "f", 1, "k1")],
        verdicts=[Verdict(item_id=item_id, metric="gr", component_kind="claim", component_idx=0,
                          target="sources", value=1.0, status=Status.OK, evidence=0.9, call_key="k1",
                          detail="why"),
                  Verdict(item_id=item_id, metric="gr", component_kind="claim", component_idx=1,
                          target="sources", value=None, status=Status.UNPARSED, evidence=None, call_key="k1",
                          detail="raw kept")],
        scores=[Score(item_id, "gr", 1.0, 1, 2, Status.OK), Score(item_id, "rp", None, 0, 0, Status.EMPTY)],
        calls=[JudgeCall("k1", "m", "groundedness", "abc", [{"role": "user", "content": "hi"}], {"temperature": 0},
                         "<output>1</output>", Status.OK, 10, 2, None, 12.5)],
    )


def test_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)
    store.write_batch(db, "r", **bundle("a"))
    store.write_batch(db, "r", calls=bundle("a")["calls"])  # the same call twice is stored once
    assert store.done_item_ids(db, "r") == {"a"}
    item = store.query(db, "SELECT * FROM items")
    assert list(item["sources"].iloc[0]) == ["s1", "s2 ‹tag›"] and item["response"].iloc[0] == "r. é ünïcode"
    assert item["metadata"].iloc[0] == '{"n": 1, "team": "a"}'
    v = store.query(db, "SELECT value, status, evidence, detail FROM verdicts ORDER BY component_idx")
    assert v["status"].tolist() == ["ok", "unparsed"] and v["value"].isna().tolist() == [False, True]
    wide = store.run_scores_wide(db, "r", ["gr", "rp"])
    assert wide["gr"].iloc[0] == 1.0 and wide["rp"].isna().iloc[0] and wide["n_failed"].iloc[0] == 1
    cache = store.load_cache(db, "m")
    assert cache["k1"].reply == "<output>1</output>" and cache["k1"].prompt_tokens == 10
    store.finish_run(db, "r", "finished", {"calls": 1})
    assert store.runs(db)[["status", "n_done"]].values.tolist() == [["finished", 1]]


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert store.migrate(db) == store.migrate(db) == len(store.MIGRATIONS)
    assert store.query(db, "SELECT count(*) AS n FROM schema_version")["n"].iloc[0] == len(store.MIGRATIONS)


def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    store.write_batch(db, "r", **bundle("a"))
    with pytest.raises(Exception):
        store.write_batch(db, "r", **bundle("a"))  # duplicate item: the whole batch is rolled back
    assert store.query(db, "SELECT count(*) AS n FROM verdicts")["n"].iloc[0] == 2


def _hold_lock(db: Path, seconds: float) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import sys, time
        from evaluators import store
        with store.connect({str(db)!r}):
            print("locked", flush=True)
            time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_process_waits_for_the_lock_then_writes(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    holder = _hold_lock(db, 1.0)
    started = time.monotonic()
    store.write_batch(db, "r", **bundle("a"))  # retries with jitter until the holder lets go
    holder.wait()
    assert time.monotonic() - started > 0.3
    assert store.done_item_ids(db, "r") == {"a"}


def test_busy_past_the_deadline_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    holder = _hold_lock(db, 3.0)
    with pytest.raises(store.StoreBusy, match="busy"):
        store.add_triage(db, "r", "a", "confirmed", "Retriever", "note", "me", deadline_s=0.5)
    holder.wait()
    store.add_triage(db, "r", "a", "confirmed", "Retriever", "note", "me")
    assert store.query(db, "SELECT count(*) AS n FROM triage")["n"].iloc[0] == 1


def test_reader_never_sees_a_half_written_item(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    writer = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from test_store import bundle
        from evaluators import store
        for k in range(15):
            store.write_batch({str(db)!r}, "r", **bundle(f"i{{k}}"))
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer], cwd=ROOT)
    seen = 0
    while proc.poll() is None or seen == 0:
        torn = store.query(db, """
            SELECT count(*) AS n FROM items i
            WHERE (SELECT count(*) FROM verdicts v WHERE v.item_id = i.item_id) <> 2
               OR (SELECT count(*) FROM scores s WHERE s.item_id = i.item_id) <> 2""")
        assert torn["n"].iloc[0] == 0
        seen = int(store.query(db, "SELECT count(*) AS n FROM items")["n"].iloc[0])
        if proc.poll() is not None:
            break
        time.sleep(0.05)  # a reader's open blocks the writer's: leave it room
    assert proc.wait() == 0
    assert store.done_item_ids(db, "r") == {f"i{k}" for k in range(15)}


def test_missing_db_for_a_reader(tmp_path: Path) -> None:
    with pytest.raises(store.StoreMissing):
        store.query(tmp_path / "nope.duckdb", "SELECT 1")


def test_run_items_and_row_counts(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.start_run(db, Run("r", "m", {}, {}), 1)
    store.write_batch(db, "r", **bundle("a"))
    items = store.run_items(db, ["r", "other"])
    assert list(items["item_id"]) == ["a"] and list(items["sources"].iloc[0]) == ["s1", "s2 ‹tag›"]
    assert store.run_items(db, ["other"]).empty
    assert store.row_counts(db) == {"items": 1, "components": 2, "verdicts": 2, "judge_calls": 1}
    with pytest.raises(ValueError):
        store.row_counts(db, ["items; DROP TABLE runs"])


def test_a_run_name_taken_by_another_evaluation_is_a_run_conflict(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)
    store.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)  # the same: a resume
    with pytest.raises(store.RunConflict, match="already exists") as exc:
        store.start_run(db, Run("r", "other", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)
    assert exc.value.run == "r" and "--" not in str(exc.value)
    with pytest.raises(store.RunConflict, match="other prompt files"):
        store.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "new"}), 1)
