"""The hosted dashboard's inbox (`serve --inbox DIR`): each run file that appears in DIR is imported into
the dashboard's database (storage/runfile.py), then moved to DIR/imported/; a file that cannot be imported
moves to DIR/rejected/ with a one-line reason beside it.

Only complete files are read: a sender writes a file under a temporary name and renames it into place
(rsync does, as do object-store syncs). So a name that starts with a dot, or ends in .part, .tmp or
.wal, is never touched. A file moved away keeps its name behind the UTC time it was handled, so the same
name sent twice keeps both.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

from evaluators.storage import runfile
from evaluators.storage.store import StoreBusy

IMPORTED = "imported"
REJECTED = "rejected"
TEMPORARY = (".part", ".tmp", ".wal")  # suffixes of a file still being written, or DuckDB's own log
POLL_S = 1.0


def is_complete(path: Path) -> bool:
    """Whether a path in the inbox is a file sent whole: not a folder, not a temporary name."""
    return path.is_file() and not path.name.startswith(".") and not path.name.endswith(TEMPORARY)


def _move(file: Path, folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    moved = folder / f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}-{file.name}"
    file.replace(moved)
    return moved


def scan(inbox: Path, db: Path) -> list[str]:
    """Look once: import each complete file of `inbox` into `db`, oldest first, and move it to imported/
    or (with its reason) to rejected/. A busy database leaves the file for the next look. Returns one line
    per file handled."""
    done = []
    files = sorted((p for p in inbox.iterdir() if is_complete(p)), key=lambda p: p.stat().st_mtime_ns)
    for file in files:
        try:
            result = runfile.import_run(file, db)
        except StoreBusy:
            break
        except Exception as exc:  # anything wrong with the file: it goes aside with why, the rest go on
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            moved = _move(file, inbox / REJECTED)
            moved.with_name(f"{moved.name}.reason").write_text(reason + "\n", encoding="utf-8")
            done.append(f"inbox: rejected {file.name}: {reason}")
            continue
        _move(file, inbox / IMPORTED)
        who = f", sent by {result.started_by}" if result.started_by else ""
        done.append(
            f"inbox: imported run {result.run_id} from {file.name}{who}"
            if result.added
            else f"inbox: {file.name}: run {result.run_id} was already here, nothing imported"
        )
    return done


def watch(inbox: Path, db: Path, poll_s: float = POLL_S, stop: threading.Event | None = None) -> None:
    """Scan `inbox` every `poll_s` seconds until `stop` is set, printing what each look handled."""
    stop = stop or threading.Event()
    while not stop.is_set():
        for line in scan(inbox, db):
            print(line, flush=True)
        stop.wait(poll_s)
