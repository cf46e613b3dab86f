"""Item: everything the engine stored for one item, laid out so a person sees why it scored as it did."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators import access, queries, store, ui
from evaluators.vocabulary import THELMA, display_name

path = ui.page("Item")
run_id, metric_ids, th = ui.current_run()
first = "" if st.query_params.get("item") else ui.read(queries.item_neighbours, run_id, "")[1]
item_id = ui.synced(st.sidebar.text_input, "Item id", "item", first or "", explicit=True)
d, (prev_id, next_id), notes = ui.read_all(ui.call(queries.item_detail, run_id, item_id),
                                           ui.call(queries.item_neighbours, run_id, item_id),
                                           ui.call(queries.triage_notes, run_id, item_id))
if d["item"].empty:
    st.warning(f"Run {run_id} has no item with id {item_id!r}.")
    st.stop()
item, comps, verdicts = d["item"].iloc[0], ui.records(d["components"]), ui.records(d["verdicts"])
calls = {c["key"]: c for c in ui.records(d["calls"])}
scores = d["scores"].set_index("metric")

nav = st.columns([3, 1, 1, 1])
nav[0].markdown(f"Run **{run_id}** · item `{item_id}`")
if prev_id:
    ui.page_link("item", "Previous", ui.link(item=prev_id), icon="⬅️", where=nav[1])
if next_id:
    ui.page_link("item", "Next", ui.link(item=next_id), icon="➡️", where=nav[2])
ui.page_link("run", "Item table", ui.link(), icon="📋", where=nav[3])

cols = st.columns(max(len(metric_ids), 1))
for col, m in zip(cols, metric_ids):
    if m in scores.index:
        s = scores.loc[m]
        col.metric(m.upper(), ui.fmt_score(s["value"], s["status"]), help=display_name(m))
        col.caption(f"{int(s['n_scored'])} of {int(s['n_total'])} scored")
    else:
        col.metric(m.upper(), "–", help="not evaluated for this item")

ok_scores = {m: (None if s["status"] != ui.OK or pd.isna(s["value"]) else float(s["value"]))
             for m, s in scores.iterrows()}
fired = ui.rules_table(ok_scores, th)
if fired.empty:
    st.success("No Table-2 rule fires for this item at the current thresholds.")
else:
    st.markdown("**Table-2 rules that fire** (component to fix in *fix*)")
    st.dataframe(fired, hide_index=True, key="item_rules", width="stretch")

def kind(name: str) -> list[ui.Record]:
    return sorted(ui.pick(comps, kind=name), key=lambda c: c["idx"])


tab_q, tab_s, tab_r, tab_t = st.tabs(["Query", "Sources", "Response", "Triage"])

with tab_q:
    ui.plain(item["query"])
    st.dataframe(ui.subquestion_table(comps, verdicts, len(item["sources"])), hide_index=True, key="subq_table",
                 width="stretch")
    st.caption("SQC: a sub-question is covered when one source or the whole set answers it. "
               "RQC: the response addresses it.")
    ui.verdict_expanders([v for v in verdicts if v["metric"] in ("sqc", "rqc") and v["target"] != "decompose"],
                         calls, lambda v: f"{v['metric'].upper()} · sub-question {v['component_idx']} vs {v['target']}")
    ui.verdict_expanders(ui.pick(verdicts, target="decompose"), calls,
                         lambda v: f"{v['metric'].upper()} · decomposition")

with tab_s:
    sp1, sp2 = ui.pick(verdicts, metric="sp1"), ui.pick(verdicts, metric="sp2")
    for j, text in enumerate(item["sources"]):
        st.markdown(f"**Source {j}** · SP1 {ui.verdict_cell(ui.pick(sp1, component_idx=j))}")
        facts = [c for c in kind("source_fact") if c["parent"] == j]
        body, missing = ui.highlight(text, ui.marks_for(facts, verdicts, ["sp2"]))
        ui.text_block(body)
        if facts:
            st.dataframe(ui.component_table(facts, verdicts, ["sp2"]), hide_index=True, key=f"facts_{j}",
                         width="stretch")
        ui.verdict_expanders(ui.pick(sp1, component_idx=j), calls, lambda v: f"SP1 · source {v['component_idx']}")
        fact_ids = {c["idx"] for c in facts}
        ui.verdict_expanders([v for v in sp2 if v["component_idx"] in fact_ids], calls,
                             lambda v: f"SP2 · fact {v['component_idx']}")

with tab_r:
    claims = kind("claim")
    body, missing = ui.highlight(item["response"], ui.marks_for(claims, verdicts, ["rp", "gr"]))
    ui.text_block(body or "<em>(empty response)</em>")
    st.caption("Claims are highlighted by GR (green supported, red unsupported, grey failed); hover for RP and GR. "
               f"{len(missing)} claim(s) are paraphrased and appear only in the table.")
    if claims:
        st.dataframe(ui.component_table(claims, verdicts, ["rp", "gr"]), hide_index=True, key="claims_table",
                     width="stretch")
    if sentences := kind("sentence"):
        st.markdown("**Self-distinctness (SD)**: each sentence against its most similar other sentence")
        st.dataframe(ui.component_table(sentences, verdicts, ["sd"]), hide_index=True, key="sd_table",
                     width="stretch")
    for m in ("rp", "gr", "sd"):
        ui.verdict_expanders([v for v in ui.pick(verdicts, metric=m) if v["target"] != "decompose"], calls,
                             lambda v: f"{v['metric'].upper()} · {v['component_kind']} {v['component_idx']}")
    ui.verdict_expanders([v for v in verdicts if v["metric"] not in THELMA], calls,
                         lambda v: f"{v['metric']} · {v['component_kind']} {v['component_idx']}")


def save_note(db: str, run: str, item: str) -> None:
    """The triage form's callback: the note is cleared only once it is saved; a refused or failed save
    keeps everything the user typed, with the reason above the form."""
    state = st.session_state
    try:
        access.save_note(ui.user(), db, run, item, state["triage_label"], state["triage_component"],
                         state["triage_note"], state.get("triage_author", ""), deadline_s=ui.SAVE_DEADLINE_S)
    except access.Refused as exc:
        state["triage_outcome"] = ("error", str(exc))
    except store.StoreBusy:
        state["triage_outcome"] = ("warning", "The database is busy, try again in a moment: your note is kept.")
    except ValueError as exc:
        state["triage_outcome"] = ("warning", str(exc))
    else:
        state["triage_note"] = ""
        state["triage_outcome"] = ("success", "Triage note saved.")


with tab_t:
    me = ui.user()
    outcome = st.session_state.pop("triage_outcome", None)
    if outcome:
        getattr(st, outcome[0])(outcome[1])
    if ui.read_only():
        st.info("Read-only mode: triage notes cannot be saved here.")
    elif not me.can(access.TRIAGER):
        st.info(f"You are a {me.role}: saving triage notes needs the triager role (ask an admin).")
    else:
        suggested = fired["fix"].iloc[0].split(" or ")[0] if len(fired) else ui.COMPONENTS[-1]
        with st.form("triage_form"):
            st.selectbox("Label", ui.LABELS, key="triage_label")
            st.selectbox("Component to blame", ui.COMPONENTS, key="triage_component",
                         index=ui.COMPONENTS.index(suggested) if suggested in ui.COMPONENTS else 0)
            st.text_area("Note", key="triage_note")
            if not me.email:  # with login the author is the login email
                st.text_input("Your name", key="triage_author")
            st.form_submit_button("Save triage note", on_click=save_note, args=(str(path), run_id, item_id))
    if outcome and outcome[0] == "success":  # the notes read above predate this save
        notes = ui.read(queries.triage_notes, run_id, item_id)
    if len(notes):
        st.dataframe(notes, hide_index=True, key="item_notes", width="stretch")
