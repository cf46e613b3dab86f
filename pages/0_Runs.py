"""Runs: every evaluation run, and for one run each metric's headline with its interval and failures."""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import charts, markup, reads, state, tables, ui
from evaluators.dashboard.views import runs as runs_view
from evaluators.metrics.diagnosis import DEFAULT_THRESHOLDS
from evaluators.metrics.registry import THELMA, display_name, order_metrics
from evaluators.storage import queries

HOW_TO_READ = """Each run scores (query, retrieved sources, response) triplets without a reference answer. A
judge breaks a text into parts (claims, sub-questions, sentences) and answers 1 or 0 for each part; a
metric is the share of 1s, from 0 to 1, higher is better.

- **SP1** source precision: the share of retrieved sources that hold something essential to the query.
- **SP2** source precision by fact: the share of the sources' facts that are essential.
- **SQC** source query coverage: the share of the query's sub-questions the sources answer.
- **RP** response precision: the share of the response's claims that are essential to the query.
- **RQC** response query coverage: the share of sub-questions the response addresses.
- **SD** self-distinctness: 1 minus the share of response sentences that repeat another one.
- **GR** groundedness: the share of the response's claims the sources support.

Where items carry a reference (golden) answer, three metrics of ours compare the response with it:
**REF_PRECISION** (the response's claims the reference supports), **REF_RECALL** (the reference's claims the
response supports) and **REF_F1** (their harmonic mean); items without a reference are not counted.

**Table 2** (the Diagnosis page) reads pairs of these: for example low SQC with low RQC means the sources
lack the answer (fix the retriever or the source text), high SQC with low RQC means the answer was there
but not used (fix the prompt or the generator). Each rule names the component to fix. One rule is ours, not
the paper's: **X1** (high SQC, low GR) names a generator that makes things up while retrieval covers the query.

**Unsure**: a verdict whose probability lies inside the uncertainty band (sidebar) is neither 1 nor 0; it is
left out of the score like a judge failure and counted apart, so read every mean with its "n scored of N"."""

ui.page("Runs")
runs = reads.runs()
if runs.empty:
    st.info("The database has no runs yet. Evaluate a file on the Evaluate page or with the CLI.")
    st.stop()

with st.expander("How to read this", expanded=False):
    st.markdown(HOW_TO_READ)
run_id = ui.pick_run(runs)
metric_ids = reads.metrics(run_id)
th = state.thresholds(order_metrics([*THELMA, *metric_ids]))
band = state.band_control()
corrected = state.scores_control()

# Runs side by side, from each run's stored per-item table at the default band (no regrouping of its
# scores or verdicts), read once per database version: the top rules at the metrics' default thresholds,
# so moving a threshold rescans no run (at a million items a rescan costs about half a second a run).
# GRAMMAR's robustness runs are listed apart, below: their THELMA means answer another question.
robustness = reads.read(queries.runs.robustness_runs)
board_runs = runs[~runs["run_id"].isin(robustness)]
ids = list(board_runs["run_id"])
if ids:
    means, tops = reads.read_all(
        reads.call(queries.diagnosis.headline, ids, THELMA),
        reads.call(queries.diagnosis.rule_tops, ids, DEFAULT_THRESHOLDS),
    )
    heads = [{**m, **t} for m, t in zip(means, tops)]
    (scores, details), columns, (score_rows, detail_rows) = runs_view.board(
        board_runs, heads, {r: reads.metrics(r) for r in ids}, th
    )
    # Rows are picked by their markers (two to compare); a click on a run or on 🔎 opens it in this tab, as
    # every other table opens what it lists.
    picked = st.dataframe(
        scores,
        hide_index=True,
        key="runs_table",
        width="stretch",
        placeholder="",
        on_select="rerun",
        selection_mode=["multi-row", "single-cell"],
        column_config=columns,
        **score_rows,
    )
    runs_view.open_clicked(picked, ids, heads)
    st.caption(runs_view.LEGEND)
    st.dataframe(
        details,
        hide_index=True,
        key="runs_details",
        width="stretch",
        placeholder="",
        column_config=columns,
        **detail_rows,
    )
    chosen = [ids[i] for i in sorted(picked["selection"]["rows"])]
    c1, c2 = st.columns(2)
    if len(ids) > 1:
        before, after = (chosen[1], chosen[0]) if len(chosen) == 2 else ui.default_pair(ids)
        ui.page_link(
            "compare",
            f"Compare {markup.md(before)} → {markup.md(after)}",
            ui.link(run=before, other=after),
            icon="⚖️",
            where=c1,
        )
    ui.page_link(
        "trends",
        "Trends over runs",
        ui.link(runs=",".join(chosen) if len(chosen) > 1 else None),
        icon="📈",
        where=c2,
    )
if robustness:
    st.markdown(
        "**Robustness runs (GRAMMAR)** · apart from the runs above: they ask whether answers stay right "
        "when a question is reworded, on the Robustness page"
    )
    for r, c in zip(robustness, st.columns(min(len(robustness), 4)) * len(robustness)):
        ui.page_link("robustness", markup.md(r), ui.link(run=r), icon="🧪", where=c)

info = runs[runs["run_id"] == run_id].iloc[0]
st.header(f"Run {markup.md(run_id)}")
st.caption(
    f"judge **{markup.md(info['judge'])}** · status {markup.md(info['status'])} · created {info['created_at']:%Y-%m-%d %H:%M} · "
    f"{info['n_done']} of {info['n_items']} items written"
)
if info["error"]:
    st.error(f"run error: {markup.md(info['error'])}")
if not metric_ids:
    st.info("No scores in this run yet.")
    st.stop()

rows, dist = reads.view(runs_view.metric_rows, run_id, band, corrected)
cards = st.columns(len(metric_ids))
for col, r in zip(cards, rows):
    col.metric(r["metric"].upper(), r["card"], help=display_name(r["metric"]))
    loose = "" if not r["scored"] or runs_view.settled(r["scored"], r["items"]) else " · not settled: under half scored"
    col.caption(f"n scored {r['scored']} of {r['items']} · {r['unsure items']} unsure{loose}")  # one element, not two
# The distribution column is drawn by the table itself: plotly's script (megabytes) is only fetched
# when the histograms with threshold lines are asked for, so the page is whole sooner.
widths = {"metric": 55, "mean": 50, "95% CI": 85, "n scored": 62, "unscored items": 104, "failed verdicts": 96}
widths |= {"unsure verdicts": 104, "threshold": 68, "below threshold": 108, "distribution": 76}
table, fitted = tables.fit(runs_view.metric_table(rows, dist, th), widths)  # the failures by status wrap in their cell
st.dataframe(
    table,
    hide_index=True,
    key="metric_table",
    width="stretch",
    **fitted,
    column_config=tables.sized(
        {
            "distribution": st.column_config.BarChartColumn(
                "distribution", y_min=0, help="scored items per tenth of the score, from 0 to 1"
            )
        },
        widths,
    ),
)
st.caption(
    "Intervals: percentile bootstrap of the mean over scored items, 1000 resamples, fixed seed. "
    "Unscored items (judge failures, empty decompositions, and items whose verdicts were all unsure at "
    "the uncertainty band) are counted apart, never as 0."
)
if state.synced(st.toggle, "Histograms with threshold lines", "hist", False, lambda s: s in ("1", "True")):
    st.plotly_chart(charts.histograms(dist, metric_ids, th), key="histograms", config=charts.PLOT_CONFIG)

c1, c2, c3 = st.columns(3)
ui.page_link("run", "Item table", ui.link(run=run_id), icon="📋", where=c1)
ui.page_link("diagnosis", "Diagnosis (Table 2)", ui.link(run=run_id), icon="🩺", where=c2)
ui.page_link("compare", "Compare with another run", ui.link(run=run_id), icon="⚖️", where=c3)
