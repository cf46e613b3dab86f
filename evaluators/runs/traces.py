"""Runs imported from where they live: other tools' exports mapped onto our item fields.

evaluators/runs/ingest.py reads and locates the file (JSONL lines, CSV rows, Parquet rows, or one JSON
document); this module says which format the parsed rows are in (`detect`) and turns them into
rows of our fields (`convert`), which ingest then checks and builds into Items like any other input.
The trace formats are mapped here; RAGAS's and DeepEval's result files in results.py.
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

import json
import re
from typing import Any, Callable

import numpy as np

from evaluators.core.records import IMPORTED
from evaluators.runs import results
from evaluators.runs.exports import (
    DEEPEVAL,
    ITEMS,
    LANGFUSE,
    OPENINFERENCE,
    RAGAS,
    Bad,
    Problem,
    Row,
    collect,
    message_text,
    missing,
    number,
    plain,
)

FORMATS = (ITEMS, OPENINFERENCE, LANGFUSE, RAGAS, DEEPEVAL)
LABELS = {
    ITEMS: "RAG Triage items",
    OPENINFERENCE: "OpenInference spans (Phoenix)",
    LANGFUSE: "Langfuse traces",
    RAGAS: "RAGAS dataset or results",
    DEEPEVAL: "DeepEval test run",
}
"""How each format is named to a person."""


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
    if (
        "span_kind" in keys
        or "context.span_id" in keys
        or (isinstance(first.get("context"), dict) and "span_id" in first["context"])
    ):
        return OPENINFERENCE
    # The new RAGAS names are also our items format's aliases: only scores beside them make a RAGAS file.
    if keys & results.RAGAS_OLD or (keys & results.RAGAS_METRICS and keys & {"user_input", "retrieved_contexts"}):
        return RAGAS
    return ITEMS


def convert(fmt: str, rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    """Rows of another tool's format as rows of our fields, located where they came from, with the
    problems found (located the same way)."""
    converters: dict[str, Callable[[list[Row], str], tuple[list[Row], list[Problem]]]] = {
        OPENINFERENCE: _openinference,
        LANGFUSE: _langfuse,
        RAGAS: results.ragas,
        DEEPEVAL: results.deepeval,
    }
    return converters[fmt](rows, name)


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
        out[prefix] = plain(value)  # a leaf: only leaves are converted, once


def _span(where: str, record: Any) -> dict[str, Any]:
    """One span's fields, flat: trace_id, span_id, parent_id, kind, start/end time, attributes."""
    if not isinstance(record, dict):
        raise Bad(where, None, f"expected a span object, got {type(record).__name__}")
    flat: dict[str, Any] = {}
    _flatten(record, "", flat)
    attributes = {k.removeprefix("attributes."): v for k, v in flat.items() if k.startswith("attributes.")}
    span = {
        "trace_id": flat.get("context.trace_id"),
        "span_id": flat.get("context.span_id"),
        "parent_id": flat.get("parent_id"),
        "name": flat.get("name"),
        "kind": flat.get("span_kind") or attributes.get("openinference.span.kind"),
        "start_time": flat.get("start_time"),
        "end_time": flat.get("end_time"),
        "attributes": attributes,
    }
    for field in ("trace_id", "span_id"):
        if missing(span[field]) or not str(span[field]).strip():
            raise Bad(where, f"context.{field}", "missing")
        span[field] = str(span[field])
    if missing(span["parent_id"]) or span["parent_id"] == "":
        span["parent_id"] = None
    span["kind"] = str(span["kind"]).upper() if not missing(span["kind"]) else ""
    return span


def _openinference(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    problems: list[Problem] = []
    traces: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    for line, where, record in rows:
        try:
            span = _span(where, record)
        except Bad as bad:
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
        except Bad as bad:
            problems.append((line, str(bad)))
    return out, problems


def _trace_row(
    trace_id: str, where: str, root: dict[str, Any], spans: list[tuple[int, str, dict[str, Any]]]
) -> dict[str, Any]:
    """One trace's item row; its problems name the span (line) they are in."""
    if root["parent_id"] is not None:
        raise Bad(where, None, f"trace {trace_id}: no root span (every span has a parent_id)")
    query = _root_query(trace_id, where, root)
    retrievers = [s for s in spans if s[2]["kind"] == "RETRIEVER"]
    if not retrievers:
        raise Bad(where, None, f"trace {trace_id}: no RETRIEVER span (its documents are the sources)")
    sources, ids, scores = _retrieved(trace_id, retrievers)
    llms = [s for s in spans if s[2]["kind"] == "LLM"]
    if not llms:
        raise Bad(where, None, f"trace {trace_id}: no LLM span (its output is the response)")
    _, llm_where, llm = llms[-1]
    response = _llm_response(trace_id, llm_where, llm)
    metadata = {
        "format": OPENINFERENCE,
        "trace_id": trace_id,
        "start_time": root["start_time"],
        "end_time": root["end_time"],
        "source_ids": ids,
        "source_scores": scores,
        "span_ids": {
            "root": root["span_id"],
            "retriever": [s[2]["span_id"] for s in retrievers],
            "llm": llm["span_id"],
        },
    }
    return {"id": trace_id, "query": query, "sources": sources, "response": response, "metadata": metadata}


def _root_query(trace_id: str, where: str, root: dict[str, Any]) -> str:
    """The query: the root span's input (a JSON input's query text)."""
    query = root["attributes"].get("input.value")
    if missing(query):
        raise Bad(where, "attributes.input.value", f"trace {trace_id}: the root span has no input (the query)")
    if root["attributes"].get("input.mime_type") == "application/json" and isinstance(query, str):
        try:
            query = message_text(json.loads(query))
        except ValueError:
            pass  # not JSON after all: the text is the query
    if not isinstance(query, str):
        raise Bad(where, "attributes.input.value", f"trace {trace_id}: expected text, got {type(query).__name__}")
    return query


def _retrieved(
    trace_id: str, retrievers: list[tuple[int, str, dict[str, Any]]]
) -> tuple[list[str], list[str | None], list[float | None]]:
    """The sources: every RETRIEVER span's documents in rank order, with their ids and scores."""
    sources: list[str] = []
    ids: list[str | None] = []
    scores: list[float | None] = []
    for _, span_where, span in retrievers:
        docs: dict[int, dict[str, Any]] = {}
        for key, value in span["attributes"].items():
            if match := _DOC.match(key):
                docs.setdefault(int(match[1]), {})[match[2]] = value
        if not docs:
            raise Bad(
                span_where, "attributes.retrieval.documents", f"trace {trace_id}: the RETRIEVER span has no documents"
            )
        for rank in sorted(docs):
            content = docs[rank].get("content")
            if not isinstance(content, str):
                raise Bad(
                    span_where,
                    f"attributes.retrieval.documents.{rank}.document.content",
                    "missing" if missing(content) else f"expected text, got {type(content).__name__}",
                )
            sources.append(content)
            ids.append(None if missing(docs[rank].get("id")) else str(docs[rank]["id"]))
            score = number(docs[rank].get("score"))
            scores.append(score if not isinstance(score, str) else None)
    return sources, ids, scores


def _llm_response(trace_id: str, llm_where: str, llm: dict[str, Any]) -> str:
    """The response: the last LLM span's last output message, else its output value."""
    messages = {int(m[1]): v for k, v in llm["attributes"].items() if (m := _OUT_MESSAGE.match(k))}
    response = messages[max(messages)] if messages else llm["attributes"].get("output.value")
    if llm["attributes"].get("output.mime_type") == "application/json" and isinstance(response, str) and not messages:
        try:
            response = message_text(json.loads(response))
        except ValueError:
            pass
    if not isinstance(response, str):
        raise Bad(
            llm_where,
            "attributes.output.value",
            f"trace {trace_id}: the LLM span has no output (the response)"
            if missing(response)
            else f"expected text, got {type(response).__name__}",
        )
    return response


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
    output = plain(output)
    if isinstance(output, dict):
        output = next(
            (output[k] for k in ("documents", "docs", "results", "output") if isinstance(output.get(k), list)), output
        )
    if not isinstance(output, list) or not output:
        raise Bad(
            where,
            field,
            "expected a non-empty list of documents"
            if not missing(output)
            else "missing (the retrieved documents are the sources)",
        )
    texts: list[str] = []
    ids: list[str | None] = []
    for n, doc in enumerate(output):
        if isinstance(doc, str):
            texts.append(doc)
            ids.append(None)
            continue
        text = next(
            (
                doc[k]
                for k in ("page_content", "pageContent", "content", "text")
                if isinstance(doc, dict) and isinstance(doc.get(k), str)
            ),
            None,
        )
        if text is None:
            raise Bad(where, f"{field}[{n}]", "expected a text or a document with page_content, content or text")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        found = doc.get("id", meta.get("id"))
        texts.append(text)
        ids.append(None if missing(found) else str(found))
    return texts, ids


def _langfuse(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    return collect(_langfuse_traces(rows, name), _langfuse_row)


def _langfuse_row(where: str, trace: Any) -> dict[str, Any]:
    """One Langfuse trace's item row."""
    if not isinstance(trace, dict):
        raise Bad(where, None, f"expected a Langfuse trace object, got {type(trace).__name__}")
    trace_id = trace.get("id")
    if missing(trace_id) or not str(trace_id).strip():
        raise Bad(where, "id", "missing (the trace id)")
    observations = trace.get("observations")
    if not isinstance(observations, list):
        raise Bad(
            where,
            "observations",
            "expected a list of observations"
            if "observations" in trace
            else "missing (export the traces with their observations)",
        )
    located = [(f"observations[{n}]", o) for n, o in enumerate(observations) if isinstance(o, dict)]
    located.sort(key=lambda o: str(o[1].get("startTime") or ""))
    query = message_text(trace.get("input"))
    if query is None:
        raise Bad(where, "input", f"trace {trace_id}: no query text in the trace's input")
    retrievers = [
        (p, o)
        for p, o in located
        if str(o.get("type", "")).upper() == "RETRIEVER"
        or (str(o.get("type", "")).upper() == "SPAN" and "retriev" in str(o.get("name", "")).lower())
    ]
    if not retrievers:
        raise Bad(where, None, f"trace {trace_id}: no RETRIEVER observation (its output documents are the sources)")
    sources, ids = _retrieved_documents(retrievers, where)
    generations = [(p, o) for p, o in located if str(o.get("type", "")).upper() == "GENERATION"]
    response = message_text(generations[-1][1].get("output")) if generations else None
    if response is None:
        response = message_text(trace.get("output"))
    if response is None:
        raise Bad(
            where,
            f"{generations[-1][0]}.output" if generations else "output",
            f"trace {trace_id}: no response text (a GENERATION's output or the trace's output)",
        )
    metadata = {
        "format": LANGFUSE,
        "trace_id": str(trace_id),
        "timestamp": plain(trace.get("timestamp")),
        "name": trace.get("name"),
        "session_id": trace.get("sessionId"),
        "user_id": trace.get("userId"),
        "tags": plain(trace.get("tags")) or [],
        "source_ids": ids,
        "observation_ids": {
            "retriever": [o.get("id") for _, o in retrievers],
            "generation": generations[-1][1].get("id") if generations else None,
        },
    }
    if scores := _langfuse_scores(trace):
        metadata[IMPORTED] = {LANGFUSE: scores}
    return {"id": str(trace_id), "query": query, "sources": sources, "response": response, "metadata": metadata}


def _retrieved_documents(
    retrievers: list[tuple[str, dict[str, Any]]], where: str
) -> tuple[list[str], list[str | None]]:
    """The sources: every retriever observation's output documents, in order, with their ids."""
    sources: list[str] = []
    ids: list[str | None] = []
    for path, observation in retrievers:
        texts, doc_ids = _documents(observation.get("output"), where, f"{path}.output")
        sources += texts
        ids += doc_ids
    return sources, ids


def _langfuse_scores(trace: dict[str, Any]) -> dict[str, float | None]:
    """A trace's numeric scores by name; several of one name (feedback from several users): their mean."""
    given: dict[str, list[float | None]] = {}
    for score in trace.get("scores") or []:
        # Categorical scores are labels, not peer scores (their value is only an index).
        if isinstance(score, dict) and isinstance(score.get("name"), str) and score.get("dataType") != "CATEGORICAL":
            value = number(score.get("value"))
            if isinstance(value, str):  # a text value is a label too
                continue
            given.setdefault(score["name"], []).append(value)
    scores: dict[str, float | None] = {}
    for score_name, values in given.items():
        known = [v for v in values if v is not None]
        scores[score_name] = sum(known) / len(known) if known else None
    return scores
