"""Trends: metric means with their intervals over runs in time order, or over a timestamp in one run's
item metadata, against a chosen baseline (evaluators/metrics/trends.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.dashboard import charts, markup, reads, state, tables, ui
from evaluators.metrics import trends
from evaluators.storage import queries

ui.page("Trends")
runs = reads.runs()
if runs.empty:
    st.info("The database has no runs yet.")
    st.stop()
band = state.band_control()
by = state.synced(
    st.radio,
    "Trend over",
    "by",
    "runs",
    options=["runs", "time"],
    horizontal=True,
    format_func={"runs": "runs, in the order they were created", "time": "one run's item timestamps"}.get,
)

if by == "runs":
    oldest_first = runs.sort_values("created_at", kind="stable")
    ids = list(oldest_first["run_id"])
    thelma = reads.read(queries.runs.thelma_runs)
    chosen = state.synced(
        st.multiselect,
        "Runs",
        "runs",
        [r for r in ids if r in thelma] or ids,
        state.csv_list,
        remember=True,
        options=ids,
    )
    order = [r for r in ids if r in chosen]
    if not order:
        st.info("Pick one or more runs.")
        st.stop()
    baseline = state.synced(st.selectbox, "Baseline run", "base", order[0], options=order)
    read = reads.read(queries.trends.trend_scores, order, baseline, band)
    dates = dict(zip(oldest_first["run_id"], oldest_first["created_at"]))
    metric_ids = reads.metrics(*order)
else:
    run_id = ui.pick_run(runs, where=st)
    keys = reads.read(queries.runs.metadata_keys, run_id)
    if not keys:
        st.info("This run's items carry no metadata: nothing to read a timestamp from.")
        st.stop()
    guess = next(
        (
            k
            for k in keys
            if k.lower() in ("ts", "when")
            or k.lower().endswith("_at")
            or any(w in k.lower() for w in ("time", "date", "created"))
        ),
        keys[0],
    )
    c1, c2 = st.columns(2)
    key = state.synced(c1.selectbox, "Timestamp field (item metadata)", "ts", guess, options=keys)
    unit = state.synced(c2.radio, "Bucket", "unit", "day", options=list(trends.UNITS), horizontal=True)
    read = reads.read(queries.trends.trend_buckets, run_id, key, unit, band)
    totals = read["totals"]
    untimed = int(totals.loc[totals["point"].isna(), "n_items"].sum())
    order = [p for p in totals["point"] if isinstance(p, str)]
    if not order:
        st.info(
            f"No item of {markup.md(run_id)} has a readable timestamp in {markup.md(key)} (ISO text or seconds "
            "since the epoch): pick another field."
        )
        st.stop()
    if untimed:
        st.caption(
            f"{untimed} of {int(totals['n_items'].sum())} items have no readable timestamp in "
            f"{markup.md(key)} (ISO text or seconds since the epoch) and are left out."
        )
    baseline = state.synced(st.selectbox, f"Baseline {unit}", "base", order[0], options=order)
    dates = {}
    metric_ids = reads.metrics(run_id)

metric_ids = [m for m in metric_ids if m in set(read["dist"]["metric"])]
shown = state.synced(
    st.multiselect, "Metrics", "metrics", metric_ids, state.csv_list, options=metric_ids, format_func=str.upper
)
frame = trends.points(read["dist"], read["totals"], order, baseline, read.get("pairs"))
frame = frame[frame["metric"].isin(shown)]
if frame.empty:
    st.info("No scored metric to show.")
    st.stop()
st.plotly_chart(charts.trend_chart(frame, shown, order), key="trend_chart", config=charts.PLOT_CONFIG)
st.caption(charts.TREND_KEY)
table = pd.DataFrame(
    {
        "point": frame["point"],
        "created": [f"{dates[p]:%Y-%m-%d %H:%M}" if p in dates else None for p in frame["point"]],
        "metric": frame["metric"].str.upper(),
        "mean": frame["mean"].round(3),
        "95% CI": ["–" if pd.isna(lo) else f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(frame["low"], frame["high"])],
        "n scored": [f"{s} of {n}" for s, n in zip(frame["n_scored"], frame["n_total"])],
        "change vs baseline": [
            "baseline" if b else "–" if pd.isna(d) else f"{d:+.3f} [{lo:+.2f}, {hi:+.2f}]"
            for b, d, lo, hi in zip(frame["baseline"], frame["delta"], frame["delta_low"], frame["delta_high"])
        ],
        "real": [
            "" if b or pd.isna(d) else "✓ real" if r else "noise (CI spans 0)"
            for b, d, r in zip(frame["baseline"], frame["delta"], frame["real"])
        ],
        "test": frame["test"].fillna(""),
    }
)
# Widths that fit 1280 px beside the sidebar: a run's name and a count keep their line; a creation time, a
# change with its interval and "noise (CI spans 0)" wrap onto two.
widths = {"point": min(150, tables.one_line_px(table["point"], 60)), "created": 92, "metric": 60, "mean": 56}
widths |= {"95% CI": 90, "n scored": tables.one_line_px(table["n scored"], 72), "real": 80, "test": 72}
if by == "time":  # a bucket has no creation time
    table = table.drop(columns="created")
    del widths["created"]
widths["change vs baseline"] = max(110, tables.TABLE_PX - sum(widths.values()))
change_help = "The change of the mean against the baseline point, with its 95% interval."
tables.fitted(table, "trend_table", widths, {"change vs baseline": {"label": "change", "help": change_help}})
st.caption(
    "Means: percentile bootstrap over scored items (1000 resamples, fixed seed); unscored items are "
    "counted apart, never as 0. A change against the baseline is real when its 95% interval excludes 0. "
    "Test: **paired** bootstrap of per-item deltas when both runs scored exactly the same items (as in "
    "Compare), else **unpaired** bootstrap of the difference of means, each side resampled on its own "
    "(time buckets never share items)."
)
