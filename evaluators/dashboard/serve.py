"""`python -m evaluators serve`: the dashboard's Streamlit server, ready for its first visitor.

`streamlit run app.py` imports nothing of the app until the first session runs the script, so the first
visitor waits for pandas, pyarrow, DuckDB, plotly and our modules (about 1 s of CPU). This command
imports them before the server starts, then starts Streamlit's own `run` in this process with the same
config (.streamlit/config.toml) and flags, and once the server's runtime exists reads the runs catalog
and the database check through the dashboard's cache. Then it opens every page's default view once
itself, the Runs, Run, Diagnosis, Trust and Sources pages of the newest runs and the comparison the Runs page links to, over
Streamlit's websocket as a browser does, so what those views read (a million-item run's summaries take
seconds) is cached before the first visitor comes. Every read is keyed by the database file's version, so
a run written later still shows at once; once the file has been quiet a few seconds after new runs, serve
opens the views again. These views are logged with `session=warmup`; `--no-warm-pages` skips them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Mapping
from urllib.parse import urlencode, urlsplit

from evaluators.core.resources import resource

APP = resource("app.py")  # with pages/ and .streamlit/config.toml beside it
# What the pages import besides Streamlit's core: third-party libraries (streamlit.emojis: the first icon
# loads it), then our modules that define no Streamlit cache (evaluators.dashboard.reads does, and the
# modules that import it: they are imported once the runtime exists, see _warm).
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "duckdb",
    "plotly.graph_objects",
    "streamlit.emojis",
    "evaluators.storage.queries",
    "evaluators.storage.store",
    "evaluators.dashboard.charts",
    "evaluators.metrics.diagnosis",
    "evaluators.core.stats",
    "evaluators.dashboard.access",
    "evaluators.core.confidence",
    "evaluators.metrics.registry",
    "evaluators.dashboard.markup",
)
WARM_RUNS = 10  # the newest runs whose Runs page is opened at start (the default run's among them)
REWARM_POLL_S = 2.0  # how often serve looks for new runs in the file
REWARM_QUIET_S = 5.0  # how long the file must go unwritten first: a run in progress writes every second or so


def _port(text: str) -> int:
    """--port: a TCP port number."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text!r}")
    return int(text)


def add_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `serve` on the CLI's subparsers; it sets `handler`."""
    s = subparsers.add_parser(
        "serve", help="start the dashboard (Streamlit) with its libraries loaded before the first visit"
    )
    s.add_argument(
        "--db", type=Path, default=None, help="the database to show (default: RAG_TRIAGE_DB, else data/demo.duckdb)"
    )
    s.add_argument("--port", type=_port, default=8501, help="the port to listen on (default %(default)s)")
    s.add_argument(
        "--no-warm-pages",
        dest="warm_pages",
        action="store_false",
        help="do not open every page's default view at start (its reads are then paid by the first visitor)",
    )
    s.add_argument(
        "--inbox",
        type=_folder,
        default=None,
        metavar="DIR",
        help="import each run file renamed into DIR (docs/run-file.md); imported ones move to DIR/imported, "
        "bad ones to DIR/rejected with their reason",
    )
    s.set_defaults(handler=serve)


def _folder(text: str) -> Path:
    """--inbox: an existing folder."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    return Path(text).resolve()


def _watch_inbox(folder: Path) -> None:
    """Import the run files dropped into `folder` into the dashboard's database, once the runtime exists
    (reads.py's caches need it): every read is keyed by the file's version, so the next page run shows them."""
    from streamlit import runtime

    from evaluators.runs import inbox

    while not runtime.exists():
        time.sleep(0.01)
    from evaluators.dashboard import reads

    inbox.watch(folder, reads.db_path())


def _warm(port: int, pages: bool) -> None:
    """Once Streamlit's runtime exists: import the app's modules and fill the cheap, run-independent
    cached reads (the catalog of runs, the database check) that every page's first run needs; then,
    with `pages`, open the start-up views (_open_views).

    With `pages` it then keeps looking at the file: once the runs have changed (a run written or resumed
    by `evaluate`) and the file has been quiet for REWARM_QUIET_S, it opens the views again, so the new
    run's first visitor finds them read. A label or a note changes no run and opens nothing. A busy or
    broken file is tried again at the next look; until then visitors pay their own reads."""
    from streamlit import runtime

    while not runtime.exists():  # ui's caches must be created by the runtime's cache storage
        time.sleep(0.01)
    from evaluators.dashboard import reads, timing, ui  # noqa: F401  (timing: app.py's other import)

    # Streamlit's first element in the process calls inspect.stack() (env_util.is_repl), whose first
    # call maps every loaded module to its file: 0.1-0.3 s of the first visit, paid here instead.
    inspect.stack()

    path = reads.db_path()
    warmed: tuple[float, tuple] | None = None  # the file version read last, and its runs
    told_busy = False
    while True:
        version = reads.db_version(path)
        if warmed is None or (version != warmed[0] and time.time() - version >= REWARM_QUIET_S):
            start = time.perf_counter()
            try:
                runs = reads.warm()
            except Exception as exc:  # a busy or broken file: the visitors meet it, as without warming
                if warmed is None and not told_busy:
                    print(f"dashboard cache not warmed: {exc}", flush=True)
                    told_busy = True
            else:
                # What makes a run's views read anew: a new run, or one that got items or finished.
                changed = (
                    ()
                    if runs is None
                    else tuple(runs[["run_id", "status", "n_done", "finished_at"]].itertuples(index=False, name=None))
                )
                if warmed is None:
                    print(
                        f"dashboard cache warmed in {time.perf_counter() - start:.2f} s: "
                        + ("no readable database" if runs is None else f"{len(runs)} runs"),
                        flush=True,
                    )
                if pages and runs is not None and (warmed is None or changed != warmed[1]):
                    _open_views(port, list(runs["run_id"]), again=warmed is not None)
                warmed = (version, changed)
        if warmed is not None and not pages:
            return
        time.sleep(REWARM_POLL_S)


def _open_views(port: int, run_ids: list[str], again: bool) -> None:
    """Open every page's default view once, then the Runs page of the WARM_RUNS newest runs (a switch of
    its run picker) and what the Runs page links to: each of those runs' Run and Diagnosis pages, and
    Compare of its board's default pair (a first visit of those at 1M items per run reads for 0.2-1 s),
    and each of those runs' Trust page (its labels beside the whole run's scores: 0.5-0.8 s at 1M) and
    Sources page (the run's source ledger: 9 s at 1M), so what they read is cached before a visitor comes."""
    from evaluators.dashboard import ui

    views = [(p.url_path, "") for p in ui.PAGES.values()]
    for run in run_ids[:WARM_RUNS]:
        views += [
            (ui.PAGES[page].url_path, urlencode({"run": run}))
            for page in ("runs", "run", "diagnosis", "trust", "sources")
        ]
    if len(run_ids) > 1:
        before, after = ui.default_pair(run_ids)
        views.append((ui.PAGES["compare"].url_path, urlencode({"run": before, "other": after})))
    start = time.perf_counter()
    try:
        asyncio.run(_visit_pages(port, views))
    except Exception as exc:  # the first visitors then pay the reads, as without warming
        print(f"dashboard pages not warmed: {type(exc).__name__}: {exc}", flush=True)
        return
    print(
        f"dashboard pages warmed{' again (the runs changed)' if again else ''} in "
        f"{time.perf_counter() - start:.2f} s: {len(ui.PAGES)} pages, the Runs, Run, Diagnosis, Trust and Sources pages of "
        f"{min(len(run_ids), WARM_RUNS)} runs" + (", and Compare of the default pair" if len(run_ids) > 1 else ""),
        flush=True,
    )


async def _visit_pages(port: int, views: list[tuple[str, str]], connect_s: float = 60.0, view_s: float = 600.0) -> None:
    """Open each view (a page's URL path and query string) in turn, as view_messages() does, until its
    script run ends. The server may still be binding its port: connecting is retried for `connect_s`."""
    from evaluators.dashboard.timing import WARMUP_HEADER, WARMUP_TOKEN

    deadline = time.monotonic() + connect_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    for url_path, query in views:
        async with asyncio.timeout(view_s):
            async for _ in view_messages(f"http://127.0.0.1:{port}", url_path, query, {WARMUP_HEADER: WARMUP_TOKEN}):
                pass


async def view_messages(
    base: str, url_path: str, query: str = "", headers: Mapping[str, str] | None = None
) -> AsyncIterator[Any]:
    """One view of the dashboard at `base` as a browser's page load opens it, over Streamlit's websocket:
    a new session, one rerun_script with the page's URL path and query string; yields its ForwardMsgs
    until the script run is over (benchmarks/load.py reads them, serve's start-up views drop them)."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    rerun = BackMsg()
    rerun.rerun_script.page_name = url_path  # the server resolves the page from it
    rerun.rerun_script.query_string = query
    # The frontend sends the subprotocol "streamlit" (then an XSRF token, needed only with login) and
    # its page's origin; max_size=None because a page's deltas (Arrow tables) can exceed 1 MiB.
    protocol: Any = "streamlit"  # the library types these as its own string classes
    origin: Any = base
    async with websockets.connect(
        f"ws://{urlsplit(base).netloc}/_stcore/stream",
        subprotocols=[protocol],
        origin=origin,
        max_size=None,
        additional_headers=headers,
    ) as ws:
        await ws.send(rerun.SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(await ws.recv())
            yield msg
            # A run cut short by st.rerun() is followed by the run that counts.
            if (
                msg.WhichOneof("type") == "script_finished"
                and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN
            ):
                return


def serve(args: argparse.Namespace) -> int:
    """Import the dashboard's libraries, then run `streamlit run app.py` in this process until stopped."""
    if args.db is not None:
        os.environ["RAG_TRIAGE_DB"] = str(args.db.resolve())
    for name in PRELOAD:
        importlib.import_module(name)
    threading.Thread(target=_warm, args=(args.port, args.warm_pages), name="rag-triage-warm", daemon=True).start()
    if args.inbox is not None:
        threading.Thread(target=_watch_inbox, args=(args.inbox,), name="rag-triage-inbox", daemon=True).start()
    from streamlit.web import cli as streamlit_cli

    streamlit_cli.main(["run", str(APP), "--server.port", str(args.port)], prog_name="streamlit", standalone_mode=False)
    return 0
