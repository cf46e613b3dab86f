"""Build the demo database: every demo run evaluated with the offline judge.

    python -m data.build_demo --db data/demo.duckdb [--force]

Idempotent: when the database already holds every run finished, with the items of the current
run files, it only prints the summary. Otherwise it builds into a temporary file beside the
target (resuming a killed build, or continuing from the existing database so its triage notes
survive) and renames it over the target at the end, so a half-built demo is never served.
If the run files changed since the database was built, it starts from scratch. Either way it imports
our own labels (data/demo/labels/) and triage notes (data/demo/notes.jsonl), each once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from data.demo_runs import DEMO, RUNS, RUNS_DIR
from evaluators.core.records import Item
from evaluators.metrics.diagnosis import COMPONENTS, RULES, TRIAGE_LABELS, diagnose
from evaluators.metrics.registry import THELMA
from evaluators.runs.ingest import load_items
from evaluators.runs.labelling import load_labels
from evaluators.runs.readers import file_rows
from evaluators.storage import queries, store, writes

METRICS = THELMA
GRAMMAR_RUNS = ("grammar-bm25", "grammar-dense")
GRAMMAR_GROUPS = 2  # semantic groups per SQL template: 72 items a run keeps the build under 2 minutes
DEFAULT_DB = Path(__file__).resolve().parent / "demo.duckdb"
# Our own labels, written by hand from the items (not by the judge): rule labels per run, and
# corrections of single verdicts (SP1 sources, SD sentences, GR claims) in verdicts/, one file per run.
LABELS = DEMO / "labels"
LABELS_AUTHOR = "demo labels"
# Our own triage notes, written by hand from the items, so Triage opens on real notes: one JSON object a
# line with run_id, item_id, label, component and note.
NOTES = DEMO / "notes.jsonl"
NOTES_AUTHOR = "demo notes"
NOTE_KEYS = ("run_id", "item_id", "label", "component", "note")


def label_files(folder: Path = LABELS) -> list[tuple[str, Path]]:
    """(run, labels file) for every demo labels file: rule labels, then verdict corrections."""
    return [(f.stem, f) for f in [*sorted(folder.glob("*.jsonl")), *sorted((folder / "verdicts").glob("*.jsonl"))]]


def add_labels(db: Path, emit: Callable[[str], None] = print) -> int:
    """Import the demo's labels files into `db` as a labels upload does (all rows of a file or none),
    skipping a file whose labels the database already holds; returns the labels written."""
    written = 0
    for run, file in label_files():
        items, components = queries.trust.label_targets(db, run)
        labels = load_labels(file, set(RULES), set(THELMA), items, components, author=LABELS_AUTHOR)
        held = queries.trust.run_labels(db, run)
        held = held[held["author"] == LABELS_AUTHOR]
        have = set(
            zip(held["item_id"], held["rule"].fillna(""), held["metric"].fillna(""), held["component"].fillna(-1))
        )
        if {
            (x.item_id, x.rule or "", x.metric or "", -1 if x.component_idx is None else x.component_idx)
            for x in labels
        } <= have:
            continue  # imported already
        writes.add_labels(db, run, labels)
        written += len(labels)
    if written:
        emit(f"{db}: added {written} demo labels")
    return written


def load_notes(db: Path, file: Path = NOTES) -> list[dict[str, str]]:
    """The demo's triage notes, each line checked against `db` (its run and item must be there, its label
    and component what the Triage tab offers); ValueError naming the file, line and field of the first
    bad line."""
    held = store.query(db, "SELECT run_id, item_id FROM items WHERE list_contains(?, run_id)", [list(RUNS)])
    items = set(zip(held["run_id"], held["item_id"]))
    rows, problems = file_rows(file, (".jsonl",))  # UTF-8 and JSON, located as every input file is
    notes = []
    for line, where, row in rows:
        if problem := _note_problem(row, where, items):
            problems.append((line, problem))
        else:
            notes.append({key: row[key] for key in NOTE_KEYS})
    if problems:
        raise ValueError(min(problems)[1])  # the first bad line, on one line
    return notes


def _note_problem(row: object, where: str, items: set[tuple[str, str]]) -> str | None:
    """What is wrong with one line of the notes file, located at `where`, or None."""
    if not isinstance(row, dict):
        return f"{where}: expected an object with {', '.join(NOTE_KEYS)}"
    allowed = {"run_id": RUNS, "label": TRIAGE_LABELS, "component": COMPONENTS}
    for key in NOTE_KEYS:
        if not isinstance(row.get(key), str) or not row[key].strip():
            return f"{where}: field {key}: missing or not a text"
        if key in allowed and row[key] not in allowed[key]:
            return f"{where}: field {key}: {row[key]!r} is not one of {', '.join(allowed[key])}"
    if extra := sorted(row.keys() - set(NOTE_KEYS)):  # a misspelt key must not pass unseen
        return f"{where}: field {extra[0]}: unknown field; expected {', '.join(NOTE_KEYS)}"
    if (row["run_id"], row["item_id"]) not in items:
        return f"{where}: field item_id: run {row['run_id']!r} has no item {row['item_id']!r}"
    return None


def add_notes(db: Path, emit: Callable[[str], None] = print, file: Path = NOTES) -> int:
    """Save the demo's triage notes in `db` as NOTES_AUTHOR, in one transaction, skipping those it holds
    already (same run, item and note); every line is checked first, so a bad file writes none.
    Returns the notes written."""
    notes = load_notes(db, file)
    held = queries.items.triage_notes(db)
    held = held[held["author"] == NOTES_AUTHOR]
    have = set(zip(held["run_id"], held["item_id"], held["note"]))
    new = []
    for n in notes:
        key = (n["run_id"], n["item_id"], n["note"])
        if key not in have:  # else saved by an earlier build: a rebuild adds nothing
            have.add(key)
            new.append(n)
    if new:
        frame = pd.DataFrame(new, columns=list(NOTE_KEYS)).assign(author=NOTES_AUTHOR, created_at=pd.Timestamp.now())
        writes.write_frames(db, {"triage": frame})
        emit(f"{db}: added {len(new)} demo triage notes")
    return len(new)


def run_items(folder: Path = RUNS_DIR) -> dict[str, list[Item]]:
    """The items of every demo run file, keyed by run name."""
    return {name: load_items(folder / f"{name}.jsonl") for name in RUNS}


def temp_path(db: Path) -> Path:
    """Where a build in progress lives: beside the target, with a name still ending in .duckdb."""
    return db.with_name(f".{db.stem}.building{db.suffix}")


def _fingerprint(item_id: str, query: str, sources: Sequence[str], response: str, metadata: str) -> str:
    return json.dumps([item_id, query, list(sources), response, json.loads(metadata)], sort_keys=True)


def stored_state(db: Path, runs: dict[str, list[Item]]) -> tuple[bool, bool]:
    """(usable, complete) for a database file.

    usable: every item it holds for a demo run is identical to that item in the run files, so
    resuming into it is safe; complete: besides, every run is finished with all its items.
    """
    if not db.exists():
        return False, False
    try:
        finished = queries.runs.runs(db)
        stored = queries.items.run_items(db, list(runs))
    except store.StoreBusy:
        raise  # someone is writing to it: not a reason to throw it away
    except Exception:  # noqa: BLE001  not a DuckDB file, or not one of our stores: start afresh
        return False, False
    wanted = {
        (name, i.id): _fingerprint(i.id, i.query, i.sources, i.response, json.dumps(i.metadata))
        for name, items in runs.items()
        for i in items
    }
    for row in stored.to_dict("records"):
        if wanted.get((row["run_id"], row["item_id"])) != _fingerprint(
            row["item_id"], row["query"], list(row["sources"]), row["response"], row["metadata"]
        ):
            return False, False
    status = dict(zip(finished["run_id"], finished["status"]))
    complete = len(stored) == len(wanted) and all(status.get(name) == "finished" for name in [*runs, *GRAMMAR_RUNS])
    return True, complete


def rule_counts(db: Path, runs: Sequence[str] = RUNS) -> dict[str, Counter[str]]:
    """Per run: how many items fire each Table-2 rule at default thresholds and bands, and, under
    "missing", how many items lack a score on some metric (failed, empty or unsure)."""
    counts: dict[str, Counter[str]] = {}
    for run in runs:
        wide = queries.runs.run_scores_wide(db, run, METRICS)
        tally: Counter[str] = Counter({rid: 0 for rid in RULES})
        for row in wide.to_dict("records"):
            scores = {m: queries.diagnosis.wide_score(row, m) for m in METRICS}  # with counts: the quiet diagnosis
            tally.update(rule.id for rule in diagnose(scores))
            tally["missing"] += any(s is None or s.value is None for s in scores.values())
        tally["items"] = len(wide)
        counts[run] = tally
    return counts


def summary(counts: dict[str, Counter[str]]) -> str:
    """A table: one row per rule (then items lacking a score, then items), one column per run."""
    runs = list(counts)
    width = max(len(r) for r in runs) + 2
    notes = {
        **{
            rid: f"{r.pattern} -> {r.components}" + (" (ours, not THELMA's)" if r.ours else "")
            for rid, r in RULES.items()
        },
        "missing": "items lacking a score on some metric",
        "items": "",
    }
    lines = ["rule".ljust(8) + "".join(r.rjust(width) for r in runs)]
    for key, note in notes.items():
        lines.append(key.ljust(8) + "".join(str(counts[r][key]).rjust(width) for r in runs) + f"   {note}")
    return "\n".join(lines)


def build(db: Path, force: bool = False, emit: Callable[[str], None] = print) -> dict[str, Counter[str]]:
    """Make `db` hold every demo run, evaluated with the offline judge; return the rule counts."""
    db = Path(db)
    runs = run_items()
    usable, complete = stored_state(db, runs)
    if complete and not force:
        # a demo built before it shipped labels or notes gets them, without judging again
        add_labels(db, emit)
        add_notes(db, emit)
        emit(f"{db}: demo is up to date")
        return rule_counts(db)
    from evaluators.judges import factory
    from evaluators.runs import runner  # imports the judge stack: only when something is evaluated

    tmp = temp_path(db)
    if force or not stored_state(tmp, runs)[0]:
        tmp.unlink(missing_ok=True)
    if not tmp.exists() and usable and not force:
        shutil.copyfile(db, tmp)  # continue from what is there, triage notes included
    elif not usable and db.exists():
        emit(f"{db}: the demo run files changed since it was built; rebuilding from scratch")
    started = time.monotonic()
    for name, items in runs.items():
        # update: the runs follow the run files (stored_state checked that what is stored agrees with them).
        result = runner.evaluate(items, tmp, run=name, judge=factory.OFFLINE, update=True)
        emit(result.text())
    # GRAMMAR's robustness runs over our fictitious company, for the Robustness page.
    from evaluators.grammar import runs as grammar_runs

    for built in grammar_runs.build_demo(tmp, max_groups=GRAMMAR_GROUPS):
        emit(built.thelma.text())
    add_labels(tmp, emit)
    add_notes(tmp, emit)  # notes carried over from the database it continued skip themselves
    os.replace(tmp, db)
    emit(f"built {db} in {time.monotonic() - started:.1f} s")
    return rule_counts(db)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description="Build the demo database with the offline judge.")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"target DuckDB file (default {DEFAULT_DB})")
    parser.add_argument("--force", action="store_true", help="rebuild from scratch even if up to date")
    args = parser.parse_args(argv)
    # The offline judge encodes many tiny batches; a second torch thread only adds hand-off cost
    # there, and on a busy machine its spinning made the build several times slower (measured).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    counts = build(args.db, args.force)
    print("Table-2 rules firing at default thresholds (items per run):")
    print(summary(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
