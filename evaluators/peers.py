"""The peers' metrics on THELMA's engine: RAGAS (seed 004), Nvidia (seed 001), DeepEval-style (seed 002).

Same judge layer, cache, statuses and stored intermediates as THELMA: every statement, generated
question, extracted sentence, rating and evaluation step is a Component or a Verdict, and every
aggregate is a pure function of verdicts. A failed judge step is a visible status, never a 0.

Importing this module registers its prompts' parsers (prompts.PARSERS) and offline answers
(offline.HANDLERS), so the offline judge runs every metric here with no key. The peers keep their
own call structure (one verification call per list, as the originals do): `per_component`
changes THELMA's calls only.

Metric ids:
    ragas_faithfulness       RAGAS: share of the answer's statements supported by the context
    ragas_answer_relevance   RAGAS: mean cosine (MiniLM) between the query and 3 questions generated from the answer
    ragas_context_relevance  RAGAS: context sentences extracted as relevant / all context sentences
    nv_answer_accuracy       Nvidia: agreement with the reference, 2 templates rated 0/2/4 (roles swapped), averaged
    nv_context_relevance     Nvidia: relevance of the retrieved context to the query, 2 templates rated 0/1/2
    nv_groundedness          Nvidia: grounding of the response in the context, 2 templates rated 0/1/2
    de_contextual_precision  DeepEval: rank-weighted precision of the sources useful for the reference
    de_contextual_recall     DeepEval: share of the reference's statements attributable to the sources
    de_contextual_relevancy  DeepEval: share of the sources' statements relevant to the query
    de_answer_relevancy      DeepEval: share of the response's statements relevant to the query (idk counts)
    de_answer_relevancy_sim  DeepEval: similarity form, which DeepEval takes from RAGAS (= ragas_answer_relevance)
    de_faithfulness          DeepEval: share of the response's claims the sources do not contradict
    de_hallucination         DeepEval: share of the sources the response contradicts (LOWER is better)
    de_geval                 DeepEval G-Eval: criteria -> evaluation steps -> 1-5 score, normalised to [0, 1]
"""
from __future__ import annotations

import asyncio
import math
import re
from typing import Any, Callable, Iterable, Sequence

from evaluators import offline, prompts
from evaluators.judge import Answer
from evaluators.metrics import BATCH, Context, Metric, failure_status, aggregate_mean
from evaluators.records import SOURCE, Component, Score, Status, Verdict

# Component kinds (the dashboard reads kinds from the data).
RAGAS_STATEMENT = "ragas_statement"          # RAGAS statements of the response
GENERATED_QUESTION = "generated_question"    # questions generated from the response
CONTEXT_SENTENCE = "context_sentence"        # sentences of the sources (parent: source index)
EXTRACTED_SENTENCE = "extracted_sentence"    # what the judge extracted (parent: matched context sentence)
RATING = "rating"                            # one Nvidia template's rating (verdicts only)
DE_STATEMENT = "de_statement"                # DeepEval statements of the response
REFERENCE_STATEMENT = "reference_statement"  # DeepEval statements of the reference
CONTEXT_STATEMENT = "context_statement"      # DeepEval statements of a source (parent: source index)
CRITERION = "criterion"                      # G-Eval criteria
EVALUATION_STEP = "evaluation_step"          # G-Eval steps generated from the criteria

N_QUESTIONS = 3  # RAGAS answer relevance: questions generated per answer (the paper's n)
GEVAL_SCALE = (1, 2, 3, 4, 5)  # single-digit scores, so a first-token distribution covers them all
DEFAULT_CRITERIA = (
    "Determine whether the actual output answers the input using only facts grounded in the retrieval "
    "context. Penalise statements that are irrelevant to the input, missing from or contradicted by the "
    "retrieval context, or invented.")

# Metrics where a lower value is the better one (dashboards flip their "low" for these).
LOWER_IS_BETTER = frozenset({"de_hallucination"})

# Verdict words to values, per metric (DeepEval counts "idk" as relevant and as faithful).
YES_NO = {"yes": 1.0, "no": 0.0}  # supported, attributable, useful, relevant
NOT_CONTRADICTED = {"yes": 1.0, "idk": 1.0, "no": 0.0}
CONTRADICTS = {"yes": 0.0, "no": 1.0}  # hallucination: "no" = the output contradicts this context


# ---------------------------------------------------------------- parsers

_VERDICT_LINE = re.compile(r"^\s*(?:[a-z]+\s+)?(\d+)\s*[:.)\-]\s*(yes|no|idk)\b[\s:;,.|\-\u2013\u2014]*(.*?)\s*$", re.I)
_LABELLED_LINE = re.compile(r"^\s*(?:[-*\u2022]\s*)?(yes|no)\s*[:|\-\u2013\u2014]\s*(.+?)\s*$", re.I)


def verdict_parser(words: Iterable[str]) -> Callable[[str], dict[int, tuple[str, str]]]:
    """A parser for lines "N: word - reason" inside <output>: {N: (word, reason)}."""
    allowed = frozenset(words)

    def parse(reply: str) -> dict[int, tuple[str, str]]:
        found: dict[int, tuple[str, str]] = {}
        for line in prompts.output_body(reply).splitlines():
            match = _VERDICT_LINE.match(line)
            if match and match.group(2).lower() in allowed:
                found[int(match.group(1))] = (match.group(2).lower(), match.group(3))
        if not found:
            raise prompts.ParseError(f"no 'N: {'|'.join(sorted(allowed))}' lines")
        return found
    return parse


def rating_parser(scale: Sequence[int]) -> Callable[[str], int]:
    """A parser for one integer of `scale` inside <output>."""
    def parse(reply: str) -> int:
        body = prompts.output_body(reply)
        if not re.fullmatch(r"\d+", body) or int(body) not in scale:
            raise prompts.ParseError(f"expected one of {list(scale)}, got {body[:40]!r}")
        return int(body)
    return parse


def parse_extracted(reply: str) -> list[str]:
    """RAGAS extracted sentences; "Insufficient Information" is the empty extraction."""
    lines = prompts.parse_list(reply)
    if len(lines) == 1 and " ".join(re.findall(r"[a-z]+", lines[0].lower())) == "insufficient information":
        return []
    return lines


def parse_labelled(reply: str) -> list[tuple[str, str]]:
    """Lines "yes: statement" / "no: statement" inside <output>, in order."""
    found = [(m.group(1).lower(), m.group(2)) for line in prompts.output_body(reply).splitlines()
             if (m := _LABELLED_LINE.match(line))]
    if not found:
        raise prompts.ParseError("no 'yes|no: statement' lines")
    return found


PARSERS: dict[str, Callable[[str], Any]] = {
    "ragas_statements": prompts.parse_list,
    "ragas_faithfulness": verdict_parser(YES_NO),
    "ragas_questions": prompts.parse_list,
    "ragas_context_sentences": parse_extracted,
    "nv_answer_accuracy_1": rating_parser((0, 2, 4)),
    "nv_answer_accuracy_2": rating_parser((0, 2, 4)),
    "nv_context_relevance_1": rating_parser((0, 1, 2)),
    "nv_context_relevance_2": rating_parser((0, 1, 2)),
    "nv_groundedness_1": rating_parser((0, 1, 2)),
    "nv_groundedness_2": rating_parser((0, 1, 2)),
    "de_statements": prompts.parse_list,
    "de_answer_relevancy": verdict_parser(NOT_CONTRADICTED),
    "de_faithfulness": verdict_parser(NOT_CONTRADICTED),
    "de_hallucination": verdict_parser(CONTRADICTS),
    "de_contextual_precision": verdict_parser(YES_NO),
    "de_contextual_recall": verdict_parser(YES_NO),
    "de_contextual_relevancy": parse_labelled,
    "de_geval_steps": prompts.parse_list,
    "de_geval_score": rating_parser(GEVAL_SCALE),
}
prompts.PARSERS.update(PARSERS)
prompts.DISTRIBUTION_PROMPTS.add("de_geval_score")  # a logprob judge weights the 1-5 score by probability


# ---------------------------------------------------------------- pure steps and aggregation

def normalise_rating(rating: float, top: int) -> float:
    """A rating on 0..top as a value in [0, 1]."""
    return float(rating) / top


def aggregate_ranked_precision(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """DeepEval contextual precision: (1 / relevant) * sum over ranks k of (relevant up to k / k) * r_k.

    Ranks follow component_idx (retrieval order). A failed verdict leaves its rank unknown, so the
    score is not computed; no relevant source at all is a real 0.
    """
    if not verdicts:
        return Score(item_id, metric, None, 0, 0, Status.EMPTY)
    n_ok = sum(v.status is Status.OK for v in verdicts)
    if n_ok < len(verdicts):
        return Score(item_id, metric, None, n_ok, len(verdicts), failure_status(verdicts))
    relevant, total = 0, 0.0
    for k, v in enumerate(sorted(verdicts, key=lambda v: v.component_idx), 1):
        if v.value:
            relevant += 1
            total += relevant / k
    return Score(item_id, metric, total / relevant if relevant else 0.0, n_ok, len(verdicts), Status.OK)


def similarity_verdicts(item_id: str, metric: str, cosines: Sequence[float],
                        call_key: str | None = None) -> list[Verdict]:
    """One verdict per generated question: value = cosine to the query (negatives count as 0)."""
    return [Verdict(item_id, metric, GENERATED_QUESTION, i, "query", max(0.0, float(c)), Status.OK,
                    float(c), call_key, f"cosine {c:.3f} to the query")
            for i, c in enumerate(cosines)]


def geval_weighted(top_logprobs: dict[str, float], scale: Sequence[int] = GEVAL_SCALE) -> float | None:
    """G-Eval's probability-weighted score: sum of s * P(s) over the scale's tokens, renormalised.

    `top_logprobs` maps first-token candidates to log probabilities; None when no scale token is among them.
    """
    probs = {s: math.exp(top_logprobs[str(s)]) for s in scale if str(s) in top_logprobs}
    mass = sum(probs.values())
    if mass == 0.0:
        return None
    return sum(s * p for s, p in probs.items()) / mass


def _words(text: str) -> str:
    """Lower-case words, space-separated and space-padded, so containment respects word boundaries."""
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def _extracts(line: str, sentence: str) -> bool:
    """The line holds the whole sentence, or is a fragment keeping at least half of it."""
    if sentence in line:
        return True
    return bool(line.strip()) and line in sentence and len(line.strip()) >= len(sentence.strip()) / 2


def match_extracted(sentences: Sequence[str], extracted: Sequence[str]) -> list[int | None]:
    """For each context sentence, the index of the extracted line that contains it, else None.

    Case and punctuation are ignored, and words stay whole. A fragment counts when it keeps at
    least half of its sentence (a judge that splits one sentence in two still extracted it).
    """
    lines = [_words(e) for e in extracted]
    return [next((i for i, line in enumerate(lines) if _extracts(line, sentence)), None) if sentence.strip() else None
            for sentence in map(_words, sentences)]


# ---------------------------------------------------------------- shared judge steps

async def _decompose(ctx: Context, name: str, kind: str, prompt: str, **variables: Any) -> list[Component] | Answer:
    """A list-valued judge step turned into components, once per item; the failed answer otherwise."""
    async def make() -> list[Component] | Answer:
        answer = await ctx.judge.ask(prompt, **variables)
        if answer.status is not Status.OK:
            return answer
        parts = [Component(ctx.item.id, kind, i, t, None, answer.call_key) for i, t in enumerate(answer.value)]
        ctx.components.extend(parts)
        return parts
    return await ctx.once(f"peers:{name}", make)


async def _ask_in_chunks(ctx: Context, prompt: str, list_var: str, elements: Sequence[str],
                         **fixed: Any) -> list[tuple[Answer, int]]:
    """Ask about `elements` BATCH at a time: (answer, element number in that answer) per element."""
    chunks = [range(k, min(k + BATCH, len(elements))) for k in range(0, len(elements), BATCH)]
    answers = await asyncio.gather(*(ctx.judge.ask(prompt, **fixed, **{list_var: [elements[i] for i in chunk]})
                                     for chunk in chunks))
    return [(answer, n) for chunk, answer in zip(chunks, answers) for n in range(1, len(chunk) + 1)]


def _line_verdict(ctx: Context, metric: str, kind: str, idx: int, target: str, answer: Answer, key: int,
                  values: dict[str, float]) -> Verdict:
    """The verdict for element `key` of a "N: word - reason" answer; a skipped element is unparsed."""
    if answer.status is Status.OK and key not in answer.value:
        answer = Answer(None, Status.UNPARSED, answer.call_key, answer.raw, detail=f"element {key} missing from reply")
    if answer.status is not Status.OK:
        return ctx.verdict(metric, kind, idx, target, answer)
    word, reason = answer.value[key]
    prob = answer.evidence.get(key, (None, ""))[0]  # the offline judge's cosine, when it answered
    return ctx.verdict(metric, kind, idx, target, answer, value=values[word], prob=prob,
                       detail=f"{word}: {reason}" if reason else word)


async def _judge_lines(ctx: Context, metric: str, kind: str, components: Sequence[Component], target: str,
                       prompt: str, list_var: str, values: dict[str, float], **fixed: Any) -> list[Verdict]:
    """One verdict per component from batched "N: word" answers."""
    pairs = await _ask_in_chunks(ctx, prompt, list_var, [c.text for c in components], **fixed)
    return [_line_verdict(ctx, metric, kind, c.idx, target, answer, key, values)
            for c, (answer, key) in zip(components, pairs)]


async def _dual_rating(ctx: Context, metric: str, top: int,
                       asks: Sequence[tuple[str, dict[str, Any], str]]) -> list[Verdict]:
    """Nvidia: one verdict per template, value = rating / top, the raw rating kept as the score."""
    answers = await asyncio.gather(*(ctx.judge.ask(prompt, **variables) for prompt, variables, _ in asks))
    out: list[Verdict] = []
    for k, ((_, _, what), answer) in enumerate(zip(asks, answers)):
        if answer.status is Status.OK:
            out.append(ctx.verdict(metric, RATING, k, f"template:{k + 1}", answer,
                                   value=normalise_rating(answer.value, top), prob=float(answer.value),
                                   detail=f"rating {answer.value} of {top} ({what})"))
        else:
            out.append(ctx.verdict(metric, RATING, k, f"template:{k + 1}", answer))
    return out


# ---------------------------------------------------------------- RAGAS (seed 004)

async def match_ragas_faithfulness(ctx: Context) -> list[Verdict]:
    """Statements of the answer, then one support verdict (Yes/No) per statement against the context."""
    statements = await _decompose(ctx, "ragas_statements", RAGAS_STATEMENT, "ragas_statements",
                                  query=ctx.item.query, response=ctx.item.response)
    if not isinstance(statements, list):
        return ctx.decompose_failure("ragas_faithfulness", RAGAS_STATEMENT, statements)
    return await _judge_lines(ctx, "ragas_faithfulness", RAGAS_STATEMENT, statements, "sources",
                              "ragas_faithfulness", "claims", YES_NO, sources=list(ctx.item.sources))


async def _answer_relevance(ctx: Context, metric: str) -> list[Verdict]:
    """N_QUESTIONS questions generated from the answer, each scored by its cosine to the query."""
    questions = await _decompose(ctx, "ragas_questions", GENERATED_QUESTION, "ragas_questions",
                                 response=ctx.item.response)
    if not isinstance(questions, list):
        return ctx.decompose_failure(metric, GENERATED_QUESTION, questions)
    questions = questions[:N_QUESTIONS]
    if not questions:
        return []
    vectors = offline.embed([ctx.item.query] + [q.text for q in questions])
    return similarity_verdicts(ctx.item.id, metric, list(vectors[1:] @ vectors[0]), questions[0].call_key)


async def match_ragas_answer_relevance(ctx: Context) -> list[Verdict]:
    """RAGAS answer relevance: mean cosine between the query and questions generated from the answer."""
    return await _answer_relevance(ctx, "ragas_answer_relevance")


async def match_ragas_context_relevance(ctx: Context) -> list[Verdict]:
    """Sentences the judge extracts as needed for the query, over all sentences of the context."""
    metric = "ragas_context_relevance"
    answer = await ctx.judge.ask("ragas_context_sentences", query=ctx.item.query, sources=list(ctx.item.sources))
    texts = [(j, s) for j, source in enumerate(ctx.item.sources) for s in offline.split_sentences(source)]
    sentences = [Component(ctx.item.id, CONTEXT_SENTENCE, i, s, j) for i, (j, s) in enumerate(texts)]
    ctx.components.extend(sentences)
    if answer.status is not Status.OK:
        return ctx.decompose_failure(metric, EXTRACTED_SENTENCE, answer)
    hits = match_extracted([c.text for c in sentences], answer.value)
    matched: dict[int, int] = {}  # extracted line -> the first context sentence it contains
    for idx, line in enumerate(hits):
        if line is not None:
            matched.setdefault(line, idx)
    ctx.components.extend(Component(ctx.item.id, EXTRACTED_SENTENCE, i, text, matched.get(i), answer.call_key)
                          for i, text in enumerate(answer.value))
    return [ctx.verdict(metric, CONTEXT_SENTENCE, c.idx, "query", answer, value=float(hit is not None),
                        detail=f"extracted (line {hit + 1})" if hit is not None else
                        ("not extracted" if answer.value else "not extracted: Insufficient Information"))
            for c, hit in zip(sentences, hits)]


# ---------------------------------------------------------------- Nvidia (seed 001)

async def match_nv_answer_accuracy(ctx: Context) -> list[Verdict]:
    """Two templates rated 0/2/4; the second sees the reference as the answer to rate (roles swapped)."""
    item = ctx.item
    return await _dual_rating(ctx, "nv_answer_accuracy", 4, [
        ("nv_answer_accuracy_1", dict(query=item.query, response=item.response, reference=item.reference),
         "response rated against the reference"),
        ("nv_answer_accuracy_2", dict(query=item.query, response=item.reference, reference=item.response),
         "roles swapped: reference rated against the response"),
    ])


async def match_nv_context_relevance(ctx: Context) -> list[Verdict]:
    """Two templates rate the whole retrieved context's relevance to the query, 0/1/2."""
    variables = dict(query=ctx.item.query, sources=list(ctx.item.sources))
    return await _dual_rating(ctx, "nv_context_relevance", 2, [
        ("nv_context_relevance_1", variables, "context relevance, template 1"),
        ("nv_context_relevance_2", variables, "context relevance, template 2"),
    ])


async def match_nv_groundedness(ctx: Context) -> list[Verdict]:
    """Two templates rate how well the context supports the response, 0/1/2."""
    variables = dict(sources=list(ctx.item.sources), response=ctx.item.response)
    return await _dual_rating(ctx, "nv_groundedness", 2, [
        ("nv_groundedness_1", variables, "groundedness, template 1"),
        ("nv_groundedness_2", variables, "groundedness, template 2"),
    ])


# ---------------------------------------------------------------- DeepEval-style (seed 002)

async def _response_statements(ctx: Context) -> list[Component] | Answer:
    """DeepEval statements of the response, shared by answer relevancy and faithfulness."""
    return await _decompose(ctx, "de_response", DE_STATEMENT, "de_statements", input=ctx.item.response)


async def match_de_contextual_precision(ctx: Context) -> list[Verdict]:
    """Is each source, in retrieval order, useful for arriving at the reference?"""
    sources = [Component(ctx.item.id, SOURCE, j, s) for j, s in enumerate(ctx.item.sources)]
    return await _judge_lines(ctx, "de_contextual_precision", SOURCE, sources, "reference",
                              "de_contextual_precision", "sources", YES_NO,
                              query=ctx.item.query, reference=ctx.item.reference)


async def match_de_contextual_recall(ctx: Context) -> list[Verdict]:
    """Statements of the reference, each attributable to the sources or not."""
    metric = "de_contextual_recall"
    statements = await _decompose(ctx, "de_reference", REFERENCE_STATEMENT, "de_statements", input=ctx.item.reference)
    if not isinstance(statements, list):
        return ctx.decompose_failure(metric, REFERENCE_STATEMENT, statements)
    return await _judge_lines(ctx, metric, REFERENCE_STATEMENT, statements, "sources", "de_contextual_recall",
                              "claims", YES_NO, sources=list(ctx.item.sources))


async def match_de_contextual_relevancy(ctx: Context) -> list[Verdict]:
    """Each source broken into statements, each relevant to the query or not (one call per source)."""
    metric = "de_contextual_relevancy"
    answers = await asyncio.gather(*(ctx.judge.ask("de_contextual_relevancy", query=ctx.item.query, source=s)
                                     for s in ctx.item.sources))
    out: list[Verdict] = []
    n = 0  # statements are numbered across sources
    for j, answer in enumerate(answers):
        if answer.status is not Status.OK:
            out.append(ctx.verdict(metric, SOURCE, j, "decompose", answer))
            continue
        for word, text in answer.value:
            comp = Component(ctx.item.id, CONTEXT_STATEMENT, n, text, j, answer.call_key)
            n += 1
            ctx.components.append(comp)
            out.append(ctx.verdict(metric, CONTEXT_STATEMENT, comp.idx, "query", answer, value=YES_NO[word],
                                   detail=f"{word}: {'' if word == 'yes' else 'not '}relevant (source {j + 1})"))
    return out


async def match_de_answer_relevancy(ctx: Context) -> list[Verdict]:
    """Statements of the response, each relevant to the query (yes or idk) or not (no)."""
    statements = await _response_statements(ctx)
    if not isinstance(statements, list):
        return ctx.decompose_failure("de_answer_relevancy", DE_STATEMENT, statements)
    return await _judge_lines(ctx, "de_answer_relevancy", DE_STATEMENT, statements, "query",
                              "de_answer_relevancy", "claims", NOT_CONTRADICTED, query=ctx.item.query)


async def match_de_answer_relevancy_sim(ctx: Context) -> list[Verdict]:
    """Similarity form: DeepEval wraps RAGAS here, so the generated questions are shared with it."""
    return await _answer_relevance(ctx, "de_answer_relevancy_sim")


async def match_de_faithfulness(ctx: Context) -> list[Verdict]:
    """Claims of the response, each supported (yes), not mentioned (idk) or contradicted (no) by the sources."""
    statements = await _response_statements(ctx)
    if not isinstance(statements, list):
        return ctx.decompose_failure("de_faithfulness", DE_STATEMENT, statements)
    return await _judge_lines(ctx, "de_faithfulness", DE_STATEMENT, statements, "sources",
                              "de_faithfulness", "claims", NOT_CONTRADICTED, sources=list(ctx.item.sources))


async def match_de_hallucination(ctx: Context) -> list[Verdict]:
    """Per source: does the response contradict it? Our items carry no ideal contexts, so the sources serve."""
    sources = [Component(ctx.item.id, SOURCE, j, s) for j, s in enumerate(ctx.item.sources)]
    return await _judge_lines(ctx, "de_hallucination", SOURCE, sources, "response", "de_hallucination",
                              "sources", CONTRADICTS, response=ctx.item.response)


def geval(criteria: str = DEFAULT_CRITERIA, metric: str = "de_geval") -> Metric:
    """A G-Eval metric for `criteria`: evaluation steps from the criteria, then a 1-5 score.

    The steps request is the same for every item, so the judge's request cache answers it after the first.

    When the judge answers with a first-token distribution ({token: logprob}), the score is
    probability-weighted; otherwise it is the plain score.
    """
    async def match(ctx: Context) -> list[Verdict]:
        ctx.components.append(Component(ctx.item.id, CRITERION, 0, criteria))
        steps = await _decompose(ctx, f"geval:{criteria}", EVALUATION_STEP, "de_geval_steps", criteria=criteria)
        if not isinstance(steps, list):
            return ctx.decompose_failure(metric, EVALUATION_STEP, steps)
        if not steps:
            return []
        answer = await ctx.judge.ask("de_geval_score", criteria=criteria,
                                     steps="\n".join(f"{s.idx + 1}. {s.text}" for s in steps),
                                     query=ctx.item.query, sources=list(ctx.item.sources), response=ctx.item.response)
        return [_geval_verdict(ctx, metric, answer)]
    return Metric(match, prompts=("de_geval_steps", "de_geval_score"),
                  description="DeepEval G-Eval: criteria -> evaluation steps -> 1-5 score, normalised to [0, 1]")


def _geval_verdict(ctx: Context, metric: str, answer: Answer) -> Verdict:
    """The G-Eval verdict: value (score - 1) / 4, the (weighted) 1-5 score kept as the verdict's score."""
    if answer.status is not Status.OK:
        return ctx.verdict(metric, CRITERION, 0, "response", answer)
    low, high = GEVAL_SCALE[0], GEVAL_SCALE[-1]
    if isinstance(answer.value, dict):
        score = geval_weighted(answer.value)
        if score is None:
            missing = Answer(None, Status.UNPARSED, answer.call_key, answer.raw,
                             detail="no score token among the top logprobs")
            return ctx.verdict(metric, CRITERION, 0, "response", missing)
        detail = f"probability-weighted score {score:.2f} of {high}"
    else:
        score, detail = float(answer.value), f"score {answer.value} of {high}"
    return ctx.verdict(metric, CRITERION, 0, "response", answer, value=(score - low) / (high - low),
                       prob=score, detail=detail)


# ---------------------------------------------------------------- registry

def _two(prompt: str) -> tuple[str, str]:
    return f"{prompt}_1", f"{prompt}_2"


METRICS: dict[str, Metric] = {
    "ragas_faithfulness": Metric(
        match_ragas_faithfulness, prompts=("ragas_statements", "ragas_faithfulness"),
        description="RAGAS faithfulness: share of the answer's statements supported by the context"),
    "ragas_answer_relevance": Metric(
        match_ragas_answer_relevance, prompts=("ragas_questions",),
        description="RAGAS answer relevance: mean cosine between the query and 3 questions generated from the answer"),
    "ragas_context_relevance": Metric(
        match_ragas_context_relevance, prompts=("ragas_context_sentences",),
        description="RAGAS context relevance: extracted relevant sentences / all context sentences"),
    "nv_answer_accuracy": Metric(
        match_nv_answer_accuracy, needs_reference=True, prompts=_two("nv_answer_accuracy"),
        description="Nvidia answer accuracy: 2 templates rated 0/2/4 against the reference (roles swapped), averaged"),
    "nv_context_relevance": Metric(
        match_nv_context_relevance, prompts=_two("nv_context_relevance"),
        description="Nvidia context relevance: 2 templates rate the context's relevance 0/1/2, averaged"),
    "nv_groundedness": Metric(
        match_nv_groundedness, prompts=_two("nv_groundedness"),
        description="Nvidia response groundedness: 2 templates rate the response's grounding 0/1/2, averaged"),
    "de_contextual_precision": Metric(
        match_de_contextual_precision, aggregate_ranked_precision, needs_reference=True,
        prompts=("de_contextual_precision",),
        description="DeepEval contextual precision: rank-weighted precision of sources useful for the reference"),
    "de_contextual_recall": Metric(
        match_de_contextual_recall, needs_reference=True, prompts=("de_statements", "de_contextual_recall"),
        description="DeepEval contextual recall: share of the reference's statements attributable to the sources"),
    "de_contextual_relevancy": Metric(
        match_de_contextual_relevancy, prompts=("de_contextual_relevancy",),
        description="DeepEval contextual relevancy: share of the sources' statements relevant to the query"),
    "de_answer_relevancy": Metric(
        match_de_answer_relevancy, prompts=("de_statements", "de_answer_relevancy"),
        description="DeepEval answer relevancy: share of the response's statements relevant to the query"),
    "de_answer_relevancy_sim": Metric(
        match_de_answer_relevancy_sim, prompts=("ragas_questions",),
        description="DeepEval answer relevancy, similarity form (RAGAS's): mean cosine of generated questions "
                    "to the query"),
    "de_faithfulness": Metric(
        match_de_faithfulness, prompts=("de_statements", "de_faithfulness"),
        description="DeepEval faithfulness: share of the response's claims not contradicted by the sources"),
    "de_hallucination": Metric(
        match_de_hallucination, prompts=("de_hallucination",),
        description="DeepEval hallucination: share of sources the response contradicts (lower is better)"),
    "de_geval": geval(),
}

# Prompt names this module defines (prompts/ragas_*, nv_*, de_*).
PROMPTS = frozenset(PARSERS)


# ---------------------------------------------------------------- offline answers
# Simple, deterministic stand-ins so every metric runs with no key. They reuse the offline judge's
# calibrated decisions: statements are its claim split, support is offline.support, relevance is
# offline.essential, coverage is offline.covers; Nvidia ratings are bands of those shares. Every
# answer says in its detail how it was reached.

def _knowledge(sources: Sequence[str]) -> str:
    return "\n\n".join(sources)


def _lines(decisions: dict[int, tuple[str, float, str]]) -> Answer:
    """A "N: word - reason" answer, each element's evidence score kept for its verdict."""
    return Answer({k: (w, why) for k, (w, _, why) in decisions.items()}, Status.OK,
                  evidence={k: (score, why) for k, (_, score, why) in decisions.items()})


def _yes_no(decision: tuple[int, float, str]) -> tuple[str, float, str]:
    value, score, why = decision
    return ("yes" if value else "no"), score, f"offline: {why}"


def _three_way(decision: tuple[int, float, str]) -> tuple[str, float, str]:
    """DeepEval's yes/no/idk from a support decision: only a contradiction is a "no"."""
    value, score, why = decision
    word = "yes" if value else "no" if why.startswith("contradicted") else "idk"
    return word, score, f"offline: {why}"


def _supported_share(claims: Sequence[str], knowledge: str) -> float:
    return _mean([float(offline.support(c, knowledge)[0]) for c in claims])


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _rating(share: float, top: int, what: str) -> Answer:
    """All of it -> top, at least half -> the middle rating, less -> 0."""
    rating = top if share >= 1.0 else top // 2 if share >= 0.5 else 0
    return Answer(rating, Status.OK, prob=share, detail=f"offline: {what} {share:.0%} -> rating {rating} of {top}")


def _offline_statements(input: str) -> Answer:  # noqa: A002  (the prompt's variable name)
    return Answer(offline.split_claims(input), Status.OK, detail="offline: claim split")


def _offline_questions(response: str) -> Answer:
    questions = [re.sub(r"[.!?]+$", "", c) + "?" for c in offline.split_claims(response)[:N_QUESTIONS]]
    return Answer(questions, Status.OK, detail="offline: the answer's first statements, as questions")


def _offline_context_sentences(query: str, sources: list[str]) -> Answer:
    keep = [s for source in sources for s in offline.split_sentences(source) if offline.essential(s, query)[0]]
    return Answer(keep, Status.OK, detail="offline: the context sentences offline.essential accepts")


def _offline_accuracy(query: str, response: str, reference: str) -> Answer:
    # Template 2 is called with the roles swapped, so the same rule reads the reverse direction.
    return _rating(_supported_share(offline.split_claims(response), reference), 4,
                   "share of the answer's claims the other answer supports:")


def _offline_context_relevance(query: str, sources: list[str]) -> Answer:
    questions = offline.split_questions(query)
    share = _mean([float(offline.covers(_knowledge(sources), q)[0]) for q in questions])
    return _rating(share, 2, "share of the query's sub-questions the context answers:")


def _offline_groundedness(sources: list[str], response: str) -> Answer:
    return _rating(_supported_share(offline.split_claims(response), _knowledge(sources)), 2,
                   "share of the response's claims the context supports:")


def _offline_hallucination(response: str, sources: list[str]) -> Answer:
    # Offline, a contradiction is what offline.support calls one: a negated version of a source statement.
    decisions: dict[int, tuple[str, float, str]] = {}
    for j, source in enumerate(sources, 1):
        decisions[j] = ("yes", 0.0, "offline: no response claim contradicts this context")
        for claim in offline.split_claims(response):
            value, score, why = offline.support(claim, source)
            if why.startswith("contradicted"):
                decisions[j] = ("no", score, f"offline: {claim!r} {why}")
                break
    return _lines(decisions)


def _offline_precision(query: str, reference: str, sources: list[str]) -> Answer:
    # Useful for arriving at the reference: the source states something the reference says.
    decisions = {}
    for j, source in enumerate(sources, 1):
        backed = [s for s in offline.split_sentences(source) if offline.support(s, reference)[0]]
        decisions[j] = ("yes", 1.0, f"offline: the reference states {backed[0]!r}") if backed else \
            ("no", 0.0, "offline: the reference states none of this source's sentences")
    return _lines(decisions)


def _offline_context_relevancy(query: str, source: str) -> Answer:
    return Answer([("yes" if offline.essential(c, query)[0] else "no", c) for c in offline.split_claims(source)],
                  Status.OK, detail="offline: the source's claims, relevant when offline.essential accepts them")


def _offline_geval_score(criteria: str, steps: str, query: str, sources: list[str], response: str) -> Answer:
    # The default criteria ask for an answer that addresses the input and stays grounded: average those two shares.
    grounded = _supported_share(offline.split_claims(response), _knowledge(sources))
    answered = _mean([float(offline.covers(response, q, response=True)[0]) for q in offline.split_questions(query)])
    signal = (grounded + answered) / 2
    score = GEVAL_SCALE[0] + round(signal * (GEVAL_SCALE[-1] - GEVAL_SCALE[0]))
    return Answer(score, Status.OK, prob=signal,
                  detail=f"offline: {grounded:.0%} of claims grounded, {answered:.0%} of sub-questions answered")


offline.HANDLERS.update({
    "ragas_statements": lambda query, response: _offline_statements(response),
    "ragas_faithfulness": lambda sources, claims: _lines(
        {i: _yes_no(offline.support(c, _knowledge(sources))) for i, c in enumerate(claims, 1)}),
    "ragas_questions": _offline_questions,
    "ragas_context_sentences": _offline_context_sentences,
    "nv_answer_accuracy_1": _offline_accuracy,
    "nv_answer_accuracy_2": _offline_accuracy,
    "nv_context_relevance_1": _offline_context_relevance,
    "nv_context_relevance_2": _offline_context_relevance,
    "nv_groundedness_1": _offline_groundedness,
    "nv_groundedness_2": _offline_groundedness,
    "de_statements": _offline_statements,
    "de_answer_relevancy": lambda query, claims: _lines(
        {i: _yes_no(offline.essential(c, query)) for i, c in enumerate(claims, 1)}),
    "de_faithfulness": lambda sources, claims: _lines(
        {i: _three_way(offline.support(c, _knowledge(sources))) for i, c in enumerate(claims, 1)}),
    "de_hallucination": _offline_hallucination,
    "de_contextual_precision": _offline_precision,
    "de_contextual_recall": lambda sources, claims: _lines(
        {i: _yes_no(offline.support(c, _knowledge(sources))) for i, c in enumerate(claims, 1)}),
    "de_contextual_relevancy": _offline_context_relevancy,
    "de_geval_steps": lambda criteria: Answer(offline.split_sentences(criteria), Status.OK,
                                              detail="offline: the criteria's sentences, as steps"),
    "de_geval_score": _offline_geval_score,
})
