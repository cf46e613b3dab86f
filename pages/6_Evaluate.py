"""Evaluate: upload JSONL, CSV or Parquet items, pick a judge and metrics, and run them into the database."""
from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path

import streamlit as st

from evaluators import store, ui
from evaluators.vocabulary import THELMA

path = ui.page("Evaluate", need_db=False)
if ui.read_only():
    st.info("Read-only mode: uploads and evaluations are disabled.")
    st.stop()

upload = st.file_uploader("Items file (JSONL, CSV or Parquet)", type=["jsonl", "csv", "parquet"],
                          key="upload")
c1, c2 = st.columns(2)
judge = c1.selectbox("Judge", ["offline", "local", "other (litellm model)"], key="judge",
                     help="offline: the embedded judge; local: the bundled small LLM served on 127.0.0.1.")
options = {}
if judge.startswith("other"):
    judge = c2.text_input("litellm model name", key="judge_model", placeholder="openai/my-model").strip()
    api_base = c2.text_input("API base URL (optional)", key="api_base", placeholder="http://127.0.0.1:8000/v1")
    options = {"api_base": api_base.strip()} if api_base.strip() else {}
from evaluators.runner import registry  # no judge is imported until a run starts

known = registry()
metrics = st.multiselect("Metrics", list(known), default=list(THELMA), key="eval_metrics",
                         help="THELMA's seven first; the RAGAS, Nvidia and DeepEval suites after them.")
name = st.text_input("Run name", value=f"upload-{datetime.now():%Y%m%d-%H%M}", key="run_name").strip()

if st.button("Evaluate", key="evaluate", type="primary", disabled=upload is None or not metrics or not name
             or not judge):
    from evaluators.ingest import InputError, load_items  # lazy: ingest may pull heavier readers

    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / Path(upload.name).name
        file.write_bytes(upload.getvalue())
        try:
            items = load_items(file)
        except InputError as exc:
            st.error(f"{upload.name} cannot be evaluated:")
            st.code("\n".join(exc.problems) or str(exc), language=None, wrap_lines=True)
            st.stop()
    from evaluators.runner import evaluate  # lazy: the judges import litellm / sentence-transformers

    bar = st.progress(0.0, text=f"Evaluating {len(items)} items...")

    def on_progress(p: object) -> None:
        done, total = getattr(p, "done", 0), max(getattr(p, "total", 1), 1)
        bar.progress(min(done / total, 1.0), text=f"{done} of {total} items · {getattr(p, 'calls', 0)} calls · "
                                                  f"{getattr(p, 'cache_hits', 0)} cache hits")

    try:
        evaluate(items, db=str(path), run=name, judge=judge, metrics=metrics, on_progress=on_progress,
                 **options)
    except store.StoreBusy:
        st.warning("The database is busy (another evaluation is writing), try again in a moment.")
        st.stop()
    except store.RunConflict as exc:  # the engine's words name no widget: say which one to change
        st.error(f"The database already has a run named {ui.md(repr(exc.run))}, evaluated with another judge, other "
                 "metrics or other prompt files. Change **Run name** to start a new run, or choose the same "
                 "judge and metrics to resume that one.")
        st.caption(ui.md(exc))
        st.stop()
    except Exception as exc:  # the run is recorded as failed by the runner; show why, plainly
        st.error(f"Evaluation failed: {type(exc).__name__}: {ui.md(exc)}")
        st.stop()
    st.success(f"Run {ui.md(name)} finished: {len(items)} items.")
    ui.page_link("runs", f"Open run {ui.md(name)}", {"run": name}, icon="📊")
