"""Table-1 agreement: does a judge score the better side of a pair strictly higher?

Reproduces THELMA Table 1 (and the RAGAS WikiEval comparison) on ../shared/datasets/wikieval:

- pairs given by WikiEval: GR answer > ungrounded_answer; RQC answer > poor_answer;
  SP2 context_v1 > context_v2;
- pairs built as THELMA Appendix C describes, by the deterministic procedures below (SP1, SP2
  fact level, SQC, RP, SD, RQC).

Every side of every pair is an Item scored by the engine (`evaluators.runs.runner.evaluate` into a
DuckDB file, one run per judge and metric), so any judge the runner knows works: `offline`,
`local`, or a litellm model string with --api-base. Agreement is the share of pairs whose
better side scores strictly higher; ties and failures (no score) are counted separately.
Rows 0-19 are the development split (tuning allowed), rows 20-49 are held out.

Second external check: claim-level support accuracy against the expert labels of ExpertQA
(claims that carry evidence text: Complete = supported; Partial or Incomplete = not).

    python -m benchmarks.agreement [--judge offline] [--judge openai/NAME --api-base URL] ...
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evaluators.core.confidence import Band, format_band, parse_band  # noqa: E402
from evaluators.core.records import Item  # noqa: E402
from evaluators.judges import factory
from evaluators.metrics import registry
from evaluators.runs import gate, runner
from evaluators.runs.pairs import Tally  # noqa: E402
from evaluators.runs.pairs import tally as count_pairs  # noqa: E402
from evaluators.storage import queries, store  # noqa: E402

SHARED = ROOT.parent / "shared"
WIKIEVAL = SHARED / "datasets" / "wikieval" / "wikieval.jsonl"
EXPERTQA = SHARED / "datasets" / "expertqa"
OUT = ROOT / "benchmarks" / "out"
DEV, HELD_OUT = range(0, 20), range(20, 50)

# THELMA Table 1, Llama 3.3 70B rows: the THELMA metric and its closest RAGAS metric.
PAPER_THELMA = {"sp1": 1.0, "sp2": 0.64, "sqc": 0.70, "rp": 0.89, "rqc": 0.88, "sd": 1.0, "gr": 1.0}
PAPER_RAGAS = {"sp1": 0.92, "sp2": 0.28, "sqc": 0.29, "rp": 0.63, "rqc": 0.68, "sd": 0.52, "gr": 0.94}
# RAGAS counterparts, scored beside the THELMA metric when the engine's registry has them.
RAGAS_COUNTERPART = {"sp1": "ragas_context_relevance", "sp2": "ragas_context_relevance",
                     "sqc": "ragas_context_relevance", "rp": "ragas_answer_relevance",
                     "rqc": "ragas_answer_relevance", "sd": "ragas_answer_relevance", "gr": "ragas_faithfulness"}

# Pair sets in table order: id -> (metric, label).
PAIR_SETS = {
    "sp1": ("sp1", "SP1: + other questions' contexts (constructed)"),
    "sp2-wikieval": ("sp2", "SP2: context_v1 > context_v2 (WikiEval)"),
    "sp2": ("sp2", "SP2: + spliced unrelated sentences (constructed)"),
    "sqc": ("sqc", "SQC: answer-bearing sentences removed (constructed)"),
    "rp": ("rp", "RP: + facts the query does not need (constructed)"),
    "rqc-wikieval": ("rqc", "RQC: answer > poor_answer (WikiEval)"),
    "rqc": ("rqc", "RQC: one essential part dropped (constructed)"),
    "sd": ("sd", "SD: + paraphrased repeat (constructed)"),
    "gr": ("gr", "GR: answer > ungrounded_answer (WikiEval)"),
}


@dataclass(frozen=True)
class Pair:
    """Two items that differ in one respect; `better` should score strictly higher on `metric`."""

    pair_set: str
    metric: str
    row: int
    better: Item
    worse: Item


# ---------------------------------------------------------------- text helpers for the constructions
# Deliberately independent of the offline judge's own text code, so constructions do not follow it.

_STOP = frozenset("""a an the and or but of in on at to for from by with as is are was were be been being it its this
that these those which who whom whose what when where why how has have had do does did will would can could
also their there they he she his her them than then into about over after before during such not no""".split())


def sentences(text: str) -> list[str]:
    """Sentences by terminator or line break (not after "J.", "U.S.A." or "No."; headings kept as lines)."""
    parts = re.split(r"(?<=[.!?])(?<! [A-Z]\.)(?<!\.[A-Z]\.)(?<!No\.)\s+(?=[A-Z0-9\"'(])|\n+", text.strip())
    return [p.strip() for p in parts if p.strip()]


def words(text: str) -> set[str]:
    """Lowercased content words."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1}


def _recall(part: str, whole: str) -> float:
    """Share of `part`'s content words found in `whole`."""
    w = words(part)
    return len(w & words(whole)) / len(w) if w else 0.0


def answer_bearing(context: str, answer: str) -> set[int]:
    """Indices of the context sentences an answer was written from: for each answer sentence, the
    context sentence covering most of its words, and any covering at least half of them."""
    ctx = sentences(context)
    bearing: set[int] = set()
    for a in sentences(answer):
        scores = [_recall(a, c) for c in ctx]
        if not scores:
            continue
        best = max(range(len(ctx)), key=lambda i: (scores[i], -i))
        if scores[best] >= 0.3:
            bearing.add(best)
        bearing |= {i for i, s in enumerate(scores) if s >= 0.5}
    return bearing


def question_parts(question: str) -> list[str]:
    """A question split before each "and/, what|when|who|..." that opens another question."""
    parts = re.split(r",?\s+and\s+(?=(?:what|when|where|who|which|why|how|is|are|was|were|do|does|did)\b)"
                     r"|,\s+(?=(?:what|when|where|who|which|why|how)\b)", question.rstrip("?"), flags=re.I)
    return [p for p in parts if p.strip()]


_SYNONYMS = {
    "located": "situated", "situated": "located", "founded": "established", "established": "founded",
    "began": "started", "started": "began", "built": "constructed", "constructed": "built",
    "completed": "finished", "named": "called", "large": "big", "largest": "biggest", "major": "key",
    "important": "significant", "significant": "important", "aims": "seeks", "objective": "goal",
    "purpose": "aim", "several": "a number of", "many": "numerous", "main": "primary", "primary": "main",
    "used": "employed", "uses": "employs", "provides": "offers", "provide": "offer", "includes": "comprises",
    "include": "comprise", "approximately": "about", "scheduled": "planned", "known": "recognised",
    "help": "assist", "helps": "assists", "create": "establish", "shows": "demonstrates", "became": "was made",
    "head": "leader", "directed": "helmed", "stars": "appears", "opened": "was inaugurated", "based": "headquartered",
    "caused": "brought about", "held": "occupied", "passes": "goes", "product": "offering",
}


def paraphrase(sentence: str) -> str:
    """A shallow, deterministic rewording: common words swapped for synonyms, and a closing
    "in/on/since ... <number>" phrase moved to the front (else "In other words, " is prefixed)."""
    out = []
    for token in sentence.split():
        core = token.strip(".,;:")
        swap = _SYNONYMS.get(core.lower())
        out.append(token.replace(core, swap) if swap and core.islower() else token)
    text = " ".join(out).rstrip(".")
    if text.split()[0] in ("The", "A", "An", "It", "This", "These", "They", "Its"):
        text = text[0].lower() + text[1:]
    m = re.match(r"^(.{20,}?),?\s+((?:in|on|from|since|during|by|at)\s+[^,]*\d[^;]*)$", text)
    if m:
        return f"{m.group(2)[0].upper()}{m.group(2)[1:]}, {m.group(1)}."
    return f"In other words, {text}."


# ---------------------------------------------------------------- pairs

def load_wikieval(path: Path = WIKIEVAL) -> list[dict[str, Any]]:
    """The 50 WikiEval rows in their original order."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _item(pair_set: str, row: int, side: str, query: str, sources: Sequence[str], response: str) -> Item:
    sources = tuple(s for s in sources if s.strip())
    # Content ids: identical sides of different pairs are scored once.
    return Item(Item.content_id(query, sources, response), query, sources, response,
                metadata={"pair_set": pair_set, "row": row, "side": side})


def build_pairs(rows: Sequence[dict[str, Any]], indices: Iterable[int]) -> list[Pair]:
    """Every pair of every pair set for the given WikiEval rows.

    Constructed negatives borrow text only from rows of the same split (`indices`), so held-out
    pairs contain no development text. A construction that would leave nothing (or change nothing)
    yields no pair for that row.
    """
    indices = list(indices)
    pairs: list[Pair] = []
    for k, r in enumerate(indices):
        row = rows[r]
        q, v1, answer = row["question_text"], list(row["context_v1"]), row["answer_text"]
        other = [rows[indices[(k + d) % len(indices)]] for d in (1, 2, 3)]
        context = "\n\n".join(v1)

        def add(pair_set: str, worse: Item | None) -> None:
            better = _item(pair_set, r, "better", q, v1, answer)
            if worse is not None and worse.id != better.id:
                pairs.append(Pair(pair_set, PAIR_SETS[pair_set][0], r, better, worse))

        # SP1: the question's own context plus the contexts of the next two questions.
        extra_sources = list(other[0]["context_v1"]) + list(other[1]["context_v1"])
        add("sp1", _item("sp1", r, "worse", q, v1 + extra_sources, answer))
        # SP2 (WikiEval): context_v2, the RAGAS context-relevance negative.
        add("sp2-wikieval", _item("sp2-wikieval", r, "worse", q, list(row["context_v2"]), answer))
        # SP2 (fact level): after every 3rd sentence of the context, splice in a sentence (6+ words)
        # of the context of the question three rows on; at least two are spliced in.
        ctx = sentences(context)
        foreign = [s for s in sentences(" ".join(other[2]["context_v1"])) if len(s.split()) >= 6]
        spliced, n_in = [], 0
        for i, s in enumerate(ctx):
            spliced.append(s)
            if (i + 1) % 3 == 0:
                spliced.append(foreign[n_in % len(foreign)])
                n_in += 1
        for n in range(n_in, 2):
            spliced.append(foreign[n % len(foreign)])
        add("sp2", _item("sp2", r, "worse", q, ["\n".join(spliced)], answer))
        # SQC: the context without the sentences the answer was written from.
        bearing = answer_bearing(context, answer)
        kept = [s for i, s in enumerate(ctx) if i not in bearing]
        if bearing and kept:
            add("sqc", _item("sqc", r, "worse", q, ["\n".join(kept)], answer))
        # RP: the answer plus the two context sentences (6+ words, not answer-bearing) sharing
        # the fewest words with the question: true, on topic, and not asked for.
        spare = [(_recall(s, q), i, s) for i, s in enumerate(ctx)
                 if i not in bearing and len(s.split()) >= 6 and s.endswith((".", "!", "?"))]
        extra = [s for _, _, s in sorted(spare)[:2]]
        if extra:
            add("rp", _item("rp", r, "worse", q, v1, f"{answer} {' '.join(extra)}"))
        # SD: the answer plus a paraphrase of its first sentence.
        first = sentences(answer)[0]
        add("sd", _item("sd", r, "worse", q, v1, f"{answer} {paraphrase(first)}"))
        # RQC: a question in several parts keeps only the answer sentence that best answers its
        # first part (clauses, for a one-sentence answer); a one-part question loses the sentence
        # sharing most words with it.
        shorter = drop_part(q, answer)
        add("rqc", _item("rqc", r, "worse", q, v1, shorter) if shorter else None)
        # WikiEval's own negatives.
        add("rqc-wikieval", _item("rqc-wikieval", r, "worse", q, v1, row["poor_answer"]))
        add("gr", _item("gr", r, "worse", q, v1, row["ungrounded_answer"]))
    return pairs


def drop_part(question: str, answer: str) -> str | None:
    """The answer without one essential part (see build_pairs); None when it cannot be cut."""
    parts = question_parts(question)
    pieces = sentences(answer)
    joiner = " "
    if len(pieces) == 1:  # one sentence: work on its clauses
        pieces, joiner = [p for p in re.split(r",\s+(?:and\s+)?|\s+and\s+", answer) if p.strip()], ", "
        if len(pieces) == 1:
            return None
    if len(parts) > 1:
        # Keep only the piece that best answers the first part (most shared words, earliest).
        first = words(parts[0])
        keep = max(range(len(pieces)), key=lambda i: (len(words(pieces[i]) & first), -i))
        kept = [pieces[keep]]
    else:
        # One part: drop the piece sharing most words with it (the direct answer, earliest).
        target = words(question)
        drop = max(range(len(pieces)), key=lambda i: (len(words(pieces[i]) & target), -i))
        kept = [p for i, p in enumerate(pieces) if i != drop]
    text = joiner.join(kept).strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def change_numbers(answer: str, context: str, at_most: int = 2) -> str | None:
    """The answer with its first `at_most` numbers changed to ones the context lacks (each moved by 3, or by
    7, 11, ... when the context has that one); None when none was changed. Those claims are no longer grounded."""
    changed = 0

    def swap(m: re.Match[str]) -> str:
        nonlocal changed
        if changed >= at_most:
            return m.group(0)
        for step in (3, 7, 11, 13, 17):
            new = str(int(m.group(0)) + step)
            if not re.search(rf"(?<![\d.,]){new}(?![\d])", context):
                changed += 1
                return new
        return m.group(0)

    text = re.sub(r"(?<![\d.,])\d+(?![\d.,]\d)", swap, answer)
    return text if changed else None


# ---------------------------------------------------------------- scoring

def judge_label(judge: str) -> str:
    """A run-name-safe label for a judge spec."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", judge)


def run_label(judge: str, decompose_with: str | None = None) -> str:
    """The run-name prefix of a judge spec; a named decomposer is part of it, since a run cannot be
    resumed with another one."""
    return judge_label(judge if decompose_with is None else f"{judge}@{decompose_with}")


@dataclass
class RunCost:
    """What scoring cost in this invocation, and who decided the runs' verdicts."""

    judged: int = 0  # items judged now (items a run had stored already are skipped)
    seconds: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    tiers: Counter[str] = field(default_factory=Counter)  # the runs' decided verdicts by tier

    def evaluate(self, items: Sequence[Item], db: Path, run: str, judge: str, **options: Any) -> None:
        """runner.evaluate, with its time, calls and the run's verdicts by tier added up here."""
        last: list[runner.Progress] = []

        def progress(p: runner.Progress) -> None:
            last[:] = [p]
            runner.print_progress(p)  # long local runs: show they advance

        started = time.monotonic()
        # update: a rerun on other rows judges only the new items (the DB's judge cache keeps the rest).
        summary = runner.evaluate(items, db, run, judge=judge, on_progress=progress, update=True, **options)
        self.seconds += time.monotonic() - started
        self.judged += (last[0].done - last[0].skipped) if last else 0
        self.calls += summary.stats.get("calls", 0)
        self.cache_hits += summary.stats.get("cache_hits", 0)
        self.tiers.update(queries.runs.verdicts_by_tier(db, run))

    def text(self) -> str:
        """Verdict shares per tier and seconds per triplet, with the load they were measured at."""
        total = sum(self.tiers.values())
        shares = ", ".join(f"{t} {n}/{total} = {n / total:.0%}" for t, n in self.tiers.most_common()) or "none"
        pace = (f"{self.seconds / self.judged:.1f} s per triplet ({self.judged} judged in {self.seconds:.0f} s)"
                if self.judged else "no triplet judged now (all stored already)")
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        return (f"verdicts decided by tier: {shares}\n{pace}; judge calls {self.calls}, cache hits "
                f"{self.cache_hits}; load average {load}")


def score(items_by_metric: dict[str, list[Item]], judge: str, db: Path, dataset: str, api_base: str | None = None,
          concurrency: int = 8, quiet: bool = False, cost: RunCost | None = None, band: Band | None = None,
          **options: Any) -> dict[tuple[str, str], float | None]:
    """Scores {(item id, metric): value} from the engine: one run per judge, dataset and metric
    (named judge/dataset/metric), RAGAS counterparts added to a run when the engine's registry
    has them, read at `band` (None: each judge kind's default). Failures and scores with every
    verdict unsure are None. `cost` adds up the time and verdict tiers of the runs."""
    known = registry.METRICS
    out: dict[tuple[str, str], float | None] = {}
    cost = cost if cost is not None else RunCost()
    for metric, items in items_by_metric.items():
        metrics = [metric] + ([RAGAS_COUNTERPART[metric]] if RAGAS_COUNTERPART[metric] in known else [])
        run = f"{run_label(judge, options.get('decompose_with'))}/{dataset}/{metric}"
        unique = list({i.id: i for i in items}.values())
        if not quiet:
            print(f"[{judge}] {metric}: {len(unique)} items", file=sys.stderr)
        cost.evaluate(unique, db, run, judge, api_base=api_base, metrics=metrics, concurrency=concurrency, **options)
        frame = store.query(db, f"SELECT item_id, metric, value FROM {queries.sql.scores_sql(band)} WHERE run_id = $run",
                            {"run": run})
        for row in frame.itertuples(index=False):
            out[(row.item_id, row.metric)] = None if row.value != row.value else float(row.value)
    return out


def tally(pairs: Sequence[Pair], scores: dict[tuple[str, str], float | None], metric_of: dict[str, str] | None = None
          ) -> dict[str, Tally]:
    """Per pair set: better strictly higher (agree), equal (tie), lower, or unscored (failed)."""
    metric = (metric_of or {}).get
    return count_pairs([(p.pair_set, scores.get((p.better.id, metric(p.metric, p.metric))),
                         scores.get((p.worse.id, metric(p.metric, p.metric)))) for p in pairs])


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def table(judge: str, split: str, pairs: Sequence[Pair], scores: dict[tuple[str, str], float | None]) -> str:
    """The markdown agreement table of one judge on one split, beside the paper's Table 1."""
    thelma = tally(pairs, scores)
    counterparts = set(RAGAS_COUNTERPART.values())
    ragas = tally(pairs, scores, RAGAS_COUNTERPART) if any(m in counterparts for _, m in scores) else {}
    head = (f"**{judge}**, {split}\n\n| pair set | pairs | agreement | ties | worse scored higher | failed "
            f"| paper THELMA (Llama 3.3 70B) | paper RAGAS (Llama 3.3 70B) |"
            + (" RAGAS counterpart (this judge) |" if ragas else ""))
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if ragas else "")]
    for pair_set, (metric, label) in PAIR_SETS.items():
        t = thelma.get(pair_set)
        if t is None:
            continue
        row = (f"| {label} | {t.scored + t.failed} | **{_fmt(t.rate())}** | {t.ties} | {t.disagree} | {t.failed} "
               f"| {PAPER_THELMA[metric]:.2f} | {PAPER_RAGAS[metric]:.2f} |")
        if ragas:
            r = ragas.get(pair_set, Tally())
            row += f" {_fmt(r.rate())} ({RAGAS_COUNTERPART[metric]}, {r.ties} ties) |"
        lines.append(row)
    return "\n".join(lines)


# ---------------------------------------------------------------- ExpertQA

_CITATION = re.compile(r"\s*\[\d+(?:,\s*\d+)*\]")


def number_gate(rows: Sequence[dict[str, Any]], indices: Iterable[int], judge: str, db: Path,
                api_base: str | None, concurrency: int, band: Band | None, **options: Any) -> str:
    """`gate` on GR between the development answers and the same answers with up to two numbers changed
    (change_numbers), both runs keyed by row so the gate pairs them: a judge that reads a number the
    sources lack as unsupported shows a GR drop; one unsure of it shows +0.000 and lost items."""
    dev = [r for r in indices if r in DEV]
    pairs = [(r, change_numbers(rows[r]["answer_text"], "\n\n".join(rows[r]["context_v1"]))) for r in dev]
    kept = [(r, changed) for r, changed in pairs if changed]
    if not kept:
        return "**gate on changed numbers**: no development row in --rows has a number in its answer"
    runs = []
    sides = {"answers": [rows[r]["answer_text"] for r, _ in kept], "numbers-changed": [c for _, c in kept]}
    for side, answers in sides.items():
        items = [Item(f"wikieval-{r}", rows[r]["question_text"], tuple(s for s in rows[r]["context_v1"] if s.strip()),
                      answer) for (r, _), answer in zip(kept, answers)]
        run = f"{run_label(judge, options.get('decompose_with'))}/wikieval-gate/{side}"
        RunCost().evaluate(items, db, run, judge, api_base=api_base, metrics=["gr"], concurrency=concurrency,
                           **options)
        runs.append(run)
    result = gate.run_gate(str(db), runs[0], runs[1], ["gr"], {}, band)
    return (f"**{judge}**, `gate` on GR: {len(kept)} development answers against the same answers with up to two "
            f"numbers changed (exit {result.exit_code}):\n\n{gate.table(result)}")


def load_expertqa(split: str, limit: int | None = None) -> list[tuple[Item, int]]:
    """(item, label) per ExpertQA claim that carries evidence text: the question, the evidence
    passages as sources, the claim (citation markers removed) as response; label 1 = Complete."""
    out: list[tuple[Item, int]] = []
    with (EXPERTQA / f"rand_{split}.jsonl").open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            for answer in record["answers"].values():
                for claim in answer.get("claims") or []:
                    label = {"Complete": 1, "Partial": 0, "Incomplete": 0}.get(claim.get("support") or "")
                    passages = [e.split("\n\n", 1)[1].strip() for e in claim.get("evidence") or [] if "\n\n" in e]
                    passages = [p for p in passages if len(p) > 20]
                    text = _CITATION.sub("", claim.get("claim_string") or "").strip()
                    if label is None or not passages or not text:
                        continue
                    item = Item(Item.content_id(record["question"], passages, text), record["question"],
                                tuple(passages), text, metadata={"split": split, "support": claim["support"]})
                    out.append((item, label))
                    if limit and len(out) >= limit:
                        return out
    return out


def auc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    """Area under the ROC curve (ties count half)."""
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def expertqa_report(judge: str, db: Path, api_base: str | None, limit: int | None, concurrency: int,
                    band: Band | None = None, **options: Any) -> str:
    """Claim-level support accuracy on ExpertQA val (development) and test (held out)."""
    lines = [f"**{judge}**: ExpertQA claim support (GR of the claim against its evidence; predicted "
             "supported when GR = 1)\n",
             "| split | claims | Complete share | accuracy | balanced accuracy | AUC (GR score) | unscored |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for split, name in (("val", "rand_val (development)"), ("test", "rand_test (held out)")):
        data = load_expertqa(split, limit)
        scores = score({"gr": [i for i, _ in data]}, judge, db, f"expertqa-{split}", api_base, concurrency, quiet=True,
                       band=band, **options)
        got = [(scores.get((i.id, "gr")), y) for i, y in data]
        ok = [(s, y) for s, y in got if s is not None]
        pred = [(int(s >= 1.0), y) for s, y in ok]
        acc = sum(p == y for p, y in pred) / len(pred) if pred else None
        tpr = _rate([p for p, y in pred if y == 1])
        tnr = _rate([1 - p for p, y in pred if y == 0])
        bal = (tpr + tnr) / 2 if tpr is not None and tnr is not None else None
        base = sum(y for _, y in data) / len(data) if data else None
        lines.append(f"| {name} | {len(data)} | {_fmt(base)} | {_fmt(acc)} | {_fmt(bal)} "
                     f"| {_fmt(auc([s for s, _ in ok], [y for _, y in ok]))} | {len(got) - len(ok)} |")
    return "\n".join(lines)


def _rate(xs: Sequence[int]) -> float | None:
    return sum(xs) / len(xs) if xs else None


# ---------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--judge", action="append", help="offline, local, or a litellm model (repeatable; default offline)")
    p.add_argument("--api-base", action="append", default=[],
                   help="base URL for the litellm judges, in the order given (one URL serves them all)")
    p.add_argument("--db", type=Path, help="DuckDB file for runs and the judge cache (default: a temporary file)")
    p.add_argument("--rows", default="0-49", help="WikiEval rows to use, e.g. 0-19 (default 0-49)")
    p.add_argument("--pairs", default=",".join(PAIR_SETS), help="pair sets to score (default all)")
    p.add_argument("--expertqa-limit", type=int, default=None,
                   help="claims per ExpertQA split (default all; 0 skips the check)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--sd-threshold", type=float, default=None, help="SD cosine threshold (default: the engine's)")
    p.add_argument("--decompose-with", default=None, metavar="TIER",
                   help="the tier of a judge chain that decomposes, e.g. offline for --judge 'offline>local' "
                        "(default: the last)")
    p.add_argument("--band", type=parse_band, default=None,
                   help="uncertainty band LO,HI to read the verdicts at (default: each judge kind's own)")
    p.add_argument("--out", type=Path, default=OUT / "agreement.md")
    args = p.parse_args(argv)
    if not WIKIEVAL.exists():
        print(f"error: {WIKIEVAL} not found", file=sys.stderr)
        return 2
    judges = args.judge or [factory.OFFLINE]
    llm = [j for j in judges if j not in (factory.OFFLINE, factory.LOCAL)]
    bases = dict(zip(llm, args.api_base if len(args.api_base) != 1 else args.api_base * len(llm)))
    lo, _, hi = args.rows.partition("-")
    wanted = set(range(int(lo), int(hi or lo) + 1))
    chosen = set(args.pairs.split(","))
    rows = load_wikieval()
    splits = [("rows 0-19 (development, tuning allowed)", DEV), ("rows 20-49 (held out)", HELD_OUT)]
    pairs = {name: [pp for pp in build_pairs(rows, rng) if pp.pair_set in chosen and pp.row in wanted]
             for name, rng in splits}
    pairs = {name: ps for name, ps in pairs.items() if ps}

    from evaluators.metrics.thelma import SD_THRESHOLD

    sd_threshold = SD_THRESHOLD if args.sd_threshold is None else args.sd_threshold
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "agreement.duckdb"
        sections = ["# THELMA Table-1 agreement on WikiEval\n",
                    "Generated by `python -m benchmarks.agreement`. Agreement = share of pairs whose better side "
                    "scores strictly higher; ties and failures are not agreement. Paper columns: THELMA "
                    "Table 1, Llama 3.3 70B rows (the paper's pairs were human-made on 20 rows; ours are "
                    "WikiEval's own negatives and the deterministic Appendix-C constructions in "
                    f"benchmarks/agreement.py). SD threshold: {sd_threshold:.2f}. Band: "
                    f"{'each judge kind default' if args.band is None else format_band(args.band)}.\n"]
        for judge in judges:
            every = [pp for ps in pairs.values() for pp in ps]
            by_metric: dict[str, list[Item]] = {}
            for pp in every:
                by_metric.setdefault(pp.metric, []).extend([pp.better, pp.worse])
            options = {"decompose_with": args.decompose_with} if args.decompose_with else {}
            cost = RunCost()
            scores = score(by_metric, judge, db, "wikieval", bases.get(judge), args.concurrency, cost=cost,
                           band=args.band, sd_threshold=sd_threshold, **options)
            for name, ps in pairs.items():
                sections.append(table(judge, name, ps, scores) + "\n")
            sections.append(f"**{judge}**, WikiEval pairs: {cost.text()}\n")
            if "gr" in chosen:
                sections.append(number_gate(rows, sorted(wanted), judge, db, bases.get(judge), args.concurrency,
                                            args.band, **options) + "\n")
            if args.expertqa_limit != 0 and EXPERTQA.exists():
                sections.append(expertqa_report(judge, db, bases.get(judge), args.expertqa_limit,
                                                args.concurrency, args.band, **options) + "\n")
        text = "\n".join(sections)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
