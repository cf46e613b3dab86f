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

from evaluators.core.records import Label
from evaluators.dashboard import access, ui
from evaluators.metrics.registry import THELMA, display_name
from evaluators.metrics.suites.reference import REFERENCE_CLAIM
from evaluators.storage import queries

path = ui.page("Item")
run_id, metric_ids, th = ui.current_run()
first = "" if st.query_params.get("item") else ui.read(queries.items.item_neighbours, run_id, "")[1]
item_id = ui.synced(st.sidebar.text_input, "Item id", "item", first or "", explicit=True)
d, (prev_id, next_id), notes, imported = ui.read_all(
    ui.call(queries.items.item_detail, run_id, item_id, ui.band(), ui.corrected()),
    ui.call(queries.items.item_neighbours, run_id, item_id), ui.call(queries.items.triage_notes, run_id, item_id),
    ui.call(queries.items.imported_item_scores, run_id, item_id))
if d["item"].empty:
    st.warning(f"Run {ui.md(run_id)} has no item with id {ui.md(repr(item_id))}.")
    st.stop()
item, comps, verdicts = d["item"].iloc[0], ui.records(d["components"]), ui.records(d["verdicts"])
judged = ui.by_component(verdicts)
texts = {(c["kind"], int(c["idx"])): c["text"] for c in comps}
scores = d["scores"].set_index("metric")

nav = st.columns([3, 1, 1, 1])
nav[0].markdown(f"Run **{ui.md(run_id)}** · item {ui.md(item_id)}")
ui.page_link("run", "Item table", ui.link(), icon="📋", where=nav[3])

cols = st.columns(max(len(metric_ids), 1))
for col, m in zip(cols, metric_ids):
    if m in scores.index:
        s = scores.loc[m]
        col.metric(m.upper(), ui.fmt_score(s["value"], s["status"]), help=display_name(m))
        col.caption(ui.score_counts(s["n_scored"], s["n_total"], s["n_unsure"]))
    else:
        col.metric(m.upper(), "–", help="not evaluated for this item")

# Peer scores that came with the input: shown apart, never part of our metrics or Table 2.
if not imported.empty:
    st.caption("Imported peer scores (from the input file, not ours): " + " · ".join(
        f"imported: {ui.md(o)} {ui.md(m)} {ui.fmt_score(v)}"  # – : the peer tool gave no score
        for o, m, v in zip(imported["origin"], imported["metric"], imported["value"])))

found, fired = ui.rules_table(ui.item_scores(d["scores"]), th)
if fired.empty:
    st.success("No Table-2 rule fires for this item at the current thresholds and band (a rule reads only "
               "metrics decided from enough confident verdicts).")
else:
    st.markdown("**Table-2 rules that fire** (component to fix in *fix*)")
    st.dataframe(fired, hide_index=True, key="item_rules", width="stretch")
    opened = set(ui.csv_list(st.query_params.get("rule", "")))
    for f in found:
        # Drawn once opened (a click reruns the page), like the raw exchanges below.
        box = st.expander(f"Evidence for {ui.rule_label(f.rule.id)}", expanded=f.rule.id in opened,
                          key=f"evidence:{f.rule.id}", on_change="rerun")
        if not box.open:
            continue
        with box:
            for c in f.conditions:
                rows, n_deciding, n_unsure = ui.rule_evidence(c.metric, c.level, verdicts, texts)
                left_out = f", {n_unsure} unsure left out" if n_unsure else ""
                st.markdown(f"**{c.metric.upper()} {c.level}** · {c.score.value:.2f} · "
                            f"{ui.score_counts(c.score.n_scored, c.score.n_total, c.score.n_unsure)} · "
                            f"{n_deciding} verdict(s) made it {c.level}{left_out}")
                st.dataframe(rows, hide_index=True, key=f"evidence_{f.rule.id}_{c.metric}", width="stretch")


def kind(name: str) -> list[ui.Record]:
    return sorted(ui.pick(comps, kind=name), key=lambda c: c["idx"])


def judged_on(shown: list[ui.Record], metrics: tuple[str, ...]) -> list[ui.Record]:
    """The verdicts of these metrics on the components shown, in stored order (metric first)."""
    keys = {(c["kind"], c["idx"]) for c in shown}
    return [v for v in verdicts if v["metric"] in metrics and v["target"] != "decompose"
            and (v["component_kind"], v["component_idx"]) in keys]


subquestions, claims, sentences = kind("subquestion"), kind("claim"), kind("sentence")
reference_claims = kind(REFERENCE_CLAIM)
# Claims are also checked against the reference where the run has the reference-based metrics.
claim_metrics = ["rp", "gr", *(m for m in ("ref_precision",) if m in metric_ids)]
facts_of: dict[int, list[ui.Record]] = {}
for fact in kind("source_fact"):
    facts_of.setdefault(fact["parent"], []).append(fact)
others = [v for v in verdicts if v["metric"] not in THELMA]


def calls_for(*groups: list[ui.Record]) -> dict[str, ui.Record]:
    """The judge calls behind these verdicts: the item's own when it has few, else only the ones shown."""
    keys = ui.exchange_keys(*groups)
    ahead = d["calls"]
    shown = ahead if set(keys) <= set(ahead["key"]) else ui.read(queries.items.judge_calls, keys)
    return {c["key"]: c for c in ui.records(shown)}


# Bound to ?tab=: only the open tab's container is .open; the others are left empty, never sent.
tab_q, tab_s, tab_r, tab_v, tab_t = st.tabs(ui.ITEM_TABS, key="tab", bind="query-params")
open_tab = None if tab_q.open else st.session_state["tab"]  # the default tab stays out of the URL
if prev_id:  # Previous / Next keep the open tab
    ui.page_link("item", "Previous", ui.link(item=prev_id, tab=open_tab), icon="⬅️", where=nav[1])
if next_id:
    ui.page_link("item", "Next", ui.link(item=next_id, tab=open_tab), icon="➡️", where=nav[2])

if tab_q.open:
    with tab_q:
        ui.plain(item["query"])
        lo, hi = ui.pager("Sub-questions", "subq_page", len(subquestions), ui.ITEM_PAGE)
        page_q = subquestions[lo:hi]
        st.dataframe(ui.subquestion_table(page_q, judged, len(item["sources"])), hide_index=True,
                     key="subq_table", width="stretch")
        st.caption("SQC: a sub-question is covered when one source or the whole set answers it. "
                   "RQC: the response addresses it.")
        exchanges_q = judged_on(page_q, ("sqc", "rqc")) + ui.pick(verdicts, target="decompose")
        lo, hi = ui.pager("Judge exchanges", "qx_page", len(exchanges_q), ui.ITEM_PAGE)
        exchanges_q = exchanges_q[lo:hi]
        ui.verdict_expanders(exchanges_q, calls_for(exchanges_q), lambda v: (
            f"{v['metric'].upper()} · decomposition" if v["target"] == "decompose" else
            f"{v['metric'].upper()} · sub-question {v['component_idx']} vs {v['target']}"))

if tab_s.open:
    with tab_s:
        lo, hi = ui.pager("Sources", "src_page", len(item["sources"]), ui.SOURCES_PAGE)
        page_s = range(lo, hi)
        sp1 = judged_on([{"kind": "source", "idx": j} for j in page_s], ("sp1",))
        sp2 = judged_on([f for j in page_s for f in facts_of.get(j, [])], ("sp2",))
        calls = calls_for(sp1, sp2)
        seen: dict[str, str] = {}
        for j in page_s:
            sp1_cell = ui.verdict_cell(ui.pick(judged.get(("source", j), []), metric="sp1"))
            st.markdown(f"**Source {j}** · SP1 {sp1_cell}")
            facts = facts_of.get(j, [])
            body, missing = ui.highlight(item["sources"][j], ui.marks_for(facts, judged, ["sp2"]))
            ui.text_block(body)
            ui.verdict_expanders([v for v in sp1 if v["component_idx"] == j], calls,
                                 lambda v: f"SP1 · source {v['component_idx']}", seen)
            fact_ids = {f["idx"] for f in facts}
            ui.verdict_expanders([v for v in sp2 if v["component_idx"] in fact_ids], calls,
                                 lambda v: f"SP2 · fact {v['component_idx']}", seen)
        if facts := [f for j in page_s for f in facts_of.get(j, [])]:  # one table: a grid per source is slow to draw
            st.markdown("**Source facts** (SP2: is the fact relevant to the query?)")
            st.dataframe(ui.component_table(facts, judged, ["sp2"]).assign(source=[f["parent"] for f in facts]),
                         hide_index=True, key="facts_table", width="stretch")

if tab_r.open:
    with tab_r:
        lo, hi = ui.pager("Claims", "claim_page", len(claims), ui.ITEM_PAGE)
        page_c, paged_c = claims[lo:hi], len(claims) > ui.ITEM_PAGE
        response, excerpt = item["response"], ""
        if paged_c:  # a page of claims shows the stretch of the response they come from, not 100s of KB
            first_at, last_at = response.find(page_c[0]["text"]), response.rfind(page_c[-1]["text"])
            if 0 <= first_at <= last_at:
                end = last_at + len(page_c[-1]["text"])
                response = response[first_at:end]
                excerpt = (f"Response characters {first_at + 1:,}–{end:,} of {len(item['response']):,}: "
                           "the claims of this page. ")
        body, missing = ui.highlight(response, ui.marks_for(page_c, judged, ["rp", "gr"]))
        if excerpt:
            st.caption(excerpt)
        ui.text_block(body or "<em>(empty response)</em>")
        st.caption(f"Claims{' of this page' if paged_c else ''} are highlighted by GR (green supported, red "
                   f"unsupported, grey failed); hover for RP and GR. {len(missing)} claim(s) are paraphrased and "
                   "appear only in the table.")
        if page_c:
            st.dataframe(ui.component_table(page_c, judged, claim_metrics), hide_index=True, key="claims_table",
                         width="stretch")
        if item["reference"]:  # the owner's golden answer: its claims, each checked against the response
            st.markdown("**Reference** (golden answer): its claims highlighted by REF_RECALL, whether the response "
                        "supports them")
            lo, hi = ui.pager("Reference claims", "refc_page", len(reference_claims), ui.ITEM_PAGE)
            page_rc = reference_claims[lo:hi]
            ui.text_block(ui.highlight(item["reference"], ui.marks_for(page_rc, judged, ["ref_recall"]))[0])
            if page_rc:
                st.dataframe(ui.component_table(page_rc, judged, ["ref_recall"]), hide_index=True,
                             key="reference_claims_table", width="stretch")
        lo, hi = ui.pager("Sentences", "sent_page", len(sentences), ui.ITEM_PAGE)
        page_sd = sentences[lo:hi]
        if page_sd:
            st.markdown("**Self-distinctness (SD)**: each sentence against its most similar other sentence")
            st.dataframe(ui.component_table(page_sd, judged, ["sd"]), hide_index=True, key="sd_table",
                         width="stretch")
        # Two lists of exchanges, each with its pager above it: slots filled after one read of their calls.
        on_claims = judged_on(page_c, ("rp", "gr"))
        exchanges_r = ui.pick(on_claims, metric="rp") + ui.pick(on_claims, metric="gr") + judged_on(page_sd, ("sd",))
        lo, hi = ui.pager("Judge exchanges", "rx_page", len(exchanges_r), ui.ITEM_PAGE)
        exchanges_r = exchanges_r[lo:hi]
        slot_rx = st.container()
        lo, hi = ui.pager("Reference-based and other suites' verdicts", "other_page", len(others), ui.ITEM_PAGE)
        exchanges_o = others[lo:hi]
        calls = calls_for(exchanges_r, exchanges_o)
        with slot_rx:
            ui.verdict_expanders(exchanges_r, calls,
                                 lambda v: f"{v['metric'].upper()} · {v['component_kind']} {v['component_idx']}")
        ui.verdict_expanders(exchanges_o, calls,
                             lambda v: f"{v['metric']} · {v['component_kind']} {v['component_idx']}")


def save_correction(db: str, run: str, item: str) -> None:
    """The correction form's callback: one verdict's right value, as this user; the outcome shows above it."""
    state = st.session_state
    metric, _, idx = state["fix_component"]
    label = Label(item, int(state["fix_value"] == "1"), metric=metric, component_idx=idx, note=state["fix_note"])
    if ui.save("fix_outcome", lambda: access.save_labels(ui.user(), db, run, [label], state.get("fix_author", ""),
                                                         deadline_s=ui.SAVE_DEADLINE_S),
               busy="your correction is kept.",
               done=f"Correction saved: {metric.upper()} component {idx} is {label.label}. "
                    "The judge's verdict stays; corrected scores use yours."):
        state["fix_note"] = ""


if tab_v.open:
    with tab_v:
        st.caption("Every verdict with p = P(match is 1), how p was obtained (p kind) and the judge tier that "
                   "decided it. A verdict whose p lies inside the uncertainty band reads *? unsure*: left out of its "
                   "score.")
        lo, hi = ui.pager("Verdicts", "verdict_page", len(verdicts), ui.VERDICT_PAGE)
        st.dataframe(ui.verdict_table(verdicts[lo:hi], texts),
                     hide_index=True, key="verdict_table", width="stretch")
        ui.show_outcome("fix_outcome")
        parts = sorted({(v["metric"], v["component_kind"], int(v["component_idx"])) for v in verdicts
                        if v["metric"] in THELMA and int(v["component_idx"]) >= 0})
        if parts and not ui.read_only() and ui.user().can(access.TRIAGER):
            with st.expander("Correct a verdict"):
                with st.form("fix_form"):
                    st.selectbox("Verdict", parts, key="fix_component",
                                 format_func=lambda mki: f"{mki[0].upper()} · {mki[1]} {mki[2]}: "
                                                         f"{texts.get((mki[1], mki[2]), '')[:80]}")
                    st.radio("Its right value", ["1", "0"], key="fix_value", horizontal=True,
                             help="1: supported / essential / covered / distinct; 0: not.")
                    st.text_input("Why the judge was wrong", key="fix_note")
                    if not ui.user().email:
                        st.text_input("Your name", key="fix_author")
                    st.form_submit_button("Save correction", on_click=save_correction,
                                          args=(str(path), run_id, item_id))


def save_note(db: str, run: str, item: str) -> None:
    """The triage form's callback: the note is cleared only once it is saved; a refused or failed save
    keeps everything the user typed, with the reason above the form."""
    state = st.session_state
    if ui.save("triage_outcome", lambda: access.save_note(
            ui.user(), db, run, item, state["triage_label"], state["triage_component"], state["triage_note"],
            state.get("triage_author", ""), deadline_s=ui.SAVE_DEADLINE_S),
            busy="your note is kept.", done="Triage note saved."):
        state["triage_note"] = ""


if tab_t.open:
    with tab_t:
        me = ui.user()
        outcome = ui.show_outcome("triage_outcome")
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
            notes = ui.read(queries.items.triage_notes, run_id, item_id)
        if len(notes):
            st.dataframe(notes, hide_index=True, key="item_notes", width="stretch")
