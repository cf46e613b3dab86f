"""The hosted dashboard's inbox (`serve --inbox DIR`): each run file that appears in DIR is imported into
the dashboard's database (storage/runfile.py), then moved to DIR/imported/; a file that cannot be imported
moves to DIR/rejected/ with a one-line reason beside it.

Only complete files are read: a sender writes a file under a temporary name and renames it into place
(rsync does, as do object-store syncs). So a name that starts with a dot, or ends in .part, .tmp or
.wal, is never touched. A file moved away keeps its name behind the UTC time it was handled, so the same
name sent twice keeps both.

Whoever can write to DIR sends input from elsewhere: any name, any kind of file, at any moment. So the
watcher never dies: a look that fails is logged in one line and tried again at the next. A link or
anything but a regular file is rejected unread. imported/ and rejected/ are used only as real folders of
DIR (never through a link), moves and reasons are written only there, every name a log line shows is
escaped to one line, and a file that cannot be moved is passed over until it changes.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from evaluators.core.records import printable
from evaluators.storage import runfile
from evaluators.storage.store import StoreBusy

IMPORTED = "imported"
REJECTED = "rejected"
TEMPORARY = (".part", ".tmp", ".wal")  # suffixes of a file still being written, or DuckDB's own log
POLL_S = 1.0
REASON = ".reason"
NAME_BYTES = 255  # the longest file name most file systems take


def is_complete(name: str) -> bool:
    """Whether a name in the inbox is that of a file sent whole: not a temporary name."""
    return not name.startswith(".") and not name.endswith(TEMPORARY)


@dataclass
class Inbox:
    """The watcher's state between looks: what it could not move and why (passed over until the file
    changes), and the last failure of a whole look (logged once, not every second)."""

    folder: Path
    db: Path
    stuck: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (mtime_ns, size)
    failure: str = ""

    def scan(self) -> list[str]:
        """Look once: import each complete file, oldest first, and move it to imported/ or (with its
        reason) to rejected/. A busy database leaves the file for the next look. One line per file."""
        done: list[str] = []
        for name, seen in self._waiting():
            try:
                line = self._handle(name)
            except StoreBusy:
                break
            except OSError as exc:  # it went away, or imported/ or rejected/ cannot take it
                if not os.path.lexists(self.folder / name):
                    line = f"inbox: {name}: removed before it was handled"
                else:
                    self.stuck[name] = seen
                    line = f"inbox: {name}: left in place, it cannot be moved ({exc.strerror or exc})"
            done.append(printable(line))
        return done

    def _waiting(self) -> list[tuple[str, tuple[int, int]]]:
        """The complete files (and other entries but folders) to handle, oldest first, with what they were
        when seen; one removed meanwhile is left out, one stuck is passed over until it changes."""
        found = []
        with os.scandir(self.folder) as entries:
            for entry in entries:
                if not is_complete(entry.name):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:  # removed since the folder was read
                    continue
                seen = (info.st_mtime_ns, info.st_size)
                if stat.S_ISDIR(info.st_mode) or self.stuck.get(entry.name) == seen:
                    continue
                self.stuck.pop(entry.name, None)
                found.append((info.st_mtime_ns, entry.name, seen))
        return [(name, seen) for _, name, seen in sorted(found)]

    def _handle(self, name: str) -> str:
        """Import one entry and move it away; the line that says what became of it."""
        file = self.folder / name
        kind = os.lstat(file).st_mode
        if not stat.S_ISREG(kind):
            what = "a link" if stat.S_ISLNK(kind) else "not a regular file"
            return self._reject(name, f"{file}: not a run file ({what}): it was not read")
        try:
            result = runfile.import_run(file, self.db, via="inbox")
        except StoreBusy:
            raise
        except Exception as exc:  # anything wrong with the file: it goes aside with why, the rest go on
            return self._reject(name, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        _move(self.folder, name, IMPORTED)
        who = f" (the file says it was sent by {result.claimed_by})" if result.claimed_by else ""
        if not result.added:
            return f"inbox: {name}: run {result.run_id} was already here, nothing imported"
        return f"inbox: imported run {result.run_id} from {name}{who}"

    def _reject(self, name: str, reason: str) -> str:
        moved = _move(self.folder, name, REJECTED)
        folder = _open_folder(self.folder, REJECTED)
        try:
            fd = os.open(moved + REASON, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(printable(reason) + "\n")
        finally:
            os.close(folder)
        return f"inbox: rejected {name}: {reason}"

    def watch(self, poll_s: float = POLL_S, stop: threading.Event | None = None) -> None:
        """Scan every `poll_s` seconds until `stop` is set, printing what each look handled. A look that
        fails is printed once (until another failure or a good look) and tried again."""
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                lines = self.scan()
                self.failure = ""
            except Exception as exc:  # the folder itself: gone, unreadable; the next look tries again
                failure = printable(
                    f"inbox: a look at {self.folder} failed ({type(exc).__name__}: {exc}); trying again"
                )
                lines = [failure] if failure != self.failure else []
                self.failure = failure
            for line in lines:
                print(line, flush=True)
            stop.wait(poll_s)


def _open_folder(inbox: Path, name: str) -> int:
    """A descriptor of the real folder inbox/name, made when missing; OSError when it is a link or a file."""
    try:
        os.mkdir(name, dir_fd=(parent := os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)))
    except FileExistsError:
        pass
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        raise OSError(exc.errno, f"{name}/ is not a folder of the inbox") from None
    finally:
        os.close(parent)


def _move(inbox: Path, name: str, to: str) -> str:
    """Move inbox/name into the folder `to`, behind the UTC time, cut to a name the file system takes (with
    room for REASON); returns the new name."""
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}-"
    room = NAME_BYTES - len(REASON) - len(stamp)
    kept = name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    moved = stamp + kept
    folder = _open_folder(inbox, to)
    source = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(name, moved, src_dir_fd=source, dst_dir_fd=folder)
    finally:
        os.close(source)
        os.close(folder)
    return moved


def scan(inbox: Path, db: Path) -> list[str]:
    """Look once at `inbox` (see Inbox.scan), with no memory of earlier looks."""
    return Inbox(inbox, db).scan()


def watch(inbox: Path, db: Path, poll_s: float = POLL_S, stop: threading.Event | None = None) -> None:
    """Scan `inbox` every `poll_s` seconds until `stop` is set (see Inbox.watch)."""
    Inbox(inbox, db).watch(poll_s, stop)
