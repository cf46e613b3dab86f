"""Agreement with people: the engine's verdicts against human labels no one here wrote.

Four human-labelled data sets in ../shared/datasets (see each folder's SOURCE.md), every item scored
by the engine (`runner.evaluate` into a DuckDB file, one run per judge, split and data set, read back
at the band asked for), beside a content-word overlap baseline and the peer's or published figure:

- RAGChecker meta-evaluation (ragchecker_meta_eval): 280 instances, each two answers to one query
  with a reference answer (gt_answer), and two annotators' 5-point preferences between the answers
  on correctness, completeness and overall. Per answer, with `--protocol ref` (the default) one item,
  (query, sources=[gt_answer], response=answer, reference=gt_answer), read as ref_precision /
  ref_recall / ref_f1. With `--protocol gr` two items:
  (query, sources=[gt_answer], response=answer), whose GR is precision (correctness), and
  (query, sources=[answer], response=gt_answer), whose GR is recall (completeness); overall is
  their F1. An empty answer, or one the
  judge finds no claim in, scores 0. The figure is the Spearman of metric(model2) - metric(model1)
  against each annotator's label over all records, as RAGChecker's meta_eval.py computes it.
  Development domains: kiwi, clapnq, novelqa, robustqa/fiqa, robustqa/lifestyle; held out:
  robustqa/recreation, bioasq, science, technology, writing.
- WiCE (wice_claim_oracle_chunks.jsonl): one item per claim, its oracle chunks as sources, the
  claim as response: GR's AUROC for supported vs the rest, the unscored share, and the balanced
  accuracy of "supported iff GR = 1". Dev / test are WiCE's own splits.
- LFQA verification: one item per answer sentence against its evidence documents (majority label;
  no_majority dropped): supported vs partially / not_supported. Proposed question-level split.
- Factcheck-GPT (subtask 3): one item per (claim, web passage) pair: completely-support vs
  partially-support / refute / irrelevant. Proposed response-level split.

Each figure is also printed read as expected values (evaluators/metrics/expected.py: a score's mean
of its verdicts' p, unsure ones included, at no band), beside the score's own.

Word overlap: the share of a text's content words (evaluators.core.text.content_stems, matched as
text.share does) found in its best source; for RAGChecker the mean of that share over the answer's
claims (text.split_claims) against gt_answer (precision), the reverse (recall), and their F1.

The test split is held out: it is measured, never tuned on, and only aggregates are ever printed.

    python -m benchmarks.people [--split dev|test] [--sets ragchecker,wice,lfqa,factcheck]
        [--judge offline|local|<model>|TIER>TIER] [--decompose-with TIER] [--band LO,HI]
        [--protocol ref|gr] [--sample N] [--db FILE]

A rerun reads what the runs in --db already hold and judges only new units; the runs do not record
the offline judge's code, so after that changes, give a new --db.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scipy.stats import spearmanr  # noqa: E402

from benchmarks.agreement import OUT, RunCost, auc, run_label  # noqa: E402
from evaluators.core import text  # noqa: E402
from evaluators.core.confidence import Band, format_band, parse_band  # noqa: E402
from evaluators.core.records import Item, Status  # noqa: E402
from evaluators.judges import factory
from evaluators.judges.llm import JudgeFatal  # noqa: E402
from evaluators.metrics import registry
from evaluators.metrics.expected import expected_scores
from evaluators.storage import queries, store

DATASETS = ROOT.parent / "shared" / "datasets"
RAGCHECKER = DATASETS / "ragchecker_meta_eval"
WICE = DATASETS / "wice" / "wice_claim_oracle_chunks.jsonl"
LFQA = DATASETS / "lfqa_verification"
FACTCHECK = DATASETS / "factcheck_gpt" / "factcheck_gpt_stance.jsonl"
SETS = ("ragchecker", "wice", "lfqa", "factcheck")
SEED = 27
DOMAINS = {"dev": ("kiwi", "clapnq", "novelqa", "robustqa/fiqa", "robustqa/lifestyle"),
           "test": ("robustqa/recreation", "robustqa/bioasq", "robustqa/science", "robustqa/technology",
                    "robustqa/writing")}
LABELS = ("correctness_label", "completeness_label", "overall_label")  # read as precision, recall, F1
PROTOCOL_METRICS = {"gr": ("gr",), "ref": ("ref_precision", "ref_recall", "ref_f1")}
SIDES = ("model1", "model2")

Triple = tuple[float | None, float | None, float | None]  # precision, recall, F1 of one answer; None: unscored
Scores = dict[tuple[str, str], float | None]  # (item id, metric) -> value; None: unscored


class DataError(ValueError):
    """A data file the benchmark cannot read, named with its line (or record) and field."""


# ---------------------------------------------------------------- pure pieces

def overlap(claim: str, sources: Sequence[str]) -> float:
    """The share of the claim's content words found in its best source (0 when it has none)."""
    wanted = text.content_stems(claim)
    return max((text.share(wanted, text.content_stems(s)) for s in sources), default=0.0)


def claims_overlap(response: str, sources: Sequence[str]) -> float:
    """The mean overlap of the response's claims with the sources; 0 for a response with no claim."""
    claims = text.split_claims(response)
    return statistics.fmean(overlap(c, sources) for c in claims) if claims else 0.0


def f1(precision: float | None, recall: float | None) -> float | None:
    """Their harmonic mean; 0 when both are 0, None when either is unscored."""
    if precision is None or recall is None:
        return None
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (ties ranked by their mean); None with fewer than 3 points or a constant side."""
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float(spearmanr(x, y).statistic)


def auroc_all(scores: Sequence[float | None], labels: Sequence[int]) -> float | None:
    """AUROC over every unit, an unscored one (None) ranked at 0.5: the judge's "I can't tell"."""
    return auc([0.5 if s is None else s for s in scores], labels)


def auroc_scored(scores: Sequence[float | None], labels: Sequence[int]) -> float | None:
    """AUROC over the scored units only."""
    kept = [(s, y) for s, y in zip(scores, labels) if s is not None]
    return auc([s for s, _ in kept], [y for _, y in kept])


def balanced_accuracy(predicted: Sequence[int], labels: Sequence[int]) -> float | None:
    """The mean of the true-positive and true-negative rates; None without both classes."""
    pos = [p for p, y in zip(predicted, labels) if y == 1]
    neg = [1 - p for p, y in zip(predicted, labels) if y == 0]
    return (sum(pos) / len(pos) + sum(neg) / len(neg)) / 2 if pos and neg else None


@dataclass(frozen=True)
class Instance:
    """One RAGChecker meta-evaluation instance: two answers to a query and two annotators' labels."""

    id: int
    dataset: str
    query: str
    gt_answer: str
    answers: tuple[str, str]  # model1, model2
    labels: tuple[Mapping[str, int], Mapping[str, int]]  # per annotator: label -> -2..2 (positive: model2 better)
    peer: tuple[Triple, Triple]  # RAGChecker's own precision, recall, overall per answer


@dataclass(frozen=True)
class Correlation:
    """A metric's Spearman with the annotators' labels: over all records, and over the scored ones."""

    rho: float | None  # all records; an unscored delta at the median scored one, as RAGChecker's meta_eval.py fills NaN
    rho_scored: float | None  # only the records whose two answers are scored
    n: int  # records (instances x annotators)
    n_scored: int
    scored: frozenset[int]  # the ids of the instances whose two answers are scored


def meta_eval(instances: Sequence[Instance], metric: Callable[[Instance, int], Triple]) -> dict[str, Correlation]:
    """Per label, the Spearman of metric(model2) - metric(model1) against each annotator's label.

    `metric(instance, side)` gives (precision, recall, F1) of one answer, read for correctness,
    completeness and overall in turn. A record with an unscored side has no delta: over all records
    it takes the median scored delta (RAGChecker's script does so with NaN), and it is left out of
    `rho_scored`."""
    out: dict[str, Correlation] = {}
    for k, label in enumerate(LABELS):
        deltas: list[float | None] = []
        people: list[float] = []
        scored: set[int] = set()
        for inst in instances:
            one, two = metric(inst, 0)[k], metric(inst, 1)[k]
            if one is not None and two is not None:
                scored.add(inst.id)
            for annotator in inst.labels:
                deltas.append(None if one is None or two is None else two - one)
                people.append(annotator[label])
        kept = [(d, y) for d, y in zip(deltas, people) if d is not None]
        middle = statistics.median(d for d, _ in kept) if kept else 0.0
        out[label] = Correlation(spearman([middle if d is None else d for d in deltas], people),
                                 spearman([d for d, _ in kept], [y for _, y in kept]), len(deltas), len(kept),
                                 frozenset(scored))
    return out


def annotators(instances: Sequence[Instance]) -> dict[str, float | None]:
    """Per label, the Spearman of the first annotator's labels with the second's."""
    return {label: spearman([i.labels[0][label] for i in instances], [i.labels[1][label] for i in instances])
            for label in LABELS}


def missing_metrics(protocol: str, known: Mapping[str, Any]) -> list[str]:
    """The metrics a RAGChecker protocol reads that the engine does not have."""
    return [m for m in PROTOCOL_METRICS[protocol] if m not in known]


def sample(units: Sequence[Any], n: int | None, name: str) -> list[Any]:
    """A seeded random sample of n units, kept in file order; a larger n keeps every unit of a smaller one."""
    if n is None or n >= len(units):
        return list(units)
    order = list(range(len(units)))
    random.Random(f"{SEED}:{name}").shuffle(order)
    return [units[i] for i in sorted(order[:n])]


# ---------------------------------------------------------------- data

def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) per line: `where` names the file and line for errors."""
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield f"{path}:{n}", json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{n}: not JSON ({exc.msg})") from None


def _field(record: Mapping[str, Any], key: str, where: str) -> Any:
    try:
        return record[key]
    except (KeyError, TypeError):
        raise DataError(f"{where}: field {key!r} missing") from None


def load_ragchecker(split: str) -> list[Instance]:
    """The instances of the split's domains, annotators paired (records 2i and 2i+1 are instance i's)."""
    path, peer_path = RAGCHECKER / "human_labeled_data.json", RAGCHECKER / "baseline_ragchecker.json"
    records, peers = json.loads(path.read_text(encoding="utf-8")), json.loads(peer_path.read_text(encoding="utf-8"))
    out: list[Instance] = []
    for i, peer in enumerate(peers):
        first, second = records[2 * i: 2 * i + 2]
        where = f"{path} record {2 * i}"
        ids = {_field(r, "instance_id", where) for r in (first, second, peer)}
        if len(ids) != 1:
            raise DataError(f"{where}: field 'instance_id' {sorted(ids)} differs between the annotators' records "
                            f"or {peer_path.name}")
        if _field(first, "dataset", where) not in DOMAINS[split]:
            continue
        answers = tuple(_field(_field(first, side, where), "response", where) for side in SIDES)
        peer_scores = tuple(tuple(_field(_field(_field(peer, side, f"{peer_path} record {i}"), "ragchecker",
                                                f"{peer_path} record {i}"), label, f"{peer_path} record {i}")
                                  for label in LABELS) for side in SIDES)
        labels = tuple({label: _field(r, label, f"{path} record {2 * i + k}") for label in LABELS}
                       for k, r in enumerate((first, second)))
        out.append(Instance(first["instance_id"], first["dataset"], _field(first, "query", where),
                            _field(first, "gt_answer", where), answers, labels, peer_scores))  # type: ignore[arg-type]
    return out


@dataclass(frozen=True)
class Case:
    """One labelled unit of WiCE, LFQA or Factcheck-GPT: an item to score and whether people call it supported."""

    id: str
    item: Item
    supported: bool


def _case(unit: str, query: str, sources: Sequence[str], response: str, supported: bool) -> Case:
    sources = tuple(s for s in sources if s.strip())
    # Content ids: identical units (Factcheck-GPT repeats some pairs) are scored once.
    return Case(unit, Item(Item.content_id(query, sources, response), query, sources, response), supported)


def load_wice(split: str) -> list[Case]:
    """One case per WiCE claim: its oracle chunks (each chunk's sentences joined) as sources; the query
    names the article and section the claim comes from."""
    chunks: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for where, r in _jsonl(WICE):
        if _field(r, "split", where) == split:
            chunks.setdefault(_field(r, "claim_id", where), []).append((where, r))
    out = []
    for claim_id, rows in chunks.items():
        where, first = rows[0]
        meta = _field(first, "meta", where)
        query = f"{_field(meta, 'claim_title', where)}: {_field(meta, 'claim_section', where)}".rstrip(". ")
        sources = [" ".join(_field(r, "evidence", w)) for w, r in rows]
        out.append(_case(claim_id, query, sources, _field(first, "claim", where),
                         bool(_field(first, "supported", where))))
    return out


def load_lfqa(split: str) -> list[Case]:
    """One case per LFQA answer sentence with a majority label, against its evidence documents."""
    docs = {_field(r, "evidence_key", w): [_field(d, "text", w) for d in _field(r, "docs", w)]
            for w, r in _jsonl(LFQA / "lfqa_verification_docs.jsonl")}
    out = []
    for where, r in _jsonl(LFQA / "lfqa_verification_claims.jsonl"):
        if _field(r, "split", where) != split or _field(r, "label", where) == "no_majority":
            continue
        key = _field(r, "evidence_key", where)
        if key not in docs:
            raise DataError(f"{where}: field 'evidence_key' {key!r} is not in lfqa_verification_docs.jsonl")
        claim = _field(r, "claim", where).replace("</s>", "").strip()  # some Alpaca sentences end with it
        out.append(_case(_field(r, "id", where), _field(r, "question", where), docs[key], claim,
                         _field(r, "label", where) == "supported"))
    return out


def load_factcheck(split: str) -> list[Case]:
    """One case per Factcheck-GPT (claim, passage) pair: supported = completely-support."""
    return [_case(_field(r, "id", w), _field(_field(r, "meta", w), "question", w), [_field(r, "evidence", w)],
                  _field(r, "claim", w), _field(r, "label", w) == "completely-support")
            for w, r in _jsonl(FACTCHECK) if _field(r, "split", w) == split]


LOADERS: dict[str, Callable[[str], list[Case]]] = {"wice": load_wice, "lfqa": load_lfqa, "factcheck": load_factcheck}
PATHS = {"ragchecker": RAGCHECKER, "wice": WICE, "lfqa": LFQA, "factcheck": FACTCHECK}


# ---------------------------------------------------------------- scoring through the engine

@dataclass(frozen=True)
class Engine:
    """How items are scored: the judge spec, its options, the DuckDB file and the band to read at."""

    judge: str
    db: Path
    split: str
    band: Band | None = None
    decompose_with: str | None = None
    api_base: str | None = None
    concurrency: int = 8

    def score(self, items: Sequence[Item], name: str, metrics: Sequence[str], cost: RunCost) -> Scores:
        """Evaluate the items into the run <judge>/people-<split>/<name> (resumed, or updated to these
        items) and read its scores at the band: None where a score has no value (unsure or failed),
        0.0 where the response has no claim (status empty)."""
        run = self.run(name)
        unique = list({i.id: i for i in items}.values())
        options = {"decompose_with": self.decompose_with} if self.decompose_with else {}
        print(f"[{self.judge}] {name}: {len(unique)} items", file=sys.stderr)
        cost.evaluate(unique, self.db, run, self.judge, api_base=self.api_base, metrics=list(metrics),
                      concurrency=self.concurrency, **options)
        frame = store.query(self.db, "SELECT item_id, metric, value, status FROM "
                            f"{queries.sql.scores_sql(self.band)} WHERE run_id = $run", {"run": run})
        return {(r.item_id, r.metric): 0.0 if r.status == Status.EMPTY.value
                else None if r.value is None or r.value != r.value else float(r.value)
                for r in frame.itertuples(index=False)}

    def run(self, name: str) -> str:
        """The run a data set's items are evaluated into."""
        return f"{run_label(self.judge, self.decompose_with)}/people-{self.split}/{name}"

    def expected(self, name: str) -> Scores:
        """The run's expected scores (metrics.expected: the mean of each score's verdicts' p, at no band),
        as score() gives the scores (0.0 where the response has no claim); a metric without one (SQC, a
        rating) is absent."""
        frame = store.query(self.db, "SELECT item_id, metric, component_kind, component_idx, target, value, status, "
                            "p, p_kind FROM verdicts WHERE run_id = $run", {"run": self.run(name)})
        empty = store.query(self.db, "SELECT item_id, metric FROM scores WHERE run_id = $run AND status = $empty",
                            {"run": self.run(name), "empty": Status.EMPTY.value})
        read = {key: s.value for key, s in expected_scores(queries.items.verdict_records(frame)).items()}
        return read | {(r.item_id, r.metric): 0.0 for r in empty.itertuples(index=False)}  # no claim: 0, as score()


def ragchecker_items(inst: Instance, side: int, protocol: str) -> list[Item]:
    """The items of one answer: [precision item, recall item] (gr) or [one item with a reference] (ref);
    none for an empty answer, which scores 0."""
    answer = inst.answers[side]
    if not answer.strip():
        return []
    if protocol == "ref":
        return [Item(Item.content_id(inst.query, [inst.gt_answer], answer), inst.query, (inst.gt_answer,), answer,
                     reference=inst.gt_answer)]
    return [Item(Item.content_id(inst.query, [gt], response), inst.query, (gt,), response)
            for gt, response in ((inst.gt_answer, answer), (answer, inst.gt_answer))]


def ragchecker_metric(scores: Scores, protocol: str) -> Callable[[Instance, int], Triple]:
    """metric(instance, side) for meta_eval, read from the engine's scores of ragchecker_items."""
    def metric(inst: Instance, side: int) -> Triple:
        items = ragchecker_items(inst, side, protocol)
        if not items:
            return 0.0, 0.0, 0.0
        if protocol == "ref":
            return tuple(scores.get((items[0].id, m)) for m in PROTOCOL_METRICS["ref"])  # type: ignore[return-value]
        precision, recall = (scores.get((i.id, "gr")) for i in items)
        return precision, recall, f1(precision, recall)
    return metric


def overlap_metric(inst: Instance, side: int) -> Triple:
    """The word-overlap baseline's precision, recall and F1 of one answer against gt_answer."""
    answer = inst.answers[side]
    if not answer.strip():
        return 0.0, 0.0, 0.0
    precision, recall = claims_overlap(answer, [inst.gt_answer]), claims_overlap(inst.gt_answer, [answer])
    return precision, recall, f1(precision, recall)


# ---------------------------------------------------------------- the report

@dataclass(frozen=True)
class Row:
    """One line of the table."""

    dataset: str
    figure: str
    judge: str
    overlap: str
    peer: str
    n: int
    n_scored: int


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def ragchecker_rows(instances: Sequence[Instance], scores: Scores, expected: Scores, protocol: str,
                    split: str) -> list[Row]:
    """Per label, the Spearman over all records and over the records the judge scored, with word overlap
    and RAGChecker's own scores over the same records; then over all records read as expected scores."""
    judged = meta_eval(instances, ragchecker_metric(scores, protocol))
    soft = meta_eval(instances, ragchecker_metric(expected, protocol))
    people = annotators(instances)
    name = f"RAGChecker meta-eval, {split} domains"
    what = {"gr": ("precision: GR of the answer on gt_answer", "recall: GR of gt_answer on the answer", "F1"),
            "ref": ("ref_precision", "ref_recall", "ref_f1")}[protocol]
    rows = []
    for label, metric in zip(LABELS, what):
        kind, c = label.split("_")[0], judged[label]
        for every, rho, n in ((True, c.rho, c.n), (False, c.rho_scored, c.n_scored)):
            these = instances if every else [i for i in instances if i.id in c.scored]
            words = meta_eval(these, overlap_metric)[label].rho
            peer = meta_eval(these, lambda inst, side: inst.peer[side])[label].rho
            subset = "all records, an unscored delta at the median" if every else "scored records only"
            rows.append(Row(name, f"Spearman, {kind} ({metric}): {subset}", _fmt(rho), _fmt(words),
                            f"RAGChecker {_fmt(peer)}" + (f"; annotators with each other {_fmt(people[label])}"
                                                          if every else ""), n, c.n_scored))
    words_all = meta_eval(instances, overlap_metric)  # over all records, as the expected reading has no gaps
    peer_all = meta_eval(instances, lambda inst, side: inst.peer[side])
    for label, metric in zip(LABELS, what):
        kind, c = label.split("_")[0], soft[label]
        rows.append(Row(name, f"Spearman, {kind} ({metric}) read as expected (mean p): all records", _fmt(c.rho),
                        _fmt(words_all[label].rho), f"RAGChecker {_fmt(peer_all[label].rho)}", c.n, c.n_scored))
    return rows


PUBLISHED = {
    "wice": {"auroc": "published (test, first 100 claims; reference only): GPT-4 0.80, T5-3B NLI 0.91–0.95",
             "ba": "published (test, first 100 claims, threshold tuned): GPT-4 0.79, T5-3B NLI 0.82–0.91"},
    "lfqa": {"auroc": "none published", "ba": "none published"},
    "factcheck": {"auroc": "none comparable: only 3-/4-way stance accuracy is published",
                  "ba": "none comparable"},
}
TITLES = {"wice": "WiCE {split}", "lfqa": "LFQA verification {split} (proposed split)",
          "factcheck": "Factcheck-GPT {split} (proposed split)"}


def support_rows(name: str, cases: Sequence[Case], scores: Scores, expected: Scores, split: str) -> list[Row]:
    """AUROC (scored units; all units, unscored at 0.5; all units read as expected GR), the unscored share
    and, for WiCE, the balanced accuracy of "supported iff GR = 1" (unscored: not supported)."""
    got = [scores.get((c.item.id, "gr")) for c in cases]
    soft = [expected.get((c.item.id, "gr")) for c in cases]
    labels = [int(c.supported) for c in cases]
    words = [overlap(c.item.response, c.item.sources) for c in cases]
    n, scored = len(cases), sum(g is not None for g in got)
    title, peer = TITLES[name].format(split=split), PUBLISHED[name]
    rows = [Row(title, "GR AUROC, scored units only", _fmt(auroc_scored(got, labels)),
                _fmt(auroc_scored([w if g is not None else None for w, g in zip(words, got)], labels)),
                peer["auroc"], scored, scored),
            Row(title, "GR AUROC, all units (unscored ranked at 0.5)", _fmt(auroc_all(got, labels)),
                _fmt(auc(words, labels)), peer["auroc"], n, scored),
            Row(title, "GR read as expected (mean of its verdicts' p) AUROC, all units (one with no p at 0.5)",
                _fmt(auroc_all(soft, labels)), _fmt(auc(words, labels)), peer["auroc"], n,
                sum(e is not None for e in soft)),
            Row(title, "unscored share (every verdict unsure or failed)",
                f"{(n - scored) / n:.2f} ({n - scored} of {n})" if n else "–", "–", "–", n, scored)]
    if name == "wice":
        predicted = [int(g is not None and g >= 1.0) for g in got]
        rows.append(Row(title, "balanced accuracy of GR = 1 (unscored: not supported)",
                        _fmt(balanced_accuracy(predicted, labels)), "–", peer["ba"], n, scored))
    return rows


def table(rows: Sequence[Row], judge: str) -> str:
    """The rows as one markdown table."""
    lines = [f"| data set | figure | {judge} | word overlap | peer or published | n units | n scored |",
             "|---|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r.dataset} | {r.figure} | **{r.judge}** | {r.overlap} | {r.peer} | {r.n} | {r.n_scored} |"
              for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=("dev", "test"), default="dev",
                   help="dev (tuning allowed) or test (held out: aggregates only)")
    p.add_argument("--sets", default=",".join(SETS), help=f"data sets to score (default {','.join(SETS)})")
    p.add_argument("--judge", default=factory.OFFLINE, help="offline, local, a litellm model, or a chain TIER>TIER")
    p.add_argument("--decompose-with", default=None, metavar="TIER", help="the tier of a chain that decomposes")
    p.add_argument("--api-base", default=None, help="base URL for a litellm judge")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--band", type=parse_band, default=None,
                   help="uncertainty band LO,HI to read the stored verdicts at (default: each judge kind's own)")
    p.add_argument("--protocol", choices=tuple(PROTOCOL_METRICS), default="ref",
                   help="RAGChecker items: ref (one item per answer read as ref_*; default) or gr (two GR items)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="a seeded random sample of N units per data set (RAGChecker: N answer pairs)")
    p.add_argument("--db", type=Path, default=OUT / "people.duckdb", help="DuckDB file for the runs and judge cache")
    p.add_argument("--out", type=Path, default=OUT / "people.md", help="where the markdown table is written")
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SETS]
    try:
        if unknown or not chosen:
            raise ValueError(f"--sets: unknown data set {', '.join(unknown) or '(none)'}; "
                             f"choose from {', '.join(SETS)}")
        factory.check_chain(args.judge, args.decompose_with)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    missing = missing_metrics(args.protocol, registry.METRICS) if "ragchecker" in chosen else []
    if missing:
        print(f"error: --protocol {args.protocol} reads {', '.join(missing)}, which this engine does not have "
              f"(evaluators.metrics.registry.METRICS); use --protocol gr", file=sys.stderr)
        return 2
    absent = [PATHS[s] for s in chosen if not PATHS[s].exists()]
    if absent:
        print(f"error: {absent[0]} not found (the shared datasets folder beside the checkout)", file=sys.stderr)
        return 2

    engine = Engine(args.judge, args.db, args.split, args.band, args.decompose_with, args.api_base, args.concurrency)
    args.db.parent.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    notes: list[str] = []
    started = time.monotonic()
    try:
        for name in chosen:
            cost = RunCost()
            set_started = time.monotonic()
            if name == "ragchecker":
                instances = sample(load_ragchecker(args.split), args.sample, name)
                items = [i for inst in instances for side in (0, 1)
                         for i in ragchecker_items(inst, side, args.protocol)]
                run = "ragchecker" if args.protocol == "gr" else "ragchecker-ref"
                scores = engine.score(items, run, PROTOCOL_METRICS[args.protocol], cost)
                rows += ragchecker_rows(instances, scores, engine.expected(run), args.protocol, args.split)
            else:
                cases = sample(LOADERS[name](args.split), args.sample, name)
                scores = engine.score([c.item for c in cases], name, ["gr"], cost)
                rows += support_rows(name, cases, scores, engine.expected(name), args.split)
            notes.append(f"{name}: {time.monotonic() - set_started:.0f} s; {cost.text()}".replace("\n", "; "))
    except (ValueError, JudgeFatal) as exc:  # bad data, a judge without access, a run resumed otherwise, ...
        print(f"error: {exc}" + ("" if isinstance(exc, DataError) else "; finished items are kept in " + str(args.db)),
              file=sys.stderr)
        return 2
    band = "each judge kind's default" if args.band is None else format_band(args.band)
    head = (f"# Agreement with people, {args.split} split\n\nGenerated by `python -m benchmarks.people`. Judge "
            f"`{args.judge}`" + (f" (decomposing with {args.decompose_with})" if args.decompose_with else "")
            + f", band: {band}, RAGChecker protocol: {args.protocol}"
            + (f", a seeded sample of {args.sample} units per data set" if args.sample else "") + ".\n")
    rule = ("Word overlap: the share of a text's content words found in its best source (RAGChecker: the mean over "
            "the answer's claims against gt_answer, the reverse for recall, and F1). GR = 1 means supported. "
            "An unscored unit has no GR value: every verdict unsure or failed. RAGChecker over all records gives "
            "an unscored side's delta the median scored delta (as RAGChecker's meta_eval.py fills NaN); the "
            "scored-only rows compare word overlap and the peer on the same units. Units: RAGChecker, records "
            "(answer pairs x 2 annotators); WiCE, claims against their oracle chunks; LFQA, answer sentences "
            "against their documents; Factcheck-GPT, (claim, passage) pairs. Supported: WiCE supported, LFQA "
            "supported by majority (no_majority dropped), Factcheck-GPT completely-support; the rest is not.")
    report = "\n".join([head, table(rows, args.judge), "", rule, ""] + [f"- {n}" for n in notes]
                       + [f"\nwall time {time.monotonic() - started:.0f} s"])
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
