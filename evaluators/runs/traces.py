"""Runs imported from where they live: other tools' exports mapped onto our item fields.

evaluators/ingest.py reads and locates the file (JSONL lines, CSV rows, Parquet rows, or one JSON
document); this module says which format the parsed rows are in (`detect`) and turns them into
rows of our fields (`convert`), which ingest then checks and builds into Items like any other input.
Formats, with which of their fields map where (README, "Importing runs"):

- `openinference`: OpenInference spans as Phoenix exports them (one span per JSONL line or
  Parquet row, attributes nested, flat or as `attributes.*` columns). Spans are grouped by trace:
  the RETRIEVER spans' documents are the sources (in time, then rank order), the last LLM span's
  output the response, the root span's input the query.
- `langfuse`: Langfuse traces with their observations (a JSON array, `{"data": [...]}`, one trace,
  or one trace per JSONL line): the RETRIEVER observation's output documents are the sources, the
  last GENERATION's output (else the trace's output) the response, the trace's input the query.
- `ragas`: RAGAS datasets and result files (old names question/contexts/answer/ground_truth or
  new ones); result score columns become imported peer scores.
- `deepeval`: a DeepEval test run (`testCases` or `test_results`); metric scores become imported
  peer scores.

A trace without a retriever or without a response is a located problem, never a silent skip.
Imported peer scores travel in the item's metadata under IMPORTED ({origin: {metric: value or
None}}), so they are part of the item's content, and the store keeps them in their own table.
This module only maps; it reads no file and imports no engine module.
"""
from __future__ import annotations

import ast
import json
import math
import numbers
import re
from datetime import date, datetime
from typing import Any, Callable

import numpy as np

from evaluators.core.records import IMPORTED

ITEMS, OPENINFERENCE, LANGFUSE, RAGAS, DEEPEVAL = "items", "openinference", "langfuse", "ragas", "deepeval"
FORMATS = (ITEMS, OPENINFERENCE, LANGFUSE, RAGAS, DEEPEVAL)
LABELS = {ITEMS: "RAG Triage items", OPENINFERENCE: "OpenInference spans (Phoenix)", LANGFUSE: "Langfuse traces",
          RAGAS: "RAGAS dataset or results", DEEPEVAL: "DeepEval test run"}
"""How each format is named to a person."""

# The RAGAS score columns we know by name; any other column with a number is imported too.
RAGAS_METRICS = frozenset({
    "faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_entity_recall",
    "answer_correctness", "answer_similarity", "semantic_similarity", "factual_correctness",
    "noise_sensitivity", "noise_sensitivity_relevant", "noise_sensitivity_irrelevant", "response_relevancy",
    "llm_context_precision_with_reference", "llm_context_precision_without_reference",
    "non_llm_context_precision_with_reference", "context_relevance", "response_groundedness",
    "answer_accuracy", "nv_accuracy", "nv_context_relevance", "nv_response_groundedness",
    "context_utilization", "harmfulness", "maliciousness", "coherence", "correctness", "conciseness",
})
# Dataset columns of RAGAS (old name -> ours) and columns that are neither a field nor a score.
_RAGAS_FIELDS = {"question": "query", "user_input": "query", "query": "query", "contexts": "sources",
                 "retrieved_contexts": "sources", "sources": "sources", "answer": "response", "response": "response",
                 "ground_truth": "reference", "ground_truths": "reference", "reference": "reference", "id": "id",
                 "metadata": "metadata"}
_RAGAS_OLD = {"question", "contexts", "answer", "ground_truth", "ground_truths"}
_RAGAS_OTHER = {"reference_contexts", "retrieved_context_ids", "reference_context_ids", "rubrics", "multi_responses",
                "synthesizer_name", "persona_name", "query_style", "query_length", "context"}

Row = tuple[int, str, Any]  # (line or row number, "FILE:LINE" for messages, parsed value), as in ingest
Problem = tuple[int, str]


class _Bad(Exception):
    """One problem found while mapping a record: (where, field or None, message)."""

    def __init__(self, where: str, field: str | None, message: str) -> None:
        super().__init__(f"{where}: field {field}: {message}" if field else f"{where}: {message}")


def detect(suffix: str, rows: list[Row]) -> str:
    """The format of a file's parsed rows (its first row decides; a .json file holds one document).

    Anything that is not recognisably another tool's is our own items format, whose checks then
    say what is wrong with it (a .json file is never items: loading it says so).
    """
    if not rows:
        return ITEMS
    first = rows[0][2]
    if suffix == ".json":
        if isinstance(first, dict) and any(k in first for k in ("testCases", "test_cases", "test_results")):
            return DEEPEVAL
        if isinstance(first, list) or (isinstance(first, dict) and ("observations" in first or "data" in first)):
            return LANGFUSE
        return ITEMS
    if not isinstance(first, dict):
        return ITEMS
    keys = set(first)
    if "observations" in keys:
        return LANGFUSE
    if "span_kind" in keys or "context.span_id" in keys or (
            isinstance(first.get("context"), dict) and "span_id" in first["context"]):
        return OPENINFERENCE
    # The new RAGAS names are also our items format's aliases: only scores beside them make a RAGAS file.
    if keys & _RAGAS_OLD or (keys & RAGAS_METRICS and keys & {"user_input", "retrieved_contexts"}):
        return RAGAS
    return ITEMS


def convert(fmt: str, rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    """Rows of another tool's format as rows of our fields, located where they came from, with the
    problems found (located the same way)."""
    converters: dict[str, Callable[[list[Row], str], tuple[list[Row], list[Problem]]]] = {
        OPENINFERENCE: _openinference, LANGFUSE: _langfuse, RAGAS: _ragas, DEEPEVAL: _deepeval}
    return converters[fmt](rows, name)


# ---------------------------------------------------------------- shared helpers

def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> Any:
    """A parsed value as plain JSON data: Parquet's numpy arrays become lists, timestamps ISO text."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "isoformat"):  # pandas Timestamp
        return value.isoformat()
    return value


def _number(value: Any) -> float | None | str:
    """A score as a float, None for no score (empty, NaN, null), or a string saying why it is not one."""
    if _missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        return f"expected a number, got {value!r}" if isinstance(value, bool) else \
            f"expected a number, got {type(value).__name__}"
    try:
        number = float(value)
    except ValueError:
        return f"expected a number, got {value!r}"
    if math.isnan(number):
        return None
    return number if math.isfinite(number) else f"expected a finite number, got {value!r}"


def _text_list(value: Any, where: str, field: str) -> list[str]:
    """A list of texts: a list, a JSON list, or the Python list repr pandas writes into a CSV cell."""
    value = _plain(value)
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, list):
                value = parsed
                break
        else:
            raise _Bad(where, field, "expected a list of texts (JSON or a Python list), got text that is neither")
    if not isinstance(value, list):
        raise _Bad(where, field, f"expected a list of texts, got {type(value).__name__}")
    for n, text in enumerate(value, start=1):
        if not isinstance(text, str):
            raise _Bad(where, field, f"text {n} of {len(value)}: expected a string, got {type(text).__name__}")
    return value


def _message_text(value: Any) -> str | None:
    """The text of an input or output in the shapes tracing SDKs record: a string, a chat message
    {role, content}, a list of messages (the last one's), an OpenAI reply {choices: [...]}, or an
    object whose query/question/input/output/answer/response/content/text field is a string."""
    value = _plain(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _message_text(value[-1]) if value else None
    if isinstance(value, dict):
        if isinstance(value.get("choices"), list) and value["choices"]:
            first = value["choices"][0]
            return _message_text(first.get("message", first) if isinstance(first, dict) else first)
        for key in ("content", "query", "question", "input", "user_input", "output", "answer", "response", "text",
                    "message", "messages"):
            if key in value:
                found = _message_text(value[key])
                if found is not None:
                    return found
    return None


def _collect(rows: list[Row], build: Callable[[str, Any], dict[str, Any]]) -> tuple[list[Row], list[Problem]]:
    """Map each located record with `build`; a record that fails becomes its problem."""
    out: list[Row] = []
    problems: list[Problem] = []
    for line, where, record in rows:
        try:
            out.append((line, where, build(where, record)))
        except _Bad as bad:
            problems.append((line, str(bad)))
    return out, problems


# ---------------------------------------------------------------- OpenInference (Phoenix)

_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(content|id|score|metadata)$")
_OUT_MESSAGE = re.compile(r"^llm\.output_messages\.(\d+)\.message\.content$")


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    """OpenInference attributes nested ({"retrieval": {"documents": [...]}}), flat with lists
    ("retrieval.documents": [{"document.content": ...}]) or fully flat
    ("retrieval.documents.0.document.content") all become the fully flat form."""
    if isinstance(value, np.ndarray):  # Parquet lists; their elements are converted as they are walked
        value = list(value)
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _flatten(child, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(v, (dict, list, np.ndarray)) for v in value):
        for n, child in enumerate(value):
            _flatten(child, f"{prefix}.{n}", out)
    else:
        out[prefix] = _plain(value)  # a leaf: only leaves are converted, once


def _span(where: str, record: Any) -> dict[str, Any]:
    """One span's fields, flat: trace_id, span_id, parent_id, kind, start/end time, attributes."""
    if not isinstance(record, dict):
        raise _Bad(where, None, f"expected a span object, got {type(record).__name__}")
    flat: dict[str, Any] = {}
    _flatten(record, "", flat)
    attributes = {k.removeprefix("attributes."): v for k, v in flat.items() if k.startswith("attributes.")}
    span = {"trace_id": flat.get("context.trace_id"), "span_id": flat.get("context.span_id"),
            "parent_id": flat.get("parent_id"), "name": flat.get("name"),
            "kind": flat.get("span_kind") or attributes.get("openinference.span.kind"),
            "start_time": flat.get("start_time"), "end_time": flat.get("end_time"), "attributes": attributes}
    for field in ("trace_id", "span_id"):
        if _missing(span[field]) or not str(span[field]).strip():
            raise _Bad(where, f"context.{field}", "missing")
        span[field] = str(span[field])
    if _missing(span["parent_id"]) or span["parent_id"] == "":
        span["parent_id"] = None
    span["kind"] = str(span["kind"]).upper() if not _missing(span["kind"]) else ""
    return span


def _openinference(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    problems: list[Problem] = []
    traces: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    for line, where, record in rows:
        try:
            span = _span(where, record)
        except _Bad as bad:
            problems.append((line, str(bad)))
            continue
        traces.setdefault(span["trace_id"], []).append((line, where, span))
    out: list[Row] = []
    for trace_id, spans in traces.items():
        spans.sort(key=lambda s: (str(s[2]["start_time"] or ""), s[0]))
        roots = [s for s in spans if s[2]["parent_id"] is None]
        line, where, root = (roots or spans)[0]
        try:
            out.append((line, where, _trace_row(trace_id, where, root, spans)))
        except _Bad as bad:
            problems.append((line, str(bad)))
    return out, problems


def _trace_row(trace_id: str, where: str, root: dict[str, Any], spans: list[tuple[int, str, dict[str, Any]]]
               ) -> dict[str, Any]:
    """One trace's item row; its problems name the span (line) they are in."""
    if root["parent_id"] is not None:
        raise _Bad(where, None, f"trace {trace_id}: no root span (every span has a parent_id)")
    query = root["attributes"].get("input.value")
    if _missing(query):
        raise _Bad(where, "attributes.input.value", f"trace {trace_id}: the root span has no input (the query)")
    if root["attributes"].get("input.mime_type") == "application/json" and isinstance(query, str):
        try:
            query = _message_text(json.loads(query))
        except ValueError:
            pass  # not JSON after all: the text is the query
    if not isinstance(query, str):
        raise _Bad(where, "attributes.input.value", f"trace {trace_id}: expected text, got {type(query).__name__}")

    retrievers = [s for s in spans if s[2]["kind"] == "RETRIEVER"]
    if not retrievers:
        raise _Bad(where, None, f"trace {trace_id}: no RETRIEVER span (its documents are the sources)")
    sources, ids, scores = [], [], []
    for _, span_where, span in retrievers:
        docs: dict[int, dict[str, Any]] = {}
        for key, value in span["attributes"].items():
            if match := _DOC.match(key):
                docs.setdefault(int(match[1]), {})[match[2]] = value
        if not docs:
            raise _Bad(span_where, "attributes.retrieval.documents", f"trace {trace_id}: the RETRIEVER span "
                                                                     "has no documents")
        for rank in sorted(docs):
            content = docs[rank].get("content")
            if not isinstance(content, str):
                raise _Bad(span_where, f"attributes.retrieval.documents.{rank}.document.content",
                           "missing" if _missing(content) else f"expected text, got {type(content).__name__}")
            sources.append(content)
            ids.append(None if _missing(docs[rank].get("id")) else str(docs[rank]["id"]))
            score = _number(docs[rank].get("score"))
            scores.append(score if not isinstance(score, str) else None)

    llms = [s for s in spans if s[2]["kind"] == "LLM"]
    if not llms:
        raise _Bad(where, None, f"trace {trace_id}: no LLM span (its output is the response)")
    _, llm_where, llm = llms[-1]
    messages = {int(m[1]): v for k, v in llm["attributes"].items() if (m := _OUT_MESSAGE.match(k))}
    response = messages[max(messages)] if messages else llm["attributes"].get("output.value")
    if llm["attributes"].get("output.mime_type") == "application/json" and isinstance(response, str) and not messages:
        try:
            response = _message_text(json.loads(response))
        except ValueError:
            pass
    if not isinstance(response, str):
        raise _Bad(llm_where, "attributes.output.value",
                   f"trace {trace_id}: the LLM span has no output (the response)" if _missing(response)
                   else f"expected text, got {type(response).__name__}")
    metadata = {"format": OPENINFERENCE, "trace_id": trace_id, "start_time": root["start_time"],
                "end_time": root["end_time"], "source_ids": ids, "source_scores": scores,
                "span_ids": {"root": root["span_id"], "retriever": [s[2]["span_id"] for s in retrievers],
                             "llm": llm["span_id"]}}
    return {"id": trace_id, "query": query, "sources": sources, "response": response, "metadata": metadata}


# ---------------------------------------------------------------- Langfuse

def _langfuse_traces(rows: list[Row], name: str) -> list[Row]:
    """The traces of a Langfuse export, each located: a JSONL line each, or a JSON path into one
    document (an array, the API's {"data": [...]}, or a single trace)."""
    if len(rows) != 1 or rows[0][1] != name:
        return rows  # JSONL: one trace per line
    document = rows[0][2]
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        return [(n, f"{name}:$.data[{n}]", t) for n, t in enumerate(document["data"])]
    if isinstance(document, list):
        return [(n, f"{name}:$[{n}]", t) for n, t in enumerate(document)]
    return [(0, f"{name}:$", document)]


def _documents(output: Any, where: str, field: str) -> tuple[list[str], list[str | None]]:
    """A retriever observation's output: a list (or {"documents": [...]}) of texts or document
    objects (page_content, pageContent, content or text; id, or metadata.id)."""
    output = _plain(output)
    if isinstance(output, dict):
        output = next((output[k] for k in ("documents", "docs", "results", "output") if isinstance(output.get(k), list)),
                      output)
    if not isinstance(output, list) or not output:
        raise _Bad(where, field, "expected a non-empty list of documents"
                   if not _missing(output) else "missing (the retrieved documents are the sources)")
    texts: list[str] = []
    ids: list[str | None] = []
    for n, doc in enumerate(output):
        if isinstance(doc, str):
            texts.append(doc)
            ids.append(None)
            continue
        text = next((doc[k] for k in ("page_content", "pageContent", "content", "text")
                     if isinstance(doc, dict) and isinstance(doc.get(k), str)), None)
        if text is None:
            raise _Bad(where, f"{field}[{n}]", "expected a text or a document with page_content, content or text")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        found = doc.get("id", meta.get("id"))
        texts.append(text)
        ids.append(None if _missing(found) else str(found))
    return texts, ids


def _langfuse(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    def build(where: str, trace: Any) -> dict[str, Any]:
        if not isinstance(trace, dict):
            raise _Bad(where, None, f"expected a Langfuse trace object, got {type(trace).__name__}")
        trace_id = trace.get("id")
        if _missing(trace_id) or not str(trace_id).strip():
            raise _Bad(where, "id", "missing (the trace id)")
        observations = trace.get("observations")
        if not isinstance(observations, list):
            raise _Bad(where, "observations", "expected a list of observations" if "observations" in trace
                       else "missing (export the traces with their observations)")
        located = [(f"observations[{n}]", o) for n, o in enumerate(observations) if isinstance(o, dict)]
        located.sort(key=lambda o: str(o[1].get("startTime") or ""))
        query = _message_text(trace.get("input"))
        if query is None:
            raise _Bad(where, "input", f"trace {trace_id}: no query text in the trace's input")
        retrievers = [(p, o) for p, o in located if str(o.get("type", "")).upper() == "RETRIEVER"
                      or (str(o.get("type", "")).upper() == "SPAN" and "retriev" in str(o.get("name", "")).lower())]
        if not retrievers:
            raise _Bad(where, None, f"trace {trace_id}: no RETRIEVER observation (its output documents are "
                                    "the sources)")
        sources: list[str] = []
        ids: list[str | None] = []
        for path, observation in retrievers:
            texts, doc_ids = _documents(observation.get("output"), where, f"{path}.output")
            sources += texts
            ids += doc_ids
        generations = [(p, o) for p, o in located if str(o.get("type", "")).upper() == "GENERATION"]
        response = _message_text(generations[-1][1].get("output")) if generations else None
        if response is None:
            response = _message_text(trace.get("output"))
        if response is None:
            raise _Bad(where, f"{generations[-1][0]}.output" if generations else "output",
                       f"trace {trace_id}: no response text (a GENERATION's output or the trace's output)")
        given: dict[str, list[float | None]] = {}
        for score in trace.get("scores") or []:
            # Categorical scores are labels, not peer scores (their value is only an index).
            if isinstance(score, dict) and isinstance(score.get("name"), str) and score.get("dataType") != "CATEGORICAL":
                value = _number(score.get("value"))
                if isinstance(value, str):  # a text value is a label too
                    continue
                given.setdefault(score["name"], []).append(value)
        # Several scores of one name (feedback from several users): their mean.
        scores: dict[str, float | None] = {}
        for score_name, values in given.items():
            known = [v for v in values if v is not None]
            scores[score_name] = sum(known) / len(known) if known else None
        metadata = {"format": LANGFUSE, "trace_id": str(trace_id), "timestamp": _plain(trace.get("timestamp")),
                    "name": trace.get("name"), "session_id": trace.get("sessionId"), "user_id": trace.get("userId"),
                    "tags": _plain(trace.get("tags")) or [], "source_ids": ids,
                    "observation_ids": {"retriever": [o.get("id") for _, o in retrievers],
                                        "generation": generations[-1][1].get("id") if generations else None}}
        if scores:
            metadata[IMPORTED] = {LANGFUSE: scores}
        return {"id": str(trace_id), "query": query, "sources": sources, "response": response, "metadata": metadata}

    return _collect(_langfuse_traces(rows, name), build)


# ---------------------------------------------------------------- RAGAS

def _ragas(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    def build(where: str, record: Any) -> dict[str, Any]:
        if not isinstance(record, dict):
            raise _Bad(where, None, f"expected an object, got {type(record).__name__}")
        row: dict[str, Any] = {}
        scores: dict[str, float | None] = {}
        for column, value in record.items():
            ours = _RAGAS_FIELDS.get(column)
            if ours is not None:
                if _missing(value):
                    continue
                if ours in row:
                    raise _Bad(where, ours, f"given under more than one name (one of them {column!r})")
                if ours == "sources":
                    value = _text_list(value, where, column)
                elif ours == "reference" and column == "ground_truths":
                    value = "\n".join(_text_list(value, where, column))
                row[ours] = _plain(value)
            elif column not in _RAGAS_OTHER:
                number = _number(value)
                if isinstance(number, str):
                    if column in RAGAS_METRICS:  # a score column we know must hold scores
                        raise _Bad(where, column, number)
                    continue  # some other column: not a score
                scores[column] = number
        metadata = row.get("metadata", {})
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata)
            except ValueError:
                metadata = None
        if not isinstance(metadata, dict):
            raise _Bad(where, "metadata", "expected a JSON object")
        ids = record.get("retrieved_context_ids")
        if not _missing(ids):  # the ids of the retrieved contexts, for the source ledger
            ids = [str(i) for i in _text_list(ids, where, "retrieved_context_ids")]
            if len(ids) != len(row.get("sources", ids)):
                raise _Bad(where, "retrieved_context_ids", f"{len(ids)} ids for {len(row['sources'])} contexts")
            metadata = {**metadata, "source_ids": ids}
        # No format mark: a RAGAS file without scores reads as the same items as through our own format.
        row["metadata"] = {**metadata, **({IMPORTED: {RAGAS: scores}} if scores else {})}
        return row

    return _collect(rows, build)


# ---------------------------------------------------------------- DeepEval

_DEEPEVAL_NAMES = {"query": ("input",), "response": ("actualOutput", "actual_output"),
                   "sources": ("retrievalContext", "retrieval_context"),
                   "reference": ("expectedOutput", "expected_output")}


def _deepeval(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    document = rows[0][2] if rows else None
    key = next((k for k in ("testCases", "test_cases", "test_results") if isinstance(document, dict)
                and k in document), None)
    if key is None or not isinstance(document[key], list):
        return [], [(0, f"{name}: not a DeepEval test run: expected a testCases (or test_results) list")]
    cases = [(n, f"{name}:$.{key}[{n}]", case) for n, case in enumerate(document[key])]

    def build(where: str, case: Any) -> dict[str, Any]:
        if not isinstance(case, dict):
            raise _Bad(where, None, f"expected a test case object, got {type(case).__name__}")
        row: dict[str, Any] = {}
        for ours, names in _DEEPEVAL_NAMES.items():
            value = next((case[n] for n in names if not _missing(case.get(n))), None)
            if value is None:
                if ours != "reference":
                    raise _Bad(where, names[0], "missing" + (" (the retrieved sources: a RAG test case needs "
                                                             "them)" if ours == "sources" else ""))
                continue
            row[ours] = _text_list(value, where, names[0]) if ours == "sources" else value
        scores: dict[str, float | None] = {}
        metrics = case.get("metricsData", case.get("metrics_data")) or []
        if not isinstance(metrics, list):
            raise _Bad(where, "metricsData", "expected a list of metric results")
        for n, metric in enumerate(metrics):
            if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
                raise _Bad(where, f"metricsData[{n}].name", "missing")
            score = _number(metric.get("score"))
            if isinstance(score, str):
                raise _Bad(where, f"metricsData[{n}].score", score)
            if metric["name"] in scores:
                raise _Bad(where, f"metricsData[{n}].name", f"{metric['name']!r} is given twice")
            scores[metric["name"]] = score  # None: the metric errored (its error is in DeepEval's report)
        test_name = case.get("name")
        if isinstance(test_name, str) and test_name.strip():
            row["id"] = test_name
        extra = case.get("additionalMetadata", case.get("additional_metadata"))
        row["metadata"] = {"format": DEEPEVAL, "test_case": test_name, "success": case.get("success"),
                           **({"additional_metadata": _plain(extra)} if isinstance(extra, dict) else {}),
                           **({IMPORTED: {DEEPEVAL: scores}} if scores else {})}
        return row

    return _collect(cases, build)
