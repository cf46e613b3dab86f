"""The demo: our corpus and queries, three runs that differ like real pipelines, and a demo
database on which every Table-2 rule fires with the offline judge and default thresholds."""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

# Set before torch loads (see data/build_demo.py): the build is several times slower without it
# on a busy machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from data import build_demo, demo_runs  # noqa: E402
from evaluators.judges import factory
from evaluators.metrics.diagnosis import RULES, TRIAGE_LABELS  # noqa: E402
from evaluators.runs import runner
from evaluators.storage import queries, store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The full demo, built once for this module (about 20-50 s, most of it MiniLM encoding)."""
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    counts = build_demo.build(db, emit=lambda _: None)
    return db, counts


def test_run_files_are_what_the_generator_writes() -> None:
    runs = demo_runs.build_runs(demo_runs.load_corpus(), demo_runs.load_queries())
    assert list(runs) == list(demo_runs.RUNS)
    for name, items in runs.items():
        path = demo_runs.RUNS_DIR / f"{name}.jsonl"
        assert path.read_text(encoding="utf-8") == demo_runs.render(items), f"{path} is stale: run python -m data.demo_runs"


def test_corpus_and_annotations_are_consistent() -> None:
    corpus, queries = demo_runs.load_corpus(), demo_runs.load_queries()
    assert demo_runs.check_annotations(corpus, queries) == []
    assert len({c.doc for c in corpus}) >= 15
    assert len({c.id for c in corpus}) == len(corpus)
    for chunk in corpus:  # chunks are short paragraphs of 2-4 sentences
        assert 2 <= len(re.findall(r"[.!?](?:\s|$)", chunk.text)) <= 4, chunk.id
    assert len(queries) >= 40
    assert sum(len(q.parts) == 2 for q in queries) >= 20
    assert all(q.text.endswith("?") for q in queries)


def test_keyword_retriever_really_misses_parts_that_the_good_one_finds() -> None:
    corpus, queries = demo_runs.load_corpus(), demo_runs.load_queries()
    partial = 0
    for q in queries:
        got = {c.id for c in demo_runs.keyword_retrieve(q.text, corpus)}
        hits = [bool(got & set(p.chunks)) for p in q.parts]
        partial += len(q.parts) > 1 and any(hits) and not all(hits)
        good = {c.id for c in demo_runs.gold_retrieve(q, corpus, extra=True)}
        assert set(q.gold) <= good and len(good) <= len(q.gold) + 1
    assert partial >= 8


def test_demo_has_three_finished_runs_over_the_same_queries(demo: tuple[Path, dict]) -> None:
    db, _ = demo
    runs = queries.runs.runs(db).set_index("run_id")
    assert set(demo_runs.RUNS) <= set(runs.index)
    assert (runs.loc[list(demo_runs.RUNS), "status"] == "finished").all()
    ids = {name: set(store.query(db, "SELECT item_id FROM items WHERE run_id = ?", [name])["item_id"])
           for name in demo_runs.RUNS}
    first = ids[demo_runs.RUNS[0]]
    assert len(first) >= 40
    assert all(other == first for other in ids.values())


def test_every_item_has_every_score(demo: tuple[Path, dict]) -> None:
    """Every metric of every item is scored, or unsure where the offline judge is (a visible outcome,
    left out of the score); none failed."""
    db, counts = demo
    runs = list(demo_runs.RUNS)
    bad = store.query(db, """SELECT run_id, metric, status, count(*) AS n FROM scores
                             WHERE list_contains(?, run_id) AND ((status <> 'ok' AND status <> 'unsure')
                                   OR (status = 'ok') = (value IS NULL)) GROUP BY ALL""", [runs])
    assert bad.empty, bad.to_string()
    unsure = store.query(db, """SELECT run_id, count(DISTINCT item_id) AS n FROM scores
                                WHERE list_contains(?, run_id) AND status = 'unsure' GROUP BY run_id""", [runs])
    assert sum(unsure["n"]) <= 0.1 * sum(c["items"] for c in counts.values()), unsure.to_string()
    per_run = store.query(db, "SELECT run_id, count(*) AS n FROM scores WHERE list_contains(?, run_id) GROUP BY run_id",
                          [runs])
    assert set(per_run["n"]) == {len(build_demo.METRICS) * counts[demo_runs.RUNS[0]]["items"]}
    assert {run: c["missing"] for run, c in counts.items()} == {run: int(unsure.set_index("run_id")["n"].get(run, 0))
                                                                for run in runs}


def test_every_table2_rule_fires_where_the_pipelines_differ(demo: tuple[Path, dict]) -> None:
    _, counts = demo
    for rule in RULES:
        assert sum(c[rule] for c in counts.values()) >= 1, f"{rule} fires nowhere: {counts}"
    weak, better, verbose = (counts[name] for name in demo_runs.RUNS)
    # Each defect shows up in the run that has it, more than in the good run.
    assert weak["T2.2"] > better["T2.2"] and weak["T2.3"] > better["T2.3"] and weak["T2.6"] > better["T2.6"]
    assert verbose["T2.1"] > better["T2.1"] and verbose["T2.5"] > better["T2.5"] and verbose["T2.4"] > better["T2.4"]
    assert verbose["X1"] > better["X1"]  # ours: the generator that embellishes


def test_rebuild_of_a_finished_demo_does_nothing(demo: tuple[Path, dict]) -> None:
    db, counts = demo
    before = db.stat().st_mtime_ns
    said: list[str] = []
    assert build_demo.build(db, emit=said.append) == counts
    assert db.stat().st_mtime_ns == before
    assert said == [f"{db}: demo is up to date"]
    assert not build_demo.temp_path(db).exists()


def test_changed_run_files_make_a_stored_demo_unusable(demo: tuple[Path, dict]) -> None:
    db, _ = demo
    runs = build_demo.run_items()
    assert build_demo.stored_state(db, runs) == (True, True)
    name = demo_runs.RUNS[0]
    edited = runs[name][0].__class__(**{**runs[name][0].__dict__, "response": "Something else."})
    assert build_demo.stored_state(db, {**runs, name: [edited, *runs[name][1:]]}) == (False, False)


def test_an_interrupted_build_resumes_and_only_then_replaces_the_target(demo: tuple[Path, dict],
                                                                        tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    partial = build_demo.temp_path(db)
    name = demo_runs.RUNS[1]
    runner.evaluate(build_demo.run_items()[name][:5], partial, run=name, judge=factory.OFFLINE)
    assert not db.exists()  # a half-built demo is never at the target path
    build_demo.build(db, emit=lambda _: None)  # embeddings are cached in-process by now: quick
    assert db.exists() and not partial.exists()
    assert build_demo.stored_state(db, build_demo.run_items()) == (True, True)


def test_demo_has_the_robustness_runs(demo: tuple[Path, dict]) -> None:
    db, _ = demo
    runs = queries.runs.runs(db).set_index("run_id")
    assert (runs.loc[list(build_demo.GRAMMAR_RUNS), "status"] == "finished").all()
    judged = store.query(db, "SELECT run_id, count(*) AS n FROM grammar_correctness GROUP BY run_id")
    assert set(judged["run_id"]) == set(build_demo.GRAMMAR_RUNS) and (judged["n"] > 0).all()


def _demo_labels(db: Path) -> dict[str, int]:
    """Labels of our own per run in a demo database."""
    held = store.query(db, "SELECT run_id, count(*) AS n FROM labels WHERE author = ? GROUP BY run_id",
                       [build_demo.LABELS_AUTHOR])
    return dict(zip(held["run_id"], held["n"]))


def test_the_demo_ships_our_labels_on_several_runs_and_metrics(demo: tuple[Path, dict]) -> None:
    db, _ = demo
    lines: dict[str, int] = {}
    for run, file in build_demo.label_files():
        lines[run] = lines.get(run, 0) + len(file.read_text(encoding="utf-8").splitlines())
    assert _demo_labels(db) == lines and set(lines) == set(demo_runs.RUNS)
    corrected = store.query(db, "SELECT DISTINCT metric FROM labels WHERE metric IS NOT NULL")
    assert set(corrected["metric"]) >= {"sp1", "sd", "gr"}


def test_trust_opens_on_the_demo_s_labels(demo: tuple[Path, dict], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import app_db
    from tests.test_pages import all_text, frame_with, open_page

    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    for _ in app_db(path, monkeypatch):
        at = open_page("pages/8_Trust.py")  # the newest THELMA run
        table = frame_with(at, "labelled").set_index("target")
        assert (table.loc[["SP1", "SD", "GR"], "labelled"] > 0).all()
        assert table.loc[[t for t in table.index if t.startswith("T2.")], "labelled"].min() >= 20
        assert table["agreement"].notna().sum() >= 5 and table["kappa"].notna().any()
        assert any(text.startswith("**Labels on unsure verdicts:") for text in all_text(at))


def test_trends_over_time_opens_on_the_demo_s_question_times(demo: tuple[Path, dict], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each demo item carries when its query was asked (twelve days of a log), and the Trends page's time
    view picks that field by itself and buckets every item, none left out."""
    from tests.conftest import app_db
    from tests.test_pages import all_text, open_page

    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    for _ in app_db(path, monkeypatch):
        at = open_page("pages/10_Trends.py", by="time", unit="week")
        assert at.selectbox(key="ts").value == "asked_at"
        table = at.dataframe[0].value
        assert list(dict.fromkeys(table["point"])) == ["2026-11-02", "2026-11-09"]
        scored = table.loc[table["metric"] == "GR", "n scored"]
        assert sum(int(s.split(" of ")[1]) for s in scored) == len(build_demo.run_items()["weak_retriever"])
        assert not any("no readable timestamp" in text for text in all_text(at))


def test_a_demo_built_before_it_shipped_labels_gets_them_without_judging(demo: tuple[Path, dict],
                                                                         tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    with store.connect(path) as con:
        con.execute("DELETE FROM labels")
    said: list[str] = []
    build_demo.build(path, emit=said.append)
    assert _demo_labels(path) == _demo_labels(demo[0])
    assert said == [f"{path}: added {sum(_demo_labels(path).values())} demo labels", f"{path}: demo is up to date"]


def _demo_notes(db: Path) -> set[tuple[str, str, str, str, str]]:
    """Triage notes of our own in a demo database: (run, item, label, component, note)."""
    held = store.query(db, "SELECT run_id, item_id, label, component, note FROM triage WHERE author = ?",
                       [build_demo.NOTES_AUTHOR])
    return set(held.itertuples(index=False, name=None))


def _note_lines(file: Path = build_demo.NOTES) -> list[dict]:
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_demo_ships_our_triage_notes_on_every_run(demo: tuple[Path, dict]) -> None:
    db, _ = demo
    lines = _note_lines()
    notes = _demo_notes(db)
    assert notes == {(n["run_id"], n["item_id"], n["label"], n["component"], n["note"]) for n in lines}
    assert len(notes) == len(lines) >= 10  # every line once
    assert {run for run, *_ in notes} == set(demo_runs.RUNS)
    labels = Counter(label for _, _, label, _, _ in notes)
    assert set(labels) == set(TRIAGE_LABELS) and labels["confirmed"] > labels["false alarm"]
    # "fixed" says the better retriever fixed what a note on weak_retriever confirmed as the retriever's
    confirmed = {item for run, item, label, component, _ in notes
                 if run == "weak_retriever" and label == "confirmed" and component == "Retriever"}
    fixed = {(run, item) for run, item, label, _, _ in notes if label == "fixed"}
    assert fixed and all(run == "better_retriever" and item in confirmed for run, item in fixed)


def test_triage_and_an_item_s_triage_tab_open_on_the_demo_s_notes(demo: tuple[Path, dict], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import app_db
    from tests.test_pages import all_text, frame_with, open_page

    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    lines = _note_lines()
    for _ in app_db(path, monkeypatch):
        at = open_page("pages/5_Triage.py")
        assert f"**{len(lines)}** triage notes" in all_text(at)
        assert set(frame_with(at, "note")["item_id"]) == {n["item_id"] for n in lines}
        first = lines[0]
        at = open_page("pages/2_Item.py", run=first["run_id"], item=first["item_id"], tab="Triage")
        notes = frame_with(at, "note")
        assert list(notes["note"]) == [first["note"]] and list(notes["author"]) == [build_demo.NOTES_AUTHOR]


def test_building_the_demo_again_adds_no_notes(demo: tuple[Path, dict], tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    before = store.query(path, "SELECT count(*) AS n FROM triage")["n"].iloc[0]
    said: list[str] = []
    assert build_demo.add_notes(path, emit=said.append) == 0
    build_demo.build(path, emit=said.append)
    assert store.query(path, "SELECT count(*) AS n FROM triage")["n"].iloc[0] == before == len(_note_lines())
    assert said == [f"{path}: demo is up to date"]


def test_a_demo_built_before_it_shipped_notes_gets_them_without_judging(demo: tuple[Path, dict],
                                                                        tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    with store.connect(path) as con:
        con.execute("DELETE FROM triage WHERE author = ?", [build_demo.NOTES_AUTHOR])
        # someone's own note survives the import beside ours
        con.execute("INSERT INTO triage VALUES ('weak_retriever', 'q02', 'confirmed', 'Retriever', 'app-1 ranks "
                    "last', 'triager', now()::TIMESTAMP)")
    verdicts = store.query(path, "SELECT count(*) AS n FROM verdicts")["n"].iloc[0]
    said: list[str] = []
    build_demo.build(path, emit=said.append)
    assert _demo_notes(path) == _demo_notes(demo[0])
    assert said == [f"{path}: added {len(_note_lines())} demo triage notes", f"{path}: demo is up to date"]
    assert store.query(path, "SELECT count(*) AS n FROM verdicts")["n"].iloc[0] == verdicts  # nothing judged
    assert list(store.query(path, "SELECT note FROM triage WHERE author = 'triager'")["note"]) == ["app-1 ranks last"]


BAD_LINES = {
    "label": (lambda n: {**n, "label": "maybe"}, "field label: 'maybe' is not one of confirmed, false alarm, fixed"),
    "component": (lambda n: {**n, "component": "Ranker"}, "field component: 'Ranker' is not one of"),
    "run": (lambda n: {**n, "run_id": "strong_retriever"}, "field run_id: 'strong_retriever' is not one of"),
    "item": (lambda n: {**n, "item_id": "q99"}, "field item_id: run 'weak_retriever' has no item 'q99'"),
    "missing": (lambda n: {k: v for k, v in n.items() if k != "note"}, "field note: missing"),
    "unknown key": (lambda n: {**n, "lable": "fixed"}, "field lable: unknown field"),
    "json": (None, "malformed JSON"),
}


@pytest.mark.parametrize("fault", BAD_LINES)
def test_a_malformed_notes_file_names_file_line_and_field_and_writes_nothing(demo: tuple[Path, dict],
                                                                             tmp_path: Path, fault: str) -> None:
    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo[0].read_bytes())
    with store.connect(path) as con:
        con.execute("DELETE FROM triage")  # lines 1 and 2 would be written, were it line by line
    lines = [{**n, "run_id": "weak_retriever", "item_id": "q06"} for n in _note_lines()[:4]]
    edit, message = BAD_LINES[fault]
    text = [json.dumps(n) for n in lines]
    text[2] = json.dumps(lines[2])[:-1] if edit is None else json.dumps(edit(lines[2]))  # None: cut short
    bad = tmp_path / "notes.jsonl"
    bad.write_text("\n".join(text) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        build_demo.add_notes(path, emit=lambda _: None, file=bad)
    assert str(raised.value).startswith(f"{bad}:3: {message}") and "\n" not in str(raised.value)
    assert store.query(path, "SELECT count(*) AS n FROM triage")["n"].iloc[0] == 0
    text[2] = json.dumps(lines[2])  # the same file, mended, imports whole
    bad.write_text("\n".join(text) + "\n", encoding="utf-8")
    assert build_demo.add_notes(path, emit=lambda _: None, file=bad) == 4


def test_the_docs_figure_for_the_retrievers_moved_sources_is_what_compare_computes(demo: tuple[Path, dict]) -> None:
    """The triage guide quotes Compare's line on the sources the retriever added or dropped, weak → better
    retriever; the figure is the one the page computes on the demo (the README once read SP1 +0.26 where the
    page showed +0.28)."""
    from evaluators.dashboard.views import compare

    db, _ = demo
    changes = queries.compare.retrieval_changes(db, "weak_retriever", "better_retriever", None, False)
    line = compare.retrieval_summary(changes, queries.compare.RETRIEVAL_METRICS)
    first = changes.iloc[0]
    quoted = re.search(r"retriever: (\d+) items, (\d+) dropped, (\d+) added, SP1 ([+-][\d.]+), SQC ([+-][\d.]+), "
                       r"GR ([+-][\d.]+)", (ROOT / "docs" / "guides" / "triage-session.md").read_text(encoding="utf-8"))
    assert quoted, "the guide's figure is gone"
    assert quoted.groups() == (str(int(first["n_items"])), str(int(first["n_dropped"])), str(int(first["n_added"])),
                               *(f"{float(first[f'{m}_mean_delta']):+.2f}" for m in ("sp1", "sqc", "gr")))
    assert f"SP1 {quoted.group(4)}" in line
