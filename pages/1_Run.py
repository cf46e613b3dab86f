"""Run: the per-item score table, filtered and sorted in DuckDB, a page at a time, one click to an item."""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import charts, markup, reads, state, tables, ui
from evaluators.dashboard.views import runs as runs_view
from evaluators.dashboard.views import walk
from evaluators.metrics.diagnosis import RULES
from evaluators.storage import queries

PAGE_SIZE = walk.PAGE_SIZE

ui.page("Run")
run_id, metric_ids, th = ui.current_run()
st.caption(
    f"Run **{markup.md(run_id)}**: items with their scores. An empty cell is an unscored metric; "
    "*unscored or failed* gives its reason (*unsure*: every verdict fell inside the uncertainty band) and "
    "counts the item's failed verdicts (a timeout, an error, a reply that could not be read)."
)
run_row = reads.runs().set_index("run_id").loc[run_id]
if where := markup.judged_on(run_row["params"]):
    st.caption(f"Judged {markup.md(where)}.")
if not metric_ids:
    st.info("This run has no scores yet: its items are listed without metrics.")

c1, c2, c3 = st.columns([5, 5, 3])  # room for the checkbox's label on one line
below = state.synced(
    c1.multiselect, "Below threshold on any of", "below", [], state.csv_list, options=metric_ids, format_func=str.upper
)
rules = state.synced(
    c2.multiselect,
    "Table-2 rule fires (any of)",
    "rule",
    [],
    state.csv_list,
    options=list(RULES),
    format_func=markup.rule_label,
)
failed = state.synced(
    c3.checkbox,
    "Failed or unscored",
    "failed",
    False,
    lambda s: s in ("1", "True"),
    help="Items with a judge failure, or a metric left unscored because every verdict was unsure.",
)
c4, c5, c6 = st.columns([2, 1, 1])
search = state.synced(c4.text_input, "Search text (id, query, response)", "q", "")
keys = reads.read(queries.runs.metadata_keys, run_id)
meta_key = state.synced(
    c5.selectbox, "Metadata field", "mk", "", options=["", *keys], format_func=lambda k: k or "(any)"
)
if meta_key:
    values = list(reads.read(queries.runs.metadata_values, run_id, meta_key)["value"])
    state.synced(c6.selectbox, "Value", "mv", "", options=["", *values], format_func=lambda v: v or "(any)")

levels = walk.run_filter(run_id, metric_ids)["levels"]
if levels:
    st.info("Quadrant: " + " and ".join(f"{m.upper()} {lv}" for m, lv in levels.items()))
    if st.button("Clear quadrant filter", key="clear_quad"):
        del st.query_params["quad"]
        st.rerun()

SORT_NAMES = dict(zip(walk.SORTS, ("worst first (expected value)", "item id", "failed verdicts")))
c7, c8, c9 = st.columns([2, 1, 1])
sort = state.synced(
    c7.selectbox,
    "Sort by",
    "sort",
    walk.SORTS[0],
    options=[*walk.SORTS, *metric_ids],
    format_func=lambda s: s.upper() if s in metric_ids else SORT_NAMES[s],
    help="A metric sorts by its expected value (the judge's p read as a share) where the item has one, then by "
    "its score: among items of equal score the ones the judge is surest are bad come first. Worst first: each "
    "item's lowest of those, over the run's metrics.",
)
desc = state.synced(c8.toggle, "Descending", "desc", False, lambda s: s in ("1", "True"))
n_items = int(run_row["n_done"])
pages = max(1, -(-n_items // PAGE_SIZE))
page_no = state.synced(c9.number_input, "Page", "page", 1, state.whole(1, pages), min_value=1, max_value=pages, step=1)
frame, total = walk.run_rows(run_id, metric_ids, th, (page_no - 1) * PAGE_SIZE, PAGE_SIZE)
# Scores coloured against their thresholds as the Runs page colours a run's mean; a score decided from too few
# confident verdicts (more than half unsure) is not coloured, as Table 2 does not read it.
colours = runs_view.score_colours(frame, metric_ids, th)
frame = frame.drop(columns=[c for c in frame.columns if c.startswith("settled:") or c == "_"])
first = (page_no - 1) * PAGE_SIZE
shown = f"row {first + 1}" if len(frame) == 1 else f"rows {first + 1}–{first + len(frame)}"
st.markdown(f"**{total}** matching item{'' if total == 1 else 's'}" + (f"; {shown}" if len(frame) else ""))
# With a rule filter the item opens onto that rule's evidence; with a filter on scores, onto its verdicts.
tab = "Verdicts" if below or failed or levels else None
frame.insert(0, "open", [ui.item_url(run_id, i, ",".join(rules), tab) for i in frame["item_id"]])
unscored = [markup.unscored_text(f, int(n)) for f, n in zip(frame.pop("failed_metrics"), frame.pop("n_failed"))]
frame.insert(len(frame.columns) - 1, "unscored", unscored)  # before the rules
# the query and the reasons wrap; the widths fit 1280 px beside the row markers, each header whole; an id
# keeps its line (up to 90 px), taken from the query's width
id_px = min(90, tables.one_line_px(frame["item_id"], 55))
widths = {"open": tables.OPEN_PX, "item_id": id_px, "query": 217 - id_px, **dict.fromkeys(metric_ids, 46)}
widths |= {"unscored": 126, "rules": 70}
# A query longer than a wrapping row's lines is cut (the item shows it whole): rows stay WRAP_PX high.
frame, _ = tables.fit(frame, {"query": widths["query"]}, lines=tables.WRAP_LINES)
row = tables.clickable(
    frame,
    "items_table",
    widths,
    {
        **tables.OPEN,
        **{m: st.column_config.NumberColumn(m.upper(), format="%.2f") for m in metric_ids},
        "unscored": st.column_config.TextColumn(
            "unscored or failed",
            help="The item's unscored metrics and why (unsure: every verdict inside the band; a failure's "
            "status otherwise), then its failed verdicts. An unsure verdict is no failure.",
        ),
    },
    placeholder="",
    style=lambda shown: shown.style.apply(lambda _: colours, axis=None, subset=list(colours.columns)),
)
st.caption(
    ":green-background[green] passes its threshold (sidebar), :red-background[red] does not; a score decided "
    "from too few confident verdicts (more than half unsure) has no colour. Click a row to open its item."
)
if row is not None:
    walk.open_item("run", run_id, frame["item_id"].iloc[row], tab)

# Drawn once opened: a pass over every item, and plotly's script in the browser, that a first visit skips.
with st.expander("Metric correlations across all items of the run", key="corr_open", on_change="rerun") as corr:
    if corr.open:
        st.plotly_chart(
            charts.heatmap(reads.derived(queries.diagnosis.correlations, [run_id], metric_ids), metric_ids),
            key="corr_heatmap",
            config=charts.PLOT_CONFIG,
        )

# Peer scores that came with the input (RAGAS result columns, DeepEval metrics, Langfuse scores):
# shown beside ours, never read by our metrics, thresholds or Table 2.
imported = reads.read(queries.runs.imported_summary, run_id)
if not imported.empty:
    st.markdown(
        "**Imported peer scores** · from the input file, not computed here and never mixed into our metrics or Table 2"
    )
    st.dataframe(
        {
            "imported": [f"imported: {o} {m}" for o, m in zip(imported["origin"], imported["metric"])],
            "mean": [markup.fmt_score(v) for v in imported["mean"]],
            "n scored": [f"{int(n)} of {int(t)}" for n, t in zip(imported["n_scored"], imported["n_total"])],
        },
        hide_index=True,
        key="imported_scores",
        width="stretch",
    )
