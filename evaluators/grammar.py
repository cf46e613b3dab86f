"""GRAMMAR (Li, Liu, Gao 2024) on DuckDB: correctness, robustness groups, R and Acc, module blame.

The GRAMMAR code is split in three modules:
- `grammar_gen`: the paper's Algorithm 1, SQL and text templates to a test set with SQL ground truth;
- `grammar_rag`: the demo domain in data/grammar/ and a reference RAG pipeline to test;
- this module: correctness against the ground truth, gap / robust / non-robust groups, robustness
  R = correct / (total - items in gap groups) and Acc = R x (1 - lambda), the paper's "context
  comparison", the `grammar_correctness` table, the Robustness page's read model, and the CLI.

All arithmetic is in pure functions over `GroupCount` and `Outcome` lists; judges and DuckDB are
only touched by `evaluate_correctness` and the read functions.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from evaluators import prompts, store
from evaluators.judge import Answer
from evaluators.offline import HANDLERS
from evaluators.records import JudgeCall, Status

# Item metadata written by the generator and the pipeline (plain keys, so the dashboard's
# metadata filters can use them).
META_GROUP = "grammar_group"
META_SQL_TEMPLATE = "grammar_sql_template"
META_TEXT_TEMPLATE = "grammar_text_template"
META_SQL = "grammar_sql"
META_TRUE_DOCS = "true_doc_ids"
META_RETRIEVED = "retrieved_doc_ids"
META_GENERATOR_STATUS = "generator_status"

GAP, ROBUST, NON_ROBUST = "gap", "robust", "non_robust"
LM, RETRIEVAL, UNKNOWN = "lm", "retrieval", "unknown"
ALL = "(all)"
CLUSTER_BY = ("sql_template", "text_template")


# ---------------------------------------------------------------- prompts and their parsers

_OUTPUT_BODY = re.compile(r"<output>(.*?)(?:</output>|$)", re.S | re.I)


def _reply_body(reply: str) -> str:
    match = _OUTPUT_BODY.search(reply)
    return (match.group(1) if match else reply).strip()


def parse_correctness(reply: str) -> int:
    """Table 6's verdict: "Correct" is 1, "Incorrect" is 0; both or neither is unparseable."""
    words = set(re.findall(r"[a-z]+", _reply_body(reply).lower()))
    if ("correct" in words) == ("incorrect" in words):
        raise prompts.ParseError(f"expected Correct or Incorrect, got {reply[:60]!r}")
    return int("correct" in words)


def parse_answer(reply: str) -> str:
    """A free-text answer inside <output>; an empty one is re-asked."""
    match = _OUTPUT_BODY.search(reply)
    if not match or not match.group(1).strip():
        raise prompts.ParseError("no answer inside <output>")
    return match.group(1).strip()


# The judge looks parsers up by prompt name; these prompts belong to GRAMMAR.
prompts.PARSERS.update({
    "grammar_sql_templates": prompts.parse_list,
    "grammar_text_templates": prompts.parse_list,
    "grammar_correctness": parse_correctness,
    "grammar_rag_answer": parse_answer,
})


# ---------------------------------------------------------------- offline correctness: normalised match

_MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1)}
_MONTH = r"(" + "|".join(sorted({*_MONTHS, *(m[:3] for m in _MONTHS), "sept"}, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = [  # (pattern, (year, month, day) group order)
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), (1, 2, 3)),
    (re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+(\d{{4}})\b"), (3, 2, 1)),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+(\d{{4}})\b"), (3, 1, 2)),
]
_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)*")


def _iso_dates(text: str) -> str:
    """Rewrite recognised dates ("14 March 2022", "March 14th, 2022", "2022-03-14") as one token."""
    def token(order: tuple[int, int, int]) -> Callable[[re.Match[str]], str]:
        def sub(m: re.Match[str]) -> str:
            y, mo, d = (m.group(i) for i in order)
            month = int(mo) if mo.isdigit() else _MONTHS.get(mo, 0) or next(
                i for n, i in _MONTHS.items() if n.startswith(mo[:3]))
            try:
                return f" d{date(int(y), month, int(d)):%Y%m%d} "
            except ValueError:
                return m.group(0)
        return sub

    text = text.lower()
    for pattern, order in _DATES:
        text = pattern.sub(token(order), text)
    return text


def normalise(text: str) -> list[str]:
    """Lower-case word tokens with punctuation dropped and dates in one canonical form."""
    return _TOKEN.findall(_iso_dates(text))


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def answer_match(truth: str, response: str) -> tuple[bool, str]:
    """The offline correctness check: every comma-separated part of the truth appears in the response.

    Both sides are normalised (case, punctuation, date formats), and each part must occur as a
    contiguous token sequence, so "Cork, Ireland" is matched by "in Cork (Ireland)" but not by "Cork".
    """
    said = normalise(response)
    parts = [normalise(p) for p in _iso_dates(truth).split(",")]
    parts = [p for p in parts if p]
    if not parts:
        return False, "the ground truth is empty"
    missing = [" ".join(p) for p in parts if not _contains(said, p)]
    if missing:
        return False, f"not in the response: {', '.join(repr(m) for m in missing)}"
    return True, f"found: {', '.join(repr(' '.join(p)) for p in parts)}"


def _offline_correctness(query: str, true_answer: str, given_response: str) -> Answer:
    correct, why = answer_match(true_answer, given_response)
    return Answer(int(correct), Status.OK, detail=f"normalised match: {why}")


HANDLERS["grammar_correctness"] = _offline_correctness


# ---------------------------------------------------------------- pure robustness math

@dataclass(frozen=True)
class GroupCount:
    """Items of one semantic group within one cluster: judged, correct, and not judgeable."""

    cluster: str
    group: str
    total: int        # items with a verdict (correct or not)
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
    return {g: GAP if k == 0 else ROBUST if k == n else NON_ROBUST
            for g, (n, k) in totals.items() if n > 0}


@dataclass(frozen=True)
class Figures:
    """A cluster's counts and the paper's metrics derived from them."""

    cluster: str
    items: int        # judged items
    correct: int
    gap_items: int    # judged items in gap groups
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
        groups={k: kinds.get(k, 0) for k in (GAP, ROBUST, NON_ROBUST)})


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
class _RunItem:
    item_id: str
    query: str
    response: str
    truth: str
    meta: dict[str, Any]


def _grammar_items(db: str | Path, run: str) -> list[_RunItem]:
    frame = store.query(db, "SELECT item_id, query, response, reference, metadata FROM items "
                            "WHERE run_id = ? ORDER BY item_id", [run])
    found = []
    for row in frame.itertuples(index=False):
        meta = json.loads(row.metadata)
        if META_GROUP in meta:
            truth = row.reference if isinstance(row.reference, str) else ""
            found.append(_RunItem(row.item_id, row.query, row.response, truth, meta))
    return found


async def judge_items(items: Sequence[_RunItem], judge: Any) -> list[Correctness]:
    """Ask `judge` the Table 6 question for each item; generator failures are not judged."""
    async def one(it: _RunItem) -> Correctness:
        base = Correctness(
            it.item_id, str(it.meta[META_GROUP]), str(it.meta.get(META_SQL_TEMPLATE, "")),
            str(it.meta.get(META_TEXT_TEMPLATE, "")), None, Status.ERROR, judge.name,
            retrieved=tuple(it.meta.get(META_RETRIEVED) or ()), true_docs=tuple(it.meta.get(META_TRUE_DOCS) or ()))
        gen_status = it.meta.get(META_GENERATOR_STATUS, Status.OK.value)
        if gen_status != Status.OK.value:
            return replace(base, status=Status(gen_status), detail="the RAG generator failed; nothing to judge")
        if not it.truth:
            return replace(base, status=Status.NOT_APPLICABLE, detail="the item has no ground truth (reference)")
        answer = await judge.ask("grammar_correctness", query=it.query, true_answer=it.truth,
                                 given_response=it.response)
        if answer.status is not Status.OK:
            return replace(base, status=answer.status, detail=answer.detail or (answer.raw or "")[:300],
                           call_key=answer.call_key)
        return replace(base, correct=bool(answer.value), status=Status.OK, call_key=answer.call_key,
                       detail=answer.detail or (answer.raw or "").strip()[:300])

    return list(await asyncio.gather(*(one(it) for it in items)))


def write_correctness(db: str | Path, run: str, rows: Sequence[Correctness]) -> None:
    """Replace the run's rows of grammar_correctness with `rows`, in one transaction."""
    frame = pd.DataFrame({
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
        "retrieval_hit": pd.array([retrieval_hit(Outcome("", "", "", None, r.retrieved, r.true_docs))
                                   for r in rows], dtype="boolean"),
        "created_at": pd.Timestamp.now(tz="UTC").tz_localize(None),
    })
    store.migrate(db)
    with store.connect(db) as con:
        con.execute("BEGIN")
        try:
            con.execute("DELETE FROM grammar_correctness WHERE run_id = ?", [run])
            if rows:
                con.register("_grammar_batch", frame)
                con.execute("INSERT INTO grammar_correctness BY NAME SELECT * FROM _grammar_batch")
                con.unregister("_grammar_batch")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


async def open_judge(stack: AsyncExitStack, spec: str, db: str | Path | None, calls: list[JudgeCall],
                     api_base: str | None = None, concurrency: int = 8, timeout: float = 60.0) -> Any:
    """A judge for `spec` (offline, local, or a litellm model) that answers from the cache of `db`
    (when given) and appends every new call to `calls`."""
    from evaluators import runner

    cache = store.load_cache(db, runner.judge_name(spec)) if db and spec != runner.OFFLINE else {}
    judge, _ = await runner.open_judge(stack, spec, api_base, concurrency, timeout, cache, calls.append)
    return judge


@dataclass
class CorrectnessSummary:
    """What `evaluate_correctness` did: items judged, correct, and failures by status."""

    run: str
    judge: str
    items: int
    skipped: int  # run items without GRAMMAR metadata
    correct: int
    statuses: dict[str, int]

    def text(self) -> str:
        fails = ", ".join(f"{s} {n}" for s, n in sorted(self.statuses.items()) if s != Status.OK.value)
        return (f"correctness of run {self.run} by {self.judge}: {self.correct} correct of "
                f"{self.statuses.get(Status.OK.value, 0)} judged, {self.items} items"
                + (f" ({fails})" if fails else "")
                + (f"; {self.skipped} items without GRAMMAR metadata skipped" if self.skipped else ""))


def evaluate_correctness(db: str | Path, run: str, judge: str = "offline", api_base: str | None = None,
                         concurrency: int = 8, timeout: float = 60.0) -> CorrectnessSummary:
    """Judge every GRAMMAR item of a stored run against its ground truth and store the verdicts.

    Items need `grammar_group` in their metadata and the ground truth as `reference`. Judge calls
    are stored in judge_calls (so reruns are answered from the cache).
    """
    total = int(store.query(db, "SELECT count(*) AS n FROM items WHERE run_id = ?", [run])["n"].iloc[0])
    items = _grammar_items(db, run)
    if not items:
        raise ValueError(f"run {run!r} has no items with GRAMMAR metadata ({META_GROUP}); "
                         "create them with grammar-run or from a grammar-generate test set")

    async def go() -> tuple[list[Correctness], list[JudgeCall], str]:
        calls: list[JudgeCall] = []
        async with AsyncExitStack() as stack:
            judge_obj = await open_judge(stack, judge, db, calls, api_base, concurrency, timeout)
            return await judge_items(items, judge_obj), calls, judge_obj.name

    rows, calls, name = asyncio.run(go())
    if calls:
        store.write_batch(db, run, calls=calls)
    write_correctness(db, run, rows)
    statuses = Counter(r.status.value for r in rows)
    return CorrectnessSummary(run, name, len(rows), total - len(items), sum(bool(r.correct) for r in rows),
                              dict(statuses))


# ---------------------------------------------------------------- reads (the Robustness page)

def _has_table(db: str | Path) -> bool:
    frame = store.query(db, "SELECT count(*) AS n FROM information_schema.tables "
                            "WHERE table_name = 'grammar_correctness'")
    return bool(frame["n"].iloc[0])


def grammar_runs(db: str | Path) -> list[str]:
    """Runs with stored GRAMMAR correctness, newest first."""
    if not Path(db).exists() or not _has_table(db):
        return []
    frame = store.query(db, """SELECT run_id, max(created_at) AS latest FROM grammar_correctness
                               GROUP BY run_id ORDER BY latest DESC, run_id""")
    return list(frame["run_id"])


def _cluster_column(cluster_by: str) -> str:
    if cluster_by not in CLUSTER_BY:
        raise ValueError(f"cluster_by must be one of {', '.join(CLUSTER_BY)}, not {cluster_by!r}")
    return cluster_by


def group_counts(db: str | Path, run: str, cluster_by: str = "sql_template") -> list[GroupCount]:
    """Per (cluster, group) counts of a run, grouped in DuckDB."""
    col = _cluster_column(cluster_by)
    frame = store.query(db, f"""
        SELECT {col} AS cluster, group_id,
               count(correct) AS total, count(*) FILTER (WHERE correct) AS n_correct,
               count(*) FILTER (WHERE correct IS NULL) AS unscored
        FROM grammar_correctness WHERE run_id = ? GROUP BY ALL ORDER BY ALL""", [run])
    return [GroupCount(r.cluster, r.group_id, int(r.total), int(r.n_correct), int(r.unscored))
            for r in frame.itertuples(index=False)]


def outcomes(db: str | Path, run: str, cluster_by: str = "sql_template",
             groups: Sequence[str] | None = None) -> list[Outcome]:
    """Item-level outcomes of a run, optionally only for some groups."""
    col = _cluster_column(cluster_by)
    where, params = "run_id = ?", [run]
    if groups is not None:
        if not groups:
            return []
        where += f" AND group_id IN ({', '.join('?' for _ in groups)})"
        params += list(groups)
    frame = store.query(db, f"""SELECT item_id, {col} AS cluster, group_id, correct, retrieved_doc_ids,
                                       true_doc_ids FROM grammar_correctness WHERE {where} ORDER BY item_id""", params)
    return [Outcome(r.item_id, r.cluster, r.group_id, None if pd.isna(r.correct) else bool(r.correct),
                    tuple(r.retrieved_doc_ids), tuple(r.true_doc_ids)) for r in frame.itertuples(index=False)]


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
    non_robust: pd.DataFrame      # one row per item of a non-robust group

    def clusters(self) -> pd.DataFrame:
        """One row per cluster (ALL last) with the paper's figures."""
        rows = []
        for name, f in self.plain.items():
            m = self.modular[name]
            hits, known = self.hits.get(name, (0, 0))
            rows.append({
                "cluster": name, "items": f.items, "correct": f.correct, "gap items": f.gap_items,
                "lambda": f.lam, "R": f.robustness, "Acc": f.accuracy,
                "R (retrieval)": m.robustness, "Acc (retrieval)": m.accuracy,
                "retrieval hit": hits / known if known else None,
                "gap groups": f.groups[GAP], "robust groups": f.groups[ROBUST],
                "non-robust groups": f.groups[NON_ROBUST], "unscored": f.unscored})
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
    hits = store.query(db, f"""
        SELECT {_cluster_column(cluster_by)} AS cluster, count(*) FILTER (WHERE retrieval_hit) AS hits,
               count(retrieval_hit) AS known
        FROM grammar_correctness WHERE run_id = ? GROUP BY ALL""", [run])
    hit_map = {r.cluster: (int(r.hits), int(r.known)) for r in hits.itertuples(index=False)}
    hit_map[ALL] = (sum(h for h, _ in hit_map.values()), sum(k for _, k in hit_map.values()))
    detail = store.query(db, f"""
        SELECT g.group_id, g.sql_template, g.text_template, g.item_id, i.query, i.response, i.reference AS truth,
               g.correct, g.status, g.detail, g.retrieved_doc_ids, g.true_doc_ids, g.retrieval_hit
        FROM grammar_correctness g JOIN items i ON i.run_id = g.run_id AND i.item_id = g.item_id
        WHERE g.run_id = ? AND g.group_id IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY g.group_id, g.text_template, g.item_id""", [run, nr_groups])
    detail["attribution"] = [blame.get(i, "") for i in detail["item_id"]]
    return Report(run, cluster_by, classes, figures(counts, classes), figures(modular, classes),
                  hit_map, blame, detail)


def report_text(rep: Report) -> str:
    """The report as aligned plain text for the terminal."""
    def f(x: float | None) -> str:
        return "   -" if x is None or x != x else f"{x:.2f}"  # None / NaN: nothing to score

    lines = [f"run {rep.run}, clusters by {rep.cluster_by}",
             f"{'cluster':<28} {'items':>5} {'corr':>5} {'gap':>5} {'lambda':>6} {'R':>5} {'Acc':>5} "
             f"{'R_ret':>5} {'Acc_ret':>7} {'hit':>5}  groups gap/robust/non-robust"]
    for row in rep.clusters().to_dict("records"):
        lines.append(
            f"{row['cluster'][:28]:<28} {row['items']:>5} {row['correct']:>5} {row['gap items']:>5} "
            f"{f(row['lambda']):>6} {f(row['R']):>5} {f(row['Acc']):>5} {f(row['R (retrieval)']):>5} "
            f"{f(row['Acc (retrieval)']):>7} {f(row['retrieval hit']):>5}  "
            f"{row['gap groups']}/{row['robust groups']}/{row['non-robust groups']}"
            + (f"  ({row['unscored']} unscored)" if row["unscored"] else ""))
    a = rep.attribution()
    lines.append(f"context comparison over wrong items of non-robust groups: LM shortfall {a[LM]}, "
                 f"possible retrieval failure {a[RETRIEVAL]}" + (f", unknown {a[UNKNOWN]}" if a[UNKNOWN] else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------- CLI

def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_commands(subparsers: Any) -> None:
    """Register grammar-generate, grammar-run, grammar-eval and grammar-demo; each sets `handler`."""
    from evaluators import grammar_gen as gen
    from evaluators import grammar_rag as rag

    g = subparsers.add_parser("grammar-generate", help="GRAMMAR: generate a test set with SQL ground truth")
    g.add_argument("--source", default=str(rag.COMPANY_SQL), help="DuckDB file or .sql script with the domain data")
    g.add_argument("--templates", default=None,
                   help=f"templates JSON (default {rag.TEMPLATES} for the demo source; none with --from-schema)")
    g.add_argument("--out", required=True, help="test set to write (JSONL: id, query, reference, metadata)")
    g.add_argument("--from-schema", action="store_true", help="ask --judge for SQL templates from the schema")
    g.add_argument("--requirements", default="", help="extra requirements for generated SQL templates")
    g.add_argument("--text-variants", type=_positive, default=3,
                   help="text templates to ask for per SQL template that has none (default 3)")
    g.add_argument("--criteria", default="", help="linguistic criteria for generated text templates")
    g.add_argument("--judge", default=None, help="litellm model (or 'local') that writes missing templates")
    g.add_argument("--api-base", default=None)
    g.add_argument("--save-templates", default=None, help="write the templates used (with generated ones) here")
    g.add_argument("--per-group", type=_positive, default=None,
                   help="stratified sampling: exactly this many text variants per semantic group")
    g.add_argument("--max-groups", type=_positive, default=None, help="at most this many groups per SQL template")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(handler=gen.cli_generate)

    r = subparsers.add_parser("grammar-run", help="GRAMMAR: answer a test set with the reference RAG pipeline")
    r.add_argument("testset", help="JSONL from grammar-generate")
    r.add_argument("--db", required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--corpus", default=str(rag.CORPUS), help="documents JSONL (id, title, text)")
    r.add_argument("--retriever", choices=("bm25", "dense"), default="bm25")
    r.add_argument("--top-k", type=_positive, default=1)
    r.add_argument("--generator", default="offline", help="offline (extractive) or a litellm model")
    r.add_argument("--judge", default="offline", help="judge for the THELMA metrics")
    r.add_argument("--correctness-judge", default="offline", help="judge for correctness (Table 6 prompt)")
    r.add_argument("--api-base", default=None)
    r.add_argument("--metrics", default=None, help="THELMA metric ids (default all)")
    r.add_argument("--concurrency", type=_positive, default=8)
    r.set_defaults(handler=rag.cli_run)

    e = subparsers.add_parser("grammar-eval", help="GRAMMAR: correctness, robustness groups, R and Acc of a run")
    e.add_argument("--db", required=True)
    e.add_argument("--run", required=True)
    e.add_argument("--judge", default="offline", help="offline (normalised match), local, or a litellm model")
    e.add_argument("--api-base", default=None)
    e.add_argument("--cluster-by", choices=CLUSTER_BY, default="sql_template")
    e.add_argument("--no-judge", action="store_true", help="report from the stored correctness only")
    e.add_argument("--concurrency", type=_positive, default=8)
    e.set_defaults(handler=cli_eval)

    d = subparsers.add_parser("grammar-demo", help="GRAMMAR: build the offline demo runs into a database")
    d.add_argument("--db", required=True)
    d.add_argument("--retrievers", default="bm25,dense")
    d.add_argument("--max-groups", type=_positive, default=None, help="at most this many groups per SQL template")
    d.add_argument("--metrics", default=None, help="THELMA metric ids (default all)")
    d.set_defaults(handler=rag.cli_demo)


def cli_eval(args: argparse.Namespace) -> int:
    """grammar-eval: judge correctness (unless --no-judge) and print the robustness report."""
    from evaluators.judge import JudgeFatal

    if not Path(args.db).exists():
        return _fail(f"{args.db}: no such database file")
    try:
        if not args.no_judge:
            print(evaluate_correctness(args.db, args.run, args.judge, args.api_base, args.concurrency).text())
        elif args.run not in grammar_runs(args.db):
            return _fail(f"run {args.run!r} has no stored GRAMMAR correctness; run grammar-eval without --no-judge")
        print(report_text(report(args.db, args.run, args.cluster_by)))
    except JudgeFatal as exc:
        return _fail(str(exc), 3)
    except ValueError as exc:
        return _fail(str(exc))
    return 0
