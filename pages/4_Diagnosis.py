"""Diagnosis: THELMA Table 2 (and our rule X1) over a whole run: which rules fire, where, and which
component to fix first."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators.dashboard import charts, markup, reads, state, tables, ui
from evaluators.dashboard.views import diagnosis as diagnosis_view
from evaluators.dashboard.views import walk
from evaluators.metrics.diagnosis import MAX_UNSURE_SHARE, MIN_SCORED, QUADRANTS, RULES, SHARED_CLAIMS
from evaluators.storage import queries

ui.page("Diagnosis")
run_id, metric_ids, th = ui.current_run()
pairs = [(x, y, r) for x, y, r in QUADRANTS if x in metric_ids and y in metric_ids]
combos = reads.folded(queries.diagnosis.rule_counts, [run_id], th, [(x, y) for x, y, _ in pairs])
n_items = int(combos["n"].sum())
st.caption(
    f"Run **{markup.md(run_id)}** · {n_items} items · a metric is low below its threshold (sidebar) and high at "
    "or above it; an unscored metric is neither, and so is one decided from too few confident verdicts "
    f"(fewer than {MIN_SCORED}, or more than {MAX_UNSURE_SHARE:.0%} unsure at the uncertainty band), so "
    "rules that need it do not fire. Rules marked *(ours)* are not THELMA's: X1 names a generator that "
    "makes things up while retrieval covers the query, a case Table 2 has no row for."
)

first = queries.diagnosis.first_items(combos)
rows = []
for rid in RULES:
    n = int(combos.loc[combos[rid], "n"].sum())
    rule = RULES[rid]
    rows.append(
        {
            "rule": rule.name,
            "pattern": rule.pattern,
            "meaning": rule.meaning,
            "fix": rule.components,
            "items": n,
            "share": n / n_items if n_items else 0.0,
            "open": ui.page_url("run", run=run_id, rule=rid),
            "evidence": ui.item_url(run_id, first[rid], rid) if first.get(rid) else None,
            "id": rid,
        }
    )
table = pd.DataFrame(rows).sort_values(["items", "rule"], ascending=[False, True])
st.subheader("Rules, ranked by the items that fire them")
row = tables.clickable(
    table.drop(columns="id"),
    "rules_table",
    {"rule": 70, "pattern": 120, "meaning": 165, "fix": 110, "items": 60, "share": 80, "open": 80, "evidence": 70},
    {
        "share": st.column_config.ProgressColumn("share", format="percent", min_value=0.0, max_value=1.0),
        "open": st.column_config.LinkColumn("open", display_text="open items"),
        "evidence": st.column_config.LinkColumn("evidence", display_text="first item"),
    },
    placeholder="",  # a rule that fires on no item has no first item
)
st.caption(
    "Click a rule's row to open its first item on the rule's evidence; ▶ Next there walks the items it fires on."
)
if row is not None and first.get(rid := table["id"].iloc[row]):
    walk.open_item("diagnosis", run_id, first[rid], rule=rid)
for rid, n in zip(table["id"], table["items"]):
    if n:
        ui.page_link(
            "run", f"{markup.rule_label(rid)}: {markup.n_items(int(n))}", ui.link(run=run_id, rule=rid), icon="📋"
        )

# Two rules, one item: which explains it is told by its claims (diagnosis.SHARED_CLAIMS). The count is free;
# the claims are read when asked (every RP and GR verdict of those items).
x1, t25 = SHARED_CLAIMS
n_both = int(combos.loc[combos[x1] & combos[t25], "n"].sum())
if n_both:
    label = f"{RULES[x1].name} and {RULES[t25].name} fire together on {markup.n_items(n_both)}: which explains them"
    with st.expander(label, key="shared_open", on_change="rerun") as shared:
        if shared.open:
            split = reads.derived(
                queries.diagnosis.shared_claims, [run_id], str(reads.db_path()), run_id, th, state.band()
            )
            st.markdown(diagnosis_view.shared_claims_text(split))
            st.caption(
                "Among each item's claims that RP reads as not essential to the query: when GR finds most of them "
                f"unsupported by the sources, the generator made them up ({RULES[x1].name}, fix the generator); "
                f"when GR finds them supported, they are grounded but off the question ({RULES[t25].name}, "
                "fix the prompt or the chunking). Unsure verdicts are left out."
            )

st.subheader("Fix this first")
fixes: dict[str, list[str]] = {}
for rid, rule in RULES.items():
    for component in rule.components.split(" or "):
        fixes.setdefault(component, []).append(rid)
ranked = []
for component, rids in fixes.items():  # distinct items: an item firing two rules that blame it counts once
    n = int(combos.loc[combos[rids].any(axis=1), "n"].sum())
    if n:
        ranked.append((n, component, rids))
if not ranked:
    st.success("No Table-2 rule fires in this run at these thresholds.")
for rank, (n, component, rids) in enumerate(sorted(ranked, key=lambda r: (-r[0], r[1])), start=1):
    st.markdown(
        f"{rank}. **{component}**: {markup.n_items(n)} ({n / n_items:.0%}), via "
        f"{', '.join(RULES[r].name for r in rids)}"
    )

st.subheader("Quadrants")
# Each pair's counts cover all items and are drawn as a small grid above its links; the scatter plots
# of a sample of items are drawn on demand in their place: each is a sample of points the browser
# redraws on every threshold change.
plots = state.synced(st.toggle, "Scatter plots of a sample of items", "plots", False, lambda s: s in ("1", "True"))
sample = reads.derived(queries.diagnosis.sample_points, [run_id], metric_ids) if plots else None
if sample is not None and len(sample) < n_items:
    st.caption(f"Points: a fixed sample of {len(sample)} items; the counts cover all items.")
cols = st.columns(2)
for i, (x, y, rule_ids) in enumerate(pairs):
    counts = diagnosis_view.quadrant_counts(combos, x, y)
    with cols[i % 2]:
        st.markdown(f"**{x.upper()} × {y.upper()}** ({rule_ids})")
        if sample is None:
            figure = charts.quadrant_grid(counts, x, y, th, diagnosis_view.quadrant_rules(x, y))
        else:
            figure = charts.quadrant(sample.dropna(subset=[x, y]), x, y, th, counts)
        st.plotly_chart(figure, key=f"quad_{x}_{y}", config=charts.PLOT_CONFIG)
        for x_low, y_low, n in counts.sort_values(["x_low", "y_low"], ascending=False).itertuples(index=False):
            lx, ly = ("low" if x_low else "high"), ("low" if y_low else "high")
            ui.page_link(
                "run",
                f"{x.upper()} {lx} · {y.upper()} {ly}: {markup.n_items(int(n))}",
                ui.link(run=run_id, quad=f"{x}:{lx},{y}:{ly}"),
            )
st.caption(
    "Each grid counts the items in the four quadrants of its metric pair at the sidebar's thresholds (low "
    "below, high at or above): darker squares hold more items, and a square names the rules that fire "
    "there (T2.6 also needs RQC high). An item whose metric is unscored or undecided is in no quadrant. "
    "The links open those items."
)
