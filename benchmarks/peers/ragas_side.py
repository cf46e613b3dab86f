"""RAGAS's own metrics on the side-by-side samples, run by benchmarks/peers_side_by_side.py in RAGAS's
pinned virtualenv (never in the project's: RAGAS is no dependency of RAG Triage).

    python ragas_side.py METRIC PROXY MODEL SAMPLES

Reads the samples (JSON lines: id, query, sources, response, reference) and prints one JSON line per sample:
its id, the metric's value (null when it has none), a status (ok, nan, unparsed, error) and the exception.
Every call of a sample goes to PROXY/t/ragas/METRIC/ID/v1, where the side-by-side's proxy counts it;
embeddings (answer relevancy) go there too and are served by our MiniLM.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from typing import Any

from openai import AsyncOpenAI
from ragas.embeddings.openai_provider import OpenAIEmbeddings
from ragas.llms.base import llm_factory
from ragas.metrics import collections as ragas_metrics

# metric -> (its class, the sample fields it reads as its ascore arguments)
METRICS: dict[str, tuple[Any, dict[str, str]]] = {
    "faithfulness": (ragas_metrics.Faithfulness, {"user_input": "query", "response": "response",
                                                   "retrieved_contexts": "sources"}),
    "answer_relevancy": (ragas_metrics.AnswerRelevancy, {"user_input": "query", "response": "response"}),
    "context_precision": (ragas_metrics.ContextPrecision, {"user_input": "query", "reference": "reference",
                                                           "retrieved_contexts": "sources"}),
    "context_recall": (ragas_metrics.ContextRecall, {"user_input": "query", "reference": "reference",
                                                     "retrieved_contexts": "sources"}),
    "nv_answer_accuracy": (ragas_metrics.AnswerAccuracy, {"user_input": "query", "response": "response",
                                                          "reference": "reference"}),
    "nv_context_relevance": (ragas_metrics.ContextRelevance, {"user_input": "query", "retrieved_contexts": "sources"}),
    "nv_response_groundedness": (ragas_metrics.ResponseGroundedness, {"response": "response",
                                                                      "retrieved_contexts": "sources"}),
}
UNREADABLE = ("ValidationError", "InstructorRetryException", "JSONDecodeError", "IncompleteOutputException")


async def score(metric: str, proxy: str, model: str, sample: dict[str, Any]) -> dict[str, Any]:
    """One sample through the library's metric, as its documentation sets it up, at temperature 0."""
    client = AsyncOpenAI(base_url=f"{proxy}/t/ragas/{metric}/{sample['id']}/v1", api_key="local", max_retries=0,
                         timeout=900)
    llm = llm_factory(model, client=client, temperature=0.0)
    cls, fields = METRICS[metric]
    kwargs: dict[str, Any] = {"llm": llm}
    if metric == "answer_relevancy":
        kwargs["embeddings"] = OpenAIEmbeddings(client=client, model="all-MiniLM-L6-v2")
    try:
        result = await cls(**kwargs).ascore(**{arg: sample[field] for arg, field in fields.items()})
    except Exception as exc:  # noqa: BLE001  (every failure is a row of the table, named by its type)
        name = type(exc).__name__
        return {"id": sample["id"], "value": None, "status": "unparsed" if name in UNREADABLE else "error",
                "detail": f"{name}: {exc}"[:300]}
    value = float(result.value)
    if math.isnan(value):
        return {"id": sample["id"], "value": None, "status": "nan", "detail": "the metric returned NaN"}
    return {"id": sample["id"], "value": value, "status": "ok", "detail": ""}


def main() -> None:
    metric, proxy, model, path = sys.argv[1:5]
    with open(path, encoding="utf-8") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    for sample in samples:
        print(json.dumps(asyncio.run(score(metric, proxy, model, sample))), flush=True)


if __name__ == "__main__":
    main()
