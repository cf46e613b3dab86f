"""Fault-injected items: does the Table-2 diagnosis stay quiet on clean items and name the injected fault?

Built the way THELMA's Appendix C builds its negatives, from WikiEval (../shared/datasets/wikieval)
and from our demo (data/demo): every row gives one clean item (the question, the right context,
the grounded answer) and one item per fault, each with the ONE Table-2 rule it should raise:

- T2.1 repeat: every answer sentence is followed by a rephrased copy (repetitive, still relevant);
- T2.2 no source: the sources are other rows' sources and the answer says it cannot answer;
- T2.3 extra sources: two other rows' sources are retrieved beside the right one;
- T2.4 part dropped: an essential part of the answer is cut (a question in several parts keeps
  the answer to its first part; a one-part question loses its direct answer);
- T2.5 extraneous: context sentences the question does not ask for are added to the answer,
  outnumbering its own sentences;
- T2.6 sources swapped: the sources are other rows' sources, the answer stays;
- X1 (ours, beyond Table 2) invented: the sources stay (retrieval covers the query) and the grounded
  answer gains made-up sentences whose numbers and names the sources lack.

The variants are built by code, deterministically (seeded per row), with the text helpers of
benchmarks/agreement.py, never by hand per row, and they borrow text only from rows of the same
split. The splits: development = WikiEval rows 0-19 plus the demo (tuning allowed), held out =
WikiEval rows 20-49 (measured, never tuned on).

Every item is scored by the engine through `runner.evaluate` into a DuckDB file (as the CLI does),
so any judge the runner accepts works; the Table-2 rules are then read by `fired` alone.

    python -m benchmarks.faults [--judge offline] [--split dev|held-out|all] [--db FILE]
                                [--rows 0-4,20-24] [--demo N] [--decompose-with TIER]

`--rows` and `--demo` keep a subset of the rows (for a slow judge); the items are built from the
whole split first, so a row's items are the same whichever subset is scored.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.agreement import (  # noqa: E402
    WIKIEVAL,
    RunCost,
    answer_bearing,
    drop_part,
    load_wikieval,
    paraphrase,
    run_label,
    sentences,
    words,
)
from data.demo_runs import load_corpus, load_queries  # noqa: E402
from evaluators.core.confidence import Band, parse_band  # noqa: E402
from evaluators.core.records import Item, Score  # noqa: E402
from evaluators.judges import factory
from evaluators.judges.cascade import parse_chain  # noqa: E402
from evaluators.metrics.diagnosis import RULES, diagnose  # noqa: E402
from evaluators.metrics.registry import THELMA  # noqa: E402
from evaluators.storage import queries  # noqa: E402

SEED = 10
DEV_ROWS, HELD_OUT_ROWS = range(0, 20), range(20, 50)
# What a generator says when its sources do not answer: one is chosen per row by the seeded draw.
NON_ANSWERS = (
    "The provided documents do not contain information to answer this question.",
    "I'm sorry, but I could not find the answer to this question in the sources I was given.",
    "The sources do not mention this, so I cannot answer the question.",
)
# What a generator that makes things up adds: filled with a year, a count and a person that the
# row's sources lack (INVENTED_NAMES are made up for this).
INVENTED = (
    "This was confirmed in {year} by an independent review led by {name}.",
    "About {number} percent of the people involved were surveyed by {name} in {year}.",
    "{name} has overseen it since {year}, with a yearly budget of {number} million euros.",
    "An expansion costing {number} million euros is planned for {year}, according to {name}.",
    "In {year}, {name} counted {number} complaints about it in a single month.",
    "A study by {name} in {year} found that it cut waiting times by {number} percent.",
)
INVENTED_NAMES = ("Ilse Marrowby", "Tomas Quennell", "Aveline Strood", "Kasimir Fellowes", "Odile Brackett",
                  "Bram Heskith", "Wren Talmadge", "Jorun Pellicott")
FAULTS = {  # fault name -> the Table-2 rule it should raise (X1 is ours, beyond the paper's table)
    "repeat": "T2.1", "no_source": "T2.2", "extra_sources": "T2.3",
    "part_dropped": "T2.4", "extraneous": "T2.5", "sources_swapped": "T2.6", "invented": "X1",
}
CLEAN = "clean"


@dataclass(frozen=True)
class Row:
    """One question with its right sources and grounded answer, from WikiEval or the demo."""

    name: str
    topic: str  # the article or document the sources come from: irrelevant sources come from other topics
    query: str
    sources: tuple[str, ...]
    answer: str
    nearby: tuple[str, ...] = ()  # same-topic text that was not retrieved: more true facts not asked for


@dataclass(frozen=True)
class Case:
    """One item to score: clean, or a fault with the rule it should raise (None for clean)."""

    split: str
    row: str
    fault: str
    expected: str | None
    item: Item


def wikieval_rows(rows: Sequence[dict[str, Any]], indices: range) -> list[Row]:
    """WikiEval rows as (question, context_v1, answer)."""
    return [Row(f"wikieval-{i}", rows[i]["source"], rows[i]["question_text"], tuple(s for s in rows[i]["context_v1"] if s.strip()),
                rows[i]["answer_text"]) for i in indices]


def demo_rows() -> list[Row]:
    """Demo queries with their annotated chunks and the joined grounded answers of their parts."""
    corpus = {c.id: c for c in load_corpus()}
    rows = []
    for q in load_queries():
        doc = corpus[q.gold[0]].doc
        nearby = tuple(c.text for c in corpus.values() if c.doc == doc and c.id not in q.gold)
        rows.append(Row(f"demo-{q.id}", doc, q.text, tuple(corpus[c].text for c in q.gold),
                        " ".join(p.answer for p in q.parts), nearby))
    return rows


def _extraneous(row: Row, k: int) -> list[str]:
    """Up to k sentences (6+ words, full sentences) of the context, then of the same-topic text
    nearby, that the answer was not written from, sharing the fewest words with the question and
    the answer: true, on topic, and not asked for."""
    asked = words(row.query) | words(row.answer)
    found: list[str] = []
    for text in ("\n\n".join(row.sources), "\n\n".join(row.nearby)):
        bearing = answer_bearing(text, row.answer)
        spare = [(len(words(s) & asked) / max(len(words(s)), 1), i, s) for i, s in enumerate(sentences(text))
                 if i not in bearing and len(s.split()) >= 6 and s.endswith((".", "!", "?"))]
        found += [s for _, _, s in sorted(spare)]
    return found[:k]


def _off_answer(row: Row) -> str | None:
    """An on-topic context sentence that does not answer the question: what is left of a
    one-sentence answer to a one-part question once its direct answer is dropped."""
    extra = _extraneous(row, 1)
    return extra[0] if extra else None


def _invented(row: Row, rng: random.Random) -> list[str]:
    """Made-up sentences for a row's answer: about half as many as it has (at least 2), each with a
    year, a count and a name that its sources lack, so none of them can be grounded."""
    text = "\n".join(row.sources)

    def absent(draw: Callable[[], object]) -> str:
        value = str(draw())
        while value in text:  # a number inside a longer one counts as present too: drawn again
            value = str(draw())
        return value

    k = min(len(INVENTED), max(2, (len(sentences(row.answer)) + 1) // 2 + 1))
    return [t.format(year=absent(lambda: rng.randint(1961, 2009)), number=absent(lambda: rng.randint(12, 97)),
                     name=absent(lambda: rng.choice(INVENTED_NAMES))) for t in rng.sample(INVENTED, k)]


def variants(row: Row, others: Sequence[Row], rng: random.Random) -> dict[str, tuple[tuple[str, ...], str]]:
    """{fault: (sources, response)} for one row: clean first, then every fault that can be built.

    `others` are rows of the same split whose sources serve as irrelevant ones."""
    foreign = [s for o in others for s in o.sources]
    swapped = tuple(rng.sample(foreign, min(len(row.sources), len(foreign))))
    out: dict[str, tuple[tuple[str, ...], str]] = {CLEAN: (row.sources, row.answer)}
    out["repeat"] = (row.sources, " ".join(f"{s} {paraphrase(s)}" for s in sentences(row.answer)))
    out["no_source"] = (swapped, rng.choice(NON_ANSWERS))
    extra = [s for s in foreign if s not in row.sources]
    out["extra_sources"] = (row.sources + tuple(rng.sample(extra, 2)), row.answer)
    shorter = drop_part(row.query, row.answer) or _off_answer(row)
    if shorter:
        out["part_dropped"] = (row.sources, shorter)
    added = _extraneous(row, len(sentences(row.answer)) + 1)
    if len(added) > len(sentences(row.answer)):  # the extraneous facts must outnumber the answer's
        out["extraneous"] = (row.sources, f"{row.answer} {' '.join(added)}")
    out["sources_swapped"] = (swapped, row.answer)
    out["invented"] = (row.sources, f"{row.answer} {' '.join(_invented(row, rng))}")
    return out


def build_cases(split: str, rows: Sequence[Row]) -> list[Case]:
    """The clean and fault items of a split; irrelevant sources come from the next three rows
    (from three rows on) about another topic."""
    cases: list[Case] = []
    for k, row in enumerate(rows):
        rng = random.Random(f"{SEED}:{row.name}")
        later = [rows[(k + d) % len(rows)] for d in range(3, len(rows))]
        others = [o for o in later if o.topic != row.topic and not set(o.sources) & set(row.sources)][:3]
        for fault, (sources, response) in variants(row, others, rng).items():
            item = Item(Item.content_id(row.query, sources, response), row.query, sources, response,
                        metadata={"split": split, "row": row.name, "fault": fault})
            cases.append(Case(split, row.name, fault, FAULTS.get(fault), item))
    return cases


def splits(rows: set[int] | None = None, demo: int | None = None) -> dict[str, list[Case]]:
    """Development (WikiEval rows 0-19 and the demo) and held-out (WikiEval rows 20-49) cases.

    The demo forms its own pool of irrelevant sources, so no WikiEval text lands in a demo item.
    `rows` keeps only those WikiEval rows and `demo` only the first that many demo queries (None: all);
    the cases are built from whole splits first, so a kept row's items do not depend on the subset.
    """
    wiki = load_wikieval()
    demo_kept = {r.name for r in demo_rows()[:demo]}
    out = {"dev": build_cases("dev", wikieval_rows(wiki, DEV_ROWS)) + build_cases("dev", demo_rows()),
           "held-out": build_cases("held-out", wikieval_rows(wiki, HELD_OUT_ROWS))}
    return {name: [c for c in cases if c.row in demo_kept
                   or (c.row.startswith("wikieval-") and (rows is None or int(c.row.split("-")[1]) in rows))]
            for name, cases in out.items()}


def parse_rows(text: str) -> set[int]:
    """WikiEval row numbers from '0-4,20-24,31' (ranges inclusive); ValueError on anything else."""
    rows: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"rows must be like 0-4,20-24,31, got {text!r}")
        rows |= set(range(int(lo), int(hi if dash else lo) + 1))
    return rows


# ---------------------------------------------------------------- scoring and the rules

def score(cases: Sequence[Case], judge: str, db: Path, api_base: str | None = None,
          concurrency: int = 8, band: Band | None = None, decompose_with: str | None = None,
          cost: RunCost | None = None) -> dict[str, dict[str, Score | None]]:
    """{item id: {metric: Score with its counts, or None}} from one engine run over the cases' items,
    read at `band` (None: each judge kind's default) as the dashboard reads them.

    A cascade escalates at each tier's default band whatever `band` is read at. `cost` adds up the
    run's time and verdicts by tier."""
    items = list({c.item.id: c.item for c in cases}.values())
    run = f"{run_label(judge, decompose_with)}/faults"
    options = {"decompose_with": decompose_with} if decompose_with else {}
    (cost if cost is not None else RunCost()).evaluate(items, db, run, judge, api_base=api_base, metrics=THELMA,
                                                       concurrency=concurrency, **options)
    wide = queries.runs.run_scores_wide(db, run, list(THELMA), queries.sql.scores_sql(band))
    return {r["item_id"]: {m: queries.diagnosis.wide_score(r, m) for m in THELMA} for r in wide.to_dict("records")}


def fired(scores: Mapping[str, Score | None]) -> set[str]:
    """The Table-2 rules one item's scores raise, quiet where the judge is unsure: the only place this
    benchmark reads the rules."""
    return {rule.id for rule in diagnose(scores)}


def named_target(judge: str) -> float:
    """Issue 10's target share of named faults: 70% for one judge, 90% for a cascade (offline>local)."""
    return 0.9 if len(parse_chain(judge)) > 1 else 0.7


def report(name: str, cases: Sequence[Case], scores: Mapping[str, Mapping[str, Score | None]],
           verbose: bool = False, target: float = 0.7) -> str:
    """The figures of one split: quiet clean items, named faults, false alarms per rule, hits per fault."""
    clean = [c for c in cases if c.expected is None]
    faulty = [c for c in cases if c.expected is not None]
    rules = {c.item.id: fired(scores.get(c.item.id, {})) for c in cases}
    quiet = sum(not rules[c.item.id] for c in clean)
    named = sum(c.expected in rules[c.item.id] for c in faulty)
    alarms = Counter(r for c in clean for r in rules[c.item.id])
    lines = [f"## {name}: {len(clean)} clean items, {len(faulty)} fault items",
             f"clean items with no rule fired: {quiet}/{len(clean)} = {quiet / max(len(clean), 1):.0%} (target >= 80%)",
             f"fault items whose expected rule fired: {named}/{len(faulty)} = {named / max(len(faulty), 1):.0%} "
             f"(target >= {target:.0%})",
             "false alarms on clean items, per rule: "
             + (", ".join(f"{r} {alarms[r]}" for r in RULES if alarms[r]) or "none"),
             "hit rate per fault:"]
    for fault, rule in FAULTS.items():
        these = [c for c in faulty if c.fault == fault]
        hits = sum(rule in rules[c.item.id] for c in these)
        also = Counter(r for c in these for r in rules[c.item.id] if r != rule)
        lines.append(f"  {fault:<16} {rule}  {hits:>3}/{len(these):<3} = {hits / max(len(these), 1):4.0%}"
                     + (f"   other rules: {', '.join(f'{r} {n}' for r, n in sorted(also.items()))}" if also else ""))
    if verbose:
        lines.append("misses (row, fault, rules fired, scores):")
        for c in cases:
            got = rules[c.item.id]
            if (c.expected is None and got) or (c.expected is not None and c.expected not in got):
                shown = " ".join(f"{m}={v.value:.2f}" if v is not None and v.value is not None else f"{m}=-"
                                 for m, v in sorted(scores.get(c.item.id, {}).items()))
                lines.append(f"  {c.row} {c.fault}: {sorted(got) or 'none'}  {shown}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--judge", default=factory.OFFLINE, help="offline, local, or a litellm model (default offline)")
    p.add_argument("--api-base", default=None, help="base URL for a litellm judge")
    p.add_argument("--split", choices=("dev", "held-out", "all"), default="all")
    p.add_argument("--db", type=Path, help="DuckDB file for the run and the judge cache (default: a temporary file)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--band", type=parse_band, default=None,
                   help="uncertainty band LO,HI to read the verdicts at (default: each judge kind's own)")
    p.add_argument("--verbose", action="store_true", help="list every clean item with a rule and every missed fault")
    p.add_argument("--rows", type=parse_rows, default=None,
                   help="WikiEval rows to keep, e.g. 0-4,20-24 (default all; rows 0-19 are dev, 20-49 held out)")
    p.add_argument("--demo", type=int, default=None, help="keep the first N demo queries (default all; 0 none)")
    p.add_argument("--decompose-with", default=None, metavar="TIER",
                   help="the tier of a judge chain that decomposes, e.g. offline for --judge 'offline>local' "
                        "(default: the last)")
    args = p.parse_args(argv)
    if not WIKIEVAL.exists():
        print(f"error: {WIKIEVAL} not found (the shared datasets folder beside the checkout)", file=sys.stderr)
        return 2
    chosen = {name: cases for name, cases in splits(args.rows, args.demo).items()
              if args.split in (name, "all") and cases}
    cost = RunCost()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "faults.duckdb"
        scores = score([c for cs in chosen.values() for c in cs], args.judge, db, args.api_base, args.concurrency,
                       args.band, args.decompose_with, cost)
    labels = {"dev": "development (WikiEval rows 0-19 + demo)", "held-out": "held out (WikiEval rows 20-49)"}
    subset = "" if args.rows is None and args.demo is None else (
        f", WikiEval rows {'all' if args.rows is None else _ranges(args.rows)}"
        + (f", demo queries {'all' if args.demo is None else args.demo}" if "dev" in chosen else ""))
    print(f"# Table-2 diagnosis on fault-injected items, judge {args.judge}"
          + (f" (decomposing with {args.decompose_with})" if args.decompose_with else "")
          + f", band {'default per judge kind' if args.band is None else args.band}{subset}\n")
    print("\n\n".join(report(labels[name], cases, scores, args.verbose, named_target(args.judge)) for name, cases in chosen.items()))
    print(f"\n{cost.text()}")
    return 0


def _ranges(rows: set[int]) -> str:
    """'0-4,20-24' for a set of row numbers."""
    runs: list[list[int]] = []
    for r in sorted(rows):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


if __name__ == "__main__":
    raise SystemExit(main())
