"""DeepEval-style metrics (seed 002): contextual precision, recall and relevancy, answer relevancy,
faithfulness, hallucination, and G-Eval.

Metric ids:
    de_contextual_precision  rank-weighted precision of the sources useful for the reference
    de_contextual_recall     share of the reference's statements attributable to the sources
    de_contextual_relevancy  share of the sources' statements relevant to the query
    de_answer_relevancy      share of the response's statements relevant to the query (idk counts)
    de_answer_relevancy_sim  similarity form, which DeepEval takes from RAGAS (= ragas_answer_relevance)
    de_faithfulness          share of the response's claims the sources do not contradict
    de_hallucination         share of the sources the response contradicts (LOWER is better)
    de_geval                 G-Eval: criteria -> evaluation steps -> 1-5 score, normalised to [0, 1]
"""

from __future__ import annotations

import asyncio
import math
from typing import Sequence

from evaluators.core.records import SOURCE, Answer, Component, Score, Status, Verdict
from evaluators.core.text import has_content
from evaluators.judges.peers.common import CONTRADICTS, NOT_CONTRADICTED, YES_NO
from evaluators.judges.peers.deepeval import GEVAL_SCALE
from evaluators.metrics.suites.common import decompose, judge_lines, unsteered
from evaluators.metrics.suites.ragas import answer_relevance
from evaluators.metrics.thelma import ItemWork, Metric, failure_status

# Component kinds (the dashboard reads kinds from the data).
DE_STATEMENT = "de_statement"  # statements of the response
REFERENCE_STATEMENT = "reference_statement"  # statements of the reference
CONTEXT_STATEMENT = "context_statement"  # statements of a source (parent: source index)
CRITERION = "criterion"  # G-Eval criteria
EVALUATION_STEP = "evaluation_step"  # G-Eval steps generated from the criteria

DEFAULT_CRITERIA = (
    "Determine whether the actual output answers the input using only facts grounded in the retrieval "
    "context. Penalise statements that are irrelevant to the input, missing from or contradicted by the "
    "retrieval context, or invented."
)


# ---------------------------------------------------------------- pure steps and aggregation


def aggregate_ranked_precision(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """Contextual precision: (1 / relevant) * sum over ranks k of (relevant up to k / k) * r_k.

    Ranks follow component_idx (retrieval order). A failed verdict leaves its rank unknown, so the
    score is not computed; no relevant source at all is a real 0.
    """
    if not verdicts:
        return Score(item_id, metric, None, 0, 0, Status.EMPTY)
    n_ok = sum(v.status is Status.OK for v in verdicts)
    if n_ok < len(verdicts):  # an unsure verdict (with_band) leaves its rank unknown too, counted in n_unsure
        return Score(
            item_id,
            metric,
            None,
            n_ok,
            len(verdicts),
            failure_status(verdicts),
            sum(v.status is Status.UNSURE for v in verdicts),
        )
    relevant, total = 0, 0.0
    for k, v in enumerate(sorted(verdicts, key=lambda v: v.component_idx), 1):
        if v.value:
            relevant += 1
            total += relevant / k
    return Score(item_id, metric, total / relevant if relevant else 0.0, n_ok, len(verdicts), Status.OK)


def geval_weighted(top_logprobs: dict[str, float], scale: Sequence[int] = GEVAL_SCALE) -> float | None:
    """G-Eval's probability-weighted score: sum of s * P(s) over the scale's tokens, renormalised.

    `top_logprobs` maps first-token candidates to log probabilities; None when no scale token is among them.
    """
    probs = {s: math.exp(top_logprobs[str(s)]) for s in scale if str(s) in top_logprobs}
    mass = sum(probs.values())
    if mass == 0.0:
        return None
    return sum(s * p for s, p in probs.items()) / mass


# ---------------------------------------------------------------- match steps


async def _response_statements(work: ItemWork) -> list[Component] | Answer:
    """Statements of the response, shared by answer relevancy and faithfulness."""
    return await decompose(work, "de_response", DE_STATEMENT, "de_statements", input=work.item.response)


async def match_contextual_precision(work: ItemWork) -> list[Verdict]:
    """Is each source, in retrieval order, useful for arriving at the reference?"""
    sources = [Component(work.item.id, SOURCE, j, s) for j, s in enumerate(work.item.sources)]
    return await judge_lines(
        work,
        "de_contextual_precision",
        SOURCE,
        sources,
        "reference",
        "de_contextual_precision",
        "sources",
        YES_NO,
        query=work.item.query,
        reference=work.item.reference,
    )


async def match_contextual_recall(work: ItemWork) -> list[Verdict]:
    """Statements of the reference, each attributable to the sources or not."""
    metric = "de_contextual_recall"
    statements = await decompose(work, "de_reference", REFERENCE_STATEMENT, "de_statements", input=work.item.reference)
    if not isinstance(statements, list):
        return work.decompose_failure(metric, REFERENCE_STATEMENT, statements)
    return await judge_lines(
        work,
        metric,
        REFERENCE_STATEMENT,
        statements,
        "sources",
        "de_contextual_recall",
        "claims",
        YES_NO,
        sources=list(work.item.sources),
    )


async def match_contextual_relevancy(work: ItemWork) -> list[Verdict]:
    """Each source broken into statements, each relevant to the query or not (one call per source)."""
    metric = "de_contextual_relevancy"
    answers = await asyncio.gather(
        *(work.judge.ask("de_contextual_relevancy", query=work.item.query, source=s) for s in work.item.sources)
    )
    out: list[Verdict] = []
    n = 0  # statements are numbered across sources
    for j, answer in enumerate(answers):
        if answer.status is not Status.OK:
            out.append(work.verdict(metric, SOURCE, j, "decompose", answer))
            continue
        for word, text in answer.value:
            if not has_content(text):
                continue  # "..." is no statement
            comp = Component(work.item.id, CONTEXT_STATEMENT, n, text, j, answer.call_key)
            n += 1
            work.components.append(comp)
            out.append(
                work.verdict(
                    metric,
                    CONTEXT_STATEMENT,
                    comp.idx,
                    "query",
                    answer,
                    value=YES_NO[word],
                    detail=f"{word}: {'' if word == 'yes' else 'not '}relevant (source {j + 1})",
                )
            )
    return out


async def match_answer_relevancy(work: ItemWork) -> list[Verdict]:
    """Statements of the response, each relevant to the query (yes or idk) or not (no)."""
    statements = await _response_statements(work)
    if not isinstance(statements, list):
        return work.decompose_failure("de_answer_relevancy", DE_STATEMENT, statements)
    return await judge_lines(
        work,
        "de_answer_relevancy",
        DE_STATEMENT,
        statements,
        "query",
        "de_answer_relevancy",
        "claims",
        NOT_CONTRADICTED,
        query=work.item.query,
    )


async def match_answer_relevancy_sim(work: ItemWork) -> list[Verdict]:
    """Similarity form: DeepEval wraps RAGAS here, so the generated questions are shared with it."""
    return await answer_relevance(work, "de_answer_relevancy_sim")


async def match_faithfulness(work: ItemWork) -> list[Verdict]:
    """Claims of the response, each supported (yes), not mentioned (idk) or contradicted (no) by the sources."""
    statements = await _response_statements(work)
    if not isinstance(statements, list):
        return work.decompose_failure("de_faithfulness", DE_STATEMENT, statements)
    return await judge_lines(
        work,
        "de_faithfulness",
        DE_STATEMENT,
        statements,
        "sources",
        "de_faithfulness",
        "claims",
        NOT_CONTRADICTED,
        sources=list(work.item.sources),
    )


async def match_hallucination(work: ItemWork) -> list[Verdict]:
    """Per source: does the response contradict it? Our items carry no ideal contexts, so the sources serve."""
    sources = [Component(work.item.id, SOURCE, j, s) for j, s in enumerate(work.item.sources)]
    return await judge_lines(
        work,
        "de_hallucination",
        SOURCE,
        sources,
        "response",
        "de_hallucination",
        "sources",
        CONTRADICTS,
        response=work.item.response,
    )


def geval(criteria: str = DEFAULT_CRITERIA, metric: str = "de_geval") -> Metric:
    """A G-Eval metric for `criteria`: evaluation steps from the criteria, then a 1-5 score.

    The steps request is the same for every item, so the judge's request cache answers it after the first.

    When the judge answers with a first-token distribution ({token: logprob}), the score is
    probability-weighted; otherwise it is the plain score.
    """

    async def match(work: ItemWork) -> list[Verdict]:
        work.components.append(Component(work.item.id, CRITERION, 0, criteria))
        steps = await decompose(work, f"geval:{criteria}", EVALUATION_STEP, "de_geval_steps", criteria=criteria)
        if not isinstance(steps, list):
            return work.decompose_failure(metric, EVALUATION_STEP, steps)
        if not steps:
            return []
        texts, left = unsteered(
            dict(query=work.item.query, sources=list(work.item.sources), response=work.item.response)
        )
        answer = await work.judge.ask(
            "de_geval_score", criteria=criteria, steps="\n".join(f"{s.idx + 1}. {s.text}" for s in steps), **texts
        )
        return [_geval_verdict(work, metric, answer, left)]

    return Metric(
        metric,
        "DeepEval G-Eval",
        match,
        prompts=("de_geval_steps", "de_geval_score"),
        reads=("query", "response"),
        description="DeepEval G-Eval: criteria -> evaluation steps -> 1-5 score, normalised to [0, 1]",
    )


def _geval_verdict(work: ItemWork, metric: str, answer: Answer, left: str = "") -> Verdict:
    """The G-Eval verdict: value (score - 1) / 4, the (weighted) 1-5 score kept as the verdict's evidence;
    `left` says which sentences addressed to the judge the score was read without."""
    if answer.status is not Status.OK:
        return work.verdict(metric, CRITERION, 0, "response", answer)
    low, high = GEVAL_SCALE[0], GEVAL_SCALE[-1]
    if isinstance(answer.value, dict):
        score = geval_weighted(answer.value)
        if score is None:
            missing = Answer(
                None, Status.UNPARSED, answer.call_key, answer.raw, detail="no score token among the top logprobs"
            )
            return work.verdict(metric, CRITERION, 0, "response", missing)
        detail = f"probability-weighted score {score:.2f} of {high}"
    else:
        score, detail = float(answer.value), f"score {answer.value} of {high}"
    return work.verdict(
        metric, CRITERION, 0, "response", answer, value=(score - low) / (high - low), prob=score, detail=detail + left
    )


CONTEXTUAL_PRECISION = Metric(
    "de_contextual_precision",
    "DeepEval contextual precision",
    match_contextual_precision,
    aggregate_ranked_precision,
    needs_reference=True,
    reads=("query", "reference"),
    prompts=("de_contextual_precision",),
    description="DeepEval contextual precision: rank-weighted precision of sources useful for the reference",
)
CONTEXTUAL_RECALL = Metric(
    "de_contextual_recall",
    "DeepEval contextual recall",
    match_contextual_recall,
    needs_reference=True,
    prompts=("de_statements", "de_contextual_recall"),
    reads=("reference",),
    description="DeepEval contextual recall: share of the reference's statements attributable to the sources",
)
CONTEXTUAL_RELEVANCY = Metric(
    "de_contextual_relevancy",
    "DeepEval contextual relevancy",
    match_contextual_relevancy,
    prompts=("de_contextual_relevancy",),
    reads=("query",),
    description="DeepEval contextual relevancy: share of the sources' statements relevant to the query",
)
ANSWER_RELEVANCY = Metric(
    "de_answer_relevancy",
    "DeepEval answer relevancy",
    match_answer_relevancy,
    prompts=("de_statements", "de_answer_relevancy"),
    reads=("query", "response"),
    description="DeepEval answer relevancy: share of the response's statements relevant to the query",
)
ANSWER_RELEVANCY_SIM = Metric(
    "de_answer_relevancy_sim",
    "DeepEval answer relevancy (similarity)",
    match_answer_relevancy_sim,
    prompts=("ragas_questions",),
    reads=("query", "response"),
    description="DeepEval answer relevancy, similarity form (RAGAS's): mean cosine of generated questions to the query",
)
FAITHFULNESS = Metric(
    "de_faithfulness",
    "DeepEval faithfulness",
    match_faithfulness,
    prompts=("de_statements", "de_faithfulness"),
    reads=("response",),
    description="DeepEval faithfulness: share of the response's claims not contradicted by the sources",
)
HALLUCINATION = Metric(
    "de_hallucination",
    "DeepEval hallucination (lower is better)",
    match_hallucination,
    lower_is_better=True,
    prompts=("de_hallucination",),
    reads=("response",),
    description="DeepEval hallucination: share of sources the response contradicts (lower is better)",
)
GEVAL = geval()
