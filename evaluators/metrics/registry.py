"""The metrics by id: one line per metric, THELMA's seven first (in the paper's order), then our
reference-based ones, then the other suites'.

Everything about a metric is on its Metric record (metrics/thelma.py, metrics/suites/): its id, the
name views show, its description, direction and default threshold, the prompts it asks, and the texts
and components it reads. What the views need by id is read from the records here, when asked, so a
metric added to METRICS is shown like any other.

Adding a metric: its Metric in a suite file (a match step, an aggregate), one line here, and its prompt
files in prompts/; a prompt no metric asked before also gets its parser and offline answer in
evaluators/judges/registry.py.
"""

from __future__ import annotations

from typing import Iterable

from evaluators.metrics import thelma
from evaluators.metrics.suites import deepeval, nvidia, ragas, reference
from evaluators.metrics.thelma import Metric

DEFAULT_THRESHOLD = 0.5  # a metric this version does not know (a file from elsewhere) reads low below it


def _by_id(*metrics: Metric) -> dict[str, Metric]:
    return {m.id: m for m in metrics}


THELMA_METRICS: dict[str, Metric] = _by_id(
    thelma.SP1,
    thelma.SP2,
    thelma.SQC,
    thelma.RP,
    thelma.RQC,
    thelma.SD,
    thelma.GR,
)
# Ours, for items that carry a golden answer: THELMA's steps against the reference.
REFERENCE_METRICS: dict[str, Metric] = _by_id(
    reference.REF_PRECISION,
    reference.REF_RECALL,
    reference.REF_F1,
)
SUITE_METRICS: dict[str, Metric] = _by_id(
    ragas.FAITHFULNESS,
    ragas.ANSWER_RELEVANCE,
    ragas.CONTEXT_RELEVANCE,
    nvidia.ANSWER_ACCURACY,
    nvidia.CONTEXT_RELEVANCE,
    nvidia.GROUNDEDNESS,
    deepeval.CONTEXTUAL_PRECISION,
    deepeval.CONTEXTUAL_RECALL,
    deepeval.CONTEXTUAL_RELEVANCY,
    deepeval.ANSWER_RELEVANCY,
    deepeval.ANSWER_RELEVANCY_SIM,
    deepeval.FAITHFULNESS,
    deepeval.HALLUCINATION,
    deepeval.GEVAL,
)

METRICS: dict[str, Metric] = {**THELMA_METRICS, **REFERENCE_METRICS, **SUITE_METRICS}

THELMA: tuple[str, ...] = tuple(THELMA_METRICS)
REFERENCE: tuple[str, ...] = tuple(REFERENCE_METRICS)
# The prompts the suites' metrics ask (their hashes go on a run like THELMA's).
SUITE_PROMPTS: frozenset[str] = frozenset(p for metric in SUITE_METRICS.values() for p in metric.prompts)


def display_name(metric: str) -> str:
    """The human name of a metric id; an unknown id is shown as itself."""
    return METRICS[metric].name if metric in METRICS else metric


def display_names() -> dict[str, str]:
    """Every metric's display name by id."""
    return {m: spec.name for m, spec in METRICS.items()}


def threshold(metric: str) -> float:
    """A metric's default threshold (DEFAULT_THRESHOLD for an id this version does not know)."""
    return METRICS[metric].threshold if metric in METRICS else DEFAULT_THRESHOLD


def lower_is_better(metric: str) -> bool:
    """Whether the lower value is the better one: views flip their "low" for such a metric."""
    return metric in METRICS and METRICS[metric].lower_is_better


def component_metrics() -> tuple[str, ...]:
    """The metrics that give one verdict per claim, sub-question or source: the ones a flip or an
    expectation can name."""
    return tuple(m for m, spec in METRICS.items() if spec.components)


def order_metrics(names: Iterable[str]) -> list[str]:
    """THELMA's metrics first in the paper's order, then the reference-based ones, then any others
    alphabetically."""
    wanted = set(names)
    first = THELMA + REFERENCE
    return [m for m in first if m in wanted] + sorted(wanted - set(first))
