"""Input from another machine, tried as an attacker would: run files, the inbox, judges files and the hosted
write paths. Each case builds a hostile input, feeds it through the real CLI, the inbox's scan, the loopback
OpenAI server or the dashboard (AppTest), and looks at what happened: a case HOLDS when the input is refused
in one line (or handled) and nothing it should not do was done (no file of this machine read, no row
written, the cache not answered by it, no page broken, no file written outside the inbox). Prints, per
surface, the cases tried and held, and what each broken case did.

    python -m benchmarks.hostile_inputs [--surface run files|inbox|judges files|hosted write paths] [-k NAME]

Run it from another checkout's root (a copy of this file) to measure that version: it uses only the CLI,
runfile.import_run(file, db), inbox.scan(folder, db) and the pages, which every version since run files has.
tests/test_untrusted.py holds every case to HOLD.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import evaluators  # noqa: F401  (offline switches)
from evaluators.cli import main as cli_main
from evaluators.storage import store

RUN = "llm-judge"
SECRET = "hostile-secret-6f1c2a"  # what a file must never make the host read
SURFACES = ("run files", "inbox", "judges files", "hosted write paths")


@dataclass(frozen=True)
class Case:
    """One hostile input: where it comes in, its name, and the attempt: None when it held, else what broke."""

    surface: str
    name: str
    attempt: Callable[["Lab"], str | None]


class Lab:
    """A folder of the case's own, with a seeded database and its run exported as a run file (built once per
    process and copied), and a secret file of this machine that no file from elsewhere may read."""

    _made: dict[str, Path] = {}

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.secret = folder / "secret.txt"
        self.secret.write_text(SECRET)

    @classmethod
    def _base(cls) -> dict[str, Path]:
        if not cls._made:
            from seed import seed

            base = Path(tempfile.mkdtemp(prefix="hostile-base-"))
            source = seed(base / "source.duckdb")
            out = base / "sent.duckdb"
            cli(["export-run", "--db", str(source), "--run", RUN, "--out", str(out)])
            cls._made.update(source=source, file=out)
        return cls._made

    def source(self) -> Path:
        """A copy of the seeded database of three runs."""
        path = self.folder / "source.duckdb"
        if not path.exists():
            shutil.copy(self._base()["source"], path)
        return path

    def run_file(self, name: str = "sent.duckdb", *sql: str) -> Path:
        """A copy of the seeded run's run file, with `sql` run on it as its sender could."""
        path = self.folder / name
        shutil.copy(self._base()["file"], path)
        if sql:
            with store.connect(path) as con:
                for statement in sql:
                    con.execute(statement.replace("SECRET_FILE", str(self.secret)))
        return path


def cli(args: Sequence[str]) -> tuple[int, str, str]:
    """`python -m evaluators ARGS` in this process: exit code, stdout, stderr (a traceback is caught)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        except BaseException as exc:  # a traceback is a case broken, not the benchmark
            code = -1
            err.write(f"Traceback: {type(exc).__name__}: {exc}\n")
    return code, out.getvalue(), err.getvalue()


MEMORY_CAP = 8 << 30  # bytes of address space a case's process may take: an unbounded read fails, not the machine


def _capped() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli_process(args: Sequence[str], timeout: float) -> tuple[int, str, str]:
    """The CLI in a process of its own, killed after `timeout` seconds (exit code -9), its memory capped."""
    try:
        done = subprocess.run([sys.executable, "-m", "evaluators", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout, preexec_fn=_capped)
    except subprocess.TimeoutExpired:
        return -9, "", f"still running after {timeout:g} s"
    return done.returncode, done.stdout, done.stderr


def one_line_refusal(code: int, err: str) -> str | None:
    """None when the command refused in one line (exit 2, no traceback); else what it did."""
    lines = err.strip().splitlines()
    if code == 0:
        return "accepted"
    if code != 2 or len(lines) != 1 or "Traceback" in err:
        return f"exit {code}, {len(lines)} lines: {(lines or [''])[-1][:160]}"
    return None


def texts_of(db: Path) -> str:
    """Every text the database holds, as one string (to look for the secret)."""
    if not db.exists():
        return ""
    with store.connect(db, read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()]
        return "\n".join(str(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)


def run_rows(db: Path, run: str = RUN) -> int:
    """The rows of `run` in any per-run table of the database."""
    if not db.exists():
        return 0
    with store.connect(db, read_only=True) as con:
        tables = [t for (t,) in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id' AND schema_name = 'main'"
        ).fetchall()]
        return sum(con.execute(f'SELECT count(*) FROM "{t}" WHERE run_id = ?', [run]).fetchone()[0] for t in tables)


# ---------------------------------------------------------------- run files

def refused_whole(lab: Lab, file: Path, *flags: str) -> str | None:
    """Import `file` into a new database: held when refused in one line, with nothing of the run written and
    the secret nowhere."""
    host = lab.folder / "host.duckdb"
    code, _, err = cli(["import-run", str(file), "--db", str(host), *flags])
    broke = one_line_refusal(code, err)
    if SECRET in texts_of(host):
        return f"read this machine's file into the database ({broke or 'refused after'})"
    if run_rows(host):
        return f"wrote {run_rows(host)} rows of the run ({broke or 'refused after'})"
    return broke


def _as_view(table: str, read: bool = True) -> Callable[[Lab], str | None]:
    """The file's `table` replaced by a view of it (reading this machine's secret file into a text)."""
    def attempt(lab: Lab) -> str | None:
        column = {"judge_calls": "reply", "runs": "error", "components": "text", "verdicts": "detail",
                  "items": "response", "run_file": "tool_version", "schema_version": None}[table]
        select = f"SELECT {table}_0.* REPLACE (t.content AS {column})" if read and column else "SELECT *"
        source = ", read_text('SECRET_FILE') t" if read and column else ""
        return refused_whole(lab, lab.run_file("view.duckdb", f"DROP INDEX IF EXISTS {table}_item",
                                               f"ALTER TABLE {table} RENAME TO {table}_0",
                                               f"CREATE VIEW {table} AS {select} FROM {table}_0{source}"))
    return attempt


def _forged(*sql: str, flags: Sequence[str] = ()) -> Callable[[Lab], str | None]:
    return lambda lab: refused_whole(lab, lab.run_file("forged.duckdb", *sql), *flags)


def _poisoned_cache(lab: Lab) -> str | None:
    """A run file whose replies were flipped must not answer the host's own evaluation of the same items."""
    from openai_server import OpenAIServer
    from test_runner import items, write_jsonl

    data = write_jsonl(lab.folder / "items.jsonl", items(2))
    source, file, host = (lab.folder / n for n in ("ci.duckdb", "ci-run.duckdb", "host.duckdb"))
    with OpenAIServer() as server:
        judge = ["--judge", "openai/test-judge", "--api-base", server.base_url, "--metrics", "gr", "--quiet"]
        assert cli(["evaluate", str(data), "--db", str(source), "--run", "ci", *judge])[0] == 0
        cli(["export-run", "--db", str(source), "--run", "ci", "--out", str(file)])
        with store.connect(file) as con:  # every verdict flipped ("1: 1" to "1: 0"), the replies still readable
            for a, b in ((": 1", ": @"), (": 0", ": 1"), (": @", ": 0"), (">1<", ">@<"), (">0<", ">1<"), (">@<", ">0<")):
                con.execute("UPDATE judge_calls SET reply = replace(reply, ?, ?)", [a, b])
        cli(["import-run", str(file), "--db", str(host)])
        before = len(server.requests)
        cli(["evaluate", str(data), "--db", str(host), "--run", "mine", *judge])
        asked = len(server.requests) - before
    return None if asked else "the host's own evaluation made 0 calls: the file's forged replies answered it"


def _unbounded(lab: Lab) -> str | None:
    """A file whose checks outlast the time limit given (3 million rows): the import stops, writing nothing."""
    file = lab.run_file("huge.duckdb", "INSERT INTO imported_scores SELECT 'llm-judge', 'q01', 'ragas', 'm' || i, 0.5 "
                                        "FROM range(3000000) t(i)")
    host = lab.folder / "host.duckdb"
    started = time.monotonic()
    code, _, err = cli_process(["import-run", str(file), "--db", str(host), "--max-seconds", "1"], timeout=60)
    took = time.monotonic() - started
    if code == 0 or code == -9:
        return f"imported or still running after {took:.0f} s"
    if "--max-seconds" in err and "unrecognized" in err:  # no bound to give: as the file is, it must hold
        return "no time limit can be given to an import"
    return one_line_refusal(code, err) or (None if not run_rows(host) else "rows written")


def _export_over_db(lab: Lab) -> str | None:
    db = lab.source()
    runs_before = run_rows(db, "weak-retriever")
    code, _, err = cli(["export-run", "--db", str(db), "--run", RUN, "--out", str(db)])
    if run_rows(db, "weak-retriever") != runs_before:
        return f"exit {code}: the database's other runs are gone"
    return one_line_refusal(code, err)


def _authors_are_claims(lab: Lab) -> str | None:
    file = lab.run_file("claims.duckdb", "UPDATE runs SET started_by = 'owner@example.com'",
                        "UPDATE run_file SET started_by = 'owner@example.com'",
                        f"INSERT INTO labels VALUES ('{RUN}', 'q01', 'T2.3', NULL, NULL, 1, 'agreed', 'owner@example.com', "
                        "'review', TIMESTAMP '2026-11-01 10:00:00')")
    host = lab.folder / "host.duckdb"
    code, out, err = cli(["import-run", str(file), "--db", str(host)])
    if code != 0:
        return f"refused a plain file: {err.strip()[:160]}"
    with store.connect(host, read_only=True) as con:
        authors = {a for (a,) in con.execute("SELECT author FROM labels UNION SELECT started_by FROM runs").fetchall()}
        recorded = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'run_imports'").fetchone()[0]
    if "owner@example.com" in authors:
        return "the file's authors are stored as facts"
    return None if recorded else "who imported the run is recorded nowhere"


def _lookalike_import(lab: Lab) -> str | None:
    host = lab.source()  # holds weak-retriever
    return refused_whole_into(lab, host, lab.run_file(), "--as", "weak-r\u0435triever")


def refused_whole_into(lab: Lab, host: Path, file: Path, *flags: str) -> str | None:
    before = len(store.query(host, "SELECT run_id FROM runs"))
    code, _, err = cli(["import-run", str(file), "--db", str(host), *flags])
    if len(store.query(host, "SELECT run_id FROM runs")) != before:
        return "imported"
    return one_line_refusal(code, err)


RUN_FILES = [
    *(Case("run files", f"{table} as a view reading a file of this machine", _as_view(table))
      for table in ("judge_calls", "runs", "components", "verdicts", "items", "run_file")),
    Case("run files", "schema_version as a view", _as_view("schema_version")),
    Case("run files", "a macro in the file", _forged("CREATE MACRO double_it(x) AS x * 2")),
    Case("run files", "a sequence in the file", _forged("CREATE SEQUENCE counter")),
    Case("run files", "a generated column", _forged("ALTER TABLE triage RENAME TO t0", "CREATE TABLE triage (run_id VARCHAR, "
         "item_id VARCHAR, label VARCHAR, component VARCHAR, note VARCHAR AS (repeat('x', 100)), author VARCHAR, created_at TIMESTAMP)",
         "INSERT INTO triage SELECT run_id, item_id, label, component, author, created_at FROM t0", "DROP TABLE t0")),
    Case("run files", "forged replies poison the host's cache", _poisoned_cache),
    Case("run files", "a score of NaN", _forged("UPDATE scores SET value = 'nan' WHERE metric = 'gr'")),
    Case("run files", "a score of inf", _forged("UPDATE scores SET value = 'inf' WHERE metric = 'rp'")),
    Case("run files", "a score of 5.0", _forged("UPDATE scores SET value = 5.0 WHERE metric = 'sp1'")),
    Case("run files", "a score of -3", _forged("UPDATE scores SET value = -3 WHERE metric = 'sp1'")),
    Case("run files", "a verdict p of 7", _forged("UPDATE verdicts SET p = 7 WHERE metric = 'gr'")),
    Case("run files", "items.metadata not JSON", _forged("UPDATE items SET metadata = 'not json {'")),
    Case("run files", "runs.prompt_hashes = '42'", _forged("UPDATE runs SET prompt_hashes = '42'")),
    Case("run files", "a score status 'weird'", _forged("UPDATE scores SET status = 'weird' WHERE metric = 'gr'")),
    Case("run files", "a judge call's messages not a list", _forged("UPDATE judge_calls SET messages = '{\"a\": 1}'")),
    Case("run files", "a second run's rows in the file", _forged(
        "INSERT INTO items SELECT 'planted', item_id, query, sources, response, reference, metadata, content_hash "
        "FROM items")),
    Case("run files", "runs as a view of nothing (a half run)", _forged(
        "ALTER TABLE runs RENAME TO runs_0", "CREATE VIEW runs AS SELECT * FROM runs_0 WHERE false")),
    Case("run files", "items as a view of nothing", _forged(
        "ALTER TABLE items RENAME TO items_0", "CREATE VIEW items AS SELECT * FROM items_0 WHERE false")),
    Case("run files", "a view joining range(2e6) with itself", _forged(
        "ALTER TABLE judge_calls RENAME TO jc0",
        "CREATE VIEW judge_calls AS SELECT jc0.* FROM jc0, range(2000000) a, range(2000000) b WHERE a.range = b.range + 1e13")),
    Case("run files", "checks that outlast --max-seconds", _unbounded),
    Case("run files", "export-run --out the database itself", _export_over_db),
    Case("run files", "authors forged by the file", _authors_are_claims),
    Case("run files", "schema_version as VARCHAR", _forged(
        "ALTER TABLE schema_version ALTER version TYPE VARCHAR", "UPDATE schema_version SET version = 'ten'")),
    Case("run files", "schema_version negative", _forged("UPDATE schema_version SET version = -4")),
    Case("run files", "schema_version faked older", _forged("DELETE FROM schema_version WHERE version > 3")),
    Case("run files", "a name that looks like a run's here", _lookalike_import),
    Case("run files", "a heartbeat in the year 9999", _forged(
        "UPDATE runs SET status = 'running', heartbeat_at = TIMESTAMP '9999-01-01 00:00:00'")),
    Case("run files", "a time before 2000", _forged("UPDATE judge_calls SET created_at = TIMESTAMP '1066-10-14 09:00:00'")),
    Case("run files", "a label of 2", _forged(f"INSERT INTO labels VALUES ('{RUN}', 'q01', NULL, 'gr', 0, 2, '', 'x', "
                                              "'review', TIMESTAMP '2026-11-01 10:00:00')")),
    Case("run files", "a triage label of its own", _forged(f"INSERT INTO triage VALUES ('{RUN}', 'q01', 'pwned', "
                                                           "'Retriever', '', 'x', TIMESTAMP '2026-11-01 10:00:00')")),
]


# ---------------------------------------------------------------- the inbox

def _scan(box: Path, db: Path) -> list[str]:
    from evaluators.runs import inbox

    return inbox.scan(box, db)


def _inbox(lab: Lab) -> tuple[Path, Path]:
    box = lab.folder / "inbox"
    box.mkdir()
    return box, lab.folder / "hosted.duckdb"


def _survives(lab: Lab, prepare: Callable[[Path], None]) -> str | None:
    """Held when a scan of an inbox prepared so does not raise, and a good file sent after is imported."""
    box, db = _inbox(lab)
    prepare(box)
    try:
        lines = _scan(box, db)
    except Exception as exc:
        return f"the scan raised {type(exc).__name__}: {exc}"[:200]
    if any("\n" in line for line in lines):
        return f"a log line spans lines: {lines!r}"[:200]
    shutil.copy(lab.run_file(), box / "good.duckdb")
    try:
        _scan(box, db)
    except Exception as exc:
        return f"the next scan raised {type(exc).__name__}"
    return None if run_rows(db) else "a good file sent after was not imported"


def _bad(box: Path, name: str = "bad.duckdb") -> None:
    (box / name).write_text("not a run file")


def _removed_mid_scan(lab: Lab) -> str | None:
    from evaluators.runs import inbox
    from evaluators.storage import runfile

    real = runfile.import_run

    def first_removes_second(file: Path, db: Path, *args: object, **kwargs: object) -> object:
        (Path(file).parent / "b-second.duckdb").unlink(missing_ok=True)
        return real(file, db, *args, **kwargs)

    def prepare(box: Path) -> None:
        _bad(box, "a-first.duckdb")
        _bad(box, "b-second.duckdb")
        os.utime(box / "b-second.duckdb", (time.time() + 5, time.time() + 5))  # handled second

    runfile.import_run = first_removes_second  # type: ignore[assignment]
    try:
        return _survives(lab, prepare)
    finally:
        runfile.import_run = real  # type: ignore[assignment]
        del inbox


def _rejected_link(lab: Lab) -> str | None:
    outside = lab.folder / "outside"
    outside.mkdir()
    box, db = _inbox(lab)
    (box / "rejected").symlink_to(outside)
    _bad(box)
    with contextlib.suppress(Exception):
        _scan(box, db)
    return f"wrote {sorted(p.name for p in outside.iterdir())} outside the inbox" if any(outside.iterdir()) else None


def _linked_run_file(lab: Lab) -> str | None:
    box, db = _inbox(lab)
    (box / "linked.duckdb").symlink_to(lab.run_file())
    with contextlib.suppress(Exception):
        _scan(box, db)
    return "imported a file from outside the inbox through a link" if run_rows(db) else None


def _watcher_survives(lab: Lab) -> str | None:
    from evaluators.runs import inbox

    box, db = _inbox(lab)
    (box / "rejected").write_text("a plain file where the folder goes")
    _bad(box)
    stop = threading.Event()
    watcher = threading.Thread(target=inbox.watch, args=(box, db, 0.05, stop), daemon=True)
    with contextlib.redirect_stdout(io.StringIO()):
        watcher.start()
        time.sleep(0.5)
        (box / "rejected").unlink()
        shutil.copy(lab.run_file(), box / "good.duckdb")
        # The watcher's own process writes the database: look at the folder it moves an imported file to.
        give_up = time.monotonic() + 60  # a look every 0.05 s: an import takes seconds on a loaded machine
        while not list((box / "imported").glob("*good.duckdb")) and time.monotonic() < give_up and watcher.is_alive():
            time.sleep(0.1)
        stop.set()
        watcher.join(timeout=60)
    return None if run_rows(db) else "the watcher died: a file sent after was never imported"


INBOX = [
    Case("inbox", "rejected/ is a plain file", lambda lab: _survives(lab, lambda b: ((b / "rejected").write_text("x"), _bad(b)))),
    Case("inbox", "a 240-character name", lambda lab: _survives(lab, lambda b: _bad(b, "n" * 232 + ".duckdb"))),
    Case("inbox", "a file removed during a scan", _removed_mid_scan),
    Case("inbox", "a newline in a file name", lambda lab: _survives(
        lab, lambda b: _bad(b, "x\ninbox: imported run forged from y.duckdb"))),
    Case("inbox", "an escape sequence in a file name", lambda lab: _survives(lab, lambda b: _bad(b, "x\x1b[2Jy.duckdb"))),
    Case("inbox", "rejected/ a link out of the inbox", _rejected_link),
    Case("inbox", "a link to a run file elsewhere", _linked_run_file),
    Case("inbox", "a named pipe", lambda lab: _survives(lab, lambda b: os.mkfifo(b / "pipe.duckdb"))),
    Case("inbox", "the watcher after a failed look", _watcher_survives),
    Case("inbox", "a view reading a file of this machine", lambda lab: _survives(
        lab, lambda b: shutil.copy(_as_view_file(lab), b / "view.duckdb")) or _secret_in(lab.folder / "hosted.duckdb")),
]


def _as_view_file(lab: Lab) -> Path:
    return lab.run_file("view.duckdb", "ALTER TABLE judge_calls RENAME TO jc0",
                        "CREATE VIEW judge_calls AS SELECT jc0.* REPLACE (t.content AS reply) FROM jc0, read_text('SECRET_FILE') t")


def _secret_in(db: Path) -> str | None:
    return "read this machine's file into the database" if SECRET in texts_of(db) else None


# ---------------------------------------------------------------- judges files

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + k)}: &{chr(98 + k)} [{', '.join(['*' + chr(97 + k)] * 9)}]\n" for k in range(8)
) + "model_list:\n  - model_name: j\n    litellm_params: {model: openai/x, api_base: 'http://127.0.0.1:9/v1'}\n" \
    "router_settings: {fallbacks: [{j: *i}]}\n"


def _judges(lab: Lab, text: str | None, path: Path | None = None, judge: str = "j", timeout: float = 0,
            says: str = "") -> str | None:
    """Evaluate two items with a judges file: held when refused in one line (saying `says`) before any call."""
    from test_runner import items, write_jsonl

    data = write_jsonl(lab.folder / "items.jsonl", items(2))
    if path is None:
        path = lab.folder / "judges.yaml"
        path.write_text(text or "")
    args = ["evaluate", str(data), "--db", str(lab.folder / "j.duckdb"), "--run", "r", "--judges", str(path),
            "--judge", judge, "--metrics", "gr", "--quiet"]
    code, _, err = cli_process(args, timeout) if timeout else cli(args)
    broke = one_line_refusal(code, err)
    return broke or (None if says in err else f"refused without saying {says!r}: {err.strip()[:160]}")


def _key_to_other_host(lab: Lab) -> str | None:
    from openai_server import OpenAIServer

    with OpenAIServer() as server:
        text = (f"model_list:\n  - model_name: j\n    litellm_params: {{model: replicate/meta/llama, api_base: "
                f"'{server.base_url}', api_key: os.environ/HOSTILE_KEY}}\n")
        os.environ["HOSTILE_KEY"] = "sk-hostile-0123456789"
        try:
            return _judges(lab, text)
        finally:
            del os.environ["HOSTILE_KEY"]


JUDGES_FILES = [
    Case("judges files", "a 1 KB alias bomb", lambda lab: _judges(lab, ALIAS_BOMB, timeout=20)),
    Case("judges files", "a 22 MB file", lambda lab: _judges(
        lab, "model_list:\n" + "  - {model_name: j, litellm_params: {model: openai/x}}\n" * 400_000, timeout=20)),
    Case("judges files", "--judges /dev/zero", lambda lab: _judges(lab, None, Path("/dev/zero"), timeout=20)),
    Case("judges files", "a key written in model_info", lambda lab: _judges(
        lab, "model_list:\n  - model_name: j\n    litellm_params: {model: openai/x}\n    model_info: {api_key: sk-live-1}\n",
        says="model_info")),
    Case("judges files", "a model named offline", lambda lab: _judges(
        lab, "model_list:\n  - model_name: offline\n    litellm_params: {model: openai/x, api_base: 'http://127.0.0.1:9/v1'}\n",
        judge="offline")),
    Case("judges files", "replicate/ given an api_base", _key_to_other_host),
    Case("judges files", "a key in api_key: the message says what to do", lambda lab: _judges(
        lab, "model_list:\n  - model_name: j\n    litellm_params: {model: openai/x, api_key: sk-live-123}\n",
        says="must be os.environ/NAME")),
]


# ---------------------------------------------------------------- hosted write paths

@contextlib.contextmanager
def _page(db: Path, role: str | None = None) -> Iterator[object]:
    """The Evaluate page on `db`, as a logged-in person of `role` (None: the local user with every role)."""
    from streamlit.testing.v1 import AppTest

    os.environ["RAG_TRIAGE_DB"] = str(db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if role is not None:
        at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "s" * 32,
                              "client_id": "c", "client_secret": "s",
                              "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}
        at.secrets["roles"] = {"evaluators": ["ev@example.com"]}
        at.user = {"is_logged_in": True, "email": "ev@example.com" if role == "evaluator" else "viewer@example.com",
                   "email_verified": True}
    at.switch_page("pages/6_Evaluate.py")
    yield at


def _upload_run_file(lab: Lab, file: Path, name: str, role: str | None = None) -> tuple[object, Path]:
    db = lab.source()
    with _page(db, role) as at:
        at.run()
        uploader = next((u for u in at.get("file_uploader") if u.key == "run_file"), None)
        if uploader is None:
            return at, db
        uploader.set_value((name, file.read_bytes(), "application/octet-stream"))
        at.run()
        at.text_input(key="run_file_as").set_value("sent")
        at.run()
        button = next((b for b in at.button if b.key == "import_run"), None)
        if button is not None:
            button.click().run()
    return at, db


def _page_holds(at: object) -> str | None:
    exceptions = [e.value for e in getattr(at, "exception")]
    return f"the page raised: {exceptions[0][:160]}" if exceptions else None


def _upload_named(name: str) -> Callable[[Lab], str | None]:
    def attempt(lab: Lab) -> str | None:
        at, _ = _upload_run_file(lab, lab.run_file(), name)
        return _page_holds(at)
    return attempt


def _upload_bad_schema(lab: Lab) -> str | None:
    file = lab.run_file("bad.duckdb", "ALTER TABLE schema_version ALTER version TYPE VARCHAR")
    at, _ = _upload_run_file(lab, file, "bad.duckdb")
    return _page_holds(at) or (None if getattr(at, "error") else "no error shown")


def _items_upload_named(name: str) -> Callable[[Lab], str | None]:
    def attempt(lab: Lab) -> str | None:
        with _page(lab.source()) as at:
            at.run()
            row = {"id": "q1", "query": "q?", "sources": ["s."], "response": "r."}
            at.file_uploader(key="upload").set_value((name, json.dumps(row).encode(), "text/plain"))
            at.run()
            return _page_holds(at)
    return attempt


def _import_checks_role(lab: Lab) -> str | None:
    from evaluators.dashboard import access

    importer = getattr(access, "import_run", None)
    if importer is None:
        return "import has no role check of its own: only the page hides its button"
    viewer = access.User("viewer@example.com", access.VIEWER)
    try:
        importer(viewer, str(lab.source()), lab.run_file(), "sent")
    except access.Refused:
        return None
    return "a viewer imported a run"


def _uploader_recorded(lab: Lab) -> str | None:
    at, db = _upload_run_file(lab, lab.run_file(), "sent.duckdb", role="evaluator")
    who = " ".join(str(w) for w in store.query(db, "SELECT * FROM runs WHERE run_id = 'sent'").iloc[0].tolist()) \
        if run_rows(db, "sent") else ""
    if not who:
        return _page_holds(at) or "the upload imported nothing"
    with store.connect(db, read_only=True) as con:
        has = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'run_imports'").fetchone()[0]
        recorded = has and con.execute("SELECT imported_by FROM run_imports WHERE run_id = 'sent'").fetchall()
    return None if recorded and recorded[0][0] == "ev@example.com" else "who uploaded it is recorded nowhere"


def _lookalike_evaluate(lab: Lab) -> str | None:
    from test_runner import items, write_jsonl

    db = lab.source()
    data = write_jsonl(lab.folder / "items.jsonl", items(1))
    code, _, err = cli(["evaluate", str(data), "--db", str(db), "--run", "weak-r\u0435triever", "--metrics", "sd", "--quiet"])
    return one_line_refusal(code, err)


HOSTED = [
    Case("hosted write paths", "a run file uploaded as '..'", _upload_named("..")),
    Case("hosted write paths", "a run file uploaded as '.'", _upload_named(".")),
    Case("hosted write paths", "a run file uploaded with a 300-character name", _upload_named("r" * 292 + ".duckdb")),
    Case("hosted write paths", "an upload whose schema_version is VARCHAR", _upload_bad_schema),
    # (a name with no allowed suffix, such as '..', Streamlit's uploader refuses itself)
    Case("hosted write paths", "items uploaded under a path with a newline", _items_upload_named("../x\ny.jsonl")),
    Case("hosted write paths", "items uploaded with a 300-character name", _items_upload_named("i" * 294 + ".jsonl")),
    Case("hosted write paths", "import_run checks the role itself", _import_checks_role),
    Case("hosted write paths", "the uploader is recorded", _uploader_recorded),
    Case("hosted write paths", "a new run named like another", _lookalike_evaluate),
]

CASES = [*RUN_FILES, *INBOX, *JUDGES_FILES, *HOSTED]


def attempt(case: Case) -> str | None:
    """Try one case in a folder of its own; None when it held."""
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        try:
            return case.attempt(Lab(Path(tmp)))
        except Exception as exc:  # the attempt itself went wrong: the case did not hold
            return f"{type(exc).__name__}: {str(exc)[:200]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surface", choices=SURFACES, help="only the cases of one surface")
    parser.add_argument("-k", dest="match", default="", help="only the cases whose name holds this text")
    args = parser.parse_args(argv)
    chosen = [c for c in CASES if (not args.surface or c.surface == args.surface) and args.match in c.name]
    tried, held, broken = Counter[str](), Counter[str](), []
    for case in chosen:
        started = time.monotonic()
        outcome = attempt(case)
        tried[case.surface] += 1
        held[case.surface] += outcome is None
        print(f"{'held ' if outcome is None else 'BROKE'} {time.monotonic() - started:5.1f} s  {case.surface}: {case.name}"
              + (f": {outcome}" if outcome else ""), flush=True)
        if outcome:
            broken.append(case)
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    for surface in SURFACES:
        if tried[surface]:
            print(f"{surface}: {held[surface]} of {tried[surface]} held")
    print(f"all: {sum(held.values())} of {sum(tried.values())} held")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
