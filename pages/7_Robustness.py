"""Robustness: whether answers stay right when a question is reworded (GRAMMAR): what the page answers and
the one action it suggests, then gap, robust and non-robust groups, R and Acc per cluster, and which module to
blame, with a glossary of these terms."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators import grammar
from evaluators.dashboard import markup, reads, state, tables, ui
from evaluators.dashboard.views import robustness as view
from evaluators.grammar import robustness
from evaluators.storage import queries, store

path = ui.page("Robustness")
view.intro()
MARK = {True: "✓ right", False: "✗ wrong"}


@st.cache_data(show_spinner=False, max_entries=64)
def _runs(db: str, version: float) -> list[str]:
    return queries.grammar.grammar_runs(db)


@st.cache_data(show_spinner=False, max_entries=64)
def _report(db: str, version: float, run: str, cluster_by: str) -> robustness.Report:
    return robustness.report(db, run, cluster_by)


def _mark(correct: object, status: str) -> str:
    return f"⚠ {status}" if pd.isna(correct) else MARK[bool(correct)]


try:
    version = reads.db_version(path)
    runs = _runs(str(path), version)
    if not runs:
        st.info(
            "No GRAMMAR runs in this database. Build the demo runs with "
            "`python -m evaluators grammar-demo --db DB`, or judge a run with `python -m evaluators grammar-eval`."
        )
        st.stop()
    run = ui.pick_run(pd.DataFrame({"run_id": runs}))
    cluster_by = state.synced(
        st.radio,
        "Cluster by",
        "cluster",
        "sql_template",
        options=list(grammar.CLUSTER_BY),
        horizontal=True,
        format_func=lambda c: c.replace("_", " "),
    )
    rep = _report(str(path), version, run, cluster_by)
except store.StoreBusy:
    st.warning("The database is busy (a run or a save is writing), try again in a moment.")
    st.stop()

st.info(f"**What to do:** {view.suggestion(rep)}")
st.caption(
    f"Run **{markup.md(run)}**. A **gap** group has no right answer, a **robust** one only right answers, a "
    "**non-robust** one both; R, Acc, λ and the *(retrieval)* columns are in the glossary above."
)

st.subheader(f"Clusters by {cluster_by.replace('_', ' ')}")
clusters, retrieval = view.cluster_tables(rep.clusters())
share = {c: st.column_config.NumberColumn(c, format="%.2f") for c in ("lambda", "R", "Acc", *retrieval.columns[1:])}
# Two tables whose columns fit 1280 px beside the sidebar, each header whole: the answers, then retrieval alone.
# A cluster's name (a template's id) is one word: its column is as wide as the longest, up to 180 px (the
# grid beside the sidebar is 818 px wide; the other columns' headers read whole in what is left).
name_px = {"cluster": min(180, tables.one_line_px(clusters["cluster"].astype(str), view.CLUSTER_PX["cluster"]))}
# placeholder: R and Acc of a cluster whose every item is in a gap group are not defined, never 0
tables.fitted(clusters, "clusters", view.CLUSTER_PX | name_px, share, placeholder="–")
st.caption(
    "Retrieval alone, per cluster: R and Acc with LM shortfalls counted as right, and the retrieval hit.",
    help=f"LM shortfall: {markup.TERMS['LM shortfall']}",
)
tables.fitted(retrieval, "retrieval", view.RETRIEVAL_PX | name_px, share, placeholder="–")

st.subheader("Non-robust groups")
nr = rep.non_robust
if nr.empty:
    st.success("No non-robust group: every group is all right (robust) or all wrong (gap).")
else:
    # an item without a reference has no truth: pivot_table would drop its group from the grid
    nr = nr.assign(mark=[_mark(c, s) for c, s in zip(nr["correct"], nr["status"])], truth=nr["truth"].fillna("–"))
    grid = nr.pivot_table(
        index=["group_id", "sql_template", "truth"],
        columns="text_template",
        values="mark",
        aggfunc="first",
        fill_value="",
    ).reset_index()
    st.caption(f"{len(grid)} groups; one column per text variant.")
    st.dataframe(grid, hide_index=True, key="nr_groups", width="stretch")
    group = state.synced(
        st.selectbox,
        "Variants side by side for group",
        "group",
        str(grid["group_id"].iloc[0]),
        options=list(grid["group_id"]),
    )
    rows = markup.records(nr[nr["group_id"] == group])
    st.markdown(f"Ground truth: **{markup.md(rows[0]['truth'])}** · SQL template {markup.md(rows[0]['sql_template'])}")
    for col, row in zip(st.columns(len(rows)), rows):
        with col:
            st.markdown(f"**{markup.md(row['text_template'])}** · {row['mark']}")
            markup.plain(row["query"])
            st.caption("response")
            markup.plain(row["response"] or "(empty)")
            blame = {
                grammar.LM: "LM shortfall",
                grammar.RETRIEVAL: "possible retrieval failure",
                grammar.UNKNOWN: "no retrieved ids",
            }.get(row["attribution"], "")
            st.caption(
                f"retrieved: {markup.md(', '.join(row['retrieved_doc_ids'])) or '–'}"
                + (f" · {blame}" if blame else ""),
                help=markup.TERMS["LM shortfall"] if blame == "LM shortfall" else None,
            )
            st.markdown(f"[open item]({ui.item_url(run, row['item_id'])})")  # every URL character is %-encoded

st.subheader("Who is to blame: context comparison")
counts = rep.attribution()
left, mid, right = st.columns(3)
left.metric("LM shortfall", counts[grammar.LM], help=markup.TERMS["LM shortfall"])
mid.metric(
    "Possible retrieval failure",
    counts[grammar.RETRIEVAL],
    help="no right sibling saw these documents (not proof: the LM may also have failed)",
)
right.metric("Unknown", counts[grammar.UNKNOWN], help="the item carries no retrieved document ids")
wrong = nr[nr["attribution"] != ""] if not nr.empty else nr
if not wrong.empty:
    table = wrong.assign(
        retrieved=[", ".join(x) for x in wrong["retrieved_doc_ids"]],
        true=[", ".join(x) for x in wrong["true_doc_ids"]],
        open=[ui.item_url(run, i) for i in wrong["item_id"]],
    )[["open", "group_id", "text_template", "attribution", "retrieved", "true", "retrieval_hit"]]
    # An item is its group and text variant (its id is a link away): ids keep their line, header and all,
    # and the document ids wrap between them in what is left.
    labels = {
        "group_id": "question group",
        "text_template": "wording",
        "attribution": {
            "label": "to blame",
            "help": f"LM shortfall: {markup.TERMS['LM shortfall']}; possible retrieval failure: no right wording "
            "saw these documents",
        },
        "retrieved": "documents retrieved",
        "true": "documents that answer",
        "retrieval_hit": {"label": "all retrieved", "help": "every document that answers it was retrieved"},
    }
    widths = {"open": tables.OPEN_PX, "retrieval_hit": 100}
    widths |= {
        c: min(200, tables.one_line_px([*table[c].astype(str), str(tables.label(labels[c]))], 50))
        for c in ("group_id", "text_template", "attribution")
    }
    room = tables.TABLE_PX - sum(widths.values())
    widths |= {"retrieved": room // 2, "true": room - room // 2}
    tables.fitted(table, "blame", widths, {**tables.OPEN, **labels})
