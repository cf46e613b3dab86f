"""Labelled matches for the offline judge: what it is fitted on (train_judge.py) and measured on (calibration.py).

Each `Example` is one match (a prompt's variables and the label people, or a construction, give it),
tagged with its data set and construction (`source`), its split and the unit it comes from (`group`:
cross-validation keeps a unit's examples together). Development data only is ever fitted on, and of
it only the data sets that carry a license (LICENSED); the rest is measured:

| data set | license | development | held out |
|---|---|---|---|
| WiCE (claims vs oracle chunks) | annotations ODC-BY 1.0, text CC BY-SA | dev | test |
| Factcheck-GPT (claim vs passage stance) | Apache-2.0 | dev half (proposed split) | test half |
| ExpertQA (claim attribution, informativeness) | MIT | rand_val | rand_test |
| RAGChecker meta-eval (answers, references) | Apache-2.0 | kiwi, clapnq, novelqa, fiqa, lifestyle | never read here |
| ARES few-shot (nq, hotpotqa, multirc) | Apache-2.0 | all | - |
| our demo (data/demo, data/grammar) | ours | all | - |
| LFQA verification | none: measured, never fitted | dev half (proposed split) | test half |
| WikiEval | none declared: measured, never fitted | rows 0-19 | rows 20-49 |

Labels by match type (dev unless marked; noise in brackets):
- support (claim against sources): WiCE supported = 1, partially or not supported = 0 (a claim
  of several facts is 0 when one lacks support); Factcheck-GPT completely-support = 1, the other
  stances = 0 (a passage rarely backs every detail); ExpertQA Complete = 1, Partial or Incomplete
  = 0 [evidence sometimes cut short]; ARES answer faithfulness; the demo's answers = 1, made-up
  answers and fillers = 0; and constructions from the licensed supported claims that carry a
  number, a name, a content word or a verb to negate: that number changed (to one the sources lack,
  or to one they give elsewhere), that name or word swapped for another claim's, that verb negated = 0
  (`*:number-changed`, `*:number-moved`, `*:name-swapped`, `*:word-swapped`, `*:negated`).
- essential (fact against the query): ExpertQA claims "Very relevant" = 1, "Uninformative" or
  "Not too important" = 0 ("A bit relevant" is left out); the demo's answers = 1, fillers and a
  sentence of the answer's chunk that the answer was not written from = 0; in our GRAMMAR test set's
  true document, the sentence holding the answer = 1 and its other sentences = 0.
- source_essential (source against the query): ARES context relevance; the demo's annotated chunks
  = 1, the keyword retriever's other chunks and the annotated chunk without the sentences the answer
  was written from = 0 [a neighbour can be related]; our GRAMMAR test set's true document = 1 and
  another document of its kind (another project's facts) = 0; ExpertQA evidence passages of the question's
  claims = 1, of the next question's = 0. (Factcheck-GPT's stances say whether a passage bears on one
  claim, not on the question: fitted on, they taught topic, not answer, so they are left out.)
- covers (a source against one sub-question): the demo's chunks = 1; neighbours, the other chunks of
  the answer's document, the answer's chunk without the sentences the answer was written from, and
  another part's chunk = 0; our GRAMMAR test set's true document = 1, another of its kind = 0.
- addresses and answer_phrase (the response against one sub-question; a bare phrase apart): the
  demo's answers and made-up answers (they address the question, wrongly) = 1; refusals, other
  queries' answers, another part's answer and a sentence of the answer's chunk that the answer was
  not written from = 0; our GRAMMAR test set's extractive answers = 1, and an answer of another kind
  (to a question that asks for a kind), the entity the question names and a refusal phrase = 0; ARES answer relevance; RAGChecker's
  reference answers and both systems' answers = 1 and the next instance's reference answer = 0;
  ExpertQA answers = 1 and the next question's answer = 0 (a whole answer that nowhere holds the kind
  of answer a question asks for, a date or a number, is left out: whether it addresses it is unknown).
- sd (a response sentence against the others): the demo's answers with a filler and a restatement;
  RAGChecker's reference answers and ExpertQA's answers with a paraphrase of one sentence added.
- WikiEval (measured only): benchmarks/agreement.py's constructions of every type.
"""
from __future__ import annotations

import asyncio
import csv
import json
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np

from benchmarks.agreement import (
    DEV,
    EXPERTQA,
    HELD_OUT,
    SHARED,
    WIKIEVAL,
    answer_bearing,
    load_expertqa,
    load_wikieval,
    paraphrase,
    sentences,
    words,
)
from benchmarks.people import load_factcheck, load_lfqa, load_ragchecker, load_wice
from data.demo_runs import EMBELLISHMENTS, FILLERS, NOT_FOUND, REPEATS, keyword_retrieve, load_corpus, load_queries
from evaluators.core.text import answer_type, has_answer_type, names, split_claims, split_questions, split_sentences
from evaluators.judges.calibration import ADDRESSES, COVERS, ESSENTIAL, SD, SOURCE_ESSENTIAL, SUPPORT, match_type
from evaluators.judges.embeddings import embed

ARES = SHARED / "datasets" / "ares_fewshot"
ARES_QA = ("nq", "hotpotqa", "multirc")  # the sets whose queries are questions
DEV_SPLIT, HELD_OUT_SPLIT = "dev", "held-out"
# Data sets whose license lets the shipped weights be fitted on them (by the `source` prefix).
LICENSED = frozenset({"wice", "factcheck", "expertqa", "ragchecker", "ares", "demo", "grammar"})
SEED = 27
PERTURBATIONS = ("number-changed", "number-moved", "name-swapped", "word-swapped", "negated")  # see perturbed()


@dataclass(frozen=True)
class Example:
    """One labelled match: a prompt with its variables (SD: a response's sentences and one index)."""

    match_type: str
    source: str  # the data set and construction it came from, e.g. "wice:claim"
    split: str   # DEV_SPLIT or HELD_OUT_SPLIT
    prompt: str
    variables: dict[str, Any] = field(hash=False)
    label: int
    group: str = ""  # the unit it comes from (a claim, a question): cross-validation keeps it whole

    @property
    def perturbed(self) -> bool:
        """Whether it was made from another example by changing its text (perturbed()): it teaches the
        models what a changed number or name means, and is no sample of real matches to calibrate on."""
        return self.source.split(":")[-1] in PERTURBATIONS

    @property
    def licensed(self) -> bool:
        """Whether its data set's license lets shipped weights be fitted on it."""
        return self.source.split(":")[0] in LICENSED


@lru_cache(maxsize=4096)
def sd_cosines(sentences: tuple[str, ...]) -> tuple[float, ...]:
    """Each sentence's cosine to its most similar other one: the evidence SD's verdicts keep."""
    vectors = embed(list(sentences))
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    return tuple(float(x) for x in similarity.max(axis=1))


def _support(source: str, split: str, claim: str, sources: Sequence[str], label: int, group: str = "") -> Example:
    return Example(SUPPORT, source, split, "groundedness", {"sources": "\n\n".join(sources), "claim": claim}, label,
                   group or claim)


def _essential(source: str, split: str, fact: str, query: str, label: int, group: str = "") -> Example:
    return Example(ESSENTIAL, source, split, "essential", {"query": query, "response": fact}, label, group or query)


def _source_essential(source: str, split: str, text: str, query: str, label: int, group: str = "") -> Example:
    return Example(SOURCE_ESSENTIAL, source, split, "source_essential", {"query": query, "source": text}, label,
                   group or query)


def _source_covers(source: str, split: str, text: str, question: str, label: int, group: str = "") -> Example:
    return Example(COVERS, source, split, "source_answers", {"source": text, "question": question}, label,
                   group or question)


def _response_covers(source: str, split: str, response: str, question: str, label: int, group: str = "") -> Example:
    variables = {"question": question, "response": response}
    return Example(match_type("response_addresses", variables) or ADDRESSES, source, split, "response_addresses",
                   variables, label, group or question)


def _sd(source: str, split: str, parts: Sequence[str], repeats: set[int], group: str = "") -> list[Example]:
    """One SD match per sentence of the response made of `parts`; those in `repeats` repeat (label 0)."""
    return [Example(SD, source, split, "sd", {"sentences": tuple(parts), "index": i}, int(i not in repeats),
                    group or parts[0])
            for i in range(len(parts))]


def wikieval_examples(rows: Sequence[dict[str, Any]], indices: Iterable[int], split: str) -> list[Example]:
    """Labelled matches of every type from the WikiEval rows `indices` (other rows' text from the same split only)."""
    indices = list(indices)
    out: list[Example] = []
    for k, r in enumerate(indices):
        row = rows[r]
        unit = f"wikieval:{r}"
        q, answer, context = row["question_text"], row["answer_text"], "\n\n".join(row["context_v1"])
        nxt, after = rows[indices[(k + 1) % len(indices)]], rows[indices[(k + 2) % len(indices)]]
        other_context = "\n\n".join(nxt["context_v1"])
        subqs = split_questions(q)
        good = split_claims(answer)
        # support
        out += [_support("wikieval:answer", split, c, row["context_v1"], 1, unit) for c in good]
        context_words = words(context)
        for c in split_claims(row["ungrounded_answer"]):
            if c not in good and (words(c) - context_words):
                out.append(_support("wikieval:ungrounded", split, c, row["context_v1"], 0, unit))
        # essential
        out += [_essential("wikieval:answer", split, c, q, 1, unit) for c in good]
        ctx = sentences(context)
        bearing = answer_bearing(context, answer)
        q_words = words(q)
        spare = sorted((len(words(s) & q_words) / max(1, len(words(s))), i, s) for i, s in enumerate(ctx)
                       if i not in bearing and len(s.split()) >= 6)
        out += [_essential("wikieval:unasked-context", split, s, q, 0, unit) for _, _, s in spare[:2]]
        foreign = [s for s in sentences(other_context) if len(s.split()) >= 6]
        if foreign:
            out.append(_essential("wikieval:other-context", split, foreign[0], q, 0, unit))
        # source_essential
        out.append(_source_essential("wikieval:context", split, context, q, 1, unit))
        out += [_source_essential("wikieval:other-context", split, "\n\n".join(o["context_v1"]), q, 0, unit)
                for o in (nxt, after)]
        # covers
        kept = "\n".join(s for i, s in enumerate(ctx) if i not in bearing)
        for sq in subqs:
            out.append(_source_covers("wikieval:context", split, context, sq, 1, unit))
            if bearing and kept:
                out.append(_source_covers("wikieval:answer-removed", split, kept, sq, 0, unit))
            out.append(_source_covers("wikieval:other-context", split, other_context, sq, 0, unit))
            out.append(_response_covers("wikieval:answer", split, answer, sq, 1, unit))
            out.append(_response_covers("wikieval:other-answer", split, nxt["answer_text"], sq, 0, unit))
            out.append(_response_covers("wikieval:refusal", split, NOT_FOUND, sq, 0, unit))
        # sd
        plain = sentences(answer)
        out += _sd("wikieval:answer", split, plain, set(), unit)
        out += _sd("wikieval:paraphrase", split, plain + [paraphrase(plain[0])], {0, len(plain)}, unit)
    return out


def expertqa_examples(split: str) -> list[Example]:
    """ExpertQA claims with evidence text: support labelled Complete = 1, Partial/Incomplete = 0."""
    name = DEV_SPLIT if split == "val" else HELD_OUT_SPLIT
    return [_support(f"expertqa:{split}", name, item.response, item.sources, label, f"expertqa:{item.query}")
            for item, label in load_expertqa(split)]


def ares_examples() -> list[Example]:
    """ARES few-shot rows (question sets only): context relevance -> SP1, answer relevance -> covers,
    answer faithfulness -> support."""
    out: list[Example] = []
    for name in ARES_QA:
        with (ARES / f"{name}_few_shot_prompt_for_judge_scoring.tsv").open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                query, doc, answer = row["Query"], row["Document"], row["Answer"]
                out.append(_source_essential(f"ares:{name}", DEV_SPLIT, doc, query,
                                             int(row["Context_Relevance_Label"] == "[[Yes]]")))
                out.append(_response_covers(f"ares:{name}", DEV_SPLIT, answer, query,
                                            int(row["Answer_Relevance_Label"] == "[[Yes]]")))
                out.append(_support(f"ares:{name}", DEV_SPLIT, answer, [doc],
                                    int(row["Answer_Faithfulness_Label"] == "[[Yes]]"), query))
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
            # On the topic, without the answer: the chunk's sentences the answer was not written from.
            context = "\n".join(chunks)
            bearing = answer_bearing(context, part.answer)
            spare = [s for i, s in enumerate(sentences(context)) if i not in bearing]
            if bearing and spare:
                out.append(_source_covers("demo:answer-removed", DEV_SPLIT, " ".join(spare), part.question, 0))
                if len(query.parts) == 1:
                    out.append(_source_essential("demo:answer-removed", DEV_SPLIT, " ".join(spare), query.text, 0))
                out.append(_response_covers("demo:unanswering", DEV_SPLIT, spare[0], part.question, 0))
                out.append(_essential("demo:unasked", DEV_SPLIT, spare[0], query.text, 0))
        # A part's chunk and answer against another part's question: on the topic, answering something else.
        for a in query.parts:
            for b in query.parts:
                if a is not b:
                    out += [_source_covers("demo:other-part", DEV_SPLIT, by_id[c].text, b.question, 0)
                            for c in a.chunks if c not in b.chunks]
                    out.append(_response_covers("demo:other-part", DEV_SPLIT, a.answer, b.question, 0))
        out.append(_support("demo:filler", DEV_SPLIT, unsupported, [by_id[c].text for c in gold], 0))
        out.append(_essential("demo:filler", DEV_SPLIT, filler, query.text, 0))
        out += [_source_essential("demo:gold", DEV_SPLIT, by_id[c].text, query.text, 1) for c in gold]
        retrieved = [c for c in keyword_retrieve(query.text, corpus) if c.id not in gold]
        if near is not None and near not in retrieved:
            retrieved.append(near)
        out += [_source_essential("demo:not-gold", DEV_SPLIT, c.text, query.text, 0) for c in retrieved]
        # The gold chunk's own document holds the answer in one chunk: its other chunks answer nothing asked.
        for part in query.parts:
            out += [_source_covers("demo:same-document", DEV_SPLIT, c.text, part.question, 0)
                    for c in corpus if c.doc == by_id[part.chunks[0]].doc and c.id not in gold]
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
    by_id = {d.id: d for d in docs}
    kind = [GRAMMAR_KINDS.get(c.sql_template, c.sql_template) for c in cases]
    out: list[Example] = []
    for n, (case, item) in enumerate(zip(cases, answered)):
        out.append(_response_covers("grammar:sql-answer", DEV_SPLIT, case.answer, case.query, 1))
        if item.response and case.answer.lower() in item.response.lower():
            out.append(_response_covers("grammar:extracted", DEV_SPLIT, item.response, case.query, 1))
        other = next(cases[(n + k) % len(cases)] for k in range(1, len(cases)) if kind[(n + k) % len(cases)] != kind[n])
        if answer_type(case.query):  # only a question that asks for a kind (who, where, when) tells another apart
            out.append(_response_covers("grammar:other-kind", DEV_SPLIT, other.answer, case.query, 0))
        # A phrase that only names what the question is about, or says there is no answer, answers nothing.
        asked = re.findall(r"'([^']+)'", case.query)
        if asked:
            out.append(_response_covers("grammar:restated", DEV_SPLIT, asked[0], case.query, 0))
        out.append(_response_covers("grammar:refusal", DEV_SPLIT, REFUSALS[n % len(REFUSALS)], case.query, 0))
        # The document the answer comes from, and another document of its kind (another project, another
        # client: the same template of facts about another name).
        true = [by_id[d] for d in case.true_doc_ids if d in by_id]
        kind_of = {d.id.split(":")[0] for d in true}
        others = [d for d in docs if d.id.split(":")[0] in kind_of and d.id not in case.true_doc_ids]
        # In the true document, the sentence holding the answer is essential to the question; the others
        # (other facts about the same project or client) are not.
        for doc in true:
            for sentence in split_sentences(doc.text):
                holds = case.answer.lower() in sentence.lower()
                out.append(_essential(f"grammar:{'answer' if holds else 'other'}-sentence", DEV_SPLIT, sentence,
                                      case.query, int(holds)))
        pairs = [(d, 1) for d in true] + ([(others[n % len(others)], 0)] if others else [])
        for doc, label in pairs:
            source = f"grammar:{'true' if label else 'other'}-document"
            out.append(_source_covers(source, DEV_SPLIT, doc.text, case.query, label))
            out.append(_source_essential(source, DEV_SPLIT, doc.text, case.query, label))
    return out


REFUSALS = ("not available", "unknown", "no information", "not stated in the documents")



# ---------------------------------------------------------------- human-labelled support

def wice_examples(split: str) -> list[Example]:
    """WiCE claims against their oracle chunks: supported = 1, partially or not supported = 0."""
    name = DEV_SPLIT if split == "dev" else HELD_OUT_SPLIT
    return [_support("wice:claim", name, case.item.response, case.item.sources, int(case.supported), f"wice:{case.id}")
            for case in load_wice(split)]


def factcheck_examples(split: str) -> list[Example]:
    """Factcheck-GPT (claim, passage) pairs: completely-support = 1, the other stances = 0."""
    name = DEV_SPLIT if split == "dev" else HELD_OUT_SPLIT
    return [_support("factcheck:stance", name, case.item.response, case.item.sources, int(case.supported),
                     "factcheck:" + case.id.split("-")[1]) for case in load_factcheck(split)]


def lfqa_examples(split: str) -> list[Example]:
    """LFQA answer sentences against their evidence documents (measured only: the data has no license)."""
    name = DEV_SPLIT if split == "dev" else HELD_OUT_SPLIT
    return [_support("lfqa:sentence", name, case.item.response, case.item.sources, int(case.supported),
                     "lfqa:" + case.item.query) for case in load_lfqa(split)]


_NEGATABLE = re.compile(r"\b(is|are|was|were|has|have|had|can|will|did|does)\b")


def perturbed(examples: Sequence[Example], seed: int = SEED) -> list[Example]:
    """Unsupported claims made from supported ones, each kept in its original's group:
    - number-changed: a number changed to one the sources lack;
    - number-moved: a number changed to another number the sources give elsewhere;
    - name-swapped: a name swapped for another claim's;
    - word-swapped: a content word swapped for another claim's ("The museum has a cafe");
    - negated: the first auxiliary verb negated."""
    rng = random.Random(seed)
    positives = [e for e in examples if e.match_type == SUPPORT and e.label == 1]
    name_pool = sorted({n for e in positives for n in re.findall(r"\b[A-Z][a-z]{3,}\b", e.variables["claim"])
                        if n.lower() in names(e.variables["claim"])})
    word_pool = sorted({w for e in positives for w in _WORD_TO_SWAP.findall(e.variables["claim"])})
    out: list[Example] = []
    for e in positives:
        claim, set_name = e.variables["claim"], e.source.split(":")[0]
        made: list[tuple[str, str]] = []
        digits = list(re.finditer(r"\b\d+(?:\.\d+)?\b", claim))
        if digits:
            m = rng.choice(digits)
            old = float(m.group())
            new = old + rng.choice([1, 2, 3, 5, 10]) * (1 if old < 1900 or rng.random() < 0.5 else -1)
            text = f"{new:g}" if "." in m.group() else str(int(new))
            made.append(("number-changed", claim[:m.start()] + text + claim[m.end():]))
            elsewhere = sorted(set(re.findall(r"\b\d+\b", e.variables["sources"])) - set(re.findall(r"\b\d+\b", claim)))
            if elsewhere:
                made.append(("number-moved", claim[:m.start()] + rng.choice(elsewhere) + claim[m.end():]))
        own = [n for n in re.findall(r"\b[A-Z][a-z]{3,}\b", claim) if n.lower() in names(claim)]
        if own and name_pool:
            old_name, new_name = rng.choice(own), rng.choice(name_pool)
            if new_name.lower() not in claim.lower():
                made.append(("name-swapped", claim.replace(old_name, new_name, 1)))
        words = _WORD_TO_SWAP.findall(claim)
        if words and word_pool:
            old_word, new_word = rng.choice(words), rng.choice(word_pool)
            if new_word.lower() not in e.variables["sources"].lower():
                made.append(("word-swapped", re.sub(rf"\b{re.escape(old_word)}\b", new_word, claim, count=1)))
        verb = _NEGATABLE.search(claim)
        if verb and " not " not in claim:
            made.append(("negated", claim[:verb.end()] + " not" + claim[verb.end():]))
        for kind, text in made:
            out.append(Example(SUPPORT, f"{set_name}:{kind}", e.split, e.prompt, {**e.variables, "claim": text}, 0,
                               e.group))
    return out


_WORD_TO_SWAP = re.compile(r"\b(?<![A-Z])[a-z]{5,}\b")  # a lower-case content word of five letters or more


# ---------------------------------------------------------------- relevance and coverage

def expertqa_relevance_examples(split: str) -> list[Example]:
    """ExpertQA: claims' informativeness (essential), evidence passages (source essential) and whole
    answers (covers) against their question, with the next question's passages and answer as negatives."""
    name = DEV_SPLIT if split == "val" else HELD_OUT_SPLIT
    records = []
    with (EXPERTQA / f"rand_{split}.jsonl").open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            for answer in record["answers"].values():
                claims = answer.get("claims") or []
                passages = [e.split("\n\n", 1)[1].strip() for c in claims for e in c.get("evidence") or []
                            if "\n\n" in e]
                records.append((record["question"], answer.get("answer_string") or "", claims,
                                [p for p in dict.fromkeys(passages) if len(p) > 40]))
    informative = {"Very relevant": 1, "Uninformative": 0, "Not too important": 0}
    out: list[Example] = []
    for k, (question, answer, claims, passages) in enumerate(records):
        group = f"expertqa:{question}"
        _, other_answer, _, other_passages = records[(k + 1) % len(records)]
        for c in claims:
            label = informative.get(c.get("informativeness") or "")
            text = re.sub(r"\s*\[\d+(?:,\s*\d+)*\]", "", c.get("claim_string") or "").strip()
            if label is not None and text:
                out.append(_essential("expertqa:informativeness", name, text, question, label, group))
        out += [_source_essential("expertqa:evidence", name, p, question, 1, group) for p in passages[:3]]
        out += [_source_essential("expertqa:other-evidence", name, p, question, 0, group) for p in other_passages[:1]]
        for q in split_questions(question)[:2]:
            if answer.strip() and _may_answer(answer, q):
                out.append(_response_covers("expertqa:answer", name, answer, q, 1, group))
            if other_answer.strip():
                out.append(_response_covers("expertqa:other-answer", name, other_answer, q, 0, group))
    return out


def ragchecker_examples() -> list[Example]:
    """RAGChecker's development domains: reference and system answers address their query (covers = 1),
    the next instance's reference does not (0); each reference with a paraphrased sentence added (SD)."""
    instances = load_ragchecker("dev")
    out: list[Example] = []
    for k, inst in enumerate(instances):
        group = f"ragchecker:{inst.id}"
        other = instances[(k + 1) % len(instances)].gt_answer
        for q in split_questions(inst.query)[:2]:
            out += [_response_covers(f"ragchecker:{kind}", DEV_SPLIT, a, q, 1, group)
                    for kind, a in (("reference", inst.gt_answer), ("answer", inst.answers[0]), ("answer", inst.answers[1]))
                    if a.strip() and _may_answer(a, q)]
            out.append(_response_covers("ragchecker:other-reference", DEV_SPLIT, other, q, 0, group))
        plain = split_sentences(inst.gt_answer)[:8]
        if len(plain) >= 2:
            out += _sd("ragchecker:paraphrase", DEV_SPLIT, plain + [paraphrase(plain[0])], {0, len(plain)}, group)
    return out


def _may_answer(answer: str, question: str) -> bool:
    """Whether a system's whole answer can be taken to address a question: not when the question asks for a
    kind of answer (a date, a number, a person, a place) that the answer nowhere holds; its label is unknown."""
    kind = answer_type(question)
    return kind is None or has_answer_type(answer, kind, question)


def examples(split: str) -> list[Example]:
    """Every labelled match of a split (DEV_SPLIT or HELD_OUT_SPLIT), licensed or not; see the table above."""
    rows = load_wikieval(WIKIEVAL)
    if split == DEV_SPLIT:
        support = wice_examples("dev") + factcheck_examples("dev") + expertqa_examples("val") + demo_examples() \
            + ares_examples()
        return (support + perturbed([e for e in support if e.licensed]) + lfqa_examples("dev")
                + expertqa_relevance_examples("val") + ragchecker_examples()
                + grammar_examples() + wikieval_examples(rows, DEV, DEV_SPLIT))
    support = wice_examples("test") + factcheck_examples("test") + expertqa_examples("test")
    return (support + perturbed(support) + lfqa_examples("test") + expertqa_relevance_examples("test")
            + wikieval_examples(rows, HELD_OUT, HELD_OUT_SPLIT))
