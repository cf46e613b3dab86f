"""THELMA metrics: Decompose and Match steps that call a judge, and pure Aggregate functions.

Each metric is a `Metric(id, name, match, aggregate, ...)`. `match(work)` returns the item's verdicts for that
metric; `aggregate(metric, ..., verdicts, band)` turns them into a Score without calling anything,
leaving out the verdicts whose p falls inside the uncertainty band (unsure). Decompositions are
shared through the per-item `ItemWork`: RP and GR read one set of response claims, SQC and RQC one
set of sub-questions, each computed once. In batched mode one call judges many components; with
`per_component=True` every component gets its own call, as in the paper.

Batched replies are read strictly: an element the reply leaves out is asked once more by itself,
then `unparsed`; one given twice is `unparsed` (never last-wins). A piece with no content word is
no component, and a metric whose text states nothing ("...", "Yes", "N/A") is `empty`, never 0.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Mapping, Sequence

import numpy as np

from evaluators.core.confidence import Band, is_unsure
from evaluators.core.masking import mask_secrets
from evaluators.core.records import (
    CALIBRATED,
    CLAIM,
    LABEL,
    SENTENCE,
    SOURCE,
    SOURCE_FACT,
    SUBQUESTION,
    Answer,
    Component,
    Confidence,
    Item,
    Judge,
    Score,
    Status,
    Verdict,
    unit,
)
from evaluators.core.text import has_content, has_words, split_sentences, unreadable
from evaluators.judges import calibration
from evaluators.judges.embeddings import embed

BATCH = 40  # components per batched call; keeps replies short enough to parse reliably
SD_THRESHOLD = 0.78  # cosine at or above which two response sentences repeat (MiniLM; calibrated on WikiEval rows 0-19)
SD_BLOCK = 512  # rows of the cosine matrix held at once: 512 x n float32, never n x n


# ---------------------------------------------------------------- pure aggregation
#
# Abstention is decided on read: `with_band` marks an OK binary verdict whose p lies inside the
# uncertainty band as UNSURE (value None), and every aggregate then leaves it out like a failure and
# counts it in Score.n_unsure. `aggregate()` is the one entry point, for the runner (default bands)
# and for reads at any band; the aggregate functions themselves read the marks, never a band.


def is_unsure_verdict(verdict: Verdict, band: Band | None = None) -> bool:
    """An OK 0/1 verdict whose p lies strictly inside the band for its p kind (see confidence.is_unsure)."""
    return verdict.status is Status.OK and verdict.value in (0.0, 1.0) and is_unsure(verdict.p, verdict.p_kind, band)


def with_band(verdicts: Sequence[Verdict], band: Band | None = None) -> list[Verdict]:
    """The verdicts with each unsure one marked UNSURE (value None; p, kind and tier kept)."""
    return [replace(v, value=None, status=Status.UNSURE) if is_unsure_verdict(v, band) else v for v in verdicts]


def failure_status(verdicts: Sequence[Verdict]) -> Status:
    """Why verdicts carry no value: UNSURE when the judge answered some but was unsure (moving the band
    may score them), else the most common failure (ties by name, so SQL can agree); EMPTY when none."""
    counts = Counter(v.status for v in verdicts if v.status is not Status.OK)
    if Status.UNSURE in counts:
        return Status.UNSURE
    return min(counts, key=lambda s: (-counts[s], s.value)) if counts else Status.EMPTY


def aggregate_mean(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """Mean of the OK verdicts; None with the failure status when none is OK, EMPTY when none exist.

    Verdicts marked UNSURE (with_band) are left out and counted in n_unsure.
    """
    ok = [v.value for v in verdicts if v.status is Status.OK and v.value is not None]
    n_unsure = sum(v.status is Status.UNSURE for v in verdicts)
    if not ok:
        return Score(item_id, metric, None, 0, len(verdicts), failure_status(verdicts), n_unsure)
    return Score(item_id, metric, float(sum(ok)) / len(ok), len(ok), len(verdicts), Status.OK, n_unsure)


def aggregate_coverage(item_id: str, metric: str, verdicts: Sequence[Verdict]) -> Score:
    """SQC: a sub-question is covered when any single source or the whole set answers it.

    A confident 1 covers. A sub-question with no confident 1 is not scored when any of its verdicts
    is unsure (it reads unsure) or failed: that verdict might have been the 1. n_scored, n_total and
    n_unsure count sub-questions.
    """
    per_question: dict[int, list[Verdict]] = {}
    for v in verdicts:
        per_question.setdefault(v.component_idx, []).append(v)
    folded: list[Verdict] = []
    for idx, group in sorted(per_question.items()):
        if any(v.status is Status.OK and v.value == 1 for v in group):
            value, status = 1.0, Status.OK
        elif all(v.status is Status.OK for v in group):
            value, status = 0.0, Status.OK
        else:
            value, status = None, failure_status(group)
        folded.append(
            Verdict(
                item_id=item_id,
                metric=metric,
                component_kind=SUBQUESTION,
                component_idx=idx,
                target="any",
                value=value,
                status=status,
            )
        )
    return aggregate_mean(item_id, metric, folded)


def aggregate(
    metric: Metric, item_id: str, metric_id: str, verdicts: Sequence[Verdict], band: Band | None = None
) -> Score:
    """One item's score for a metric from its verdicts, with the unsure ones left out at `band`
    (None: each p kind's default band, what the runner stores), and its expected value (any band)."""
    return replace(
        metric.aggregate(item_id, metric_id, with_band(verdicts, band)), expected=expected_of(metric, verdicts)
    )


def expected_mean(verdicts: Sequence[Verdict]) -> float | None:
    """The share of 1s the judge expects: the mean of the p of the verdicts it answered, unsure ones
    included, failures left out; None when none was answered or one answered has no p or is no 0/1
    match (a rating, a bare label)."""
    judged = [v for v in verdicts if v.status in (Status.OK, Status.UNSURE)]
    if not judged or any(v.p is None or v.value not in (0.0, 1.0, None) for v in judged):
        return None
    return sum(v.p for v in judged if v.p is not None) / len(judged)


def expected_of(metric: Metric, verdicts: Sequence[Verdict]) -> float | None:
    """A score's expected value (ours, beside the score, never in it): the metric's own `expected`, else
    the mean of the verdicts' p for a metric whose score is a mean; None for any other."""
    if metric.expected is not None:
        return metric.expected(verdicts)
    return expected_mean(verdicts) if metric.aggregate is aggregate_mean else None


def rescore(
    item_id: str, verdicts: Sequence[Verdict], metrics: Mapping[str, Metric], band: Band | None = None
) -> dict[str, Score]:
    """Every given metric's score for one item at `band`, from its stored or fresh verdicts, without a judge."""
    by_metric: dict[str, list[Verdict]] = {m: [] for m in metrics}
    for v in verdicts:
        if v.metric in by_metric:
            by_metric[v.metric].append(v)
    return {m: aggregate(metrics[m], item_id, m, vs, band) for m, vs in by_metric.items()}


class Cosines:
    """The cosine matrix of unit vectors, computed a block of rows at a time: never n x n in memory."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.shape = (len(vectors), len(vectors))

    def __getitem__(self, rows: slice) -> np.ndarray:
        return self.vectors[rows] @ self.vectors.T


def sd_verdicts(item_id: str, similarity: np.ndarray | Cosines, threshold: float = SD_THRESHOLD) -> list[Verdict]:
    """SD match: a sentence repeats when its cosine to another sentence reaches the threshold.

    The verdict value is distinctness (1 distinct, 0 repeats), so SD is the mean: 1 - share repeating.
    Its p = P(distinct) is calibrated from the cosine (evaluators/judges/calibration.py); the embedded
    encoder decides SD whatever judge the run uses, so its tier is the offline one.
    `similarity` is read SD_BLOCK rows at a time, so a `Cosines` keeps a 1 MB response in bounded memory.
    """
    n = similarity.shape[0]
    if n == 1:  # nothing to repeat: distinct for certain
        return [
            Verdict(
                item_id=item_id,
                metric="sd",
                component_kind=SENTENCE,
                component_idx=0,
                target="response",
                value=1.0,
                status=Status.OK,
                detail="only sentence",
                p=1.0,
                p_kind=CALIBRATED,
                tier=calibration.SD_TIER,
            )
        ]
    out: list[Verdict] = []
    for start in range(0, n, SD_BLOCK):
        rows = np.array(similarity[start : start + SD_BLOCK], dtype=np.float32)
        rows[np.arange(len(rows)), np.arange(start, start + len(rows))] = -np.inf  # not its own neighbour
        nearest = rows.argmax(axis=1)
        for k, j in enumerate(nearest):
            i, sim = start + k, unit(rows[k, j])
            distinct = int(sim < threshold)
            out.append(
                Verdict(
                    item_id=item_id,
                    metric="sd",
                    component_kind=SENTENCE,
                    component_idx=i,
                    target=f"sentence:{j}",
                    value=float(distinct),
                    status=Status.OK,
                    evidence=sim,
                    detail=f"most similar: sentence {j + 1}, cosine {sim:.2f} vs threshold {threshold:.2f}",
                    p=calibration.probability(calibration.SD, distinct, sim),
                    p_kind=CALIBRATED,
                    tier=calibration.SD_TIER,
                )
            )
    return out


# ---------------------------------------------------------------- batched replies, element by element


def split_elements(answer: Answer, asked: Sequence[Any]) -> dict[Any, Answer | None]:
    """Each asked element of a batched answer as an answer of its own; None for an element it left out.

    A failed answer fails every element. A reply that numbers an element that was not asked cannot
    be trusted to number the others right: every element is unparsed. An element the reply gave
    twice, or that the judge could not read, keeps its own failure.
    """
    if answer.status is not Status.OK:
        return {k: answer for k in asked}
    value = answer.value
    failed = getattr(value, "failed", {})
    expected = set(asked)
    stray = [k for k in [*value, *failed] if k not in expected]
    if stray:
        bad = Answer(
            None,
            Status.UNPARSED,
            answer.call_key,
            answer.raw,
            detail=f"the reply numbers elements that were not asked ({', '.join(map(str, stray[:5]))})",
        )
        return {k: bad for k in asked}
    out: dict[Any, Answer | None] = {}
    for k in asked:
        key = answer.call_keys.get(k, answer.call_key)
        if k in failed:
            status, why = failed[k]
            out[k] = Answer(None, status, key, answer.raw, detail=why)
        elif k in value:
            prob, why = answer.evidence.get(k, (None, ""))
            out[k] = Answer(
                value[k],
                Status.OK,
                key,
                answer.raw,
                prob=prob,
                detail=why or answer.detail,
                confidence=answer.confidences.get(k, answer.confidence),
            )
        else:
            out[k] = None
    return out


def left_out(answer: Answer, key: Any) -> Answer:
    """An element still missing when asked by itself: unparsed, with the re-ask's reply kept."""
    return Answer(
        None,
        Status.UNPARSED,
        answer.call_key,
        answer.raw,
        detail=f"element {key} left out of the batched reply and of the reply asking it alone",
    )


async def read_elements(
    answer: Answer, asked: Sequence[Any], wanted: Sequence[Any], alone: Callable[[Any], Awaitable[Answer]]
) -> dict[Any, Answer]:
    """The `wanted` elements of a batched answer to the `asked` ones; each one the reply left out is
    asked once more by itself (`alone(key)`, an answer for that element only)."""
    got = split_elements(answer, asked)
    missing = [k for k in wanted if got[k] is None]
    again = await asyncio.gather(*(alone(k) for k in missing))
    got.update(zip(missing, again))
    return {k: got[k] for k in wanted}  # type: ignore[misc]  # every missing one was filled


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

    def verdict(
        self,
        metric: str,
        kind: str,
        idx: int,
        target: str,
        answer: Answer,
        value: Any = None,
        prob: float | None = None,
        detail: str = "",
    ) -> Verdict:
        """A verdict from an answer: the value only when the answer is OK, with how sure the judge is.

        An answer without a confidence gives a binary value as its own (uncalibrated) p.
        """
        ok = answer.status is Status.OK
        decided = float(value if value is not None else answer.value) if ok else None
        confidence = answer.confidence
        if confidence is None and decided in (0.0, 1.0):
            confidence = Confidence(decided, LABEL, self.judge.name)
        return Verdict(
            item_id=self.item.id,
            metric=metric,
            component_kind=kind,
            component_idx=idx,
            target=target,
            value=decided,
            status=answer.status,
            evidence=prob if prob is not None else answer.prob,
            call_key=answer.call_key,
            detail=detail or answer.detail,
            p=confidence.p if ok and confidence else None,
            p_kind=confidence.kind if ok and confidence else None,
            tier=confidence.tier if ok and confidence else None,
        )

    # ---------------------------------------------------------------- decompositions
    async def claims(self) -> list[Component] | Answer:
        """B.1 claims of the response (shared by RP and GR), or the failed answer."""

        async def make() -> list[Component] | Answer:
            answer = await self.judge.ask("claims", input=self.item.response)
            return self.decomposed(answer, CLAIM)

        return await self.once("claims", make)

    async def subquestions(self) -> list[Component] | Answer:
        """B.3 sub-questions of the query (shared by SQC and RQC), or the failed answer."""

        async def make() -> list[Component] | Answer:
            answer = await self.judge.ask("subquestions", input=self.item.query)
            return self.decomposed(answer, SUBQUESTION)

        return await self.once("subquestions", make)

    async def facts(self) -> tuple[list[Component], list[Verdict]]:
        """B.1 claims of every source (SP2), and failure verdicts for sources that could not be split.

        A source with no content word has no facts and is not sent.
        """

        async def make() -> tuple[list[Component], list[Verdict]]:
            sources = list(self.item.sources)
            wanted = [j for j, s in enumerate(sources) if has_content(s)]
            if self.per_component or not wanted:
                answers = await asyncio.gather(*(self.judge.ask("claims", input=sources[j]) for j in wanted))
                per_source = dict(zip(wanted, answers))
            else:
                numbers = list(range(1, len(wanted) + 1))
                batch = await self.judge.ask("claims_batch", texts=[sources[j] for j in wanted])
                got = await read_elements(
                    batch, numbers, numbers, lambda n: self.judge.ask("claims", input=sources[wanted[n - 1]])
                )
                per_source = {wanted[n - 1]: got[n] for n in numbers}
            facts: list[Component] = []
            failures: list[Verdict] = []
            for j, answer in per_source.items():
                if answer.status is not Status.OK:
                    failures.append(
                        Verdict(
                            item_id=self.item.id,
                            metric="sp2",
                            component_kind=SOURCE_FACT,
                            component_idx=-1,
                            target=f"decompose:source:{j}",
                            value=None,
                            status=answer.status,
                            call_key=answer.call_key,
                            detail=answer.detail,
                        )
                    )
                    continue
                for text in answer.value:
                    if has_content(text):
                        facts.append(Component(self.item.id, SOURCE_FACT, len(facts), text, j, answer.call_key))
            self.components.extend(facts)
            return facts, failures

        return await self.once("facts", make)

    def decomposed(self, answer: Answer, kind: str) -> list[Component] | Answer:
        """Components from a list answer; a piece with no content word ("...", "Yes.") is none."""
        if answer.status is not Status.OK:
            return answer
        texts = [t for t in answer.value if has_content(t)]
        parts = [Component(self.item.id, kind, i, t, None, answer.call_key) for i, t in enumerate(texts)]
        self.components.extend(parts)
        return parts

    def decompose_failure(self, metric: str, kind: str, answer: Answer) -> list[Verdict]:
        """A failed decomposition is one visible failed verdict, with the call that failed."""
        return [
            Verdict(
                item_id=self.item.id,
                metric=metric,
                component_kind=kind,
                component_idx=-1,
                target="decompose",
                value=None,
                status=answer.status,
                call_key=answer.call_key,
                detail=answer.detail,
            )
        ]

    # ---------------------------------------------------------------- batching
    async def judge_each(
        self,
        metric: str,
        kind: str,
        indices: Sequence[int],
        target: str,
        single: Callable[[int], Awaitable[Answer]],
        batch: Callable[[Sequence[int]], Awaitable[Answer]],
    ) -> list[Verdict]:
        """One call per component, or one call per BATCH components whose reply lines are "N: value".

        A component the batched reply leaves out is asked once more by itself (`single`).
        """
        if self.per_component:
            answers = await asyncio.gather(*(single(i) for i in indices))
            return [self.verdict(metric, kind, i, target, a) for i, a in zip(indices, answers)]
        chunks = [indices[k : k + BATCH] for k in range(0, len(indices), BATCH)]
        replies = await asyncio.gather(*(batch(chunk) for chunk in chunks))

        async def read(chunk: Sequence[int], reply: Answer) -> list[Answer]:
            numbers = list(range(1, len(chunk) + 1))
            got = await read_elements(reply, numbers, numbers, lambda n: single(chunk[n - 1]))
            return [got[n] for n in numbers]

        per_chunk = await asyncio.gather(*(read(chunk, reply) for chunk, reply in zip(chunks, replies)))
        return [
            self.verdict(metric, kind, i, target, a)
            for chunk, answers in zip(chunks, per_chunk)
            for i, a in zip(chunk, answers)
        ]


# ---------------------------------------------------------------- match steps


async def match_sp1(work: ItemWork) -> list[Verdict]:
    """SP1: does each source, as retrieved, contain anything essential to answer the query?

    A source with no content word ("...") is not judged: its verdict is empty, not 0.
    """
    sources = list(work.item.sources)
    q = work.item.query
    judged = [j for j, s in enumerate(sources) if has_content(s)]
    verdicts = await work.judge_each(
        "sp1",
        SOURCE,
        judged,
        "query",
        lambda j: work.judge.ask("source_essential", query=q, source=sources[j]),
        lambda js: work.judge.ask("source_essential_batch", query=q, sources=[sources[j] for j in js]),
    )
    blank = [
        Verdict(
            item_id=work.item.id,
            metric="sp1",
            component_kind=SOURCE,
            component_idx=j,
            target="query",
            value=None,
            status=Status.EMPTY,
            detail="nothing to judge: the source has no content word",
        )
        for j in range(len(sources))
        if j not in judged
    ]
    return sorted(verdicts + blank, key=lambda v: v.component_idx)


async def _essential(work: ItemWork) -> dict[str, list[Verdict]]:
    """B.2 essentiality of source facts (SP2) and response claims (RP): one batched call judges both."""

    async def make() -> dict[str, list[Verdict]]:
        wanted = [m for m in ("sp2", "rp") if m in work.metrics]
        parts: dict[str, tuple[list[Component], list[Verdict]]] = {}
        if "sp2" in wanted:
            parts["sp2"] = await work.facts()
        if "rp" in wanted:
            claims = await work.claims()
            parts["rp"] = (
                (claims, []) if isinstance(claims, list) else ([], work.decompose_failure("rp", CLAIM, claims))
            )
        flat = [(m, c) for m in wanted for c in parts[m][0]]
        q = work.item.query
        verdicts = await work.judge_each(
            "essential",
            "",
            range(len(flat)),
            "query",
            lambda k: work.judge.ask("essential", query=q, response=flat[k][1].text),
            lambda ks: work.judge.ask("essential_batch", query=q, facts=[flat[k][1].text for k in ks]),
        )
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


async def judge_support(
    work: ItemWork, metric: str, kind: str, claims: Sequence[Component], knowledge: str, target: str
) -> list[Verdict]:
    """B.4 for each claim against one knowledge text: GR's sources, or the reference metrics' reference
    or response (the prompt's knowledge source is whatever text the claims are checked against)."""
    return await work.judge_each(
        metric,
        kind,
        range(len(claims)),
        target,
        lambda i: work.judge.ask("groundedness", sources=knowledge, claim=claims[i].text),
        lambda ix: work.judge.ask("groundedness_batch", sources=knowledge, claims=[claims[i].text for i in ix]),
    )


async def match_gr(work: ItemWork) -> list[Verdict]:
    """GR: is each claim of the response supported by the whole source set (B.4)?"""
    claims = await work.claims()
    if not isinstance(claims, list):
        return work.decompose_failure("gr", CLAIM, claims)
    return await judge_support(work, "gr", CLAIM, claims, _knowledge(work.item), "sources")


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
        answers = await asyncio.gather(
            *(
                work.judge.ask("source_answers", source=kb if t == "all" else sources[t], question=q.text)
                for q, t in pairs
            )
        )
        return [work.verdict("sqc", SUBQUESTION, q.idx, name(t), a) for (q, t), a in zip(pairs, answers)]
    kb = _knowledge(work.item)

    def key(n: int, t: int | str) -> tuple[int, int | str]:
        return n, t if t == "all" else t + 1  # t is a source index; the reply numbers sources from 1

    async def read(chunk: list[Component]) -> list[Verdict]:
        answer = await work.judge.ask("source_answers_batch", sources=sources, questions=[q.text for q in chunk])
        # The prompt always asks for ALL as well; with one source it is not used.
        asked = [key(n, t) for n in range(1, len(chunk) + 1) for t in [*range(len(sources)), "all"]]
        wanted = [(n, q, t) for n, q in enumerate(chunk, 1) for t in targets]

        def alone(k: tuple[int, int | str]) -> Awaitable[Answer]:
            n, t = k
            source = kb if t == "all" else sources[int(t) - 1]
            return work.judge.ask("source_answers", source=source, question=chunk[n - 1].text)

        got = await read_elements(answer, asked, [key(n, t) for n, _, t in wanted], alone)
        return [work.verdict("sqc", SUBQUESTION, q.idx, name(t), got[key(n, t)]) for n, q, t in wanted]

    chunks = [subqs[k : k + BATCH] for k in range(0, len(subqs), BATCH)]
    return [v for vs in await asyncio.gather(*(read(chunk) for chunk in chunks)) for v in vs]


async def match_rqc(work: ItemWork) -> list[Verdict]:
    """RQC: does the response address the intent of each sub-question?"""
    subqs = await work.subquestions()
    if not isinstance(subqs, list):
        return work.decompose_failure("rqc", SUBQUESTION, subqs)
    r = work.item.response
    return await work.judge_each(
        "rqc",
        SUBQUESTION,
        range(len(subqs)),
        "response",
        lambda l: work.judge.ask("response_addresses", question=subqs[l].text, response=r),
        lambda ls: work.judge.ask("response_addresses_batch", response=r, questions=[subqs[l].text for l in ls]),
    )


async def match_sd(work: ItemWork) -> list[Verdict]:
    """SD: sentences of the response compared pairwise by MiniLM cosine, in blocks; no judge call.

    A punctuation-only piece ("...") is no sentence. MiniLM reads English only: on other text its
    cosines mean nothing, so SD does not apply there.
    """
    why = unreadable(work.item.response)
    if why:
        return [
            Verdict(
                item_id=work.item.id,
                metric="sd",
                component_kind=SENTENCE,
                component_idx=-1,
                target="response",
                value=None,
                status=Status.NOT_APPLICABLE,
                detail=f"SD's MiniLM encoder reads English only: the response is {why}",
            )
        ]
    sentences = [s for s in split_sentences(work.item.response) if has_words(s)]
    work.components.extend(Component(work.item.id, SENTENCE, i, s) for i, s in enumerate(sentences))
    # In a worker thread: a long response takes seconds to encode, and the other items go on meanwhile.
    return await asyncio.to_thread(lambda: sd_verdicts(work.item.id, Cosines(embed(sentences)), work.sd_threshold))


# ---------------------------------------------------------------- the metrics (evaluators/metrics/registry.py lists them by id)


@dataclass(frozen=True)
class Metric:
    """A metric, whole: its id and the name views show, what it means, which way is better and where
    "low" starts, what it needs from an item, its match step and its pure aggregate.

    evaluators/metrics/registry.py lists every metric by id; nothing else restates what is here."""

    id: str
    name: str  # the display name every view shows
    match: Callable[[ItemWork], Awaitable[list[Verdict]]]
    # Reads verdicts already marked by with_band(): an UNSURE one is left out and counted apart.
    aggregate: Callable[[str, str, Sequence[Verdict]], Score] = aggregate_mean
    description: str = ""
    lower_is_better: bool = False  # its direction: views flip their "low" for a metric where less is better
    threshold: float = 0.5  # its default threshold: a score below it is low (Table 2, the dashboard's filters)
    needs_reference: bool = False
    prompts: tuple[str, ...] = ()  # prompt files it may use: their hashes are recorded on the run
    # The item texts ("query", "response", "reference") it judges: when one of them states nothing
    # ("...", "Yes", "N/A"), the metric is not scored (empty), never 0.
    reads: tuple[str, ...] = ()
    # The component kinds it gives one verdict each (a claim, a sub-question, a source): what a flip
    # between two runs or a regression suite's expectation can name.
    components: tuple[str, ...] = ()
    # Its expected value from its verdicts, where its score is no plain mean (ref_f1's F1 of two means);
    # None: expected_mean() for a mean, nothing for any other aggregate.
    expected: Callable[[Sequence[Verdict]], float | None] | None = None


_CLAIMS = ("claims", "claims_batch")
_ESSENTIAL = ("essential", "essential_batch")
_SUBQ = ("subquestions",)

# Default thresholds, chosen so that one miss in a typical item counts as low:
# - sqc/rqc 0.75: a two-part query with one part uncovered (0.5) is low.
# - sd 0.8: one repeated pair among five sentences (0.6) is low.
# - gr 0.8: one unsupported claim in five (0.8) is still high; two (0.6) is low.
# - sp2 0.3: sources carry many true but extraneous facts; below 0.3 the chunk is mostly noise.
# - sp1 and rp 0.55, just over half: Table 2 reads SP1 high as "the majority of retrieved sources
#   are essential" (T2.5), so one essential source of two (0.5) is low, as is a response half of
#   whose claims are extraneous; four of seven (0.57) is high.
SP1 = Metric(
    "sp1",
    "SP1 source precision (chunks)",
    match_sp1,
    threshold=0.55,
    components=(SOURCE,),
    description="Source precision, chunk level: share of sources with essential information",
    prompts=("source_essential", "source_essential_batch"),
    reads=("query",),
)
SP2 = Metric(
    "sp2",
    "SP2 source precision (facts)",
    match_sp2,
    threshold=0.3,
    description="Source precision, fact level: share of source facts essential to the query",
    prompts=_CLAIMS + _ESSENTIAL,
    reads=("query",),
)
SQC = Metric(
    "sqc",
    "SQC source query coverage",
    match_sqc,
    aggregate_coverage,
    threshold=0.75,
    components=(SUBQUESTION,),
    description="Source query coverage: share of sub-questions the sources answer",
    prompts=_SUBQ + ("source_answers", "source_answers_batch"),
    reads=("query",),
)
RP = Metric(
    "rp",
    "RP response precision",
    match_rp,
    threshold=0.55,
    components=(CLAIM,),
    description="Response precision: share of response claims essential to the query",
    prompts=_CLAIMS + _ESSENTIAL,
    reads=("query", "response"),
)
RQC = Metric(
    "rqc",
    "RQC response query coverage",
    match_rqc,
    threshold=0.75,
    components=(SUBQUESTION,),
    description="Response query coverage: share of sub-questions the response addresses",
    prompts=_SUBQ + ("response_addresses", "response_addresses_batch"),
    reads=("query", "response"),
)
SD = Metric(
    "sd",
    "SD self-distinctness",
    match_sd,
    threshold=0.8,
    description="Self-distinctness: 1 - share of response sentences that repeat another",
    reads=("response",),
)
GR = Metric(
    "gr",
    "GR groundedness",
    match_gr,
    threshold=0.8,
    components=(CLAIM,),
    description="Groundedness: share of response claims supported by the sources",
    prompts=_CLAIMS + ("groundedness", "groundedness_batch"),
    reads=("response",),
)


@dataclass
class ItemResult:
    """Everything one item produced: components, verdicts and scores."""

    components: list[Component]
    verdicts: list[Verdict]
    scores: list[Score]


def nothing_to_judge(item: Item, metric: str, texts: Sequence[str]) -> list[Verdict]:
    """One empty verdict per text the metric reads that states nothing, saying so; none when all do."""
    return [
        Verdict(
            item_id=item.id,
            metric=metric,
            component_kind=name,
            component_idx=-1,
            target="decompose",
            value=None,
            status=Status.EMPTY,
            detail=f"nothing to judge: the {name} has no content word "
            "(only punctuation, list numbers, citation markers, yes/no or stop words)",
        )
        for name in texts
        if not has_content(getattr(item, name) or "")
    ]


async def evaluate_item(
    item: Item,
    metrics: Mapping[str, Metric],
    judge: Judge,
    per_component: bool = False,
    sd_threshold: float = SD_THRESHOLD,
    fatal: tuple[type[BaseException], ...] = (),
) -> ItemResult:
    """Decompose, match and aggregate every given metric ({id: Metric}) for one item.

    An exception inside a metric marks that metric `error` for this item, with its message, so the
    other metrics and items are still stored; only the `fatal` ones (the judge refusing every
    request) end the run.
    """
    names = list(metrics)
    runnable = [m for m in names if not (metrics[m].needs_reference and not item.reference)]
    blank = {m: nothing_to_judge(item, m, metrics[m].reads) for m in runnable}
    matched = [m for m in runnable if not blank[m]]
    work = ItemWork(item, judge, frozenset(matched), per_component, sd_threshold)
    work.components.extend(Component(item.id, SOURCE, j, s) for j, s in enumerate(item.sources))

    async def run(m: str) -> tuple[list[Verdict], Score]:
        try:
            verdicts = await metrics[m].match(work) if m in matched else blank[m]
            return verdicts, aggregate(metrics[m], item.id, m, verdicts)
        except fatal:
            raise
        except Exception as exc:
            why = mask_secrets(f"{type(exc).__name__}: {exc}")[:500]
            failed = Verdict(
                item_id=item.id,
                metric=m,
                component_kind="",
                component_idx=-1,
                target="evaluate",
                value=None,
                status=Status.ERROR,
                detail=f"failed inside the engine: {why}",
            )
            return [failed], Score(item.id, m, None, 0, 1, Status.ERROR)

    results = await asyncio.gather(*(run(m) for m in runnable))
    verdicts = [v for vs, _ in results for v in vs]
    scores = [score for _, score in results]
    scores += [Score(item.id, m, None, 0, 0, Status.NOT_APPLICABLE) for m in names if m not in runnable]
    return ItemResult(work.components, verdicts, scores)
