"""Triage: every note the team saved (label, blamed component, note, author, time), with a CSV export."""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import reads, state, tables, ui
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
# ids keep their line (a run's name up to 140 px), each header whole; the note wraps in what is left of
# 1280 px beside the row markers
widths = {
    "created_at": 130,
    "run_id": min(140, tables.one_line_px(table["run_id"], 70)),
    "item_id": min(90, tables.one_line_px(table["item_id"], 60)),
    "label": 75,
    "component": 80,
    "author": 55,
    "open": tables.OPEN_PX,
}
widths["note"] = tables.TABLE_PX - tables.MARKERS_PX - sum(widths.values())
row = tables.clickable(
    table,
    "triage_table",
    widths,
    {**tables.OPEN, "created_at": st.column_config.DatetimeColumn("saved", format="YYYY-MM-DD HH:mm")},
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
