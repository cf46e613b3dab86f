"""Runs imported from where they live: Phoenix (OpenInference) spans, Langfuse traces, RAGAS datasets and
results, DeepEval test runs. Each fixture in tests/fixtures/imports is written in its tool's documented
shape; each is evaluated end to end with the offline judge into a real DuckDB, its peer scores kept
beside ours, and each format's bad files get located one-line errors with nothing written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd
import pytest

from evaluators import cli
from evaluators.runs.ingest import InputError, detect_format, load_items
from evaluators.storage import queries, store, writes
from tests.conftest import app_db
from tests.test_pages import open_page

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "imports"
PHOENIX, LANGFUSE = FIXTURES / "phoenix_spans.jsonl", FIXTURES / "langfuse_traces.json"
RAGAS_DATASET, RAGAS_RESULTS = FIXTURES / "ragas_dataset.jsonl", FIXTURES / "ragas_results.csv"
DEEPEVAL = FIXTURES / "deepeval_test_run.json"
METRICS = "sp1,gr"  # enough to show our scores beside the imported ones, quickly

REFUND_Q, OFFICES_Q = "How long is the refund window?", "When do the offices close?"
REFUND_SOURCES = ("Refunds are accepted within 30 days of delivery.", "Our offices close on public holidays.")
OFFICES_SOURCES = ("Our offices close on public holidays.", "On weekdays the offices close at 6 pm.")
REFUND_A = "The refund window is 30 days from delivery."
OFFICES_A = "The offices close at 6 pm on weekdays and on public holidays."


def evaluate(path: Path, db: Path, run: str, *extra: str) -> int:
    return cli.main(["evaluate", str(path), "--db", str(db), "--run", run, "--metrics", METRICS, "--quiet", *extra])


def stored_items(db: Path, run: str) -> pd.DataFrame:
    return store.query(db, "SELECT * FROM items WHERE run_id = ? ORDER BY item_id", [run]).set_index("item_id")


def imported(db: Path, run: str) -> dict[tuple[str, str, str], float | None]:
    frame = store.query(db, "SELECT item_id, origin, metric, value FROM imported_scores WHERE run_id = ?", [run])
    return {(r.item_id, r.origin, r.metric): None if pd.isna(r.value) else r.value for r in frame.itertuples()}


def problems(path: Path, fmt: str | None = None) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_items(path, fmt)
    return caught.value.problems


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ---------------------------------------------------------------- detection

def test_each_fixture_is_detected_by_suffix_and_shape(tmp_path: Path) -> None:
    assert {f.name: detect_format(f) for f in (PHOENIX, LANGFUSE, RAGAS_DATASET, RAGAS_RESULTS, DEEPEVAL)} == {
        "phoenix_spans.jsonl": "openinference", "langfuse_traces.json": "langfuse",
        "ragas_dataset.jsonl": "ragas", "ragas_results.csv": "ragas", "deepeval_test_run.json": "deepeval"}
    plain = write_lines(tmp_path / "plain.jsonl", [{"query": "q", "sources": ["s"], "response": "r"}])
    assert detect_format(plain) == "items"
    # RAGAS's new names are our own aliases: without scores beside them the file stays our format, read as
    # before; with scores it is a RAGAS result, and the same items carry the scores.
    row = {"user_input": "q", "retrieved_contexts": ["s"], "response": "r"}
    aliases = write_lines(tmp_path / "aliases.jsonl", [row])
    scored = write_lines(tmp_path / "scored.jsonl", [{**row, "faithfulness": 0.5}])
    assert (detect_format(aliases), detect_format(scored)) == ("items", "ragas")
    assert load_items(aliases) == load_items(scored) and load_items(aliases)[0].metadata == {}
    assert load_items(scored)[0].metadata == {"imported_scores": {"ragas": {"faithfulness": 0.5}}}
    # A Langfuse export with one trace per line is found by its observations.
    lines = write_lines(tmp_path / "traces.jsonl", json.loads(LANGFUSE.read_text()))
    assert detect_format(lines) == "langfuse"
    assert [i.id for i in load_items(lines)] == ["lf-trace-001", "lf-trace-002"]


# ---------------------------------------------------------------- OpenInference (Phoenix)

def test_phoenix_spans_become_items_and_a_run(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    assert evaluate(PHOENIX, db, "phoenix") == 0
    items = stored_items(db, "phoenix")
    refund = items.loc["6a1f3c2e9b7d4e01a2b3c4d5e6f70811"]
    assert refund["query"] == REFUND_Q  # the root span's input
    assert tuple(refund["sources"]) == REFUND_SOURCES  # the retriever's documents, in rank order
    assert refund["response"] == REFUND_A  # the LLM span's output message, not its raw JSON output.value
    meta = json.loads(refund["metadata"])
    assert meta["trace_id"] == "6a1f3c2e9b7d4e01a2b3c4d5e6f70811"
    assert meta["source_ids"] == ["kb/refunds.md#2", "kb/offices.md#1"] and meta["source_scores"] == [0.91, 0.42]
    assert meta["span_ids"] == {"root": "a1b2c3d4e5f60711", "retriever": ["a1b2c3d4e5f60712"],
                                "llm": "a1b2c3d4e5f60713"}
    assert meta["start_time"] == "2026-11-20T09:15:02.120000+00:00"
    # The second trace is written with flat dotted attributes, its query as JSON input.
    offices = items.loc["0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"]
    assert (offices["query"], tuple(offices["sources"]), offices["response"]) == (OFFICES_Q, OFFICES_SOURCES,
                                                                                  OFFICES_A)
    assert json.loads(offices["metadata"])["source_ids"] == ["kb/offices.md#1", "kb/hours.md#3"]
    scores = store.query(db, "SELECT metric, count(*) AS n FROM scores WHERE run_id = 'phoenix' GROUP BY metric")
    assert dict(zip(scores["metric"], scores["n"])) == {"sp1": 2, "gr": 2}
    assert imported(db, "phoenix") == {}  # Phoenix spans carry no peer scores


def phoenix_frame() -> pd.DataFrame:
    """The spans of phoenix_spans.jsonl as Phoenix's get_spans_dataframe() returns them: one row per span,
    `attributes.*` columns holding lists of flat-keyed documents and messages, indexed by context.span_id."""
    t1, t2 = "6a1f3c2e9b7d4e01a2b3c4d5e6f70811", "0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"
    docs = [[{"document.id": "kb/refunds.md#2", "document.content": REFUND_SOURCES[0], "document.score": 0.91},
             {"document.id": "kb/offices.md#1", "document.content": REFUND_SOURCES[1], "document.score": 0.42}],
            [{"document.id": "kb/offices.md#1", "document.content": OFFICES_SOURCES[0], "document.score": 0.88},
             {"document.id": "kb/hours.md#3", "document.content": OFFICES_SOURCES[1], "document.score": 0.77}]]
    spans = [  # span id, trace, kind, parent, start, input, output, documents, output messages
        ("a1b2c3d4e5f60711", t1, "CHAIN", None, "09:15:02.120", REFUND_Q, REFUND_A, None, None),
        ("a1b2c3d4e5f60712", t1, "RETRIEVER", "a1b2c3d4e5f60711", "09:15:02.200", REFUND_Q, None, docs[0], None),
        ("a1b2c3d4e5f60713", t1, "LLM", "a1b2c3d4e5f60711", "09:15:02.500", None, '{"choices": []}', None,
         [{"message.role": "assistant", "message.content": REFUND_A}]),
        ("b1b2c3d4e5f60721", t2, "CHAIN", None, "09:16:10.000", json.dumps({"question": OFFICES_Q}), None, None, None),
        ("b1b2c3d4e5f60722", t2, "RETRIEVER", "b1b2c3d4e5f60721", "09:16:10.100", None, None, docs[1], None),
        ("b1b2c3d4e5f60723", t2, "LLM", "b1b2c3d4e5f60721", "09:16:10.400", None, OFFICES_A, None, None),
    ]
    frame = pd.DataFrame([{
        "name": kind.lower(), "span_kind": kind, "parent_id": parent,
        "start_time": pd.Timestamp(f"2026-11-20T{start}+00:00"), "end_time": pd.Timestamp(f"2026-11-20T{start}+00:00"),
        "status_code": "OK", "context.span_id": span_id, "context.trace_id": trace,
        "attributes.input.value": query,
        "attributes.input.mime_type": "application/json" if query and query.startswith("{") else None,
        "attributes.output.value": output,
        "attributes.retrieval.documents": documents, "attributes.llm.output_messages": messages,
        "attributes.openinference.span.kind": kind,
    } for span_id, trace, kind, parent, start, query, output, documents, messages in spans])
    return frame.set_index("context.span_id")


def test_phoenix_parquet_reads_as_its_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "spans.parquet"
    phoenix_frame().to_parquet(path)
    assert detect_format(path) == "openinference"
    from_parquet, from_jsonl = load_items(path), load_items(PHOENIX)
    assert [(i.id, i.query, i.sources, i.response) for i in from_parquet] == \
        [(i.id, i.query, i.sources, i.response) for i in from_jsonl]
    meta = from_parquet[0].metadata
    assert meta["source_ids"] == ["kb/refunds.md#2", "kb/offices.md#1"]
    assert meta["start_time"] == "2026-11-20T09:15:02.120000+00:00"  # a Parquet timestamp, as ISO text
    db = tmp_path / "t.duckdb"
    assert evaluate(path, db, "parquet") == 0 and len(stored_items(db, "parquet")) == 2


def test_phoenix_bad_spans_are_located(tmp_path: Path) -> None:
    spans = [json.loads(line) for line in PHOENIX.read_text().splitlines()]
    no_retriever = [s for s in spans if s.get("span_kind") != "RETRIEVER" or "context" not in s]
    path = write_lines(tmp_path / "spans.jsonl", no_retriever)
    assert problems(path) == [f"{path}:1: trace 6a1f3c2e9b7d4e01a2b3c4d5e6f70811: no RETRIEVER span "
                              "(its documents are the sources)"]
    no_output = [dict(s) for s in spans]
    no_output[5] = {**spans[5], "attributes": {"openinference.span.kind": "LLM"}}
    no_output[1] = {**spans[1], "context": {"span_id": "x"}}  # a span without its trace id
    path = write_lines(tmp_path / "spans2.jsonl", no_output)
    assert problems(path) == [  # the unreadable span leaves its trace without a retriever too
        f"{path}:1: trace 6a1f3c2e9b7d4e01a2b3c4d5e6f70811: no RETRIEVER span (its documents are the sources)",
        f"{path}:2: field context.trace_id: missing",
        f"{path}:6: field attributes.output.value: trace 0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f: the LLM span has no "
        "output (the response)"]
    empty_doc = [dict(s) for s in spans]
    empty_doc[4] = {**spans[4], "attributes": {**spans[4]["attributes"], "retrieval.documents.1.document.content": 7}}
    path = write_lines(tmp_path / "spans3.jsonl", empty_doc)
    assert problems(path) == [f"{path}:5: field attributes.retrieval.documents.1.document.content: expected text, "
                              "got int"]


# ---------------------------------------------------------------- Langfuse

def test_langfuse_traces_become_items_with_their_scores(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    assert evaluate(LANGFUSE, db, "langfuse") == 0
    items = stored_items(db, "langfuse")
    first = items.loc["lf-trace-001"]
    assert (first["query"], tuple(first["sources"]), first["response"]) == (REFUND_Q, REFUND_SOURCES, REFUND_A)
    meta = json.loads(first["metadata"])
    assert meta["source_ids"] == ["kb/refunds.md#2", "kb/offices.md#1"]
    assert meta["observation_ids"] == {"retriever": ["obs-ret-1"], "generation": "obs-gen-1"}
    assert (meta["timestamp"], meta["session_id"], meta["tags"]) == ("2026-11-21T14:02:11.512Z", "session-42",
                                                                     ["production"])
    second = items.loc["lf-trace-002"]  # a span named retriever, documents under {"documents": [...]}
    assert (second["query"], tuple(second["sources"]), second["response"]) == (OFFICES_Q, OFFICES_SOURCES, OFFICES_A)
    assert json.loads(second["metadata"])["source_ids"] == ["kb/offices.md#1", None]
    # Numeric scores are peer scores (two of one name: their mean); the categorical one is a label and is not.
    assert imported(db, "langfuse") == {("lf-trace-001", "langfuse", "user-feedback"): 0.75}


def test_langfuse_bad_traces_are_located_by_json_path(tmp_path: Path) -> None:
    traces_ = json.loads(LANGFUSE.read_text())
    traces_[0]["observations"] = [o for o in traces_[0]["observations"] if o["type"] != "RETRIEVER"]
    del traces_[1]["input"]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"data": traces_, "meta": {"page": 1}}))
    assert problems(path) == [
        f"{path}:$.data[0]: trace lf-trace-001: no RETRIEVER observation (its output documents are the sources)",
        f"{path}:$.data[1]: field input: trace lf-trace-002: no query text in the trace's input"]
    traces_ = json.loads(LANGFUSE.read_text())
    traces_[1]["observations"][0]["output"] = [{"score": 0.3}]
    del traces_[0]["observations"]
    path.write_text(json.dumps(traces_))
    assert problems(path) == [
        f"{path}:$[0]: field observations: missing (export the traces with their observations)",
        f"{path}:$[1]: field observations[0].output[0]: expected a text or a document with page_content, "
        "content or text"]
    path.write_text('[\n  {"id": "t1",\n   "input": oops}\n]')
    assert problems(path) == [f"{path}:3: malformed JSON: Expecting value at column 13"]


# ---------------------------------------------------------------- RAGAS

def test_ragas_dataset_with_the_old_names(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    assert evaluate(RAGAS_DATASET, db, "ragas") == 0
    items = stored_items(db, "ragas").set_index("query")
    assert tuple(items.loc[REFUND_Q, "sources"]) == REFUND_SOURCES
    assert items.loc[REFUND_Q, "response"] == REFUND_A and items.loc[REFUND_Q, "reference"] == "30 days from delivery."
    assert imported(db, "ragas") == {}  # a dataset has no scores yet


def test_ragas_results_keep_their_scores_beside_ours(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    assert evaluate(RAGAS_RESULTS, db, "results") == 0
    items = stored_items(db, "results")
    by_query = {row["query"]: item_id for item_id, row in items.iterrows()}
    refund, offices = by_query[REFUND_Q], by_query[OFFICES_Q]
    assert tuple(items.loc[refund, "sources"]) == REFUND_SOURCES  # from the Python list pandas wrote
    assert imported(db, "results") == {
        (refund, "ragas", "faithfulness"): 1.0, (refund, "ragas", "answer_relevancy"): 0.9731,
        (refund, "ragas", "context_precision"): 0.9999999999,
        (offices, "ragas", "faithfulness"): 0.5, (offices, "ragas", "answer_relevancy"): None,
        (offices, "ragas", "context_precision"): 1.0}
    # Our scores are ours alone: the imported ones are in no scores row, and the summary counts n of N.
    assert set(store.query(db, "SELECT DISTINCT metric FROM scores WHERE run_id = 'results'")["metric"]) == {"sp1", "gr"}
    summary = queries.runs.imported_summary(db, "results").set_index("metric")
    assert summary.loc["answer_relevancy", ["n_scored", "n_total"]].tolist() == [1, 2]
    assert summary.loc["faithfulness", "mean"] == pytest.approx(0.75)


def test_ragas_results_changed_on_update_replace_their_scores(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    path = tmp_path / "results.csv"
    shutil.copy(RAGAS_RESULTS, path)
    assert evaluate(path, db, "results") == 0
    path.write_text(path.read_text().replace(",0.5,,1.0", ",0.25,0.8,1.0"))
    assert evaluate(path, db, "results") == 2  # the input changed: refused without --update
    assert evaluate(path, db, "results", "--update") == 0
    scores = store.query(db, """SELECT metric, value FROM imported_scores s JOIN items i USING (run_id, item_id)
                                WHERE run_id = 'results' AND i.query = ?""", [OFFICES_Q])
    assert dict(zip(scores["metric"], scores["value"])) == {"faithfulness": 0.25, "answer_relevancy": 0.8,
                                                            "context_precision": 1.0}
    assert store.query(db, "SELECT count(*) AS n FROM imported_scores")["n"].iloc[0] == 6


def test_ragas_bad_rows_are_located(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text('question,contexts,answer,faithfulness\n'
                    'q1,"[""a context""]",an answer,high\n'
                    'q2,not a list,an answer,0.5\n'
                    'q3,"[""c""]",,0.5\n')
    assert problems(path) == [
        f"{path}:2: field faithfulness: expected a number, got 'high'",
        f"{path}:3: field contexts: expected a list of texts (JSON or a Python list), got text that is neither",
        f"{path}:4: field response: missing (also accepted as actual_output)"]
    rows = [{"user_input": REFUND_Q, "retrieved_contexts": list(REFUND_SOURCES), "response": REFUND_A,
             "retrieved_context_ids": ["kb/refunds.md#2", "kb/offices.md#1"], "faithfulness": 1}]
    path = write_lines(tmp_path / "ids.jsonl", [*rows, {**rows[0], "retrieved_context_ids": ["kb/refunds.md#2"]}])
    assert problems(path) == [f"{path}:2: field retrieved_context_ids: 1 ids for 2 contexts"]
    assert load_items(write_lines(path, rows))[0].metadata["source_ids"] == ["kb/refunds.md#2", "kb/offices.md#1"]


# ---------------------------------------------------------------- DeepEval

def test_deepeval_test_run_with_its_metric_results(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    assert evaluate(DEEPEVAL, db, "deepeval") == 0
    items = stored_items(db, "deepeval")
    assert list(items.index) == ["test_case_0", "test_case_1"]
    case = items.loc["test_case_0"]
    assert (case["query"], tuple(case["sources"]), case["response"], case["reference"]) == (
        REFUND_Q, REFUND_SOURCES, REFUND_A, "30 days from delivery.")
    assert json.loads(case["metadata"])["additional_metadata"] == {"release": "2026.11"}
    # An errored metric is kept as no score, never a 0.
    assert imported(db, "deepeval") == {("test_case_0", "deepeval", "Faithfulness"): 1.0,
                                        ("test_case_0", "deepeval", "Contextual Precision"): 0.83,
                                        ("test_case_1", "deepeval", "Faithfulness"): None}


def test_deepeval_bad_cases_are_located_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = json.loads(DEEPEVAL.read_text())
    del run["testCases"][1]["retrievalContext"]
    run["testCases"][0]["metricsData"][1]["score"] = "0.8x"
    run["testCases"][1]["metricsData"].append(dict(run["testCases"][1]["metricsData"][0]))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    assert problems(path) == [f"{path}:$.testCases[0]: field metricsData[1].score: expected a number, got '0.8x'",
                              f"{path}:$.testCases[1]: field retrievalContext: missing (the retrieved sources: a "
                              "RAG test case needs them)"]
    run["testCases"][1]["retrievalContext"] = ["Our offices close on public holidays."]
    path.write_text(json.dumps(run))
    assert problems(path)[1] == f"{path}:$.testCases[1]: field metricsData[1].name: 'Faithfulness' is given twice"
    del run["testCases"][1]["retrievalContext"]
    path.write_text(json.dumps(run))
    db = tmp_path / "t.duckdb"
    assert evaluate(path, db, "bad") == 2
    assert f"{path}:$.testCases[1]: field retrievalContext" in capsys.readouterr().err
    assert not db.exists() or queries.runs.runs(db).empty
    path.write_text(json.dumps({"results": []}))
    assert problems(path) == [f"{path}: neither a Langfuse trace export (traces with observations) nor a DeepEval "
                              "test run (testCases); items go in .jsonl, .csv or .parquet"]
    assert problems(path, "deepeval") == [f"{path}: not a DeepEval test run: expected a testCases (or test_results) "
                                          "list"]
    assert problems(path, "langfuse") == [f"{path}:$: field id: missing (the trace id)"]


def test_format_override_and_a_plain_json_file(tmp_path: Path) -> None:
    # Forced to read as RAGAS, a plain items file works too; forced to OpenInference it is located nonsense.
    plain = write_lines(tmp_path / "plain.jsonl", [{"id": "p1", "query": REFUND_Q, "sources": list(REFUND_SOURCES),
                                                    "response": REFUND_A}])
    assert [i.id for i in load_items(plain, "ragas")] == ["p1"]
    assert problems(plain, "openinference") == [f"{plain}:1: field context.trace_id: missing"]
    assert cli.main(["evaluate", str(plain), "--db", str(tmp_path / "t.duckdb"), "--run", "r",
                     "--format", "nonsense"]) == 2
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"query": REFUND_Q}))
    assert problems(path, "items") == problems(path) == [
        f"{path}: neither a Langfuse trace export (traces with observations) nor a DeepEval test run (testCases); "
        "items go in .jsonl, .csv or .parquet"]


def test_an_older_database_is_upgraded_with_the_imported_scores_table(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        before = next(i for i, sql in enumerate(store.MIGRATIONS) if "CREATE TABLE imported_scores" in sql)
        for version, sql in enumerate(store.MIGRATIONS[:before], start=1):
            con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (?)", [version])
    assert evaluate(DEEPEVAL, db, "upgraded") == 0
    assert store.query(db, "SELECT max(version) AS v FROM schema_version")["v"].iloc[0] == len(store.MIGRATIONS)
    assert len(imported(db, "upgraded")) == 3
    counts = writes.delete_run(db, "upgraded")
    assert counts["imported_scores"] == 3 and imported(db, "upgraded") == {}


# ---------------------------------------------------------------- the dashboard

@pytest.fixture
def imported_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A database with a RAGAS results run and a DeepEval run, served as the app's database."""
    db = tmp_path / "imported.duckdb"
    assert evaluate(RAGAS_RESULTS, db, "ragas-results") == 0
    assert evaluate(DEEPEVAL, db, "deepeval") == 0
    yield from app_db(db, monkeypatch)


def test_run_and_item_pages_show_imported_scores_apart(imported_db: Path) -> None:
    at = open_page("pages/1_Run.py", run="ragas-results")
    table = next(d.value for d in at.dataframe if "imported" in d.value.columns).set_index("imported")
    assert table.loc["imported: ragas faithfulness", "mean"] == "0.75"
    assert table.loc["imported: ragas answer_relevancy", "n scored"] == "1 of 2"
    assert "imported: ragas faithfulness" not in {m.label for m in at.metric}
    item = open_page("pages/2_Item.py", run="deepeval", item="test_case_1")
    caption = " ".join(c.value for c in item.caption)
    assert "imported: deepeval Faithfulness –" in caption  # errored in DeepEval: no score, not 0
    item = open_page("pages/2_Item.py", run="deepeval", item="test_case_0")
    caption = " ".join(c.value for c in item.caption)
    assert "imported: deepeval Faithfulness 1.00" in caption and "imported: deepeval Contextual Precision 0.83" in caption
    # Imported scores are not our metrics: the item's metric tiles are ours only.
    assert {m.label for m in item.metric} == {"SP1", "GR"}


def test_evaluate_page_detects_the_format_and_keeps_peer_scores(imported_db: Path) -> None:
    at = open_page("pages/6_Evaluate.py")
    at.file_uploader(key="upload").set_value((LANGFUSE.name, LANGFUSE.read_bytes(), "application/json"))
    at.run()
    assert any("Detected format: **Langfuse traces**" in c.value for c in at.caption)
    assert at.selectbox(key=f"format:{LANGFUSE.name}").value == "langfuse"
    at.multiselect(key="eval_metrics").set_value(["sp1"])
    at.text_input(key="run_name").set_value("from-langfuse")
    next(b for b in at.button if b.key == "evaluate").click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert any("Run from-langfuse finished: 2 items" in s.value for s in at.success)
    assert imported(imported_db, "from-langfuse") == {("lf-trace-001", "langfuse", "user-feedback"): 0.75}


def test_evaluate_page_shows_a_bad_export_s_located_problems(imported_db: Path) -> None:
    run = json.loads(DEEPEVAL.read_text())
    del run["testCases"][0]["actualOutput"]
    at = open_page("pages/6_Evaluate.py")
    at.file_uploader(key="upload").set_value(("run.json", json.dumps(run).encode(), "application/json"))
    at.run()
    assert at.selectbox(key="format:run.json").value == "deepeval"
    next(b for b in at.button if b.key == "evaluate").click().run()
    assert any("cannot be evaluated" in e.value for e in at.error)
    assert "run.json:$.testCases[0]: field actualOutput: missing" in " ".join(c.value for c in at.code)
    assert sorted(queries.runs.runs(imported_db)["run_id"]) == ["deepeval", "ragas-results"]  # nothing was written


def test_imported_scores_in_a_real_browser(tmp_path: Path) -> None:
    """Run page, then Item page, served by `streamlit run` and read in Chromium."""
    from tests.browser_util import CHROMIUM, CHROMIUM_ARGS, streamlit_server
    from tests.test_browser import TIMEOUT_MS, check_page, grid

    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed")
    db = tmp_path / "imported.duckdb"
    assert evaluate(RAGAS_RESULTS, db, "ragas-results") == 0 and evaluate(DEEPEVAL, db, "deepeval") == 0
    with streamlit_server(db, tmp_path / "streamlit.log") as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(base_url=url)
            page.set_default_timeout(TIMEOUT_MS)
            sync_api.expect.set_options(timeout=TIMEOUT_MS)
            page.goto("/Run?run=ragas-results")
            check_page(page, "Run")
            rows = {r["imported"]: r for r in grid(page, "imported")}
            assert rows["imported: ragas faithfulness"]["mean"] == "0.75"
            assert rows["imported: ragas answer_relevancy"]["n scored"] == "1 of 2"
            page.goto("/Item?run=deepeval&item=test_case_0")
            check_page(page, "Item")
            sync_api.expect(page.get_by_text("imported: deepeval Contextual Precision 0.83")).to_be_visible()
        finally:
            browser.close()
