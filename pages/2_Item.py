"""Item: everything the engine stored for one item, laid out so a person sees why it scored as it did.

Long lists (sub-questions, sources, claims, sentences, other suites' verdicts) are drawn a page at a
time with the page number in the URL; an item with many judge calls reads only those behind the
verdicts shown (one with few gets them with its other rows).
Only the open tab is drawn (a browser redraws every element sent, hidden or not); it is in the URL
(?tab=Verdicts), so a link can open an item on the tab it means.
Scores and verdicts are read at the URL's uncertainty band; each fired Table-2 rule opens onto the
verdicts that made its metrics low or high (?rule= opens it on arrival).
"""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import markup, reads, state, tables, ui
from evaluators.dashboard.views import item as item_view
from evaluators.dashboard.views import item_tabs, walk
from evaluators.metrics.registry import display_name
from evaluators.storage import queries

path = ui.page("Item")
run_id, metric_ids, th = ui.current_run()
first = "" if st.query_params.get("item") else reads.read(queries.items.item_neighbours, run_id, "")[1]
item_id = state.synced(st.sidebar.text_input, "Item id", "item", first or "", explicit=True)
d, notes, imported = reads.read_all(
    reads.call(queries.items.item_detail, run_id, item_id, state.band(), state.corrected()),
    reads.call(queries.items.triage_notes, run_id, item_id),
    reads.call(queries.items.imported_item_scores, run_id, item_id),
)
if d["item"].empty:
    st.warning(f"Run {markup.md(run_id)} has no item with id {markup.md(repr(item_id))}.")
    st.stop()
shown = item_tabs.Shown(
    d["item"].iloc[0], markup.records(d["components"]), markup.records(d["verdicts"]), d["calls"], run_id, metric_ids
)
scores = d["scores"].set_index("metric")

nav = st.columns([3, 1, 1, 1])
nav[0].markdown(f"Run **{markup.md(run_id)}** · item {markup.md(item_id)}")
back = walk.back()
ui.page_link(back.page, f"Back to {ui.PAGES[back.page].title}", back.params, icon="↩️", where=nav[1])

# A score's expected value (the mean of its verdicts' p) ranks answers more finely than its 0/1 share; it
# reads the judge's own verdicts, so a reading with people's corrections has none.
expected = item_view.expected_captions(d["expected"])
EXPECTED = ". Expected: the mean of its verdicts' p (how sure the judge is of a 1), unsure ones included."
cols = st.columns(max(len(metric_ids), 1))
for col, m in zip(cols, metric_ids):
    if m in scores.index:
        s = scores.loc[m]
        value, caption = markup.score_card(
            s["value"], s["status"], markup.score_counts(s["n_scored"], s["n_total"], s["n_unsure"])
        )
        col.metric(m.upper(), value, help=display_name(m) + (EXPECTED if m in expected else ""))
        col.caption(caption)
        if m in expected:
            col.caption(expected[m])
    else:
        col.metric(m.upper(), "–", help="not evaluated for this item")

# Peer scores that came with the input: shown apart, never part of our metrics or Table 2.
if not imported.empty:
    st.caption(
        "Imported peer scores (from the input file, not ours): "
        + " · ".join(
            f"imported: {markup.md(o)} {markup.md(m)} {markup.fmt_score(v)}"  # – : the peer tool gave no score
            for o, m, v in zip(imported["origin"], imported["metric"], imported["value"])
        )
    )

found, fired = item_view.rules_table(item_view.item_scores(d["scores"]), th)
if fired.empty:
    st.success(
        "No Table-2 rule fires for this item at the current thresholds and band (a rule reads only "
        "metrics decided from enough confident verdicts)."
    )
else:
    st.markdown("**Table-2 rules that fire** (component to fix in *fix*)")
    tables.fitted(fired, "item_rules", item_view.RULES_PX)
    item_tabs.rule_evidence(found, shown)

# Bound to ?tab=: only the open tab's container is .open; the others are left empty, never sent.
tab_q, tab_s, tab_r, tab_v, tab_t = st.tabs(item_view.ITEM_TABS, key="tab", bind="query-params")
open_tab = None if tab_q.open else st.session_state["tab"]  # the default tab stays out of the URL
# Previous / Next walk the list the item came from (Run's filtered page, Triage's notes, ...) on the open tab
for where, step, label in zip(nav[2:], walk.steps(run_id, item_id, metric_ids, th, open_tab), ("◀ Previous", "▶ Next")):
    if step:
        ui.page_link(step.page, label, step.params, where=where)
for tab, draw in (
    (tab_q, lambda: item_tabs.query_tab(shown)),
    (tab_s, lambda: item_tabs.sources_tab(shown)),
    (tab_r, lambda: item_tabs.response_tab(shown)),
    (tab_v, lambda: item_tabs.verdicts_tab(shown, str(path), item_id)),
    (tab_t, lambda: item_tabs.triage_tab(shown, fired, notes, str(path), item_id)),
):
    if tab.open:
        with tab:
            draw()
