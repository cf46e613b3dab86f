"""The Trust page's tabs: how far the judge agrees with the labels, what to label next, importing a labels
file, and pairwise validation. Each is drawn only when open."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from evaluators.core.confidence import Band
from evaluators.core.records import Label
from evaluators.dashboard import access, markup, reads, state, tables, ui
from evaluators.dashboard.views import item_tabs, walk
from evaluators.metrics import trust
from evaluators.metrics.diagnosis import RULES, diagnose
from evaluators.metrics.registry import THELMA
from evaluators.runs import labelling, pairs
from evaluators.runs.labelling import load_labels
from evaluators.runs.readers import InputError
from evaluators.storage import queries


def _name(target: str) -> str:
    return markup.rule_label(target) if target in RULES else target.upper()


def _call(target: str) -> str:
    """The judge's call a target's labels check: a rule that fired, a metric's low verdict."""
    return "fired" if target in RULES else "low verdict"


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _save(path: Path, run_id: str, labels: list[Label], author: str, outcome_key: str) -> None:
    """Save labels as the current user; the outcome shows on the next run, whatever happened."""
    ui.save(
        outcome_key,
        lambda: access.save_labels(ui.user(), str(path), run_id, labels, author, deadline_s=ui.SAVE_DEADLINE_S),
        busy="nothing was saved.",
        done=f"Saved {len(labels)} label(s).",
    )


def label_refusal() -> str | None:
    """Why this user may not save labels here (ui.write_refusal), shown where each labelling form would be."""
    return ui.write_refusal(access.TRIAGER, "saving labels", "labels")


# The agreement table's widths at 1280 px: each header and target (a rule and its pattern) whole on one line.
TRUST_PX = {"target": 220, "call": 80, "labelled": 66, "agreement": 82, "kappa": 60, "kappa 95% interval": 132}
TRUST_PX |= {"precision": 136}


def agreement_tab(run_id: str, report: labelling.Report) -> None:
    """Agreement, kappa and precision per target, confusion matrices, disagreements and fitted thresholds."""
    table = pd.DataFrame(
        [
            {
                "target": _name(t.target),
                "call": _call(t.target),
                "labelled": t.n_labelled,
                "agreement": t.agreement,
                "kappa": t.kappa,
                "kappa 95% interval": "–" if t.kappa_lo is None else f"{t.kappa_lo:.2f} to {t.kappa_hi:.2f}",
                "precision": t.precision,
            }
            for t in report.rows
        ]
    )
    st.dataframe(
        table,
        hide_index=True,
        key="trust_table",
        width="stretch",
        placeholder="",  # a figure not defined
        column_config=tables.sized(
            {
                "agreement": st.column_config.NumberColumn(format="%.2f"),
                "kappa": st.column_config.NumberColumn(format="%.2f"),
                "precision": st.column_config.NumberColumn("precision of the call", format="%.2f"),
            },
            TRUST_PX,
        ),
    )
    st.caption(
        "An empty cell is a figure that is not defined (no labels, or one class only), never a 0. Precision "
        "is the share of the judge's calls (a fired rule, a low verdict) that people confirmed."
    )
    _unsure(report.unsure)
    labelled = [t for t in report.rows if t.n_labelled]
    _confusions(labelled)

    st.download_button(
        "Download every label of this run (CSV)",
        reads.read(queries.trust.run_labels, run_id).to_csv(index=False).encode("utf-8"),
        file_name=f"labels_{run_id}.csv",
        mime="text/csv",
        key="labels_csv",
    )
    _disagreements(run_id, report, bool(labelled))
    _suggestions(report)


def _unsure(tallies: list[trust.Unsure]) -> None:
    """How people decided the verdicts the judge was unsure of: counted apart from agreement."""
    n, said_one = sum(u.n_labelled for u in tallies), sum(u.said_one for u in tallies)
    st.markdown(f"**Labels on unsure verdicts: {n}, of which people said 1: {said_one}.**")
    st.caption(
        "A verdict is unsure when the judge's p lies inside its uncertainty band (the sidebar's). The judge "
        "made no call there, so a label on it is neither agreement nor disagreement: the figures above count "
        "only the verdicts the judge was sure of."
        + "".join(f" {u.target.upper()}: {u.n_labelled}, people said 1 on {u.said_one}." for u in tallies)
    )


def _confusions(labelled: list[Any]) -> None:
    """The confusion counts of every labelled target, one row each, in an expander (one table: a grid per
    target is slow to draw)."""
    if not labelled:
        return
    with st.expander(f"Confusion counts · {len(labelled)} labelled targets"):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "target": _name(t.target),
                        "call": _call(t.target),
                        "judge and people": t.confusion.tp,
                        "judge only": t.confusion.fp,
                        "people only": t.confusion.fn,
                        "neither": t.confusion.tn,
                    }
                    for t in labelled
                ]
            ),
            hide_index=True,
            key="confusions",
            column_config=tables.sized(None, {"target": TRUST_PX["target"]}),
        )
        st.caption(
            "Labelled calls by who made the call (a fired rule, a low verdict): the judge, people, both or neither."
        )


def _disagreements(run_id: str, report: labelling.Report, labelled: bool) -> None:
    """The labelled calls people disagree with, each linked to its item's verdicts."""
    st.subheader("Disagreements")
    if not report.disagreements:
        st.caption("None: every labelled call agrees with the judge." if labelled else "No labelled calls yet.")
    else:
        rows = pd.DataFrame(
            [
                {
                    "target": _name(p.target),
                    "item": p.item_id,
                    "component": p.component_idx,
                    "judge": p.judge,
                    "people": p.human,
                    "open": ui.item_url(run_id, p.item_id, tab="Verdicts"),
                }
                for p in report.disagreements
            ]
        )
        # whole numbers with empty cells (a rule's pair names no component): a column Arrow takes as it is
        rows["component"] = rows["component"].astype("Int64")
        widths = {"target": 300, "item": 100, "component": 80, "judge": 80, "people": 80, "open": 40}
        row = tables.clickable(rows, "disagreements", widths, tables.OPEN, placeholder="")  # a target wraps in its cell
        if row is not None:
            walk.open_item("trust", run_id, rows["item"].iloc[row], "Verdicts")


def _suggestions(report: labelling.Report) -> None:
    """The thresholds that agree best with the labels, each with a link that applies it."""
    st.subheader("Thresholds fitted to the labels")
    for s in report.suggestions:
        if s.best is None:
            st.caption(f"{s.metric.upper()} (now {s.current:g}): {s.why}.")
            continue
        st.markdown(
            f"**{s.metric.upper()}**: {s.best:g} instead of {s.current:g}: kappa {_fmt(s.kappa_best)} "
            f"against {_fmt(s.kappa_now)}, on {s.n_labelled} labels."
        )
        ui.page_link(
            "trust", f"Apply {s.metric.upper()} = {s.best:g}", ui.link(**{f"th_{s.metric}": s.best}), icon="🎯"
        )


def next_tab(path: Path, run_id: str, th: dict[str, float], band: Band | None, refused: str | None) -> None:
    """The review queue's next item, with a form to label its rules."""
    ui.show_outcome("queue_outcome")
    queue = reads.read(labelling.review_queue, run_id, th, band)
    if queue.empty:
        st.success("Every item of this run carries a label.")
    else:
        item_id, reason, detail = queue.iloc[0].tolist()
        row = reads.derived(queries.trust.run_rows, [run_id], (item_id,)).iloc[0]
        scores = row.to_dict()
        fired = [r.id for r in diagnose({m: queries.diagnosis.wide_score(scores, m) for m in THELMA}, th)]
        st.markdown(f"**Next: item {markup.md(item_id)}** ({reason}{': ' + markup.md(detail) if detail else ''})")
        st.caption(markup.md(row["query"]))
        ui.item_link(run_id, item_id, "Open the item to read its sources, claims and verdicts")
        if refused:
            st.info(refused)
        else:
            with st.form("queue_form"):
                verdicts = {
                    rid: st.radio(
                        f"{markup.rule_label(rid)}: does it name the component to fix?",
                        ["right", "wrong", "skip"],
                        horizontal=True,
                        key=f"q_{rid}",
                    )
                    for rid in fired
                }
                missed = st.multiselect(
                    "Rules that should have fired"
                    if fired
                    else "No rule fires. Rules that should have (none: quiet is right)",
                    [r for r in RULES if r not in fired],
                    key="q_missed",
                )
                note = st.text_input("Note", key="q_note")
                author = item_tabs.author("q_author")
                if st.form_submit_button("Save and show the next item", key="queue_save"):
                    labels = [
                        Label(item_id, int(v == "right"), rule=rid, note=note)
                        for rid, v in verdicts.items()
                        if v != "skip"
                    ]
                    labels += [
                        Label(item_id, int(rid in missed), rule=rid, note=note) for rid in RULES if rid not in fired
                    ]
                    _save(path, run_id, labels, author, "queue_outcome")
                    st.rerun()
        queue_view = queue.assign(open=[ui.item_url(run_id, i) for i in queue["item_id"]])
        widths = {"item_id": 100, "reason": 220, "detail": 340, "open": 40}
        if (row := tables.clickable(queue_view, "queue_table", widths, tables.OPEN)) is not None:  # its detail wraps
            walk.open_item("trust", run_id, queue_view["item_id"].iloc[row])


def import_tab(path: Path, run_id: str, refused: str | None) -> None:
    """Import a labelling team's JSONL or CSV: all rows or none."""
    ui.show_outcome("import_outcome")
    st.caption(
        "A JSONL or CSV file from a labelling team: `item_id, rule, label` or `item_id, metric, component, "
        "label` (label 1 or 0, component the component's index), optional `note`. All rows or none are "
        "saved."
    )
    if refused:
        st.info(refused)
    else:
        with st.form("import_form"):
            upload = st.file_uploader("Labels file", type=["jsonl", "csv"], key="labels_file")
            author = item_tabs.author("import_author")
            send = st.form_submit_button("Import", key="import_labels")
        if upload is not None and send:
            items, components = reads.read(queries.trust.label_targets, run_id)
            with tempfile.TemporaryDirectory() as tmp:
                file = Path(tmp) / Path(upload.name).name
                file.write_bytes(upload.getvalue())
                try:
                    labels = load_labels(file, set(RULES), set(THELMA), items, components)
                except InputError as exc:
                    st.error("\n\n".join(markup.md(p.replace(str(file), upload.name)) for p in exc.problems[:20]))
                    labels = []
            if labels:
                _save(path, run_id, labels, author, "import_outcome")
                st.rerun()


def pairs_tab(run_id: str) -> None:
    """Pairwise validation: how often the better variant of each pair scores strictly higher."""
    runs = reads.runs()
    pair_run = state.synced(st.selectbox, "Run of validation pairs", "pairs_run", run_id, options=list(runs["run_id"]))
    outcomes = reads.read(queries.compare.pair_scores, pair_run)
    if outcomes.empty:
        st.caption(
            "This run holds no validation pairs. Evaluate a file of pairs into a run with "
            "`python -m evaluators agreement --pairs FILE --db DB --run NAME`: per line a metric, and a "
            "better and a worse variant of one item."
        )
    else:
        tallies = pairs.tally(
            [
                (r.metric, None if pd.isna(r.better) else r.better, None if pd.isna(r.worse) else r.worse)
                for r in queries.sql.rows(outcomes)
            ]
        )
        st.dataframe(
            pd.DataFrame([t.row(m) for m, t in tallies.items()], columns=list(pairs.CSV_COLUMNS)),
            hide_index=True,
            key="pairs_table",
            width="stretch",
        )
        st.caption(
            "Agreement: the share of scored pairs whose better variant scores strictly higher. Ties and "
            "failures (a variant not scored) are counted apart, never as wins or losses."
        )
