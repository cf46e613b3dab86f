"""The Item page's tabs and its rules' evidence, each drawn only when open (a browser redraws every
element sent, hidden or not). Long lists come a page at a time, with the page number in the URL; the
judge calls behind the verdicts shown are read with them (an item with few calls has them already)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import streamlit as st

from evaluators.core.records import Label
from evaluators.dashboard import access, markup, reads, state, tables, ui
from evaluators.dashboard.markup import Record
from evaluators.dashboard.views import item as view
from evaluators.metrics.diagnosis import COMPONENTS, TRIAGE_LABELS, Fired
from evaluators.metrics.registry import THELMA
from evaluators.metrics.suites.reference import REFERENCE_CLAIM
from evaluators.storage import queries

COMPONENT_PX = 420  # a component's text in its table at 1280 px; its verdict columns take the rest
SUBQUESTION_MIN_PX, VERDICT_PX = 160, 90


@dataclass
class Shown:
    """One item as the page shows it: its row, components and verdicts (joined once), and the judge calls
    read with them."""

    item: Any
    comps: list[Record]
    verdicts: list[Record]
    calls: pd.DataFrame
    run_id: str
    metric_ids: list[str]
    judged: view.Judged = field(init=False)
    texts: dict[tuple[str, int], str] = field(init=False)

    def __post_init__(self) -> None:
        self.judged = view.by_component(self.verdicts)
        self.texts = {(c["kind"], int(c["idx"])): c["text"] for c in self.comps}

    def kind(self, name: str) -> list[Record]:
        """The components of one kind, in index order."""
        return sorted(view.pick(self.comps, kind=name), key=lambda c: c["idx"])

    def judged_on(self, shown: list[Record], metrics: tuple[str, ...]) -> list[Record]:
        """The verdicts of these metrics on the components shown, in stored order (metric first)."""
        keys = {(c["kind"], c["idx"]) for c in shown}
        return [
            v
            for v in self.verdicts
            if v["metric"] in metrics
            and v["target"] != "decompose"
            and (v["component_kind"], v["component_idx"]) in keys
        ]

    def calls_for(self, *groups: list[Record]) -> dict[str, Record]:
        """The judge calls behind these verdicts: the item's own when it has few, else only the ones shown."""
        keys = view.exchange_keys(*groups)
        shown = self.calls if set(keys) <= set(self.calls["key"]) else reads.read(queries.items.judge_calls, keys)
        return {c["key"]: c for c in markup.records(shown)}

    def facts_of(self) -> dict[int, list[Record]]:
        """Source facts by the source they come from."""
        out: dict[int, list[Record]] = {}
        for fact in self.kind("source_fact"):
            out.setdefault(fact["parent"], []).append(fact)
        return out


def rule_evidence(found: list[Fired], shown: Shown) -> None:
    """One expander per fired rule, opening onto the verdicts that made each of its metrics low or high
    (?rule= opens it on arrival); drawn once opened (a click reruns the page)."""
    opened = set(state.csv_list(st.query_params.get("rule", "")))
    for f in found:
        box = st.expander(
            f"Evidence for {markup.rule_label(f.rule.id)}",
            expanded=f.rule.id in opened,
            key=f"evidence:{f.rule.id}",
            on_change="rerun",
        )
        if not box.open:
            continue
        with box:
            for c in f.conditions:
                rows, n_deciding, n_unsure = view.rule_evidence(c.metric, c.level, shown.verdicts, shown.texts)
                left_out = f", {n_unsure} unsure left out" if n_unsure else ""
                score = view.condition_score(c)
                st.markdown(
                    f"**{c.metric.upper()} {c.level}** · {score.value:.2f} · "
                    f"{markup.score_counts(*view.counts(score))} · "
                    f"{n_deciding} verdict(s) made it {c.level}{left_out}"
                )
                _verdict_rows(rows, f"evidence_{f.rule.id}_{c.metric}")


def query_tab(shown: Shown) -> None:
    """The query with its sub-questions, their coverage verdicts and the judge's exchanges."""
    markup.plain(shown.item["query"])
    subquestions = shown.kind("subquestion")
    lo, hi = view.pager("Sub-questions", "subq_page", len(subquestions), view.ITEM_PAGE)
    page_q = subquestions[lo:hi]
    table, widths = subquestion_layout(view.subquestion_table(page_q, shown.judged, len(shown.item["sources"])))
    _components(table, "subq_table", widths)
    st.caption(
        "SQC: a sub-question is covered when one source or the whole set answers it. RQC: the response addresses it."
    )
    exchanges = shown.judged_on(page_q, ("sqc", "rqc")) + view.pick(shown.verdicts, target="decompose")
    lo, hi = view.pager("Judge exchanges", "qx_page", len(exchanges), view.ITEM_PAGE)
    exchanges = exchanges[lo:hi]
    view.verdict_expanders(
        exchanges,
        shown.calls_for(exchanges),
        lambda v: (
            f"{v['metric'].upper()} · decomposition"
            if v["target"] == "decompose"
            else f"{v['metric'].upper()} · sub-question {v['component_idx']} vs {v['target']}"
        ),
    )


def sources_tab(shown: Shown) -> None:
    """Every source with its SP1 verdict and its facts highlighted by SP2, a page of sources at a time."""
    sources, facts_of = shown.item["sources"], shown.facts_of()
    lo, hi = view.pager("Sources", "src_page", len(sources), view.SOURCES_PAGE)
    page_s = range(lo, hi)
    sp1 = shown.judged_on([{"kind": "source", "idx": j} for j in page_s], ("sp1",))
    sp2 = shown.judged_on([f for j in page_s for f in facts_of.get(j, [])], ("sp2",))
    calls = shown.calls_for(sp1, sp2)
    seen: dict[str, str] = {}
    for j in page_s:
        sp1_cell = view.verdict_cell(view.pick(shown.judged.get(("source", j), []), metric="sp1"))
        st.markdown(f"**Source {j}** · SP1 {sp1_cell}")
        facts = facts_of.get(j, [])
        body, missing = markup.highlight(sources[j], view.marks_for(facts, shown.judged, ["sp2"]))
        markup.text_block(body)
        view.verdict_expanders(
            [v for v in sp1 if v["component_idx"] == j], calls, lambda v: f"SP1 · source {v['component_idx']}", seen
        )
        fact_ids = {f["idx"] for f in facts}
        view.verdict_expanders(
            [v for v in sp2 if v["component_idx"] in fact_ids],
            calls,
            lambda v: f"SP2 · fact {v['component_idx']}",
            seen,
        )
    st.caption(
        f"A source's facts are highlighted by SP2's verdict ({markup.COLOUR_LEGEND}: green relevant to the query)."
    )
    if facts := [f for j in page_s for f in facts_of.get(j, [])]:  # one table: a grid per source is slow to draw
        st.markdown("**Source facts** (SP2: is the fact relevant to the query?)")
        _components(
            view.component_table(facts, shown.judged, ["sp2"]).assign(source=[f["parent"] for f in facts]),
            "facts_table",
        )


def subquestion_layout(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """view.subquestion_table as it is drawn, with its widths: a column per source while they fit
    tables.TABLE_PX, else the sources folded into one column (view.fold_sources), so it never scrolls sideways."""
    widths = subquestion_px(table)
    if sum(widths.values()) <= tables.TABLE_PX:
        return table, widths
    folded = view.fold_sources(table)
    return folded, subquestion_px(folded)


def subquestion_px(table: pd.DataFrame) -> dict[str, int]:
    """Widths for view.subquestion_table (tables.sized): each verdict column as wide as its longest cell, at
    most VERDICT_PX (a longer cell wraps at its spaces: "? unsure · p 0.50"), and never narrower than its
    header (a tenth wider: headers are drawn bold); the sub-question's text wraps in what is left of
    tables.TABLE_PX, SUBQUESTION_MIN_PX at the least. With its sources folded (view.fold_sources) the
    sub-question and the sources' column share what is left, half each."""
    widths = {"#": 40}
    for name in table.columns[2:]:
        if name != view.EACH_SOURCE:
            cells = min(VERDICT_PX, tables.one_line_px(map(str, table[name]), 0))
            widths[str(name)] = math.ceil(max(cells, tables.text_px(str(name)) * 1.1 + tables.CELL_PAD_PX))
    rest = tables.TABLE_PX - sum(widths.values())
    if view.EACH_SOURCE not in table:
        return {**widths, "sub-question": max(SUBQUESTION_MIN_PX, rest)}
    return {**widths, "sub-question": rest - rest // 2, view.EACH_SOURCE: rest // 2}


def _components(table: pd.DataFrame, key: str, widths: dict[str, int] | None = None) -> None:
    """A table of components (view.component_table): their text, in the column named by their kind, wraps
    in COMPONENT_PX (or the given `widths`); the other columns fit their content, and an SD pair without a
    similarity is empty."""
    widths = widths or {"#": 40, str(table.columns[1]): COMPONENT_PX}
    tables.fitted(table, key, widths, placeholder="")


def _verdict_rows(table: pd.DataFrame, key: str) -> None:
    """Verdicts as rows (view.EVIDENCE_COLUMNS): the component's text and the judge's reason wrap in their
    cells, cut with '…' past tables.MAX_LINES lines; a click on a row shows both whole below the table."""
    p = {"p": st.column_config.NumberColumn("p", format="%.2f", help="the judge's probability that the verdict is 1")}
    if (row := tables.clickable(table, key, view.EVIDENCE_PX, p, placeholder="")) is None:
        st.caption("Click a row for its text and the judge's reason in full.")
        return
    v = table.iloc[row]
    st.markdown(f"**{v['metric']} · {markup.md(v['component'])} · {markup.md(v['verdict'])}**")
    markup.plain(str(v["text"]))
    st.markdown("The judge's reason:")
    markup.plain("" if v["detail"] is None else str(v["detail"]))


def _response_excerpt(response: str, page_c: list[Record]) -> tuple[str, str]:
    """A page of claims shows the stretch of the response they come from, not 100s of KB: the stretch
    and a caption saying which it is."""
    first_at, last_at = response.find(page_c[0]["text"]), response.rfind(page_c[-1]["text"])
    if not 0 <= first_at <= last_at:
        return response, ""
    end = last_at + len(page_c[-1]["text"])
    return response[first_at:end], (
        f"Response characters {first_at + 1:,}–{end:,} of {len(response):,}: the claims of this page. "
    )


def response_tab(shown: Shown) -> None:
    """The response with its claims highlighted by RP and GR, the reference's claims, SD's sentences, and
    the judge's exchanges (THELMA's, then the reference-based and other suites')."""
    claims = shown.kind("claim")
    lo, hi = view.pager("Claims", "claim_page", len(claims), view.ITEM_PAGE)
    page_c, paged_c = claims[lo:hi], len(claims) > view.ITEM_PAGE
    response, excerpt = shown.item["response"], ""
    if paged_c:
        response, excerpt = _response_excerpt(response, page_c)
    body, missing = markup.highlight(response, view.marks_for(page_c, shown.judged, ["rp", "gr"]))
    if excerpt:
        st.caption(excerpt)
    markup.text_block(body or "<em>(empty response)</em>")
    st.caption(
        f"Claims{' of this page' if paged_c else ''} are highlighted by GR's verdict ({markup.COLOUR_LEGEND}: "
        f"green supported, red unsupported); hover for RP and GR. {len(missing)} claim(s) are paraphrased and "
        "appear only in the table."
    )
    # Claims are also checked against the reference where the run has the reference-based metrics.
    claim_metrics = ["rp", "gr", *(m for m in ("ref_precision",) if m in shown.metric_ids)]
    if page_c:
        _components(view.component_table(page_c, shown.judged, claim_metrics), "claims_table")
    if shown.item["reference"]:
        _reference(shown)
    sentences = shown.kind("sentence")
    lo, hi = view.pager("Sentences", "sent_page", len(sentences), view.ITEM_PAGE)
    page_sd = sentences[lo:hi]
    if page_sd:
        st.markdown("**Self-distinctness (SD)**: each sentence against its most similar other sentence")
        _components(view.component_table(page_sd, shown.judged, ["sd"]), "sd_table")
    _response_exchanges(shown, page_c, page_sd)


def _reference(shown: Shown) -> None:
    """The owner's golden answer: its claims, each checked against the response."""
    st.markdown(
        "**Reference** (golden answer): its claims highlighted by REF_RECALL, whether the response supports them "
        f"({markup.COLOUR_LEGEND})"
    )
    reference_claims = shown.kind(REFERENCE_CLAIM)
    lo, hi = view.pager("Reference claims", "refc_page", len(reference_claims), view.ITEM_PAGE)
    page_rc = reference_claims[lo:hi]
    markup.text_block(
        markup.highlight(shown.item["reference"], view.marks_for(page_rc, shown.judged, ["ref_recall"]))[0]
    )
    if page_rc:
        _components(view.component_table(page_rc, shown.judged, ["ref_recall"]), "reference_claims_table")


def _response_exchanges(shown: Shown, page_c: list[Record], page_sd: list[Record]) -> None:
    """Two lists of exchanges, each with its pager above it: slots filled after one read of their calls."""
    on_claims = shown.judged_on(page_c, ("rp", "gr"))
    exchanges_r = (
        view.pick(on_claims, metric="rp") + view.pick(on_claims, metric="gr") + shown.judged_on(page_sd, ("sd",))
    )
    lo, hi = view.pager("Judge exchanges", "rx_page", len(exchanges_r), view.ITEM_PAGE)
    exchanges_r = exchanges_r[lo:hi]
    slot_rx = st.container()
    others = [v for v in shown.verdicts if v["metric"] not in THELMA]
    lo, hi = view.pager("Reference-based and other suites' verdicts", "other_page", len(others), view.ITEM_PAGE)
    exchanges_o = others[lo:hi]
    calls = shown.calls_for(exchanges_r, exchanges_o)
    with slot_rx:
        view.verdict_expanders(
            exchanges_r, calls, lambda v: f"{v['metric'].upper()} · {v['component_kind']} {v['component_idx']}"
        )
    view.verdict_expanders(exchanges_o, calls, lambda v: f"{v['metric']} · {v['component_kind']} {v['component_idx']}")


def _save_correction(db: str, run: str, item: str) -> None:
    """The correction form's callback: one verdict's right value, as this user; the outcome shows above it."""
    state = st.session_state
    metric, _, idx = state["fix_component"]
    label = Label(item, int(state["fix_value"] == "1"), metric=metric, component_idx=idx, note=state["fix_note"])
    if ui.save(
        "fix_outcome",
        lambda: access.save_labels(
            ui.user(), db, run, [label], state.get("fix_author", ""), deadline_s=ui.SAVE_DEADLINE_S
        ),
        busy="your correction is kept.",
        done=f"Correction saved: {metric.upper()} component {idx} is {label.label}. "
        "The judge's verdict stays; corrected scores use yours.",
    ):
        state["fix_note"] = ""


def verdicts_tab(shown: Shown, db: str, item_id: str) -> None:
    """Every verdict with p, p kind and tier; a triager may correct one."""
    st.caption(
        "Every verdict with p = P(match is 1), how p was obtained (p kind) and the judge tier that "
        "decided it. A verdict whose p lies inside the uncertainty band reads *? unsure*: left out of its "
        "score."
    )
    lo, hi = view.pager("Verdicts", "verdict_page", len(shown.verdicts), view.VERDICT_PAGE)
    _verdict_rows(view.verdict_table(shown.verdicts[lo:hi], shown.texts), "verdict_table")
    ui.show_outcome("fix_outcome")
    parts = sorted(
        {
            (v["metric"], v["component_kind"], int(v["component_idx"]))
            for v in shown.verdicts
            if v["metric"] in THELMA and int(v["component_idx"]) >= 0
        }
    )
    if parts and (refused := ui.write_refusal(access.TRIAGER, "correcting a verdict", "corrections")):
        st.info(refused)  # where the form would be: a viewer sees why there is none
    elif parts:
        with st.expander("Correct a verdict"):
            with st.form("fix_form"):
                st.selectbox(
                    "Verdict",
                    parts,
                    key="fix_component",
                    format_func=lambda mki: (
                        f"{mki[0].upper()} · {mki[1]} {mki[2]}: {shown.texts.get((mki[1], mki[2]), '')[:80]}"
                    ),
                )
                st.radio(
                    "Its right value",
                    ["1", "0"],
                    key="fix_value",
                    horizontal=True,
                    help="1: supported / essential / covered / distinct; 0: not.",
                )
                st.text_input("Why the judge was wrong", key="fix_note")
                author("fix_author")
                st.form_submit_button("Save correction", on_click=_save_correction, args=(db, shown.run_id, item_id))


def author(key: str) -> str:
    """Inside a form: who the note or label is signed as (the login email, or without login the server's OS
    user, User.signature), said in a caption; a name field only when neither is known."""
    if signed := ui.user().signature:
        st.caption(f"Signed as {markup.md(signed)}.")
        return signed
    return st.text_input("Your name", key=key)


def _save_note(db: str, run: str, item: str) -> None:
    """The triage form's callback: the note is cleared only once it is saved; a refused or failed save
    keeps everything the user typed, with the reason above the form."""
    state = st.session_state
    if ui.save(
        "triage_outcome",
        lambda: access.save_note(
            ui.user(),
            db,
            run,
            item,
            state["triage_label"],
            state["triage_component"],
            state["triage_note"],
            state.get("triage_author", ""),
            deadline_s=ui.SAVE_DEADLINE_S,
        ),
        busy="your note is kept.",
        done="Triage note saved.",
    ):
        state["triage_note"] = ""


def triage_tab(shown: Shown, fired: pd.DataFrame, notes: pd.DataFrame, db: str, item_id: str) -> None:
    """The triage form (the component the first fired rule names, suggested) and the item's notes."""
    outcome = ui.show_outcome("triage_outcome")
    if refused := ui.write_refusal(access.TRIAGER, "saving triage notes", "triage notes"):
        st.info(refused)
    else:
        suggested = fired["fix"].iloc[0].split(" or ")[0] if len(fired) else COMPONENTS[-1]
        with st.form("triage_form"):
            st.selectbox("Label", TRIAGE_LABELS, key="triage_label")
            st.selectbox(
                "Component to blame",
                COMPONENTS,
                key="triage_component",
                index=COMPONENTS.index(suggested) if suggested in COMPONENTS else 0,
            )
            st.text_area("Note", key="triage_note")
            author("triage_author")
            st.form_submit_button("Save triage note", on_click=_save_note, args=(db, shown.run_id, item_id))
    if outcome and outcome[0] == "success":  # the notes read above predate this save
        notes = reads.read(queries.items.triage_notes, shown.run_id, item_id)
    if len(notes):
        st.dataframe(notes, hide_index=True, key="item_notes", width="stretch")
