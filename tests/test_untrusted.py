"""Input from another machine (run files, the inbox, judges files, uploads) tried as an attacker would
(benchmarks/hostile_inputs.py): every case holds. Each failed on main 7d9cddc (the benchmark run there
printed which and why). Beside them, what the import records and shows: who imported a run and what the file
only claims, the cache kept to this database's own calls, and the limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import hostile_inputs
from evaluators.cli import main
from evaluators.storage import queries, runfile, store
from tests.seed import seed

RUN = "llm-judge"


@pytest.mark.parametrize("case", hostile_inputs.CASES, ids=lambda c: f"{c.surface}: {c.name}")
def test_a_hostile_input_is_refused_or_handled_and_does_nothing_else(case: hostile_inputs.Case) -> None:
    assert hostile_inputs.attempt(case) is None


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ci")
    out = folder / "sent.duckdb"
    runfile.export_run(seed(folder / "ci.duckdb"), RUN, out)
    return out


def test_an_import_records_who_imported_it_and_shows_the_file_s_sender_as_a_claim(sent: Path, tmp_path: Path) -> None:
    host = tmp_path / "host.duckdb"
    done = runfile.import_run(sent, host, "from-ci", imported_by="ana@example.com", via="upload")
    assert done.added and done.claimed_by == runfile.read_info(sent).started_by
    (record,) = store.query(host, "SELECT * FROM run_imports").to_dict("records")
    assert (record["run_id"], record["imported_by"], record["via"], record["file_name"]) == (
        "from-ci", "ana@example.com", "upload", "sent.duckdb")
    assert len(record["file_sha256"]) == 64 and record["claimed_by"] == done.claimed_by
    (who,) = queries.runs.runs(host)["who"]
    assert who.startswith("imported by ana@example.com on ") and who.endswith(f"; written as {done.claimed_by} in the file")


def test_imported_calls_never_answer_this_database_s_evaluations_and_leave_with_their_run(sent: Path, tmp_path: Path
                                                                                           ) -> None:
    host = tmp_path / "host.duckdb"
    runfile.import_run(sent, host)
    calls = store.query(host, "SELECT count(*) AS n, count(imported_for) AS marked FROM judge_calls").iloc[0]
    assert calls["n"] > 0 and calls["marked"] == calls["n"]
    model = store.query(host, "SELECT judge FROM runs").iloc[0]["judge"]
    assert queries.runs.load_cache(host, model) == {}
    assert main(["delete-run", "--db", str(host), "--run", RUN]) == 0
    assert store.query(host, "SELECT count(*) AS n FROM judge_calls").iloc[0]["n"] == 0


def test_a_run_file_over_the_size_limit_is_refused_unread(sent: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    host = tmp_path / "host.duckdb"
    assert main(["import-run", str(sent), "--db", str(host), "--max-bytes", "4096"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "over the limit of 4,096" in err and not host.exists()


def test_rows_left_by_a_half_import_of_an_older_version_can_be_deleted(tmp_path: Path) -> None:
    """A run file whose runs table was a view left items and verdicts without a runs row (main 7d9cddc):
    delete-run now removes them."""
    db = seed(tmp_path / "half.duckdb")
    with store.connect(db) as con:
        con.execute("DELETE FROM runs WHERE run_id = ?", [RUN])
    assert main(["delete-run", "--db", str(db), "--run", RUN]) == 0
    assert store.query(db, "SELECT count(*) AS n FROM items WHERE run_id = ?", [RUN]).iloc[0]["n"] == 0
