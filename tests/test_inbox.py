"""The hosted dashboard's inbox (evaluators/runs/inbox.py): a run file is imported once it is renamed into
place, never while it has a temporary name; a damaged file and a name clash move to rejected/ with a
one-line reason; the same file twice imports once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators.runs import inbox
from evaluators.storage import queries, runfile, store
from tests.seed import seed

RUN = "llm-judge"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ci")
    runfile.export_run(seed(folder / "ci.duckdb"), RUN, folder / "run.duckdb")
    return folder / "run.duckdb"


def _runs(db: Path) -> set[str]:
    return set(queries.runs.runs(db)["run_id"]) if db.exists() else set()


def _drop(exported: Path, folder: Path, name: str) -> Path:
    """Send a file as rsync does: written under a temporary name, then renamed into place."""
    part = folder / f".{name}.part"
    shutil.copy(exported, part)
    return part.rename(folder / name)


def test_a_half_written_file_is_ignored_until_renamed(exported: Path, tmp_path: Path) -> None:
    box, db = tmp_path / "inbox", tmp_path / "hosted.duckdb"
    box.mkdir()
    for temporary in (f".{RUN}.duckdb.abc123", f"{RUN}.duckdb.part", f"{RUN}.duckdb.tmp"):
        (box / temporary).write_bytes(exported.read_bytes()[:10_000])  # an rsync or a sync midway
    assert inbox.scan(box, db) == [] and _runs(db) == set()
    assert len(list(box.iterdir())) == 3  # left alone: not rejected either
    (box / f"{RUN}.duckdb.part").write_bytes(exported.read_bytes())  # the write ends,
    (box / f"{RUN}.duckdb.part").rename(box / f"{RUN}.duckdb")  # then the rename
    (line,) = inbox.scan(box, db)
    sender = runfile.read_info(exported).started_by
    assert line == f"inbox: imported run {RUN} from {RUN}.duckdb (the file says it was sent by {sender})"
    assert _runs(db) == {RUN}
    (moved,) = (box / inbox.IMPORTED).iterdir()
    assert moved.name.endswith(f"-{RUN}.duckdb") and not (box / f"{RUN}.duckdb").exists()


def test_a_damaged_file_moves_to_rejected_with_its_reason(exported: Path, tmp_path: Path) -> None:
    box, db = tmp_path / "inbox", tmp_path / "hosted.duckdb"
    box.mkdir()
    (box / "cut.duckdb").write_bytes(exported.read_bytes()[: exported.stat().st_size // 2])
    _drop(exported, box, "good.duckdb")
    lines = inbox.scan(box, db)
    assert len(lines) == 2 and _runs(db) == {RUN}  # the bad file stops nothing
    rejected = sorted((box / inbox.REJECTED).iterdir())
    assert [p.name.split("-", 1)[1] for p in rejected] == ["cut.duckdb", "cut.duckdb.reason"]
    reason = rejected[1].read_text()
    assert reason.count("\n") == 1 and "cut.duckdb" in reason and "damaged" in reason, reason
    assert any(reason.strip() in line for line in lines)


def test_the_same_file_twice_imports_once(exported: Path, tmp_path: Path) -> None:
    box, db = tmp_path / "inbox", tmp_path / "hosted.duckdb"
    box.mkdir()
    _drop(exported, box, "run.duckdb")
    inbox.scan(box, db)
    items = len(store.query(db, "SELECT * FROM items"))
    _drop(exported, box, "run.duckdb")  # sent again, as a retried CI job does
    (line,) = inbox.scan(box, db)
    assert line == f"inbox: run.duckdb: run {RUN} was already here, nothing imported"
    assert len(store.query(db, "SELECT * FROM items")) == items
    assert len(list((box / inbox.IMPORTED).iterdir())) == 2 and not (box / inbox.REJECTED).exists()


def test_a_name_clash_is_rejected_with_its_reason(exported: Path, tmp_path: Path) -> None:
    box, db = tmp_path / "inbox", tmp_path / "hosted.duckdb"
    box.mkdir()
    _drop(exported, box, "run.duckdb")
    inbox.scan(box, db)
    with store.connect(db) as con:  # the hosted run named so is now another evaluation
        con.execute("UPDATE runs SET judge = 'offline' WHERE run_id = ?", [RUN])
    _drop(exported, box, "again.duckdb")
    (line,) = inbox.scan(box, db)
    reason = next((box / inbox.REJECTED).glob("*.reason")).read_text().strip()
    assert f"a different run is already named '{RUN}'" in reason and reason in line
    assert store.query(db, "SELECT judge FROM runs")["judge"].tolist() == ["offline"]  # untouched


def test_a_busy_database_leaves_the_file_for_the_next_look(exported: Path, tmp_path: Path) -> None:
    box, db = tmp_path / "inbox", tmp_path / "hosted.duckdb"
    box.mkdir()
    store.migrate(db)
    code = "import sys, time, duckdb\ncon = duckdb.connect(sys.argv[1])\nprint('locked', flush=True)\ntime.sleep(300)\n"
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        _drop(exported, box, "run.duckdb")
        assert inbox.scan(box, db) == []  # gave up after the store's deadline, and set nothing aside
        assert (box / "run.duckdb").exists() and not (box / inbox.REJECTED).exists()
    finally:
        holder.terminate()
        holder.wait(timeout=20)
    (line,) = inbox.scan(box, db)
    assert line.startswith(f"inbox: imported run {RUN}") and _runs(db) == {RUN}
