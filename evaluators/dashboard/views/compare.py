"""The Compare page's helpers: one item's claims in two runs, matched by their text; the sources the
retriever added or dropped, with the items' scores before and after."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence, cast

import pandas as pd
import streamlit as st

from evaluators.dashboard import tables, ui
from evaluators.dashboard.markup import fmt_score, fmt_verdict, md
from evaluators.dashboard.views import walk


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def claim_diff(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Claims of one item in two runs, matched by normalised text: new, gone, changed verdict or same."""

    def verdicts(row: Any) -> str:
        rp = fmt_verdict(row.rp, row.rp_status) if isinstance(row.rp_status, str) else "–"
        gr = fmt_verdict(row.gr, row.gr_status) if isinstance(row.gr_status, str) else "–"
        return f"RP {rp} · GR {gr}"

    a = {_norm(r.text): (r.text, verdicts(r)) for r in cast(Iterable[Any], before.itertuples())}
    b = {_norm(r.text): (r.text, verdicts(r)) for r in cast(Iterable[Any], after.itertuples())}
    rows = []
    for key in list(a) + [k for k in b if k not in a]:
        text = (b.get(key) or a[key])[0]
        va, vb = a.get(key, (None, None))[1], b.get(key, (None, None))[1]
        change = "new" if va is None else "gone" if vb is None else "changed verdict" if va != vb else "same"
        rows.append({"change": change, "claim": text, "before": va or "", "after": vb or ""})
    order = {"changed verdict": 0, "new": 1, "gone": 2, "same": 3}
    frame = pd.DataFrame(rows, columns=["change", "claim", "before", "after"])
    return frame.sort_values("change", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


SP1_STATE = {"yes": "✓", "no": "✗", "unsure": "?", "failed": "⚠"}
SP1_LEGEND = "SP1's verdict on the source in the run that retrieved it: ✓ essential, ✗ not, ? unsure, ⚠ failed"


def _moved(a: Any, b: Any, status_a: Any, status_b: Any) -> str:
    """An item's score in the two runs: '0.50→1.00' (a side unscored shows its status)."""
    return f"{fmt_score(a, _status(status_a))}→{fmt_score(b, _status(status_b))}"


def _status(status: Any) -> str | None:
    return status if isinstance(status, str) else None


def retrieval_table(changes: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """queries.compare.retrieval_changes() as shown: per moved source, the item, what the retriever did,
    the source by its first words, SP1's verdict on it, per metric the item's score before→after, its key."""
    table = pd.DataFrame(
        {
            "item_id": changes["item_id"],
            "change": changes["change"],
            "source": changes["name"],
            "its SP1": changes["sp1"].map(SP1_STATE).fillna(""),
        }
    )
    for m in metrics:
        cols = [changes[f"{m}_{s}"] for s in ("a", "b", "status_a", "status_b")]
        table[m.upper()] = [_moved(*values) for values in zip(*cols)]
    return table.assign(key=changes["key"])


def retrieval_summary(changes: pd.DataFrame, metrics: Sequence[str]) -> str:
    """One line: how many items retrieved other sources, what moved, and the mean change of each metric
    over those items (n scored in both of them)."""
    first = changes.iloc[0]
    n = int(first["n_items"])
    effects = " · ".join(
        f"{m.upper()} {float(first[f'{m}_mean_delta']):+.2f} ({int(first[f'{m}_n'])} scored in both of {n})"
        if int(first[f"{m}_n"])
        else f"{m.upper()} – (0 scored in both of {n})"
        for m in metrics
    )
    return (
        f"**{n}** {'item' if n == 1 else 'items'} retrieved other sources: **{int(first['n_dropped'])}** dropped · "
        f"**{int(first['n_added'])}** added. Mean change over these items: {effects}"
    )


def show_retrieval_changes(changes: pd.DataFrame, run_a: str, run_b: str, metrics: Sequence[str]) -> None:
    """Compare's section on the sources the retriever added or dropped: the summary line, and one row per
    moved source; a row's click opens its item, in the run that retrieved it, on its sources."""
    st.subheader("Sources the retriever added or dropped")
    if changes.empty:
        st.caption("Every item both runs hold retrieved the same sources (by their text) in both.")
        return
    st.markdown(retrieval_summary(changes, metrics))
    where = [run_a if c == "dropped" else run_b for c in changes["change"]]
    table = retrieval_table(changes, metrics)
    table["open"] = [ui.item_url(r, i, tab="Sources") for r, i in zip(where, changes["item_id"])]
    table["ledger"] = [ui.page_url("sources", run=r, source=k) for r, k in zip(where, changes["key"])]
    table["key"] = table.pop("key")  # last: the links come first
    key_px = tables.one_line_px(table["key"], 50)  # a key is one word: it keeps its line, the source's words wrap
    widths = {"item_id": 60, "change": 70, "source": 261 - key_px, "its SP1": 55, **{m.upper(): 75 for m in metrics}}
    widths |= {"open": tables.OPEN_PX, "ledger": 50, "key": key_px}
    row = tables.clickable(  # a source's first words wrap in their cell
        table,
        "retrieval_changes",
        widths,
        {
            **tables.OPEN,
            "its SP1": st.column_config.TextColumn("its SP1", help=SP1_LEGEND),  # one mark
            "change": st.column_config.TextColumn(
                "change", help=f"dropped: retrieved in {md(run_a)} only; added: retrieved in {md(run_b)} only"
            ),
            "source": st.column_config.TextColumn("source", help="Its first words; its ledger link has the rest"),
            "key": st.column_config.TextColumn("key", help="The first 12 hex digits of sha256 of its text"),
            "ledger": st.column_config.LinkColumn("ledger", display_text="📚"),
            **{
                m.upper(): st.column_config.TextColumn(
                    m.upper(), help=f"The item's {m.upper()} in {md(run_a)} → in {md(run_b)}"
                )
                for m in metrics
            },
        },
    )
    total = int(changes["n_dropped"].iloc[0]) + int(changes["n_added"].iloc[0])
    st.caption(
        (f"Showing the first {len(changes)} of {total} moved sources. " if total > len(changes) else "")
        + "A source retrieved for an item in one run only, matched by its text: it cannot flip, so it is listed "
        "here with the item's scores in both runs. Click a row to open the item in the run that retrieved it."
    )
    if row is not None:  # walks this list, across both runs
        walk.open_item("compare", where[row], changes["item_id"].iloc[row], "Sources", cl="moved")
