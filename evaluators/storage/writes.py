"""Every write of results and of people's input: each builds its rows in pandas, then opens the file,
inserts them in ONE transaction and closes it, so a reader sees a write whole or not at all. A run's
owned writes (heartbeats, take-overs) are in ownership.py; each run's per-item table is kept by wide.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from evaluators.core.records import IMPORTED, Component, Item, JudgeCall, Label, Score, Status, Verdict
from evaluators.storage.store import NotADatabase, StoreMissing, connect, migrate, transaction
from evaluators.storage.wide import refresh_wide, written_ids


def _frame(records: Sequence[Any], columns: list[str]) -> pd.DataFrame:
    # The fields themselves, not asdict(): its recursive deep copy was most of a group commit's CPU.
    frame = pd.DataFrame([[getattr(r, c) for c in columns] for r in records], columns=columns)
    if "status" in frame:
        frame["status"] = frame["status"].map(lambda s: s.value if isinstance(s, Status) else s)
    return frame


def insert(con: Any, table: str, frame: pd.DataFrame) -> None:
    if frame.empty:
        return
    con.register("_batch", frame)
    try:
        if table == "judge_calls":
            # An answered call replaces a failed one under its key (a step asked again); the first answer stays.
            sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in frame.columns if c != "key")
            con.execute(f"""INSERT INTO judge_calls BY NAME SELECT * FROM _batch
                            ON CONFLICT (key) DO UPDATE SET {sets} WHERE judge_calls.reply IS NULL""")
        else:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch")
    finally:
        con.unregister("_batch")


def _calls_frame(calls: Sequence[JudgeCall]) -> pd.DataFrame:
    frame = _frame(
        calls,
        [
            "key",
            "model",
            "prompt_name",
            "prompt_hash",
            "messages",
            "params",
            "reply",
            "status",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "latency_ms",
            "error",
            "endpoint",
        ],
    )
    frame["endpoint"] = frame["endpoint"].astype("object")
    frame["messages"] = frame["messages"].map(lambda m: json.dumps(m, ensure_ascii=False))
    frame["params"] = frame["params"].map(lambda p: json.dumps(p, sort_keys=True))
    frame["cost"] = frame["cost"].astype("float64")
    frame["created_at"] = pd.Timestamp.now(tz="UTC").tz_localize(None)
    # One row per key, an answered one where the batch has both (the upsert cannot see its own rows).
    return frame.sort_values("reply", key=lambda r: r.isna(), kind="stable").drop_duplicates("key")


def _items_frame(run_id: str, items: Sequence[Item]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": run_id,
            "item_id": [i.id for i in items],
            "query": [i.query for i in items],
            "sources": [list(i.sources) for i in items],
            "response": [i.response for i in items],
            "reference": [i.reference for i in items],
            "metadata": [json.dumps(i.metadata, ensure_ascii=False, sort_keys=True) for i in items],
            "content_hash": [i.content_hash() for i in items],
        }
    )


def _with_run(run_id: str, frame: pd.DataFrame) -> pd.DataFrame:
    frame.insert(0, "run_id", run_id)
    return frame


def write_batch(
    path: str | Path,
    run_id: str,
    items: Sequence[Item] = (),
    components: Sequence[Component] = (),
    verdicts: Sequence[Verdict] = (),
    scores: Sequence[Score] = (),
    calls: Sequence[JudgeCall] = (),
) -> None:
    """Write finished items with all their intermediates, and judge calls, in ONE transaction.

    An item row is only ever written together with its components, verdicts and scores, so a
    reader sees an item whole or not at all.
    """
    frames = batch_frames(run_id, items, components, verdicts, scores, calls)
    with connect(path) as con:
        with transaction(con):
            for table, frame in frames:
                insert(con, table, frame)
            refresh_wide(con, run_id, written_ids(frames[1:]))


# The tables holding an item's results: a replaced or removed item's rows go from all of them.
ITEM_TABLES = ("items", "components", "verdicts", "scores", "imported_scores", "run_wide")


def batch_frames(
    run_id: str,
    items: Sequence[Item],
    components: Sequence[Component],
    verdicts: Sequence[Verdict],
    scores: Sequence[Score],
    calls: Sequence[JudgeCall],
) -> list[tuple[str, pd.DataFrame]]:
    """The tables of one write, judge calls first."""
    frames = [
        ("judge_calls", _calls_frame(calls) if calls else pd.DataFrame()),
        ("components", _with_run(run_id, _frame(components, ["item_id", "kind", "idx", "text", "parent", "call_key"]))),
        (
            "verdicts",
            _with_run(
                run_id,
                _frame(
                    verdicts,
                    [
                        "item_id",
                        "metric",
                        "component_kind",
                        "component_idx",
                        "target",
                        "value",
                        "status",
                        "evidence",
                        "call_key",
                        "detail",
                        "p",
                        "p_kind",
                        "tier",
                    ],
                ),
            ),
        ),
        (
            "scores",
            _with_run(
                run_id,
                _frame(scores, ["item_id", "metric", "value", "n_scored", "n_total", "status", "n_unsure", "expected"]),
            ),
        ),
        ("imported_scores", imported_frame(run_id, items)),
        ("items", _items_frame(run_id, items)),
    ]
    for _, frame in frames:
        for col in ("parent", "component_idx", "n_scored", "n_total", "n_unsure", "idx"):
            if col in frame:
                frame[col] = frame[col].astype("Int64")
        for col in ("value", "evidence", "p"):
            if col in frame:
                frame[col] = frame[col].astype("float64")
    return frames


def add_triage(
    path: str | Path,
    run_id: str,
    item_id: str,
    label: str,
    component: str,
    note: str,
    author: str,
    deadline_s: float = 5.0,
) -> None:
    """Append one triage note. Raises StoreBusy if the file stays locked past the deadline."""
    with connect(path, deadline_s=deadline_s) as con:
        con.execute(
            "INSERT INTO triage VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
            [run_id, item_id, label, component, note, author],
        )


def add_labels(path: str | Path, run_id: str, labels: Sequence[Label], deadline_s: float = 20.0) -> None:
    """Append labels to a run in ONE transaction: all of them or, on any error, none.

    Raises StoreBusy if the file stays locked past the deadline.
    """
    frame = _with_run(
        run_id, _frame(labels, ["item_id", "rule", "metric", "component_idx", "label", "note", "author", "origin"])
    )
    frame["component_idx"] = frame["component_idx"].astype("Int64")
    frame["created_at"] = pd.Timestamp.now(tz="UTC").tz_localize(None)
    with connect(path, deadline_s=deadline_s) as con:
        with transaction(con):
            insert(con, "labels", frame)


def delete_run(path: str | Path, run_id: str, deadline_s: float = 20.0) -> dict[str, int]:
    """Delete a run and every row that belongs to it (items, verdicts, scores, triage notes...) in ONE
    transaction; returns the rows deleted per table. This database's own judge calls stay: they are a
    cache shared by runs; those imported with the run go with it. Rows of the name left without their
    runs row (a half import by an older version) are deleted too.

    Raises StoreMissing for a missing file and KeyError when nothing of the run exists.
    """
    if not Path(path).exists():
        raise StoreMissing(f"{path}: no such database file")
    with connect(path, deadline_s=deadline_s) as con:
        # Every table with a run_id column, so a table a later migration adds is covered too.
        tables = [
            t
            for (t,) in con.execute("""
            SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t
              ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.column_name = 'run_id' AND c.table_schema = 'main' AND t.table_type = 'BASE TABLE'
            ORDER BY c.table_name""").fetchall()
        ]
        if "runs" not in tables:
            raise NotADatabase(f"{path}: not a RAG Triage database (no runs table)")
        with transaction(con):
            counts = {t: con.execute(f'DELETE FROM "{t}" WHERE run_id = ?', [run_id]).fetchone()[0] for t in tables}
            counts["judge_calls"] = con.execute("DELETE FROM judge_calls WHERE imported_for = ?", [run_id]).fetchone()[
                0
            ]
            if not any(counts.values()):
                raise KeyError(run_id)
    return counts


def write_frames(path: str | Path, frames: Mapping[str, pd.DataFrame]) -> None:
    """Bulk-insert prepared DataFrames ({table: frame}, columns by name) in ONE transaction.

    For generated data (the scale benchmark) where building a record object per row would cost more
    than the insert itself; the engine writes through write_batch().
    """
    with connect(path) as con:
        with transaction(con):
            for table, frame in frames.items():
                if table not in ("runs", "items", "components", "verdicts", "scores", "judge_calls", "triage"):
                    raise ValueError(f"unknown table {table!r}")
                insert(con, table, frame)
            written = [(t, f) for t, f in frames.items() if t in ("items", "verdicts", "scores") and not f.empty]
            for run_id in sorted({r for _, f in written for r in f["run_id"].unique()}):
                refresh_wide(con, run_id, written_ids([(t, f[f["run_id"] == run_id]) for t, f in written]))


def replace_grammar_correctness(path: str | Path, run_id: str, frame: pd.DataFrame) -> None:
    """Replace the run's rows of grammar_correctness with `frame` (columns by name), in one transaction."""
    migrate(path)
    with connect(path) as con:
        with transaction(con):
            con.execute("DELETE FROM grammar_correctness WHERE run_id = ?", [run_id])
            insert(con, "grammar_correctness", frame)


def imported_frame(run_id: str, items: Sequence[Item]) -> pd.DataFrame:
    """The imported_scores rows of these items, from their metadata (records.IMPORTED: {origin: {metric:
    value or None}}); written in the transaction of the items' rows. Values that are not numbers are
    left out: a plain input's own metadata may use the key for something else."""
    rows = []
    for item in items:
        imported = item.metadata.get(IMPORTED)
        for origin, scores in imported.items() if isinstance(imported, dict) else ():
            for metric, value in scores.items() if isinstance(scores, dict) else ():
                if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
                    rows.append((run_id, item.id, str(origin), str(metric), value))
    frame = pd.DataFrame(rows, columns=["run_id", "item_id", "origin", "metric", "value"])
    frame["value"] = frame["value"].astype("float64")
    return frame
