"""The metric vocabulary, written once: ids, display names and the order every view lists them in.

Everything else (the engine's registry, the store's wide tables, the demo, the dashboard) reads
these names from here, so a metric is added or renamed in one place.
"""
from __future__ import annotations

from typing import Iterable

# THELMA's seven reference-free metrics, in the paper's order.
THELMA: tuple[str, ...] = ("sp1", "sp2", "sqc", "rp", "rqc", "sd", "gr")
# Ours, reference-based: listed right after THELMA's, where an item carries a golden answer.
REFERENCE: tuple[str, ...] = ("ref_precision", "ref_recall", "ref_f1")

DISPLAY_NAMES: dict[str, str] = {
    "sp1": "SP1 source precision (chunks)",
    "sp2": "SP2 source precision (facts)",
    "sqc": "SQC source query coverage",
    "rp": "RP response precision",
    "rqc": "RQC response query coverage",
    "sd": "SD self-distinctness",
    "gr": "GR groundedness",
    "ref_precision": "Reference precision: response claims the reference supports (ours)",
    "ref_recall": "Reference recall: reference claims the response supports (ours)",
    "ref_f1": "Reference F1 of precision and recall (ours)",
    "ragas_faithfulness": "RAGAS faithfulness",
    "ragas_answer_relevance": "RAGAS answer relevance",
    "ragas_context_relevance": "RAGAS context relevance",
    "nv_answer_accuracy": "Nvidia answer accuracy",
    "nv_context_relevance": "Nvidia context relevance",
    "nv_groundedness": "Nvidia groundedness",
    "de_contextual_precision": "DeepEval contextual precision",
    "de_contextual_recall": "DeepEval contextual recall",
    "de_contextual_relevancy": "DeepEval contextual relevancy",
    "de_answer_relevancy": "DeepEval answer relevancy",
    "de_answer_relevancy_sim": "DeepEval answer relevancy (similarity)",
    "de_faithfulness": "DeepEval faithfulness",
    "de_hallucination": "DeepEval hallucination (lower is better)",
    "de_geval": "DeepEval G-Eval",
}

# Metrics where the lower value is the better one: views flip their "low" for these.
LOWER_IS_BETTER: frozenset[str] = frozenset({"de_hallucination"})


def display_name(metric: str) -> str:
    """The human name of a metric id; an unknown id is shown as itself."""
    return DISPLAY_NAMES.get(metric, metric)


def order_metrics(names: Iterable[str]) -> list[str]:
    """THELMA's metrics first in the paper's order, then the reference-based ones, then any others
    alphabetically."""
    wanted = set(names)
    first = THELMA + REFERENCE
    return [m for m in first if m in wanted] + sorted(wanted - set(first))
