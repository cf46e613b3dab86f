"""The Evaluate page's helpers: what an input file looks like (with a template to download), adding a run
evaluated elsewhere from its run file, and deleting a run only once the admin has seen what it removes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from evaluators.core.records import printable, run_name_problem
from evaluators.dashboard import access, markup, reads, ui
from evaluators.storage import queries, runfile, store

# Three items in the form `evaluate` reads: one per line, the optional fields on the last two.
TEMPLATE_ITEMS = (
    {
        "id": "q1",
        "query": "How much does an adult single ticket on the Red route cost?",
        "sources": ["An adult single ticket on the Red or Blue route costs 6.40 euros."],
        "response": "An adult single ticket on the Red route costs 6.40 euros.",
    },
    {
        "id": "q2",
        "query": "When does the ticket office open, and where is the head office?",
        "sources": [
            "Port Corvey terminal's ticket office opens at 05:45 every day.",
            "The head office is at 14 Quayside Row in Port Corvey.",
        ],
        "response": "The ticket office opens at 05:45. The head office is at 14 Quayside Row.",
        "metadata": {"retriever": "bm25", "topic": "terminals"},
    },
    {
        "id": "q3",
        "query": "Can I bring my dog on board?",
        "sources": ["Dogs are welcome on the outer decks if they are on a lead."],
        "response": "Yes, dogs on a lead may travel on the outer decks.",
        "reference": "Dogs on a lead may travel on the outer decks, not in the indoor lounges.",
    },
)
TEMPLATE = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in TEMPLATE_ITEMS)


def saved_upload(upload: Any, folder: Path) -> Path:
    """The uploaded file written into `folder` under its own name (what messages name, its suffix what tells
    its format) when that is a plain file name, else as 'upload' with its suffix: a name from the browser
    may be '..' or '.', or run to 300 characters."""
    name = Path(upload.name).name
    if name in ("", ".", "..") or len(name.encode("utf-8", "replace")) > 200 or not name.isprintable():
        suffix = Path(name).suffix.lower()
        name = f"upload{suffix if suffix[1:].isalnum() and len(suffix) <= 10 else ''}"
    file = folder / name
    file.write_bytes(upload.getvalue())
    return file


def shown_name(upload: Any) -> str:
    """The uploaded file's name as a message shows it: one line, at most 120 characters."""
    return printable(upload.name)[:120] or "the upload"


def input_format() -> None:
    """An example of the input and a three-line template to download."""
    st.caption(
        "One item per line: `query`, `sources` (a list of the retrieved texts) and `response` are required; "
        "`id`, `reference` (a golden answer, for the `ref_*` metrics) and `metadata` are optional. CSV and "
        "Parquet take the same columns (`sources` as a JSON list in CSV)."
    )
    with st.expander("Example of the input (JSONL)"):
        st.code(json.dumps(TEMPLATE_ITEMS[1], indent=2, ensure_ascii=False), language="json")
    st.download_button(
        "Download a three-line template (JSONL)",
        TEMPLATE.encode("utf-8"),
        file_name="template.jsonl",
        mime="application/jsonl",
        key="template",
    )


def upload_run_file(path: Path) -> None:
    """Add a run evaluated elsewhere from its run file (`export-run`), as it is: no judge is called again."""
    with st.expander("Add a run evaluated elsewhere (a run file from export-run)"):
        upload = st.file_uploader("Run file", key="run_file", help="docs/run-file.md describes the format.")
        name = st.text_input("Name here (empty: the run's own name)", key="run_file_as").strip()
        bad_name = run_name_problem(name) if name else ""
        if bad_name:
            st.error(f"**Name here** {markup.md(bad_name)}")
        if not st.button("Import run", key="import_run", disabled=upload is None or bool(bad_name)) or upload is None:
            return
        with tempfile.TemporaryDirectory() as tmp:
            file, shown = saved_upload(upload, Path(tmp)), shown_name(upload)
            try:
                done = access.import_run(ui.user(), str(path), file, name or None)
            except access.Refused as exc:
                st.error(markup.md(exc))
                return
            except runfile.RunFileError as exc:  # its message names the copy: name the upload instead
                st.error(markup.md(str(exc).replace(str(file), shown).replace("--as NEW_NAME", "Name here")))
                return
            except store.StoreBusy:
                st.warning("The database is busy (a run or a save is writing), try again in a moment.")
                return
        if not done.added:
            st.info(f"Run {markup.md(done.run_id)} is already here, the same evaluation: nothing imported.")
        else:
            who = f" The file says it was sent by {markup.md(done.claimed_by)}." if done.claimed_by else ""
            st.success(f"Imported run {markup.md(done.run_id)}: {done.rows.get('items', 0)} items.{who}")
        ui.page_link("runs", f"Open run {markup.md(done.run_id)}", {"run": done.run_id}, icon="📊")


def delete_run(path: Path) -> None:
    """An admin's run deletion: name the run, see what it removes, confirm, and only then delete."""
    with st.expander(
        "Delete a run (admins)", expanded=bool({"delete_pending", "delete_outcome"} & set(st.session_state))
    ):
        ui.show_outcome("delete_outcome")
        doomed = st.text_input(
            "Name of the run to delete, with its items, scores and triage notes", key="delete_run_name"
        ).strip()
        if st.session_state.get("delete_pending", doomed) != doomed:
            del st.session_state["delete_pending"]  # another name: confirm again
        if st.button("Delete run", key="delete_run", disabled=not doomed):
            try:
                contents = reads.read(queries.items.run_contents, doomed)
            except store.StoreMissing:
                contents = None
            if contents is None:
                st.error("There is no run with this name.")
            else:
                st.session_state["delete_pending"] = doomed
        if st.session_state.get("delete_pending") == doomed and doomed:
            _confirm(path, doomed)


def _confirm(path: Path, doomed: str) -> None:
    """What deleting `doomed` removes, and the buttons that delete it or leave it."""
    c = reads.read(queries.items.run_contents, doomed)
    if c is None:  # deleted meanwhile
        del st.session_state["delete_pending"]
        return
    st.warning(
        f"Delete run **{markup.md(doomed)}**? This removes its {c['items']} items, {c['verdicts']} verdicts, "
        f"{c['labels']} labels and {c['notes']} triage notes, with its scores. It cannot be undone."
    )
    yes, no = st.columns(2)
    if no.button("Cancel", key="delete_cancel"):
        del st.session_state["delete_pending"]
        st.rerun()
    if yes.button(f"Yes, delete {markup.md(doomed)}", key="delete_confirm", type="primary"):
        del st.session_state["delete_pending"]
        st.session_state["delete_outcome"] = _delete(path, doomed)
        st.rerun()  # the page drawn again without the question, with the outcome


def _delete(path: Path, doomed: str) -> tuple[str, str]:
    """Delete the run as this user; the outcome as (st function, message) for ui.show_outcome."""
    try:
        counts = access.delete_run(ui.user(), str(path), doomed)
    except access.Refused as exc:
        return "error", markup.md(exc)
    except (KeyError, store.StoreMissing):
        return "error", "There is no run with this name."
    except store.StoreBusy:
        return "warning", "The database is busy (a run or a save is writing), try again in a moment."
    return "success", f"Deleted the run {markup.md(doomed)}: {sum(counts.values())} rows."
