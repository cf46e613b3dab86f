"""Triage: every note the team saved (label, blamed component, note, author, time), with a CSV export."""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import reads, state, ui
from evaluators.dashboard.views import walk
from evaluators.metrics.diagnosis import TRIAGE_LABELS

ui.page("Triage")
runs = reads.runs()
ALL = "(all runs)"
run_filter = state.synced(st.selectbox, "Run", "run", ALL, options=[ALL, *runs["run_id"]])
labels = state.synced(st.multiselect, "Labels", "labels", [], state.csv_list, options=list(TRIAGE_LABELS))
notes = walk.triage_notes(None if run_filter == ALL else run_filter, labels)
st.markdown(f"**{len(notes)}** triage notes")
if notes.empty:
    st.caption("Open an item and use its Triage tab to record a decision.")
    st.stop()
counts = notes.groupby(["component", "label"]).size().unstack(fill_value=0)
st.dataframe(counts, key="triage_counts")
table = notes.assign(open=[ui.item_url(r, i) for r, i in zip(notes["run_id"], notes["item_id"])])
# the note wraps in its cell; the widths fit 1280 px beside the row markers, each header whole
widths = {"created_at": 145, "run_id": 100, "item_id": 60, "label": 75, "component": 80, "note": 182}
row = ui.clickable(
    table,
    "triage_table",
    widths | {"author": 55, "open": ui.OPEN_PX},
    {
        **ui.OPEN,
        "created_at": st.column_config.DatetimeColumn("saved", format="YYYY-MM-DD HH:mm:ss"),
    },
)
st.caption("Click a row to open its item on its Triage tab; ▶ Next there walks these notes.")
if row is not None:  # fr="": the notes of every run
    walk.open_item(
        "triage", table["run_id"].iloc[row], table["item_id"].iloc[row], "Triage", fr="" if run_filter == ALL else None
    )
st.download_button(
    "Download CSV",
    notes.to_csv(index=False).encode("utf-8"),
    file_name="triage_notes.csv",
    mime="text/csv",
    key="triage_csv",
)
