"""Compare: two runs aligned by item id, per-metric deltas with paired-bootstrap intervals, crossings,
a claim-level diff for one item, and a pairwise-preference mode."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from evaluators.core.stats import bootstrap_ci
from evaluators.dashboard import charts, markup, reads, state, tables, ui
from evaluators.dashboard.views import compare as compare_view
from evaluators.dashboard.views import walk
from evaluators.metrics import ledger
from evaluators.storage import queries

FLIPS_AT_ONCE = 20_000  # runs up to this many items show why verdicts flipped without being asked
ui.page("Compare")
runs = reads.runs()
if len(runs) < 2:
    st.info("Comparing needs at least two runs.")
    st.stop()
ids = list(runs["run_id"])
named = st.query_params.get("run")
if state.remembered("other") is None and named in ids:
    # A link that names one run (the Runs page's "Compare with another run"): it is the run before, against the
    # newest run that shares its items.
    st.query_params["other"] = ui.partner(ids, named) or ui.default_run(ids, named)
elif state.remembered("other") is None:
    # No pair asked for (the sidebar): the run in view (else the newest) against the run before it, of two runs
    # that share items, as the Runs page's link pairs them. A run that shares items with none is said, not compared.
    asked = state.remembered("run")
    before, after = ui.default_pair(ids, asked)
    st.query_params["run"], st.query_params["other"] = before, after
    if after != (asked if asked in ids else ui.default_run(ids)):
        st.info(
            f"{markup.md(asked or ui.default_run(ids))} shares no item with another run: comparing "
            f"{markup.md(before)} → {markup.md(after)}, the newest runs that share items."
        )
run_id = ui.pick_run(runs, label="Run (before)")
other = ui.pick_run(runs, key="other", label="Other run (after)", skip=run_id)
if other == run_id:
    st.warning("Pick two different runs.")
    st.stop()
metric_ids = reads.metrics(run_id, other)


def by_run(what: str) -> dict[str, Any]:
    """The two runs' columns headed before and after, each run named on hover: a run's name may be wider than
    its column."""
    return {
        run_id: st.column_config.Column("before", help=f"{what} in {markup.md(run_id)}"),
        other: st.column_config.Column("after", help=f"{what} in {markup.md(other)}"),
    }


th = state.thresholds(metric_ids)
band = state.band_control()
state.scores_control()
a, b = (runs[runs["run_id"] == r].iloc[0] for r in (run_id, other))
if a["judge"] != b["judge"]:
    st.warning(
        f"⚠ Different judges: {markup.md(run_id)} used **{markup.md(a['judge'])}**, {markup.md(other)} used "
        f"**{markup.md(b['judge'])}**. "
        "Deltas mix a pipeline change with a judge change."
    )
ha, hb = json.loads(a["prompt_hashes"]), json.loads(b["prompt_hashes"])
changed = sorted(k for k in set(ha) | set(hb) if ha.get(k) != hb.get(k))
if changed:
    st.warning(
        f"⚠ Different prompt files: {markup.md(', '.join(changed))}. Scores may move because the prompts changed."
    )

compared = reads.derived(queries.compare.compare_tables, [run_id, other], metric_ids, th)
summary, dist = compared["summary"].set_index("metric"), compared["deltas"]
rows = []
for m in metric_ids:
    if m not in summary.index:
        continue
    s = summary.loc[m]
    part = dist[dist["metric"] == m]
    ci = bootstrap_ci(part["delta"].to_numpy(), part["n"].to_numpy())
    rows.append(
        {
            "metric": m,
            "items in both": int(s["n_pairs"]),
            f"mean {run_id}": round(s["mean_a"], 3),
            f"mean {other}": round(s["mean_b"], 3),
            "delta": round(float(s["delta"]), 3),
            "ci_low": round(ci.low, 3),
            "ci_high": round(ci.high, 3),
            "real": ci.excludes_zero,
        }
    )
deltas = pd.DataFrame(rows)
st.subheader(f"{markup.md(other)} − {markup.md(run_id)}")
if deltas.empty:
    st.info("The two runs share no scored items.")
    st.stop()
st.dataframe(
    markup.named_metrics(deltas).assign(real=deltas["real"].map({True: "✓ real", False: "noise (CI spans 0)"})),
    hide_index=True,
    key="delta_table",
    width="stretch",
    column_config={
        **{c: st.column_config.NumberColumn(format="%.3f") for c in (f"mean {run_id}", f"mean {other}")},
        "delta": st.column_config.NumberColumn(format="%+.3f"),
        "ci_low": st.column_config.NumberColumn("95% CI low", format="%+.3f"),
        "ci_high": st.column_config.NumberColumn("95% CI high", format="%+.3f"),
        "real": "change",
    },
)
st.caption(
    "Paired bootstrap over the items both runs scored (1000 resamples, fixed seed). "
    "A change counts as real only when its 95% interval excludes 0."
)
st.plotly_chart(charts.delta_chart(deltas), key="delta_chart", config=charts.PLOT_CONFIG)

st.subheader("Items that crossed a threshold")
crossed = summary.reset_index()[["metric", "n_worse", "n_better"]]
st.dataframe(
    markup.named_metrics(crossed).rename(columns={"n_worse": "fell below", "n_better": "rose above"}),
    hide_index=True,
    key="crossed_table",
    width="stretch",
)
c1, c2 = st.columns(2)
# Opens on the first metric with items that fell below its threshold, else on one with items that rose above it.
moved = [(m, d) for d in ("worse", "better") for m in metric_ids if m in summary.index and summary.loc[m, f"n_{d}"]]
first_xm, first_xd = next(iter(moved), (metric_ids[0], "worse"))
cross_metric = state.synced(c1.selectbox, "Metric", "xm", first_xm, options=metric_ids, format_func=str.upper)
direction = state.synced(c2.radio, "Direction", "xd", first_xd, options=["worse", "better"], horizontal=True)
items = walk.crossed(run_id, other, cross_metric, th.get(cross_metric, 0.5), direction)
if items.empty:
    st.caption("No item crossed in that direction.")
else:
    items.insert(0, "open", [ui.item_url(other, i, tab="Verdicts") for i in items["item_id"]])  # why it crossed
    widths = {"open": 40, "item_id": 160, run_id: 90, other: 90, "delta": 80}
    config = tables.OPEN | by_run(f"its {cross_metric.upper()}")
    row = tables.clickable(items.rename(columns={"a": run_id, "b": other}), "crossed_items", widths, config)
    if row is not None:  # walks this list: ▶ Next is the next item that crossed
        walk.open_item(
            "compare", other, items["item_id"].iloc[row], "Verdicts", cl="crossed", xm=cross_metric, xd=direction
        )

st.subheader("Claim-level diff for one item")
default_item = "" if items.empty else items["item_id"].iloc[0]
item_id = state.synced(st.text_input, "Item id to diff", "item", default_item)
if item_id:
    diff = compare_view.claim_diff(
        *reads.read_all(
            reads.call(queries.items.claim_verdicts, run_id, item_id, band),
            reads.call(queries.items.claim_verdicts, other, item_id, band),
        )
    )
    counts = diff["change"].value_counts()
    st.markdown(" · ".join(f"**{counts.get(k, 0)}** {k}" for k in ("changed verdict", "new", "gone", "same")))
    widths = {"change": 110, "claim": 400, run_id: 130, other: 130}
    # a claim wraps in its cell
    tables.fitted(diff.rename(columns={"before": run_id, "after": other}), "claim_diff", widths, by_run("its verdict"))
    ui.item_link(other, item_id, label=f"Open {markup.md(item_id)} in {markup.md(other)}", tab="Response")  # its claims

st.subheader("Pairwise preference")
if state.synced(
    st.toggle, "Preference mode: one run is declared the better variant", "pref", False, lambda s: s in ("1", "True")
):
    better = state.synced(
        st.radio,
        "Declared better run",
        "better",
        other,
        options=[run_id, other],
        horizontal=True,
        format_func=markup.md,
    )
    worse = run_id if better == other else other
    agree = reads.derived(queries.compare.preference_agreement, [better, worse], metric_ids)
    agree["agreement"] = (agree["agree"] / agree["n_pairs"]).round(3)
    agree["metric"] = pd.Categorical(agree["metric"], categories=metric_ids, ordered=True)
    st.dataframe(
        markup.named_metrics(agree.sort_values("metric")), hide_index=True, key="preference_table", width="stretch"
    )
    st.caption(
        f"Agreement: share of items where {markup.md(better)} scores strictly higher than {markup.md(worse)} "
        "(THELMA Table 1). Ties are counted apart."
    )

# ---------------------------------------------------------------- why verdicts flipped (evaluators/runs/flips.py)
st.subheader("Why verdicts flipped")
# It reads every verdict of both runs (seconds per 10k items): big runs ask for it, small ones show it.
big = max(int(a["n_done"]), int(b["n_done"])) > FLIPS_AT_ONCE
if big and not state.synced(
    st.toggle,
    "Explain why verdicts flipped (reads every verdict of both runs)",
    "why",
    False,
    lambda s: s in ("1", "True"),
):
    st.stop()
flipped = walk.flipped(run_id, other)
causes = flipped.cause_counts()
st.markdown(f"**{flipped.n_flips}** verdicts flipped: " + " · ".join(f"**{n}** {c}" for c, n in causes.items()))
st.caption(
    "A claim (RP, GR), sub-question (SQC, RQC) or source (SP1) whose confident verdict changed, matched "
    "across runs by its text. Cause: the item's retrieved sources changed → retriever or chunking; the "
    "sources stayed the same and the response changed → prompt or generator; neither → judge (noise, or "
    "another judge or prompt). A verdict unsure or failed in either run is not a flip, and a component "
    "found in one run only cannot flip: both are counted apart (sources found in one run only are listed below, "
    "as added or dropped by the retriever)."
)
st.dataframe(markup.named_metrics(flipped.rollup), hide_index=True, key="flip_rollup", width="stretch")
if not flipped.items.empty:
    flip_items = walk.flip_list(flipped)
    flip_items.insert(0, "open", [ui.item_url(other, i, tab="Verdicts") for i in flip_items["item_id"]])
    widths = {
        "open": tables.OPEN_PX,
        "item_id": 70,
        "cause": 126,
        "flips": 45,
        "lost": 45,
        "gained": 55,
        "moved": 55,
        "metrics": 110,
    }
    moved = {  # named as the retriever's table below names them
        "sources_removed": st.column_config.NumberColumn(
            "sources dropped", help=f"retrieved in {markup.md(run_id)} only"
        ),
        "sources_added": st.column_config.NumberColumn("sources added", help=f"retrieved in {markup.md(other)} only"),
    }
    widths |= {"sources_removed": 125, "sources_added": 110}
    moved["moved"] = st.column_config.NumberColumn(
        "moved",
        format="%.2f",
        help="how far the judge's expectation moved: the sum of its flips' |p after − p before|; the list opens "
        "on the largest",
    )
    row = tables.clickable(flip_items, "flip_items", widths, {**tables.OPEN, **moved})
    if row is not None:
        # walks this list: ▶ Next is the item whose expectation moved next most
        walk.open_item("compare", other, flip_items["item_id"].iloc[row], "Verdicts", cl="flips")
if item_id:
    mine = flipped.for_item(item_id)
    st.markdown(f"**Flips of {markup.md(item_id)}**" + ("" if len(mine) else ": none"))
    if len(mine):
        mine = markup.named_metrics(mine.drop(columns="item_id").rename(columns={"before": run_id, "after": other}))
        # "what" keeps its word on one line ("sub-question"); the flipped text takes what is left
        what = tables.one_line_px(mine["what"], 50)
        widths = {"metric": 50, "what": what, "text": 320 - what, run_id: 90, other: 90, "p_before": 66, "p_after": 60}
        mine, rows = tables.fit(mine, widths)  # the flipped text wraps in its cell
        st.dataframe(
            mine,
            hide_index=True,
            key="item_flips",
            width="stretch",
            placeholder="",  # a verdict with no p
            **rows,
            column_config=tables.sized(by_run("its verdict"), widths | {"cause": 110}),
        )
        moved = flipped.source_changes[flipped.source_changes["item_id"] == item_id]
        for change in moved.itertuples(index=False):
            run = run_id if change.run == "a" else other
            verb = f"removed (was in {markup.md(run_id)})" if change.run == "a" else f"added (in {markup.md(other)})"
            st.markdown(
                f"Source {verb}: [{markup.md(ledger.source_name(change.text))}](Sources?{urlencode({'run': run, 'source': change.key})}) "
                f"`{change.key}`",
                help=f"`{change.key}` is its text key: {markup.TERMS['text key']}",
            )
compare_view.show_retrieval_changes(
    reads.read(queries.compare.retrieval_changes, run_id, other, band, state.corrected()),
    run_id,
    other,
    queries.compare.RETRIEVAL_METRICS,
)
