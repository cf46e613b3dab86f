"""Calibration of the offline judge: labelled matches, a reliability table, ECE, and the fit.

Every labelled match is put to the offline judge's registered answer for its prompt (the same
decision functions the engine calls), which gives the judge's value and evidence score; the
calibration table (evaluators/calibration.json) maps them to p. Without --fit this prints, per match
type and split, a reliability table (bins of p: count, mean p, observed rate of label 1), the
expected calibration error (ECE, 10 equal-width bins; the raw evidence score read as p beside it),
and for a few candidate uncertainty bands the share of verdicts inside the band and the accuracy of
the verdicts outside it. With --fit it refits the table on the development split and writes it.

    python benchmarks/calibration.py [--fit] [--out benchmarks/out/calibration.md]

TUNING RULE: the fit reads the DEVELOPMENT split only: WikiEval rows 0-19, ExpertQA rand_val.jsonl,
the ARES few-shot sets and our demos (data/demo, data/grammar). WikiEval rows 20-49 and ExpertQA rand_test.jsonl
are held out: they are measured and reported, never fitted on.

Label sources (dev unless marked) and their known noise:
- support (groundedness prompt: claim against the joined sources)
  - ExpertQA claims that carry evidence text, against that evidence: Complete = 1, Partial or
    Incomplete = 0 (val: dev; test: held out). Noise: experts judged attribution of the whole
    claim, sometimes on evidence cut short in the file; "Partial" claims are often mostly backed.
  - WikiEval: claims of the grounded `answer` against context_v1 = 1 (noise: a few are loose
    restatements); claims of `ungrounded_answer` that differ from every grounded claim and carry
    a number or content word absent from context_v1 = 0 (the rest of the ungrounded answer is
    mostly true and is left out).
  - Demo: each part's grounded answer against its annotated chunks = 1; its `made_up` answer (a
    number the corpus lacks, checked by data/demo_runs.check_annotations) = 0; one company filler
    or unsupported embellishment per query = 0.
- essential (essential prompt: fact against the query)
  - WikiEval: claims of the grounded answer = 1 (noise: answers pad with background the question
    did not ask for); the two context_v1 sentences not used by the answer that share the fewest
    words with the question (benchmarks/agreement.py's RP construction) = 0 (noise: on topic and
    sometimes arguably useful); one sentence of another question's context = 0.
  - Demo: each part's grounded answer = 1; one company filler per query = 0.
- source_essential (source_essential prompt: source against the query)
  - WikiEval: context_v1 = 1; the next two questions' contexts = 0.
  - ARES nq, hotpotqa, multirc: Context_Relevance_Label (fever's claims, wow's dialogues and
    record's cloze queries are no questions and are left out). Noise: 21 rows, chosen as
    few-shot demonstrations, so cleaner than real data.
  - Demo: the annotated chunks of the query = 1; the keyword retriever's other chunks and the
    neighbouring chunk of the first annotated one = 0 (noise: a neighbour can be related).
- covers (source_answers / response_addresses prompts: text against one sub-question)
  - WikiEval sources: each sub-question (the engine's split) against context_v1 = 1; against
    context_v1 without the sentences the answer was written from (agreement.py's SQC
    construction) = 0 (noise: a kept sentence can still answer); against another question's
    context = 0.
  - WikiEval responses: against the grounded answer = 1; against another question's answer and
    against a refusal ("The documents I was given do not contain this information.") = 0.
  - ARES nq, hotpotqa, multirc: the query against the answer, Answer_Relevance_Label. Noise: in
    these sets a "No" is a wrong entity (a name for a "where" question), so it tests answer type.
  - Demo: each part's question against its annotated chunk = 1 and against the neighbouring chunk
    = 0; against its grounded answer = 1 and its made-up answer = 1 (it does address the question,
    wrongly); against the refusal and against another query's answer = 0.
  - GRAMMAR demo (data/grammar, the test set the demo's GRAMMAR runs answer): RQC on extractive
    answers, which a response that is a bare phrase gets its own curve for (answer_phrase): each
    question's SQL answer = 1; the offline generator's answer when it holds the SQL answer = 1; the
    SQL answer of the next question asking another kind of thing (a place for a "who") = 0. Noise:
    a wrong answer of the right kind would still address the question, so these are left out.
- sd (cosine of each response sentence to its most similar other one, via metrics.sd_verdicts)
  - WikiEval grounded answers plus a paraphrase of their first sentence (agreement.py's SD
    construction): the first sentence and the paraphrase repeat = 0, the others = 1; the plain
    answers' sentences = 1 (noise: generated answers sometimes restate themselves).
  - Demo: a grounded answer, a filler and a "To repeat: ..." restatement: the answer and its
    restatement = 0, the filler = 1.
Held out: WikiEval rows 20-49 by the same WikiEval constructions, ExpertQA rand_test.jsonl claims.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.agreement import (  # noqa: E402
    DEV,
    EXPERTQA,
    HELD_OUT,
    OUT,
    SHARED,
    WIKIEVAL,
    answer_bearing,
    load_expertqa,
    load_wikieval,
    paraphrase,
    sentences,
    words,
)
from data.demo_runs import EMBELLISHMENTS, FILLERS, NOT_FOUND, REPEATS, keyword_retrieve, load_corpus, load_queries  # noqa: E402
from evaluators.core.records import Status  # noqa: E402
from evaluators.core.text import split_claims, split_questions  # noqa: E402
from evaluators.judges import calibration, registry  # noqa: E402
from evaluators.judges.calibration import COVERS, ESSENTIAL, MATCH_TYPES, SD, SOURCE_ESSENTIAL, SUPPORT  # noqa: E402
from evaluators.judges.embeddings import embed  # noqa: E402
from evaluators.metrics.thelma import Cosines, sd_verdicts  # noqa: E402

ARES = SHARED / "datasets" / "ares_fewshot"
ARES_QA = ("nq", "hotpotqa", "multirc")  # the sets whose queries are questions
DEV_SPLIT, HELD_OUT_SPLIT = "dev", "held-out"

# The fit: equal-count bins of at least MIN_BIN matches, each bin's rate shrunk towards its curve's
# overall rate by PRIOR pseudo-matches (few matches never give p = 0 or 1), then made monotone (PAV).
MIN_BIN = 15
PRIOR = 4.0
BINS = 10  # equal-width bins of p for the reliability table and the ECE
CANDIDATE_BANDS = ((0.5, 0.5), (0.4, 0.6), (0.35, 0.65), (0.3, 0.7), (0.25, 0.75), (0.2, 0.8))


@dataclass(frozen=True)
class Example:
    """One labelled match: a prompt with its variables (SD: a response's sentences and one index)."""

    match_type: str
    source: str  # the data set and construction it came from, e.g. "wikieval:answer"
    split: str   # DEV_SPLIT or HELD_OUT_SPLIT
    prompt: str
    variables: dict[str, Any] = field(hash=False)
    label: int


@dataclass(frozen=True)
class Judged:
    """A labelled match with the offline judge's value and evidence score."""

    example: Example
    value: int
    score: float


# ---------------------------------------------------------------- labelled matches

def _support(source: str, split: str, claim: str, sources: Sequence[str], label: int) -> Example:
    return Example(SUPPORT, source, split, "groundedness", {"sources": "\n\n".join(sources), "claim": claim}, label)


def _essential(source: str, split: str, fact: str, query: str, label: int) -> Example:
    return Example(ESSENTIAL, source, split, "essential", {"query": query, "response": fact}, label)


def _source_essential(source: str, split: str, text: str, query: str, label: int) -> Example:
    return Example(SOURCE_ESSENTIAL, source, split, "source_essential", {"query": query, "source": text}, label)


def _source_covers(source: str, split: str, text: str, question: str, label: int) -> Example:
    return Example(COVERS, source, split, "source_answers", {"source": text, "question": question}, label)


def _response_covers(source: str, split: str, response: str, question: str, label: int) -> Example:
    variables = {"question": question, "response": response}
    return Example(calibration.match_type("response_addresses", variables) or COVERS, source, split,
                   "response_addresses", variables, label)


def _sd(source: str, split: str, parts: Sequence[str], repeats: set[int]) -> list[Example]:
    """One SD match per sentence of the response made of `parts`; those in `repeats` repeat (label 0)."""
    return [Example(SD, source, split, "sd", {"sentences": tuple(parts), "index": i}, int(i not in repeats))
            for i in range(len(parts))]


def wikieval_examples(rows: Sequence[dict[str, Any]], indices: Iterable[int], split: str) -> list[Example]:
    """Labelled matches of every type from the WikiEval rows `indices` (other rows' text from the same split only)."""
    indices = list(indices)
    out: list[Example] = []
    for k, r in enumerate(indices):
        row = rows[r]
        q, answer, context = row["question_text"], row["answer_text"], "\n\n".join(row["context_v1"])
        nxt, after = rows[indices[(k + 1) % len(indices)]], rows[indices[(k + 2) % len(indices)]]
        other_context = "\n\n".join(nxt["context_v1"])
        subqs = split_questions(q)
        good = split_claims(answer)
        # support
        out += [_support("wikieval:answer", split, c, row["context_v1"], 1) for c in good]
        context_words = words(context)
        for c in split_claims(row["ungrounded_answer"]):
            if c not in good and (words(c) - context_words):
                out.append(_support("wikieval:ungrounded", split, c, row["context_v1"], 0))
        # essential
        out += [_essential("wikieval:answer", split, c, q, 1) for c in good]
        ctx = sentences(context)
        bearing = answer_bearing(context, answer)
        q_words = words(q)
        spare = sorted((len(words(s) & q_words) / max(1, len(words(s))), i, s) for i, s in enumerate(ctx)
                       if i not in bearing and len(s.split()) >= 6)
        out += [_essential("wikieval:unasked-context", split, s, q, 0) for _, _, s in spare[:2]]
        foreign = [s for s in sentences(other_context) if len(s.split()) >= 6]
        if foreign:
            out.append(_essential("wikieval:other-context", split, foreign[0], q, 0))
        # source_essential
        out.append(_source_essential("wikieval:context", split, context, q, 1))
        out += [_source_essential("wikieval:other-context", split, "\n\n".join(o["context_v1"]), q, 0)
                for o in (nxt, after)]
        # covers
        kept = "\n".join(s for i, s in enumerate(ctx) if i not in bearing)
        for sq in subqs:
            out.append(_source_covers("wikieval:context", split, context, sq, 1))
            if bearing and kept:
                out.append(_source_covers("wikieval:answer-removed", split, kept, sq, 0))
            out.append(_source_covers("wikieval:other-context", split, other_context, sq, 0))
            out.append(_response_covers("wikieval:answer", split, answer, sq, 1))
            out.append(_response_covers("wikieval:other-answer", split, nxt["answer_text"], sq, 0))
            out.append(_response_covers("wikieval:refusal", split, NOT_FOUND, sq, 0))
        # sd
        plain = sentences(answer)
        out += _sd("wikieval:answer", split, plain, set())
        out += _sd("wikieval:paraphrase", split, plain + [paraphrase(plain[0])], {0, len(plain)})
    return out


def expertqa_examples(split: str) -> list[Example]:
    """ExpertQA claims with evidence text: support labelled Complete = 1, Partial/Incomplete = 0."""
    name = DEV_SPLIT if split == "val" else HELD_OUT_SPLIT
    return [_support(f"expertqa:{split}", name, item.response, item.sources, label)
            for item, label in load_expertqa(split)]


def ares_examples() -> list[Example]:
    """ARES few-shot rows (question sets only): context relevance -> SP1, answer relevance -> covers."""
    out: list[Example] = []
    for name in ARES_QA:
        with (ARES / f"{name}_few_shot_prompt_for_judge_scoring.tsv").open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                query, doc, answer = row["Query"], row["Document"], row["Answer"]
                out.append(_source_essential(f"ares:{name}", DEV_SPLIT, doc, query,
                                             int(row["Context_Relevance_Label"] == "[[Yes]]")))
                out.append(_response_covers(f"ares:{name}", DEV_SPLIT, answer, query,
                                            int(row["Answer_Relevance_Label"] == "[[Yes]]")))
    return out


def demo_examples() -> list[Example]:
    """Labelled matches from our demo's annotated queries and corpus (data/demo)."""
    corpus = load_corpus()
    by_id = {c.id: c for c in corpus}
    queries = load_queries()
    out: list[Example] = []
    for n, query in enumerate(queries):
        filler = FILLERS[n % len(FILLERS)]
        unsupported = (FILLERS + EMBELLISHMENTS)[n % (len(FILLERS) + len(EMBELLISHMENTS))]
        other = queries[(n + 1) % len(queries)].parts[0].answer
        gold = query.gold
        first = by_id[gold[0]]
        siblings = [c for c in corpus if c.doc == first.doc]
        at = siblings.index(first)
        neighbour = siblings[at + 1] if at + 1 < len(siblings) else siblings[at - 1] if at else None
        near = neighbour if neighbour is not None and neighbour.id not in gold else None
        for part in query.parts:
            chunks = [by_id[c].text for c in part.chunks]
            out.append(_support("demo:answer", DEV_SPLIT, part.answer, chunks, 1))
            out.append(_support("demo:made-up", DEV_SPLIT, part.made_up, chunks, 0))
            out.append(_essential("demo:answer", DEV_SPLIT, part.answer, query.text, 1))
            out += [_source_covers("demo:chunk", DEV_SPLIT, c, part.question, 1) for c in chunks]
            if near is not None:
                out.append(_source_covers("demo:neighbour", DEV_SPLIT, near.text, part.question, 0))
            out.append(_response_covers("demo:answer", DEV_SPLIT, part.answer, part.question, 1))
            out.append(_response_covers("demo:made-up", DEV_SPLIT, part.made_up, part.question, 1))
            out.append(_response_covers("demo:refusal", DEV_SPLIT, NOT_FOUND, part.question, 0))
            out.append(_response_covers("demo:other-answer", DEV_SPLIT, other, part.question, 0))
        out.append(_support("demo:filler", DEV_SPLIT, unsupported, [by_id[c].text for c in gold], 0))
        out.append(_essential("demo:filler", DEV_SPLIT, filler, query.text, 0))
        out += [_source_essential("demo:gold", DEV_SPLIT, by_id[c].text, query.text, 1) for c in gold]
        retrieved = [c for c in keyword_retrieve(query.text, corpus) if c.id not in gold]
        if near is not None and near not in retrieved:
            retrieved.append(near)
        out += [_source_essential("demo:not-gold", DEV_SPLIT, c.text, query.text, 0) for c in retrieved]
        answer = query.parts[0].answer
        out += _sd("demo:repeat", DEV_SPLIT, [answer, filler, REPEATS[n % len(REPEATS)].format(answer)], {0, 2})
    return out



# The kind of answer each GRAMMAR SQL template asks for (data/grammar/templates.json), by hand: another
# question's answer of the same kind ("Lapwing" for "Who directs X?") still answers, so only an answer
# of another kind is a negative.
GRAMMAR_KINDS = {"employee_manager": "person", "project_director": "person", "project_manager": "person",
                 "project_start": "date", "project_end": "date", "client_location": "place", "employee_office": "place"}


def grammar_examples() -> list[Example]:
    """Labelled RQC matches from our demo's GRAMMAR test set (data/grammar: development data, its truth from SQL).

    Extractive answers, which the other sources lack: each question's SQL answer itself = 1; the
    offline generator's answer from the top BM25 document when it contains the SQL answer = 1; the
    SQL answer of the next question of another kind = 0.
    """
    from data.build_demo import GRAMMAR_GROUPS
    from evaluators.grammar import COMPANY_SQL, TEMPLATES
    from evaluators.grammar.generate import generate, load_templates, open_source
    from evaluators.grammar.pipeline import answer_cases, render_corpus
    from evaluators.judges.offline import OfflineJudge
    with open_source(COMPANY_SQL) as con:
        cases = generate(con, load_templates(TEMPLATES), max_groups=GRAMMAR_GROUPS).cases
        docs = render_corpus(con)
    answered = asyncio.run(answer_cases(cases, docs, "bm25", 1, OfflineJudge()))
    kind = [GRAMMAR_KINDS.get(c.sql_template, c.sql_template) for c in cases]
    out: list[Example] = []
    for n, (case, item) in enumerate(zip(cases, answered)):
        out.append(_response_covers("grammar:sql-answer", DEV_SPLIT, case.answer, case.query, 1))
        if item.response and case.answer.lower() in item.response.lower():
            out.append(_response_covers("grammar:extracted", DEV_SPLIT, item.response, case.query, 1))
        other = next(cases[(n + k) % len(cases)] for k in range(1, len(cases)) if kind[(n + k) % len(cases)] != kind[n])
        out.append(_response_covers("grammar:other-kind", DEV_SPLIT, other.answer, case.query, 0))
    return out

def examples() -> list[Example]:
    """Every labelled match, development and held out."""
    rows = load_wikieval(WIKIEVAL)
    return (wikieval_examples(rows, DEV, DEV_SPLIT) + expertqa_examples("val") + ares_examples()
            + demo_examples() + grammar_examples() + wikieval_examples(rows, HELD_OUT, HELD_OUT_SPLIT) + expertqa_examples("test"))


# ---------------------------------------------------------------- the offline judge on them

@lru_cache(maxsize=4096)
def _sd_evidence(sentences_: tuple[str, ...]) -> tuple[tuple[int, float], ...]:
    """(value, cosine to the most similar other sentence) of each sentence, as SD judges them."""
    verdicts = sd_verdicts("calibration", Cosines(embed(list(sentences_))))
    return tuple((int(v.value), float(v.evidence if v.evidence is not None else 0.0)) for v in verdicts)


def judge(example: Example) -> Judged | None:
    """The offline judge's value and evidence score for one match; None when it did not decide."""
    if example.match_type == SD:
        value, score = _sd_evidence(example.variables["sentences"])[example.variables["index"]]
        return Judged(example, value, score)
    answer = registry.OFFLINE_ANSWERS[example.prompt](**example.variables)
    if answer.status is not Status.OK or answer.prob is None:
        return None
    return Judged(example, int(answer.value), float(answer.prob))


# ---------------------------------------------------------------- fit

def _pav(rates: list[float], weights: list[float]) -> list[float]:
    """Pool adjacent violators: the non-decreasing sequence closest to `rates` (weighted least squares)."""
    blocks: list[list[float]] = []  # [rate, weight, count]
    for r, w in zip(rates, weights):
        blocks.append([r, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            r2, w2, n2 = blocks.pop()
            r1, w1, n1 = blocks.pop()
            blocks.append([(r1 * w1 + r2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return [b[0] for b in blocks for _ in range(int(b[2]))]


def fit_curve(points: Sequence[tuple[float, int]], increasing: bool) -> dict[str, Any]:
    """A binned isotonic curve through (score, label) points: knots [score, p] in score order."""
    if not points:  # a value the judge never gave on the dev data: nothing known, fully unsure
        return {"n": 0, "rate": None, "knots": [[0.0, 0.5], [1.0, 0.5]]}
    n = len(points)
    # The overall rate with one pseudo-match each way: a curve whose matches were all 1 still says p < 1.
    overall = (sum(y for _, y in points) + 1) / (n + 2)
    ties: dict[float, list[int]] = {}
    for s, y in points:
        ties.setdefault(s, []).append(y)
    # Equal-count bins that never split a score: tied matches (a score of exactly 1.0) share a bin.
    target = n / max(1, n // MIN_BIN)
    bins: list[list[tuple[float, int]]] = [[]]
    for s in sorted(ties, reverse=not increasing):
        if len(bins[-1]) >= target:
            bins.append([])
        bins[-1] += [(s, y) for y in ties[s]]
    if len(bins) > 1 and len(bins[-1]) < MIN_BIN / 2:  # a short tail joins its neighbour
        tail = bins.pop()
        bins[-1] += tail
    scores = [sum(s for s, _ in b) / len(b) for b in bins]
    rates = [(sum(y for _, y in b) + PRIOR * overall) / (len(b) + PRIOR) for b in bins]
    probs = _pav(rates, [float(len(b)) for b in bins])
    # A pooled run of equal p needs only its two ends: the curve is flat between them.
    knots = [(s, p) for k, (s, p) in enumerate(zip(scores, probs))
             if k in (0, len(probs) - 1) or not probs[k - 1] == p == probs[k + 1]]
    if not increasing:
        knots.reverse()
    return {"n": n, "rate": round(sum(y for _, y in points) / n, 4),
            "knots": [[round(s, 4), round(p, 4)] for s, p in knots]}


def fit(judged: Sequence[Judged]) -> dict[str, Any]:
    """The calibration table fitted on the development matches of `judged` (held-out ones are refused)."""
    if any(j.example.split != DEV_SPLIT for j in judged):
        raise ValueError("the calibration is fitted on development data only")
    curves: dict[str, dict[str, Any]] = {}
    for match_type in MATCH_TYPES:
        increasing = match_type != SD  # SD's score is a similarity: higher argues for a repeat (value 0)
        curves[match_type] = {
            str(value): fit_curve([(j.score, j.example.label) for j in judged
                                   if j.example.match_type == match_type and j.value == value], increasing)
            for value in (0, 1)}
    sources = sorted(Counter(j.example.source for j in judged).items())
    return {
        "fitted_on": "development data only: WikiEval rows 0-19, ExpertQA rand_val.jsonl, ARES few-shot "
                     f"({', '.join(ARES_QA)}), data/demo, data/grammar; never WikiEval rows 20-49 or ExpertQA rand_test.jsonl",
        "method": f"binned isotonic per (match type, value): equal-count bins of >= {MIN_BIN}, rates shrunk "
                  f"by {PRIOR:g} pseudo-matches to the curve's overall rate, then PAV; linear between knots",
        "command": "python benchmarks/calibration.py --fit",
        "matches": dict(sources),
        "curves": curves,
    }


# ---------------------------------------------------------------- report

def _p(j: Judged) -> float:
    return calibration.probability(j.example.match_type, j.value, j.score)


def _raw_p(j: Judged) -> float:
    """The evidence score read as p (SD: 1 - cosine), clipped like a calibrated p: the baseline."""
    score = 1.0 - j.score if j.example.match_type == SD else j.score
    return max(score, 0.5) if j.value else min(score, calibration.BELOW_HALF)


def ece(ps: Sequence[float], labels: Sequence[int]) -> float | None:
    """Expected calibration error over BINS equal-width bins of p."""
    if not ps:
        return None
    bins: dict[int, list[tuple[float, int]]] = {}
    for p, y in zip(ps, labels):
        bins.setdefault(min(BINS - 1, int(p * BINS)), []).append((p, y))
    return sum(abs(sum(p for p, _ in b) - sum(y for _, y in b)) for b in bins.values()) / len(ps)


def reliability(ps: Sequence[float], labels: Sequence[int]) -> list[str]:
    """Markdown rows: bin of p, count, mean p, observed rate of label 1."""
    lines = ["| p bin | n | mean p | observed |", "|---|---:|---:|---:|"]
    for k in range(BINS):
        got = [(p, y) for p, y in zip(ps, labels) if min(BINS - 1, int(p * BINS)) == k]
        if got:
            lines.append(f"| {k / BINS:.1f}-{(k + 1) / BINS:.1f} | {len(got)} "
                         f"| {sum(p for p, _ in got) / len(got):.2f} | {sum(y for _, y in got) / len(got):.2f} |")
    return lines


def band_rows(judged: Sequence[Judged]) -> list[str]:
    """Per candidate band: share of verdicts inside it (unsure), accuracy of those outside it."""
    lines = ["| band | unsure | accuracy outside | accuracy of all |", "|---|---:|---:|---:|"]
    everything = sum(j.value == j.example.label for j in judged) / len(judged)
    for lo, hi in CANDIDATE_BANDS:
        outside = [j for j in judged if not lo < _p(j) < hi]
        acc = sum(j.value == j.example.label for j in outside) / len(outside) if outside else float("nan")
        lines.append(f"| ({lo:.2f}, {hi:.2f}) | {1 - len(outside) / len(judged):.0%} | {acc:.2f} | {everything:.2f} |")
    return lines


def _source_rows(group: Sequence[Judged]) -> list[str]:
    """Per label source: matches, mean p, observed rate of label 1, judge accuracy."""
    lines = ["| label source | n | mean p | observed | judge accuracy |", "|---|---:|---:|---:|---:|"]
    for source in sorted({j.example.source for j in group}):
        part = [j for j in group if j.example.source == source]
        lines.append(f"| {source} | {len(part)} | {sum(map(_p, part)) / len(part):.2f} "
                     f"| {sum(j.example.label for j in part) / len(part):.2f} "
                     f"| {sum(j.value == j.example.label for j in part) / len(part):.2f} |")
    return lines


def report(judged: Sequence[Judged]) -> str:
    """The reliability tables, ECEs and band figures per match type, development and held out."""
    sections = ["# Offline judge calibration\n",
                "Generated by `python benchmarks/calibration.py`. p from evaluators/calibration.json (fitted on "
                "the development split only); ECE over 10 equal-width bins of p; `raw` reads the evidence score "
                "itself as p (clipped to the judge's half) for comparison.\n",
                "| match type | split | matches | label-1 share | judge accuracy | ECE | ECE raw |",
                "|---|---|---:|---:|---:|---:|---:|"]
    details: list[str] = []
    for match_type in (*MATCH_TYPES, "all"):
        for split in (DEV_SPLIT, HELD_OUT_SPLIT):
            group = [j for j in judged if match_type in ("all", j.example.match_type) and j.example.split == split]
            if not group:
                continue
            labels = [j.example.label for j in group]
            ps = [_p(j) for j in group]
            acc = sum(j.value == j.example.label for j in group) / len(group)
            raw = ece([_raw_p(j) for j in group], labels)
            sections.append(f"| {match_type} | {split} | {len(group)} | {sum(labels) / len(group):.2f} | {acc:.2f} "
                            f"| {ece(ps, labels):.3f} | {raw:.3f} |")
            details += [f"\n## {match_type}, {split} ({len(group)} matches)\n", *reliability(ps, labels), "",
                        *band_rows(group)]
            if match_type != "all":
                details += ["", *_source_rows(group)]
    return "\n".join(sections + details) + "\n"


# ---------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fit", action="store_true", help=f"refit on the development split and write {calibration.TABLE}")
    p.add_argument("--out", type=Path, default=OUT / "calibration.md", help="where the report is written as well")
    args = p.parse_args(argv)
    missing = [path for path in (WIKIEVAL, EXPERTQA, ARES) if not path.exists()]
    if missing:
        print(f"error: {', '.join(map(str, missing))} not found (the shared data sets sit beside the repo)",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    wanted = [e for e in examples() if not args.fit or e.split == DEV_SPLIT]
    judged = [j for j in map(judge, wanted) if j is not None]
    print(f"{len(judged)} of {len(wanted)} matches judged in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.fit:
        table = fit(judged)
        text = re.sub(r"\[\s+(\S+),\s+(\S+)\s+\]", r"[\1, \2]", json.dumps(table, indent=1))  # a knot per line
        calibration.TABLE.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {calibration.TABLE} from {len(judged)} development matches", file=sys.stderr)
        return 0
    text = report(judged)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
