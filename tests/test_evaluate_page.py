"""The Evaluate page (AppTest): an example of the input with a template that `evaluate` reads, and a run
deleted only once the admin has seen what it removes and confirmed."""

from __future__ import annotations

import json
from pathlib import Path

from evaluators.core.records import Label
from evaluators.dashboard.views import evaluate as view
from evaluators.runs.ingest import load_items
from evaluators.storage import queries, store, writes
from tests.test_pages import all_text, open_page

RUN = "weak-retriever"


def test_the_page_shows_an_example_and_a_three_line_template_that_evaluate_reads(db: Path, tmp_path: Path) -> None:
    at = open_page("pages/6_Evaluate.py")
    (button,) = [b for b in at.get("download_button") if "template" in b.proto.label]
    assert button.proto.label == "Download a three-line template (JSONL)"
    example = next(c.value for c in at.code if '"sources"' in c.value)
    assert json.loads(example)["sources"]  # the example is a whole item, as JSON
    file = tmp_path / "template.jsonl"
    file.write_text(view.TEMPLATE, encoding="utf-8")
    items = load_items(file)
    assert len(view.TEMPLATE.splitlines()) == 3 and [i.id for i in items] == ["q1", "q2", "q3"]
    assert items[2].reference and items[1].metadata == {"retriever": "bm25", "topic": "terminals"}


def _count(db: Path, table: str) -> int:
    return int(store.query(db, f"SELECT count(*) AS n FROM {table} WHERE run_id = ?", [RUN])["n"][0])


def test_deleting_a_run_says_what_it_removes_and_waits_for_the_confirmation(db: Path) -> None:
    writes.add_labels(db, RUN, [Label("q01", 1, rule="T2.2", author="Ana"), Label("q02", 0, rule="T2.3", author="Ana")])
    writes.add_triage(db, RUN, "q01", "confirmed", "Retriever", "misses the fares chunk", "Ana")
    expected = (
        f"{_count(db, 'items')} items, {_count(db, 'verdicts')} verdicts, 2 labels and 1 triage notes"
    )
    at = open_page("pages/6_Evaluate.py")  # no login configured: the local user is an admin
    at.text_input(key="delete_run_name").set_value(RUN)
    at.run()
    next(b for b in at.button if b.key == "delete_run").click().run()
    assert any(expected in w.value for w in at.warning), [w.value for w in at.warning]
    # Cancel leaves the run whole; asking again asks again.
    next(b for b in at.button if b.key == "delete_cancel").click().run()
    assert RUN in set(queries.runs.runs(db)["run_id"]) and not at.warning
    assert not [b for b in at.button if b.key == "delete_confirm"]
    next(b for b in at.button if b.key == "delete_run").click().run()
    assert RUN in set(queries.runs.runs(db)["run_id"])
    next(b for b in at.button if b.key == "delete_confirm").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(f"Deleted the run {RUN}" in s.value for s in at.success)
    assert RUN not in set(queries.runs.runs(db)["run_id"])
    assert queries.items.run_contents(db, RUN) is None
    assert not any("Delete run" in text and "?" in text for text in all_text(at))
