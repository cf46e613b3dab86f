"""DeepEval's own metrics on the side-by-side samples, run by benchmarks/peers_side_by_side.py in DeepEval's
pinned virtualenv (never in the project's: DeepEval is no dependency of RAG Triage).

    python deepeval_side.py METRIC PROXY MODEL SAMPLES

As ragas_side.py: one JSON line per sample (id, value, status, detail); every call of a sample goes to
PROXY/t/deepeval/METRIC/ID/v1. The metrics run with include_reason=False (the reason is one more call that
changes no score) and async_mode=False, at temperature 0, through DeepEval's LocalModel.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from deepeval.metrics import (
    AnswerRelevancyMetric,
    ContextualPrecisionMetric,
    ContextualRecallMetric,
    ContextualRelevancyMetric,
    FaithfulnessMetric,
)
from deepeval.models import LocalModel
from deepeval.test_case import LLMTestCase

METRICS: dict[str, Any] = {
    "faithfulness": FaithfulnessMetric,
    "answer_relevancy": AnswerRelevancyMetric,
    "contextual_precision": ContextualPrecisionMetric,
    "contextual_recall": ContextualRecallMetric,
    "contextual_relevancy": ContextualRelevancyMetric,
}
UNREADABLE = ("ValidationError", "JSONDecodeError", "ValueError", "TypeError")


def score(metric: str, proxy: str, model: str, sample: dict[str, Any]) -> dict[str, Any]:
    """One sample through the library's metric."""
    judge = LocalModel(model=model, base_url=f"{proxy}/t/deepeval/{metric}/{sample['id']}/v1", api_key="local",
                       temperature=0.0)
    case = LLMTestCase(input=sample["query"], actual_output=sample["response"], expected_output=sample["reference"],
                       retrieval_context=list(sample["sources"]))
    measure = METRICS[metric](model=judge, include_reason=False, async_mode=False)
    try:
        value = measure.measure(case, _show_indicator=False)
    except Exception as exc:  # noqa: BLE001  (every failure is a row of the table, named by its type)
        name = type(exc).__name__
        return {"id": sample["id"], "value": None, "status": "unparsed" if name in UNREADABLE else "error",
                "detail": f"{name}: {exc}"[:300]}
    if value is None or value != value:
        return {"id": sample["id"], "value": None, "status": "nan", "detail": "the metric returned no score"}
    return {"id": sample["id"], "value": float(value), "status": "ok", "detail": ""}


def main() -> None:
    metric, proxy, model, path = sys.argv[1:5]
    with open(path, encoding="utf-8") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    for sample in samples:
        print(json.dumps(score(metric, proxy, model, sample)), flush=True)


if __name__ == "__main__":
    main()
