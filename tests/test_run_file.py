"""Runs as files (evaluators/storage/runfile.py, `export-run` and `import-run`): a run exported from one
database and imported into another keeps every row of every per-run table; a second import of the same
file changes nothing; a taken name is refused unless --as names another; a newer schema and a damaged
file are refused with one line naming the file, and an older schema is upgraded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from evaluators.cli import main
from evaluators.core.records import Label
from evaluators.storage import runfile, store, writes
from evaluators.storage.schema import MIGRATIONS
from tests.seed import seed

RUN = "llm-judge"


def _rich_seed(path: Path) -> Path:
    """The seeded database, with rows for RUN in every per-run table the seed leaves empty."""
    seed(path)
    writes.add_triage(path, RUN, "q01", "confirmed", "Retriever", "misses the fares chunk", "Ana")
    writes.add_labels(path, RUN, [Label("q02", 0, rule="T2.3", author="Ana")])
    with store.connect(path) as con:
        con.execute("INSERT INTO run_inputs SELECT run_id, item_id, 'h-' || item_id FROM items WHERE run_id = ?", [RUN])
        con.execute("INSERT INTO imported_scores VALUES (?, 'q01', 'ragas', 'faithfulness', 0.5)", [RUN])
        con.execute(
            """INSERT INTO grammar_correctness SELECT run_id, item_id, 'g1', 'SELECT 1', 'one', true, 'ok', 'j', '',
               NULL, ['d1'], ['d1'], true, TIMESTAMP '2026-11-01 10:00:00' FROM items WHERE run_id = ?""",
            [RUN],
        )
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _rich_seed(tmp_path_factory.mktemp("source") / "source.duckdb")


@pytest.fixture(scope="module")
def exported(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("file") / f"{RUN}.duckdb"
    assert main(["export-run", "--db", str(source), "--run", RUN, "--out", str(out)]) == 0
    return out


def _run_tables(db: Path) -> list[str]:
    frame = store.query(db, "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id'")
    return sorted(t for t in frame["table_name"] if t != runfile.META)


def _rows(db: Path, table: str, run: str, columns: str = "* EXCLUDE (run_id)") -> pd.DataFrame:
    """A run's rows of a table, in a stable order, the run's name left out."""
    frame = store.query(db, f"SELECT {columns} FROM {table} WHERE run_id = ?", [run])
    return frame.astype(str).sort_values(list(frame.columns)).reset_index(drop=True)


def _calls(db: Path, run: str, key: str = "key") -> pd.DataFrame:
    """The judge calls behind a run's verdicts and components, `key` (SQL over the call) naming each."""
    frame = store.query(
        db,
        f"""SELECT {key} AS name, * EXCLUDE (key, imported_for) FROM judge_calls WHERE key IN (
                SELECT call_key FROM verdicts WHERE run_id = $run UNION SELECT call_key FROM components WHERE run_id = $run)
            ORDER BY name""",
        {"run": run},
    )
    return frame.astype(str).reset_index(drop=True)


# What an import writes differently, on purpose: the people a file names are its claims, no process here
# owns the run, and its calls come under keys of the run's own (see test_what_a_file_says_of_people...).
IMPORT_REWRITES = {"author", "started_by", "owner", "owner_pid", "owner_host", "heartbeat_at", "call_key"}


def assert_same_run(a: Path, run_a: str, b: Path, run_b: str) -> None:
    """Every row of every per-run table, and the judge calls behind them, equal in both databases, but what
    the import of run file rewrites (IMPORT_REWRITES: the calls' keys as sha256 of the run's name and key)."""
    tables = [t for t in _run_tables(a) if t != "run_imports"]
    assert tables == [t for t in _run_tables(b) if t != "run_imports"]
    assert {"items", "labels", "triage", "grammar_correctness", "run_wide"} <= set(tables)
    for table in tables:
        names = store.query(a, f"SELECT * FROM {table} LIMIT 0").columns
        if table == "run_wide":  # a database's run_wide has the columns of all its runs' metrics
            names = store.query(b, "SELECT * FROM run_wide LIMIT 0").columns
        columns = ", ".join(f'"{c}"' for c in names if c not in IMPORT_REWRITES | {"run_id"})
        mine, theirs = _rows(a, table, run_a, columns), _rows(b, table, run_b, columns)
        assert len(mine) > 0, table
        pd.testing.assert_frame_equal(mine, theirs, obj=table)
    assert len(_calls(a, run_a)) > 0
    pd.testing.assert_frame_equal(_calls(a, run_a, f"sha256({store.literal(run_b + chr(10))} || key)"), _calls(b, run_b))


def test_a_round_trip_keeps_every_row_of_every_per_run_table(source: Path, exported: Path, tmp_path: Path) -> None:
    target = tmp_path / "hosted.duckdb"
    assert main(["import-run", str(exported), "--db", str(target)]) == 0
    assert_same_run(source, RUN, target, RUN)
    assert runfile.read_info(exported).started_by  # who sent it, shown where runs list their `who`
    assert set(store.query(target, "SELECT run_id FROM runs")["run_id"]) == {RUN}  # that run only


def test_the_same_file_twice_is_a_no_op(exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "hosted.duckdb"
    assert main(["import-run", str(exported), "--db", str(target)]) == 0
    before = {t: len(_rows(target, t, RUN)) for t in _run_tables(target)}
    capsys.readouterr()
    assert main(["import-run", str(exported), "--db", str(target)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "already in" in out and "nothing imported" in out
    assert {t: len(_rows(target, t, RUN)) for t in _run_tables(target)} == before


def test_a_taken_name_is_refused_unless_as_names_another(
    source: Path, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    target = tmp_path / "other.duckdb"
    shutil.copy(source, target)
    with store.connect(target) as con:  # another evaluation under the same name
        con.execute("UPDATE runs SET params = '{\"metrics\": \"sp1\"}' WHERE run_id = ?", [RUN])
    items = len(_rows(target, "items", RUN))
    capsys.readouterr()
    assert main(["import-run", str(exported), "--db", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"a different run is already named '{RUN}'" in err and "--as" in err
    assert len(_rows(target, "items", RUN)) == items  # nothing written
    assert main(["import-run", str(exported), "--db", str(target), "--as", "from-ci"]) == 0
    assert_same_run(source, RUN, target, "from-ci")


def test_a_file_of_a_newer_schema_is_refused(exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    newer = tmp_path / "newer.duckdb"
    shutil.copy(exported, newer)
    with store.connect(newer) as con:
        con.execute("INSERT INTO schema_version VALUES (?)", [len(MIGRATIONS) + 1])
    target = tmp_path / "hosted.duckdb"
    capsys.readouterr()
    assert main(["import-run", str(newer), "--db", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(newer) in err and "newer version" in err
    assert not target.exists()


def test_a_file_of_an_older_schema_is_upgraded_on_a_copy(source: Path, exported: Path, tmp_path: Path) -> None:
    older = tmp_path / "older.duckdb"
    shutil.copy(exported, older)
    with store.connect(older) as con:  # as schema 8 wrote it: no endpoint column, no run_wide, no record of imports
        con.execute("ALTER TABLE judge_calls DROP COLUMN endpoint")
        con.execute("ALTER TABLE judge_calls DROP COLUMN imported_for")
        con.execute("ALTER TABLE scores DROP COLUMN expected")
        con.execute("DROP TABLE run_wide")
        con.execute("DROP TABLE run_imports")
        con.execute("DELETE FROM schema_version WHERE version > 8")
        con.execute("UPDATE run_file SET schema_version = 8")
    size = older.stat().st_size
    target = tmp_path / "hosted.duckdb"
    assert main(["import-run", str(older), "--db", str(target)]) == 0
    assert older.stat().st_size == size and runfile.read_info(older).schema_version == 8  # the file untouched
    with store.connect(source) as con:  # the source's calls had no endpoint either
        assert con.execute("SELECT count(*) FROM judge_calls WHERE endpoint IS NOT NULL").fetchone()[0] == 0
    assert_same_run(source, RUN, target, RUN)


@pytest.mark.parametrize("damage", ["cut short", "not duckdb", "no run_file table", "overwritten"])
def test_a_damaged_file_is_refused_in_one_line_naming_it(
    source: Path, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, damage: str
) -> None:
    bad = tmp_path / "bad.duckdb"
    data = exported.read_bytes()
    if damage == "cut short":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "not duckdb":
        bad.write_text('{"query": "q"}\n')
    elif damage == "no run_file table":
        shutil.copy(source, bad)
    else:  # every data block overwritten after the headers
        bad.write_bytes(data[: 3 * 4096] + b"\xff" * (len(data) - 3 * 4096))
    target = tmp_path / "hosted.duckdb"
    shutil.copy(source, target)
    runs = len(store.query(target, "SELECT * FROM runs"))
    capsys.readouterr()
    assert main(["import-run", str(bad), "--db", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err, err
    assert len(store.query(target, "SELECT * FROM runs")) == runs


def test_export_writes_under_a_temporary_name_and_names_a_missing_run(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "none.duckdb"
    assert main(["export-run", "--db", str(source), "--run", "nope", "--out", str(out)]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no file, and no temporary one left


def test_a_run_name_that_does_not_show_as_itself_is_refused(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    odd = tmp_path / "odd.duckdb"
    shutil.copy(exported, odd)
    tables = _run_tables(odd) + [runfile.META]
    with store.connect(odd) as con:  # a file from elsewhere, its run named with a zero-width space
        for table in tables:
            con.execute(f"UPDATE {table} SET run_id = ?", [RUN + "\u200b"])
    target = tmp_path / "hosted.duckdb"
    capsys.readouterr()
    assert main(["import-run", str(odd), "--db", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invisible" in err and "--as NEW_NAME" in err
    assert main(["import-run", str(odd), "--db", str(target), "--as", "odd"]) == 0
    assert len(_rows(target, "items", "odd")) == 6
