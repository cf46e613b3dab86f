"""The Evaluate page's run-file upload (AppTest): an evaluator adds a run evaluated elsewhere from its run
file, with the same one-line refusals as `import-run` (a damaged file, a taken name), naming the upload."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluators.storage import queries, runfile, store
from tests.test_pages import open_page

RUN = "llm-judge"


@pytest.fixture
def run_file(db: Path, tmp_path: Path) -> bytes:
    """RUN of the seeded database as a run file's bytes; the page's database keeps RUN too."""
    out = tmp_path / "sent.duckdb"
    runfile.export_run(db, RUN, out)
    return out.read_bytes()


def _import(data: bytes, name: str = "", file: str = "sent.duckdb") -> object:
    at = open_page("pages/6_Evaluate.py")  # no login configured: the local user may evaluate
    at.file_uploader(key="run_file").set_value((file, data, "application/octet-stream"))
    at.run()
    at.text_input(key="run_file_as").set_value(name)
    at.run()
    next(b for b in at.button if b.key == "import_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_uploaded_run_file_adds_its_run_under_a_new_name(db: Path, run_file: bytes) -> None:
    at = _import(run_file, "from-ci")
    assert any("Imported run from-ci" in s.value and "6 items" in s.value for s in at.success), at.success
    assert "from-ci" in set(queries.runs.runs(db)["run_id"])
    n = store.query(db, "SELECT count(*) AS n FROM items WHERE run_id = 'from-ci'")["n"][0]
    assert n == 6


def test_the_upload_refuses_a_taken_name_and_a_damaged_file_in_one_line(db: Path, run_file: bytes) -> None:
    with store.connect(db) as con:  # the page's run of that name is another evaluation now
        con.execute("UPDATE runs SET judge = 'offline' WHERE run_id = ?", [RUN])
    at = _import(run_file)
    (error,) = at.error
    assert f"a different run is already named '{RUN}'" in error.value and "Name here" in error.value
    at = _import(run_file[: len(run_file) // 2], file="cut.duckdb")
    (error,) = at.error
    shown = error.value.replace("\\", "")  # markdown's escapes
    assert shown.startswith("cut.duckdb: a damaged run file"), shown
    assert "\n" not in shown and "/tmp" not in shown
    assert len(queries.runs.runs(db)) == 3


def test_the_same_run_file_twice_says_it_is_already_here(db: Path, run_file: bytes) -> None:
    at = _import(run_file)
    assert any(f"Run {RUN} is already here" in i.value for i in at.info), [i.value for i in at.info]
