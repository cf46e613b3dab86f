"""Why verdicts flipped between two runs of the same items: attribution (pure, `attribute`) over rows
read by queries.compare.flip_rows() and queries.items.item_inputs() (`between` reads them).

A flip is a claim (RP, GR), sub-question (SQC, RQC) or source (SP1) whose confident verdict changed
between the runs. Its cause is read from the item's inputs, not from the judge:
- the retrieved sources changed (other texts, or the same in another order): the retriever or the chunking;
- the sources stayed the same and the response changed: the prompt or the generator;
- neither changed: the judge (noise, or another judge or prompt).
Components are matched by normalised text in SQL (claims are decomposed per run, so the same claim
can sit at another index); what is left unmatched is matched here by word overlap. A verdict that is
unsure or failed in either run is no flip: it is counted apart, as are components found in one run only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, cast

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.metrics import ledger
from evaluators.storage import queries, store

SOURCES, RESPONSE, JUDGE = "retriever or chunking", "prompt or generator", "judge"
CAUSES = (SOURCES, RESPONSE, JUDGE)
UNDECIDED, UNMATCHED, SAME = "unsure or failed", "in one run only", "unchanged"
# Two leftover components are the same one when at least this share of their words is shared (Jaccard).
MIN_OVERLAP = 0.5
WHAT = {"claim": "claim", "subquestion": "sub-question", "source": "source"}

_WORD = re.compile(r"\w+")


def _plain(text: str) -> str:
    return " ".join(text.split())


def _words(text: Any) -> set[str]:
    return set(_WORD.findall(str(text).lower())) if isinstance(text, str) else set()


def cause(sources_a: Sequence[str], sources_b: Sequence[str], response_a: str, response_b: str) -> str:
    """The cause of an item's flips from its inputs in the two runs (whitespace differences ignored)."""
    if [_plain(s) for s in sources_a] != [_plain(s) for s in sources_b]:
        return SOURCES
    if _plain(response_a) != _plain(response_b):
        return RESPONSE
    return JUDGE


def _pair_leftovers(rows: pd.DataFrame) -> pd.DataFrame:
    """Match the components found in one run only with those of the other run, per item and metric,
    by word overlap (best pairs first); a pair becomes one row with both sides."""
    sides = ["idx", "text", "value", "state", "p"]
    only_a = rows[rows["idx_b"].isna() & rows["idx_a"].notna()]
    only_b = rows[rows["idx_a"].isna() & rows["idx_b"].notna()]
    if only_a.empty or only_b.empty:
        return rows
    merged, used = [], set()
    for (item, metric), group_a in only_a.groupby(["item_id", "metric"], sort=False):
        group_b = only_b[(only_b["item_id"] == item) & (only_b["metric"] == metric)]
        scored = []
        for ia, ra in group_a.iterrows():
            for ib, rb in group_b.iterrows():
                wa, wb = _words(ra["text_a"]), _words(rb["text_b"])
                overlap = len(wa & wb) / len(wa | wb) if wa | wb else 0.0
                if overlap >= MIN_OVERLAP:
                    scored.append((overlap, ia, ib))
        for _, ia, ib in sorted(scored, key=lambda s: (-s[0], s[1], s[2])):
            if ia in used or ib in used:
                continue
            used |= {ia, ib}
            row: Any = rows.loc[cast(int, ia)].copy()
            for col in sides:
                row[f"{col}_b"] = rows.loc[cast(int, ib), f"{col}_b"]
            merged.append(row)
    if not merged:
        return rows
    return pd.concat([rows.drop(index=list(used)), pd.DataFrame(merged)]).reset_index(drop=True)


@dataclass(frozen=True)
class Flips:
    """The attribution of two runs' flips.

    components: one row per flip: item_id, metric, what (claim, sub-question, source), text, before,
      after (1 or 0), p_before, p_after, cause.
    items: one row per item with a flip: item_id, cause, flips, lost (1 to 0), gained (0 to 1), moved (how far
      the judge's expectation moved: the sum of |p after - p before|), metrics ('gr 2, rp 1'),
      sources_removed and sources_added (texts; with keys in source_changes).
    rollup: one row per metric: compared (matched components), the flips per cause, unchanged,
      unsure or failed (no flip: an unsure or failed verdict in either run), in one run only.
    source_changes: per item with a flip caused by its sources, every source present in one run
      only: item_id, run ('a' the run it was removed from, 'b' the run it was added in), text, key.
    """

    components: pd.DataFrame
    items: pd.DataFrame
    rollup: pd.DataFrame
    source_changes: pd.DataFrame

    @property
    def n_flips(self) -> int:
        """How many components flipped."""
        return len(self.components)

    def for_item(self, item_id: str) -> pd.DataFrame:
        """The flips of one item."""
        return self.components[self.components["item_id"] == item_id].reset_index(drop=True)

    def cause_counts(self) -> dict[str, int]:
        """Flips per cause, every cause listed."""
        counts = self.components["cause"].value_counts()
        return {c: int(counts.get(c, 0)) for c in CAUSES}


def attribute(
    flip_rows: dict[str, pd.DataFrame],
    inputs: pd.DataFrame,
    run_a: str,
    run_b: str,
    metrics: Sequence[str] | None = None,
) -> Flips:
    """Attribute the flips between run_a and run_b.

    flip_rows: queries.compare.flip_rows(); inputs: queries.items.item_inputs() for both runs and (at least) the
    items of those rows; metrics: the metrics to report (default: every one with a row).
    """
    rows = _plain_rows(_pair_leftovers(flip_rows["rows"]))
    same = dict(zip(flip_rows["same"]["metric"], flip_rows["same"]["n"].astype(int)))
    matched = rows["idx_a"].notna() & rows["idx_b"].notna()
    decided = matched & (rows["state_a"] == "ok") & (rows["state_b"] == "ok")
    flipped = rows[decided & (rows["value_a"] != rows["value_b"])]
    extra_same = rows[decided & (rows["value_a"] == rows["value_b"])]  # pairs matched by word overlap
    undecided = rows[matched & ~decided]
    one_side = rows[~matched]

    # {(run, item): (sources, response)}: plain dicts, one lookup per item (a frame's .loc per item is slow)
    ins = {
        (r, i): (list(s), resp)
        for r, i, s, resp in zip(inputs["run_id"], inputs["item_id"], inputs["sources"], inputs["response"])
    }
    item_cause = {
        item: cause(ins[run_a, item][0], ins[run_b, item][0], ins[run_a, item][1], ins[run_b, item][1])
        for item in flipped["item_id"].unique()
    }

    components = _flipped_components(flipped, item_cause)

    changes, moved = _source_changes(item_cause, ins, run_a, run_b)
    items = _item_table(components, item_cause, moved)
    wanted = list(metrics) if metrics is not None else sorted(set(rows["metric"]) | set(same))
    rollup = pd.DataFrame(
        [
            _rollup_row(
                m,
                components,
                same.get(m, 0) + int((extra_same["metric"] == m).sum()),
                int((undecided["metric"] == m).sum()),
                int((one_side["metric"] == m).sum()),
            )
            for m in wanted
        ],
        columns=["metric", "compared", "flipped", *CAUSES, SAME, UNDECIDED, UNMATCHED],
    )
    return Flips(components, items, rollup, pd.DataFrame(changes, columns=["item_id", "run", "text", "key"]))


def _flipped_components(flipped: pd.DataFrame, item_cause: dict[str, str]) -> pd.DataFrame:
    """One row per flip: item, metric, what flipped and its text, the values and p before and after, the cause."""
    return (
        pd.DataFrame(
            {
                "item_id": flipped["item_id"],
                "metric": flipped["metric"],
                "what": flipped["kind"].map(lambda k: WHAT.get(k, k)),
                "text": flipped["text_b"].where(flipped["text_b"].notna(), flipped["text_a"]),
                "before": flipped["value_a"].astype(int),
                "after": flipped["value_b"].astype(int),
                "p_before": flipped["p_a"],
                "p_after": flipped["p_b"],
                "cause": flipped["item_id"].map(item_cause),
            }
        )
        .sort_values(["item_id", "metric"])
        .reset_index(drop=True)
    )


def _plain_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Plain floats and strings: a nullable column turns every comparison with a missing side into NA."""
    rows = rows.copy()
    for col in ("idx_a", "idx_b", "value_a", "value_b", "p_a", "p_b"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce").astype(float)
    for col in ("state_a", "state_b"):
        rows[col] = rows[col].astype(object).where(rows[col].notna(), "").astype(str)
    return rows


def _rollup_row(
    metric: str, components: pd.DataFrame, n_same: int, n_undecided: int, n_unmatched: int
) -> dict[str, Any]:
    """One metric's counts: compared, flipped by cause, kept, undecided and in one run only."""
    f = components[components["metric"] == metric]
    counts = {c: int((f["cause"] == c).sum()) for c in CAUSES}
    return {
        "metric": metric,
        "compared": len(f) + n_same + n_undecided,
        "flipped": len(f),
        **counts,
        SAME: n_same,
        UNDECIDED: n_undecided,
        UNMATCHED: n_unmatched,
    }


def _source_changes(
    item_cause: dict[str, str], ins: dict[tuple[str, str], tuple[list[str], str]], run_a: str, run_b: str
) -> tuple[list[dict[str, str]], dict[str, tuple[int, int]]]:
    """For the items whose sources changed: the sources removed (run a) and added (run b), and how many."""
    changes, moved = [], {}
    for item in sorted(i for i, c in item_cause.items() if c == SOURCES):
        before, after = ins[run_a, item][0], ins[run_b, item][0]
        kept_a, kept_b = {_plain(s) for s in before}, {_plain(s) for s in after}
        removed = [s for s in before if _plain(s) not in kept_b]
        added = [s for s in after if _plain(s) not in kept_a]
        changes += [{"item_id": item, "run": "a", "text": s, "key": ledger.source_key(s)} for s in removed]
        changes += [{"item_id": item, "run": "b", "text": s, "key": ledger.source_key(s)} for s in added]
        moved[item] = (len(removed), len(added))
    return changes, moved


def _item_table(
    components: pd.DataFrame, item_cause: dict[str, str], moved: dict[str, tuple[int, int]]
) -> pd.DataFrame:
    """One row per item with flips: its cause, flips lost and gained, how far the judge's expectation moved
    (the sum of its flips' |p after - p before|; a flip without p counts 1), per metric, and the sources moved."""
    shift = (components["p_after"] - components["p_before"]).abs().fillna(1.0)
    per_item = components.assign(
        lost=components["after"] < components["before"], gained=components["after"] > components["before"], shift=shift
    ).groupby("item_id", sort=True)
    counts = per_item.agg(
        flips=("metric", "size"), lost=("lost", "sum"), gained=("gained", "sum"), shift=("shift", "sum")
    )
    per_metric: dict[str, list[str]] = {}
    for key, n in components.groupby(["item_id", "metric"], sort=True).size().items():
        item, m = cast(tuple[str, str], key)
        per_metric.setdefault(item, []).append(f"{m.upper()} {n}")  # as the pages name metrics
    return pd.DataFrame(
        {
            "item_id": counts.index,
            "cause": counts.index.map(item_cause),
            "flips": counts["flips"].to_numpy(),
            "lost": counts["lost"].astype(int).to_numpy(),
            "gained": counts["gained"].astype(int).to_numpy(),
            "moved": counts["shift"].astype(float).round(2).to_numpy(),
            "metrics": [", ".join(per_metric[i]) for i in counts.index],
            "sources_removed": [moved.get(i, (0, 0))[0] for i in counts.index],
            "sources_added": [moved.get(i, (0, 0))[1] for i in counts.index],
        }
    )


def between(
    path: str | Path, run_a: str, run_b: str, band: Band | None = None, metrics: Sequence[str] | None = None
) -> Flips:
    """attribute() over the two runs' rows as stored (read at `band`): what Compare and the gate show."""
    with store.reading(path):
        rows = queries.compare.flip_rows(path, run_a, run_b, band)
        inputs = queries.items.item_inputs(path, [run_a, run_b], sorted(set(rows["rows"]["item_id"])))
    return attribute(rows, inputs, run_a, run_b, metrics)
