"""THELMA metrics: Decompose and Match steps that call a judge, and pure Aggregate functions.

Each metric is a `Metric(match, aggregate)`. `match(work)` returns the item's verdicts for that
metric; `aggregate(verdicts)` turns them into a Score without calling anything. Decompositions are
shared through the per-item `ItemWork`: RP and GR read one set of response claims, SQC and RQC one
set of sub-questions, each computed once. In batched mode one call judges many components; with
`per_component=True` every component gets its own call, as in the paper.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Mapping, Sequence

import numpy as np

from evaluators.embeddings import embed
from evaluators.records import (CLAIM, SENTENCE, SOURCE, SOURCE_FACT, SUBQUESTION, Answer, Component, Item,
                                Judge, Score, Status, Verdict)
from evaluators.text import split_sentences

BATCH = 40          # components per batched call; keeps replies short enough to parse reliably
SD_THRESHOLD = 0.78  # cosine at or above which two response sentences repeat (MiniLM; calibrated on WikiEval rows 0-19)


# ---------------------------------------------------------------- pure aggregation

def failure_status(verdicts: Sequence[Verdict]) -> Status:
    """The most common failure among verdicts that carry no value."""
    counts = Counter(v.status for v in verdicts if v.status is not Status.OK)
    return counts.most_common(1)[0][0] if counts else Status.EMPTY


def aggregate_mean(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """Mean of the OK verdicts; None with the failure status when none is OK, EMPTY when none exist."""
    ok = [v.value for v in verdicts if v.status is Status.OK and v.value is not None]
    if not ok:
        return Score(item_id, metric, None, 0, len(verdicts), failure_status(verdicts))
    return Score(item_id, metric, float(sum(ok)) / len(ok), len(ok), len(verdicts), Status.OK)


def aggregate_coverage(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """SQC: a sub-question is covered when any single source or the whole set answers it.

    A sub-question with no OK 1 and at least one failed verdict is not scored: the failed
    verdict might have been the 1.
    """
    per_question: dict[int, list[Verdict]] = {}
    for v in verdicts:
        per_question.setdefault(v.component_idx, []).append(v)
    folded: list[Verdict] = []
    for idx, group in sorted(per_question.items()):
        if any(v.status is Status.OK and v.value == 1 for v in group):
            folded.append(Verdict(item_id=item_id, metric=metric, component_kind=SUBQUESTION, component_idx=idx,
                                  target="any", value=1.0, status=Status.OK))
        elif all(v.status is Status.OK for v in group):
            folded.append(Verdict(item_id=item_id, metric=metric, component_kind=SUBQUESTION, component_idx=idx,
                                  target="any", value=0.0, status=Status.OK))
        else:
            folded.append(Verdict(item_id=item_id, metric=metric, component_kind=SUBQUESTION, component_idx=idx,
                                  target="any", value=None, status=failure_status(group)))
    return aggregate_mean(item_id, metric, folded)


def sd_verdicts(item_id: str, similarity: np.ndarray, threshold: float = SD_THRESHOLD) -> list[Verdict]:
    """SD match: a sentence repeats when its cosine to another sentence reaches the threshold.

    The verdict value is distinctness (1 distinct, 0 repeats), so SD is the mean: 1 - share repeating.
    """
    n = similarity.shape[0]
    out: list[Verdict] = []
    for i in range(n):
        others = [(float(similarity[i, j]), j) for j in range(n) if j != i]
        if not others:
            out.append(Verdict(item_id=item_id, metric="sd", component_kind=SENTENCE, component_idx=i,
                               target="response", value=1.0, status=Status.OK, detail="only sentence"))
            continue
        sim, j = max(others)
        out.append(Verdict(item_id=item_id, metric="sd", component_kind=SENTENCE, component_idx=i,
                           target=f"sentence:{j}", value=float(sim < threshold), status=Status.OK, evidence=sim,
                           detail=f"most similar: sentence {j + 1}, cosine {sim:.2f} vs threshold {threshold:.2f}"))
    return out


# ---------------------------------------------------------------- per-item work

@dataclass
class ItemWork:
    """One item under evaluation: shared decompositions, computed once, and the components found."""

    item: Item
    judge: Judge
    metrics: frozenset[str]
    per_component: bool = False
    sd_threshold: float = SD_THRESHOLD
    components: list[Component] = field(default_factory=list)
    _tasks: dict[str, asyncio.Task[Any]] = field(default_factory=dict)

    def once(self, name: str, make: Callable[[], Awaitable[Any]]) -> Awaitable[Any]:
        """Run `make` once per item; later callers await the same task."""
        if name not in self._tasks:
            self._tasks[name] = asyncio.ensure_future(make())
        return self._tasks[name]

    def verdict(self, metric: str, kind: str, idx: int, target: str, answer: Answer,
                value: Any = None, prob: float | None = None, detail: str = "") -> Verdict:
        """A verdict from an answer: the value only when the answer is OK."""
        ok = answer.status is Status.OK
        return Verdict(item_id=self.item.id, metric=metric, component_kind=kind, component_idx=idx, target=target,
                       value=float(value if value is not None else answer.value) if ok else None,
                       status=answer.status, evidence=prob if prob is not None else answer.prob,
                       call_key=answer.call_key, detail=detail or answer.detail)

    # ---------------------------------------------------------------- decompositions
    async def claims(self) -> list[Component] | Answer:
        """B.1 claims of the response (shared by RP and GR), or the failed answer."""
        async def make() -> list[Component] | Answer:
            answer = await self.judge.ask("claims", input=self.item.response)
            return self._decomposed(answer, CLAIM)
        return await self.once("claims", make)

    async def subquestions(self) -> list[Component] | Answer:
        """B.3 sub-questions of the query (shared by SQC and RQC), or the failed answer."""
        async def make() -> list[Component] | Answer:
            answer = await self.judge.ask("subquestions", input=self.item.query)
            return self._decomposed(answer, SUBQUESTION)
        return await self.once("subquestions", make)

    async def facts(self) -> tuple[list[Component], list[Verdict]]:
        """B.1 claims of every source (SP2), and failure verdicts for sources that could not be split."""
        async def make() -> tuple[list[Component], list[Verdict]]:
            sources = list(self.item.sources)
            if self.per_component:
                answers = await asyncio.gather(*(self.judge.ask("claims", input=s) for s in sources))
                per_source = {j: (a, a.value if a.status is Status.OK else None) for j, a in enumerate(answers)}
            else:
                a = await self.judge.ask("claims_batch", texts=sources)
                per_source = {j: (a, (a.value or {}).get(j + 1) if a.status is Status.OK else None)
                              for j in range(len(sources))}
            facts: list[Component] = []
            failures: list[Verdict] = []
            for j, (answer, texts) in per_source.items():
                if texts is None:
                    status = answer.status if answer.status is not Status.OK else Status.UNPARSED
                    failures.append(Verdict(item_id=self.item.id, metric="sp2", component_kind=SOURCE_FACT,
                                            component_idx=-1, target=f"decompose:source:{j}", value=None,
                                            status=status, call_key=answer.call_key,
                                            detail=answer.detail or "no claims block"))
                    continue
                for text in texts:
                    facts.append(Component(self.item.id, SOURCE_FACT, len(facts), text, j, answer.call_key))
            self.components.extend(facts)
            return facts, failures
        return await self.once("facts", make)

    def _decomposed(self, answer: Answer, kind: str) -> list[Component] | Answer:
        if answer.status is not Status.OK:
            return answer
        parts = [Component(self.item.id, kind, i, t, None, answer.call_key) for i, t in enumerate(answer.value)]
        self.components.extend(parts)
        return parts

    def decompose_failure(self, metric: str, kind: str, answer: Answer) -> list[Verdict]:
        """A failed decomposition is one visible failed verdict, with the call that failed."""
        return [Verdict(item_id=self.item.id, metric=metric, component_kind=kind, component_idx=-1,
                        target="decompose", value=None, status=answer.status, call_key=answer.call_key,
                        detail=answer.detail)]

    # ---------------------------------------------------------------- batching
    async def judge_each(self, metric: str, kind: str, indices: Sequence[int], target: str,
                         single: Callable[[int], Awaitable[Answer]],
                         batch: Callable[[Sequence[int]], Awaitable[Answer]]) -> list[Verdict]:
        """One call per component, or one call per BATCH components whose reply lines are "N: value"."""
        if self.per_component:
            answers = await asyncio.gather(*(single(i) for i in indices))
            return [self.verdict(metric, kind, i, target, a) for i, a in zip(indices, answers)]
        chunks = [indices[k:k + BATCH] for k in range(0, len(indices), BATCH)]
        replies = await asyncio.gather(*(batch(chunk) for chunk in chunks))
        out: list[Verdict] = []
        for chunk, answer in zip(chunks, replies):
            for n, i in enumerate(chunk, 1):
                out.append(self.element(metric, kind, i, target, answer, n))
        return out

    def element(self, metric: str, kind: str, idx: int, target: str, answer: Answer, key: Any) -> Verdict:
        """The verdict for one element of a batched answer; an element the reply skipped is unparsed."""
        if answer.status is not Status.OK:
            return self.verdict(metric, kind, idx, target, answer)
        if key not in answer.value:
            missing = Answer(None, Status.UNPARSED, answer.call_key, answer.raw, detail=f"element {key} missing from reply")
            return self.verdict(metric, kind, idx, target, missing)
        prob, detail = answer.evidence.get(key, (None, ""))
        return self.verdict(metric, kind, idx, target, answer, value=answer.value[key], prob=prob, detail=detail)


# ---------------------------------------------------------------- match steps

async def match_sp1(work: ItemWork) -> list[Verdict]:
    """SP1: does each source, as retrieved, contain anything essential to answer the query?"""
    sources = list(work.item.sources)
    q = work.item.query
    return await work.judge_each(
        "sp1", SOURCE, range(len(sources)), "query",
        lambda j: work.judge.ask("source_essential", query=q, source=sources[j]),
        lambda js: work.judge.ask("source_essential_batch", query=q, sources=[sources[j] for j in js]))


async def _essential(work: ItemWork) -> dict[str, list[Verdict]]:
    """B.2 essentiality of source facts (SP2) and response claims (RP): one batched call judges both."""
    async def make() -> dict[str, list[Verdict]]:
        wanted = [m for m in ("sp2", "rp") if m in work.metrics]
        parts: dict[str, tuple[list[Component], list[Verdict]]] = {}
        if "sp2" in wanted:
            parts["sp2"] = await work.facts()
        if "rp" in wanted:
            claims = await work.claims()
            parts["rp"] = (claims, []) if isinstance(claims, list) else ([], work.decompose_failure("rp", CLAIM, claims))
        flat = [(m, c) for m in wanted for c in parts[m][0]]
        q = work.item.query
        verdicts = await work.judge_each(
            "essential", "", range(len(flat)), "query",
            lambda k: work.judge.ask("essential", query=q, response=flat[k][1].text),
            lambda ks: work.judge.ask("essential_batch", query=q, facts=[flat[k][1].text for k in ks]))
        out: dict[str, list[Verdict]] = {m: list(parts[m][1]) for m in wanted}
        for (metric, comp), v in zip(flat, verdicts):
            out[metric].append(replace(v, metric=metric, component_kind=comp.kind, component_idx=comp.idx))
        return out
    return await work.once("essential", make)


async def match_sp2(work: ItemWork) -> list[Verdict]:
    """SP2: is each fact of the sources essential to answer the query?"""
    return (await _essential(work))["sp2"]


async def match_rp(work: ItemWork) -> list[Verdict]:
    """RP: is each claim of the response essential to answer some part of the query?"""
    return (await _essential(work))["rp"]


def _knowledge(item: Item) -> str:
    return "\n\n".join(item.sources)


async def match_gr(work: ItemWork) -> list[Verdict]:
    """GR: is each claim of the response supported by the whole source set (B.4)?"""
    claims = await work.claims()
    if not isinstance(claims, list):
        return work.decompose_failure("gr", CLAIM, claims)
    kb = _knowledge(work.item)
    return await work.judge_each(
        "gr", CLAIM, range(len(claims)), "sources",
        lambda i: work.judge.ask("groundedness", sources=kb, claim=claims[i].text),
        lambda ix: work.judge.ask("groundedness_batch", sources=kb, claims=[claims[i].text for i in ix]))


async def match_sqc(work: ItemWork) -> list[Verdict]:
    """SQC: for each sub-question, does any single source answer it, or the whole set (multi-hop)?"""
    subqs = await work.subquestions()
    if not isinstance(subqs, list):
        return work.decompose_failure("sqc", SUBQUESTION, subqs)
    sources = list(work.item.sources)
    # With one source, "the whole set" is that source: no second question about it.
    targets: list[int | str] = list(range(len(sources))) + (["all"] if len(sources) > 1 else [])

    def name(t: int | str) -> str:
        return "sources" if t == "all" else f"source:{t}"

    if work.per_component:
        kb = _knowledge(work.item)
        pairs = [(q, t) for q in subqs for t in targets]
        answers = await asyncio.gather(*(
            work.judge.ask("source_answers", source=kb if t == "all" else sources[t], question=q.text)
            for q, t in pairs))
        return [work.verdict("sqc", SUBQUESTION, q.idx, name(t), a) for (q, t), a in zip(pairs, answers)]
    out: list[Verdict] = []
    for k in range(0, len(subqs), BATCH):
        chunk = subqs[k:k + BATCH]
        answer = await work.judge.ask("source_answers_batch", sources=sources, questions=[q.text for q in chunk])
        for n, q in enumerate(chunk, 1):
            for t in targets:
                out.append(work.element("sqc", SUBQUESTION, q.idx, name(t), answer, (n, t if t == "all" else t + 1)))
    return out


async def match_rqc(work: ItemWork) -> list[Verdict]:
    """RQC: does the response address the intent of each sub-question?"""
    subqs = await work.subquestions()
    if not isinstance(subqs, list):
        return work.decompose_failure("rqc", SUBQUESTION, subqs)
    r = work.item.response
    return await work.judge_each(
        "rqc", SUBQUESTION, range(len(subqs)), "response",
        lambda l: work.judge.ask("response_addresses", question=subqs[l].text, response=r),
        lambda ls: work.judge.ask("response_addresses_batch", response=r, questions=[subqs[l].text for l in ls]))


async def match_sd(work: ItemWork) -> list[Verdict]:
    """SD: sentences of the response compared pairwise by MiniLM cosine; no judge call."""
    sentences = split_sentences(work.item.response)
    work.components.extend(Component(work.item.id, SENTENCE, i, s) for i, s in enumerate(sentences))
    vectors = embed(sentences)
    return sd_verdicts(work.item.id, vectors @ vectors.T, work.sd_threshold)


# ---------------------------------------------------------------- the metrics (evaluators/registry.py lists them by id)

@dataclass(frozen=True)
class Metric:
    """A metric: its match step, its pure aggregate, and what it needs from an item."""

    match: Callable[[ItemWork], Awaitable[list[Verdict]]]
    aggregate: Callable[[str, str, Sequence[Verdict]], Score] = aggregate_mean
    needs_reference: bool = False
    description: str = ""
    prompts: tuple[str, ...] = ()  # prompt files it may use: their hashes are recorded on the run


_CLAIMS = ("claims", "claims_batch")
_ESSENTIAL = ("essential", "essential_batch")
_SUBQ = ("subquestions",)

SP1 = Metric(match_sp1, description="Source precision, chunk level: share of sources with essential information",
             prompts=("source_essential", "source_essential_batch"))
SP2 = Metric(match_sp2, description="Source precision, fact level: share of source facts essential to the query",
             prompts=_CLAIMS + _ESSENTIAL)
SQC = Metric(match_sqc, aggregate_coverage, description="Source query coverage: share of sub-questions the sources answer",
             prompts=_SUBQ + ("source_answers", "source_answers_batch"))
RP = Metric(match_rp, description="Response precision: share of response claims essential to the query",
            prompts=_CLAIMS + _ESSENTIAL)
RQC = Metric(match_rqc, description="Response query coverage: share of sub-questions the response addresses",
             prompts=_SUBQ + ("response_addresses", "response_addresses_batch"))
SD = Metric(match_sd, description="Self-distinctness: 1 - share of response sentences that repeat another")
GR = Metric(match_gr, description="Groundedness: share of response claims supported by the sources",
            prompts=_CLAIMS + ("groundedness", "groundedness_batch"))


@dataclass
class ItemResult:
    """Everything one item produced: components, verdicts and scores."""

    components: list[Component]
    verdicts: list[Verdict]
    scores: list[Score]


async def evaluate_item(item: Item, metrics: Mapping[str, Metric], judge: Judge, per_component: bool = False,
                        sd_threshold: float = SD_THRESHOLD) -> ItemResult:
    """Decompose, match and aggregate every given metric ({id: Metric}) for one item."""
    names = list(metrics)
    work = ItemWork(item, judge, frozenset(names), per_component, sd_threshold)
    work.components.extend(Component(item.id, SOURCE, j, s) for j, s in enumerate(item.sources))
    runnable = [m for m in names if not (metrics[m].needs_reference and not item.reference)]
    results = await asyncio.gather(*(metrics[m].match(work) for m in runnable))
    verdicts = [v for vs in results for v in vs]
    scores = [metrics[m].aggregate(item.id, m, vs) for m, vs in zip(runnable, results)]
    scores += [Score(item.id, m, None, 0, 0, Status.NOT_APPLICABLE) for m in names if m not in runnable]
    return ItemResult(work.components, verdicts, scores)
