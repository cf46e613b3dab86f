"""Evaluate: upload JSONL, CSV or Parquet items, or a Phoenix, Langfuse, RAGAS or DeepEval export (its
format detected, and changeable), pick a judge an admin listed (or a cascade that escalates the offline
or local judge's unsure verdicts to another judge) and metrics, and run them into a new run of the
database. It shows an example of the input with a template to download, and takes a run evaluated
elsewhere as its run file (export-run's); admins can also delete a run here, once they have seen what it
removes."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from datetime import datetime
from pathlib import Path

import streamlit as st

from evaluators.core.records import run_name_problem
from evaluators.dashboard import access, markup, ui
from evaluators.dashboard.views import evaluate as view
from evaluators.judges import local_llm
from evaluators.metrics.registry import THELMA
from evaluators.storage import store

path = ui.page("Evaluate", need_db=False)
me = ui.user()
if ui.read_only():
    st.info("Read-only mode: uploads and evaluations are disabled.")
    st.stop()
if not me.can(access.EVALUATOR):
    st.info(f"You are a {me.role}: uploads and judge runs need the evaluator role (ask an admin).")
    st.stop()
try:
    judges = access.judge_choices(ui.secret("judges") or [], local_installed=local_llm.available() is None)
except access.ConfigError as exc:
    st.error(f"The judges listed in .streamlit/secrets.toml are malformed: {markup.md(exc)}")
    st.stop()

view.input_format()
upload = st.file_uploader(
    "Items file (JSONL, CSV or Parquet), or a Phoenix, Langfuse, RAGAS or DeepEval export",
    type=["jsonl", "csv", "parquet", "json"],
    key="upload",
)
fmt = None
if upload is not None:
    from evaluators.runs import traces
    from evaluators.runs.ingest import detect_format

    with tempfile.TemporaryDirectory() as tmp:
        detected = detect_format(view.saved_upload(upload, Path(tmp)))
    fmt = st.selectbox(
        "Format",
        traces.FORMATS,
        index=traces.FORMATS.index(detected),
        format_func=traces.LABELS.get,
        key=f"format:{upload.name}",
        help="Detected from the file's suffix and its first record; choose another to override.",
    )
    st.caption(
        f"Detected format: **{traces.LABELS[detected]}**"
        + (
            ". Its peer scores are kept as imported scores, beside ours."
            if detected in (traces.RAGAS, traces.DEEPEVAL, traces.LANGFUSE)
            else "."
        )
    )
judge = st.selectbox(
    "Judge",
    list(judges),
    key="judge",
    help="The embedded offline judge, the local LLM when installed, and the judges an admin "
    "lists in .streamlit/secrets.toml (each at its own API base, with a key kept on the "
    "server).",
)
# A cascade starts from a judge that says how sure it is (offline, local); a listed judge gives only a
# label, which is never unsure, so nothing would escalate from it.
NO_CASCADE = "(none: this judge decides every verdict)"
later = (
    [label for label in judges if label not in (judge, access.OFFLINE_LABEL)] if isinstance(judges[judge], str) else []
)
escalate = st.selectbox(
    "Escalate unsure verdicts to",
    [NO_CASCADE, *later],
    key="escalate",
    disabled=not later,
    help="A cascade: the judge above decides the verdicts it is sure of, this one the rest "
    "(and splits the texts into claims and sub-questions). Each verdict records its tier.",
)
picked = judges[judge]
if escalate in later:
    then = judges[escalate]
    picked = (
        f"{picked}>{then}"
        if isinstance(then, str)
        # a listed judge keeps its API base and key
        else dataclasses.replace(then, label=f"{judge} > {then.label}", model=f"{picked}>{then.model}")
    )
from evaluators.metrics import registry  # noqa: E402  (no judge is imported until a run starts)

known = registry.METRICS
metrics = st.multiselect(
    "Metrics",
    list(known),
    default=list(THELMA),
    format_func=str.upper,  # as every page names a metric
    key="eval_metrics",
    help="THELMA's seven first; the RAGAS, Nvidia and DeepEval suites after them.",
)
name = st.text_input(
    "Run name",
    value=f"upload-{datetime.now():%Y%m%d-%H%M}",
    key="run_name",
    help="A new name: an evaluation never adds to an existing run.",
).strip()
bad_name = run_name_problem(name)
if name and bad_name:  # a name that looks like another one (a zero-width space) is refused before any work
    st.error(f"**Run name** {markup.md(bad_name)}")

if st.button("Evaluate", key="evaluate", type="primary", disabled=upload is None or not metrics or bool(bad_name)):
    from evaluators.runs.ingest import InputError, load_items  # lazy: ingest may pull heavier readers

    with tempfile.TemporaryDirectory() as tmp:
        file = view.saved_upload(upload, Path(tmp))
        try:
            items = load_items(file, fmt)
        except InputError as exc:
            st.error(f"{markup.md(view.shown_name(upload))} cannot be evaluated:")
            st.code("\n".join(exc.problems) or str(exc), language=None, wrap_lines=True)
            st.stop()

    bar = st.progress(0.0, text=f"Evaluating {len(items)} items...")

    def on_progress(p: object) -> None:
        done, total = getattr(p, "done", 0), max(getattr(p, "total", 1), 1)
        bar.progress(
            min(done / total, 1.0),
            text=f"{done} of {total} items · {getattr(p, 'calls', 0)} calls · {getattr(p, 'cache_hits', 0)} cache hits",
        )

    try:
        access.start_evaluation(ui.user(), str(path), items, name, picked, metrics, os.environ, on_progress=on_progress)
    except access.RunExists:  # the engine's words name no widget: say which one to change
        st.error(
            f"The database already has a run named {markup.md(repr(name))}. Change **Run name** to start a new run: "
            "an evaluation never adds to an existing run."
        )
        st.stop()
    except (access.Refused, access.ConfigError, access.LookAlike) as exc:
        st.error(markup.md(exc))
        st.stop()
    except store.StoreBusy:
        st.warning("The database is busy (another evaluation is writing), try again in a moment.")
        st.stop()
    except Exception as exc:  # the run is recorded as failed by the runner; show why, plainly
        st.error(f"Evaluation failed: {type(exc).__name__}: {markup.md(exc)}")
        st.stop()
    st.success(f"Run {markup.md(name)} finished: {len(items)} items.")
    ui.page_link("runs", f"Open run {markup.md(name)}", {"run": name}, icon="📊")

view.upload_run_file(path)
if me.can(access.ADMIN):
    view.delete_run(path)
