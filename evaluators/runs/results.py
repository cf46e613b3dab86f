"""Evaluation results imported with their items: RAGAS datasets and result files, and DeepEval test runs.
A result's scores become imported peer scores, kept beside ours (README, "Importing runs")."""

from __future__ import annotations

import json
from typing import Any

from evaluators.core.records import IMPORTED
from evaluators.runs.exports import DEEPEVAL, RAGAS, Bad, Problem, Row, collect, missing, number, plain, text_list

# The RAGAS score columns we know by name; any other column with a number is imported too.
RAGAS_METRICS = frozenset(
    {
        "faithfulness",
        "answer_relevancy",
        "context_precision",
        "context_recall",
        "context_entity_recall",
        "answer_correctness",
        "answer_similarity",
        "semantic_similarity",
        "factual_correctness",
        "noise_sensitivity",
        "noise_sensitivity_relevant",
        "noise_sensitivity_irrelevant",
        "response_relevancy",
        "llm_context_precision_with_reference",
        "llm_context_precision_without_reference",
        "non_llm_context_precision_with_reference",
        "context_relevance",
        "response_groundedness",
        "answer_accuracy",
        "nv_accuracy",
        "nv_context_relevance",
        "nv_response_groundedness",
        "context_utilization",
        "harmfulness",
        "maliciousness",
        "coherence",
        "correctness",
        "conciseness",
    }
)


# Dataset columns of RAGAS (old name -> ours) and columns that are neither a field nor a score.
_RAGAS_FIELDS = {
    "question": "query",
    "user_input": "query",
    "query": "query",
    "contexts": "sources",
    "retrieved_contexts": "sources",
    "sources": "sources",
    "answer": "response",
    "response": "response",
    "ground_truth": "reference",
    "ground_truths": "reference",
    "reference": "reference",
    "id": "id",
    "metadata": "metadata",
}


RAGAS_OLD = {"question", "contexts", "answer", "ground_truth", "ground_truths"}


_RAGAS_OTHER = {
    "reference_contexts",
    "retrieved_context_ids",
    "reference_context_ids",
    "rubrics",
    "multi_responses",
    "synthesizer_name",
    "persona_name",
    "query_style",
    "query_length",
    "context",
}


def ragas(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    def build(where: str, record: Any) -> dict[str, Any]:
        if not isinstance(record, dict):
            raise Bad(where, None, f"expected an object, got {type(record).__name__}")
        row: dict[str, Any] = {}
        scores: dict[str, float | None] = {}
        for column, value in record.items():
            ours = _RAGAS_FIELDS.get(column)
            if ours is not None:
                if missing(value):
                    continue
                if ours in row:
                    raise Bad(where, ours, f"given under more than one name (one of them {column!r})")
                if ours == "sources":
                    value = text_list(value, where, column)
                elif ours == "reference" and column == "ground_truths":
                    value = "\n".join(text_list(value, where, column))
                row[ours] = plain(value)
            elif column not in _RAGAS_OTHER:
                score = number(value)
                if isinstance(score, str):
                    if column in RAGAS_METRICS:  # a score column we know must hold scores
                        raise Bad(where, column, score)
                    continue  # some other column: not a score
                scores[column] = score
        metadata = row.get("metadata", {})
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata)
            except ValueError:
                metadata = None
        if not isinstance(metadata, dict):
            raise Bad(where, "metadata", "expected a JSON object")
        ids = record.get("retrieved_context_ids")
        if not missing(ids):  # the ids of the retrieved contexts, for the source ledger
            ids = [str(i) for i in text_list(ids, where, "retrieved_context_ids")]
            if len(ids) != len(row.get("sources", ids)):
                raise Bad(where, "retrieved_context_ids", f"{len(ids)} ids for {len(row['sources'])} contexts")
            metadata = {**metadata, "source_ids": ids}
        # No format mark: a RAGAS file without scores reads as the same items as through our own format.
        row["metadata"] = {**metadata, **({IMPORTED: {RAGAS: scores}} if scores else {})}
        return row

    return collect(rows, build)


_DEEPEVAL_NAMES = {
    "query": ("input",),
    "response": ("actualOutput", "actual_output"),
    "sources": ("retrievalContext", "retrieval_context"),
    "reference": ("expectedOutput", "expected_output"),
}


def deepeval(rows: list[Row], name: str) -> tuple[list[Row], list[Problem]]:
    document = rows[0][2] if rows else None
    key = next(
        (k for k in ("testCases", "test_cases", "test_results") if isinstance(document, dict) and k in document), None
    )
    if key is None or not isinstance(document, dict) or not isinstance(document[key], list):
        return [], [(0, f"{name}: not a DeepEval test run: expected a testCases (or test_results) list")]
    cases = [(n, f"{name}:$.{key}[{n}]", case) for n, case in enumerate(document[key])]

    def build(where: str, case: Any) -> dict[str, Any]:
        if not isinstance(case, dict):
            raise Bad(where, None, f"expected a test case object, got {type(case).__name__}")
        row: dict[str, Any] = {}
        for ours, names in _DEEPEVAL_NAMES.items():
            value = next((case[n] for n in names if not missing(case.get(n))), None)
            if value is None:
                if ours != "reference":
                    raise Bad(
                        where,
                        names[0],
                        "missing"
                        + (" (the retrieved sources: a RAG test case needs them)" if ours == "sources" else ""),
                    )
                continue
            row[ours] = text_list(value, where, names[0]) if ours == "sources" else value
        scores: dict[str, float | None] = {}
        metrics = case.get("metricsData", case.get("metrics_data")) or []
        if not isinstance(metrics, list):
            raise Bad(where, "metricsData", "expected a list of metric results")
        for n, metric in enumerate(metrics):
            if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
                raise Bad(where, f"metricsData[{n}].name", "missing")
            score = number(metric.get("score"))
            if isinstance(score, str):
                raise Bad(where, f"metricsData[{n}].score", score)
            if metric["name"] in scores:
                raise Bad(where, f"metricsData[{n}].name", f"{metric['name']!r} is given twice")
            scores[metric["name"]] = score  # None: the metric errored (its error is in DeepEval's report)
        test_name = case.get("name")
        if isinstance(test_name, str) and test_name.strip():
            row["id"] = test_name
        extra = case.get("additionalMetadata", case.get("additional_metadata"))
        row["metadata"] = {
            "format": DEEPEVAL,
            "test_case": test_name,
            "success": case.get("success"),
            **({"additional_metadata": plain(extra)} if isinstance(extra, dict) else {}),
            **({IMPORTED: {DEEPEVAL: scores}} if scores else {}),
        }
        return row

    return collect(cases, build)
