"""Trust: how far the judge agrees with the team's labels on a run, what to label next, and pairwise validation."""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import markup, reads, state, ui
from evaluators.dashboard.views import trust as view
from evaluators.runs import labelling

path = ui.page("Trust")
run_id, metric_ids, th = ui.current_run()
band = state.band()
report = labelling.judged(reads.read(labelling.labelled, run_id, band), th)  # a threshold change reads nothing
n_labels = sum(t.n_labelled for t in report.rows)
st.caption(
    f'Run **{markup.md(run_id)}** · {n_labels} labelled calls. A rule\'s call is "fired" at the thresholds in '
    "the sidebar, a metric's call is its verdict; labels come from the review queue below, corrections on "
    "the Item page, imported files, and confirmed / false-alarm triage notes."
)

refused = view.label_refusal()  # each labelling form says why it is not there
# Bound to ?tab=: only the open tab is drawn (and its reads made), the others are never sent.
tab_agree, tab_next, tab_import, tab_pairs = st.tabs(
    ["Agreement", "Label next", "Import labels", "Pairs"], key="tab", bind="query-params"
)
for tab, draw in (
    (tab_agree, lambda: view.agreement_tab(run_id, report)),
    (tab_next, lambda: view.next_tab(path, run_id, th, band, refused)),
    (tab_import, lambda: view.import_tab(path, run_id, refused)),
    (tab_pairs, lambda: view.pairs_tab(run_id)),
):
    if tab.open:
        with tab:
            draw()
