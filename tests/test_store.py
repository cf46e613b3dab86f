"""The DuckDB store: round trips, migrations, and two processes on one file."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evaluators.core.records import Component, Item, JudgeCall, Run, Score, Status, Verdict
from evaluators.storage import ownership, queries, store, writes

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
    ownership.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)
    writes.write_batch(db, "r", **bundle("a"))
    writes.write_batch(db, "r", calls=bundle("a")["calls"])  # the same call twice is stored once
    assert queries.runs.done_item_ids(db, "r") == {"a"}
    item = store.query(db, "SELECT * FROM items")
    assert list(item["sources"].iloc[0]) == ["s1", "s2 ‹tag›"] and item["response"].iloc[0] == "r. é ünïcode"
    assert item["metadata"].iloc[0] == '{"n": 1, "team": "a"}'
    v = store.query(db, "SELECT value, status, evidence, detail FROM verdicts ORDER BY component_idx")
    assert v["status"].tolist() == ["ok", "unparsed"] and v["value"].isna().tolist() == [False, True]
    wide = queries.runs.run_scores_wide(db, "r", ["gr", "rp"])
    assert wide["gr"].iloc[0] == 1.0 and wide["rp"].isna().iloc[0] and wide["n_failed"].iloc[0] == 1
    cache = queries.runs.load_cache(db, "m")
    assert cache["k1"].reply == "<output>1</output>" and cache["k1"].prompt_tokens == 10
    ownership.finish_run(db, "r", "finished", {"calls": 1})
    assert queries.runs.runs(db)[["status", "n_done"]].values.tolist() == [["finished", 1]]


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert store.migrate(db) == store.migrate(db) == len(store.MIGRATIONS)
    assert store.query(db, "SELECT count(*) AS n FROM schema_version")["n"].iloc[0] == len(store.MIGRATIONS)


def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    writes.write_batch(db, "r", **bundle("a"))
    with pytest.raises(Exception):
        writes.write_batch(db, "r", **bundle("a"))  # duplicate item: the whole batch is rolled back
    assert store.query(db, "SELECT count(*) AS n FROM verdicts")["n"].iloc[0] == 2


def _hold_lock(db: Path, seconds: float) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import sys, time
        from evaluators.storage import store
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
    writes.write_batch(db, "r", **bundle("a"))  # retries with jitter until the holder lets go
    holder.wait()
    assert time.monotonic() - started > 0.3
    assert queries.runs.done_item_ids(db, "r") == {"a"}


def test_busy_past_the_deadline_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    holder = _hold_lock(db, 3.0)
    with pytest.raises(store.StoreBusy, match="busy"):
        writes.add_triage(db, "r", "a", "confirmed", "Retriever", "note", "me", deadline_s=0.5)
    holder.wait()
    writes.add_triage(db, "r", "a", "confirmed", "Retriever", "note", "me")
    assert store.query(db, "SELECT count(*) AS n FROM triage")["n"].iloc[0] == 1


def test_a_write_inside_a_reading_block_closes_its_reader_and_the_next_read_sees_it(tmp_path: Path) -> None:
    """A page's reads share one read-only connection (reading()); a note saved on that page opens a
    writer, which DuckDB refuses in this process while the reader is open: the write closes it first
    instead of waiting for itself, and the block's next read opens another."""
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    count = "SELECT count(*) AS n FROM triage"
    with store.reading(db):
        assert store.query(db, count)["n"].iloc[0] == 0  # opens the shared reader
        started = time.monotonic()
        writes.add_triage(db, "r", "a", "confirmed", "Retriever", "note", "me", deadline_s=0.5)
        assert time.monotonic() - started < 0.5  # not retried as busy
        assert store.query(db, count)["n"].iloc[0] == 1
    assert store.query(db, count)["n"].iloc[0] == 1


def _note_from_another_process(db: Path, deadline_s: float) -> subprocess.CompletedProcess:
    code = ("import sys; from evaluators.storage import writes; writes.add_triage(sys.argv[1], 'r', 'b', "
            "'confirmed', 'Retriever', 'note', 'me', deadline_s=float(sys.argv[2]))")
    return subprocess.run([sys.executable, "-c", code, str(db), str(deadline_s)], cwd=ROOT, capture_output=True,
                          text=True)


def _foreign_writer(db: Path) -> subprocess.CompletedProcess:
    """A writer that is not ours in another process (DuckDB alone): it tries the file once, and never says
    it waits."""
    code = "import sys, duckdb; duckdb.connect(sys.argv[1]).close()"
    return subprocess.run([sys.executable, "-c", code, str(db)], cwd=ROOT, capture_output=True, text=True)


def test_a_kept_reader_is_taken_by_the_next_block_and_frees_the_file_when_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page run's reader (reading(keep=True)) is parked when its block ends: the next block reads on it
    without opening the file again. Parked, it holds the file's read lock, so a writer that does not say it
    waits is refused; once the reader has been idle for KEEP_S it is closed and that writer gets in."""
    monkeypatch.setattr(store, "KEEP_S", 3.0)
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    opened = []
    monkeypatch.setattr(store, "_open", lambda *a, _open=store._open: opened.append(a) or _open(*a))
    count = "SELECT count(*) AS n FROM triage"
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 0
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 0
    idle = time.monotonic()
    assert len(opened) == 1  # the second block took the first one's reader
    refused = _foreign_writer(db)
    assert refused.returncode != 0 and "lock" in refused.stderr.lower()
    time.sleep(max(0.0, idle + store.KEEP_S + 0.5 - time.monotonic()))
    written = _foreign_writer(db)
    assert written.returncode == 0, written.stderr


def test_a_writer_in_another_process_that_waits_for_the_file_closes_the_parked_reader(tmp_path: Path) -> None:
    """Refused by a parked reader that would keep the file for KEEP_S (a minute), our writer in another
    process says it waits (the waiting file), and the reader lets the file go: the writer is in well within
    its 8 s deadline, removes the waiting file, and the next block opens the file anew and reads its note."""
    assert store.KEEP_S > 8
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    count = "SELECT count(*) AS n FROM triage"
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 0
    written = _note_from_another_process(db, 8.0)
    assert written.returncode == 0, written.stderr
    assert not store._waiting_file(str(db)).exists()
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 1


def test_a_writer_in_this_process_closes_the_parked_reader_and_the_next_block_sees_its_write(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    count = "SELECT count(*) AS n FROM triage"
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 0
    started = time.monotonic()
    writes.add_triage(db, "r", "a", "confirmed", "Retriever", "note", "me", deadline_s=0.5)
    assert time.monotonic() - started < 0.5  # the parked reader was closed, not waited for
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 1


def test_a_parked_reader_of_a_file_since_replaced_is_closed_and_the_next_block_reads_the_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database replaced by another file (a rebuilt demo, a restored copy) while a reader is parked on the
    old one: the next block opens the new file instead of reading the old one's blocks."""
    db, replacement = tmp_path / "s.duckdb", tmp_path / "new.duckdb"
    store.migrate(db)
    shutil.copy(db, replacement)
    writes.add_triage(replacement, "r", "a", "confirmed", "Retriever", "note", "me")
    opened = []
    monkeypatch.setattr(store, "_open", lambda *a, _open=store._open: opened.append(a) or _open(*a))
    count = "SELECT count(*) AS n FROM triage"
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 0
    os.replace(replacement, db)
    with store.reading(db, keep=True):
        assert store.query(db, count)["n"].iloc[0] == 1
    assert len(opened) == 2  # the parked reader was not taken


def test_a_block_where_duckdb_failed_closes_its_reader_instead_of_parking_it(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    with pytest.raises(store.Error), store.reading(db, keep=True):
        store.query(db, "SELECT count(*) FROM triage")
        store.query(db, "SELECT * FROM no_such_table")
    written = _note_from_another_process(db, 0.3)  # nothing holds the file
    assert written.returncode == 0, written.stderr


def test_reader_never_sees_a_half_written_item(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.migrate(db)
    writer = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from test_store import bundle
        from evaluators.storage import writes
        for k in range(15):
            writes.write_batch({str(db)!r}, "r", **bundle(f"i{{k}}"))
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
    assert queries.runs.done_item_ids(db, "r") == {f"i{k}" for k in range(15)}


def test_missing_db_for_a_reader(tmp_path: Path) -> None:
    with pytest.raises(store.StoreMissing):
        store.query(tmp_path / "nope.duckdb", "SELECT 1")


def test_run_items_and_row_counts(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ownership.start_run(db, Run("r", "m", {}, {}), 1)
    writes.write_batch(db, "r", **bundle("a"))
    items = queries.items.run_items(db, ["r", "other"])
    assert list(items["item_id"]) == ["a"] and list(items["sources"].iloc[0]) == ["s1", "s2 ‹tag›"]
    assert queries.items.run_items(db, ["other"]).empty
    assert queries.runs.row_counts(db) == {"items": 1, "components": 2, "verdicts": 2, "judge_calls": 1}
    with pytest.raises(ValueError):
        queries.runs.row_counts(db, ["items; DROP TABLE runs"])


def test_a_run_name_taken_by_another_evaluation_is_a_run_conflict(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ownership.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)
    ownership.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)  # the same: a resume
    with pytest.raises(ownership.RunConflict, match="already exists") as exc:
        ownership.start_run(db, Run("r", "other", {"metrics": ["gr"]}, {"groundedness": "abc"}), 1)
    assert exc.value.run == "r" and "--" not in str(exc.value)
    with pytest.raises(ownership.RunConflict, match="other prompt files"):
        ownership.start_run(db, Run("r", "m", {"metrics": ["gr"]}, {"groundedness": "new"}), 1)


# ---------------------------------------------------------------- a run's owner: alive while it beats

def owned_by(path: Path, pid: int, beat_age_s: float, host: str | None = None) -> ownership.Owner:
    """A run 'r' owned by another evaluation with this host (default: this one) and pid, its last write
    `beat_age_s` ago with a 1 s heartbeat (three missed beats: 3 s)."""
    import socket

    other = ownership.Owner(host or socket.gethostname(), pid, f"earlier:{pid}:0000")
    ownership.claim_run(path, Run("r", "offline", {}, {}), {"a": "h"}, other, heartbeat_s=1.0)
    with store.connect(path) as con:
        con.execute("UPDATE runs SET heartbeat_at = now()::TIMESTAMP - to_seconds(?) WHERE run_id = 'r'",
                    [beat_age_s])
    return other


def claim(path: Path) -> ownership.Claim:
    return ownership.claim_run(path, Run("r", "offline", {}, {}), {"a": "h"}, ownership.Owner.this_process(), 1.0)


@pytest.mark.parametrize("pid", [1, os.getpid()], ids=["pid 1", "this test's pid"])
def test_a_dead_owner_whose_pid_now_runs_another_process_is_taken_over(tmp_path: Path, pid: int) -> None:
    """kill -9 of `evaluate` as pid 1 in a container with a fixed hostname: the pid lives on in another process."""
    path = tmp_path / "r.duckdb"
    owned_by(path, pid, beat_age_s=74)
    assert claim(path).todo == ["a"]
    assert store.query(path, "SELECT owner FROM runs")["owner"].iloc[0] != f"earlier:{pid}:0000"


def test_an_earlier_process_with_this_process_pid_is_gone_even_with_a_fresh_heartbeat(tmp_path: Path) -> None:
    """The container restarted at once: the rerun is pid 1 again, and pid 1 was the owner."""
    path = tmp_path / "r.duckdb"
    owned_by(path, os.getpid(), beat_age_s=0)
    assert claim(path).todo == ["a"]


def test_a_fresh_heartbeat_of_another_live_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    owned_by(path, 1, beat_age_s=0)  # pid 1 runs on this host
    with pytest.raises(ownership.RunBusy, match=r"pid 1 on .*counts as gone"):
        claim(path)
    owned_by(tmp_path / "h.duckdb", 4242, beat_age_s=0, host="another-host")
    with pytest.raises(ownership.RunBusy):
        claim(tmp_path / "h.duckdb")


def test_another_evaluation_of_this_process_keeps_its_run_while_it_beats(tmp_path: Path) -> None:
    """Two dashboard sessions in one server process: the pid is the same, the first evaluation is alive."""
    path = tmp_path / "r.duckdb"
    ownership.claim_run(path, Run("r", "offline", {}, {}), {"a": "h"}, ownership.Owner.this_process(), heartbeat_s=1.0)
    with pytest.raises(ownership.RunBusy):
        claim(path)
    with store.connect(path) as con:
        con.execute("UPDATE runs SET heartbeat_at = now()::TIMESTAMP - INTERVAL 10 MINUTE")
    assert claim(path).todo == ["a"]
