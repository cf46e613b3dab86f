"""GRAMMAR's robustness: correctness against the ground truth, semantic groups, R and Acc, and blame.

- correctness: Table 6's verdict on each item, asked of a judge with the `grammar_correctness` prompt
  (its parser and offline answer are in evaluators/judges/peers/grammar.py);
- groups: gap (none correct), robust (all correct) or non-robust; robustness
  R = correct / (total - items in gap groups) and Acc = R x (1 - lambda);
- the paper's "context comparison" blames a wrong item on the language model or on retrieval;
- the Robustness page's read model (`report`), over the grammar_correctness table.

All arithmetic is in pure functions over `GroupCount` and `Outcome` lists; judges and the store are
only touched by `judge_items`, `write_correctness` and the read functions.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from evaluators.core.records import Judge, Status
from evaluators.grammar import (
    ALL,
    GAP,
    LM,
    META_GENERATOR_STATUS,
    META_GROUP,
    META_RETRIEVED,
    META_SQL_TEMPLATE,
    META_TEXT_TEMPLATE,
    META_TRUE_DOCS,
    NON_ROBUST,
    RETRIEVAL,
    ROBUST,
    UNKNOWN,
)
from evaluators.storage import queries, writes

# ---------------------------------------------------------------- pure robustness math


@dataclass(frozen=True)
class GroupCount:
    """Items of one semantic group within one cluster: judged, correct, and not judgeable."""

    cluster: str
    group: str
    total: int  # items with a verdict (correct or not)
    correct: int
    unscored: int = 0  # items whose correctness could not be judged (error, unparsed, ...)


@dataclass(frozen=True)
class Outcome:
    """One item's correctness with what it retrieved; `correct` is None when it was not judged."""

    item_id: str
    cluster: str
    group: str
    correct: bool | None
    retrieved: tuple[str, ...] = ()
    true_docs: tuple[str, ...] = ()


def count_groups(outcomes: Iterable[Outcome]) -> list[GroupCount]:
    """Per (cluster, group): judged items, correct items, unscored items."""
    tally: dict[tuple[str, str], list[int]] = {}
    for o in outcomes:
        t = tally.setdefault((o.cluster, o.group), [0, 0, 0])
        if o.correct is None:
            t[2] += 1
        else:
            t[0] += 1
            t[1] += int(o.correct)
    return [GroupCount(c, g, n, k, u) for (c, g), (n, k, u) in sorted(tally.items())]


def classify_groups(counts: Iterable[GroupCount]) -> dict[str, str]:
    """Each group's type over all clusters: gap (none correct), robust (all correct), non_robust.

    Judged items only; a group with no judged item gets no type. Pooling the clusters follows the
    paper's code, which tags gap groups across its hypothesis and counter-hypothesis clusters.
    """
    totals: dict[str, list[int]] = {}
    for c in counts:
        t = totals.setdefault(c.group, [0, 0])
        t[0] += c.total
        t[1] += c.correct
    return {g: GAP if k == 0 else ROBUST if k == n else NON_ROBUST for g, (n, k) in totals.items() if n > 0}


@dataclass(frozen=True)
class Figures:
    """A cluster's counts and the paper's metrics derived from them."""

    cluster: str
    items: int  # judged items
    correct: int
    gap_items: int  # judged items in gap groups
    unscored: int
    groups: dict[str, int] = field(default_factory=dict)  # group type -> number of groups

    @property
    def lam(self) -> float | None:
        """lambda: the share of judged items that fall in gap groups."""
        return self.gap_items / self.items if self.items else None

    @property
    def robustness(self) -> float | None:
        """R = correct / (total - items in gap groups); None when every item is in a gap group."""
        rest = self.items - self.gap_items
        return self.correct / rest if rest else None

    @property
    def accuracy(self) -> float | None:
        """Acc = R x (1 - lambda) (= correct / total); 0 when all items are in gap groups."""
        if not self.items:
            return None
        r, lam = self.robustness, self.lam
        return 0.0 if r is None else r * (1 - (lam or 0.0))


def _figure(cluster: str, counts: Sequence[GroupCount], classes: Mapping[str, str]) -> Figures:
    kinds: Counter[str] = Counter()
    for c in counts:
        if c.total == 0:
            continue
        # Gap status is global; within a cluster a non-gap group is robust only if all its items are right.
        kinds[GAP if classes.get(c.group) == GAP else ROBUST if c.correct == c.total else NON_ROBUST] += 1
    return Figures(
        cluster=cluster,
        items=sum(c.total for c in counts),
        correct=sum(c.correct for c in counts),
        gap_items=sum(c.total for c in counts if classes.get(c.group) == GAP),
        unscored=sum(c.unscored for c in counts),
        groups={k: kinds.get(k, 0) for k in (GAP, ROBUST, NON_ROBUST)},
    )


def figures(counts: Sequence[GroupCount], classes: Mapping[str, str] | None = None) -> dict[str, Figures]:
    """Figures per cluster, plus ALL for the clusters pooled (each group counted once)."""
    classes = classify_groups(counts) if classes is None else classes
    by_cluster: dict[str, list[GroupCount]] = {}
    for c in counts:
        by_cluster.setdefault(c.cluster, []).append(c)
    out = {name: _figure(name, cs, classes) for name, cs in sorted(by_cluster.items())}
    pooled: dict[str, list[int]] = {}
    for c in counts:
        t = pooled.setdefault(c.group, [0, 0, 0])
        t[0], t[1], t[2] = t[0] + c.total, t[1] + c.correct, t[2] + c.unscored
    out[ALL] = _figure(ALL, [GroupCount(ALL, g, *t) for g, t in pooled.items()], classes)
    return out


def context_comparison(outcomes: Sequence[Outcome], classes: Mapping[str, str] | None = None) -> dict[str, str]:
    """The paper's context comparison, for every wrong item in a non-robust group.

    `lm` when the item retrieved the same documents (as a set of ids) as a correctly answered item
    of its group: the context sufficed, so the language model fell short. `retrieval` otherwise: a
    possible retrieval failure (not proven: no correct sibling saw this context). `unknown` when
    the item carries no retrieved document ids.
    """
    classes = classify_groups(count_groups(outcomes)) if classes is None else classes
    good: dict[str, set[frozenset[str]]] = {}
    for o in outcomes:
        if o.correct and o.retrieved:
            good.setdefault(o.group, set()).add(frozenset(o.retrieved))
    blame: dict[str, str] = {}
    for o in outcomes:
        if o.correct is False and classes.get(o.group) == NON_ROBUST:
            if not o.retrieved:
                blame[o.item_id] = UNKNOWN
            else:
                blame[o.item_id] = LM if frozenset(o.retrieved) in good.get(o.group, set()) else RETRIEVAL
    return blame


def credit_lm(outcomes: Sequence[Outcome], blame: Mapping[str, str]) -> list[Outcome]:
    """Modular evaluation of retrieval (the paper's Table 2): LM shortfalls count as correct."""
    return [replace(o, correct=True) if blame.get(o.item_id) == LM else o for o in outcomes]


def retrieval_hit(o: Outcome) -> bool | None:
    """True when every true document id was retrieved; None when the item has no true ids."""
    if not o.true_docs:
        return None
    return set(o.true_docs) <= set(o.retrieved)


def hit_rates(outcomes: Iterable[Outcome]) -> dict[str, tuple[int, int]]:
    """Per cluster and ALL: (retrieval hits, items with known true documents)."""
    tally: dict[str, list[int]] = {}
    for o in outcomes:
        hit = retrieval_hit(o)
        if hit is None:
            continue
        for key in (o.cluster, ALL):
            t = tally.setdefault(key, [0, 0])
            t[0] += int(hit)
            t[1] += 1
    return {k: (h, n) for k, (h, n) in tally.items()}


# ---------------------------------------------------------------- correctness judging and storage


@dataclass(frozen=True)
class Correctness:
    """One item's correctness verdict against its SQL ground truth."""

    item_id: str
    group: str
    sql_template: str
    text_template: str
    correct: bool | None
    status: Status
    judge: str
    detail: str = ""
    call_key: str | None = None
    retrieved: tuple[str, ...] = ()
    true_docs: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunItem:
    """A stored item of a run that carries GRAMMAR metadata, with its ground truth."""

    item_id: str
    query: str
    response: str
    truth: str
    meta: dict[str, Any]


def grammar_items(db: str | Path, run: str) -> list[RunItem]:
    """The items of a stored run that carry GRAMMAR metadata (`grammar_group`)."""
    found = []
    for row in queries.sql.rows(queries.items.run_items(db, [run])):
        meta = json.loads(row.metadata)
        if META_GROUP in meta:
            truth = row.reference if isinstance(row.reference, str) else ""
            found.append(RunItem(row.item_id, row.query, row.response, truth, meta))
    return found


async def judge_items(items: Sequence[RunItem], judge: Judge) -> list[Correctness]:
    """Ask `judge` the Table 6 question for each item; generator failures are not judged."""

    async def one(it: RunItem) -> Correctness:
        base = Correctness(
            it.item_id,
            str(it.meta[META_GROUP]),
            str(it.meta.get(META_SQL_TEMPLATE, "")),
            str(it.meta.get(META_TEXT_TEMPLATE, "")),
            None,
            Status.ERROR,
            judge.name,
            retrieved=tuple(it.meta.get(META_RETRIEVED) or ()),
            true_docs=tuple(it.meta.get(META_TRUE_DOCS) or ()),
        )
        gen_status = it.meta.get(META_GENERATOR_STATUS, Status.OK.value)
        if gen_status != Status.OK.value:
            return replace(base, status=Status(gen_status), detail="the RAG generator failed; nothing to judge")
        if not it.truth:
            return replace(base, status=Status.NOT_APPLICABLE, detail="the item has no ground truth (reference)")
        answer = await judge.ask(
            "grammar_correctness", query=it.query, true_answer=it.truth, given_response=it.response
        )
        if answer.status is not Status.OK:
            return replace(
                base, status=answer.status, detail=answer.detail or (answer.raw or "")[:300], call_key=answer.call_key
            )
        return replace(
            base,
            correct=bool(answer.value),
            status=Status.OK,
            call_key=answer.call_key,
            detail=answer.detail or (answer.raw or "").strip()[:300],
        )

    return list(await asyncio.gather(*(one(it) for it in items)))


def write_correctness(db: str | Path, run: str, rows: Sequence[Correctness]) -> None:
    """Replace the run's rows of grammar_correctness with `rows`, in one transaction."""
    frame = pd.DataFrame(
        {
            "run_id": run,
            "item_id": [r.item_id for r in rows],
            "group_id": [r.group for r in rows],
            "sql_template": [r.sql_template for r in rows],
            "text_template": [r.text_template for r in rows],
            "correct": pd.array([r.correct for r in rows], dtype="boolean"),
            "status": [r.status.value for r in rows],
            "judge": [r.judge for r in rows],
            "detail": [r.detail for r in rows],
            "call_key": pd.array([r.call_key for r in rows], dtype="string"),
            "retrieved_doc_ids": [list(r.retrieved) for r in rows],
            "true_doc_ids": [list(r.true_docs) for r in rows],
            "retrieval_hit": pd.array(
                [retrieval_hit(Outcome("", "", "", None, r.retrieved, r.true_docs)) for r in rows], dtype="boolean"
            ),
            "created_at": pd.Timestamp.now(tz="UTC").tz_localize(None),
        }
    )
    writes.replace_grammar_correctness(db, run, frame)


# ---------------------------------------------------------------- reads (the Robustness page)


def group_counts(db: str | Path, run: str, cluster_by: str = "sql_template") -> list[GroupCount]:
    """Per (cluster, group) counts of a run, grouped in DuckDB."""
    frame = queries.grammar.grammar_group_counts(db, run, cluster_by)
    return [
        GroupCount(r.cluster, r.group_id, int(r.total), int(r.n_correct), int(r.unscored))
        for r in queries.sql.rows(frame)
    ]


def outcomes(
    db: str | Path, run: str, cluster_by: str = "sql_template", groups: Sequence[str] | None = None
) -> list[Outcome]:
    """Item-level outcomes of a run, optionally only for some groups."""
    if groups is not None and not groups:
        return []
    frame = queries.grammar.grammar_outcomes(db, run, cluster_by, groups)
    return [
        Outcome(
            r.item_id,
            r.cluster,
            r.group_id,
            None if pd.isna(r.correct) else bool(r.correct),
            tuple(r.retrieved_doc_ids),
            tuple(r.true_doc_ids),
        )
        for r in queries.sql.rows(frame)
    ]


@dataclass
class Report:
    """Everything the Robustness page and `grammar-eval` show for one run."""

    run: str
    cluster_by: str
    classes: dict[str, str]
    plain: dict[str, Figures]
    modular: dict[str, Figures]  # LM shortfalls credited: the retrieval module's view
    hits: dict[str, tuple[int, int]]
    blame: dict[str, str]
    non_robust: pd.DataFrame  # one row per item of a non-robust group

    def clusters(self) -> pd.DataFrame:
        """One row per cluster (ALL last) with the paper's figures."""
        rows = []
        for name, f in self.plain.items():
            m = self.modular[name]
            hits, known = self.hits.get(name, (0, 0))
            rows.append(
                {
                    "cluster": name,
                    "items": f.items,
                    "correct": f.correct,
                    "gap items": f.gap_items,
                    "lambda": f.lam,
                    "R": f.robustness,
                    "Acc": f.accuracy,
                    "R (retrieval)": m.robustness,
                    "Acc (retrieval)": m.accuracy,
                    "retrieval hit": hits / known if known else None,
                    "gap groups": f.groups[GAP],
                    "robust groups": f.groups[ROBUST],
                    "non-robust groups": f.groups[NON_ROBUST],
                    "unscored": f.unscored,
                }
            )
        return pd.DataFrame(rows)

    def attribution(self) -> dict[str, int]:
        """Wrong items of non-robust groups by blamed module."""
        counts = Counter(self.blame.values())
        return {k: counts.get(k, 0) for k in (LM, RETRIEVAL, UNKNOWN)}


def report(db: str | Path, run: str, cluster_by: str = "sql_template") -> Report:
    """Group types, R and Acc per cluster (plain and modular), retrieval hits, and blame, for a run."""
    counts = group_counts(db, run, cluster_by)
    classes = classify_groups(counts)
    nr_groups = sorted(g for g, k in classes.items() if k == NON_ROBUST)
    nr = outcomes(db, run, cluster_by, nr_groups)
    blame = context_comparison(nr, classes)
    credit = Counter((o.cluster, o.group) for o in nr if blame.get(o.item_id) == LM)
    modular = [replace(c, correct=c.correct + credit[(c.cluster, c.group)]) for c in counts]
    hits = queries.grammar.grammar_hits(db, run, cluster_by)
    hit_map = {r.cluster: (int(r.hits), int(r.known)) for r in queries.sql.rows(hits)}
    hit_map[ALL] = (sum(h for h, _ in hit_map.values()), sum(k for _, k in hit_map.values()))
    detail = queries.grammar.grammar_group_items(db, run, nr_groups)
    detail["attribution"] = [blame.get(i, "") for i in detail["item_id"]]
    return Report(run, cluster_by, classes, figures(counts, classes), figures(modular, classes), hit_map, blame, detail)


def report_text(rep: Report) -> str:
    """The report as aligned plain text for the terminal."""

    def f(x: float | None) -> str:
        return "   -" if x is None or x != x else f"{x:.2f}"  # None / NaN: nothing to score

    lines = [
        f"run {rep.run}, clusters by {rep.cluster_by}",
        f"{'cluster':<28} {'items':>5} {'corr':>5} {'gap':>5} {'lambda':>6} {'R':>5} {'Acc':>5} "
        f"{'R_ret':>5} {'Acc_ret':>7} {'hit':>5}  groups gap/robust/non-robust",
    ]
    for row in rep.clusters().to_dict("records"):
        lines.append(
            f"{row['cluster'][:28]:<28} {row['items']:>5} {row['correct']:>5} {row['gap items']:>5} "
            f"{f(row['lambda']):>6} {f(row['R']):>5} {f(row['Acc']):>5} {f(row['R (retrieval)']):>5} "
            f"{f(row['Acc (retrieval)']):>7} {f(row['retrieval hit']):>5}  "
            f"{row['gap groups']}/{row['robust groups']}/{row['non-robust groups']}"
            + (f"  ({row['unscored']} unscored)" if row["unscored"] else "")
        )
    a = rep.attribution()
    lines.append(
        f"context comparison over wrong items of non-robust groups: LM shortfall {a[LM]}, "
        f"possible retrieval failure {a[RETRIEVAL]}" + (f", unknown {a[UNKNOWN]}" if a[UNKNOWN] else "")
    )
    return "\n".join(lines)
