"""Streamlit helpers that the dashboard pages share: the page table, configuration, cached reads,
URL-synced widgets, formatting of scores and failures, and escaped highlighting (the plotly figures
are in evaluators/charts.py).

State that makes a view (run, item, compared run, thresholds, filters) lives in st.query_params,
so every view is a link someone can paste into a triage chat. Reads go through `read()`, cached
on the read function, the DB path and the file's modification time, so a new run shows up without
a restart and no connection is ever held open.
"""
from __future__ import annotations

import html
import json
import os
import re
import runpy
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence
from urllib.parse import urlencode

import pandas as pd
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from evaluators.core.confidence import DEFAULT_BANDS, LABEL, Band, format_band, parse_band
from evaluators.core.masking import mask_url
from evaluators.core.records import Score, Status
from evaluators.core.stats import bootstrap_ci
from evaluators.dashboard import access
from evaluators.metrics import registry
from evaluators.metrics.diagnosis import DEFAULT_THRESHOLDS, RULES, Fired, fired
from evaluators.metrics.registry import order_metrics
from evaluators.metrics.thelma import aggregate_coverage
from evaluators.storage import queries, store

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DB = "data/demo.duckdb"


class PageFile(NamedTuple):
    """One dashboard page: its file under pages/, its sidebar title and its URL path."""

    file: str
    title: str
    url_path: str


# The navigation, in sidebar order (app.py declares it from this). The URL paths are the ones
# links have always used, so pasted links keep working; Runs is the default page, at "/".
PAGES: dict[str, PageFile] = {
    "runs": PageFile("pages/0_Runs.py", "Runs", ""),
    "run": PageFile("pages/1_Run.py", "Run", "Run"),
    "item": PageFile("pages/2_Item.py", "Item", "Item"),
    "compare": PageFile("pages/3_Compare.py", "Compare", "Compare"),
    "diagnosis": PageFile("pages/4_Diagnosis.py", "Diagnosis", "Diagnosis"),
    "triage": PageFile("pages/5_Triage.py", "Triage", "Triage"),
    "evaluate": PageFile("pages/6_Evaluate.py", "Evaluate", "Evaluate"),
    "robustness": PageFile("pages/7_Robustness.py", "Robustness", "Robustness"),
    "trust": PageFile("pages/8_Trust.py", "Trust", "Trust"),
    "sources": PageFile("pages/9_Sources.py", "Sources", "Sources"),
    "trends": PageFile("pages/10_Trends.py", "Trends", "Trends"),
}
LABELS = ("confirmed", "false alarm", "fixed")
SAVE_DEADLINE_S = 5.0  # how long a triage save retries a locked file before saying "busy"
COMPONENTS = ("Retriever", "Source text", "Source chunking", "Prompt", "Generator", "Judge", "Other")
OK, GOOD, BAD, FAIL = "ok", "#c8ecd0", "#f8d0d0", "#e6e6e6"
# An unsure verdict is neither green nor red: the dashboard stays quiet where the judge is unsure.
UNSURE, UNSURE_COLOUR = Status.UNSURE.value, "#fdf1c7"


# ---------------------------------------------------------------- configuration

def db_path() -> Path:
    """The database file, from RAG_TRIAGE_DB (relative paths are relative to the repository)."""
    path = Path(os.environ.get("RAG_TRIAGE_DB") or DEFAULT_DB)
    return path if path.is_absolute() else ROOT / path


def read_only() -> bool:
    """RAG_TRIAGE_READ_ONLY=1/true/yes/on: viewers may look, but nobody saves notes or uploads runs.
    An unknown value is read-only too (page() names it): a typo must not leave a server writable."""
    return access.read_only_setting(os.environ.get(access.READ_ONLY_ENV))[0]


def secret(name: str) -> Any:
    """A top-level entry of .streamlit/secrets.toml, or None (also when there is no secrets file)."""
    try:
        return st.secrets.get(name)
    except (FileNotFoundError, KeyError, RuntimeError):  # no secrets file at all
        return None


def _auth_configured() -> bool:
    return secret("auth") is not None


def user() -> access.User:
    """This session's user and role: the login's, or without login configured the local single user.
    Write paths call this again when they act, so a role is checked where the write happens."""
    auth, roles = secret("auth"), secret("roles") or {}
    if auth is None:
        return access.current_user(None, roles, read_only())
    return access.current_user(st.user, roles, read_only(), auth.get(access.MISSING_VERIFIED_SETTING, access.VIEWER))


def _hand_over_to_app() -> None:
    """Run app.py in place of this page when Streamlit served the page from the pages/ folder by itself.

    Streamlit (1.67) serves an app that has a pages/ folder the old way, each file by itself under an
    "app" entry, until some session has run app.py's st.navigation in the process, which clears this
    flag for good. So a pasted link that is a fresh server's first request would skip app.py's
    titles and page timing. Run the entry script here instead: its st.navigation resolves the same
    page (the hash of its URL path), keeps the query string and runs it; then this outer run stops.
    Inside one run, the clicks and callbacks of this run still reach the page (st.rerun would drop
    them, and AppTest starts every run in the old mode).
    """
    if PagesManager.uses_pages_directory:
        runpy.run_path(get_script_run_ctx().main_script_path)
        st.stop()


def page(title: str, need_db: bool = True) -> Path:
    """Start a page (through app.py's navigation): config, login gate, read-only notice; stops with a
    hint when there is no database."""
    _hand_over_to_app()
    st.set_page_config(page_title=f"{title} · RAG Triage", layout="wide")
    if _auth_configured() and not st.user.get("is_logged_in", False):
        st.title("RAG Triage")
        st.info("Log in to see the evaluation runs.")
        st.button("Log in", key="login", on_click=st.login)
        st.stop()
    locked, unknown = access.read_only_setting(os.environ.get(access.READ_ONLY_ENV))
    if unknown is not None:
        st.sidebar.warning(f"{access.READ_ONLY_ENV} has a value the dashboard does not know (below), so it stays "
                           "read-only. Use 1/true/yes/on (read-only) or 0/false/no/off (writable).", icon="⚠️")
        st.sidebar.code(unknown, language=None)
    if locked:
        st.sidebar.info("Read-only mode: triage notes and uploads are disabled.", icon="🔒")
    try:
        me = user()
    except access.ConfigError as exc:  # fail closed: a malformed role list grants nothing to anyone
        st.error(f"The dashboard's .streamlit/secrets.toml is malformed: {md(exc)}")
        st.stop()
    if _auth_configured():  # past the gate, so someone is logged in
        # plain text: the address comes from the login provider
        st.sidebar.text(f"{me.email or '(no verified email)'}\n{me.role}")
        if me.notice:
            st.sidebar.warning(me.notice, icon="⚠️")
        st.sidebar.button("Log out", key="logout", on_click=st.logout)
    st.html(WRAP_CSS)
    st.title(title)
    path = db_path()
    _check_database(path, need_db)
    return path


# Long words (a 60,000-character id or token) wrap inside the app's text instead of widening the page.
WRAP_CSS = ("<style>[data-testid=stMarkdownContainer], [data-testid=stCaptionContainer], "
            "[data-testid=stAlertContentInfo], [data-testid=stAlertContentWarning], "
            "[data-testid=stAlertContentError], [data-testid=stAlertContentSuccess], "
            "[data-testid=stExpander] summary, [data-testid=stMetricLabel], "
            "[data-testid=stWidgetLabel], [data-testid=stPageLink] "
            "{overflow-wrap:anywhere; word-break:break-word; min-width:0}</style>")


@st.cache_data(show_spinner=False, max_entries=64)
def _health(path: str, version: float) -> store.Health:
    return store.check_database(path)


def _check_database(path: Path, need_db: bool) -> None:
    """Stop the page with what is wrong and what to do when `path` is not a database this version
    reads; checked once per page run, cached on the file's version. Pages that write (need_db=False)
    may start a missing or empty database, and upgrade an older one."""
    try:
        health = _health(str(path), db_version(path))
    except store.StoreBusy:
        st.warning(f"The database {md(path)} is locked by another process (a run or a save is writing); "
                   "retried for a few seconds. Reload the page or press Retry in a moment.")
        st.button("Retry", key="db_retry")
        st.stop()
    where = md(path)
    fix = "set RAG_TRIAGE_DB to a database written by `python -m evaluators evaluate`, or build the demo (`make demo`)"
    messages = {
        "missing": f"No database at {where}. Build the demo (`make demo`) or set RAG_TRIAGE_DB, "
                   "or evaluate a file on the Evaluate page.",
        "empty": f"The database {where} is empty: evaluate a file on the Evaluate page or with "
                 "`python -m evaluators evaluate`.",
        "folder": f"{where} is a folder, not a RAG Triage database: {fix}.",
        "not_duckdb": f"{where} is not a RAG Triage database ({md(health.detail)}): {fix}.",
        "foreign": f"{where} is not a RAG Triage database (a DuckDB file with other tables: {md(health.detail)}): {fix}.",
        "damaged": f"{where} is a damaged database that DuckDB cannot read ({md(health.detail)}): restore it "
                   f"from a copy, or {fix}.",
        "older": f"{where} was made by an older version of RAG Triage (schema {health.version}, this version "
                 f"reads {len(store.MIGRATIONS)}): evaluating a file into it upgrades it, e.g. "
                 f"`python -m evaluators evaluate ITEMS.jsonl --db FILE --run NAME` or the Evaluate page.",
        "newer": f"{where} was made by a newer version of RAG Triage (schema {health.version}, this version "
                 f"reads {len(store.MIGRATIONS)}): open it with that version, or update RAG Triage.",
        "incomplete": f"{where} is a RAG Triage database with missing parts ({md(health.detail)}): restore it "
                      f"from a copy, or {fix}.",
    }
    if health.state == "ok" or (not need_db and health.state in ("missing", "empty")):
        return
    if not need_db and health.state == "older":
        st.info(messages["older"])
        return
    (st.warning if health.state in ("missing", "empty") else st.error)(messages[health.state])
    st.stop()


# ---------------------------------------------------------------- cached reads

def db_version(path: Path) -> float:
    """Changes whenever the database or its write-ahead log is written: part of every cache key."""
    return max((p.stat().st_mtime_ns for p in (path, Path(f"{path}.wal")) if p.exists()), default=0) / 1e9


Call = tuple[Callable[..., Any], tuple, dict]


def _name(fn: Callable[..., Any]) -> str:
    """A read's cache identity: its qualified name (the function object itself is not hashed)."""
    return f"{fn.__module__}.{fn.__qualname__}"


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(_fn: Callable[..., Any], name: str, path: str, version: float, args: tuple, kwargs: tuple) -> Any:
    return _fn(path, *args, **dict(kwargs))


def read_all(*calls: Call) -> list[Any]:
    """Several reads of the database, call(fn, ...) each, through the cache; misses share one connection."""
    path = db_path()
    version = db_version(path)
    try:
        with store.reading(path):
            return [_cached(fn, _name(fn), str(path), version, tuple(args), tuple(sorted(kwargs.items())))
                    for fn, args, kwargs in calls]
    except store.StoreBusy:  # a writer held the file past the deadline: say so, don't crash
        st.warning("The database is busy (a run or a save is writing), try again in a moment.")
        st.stop()


def warm() -> pd.DataFrame | None:
    """Fill the cached reads that every page's first run needs and no view setting changes (the
    database check, the runs catalog, the runs a picker opens on), outside any page run: for the
    server (evaluators/serve.py). Keyed by the database's version like every read; raises store
    errors. Returns the runs as queries.runs.runs() lists them, newest first, or None when the database is
    not one the dashboard reads."""
    path = db_path()
    version = db_version(path)
    if _health(str(path), version).state != "ok":
        return None
    with store.reading(path):  # both scan a run's items or scores: 0.1-0.5 s at 1M
        _cached(queries.runs.thelma_runs, _name(queries.runs.thelma_runs), str(path), version, (), ())
        return _cached(queries.runs.catalog, _name(queries.runs.catalog), str(path), version, (), ())[0]


def read(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(db, *args, **kwargs) through the cache, e.g. read(queries.runs.metadata_keys, run_id)."""
    return read_all((fn, args, kwargs))[0]


@st.cache_resource(show_spinner=False, max_entries=8)
def _run_table(path: str, version: float, run_id: str, metric_ids: tuple[str, ...], band: Band | None,
               corrected: bool) -> pd.DataFrame:
    # cache_resource hands out the same frame without a copy: callers must not modify it.
    # At the default band the stored table is read; another band, or people's corrections,
    # recompute it from the verdicts.
    return queries.runs.run_table(path, run_id, metric_ids, queries.sql.scores_sql(band, corrected))


def _every_metric() -> tuple[str, ...]:
    return tuple(order_metrics({m for ms in read(queries.runs.catalog)[1].values() for m in ms}))


def run_table(run_id: str) -> pd.DataFrame:
    """A run's whole per-item score table at the URL's band, in memory (cached per DB version and band);
    treat it as read-only. Summaries and pages of it go through derived(), which reads no more than
    they need."""
    path = db_path()
    try:
        return _run_table(str(path), db_version(path), run_id, _every_metric(), band(), corrected())
    except store.StoreBusy:
        st.warning("The database is busy (a run or a save is writing), try again in a moment.")
        st.stop()


def _relation(path: str, version: float, run_id: str, every: tuple[str, ...], band: Band | None,
              corrected: bool) -> pd.DataFrame | store.StoredRun:
    """A run table for derived(): at the default band the stored one, queried in the file (a million
    items are never pulled into memory); at another band or corrected, the cached recomputed frame."""
    if band is None and not corrected:
        return queries.runs.stored_table(path, run_id, every)
    return _run_table(path, version, run_id, every, band, corrected)


@st.cache_data(show_spinner=False, max_entries=128)
def _derived(_fn: Callable[..., Any], name: str, path: str, version: float, every: tuple[str, ...],
             band: Band | None, corrected: bool, run_ids: tuple[str, ...], args: tuple, kwargs: tuple) -> Any:
    tables = [_relation(path, version, r, every, band, corrected) for r in run_ids]
    with store.reading(path):  # the stored run tables of one call share a connection
        return _fn(*tables, *args, **dict(kwargs))


def derived(fn: Callable[..., Any], run_ids: Sequence[str], *args: Any, **kwargs: Any) -> Any:
    """fn(*run tables of run_ids, *args, **kwargs), e.g. derived(queries.diagnosis.correlations, [run], metrics):
    a computation over run tables (at the URL's band) in DuckDB, itself cached, so a rerun for an
    unrelated widget costs nothing."""
    path = db_path()
    try:
        with store.reading(path):  # recomputed run tables share one connection
            if band() is not None or corrected():
                for run_id in run_ids:
                    run_table(run_id)  # builds (or reports busy) outside the cached call
            return _derived(fn, _name(fn), str(path), db_version(path), _every_metric(), band(), corrected(),
                            tuple(run_ids), args, tuple(sorted(kwargs.items())))
    except store.StoreBusy:
        st.warning("The database is busy (a run or a save is writing), try again in a moment.")
        st.stop()


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """One entry for read_all()."""
    return fn, args, kwargs


def runs() -> pd.DataFrame:
    """All runs, newest first."""
    return read(queries.runs.catalog)[0]


def metrics(*run_ids: str) -> list[str]:
    """Metric ids present in these runs, THELMA's first."""
    per_run = read(queries.runs.catalog)[1]
    return order_metrics([m for r in run_ids if r for m in per_run.get(r, [])])


# ---------------------------------------------------------------- URL state

def _ctx() -> dict[str, str]:
    """Per-session memory of URL state, restored when the sidebar navigation drops the query string."""
    return st.session_state.setdefault("_url_ctx", {})


def url_value(key: str, default: Any, parse: Callable[[str], Any] = str, remember: bool = True) -> Any:
    """A view setting from the URL (the source of truth), else this session's last one, else default."""
    raw = st.query_params.get(key)
    if raw is None and remember and key in _ctx():
        raw = _ctx()[key]
        st.query_params[key] = raw
    try:
        return default if raw is None else parse(raw)
    except (TypeError, ValueError):
        return default


def set_url(key: str, value: Any, default: Any = None, remember: bool = True) -> None:
    """Write one view setting to the URL; the default value is left out to keep links short."""
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else (
        "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value)))
    if value == default or value in (None, "", [], ()):
        st.query_params.pop(key, None)
        _ctx().pop(key, None)
    else:
        st.query_params[key] = text
        if remember:
            _ctx()[key] = text


def synced(widget: Callable[..., Any], label: str, key: str, default: Any,
           parse: Callable[[str], Any] = str, remember: bool = False, explicit: bool = False,
           **kwargs: Any) -> Any:
    """Draw a keyed widget whose value lives in the URL under `key`: read it first, write it on change.

    explicit: always keep the value in the URL, even the default (a run or item id: "the newest run"
    would point elsewhere once a new run lands, so a pasted link names it).
    """
    value = url_value(key, default, parse, remember)
    options = kwargs.get("options")
    if options is not None and not isinstance(value, list) and value not in options:
        value = default
    if isinstance(value, list) and options is not None:
        value = [v for v in value if v in options]
    st.session_state[key] = value

    def _write() -> None:
        set_url(key, st.session_state[key], None if explicit else default, remember)

    if explicit and value not in (None, ""):
        set_url(key, value, None, remember)
    return widget(label, key=key, on_change=_write, **kwargs)


def csv_list(text: str) -> list[str]:
    """Parse 'a,b' from the URL into ['a', 'b']."""
    return [p for p in text.split(",") if p]


def default_run(ids: Sequence[str], skip: str | None = None) -> str:
    """The run a picker opens on: the newest THELMA run (not a GRAMMAR robustness run) other than
    `skip`, else the newest run other than `skip`. `ids` lists runs newest first."""
    thelma = set(read(queries.runs.thelma_runs))
    return next((r for r in ids if r != skip and r in thelma), next((r for r in ids if r != skip), ids[0]))


def pick_run(frame: pd.DataFrame, key: str = "run", label: str = "Run", skip: str | None = None,
             where: Any = None) -> str | None:
    """A run selectbox synced with ?run= (default: default_run(), the newest THELMA run)."""
    ids = list(frame["run_id"])
    if not ids:
        return None
    return synced((where or st.sidebar).selectbox, label, key, default_run(ids, skip), remember=True, explicit=True,
                  options=ids)


def prompt_names(prompt_hashes: Sequence[str]) -> tuple[list[list[str]], str]:
    """The runs' prompt files (runs.prompt_hashes JSON) as names a person reads: per run its prompt
    names (a batched form folded into its name), a name marked ✎ when its hash differs from the one
    most runs used; and a hover text with every name's hash, and which runs used another."""
    runs = [json.loads(p) for p in prompt_hashes]
    by_name: dict[str, list[tuple[int, str]]] = {}
    for i, hashes in enumerate(runs):
        for name, digest in hashes.items():
            by_name.setdefault(name, []).append((i, digest))
    # the hash most runs used; on a tie the newest run's (runs are listed newest first, max keeps the first)
    usual = {n: max(dict.fromkeys(d for _, d in seen), key=[d for _, d in seen].count) for n, seen in by_name.items()}
    cells = []
    for hashes in runs:
        names: dict[str, bool] = {}
        for name, digest in sorted(hashes.items()):
            base = name.removesuffix("_batch")
            names[base] = names.get(base, False) or digest != usual[name]
        cells.append([f"{n} ✎" if edited else n for n, edited in names.items()])
    lines = [f"{n}: {usual[n][:12]}" + ("" if all(d == usual[n] for _, d in seen) else " (✎ other runs: "
             + ", ".join(sorted({d[:12] for _, d in seen if d != usual[n]})) + ")")
             for n, seen in sorted(by_name.items())]
    return cells, "Prompt files (sha256, first 12 hex) most runs used; ✎ marks a run whose file differed:  \n" + \
        "  \n".join(lines)


def pick_runs(frame: pd.DataFrame, key: str = "runs", label: str = "Runs") -> list[str]:
    """A multiselect of runs synced with ?runs=a,b (default: the run in ?run=, else default_run())."""
    ids = list(frame["run_id"])
    if not ids:
        return []
    first = st.query_params.get("run")
    default = [first if first in ids else default_run(ids)]
    return synced(st.sidebar.multiselect, label, key, default, csv_list, remember=True, explicit=True, options=ids)


def unit(text: str) -> float:
    """Parse a threshold from the URL: a number within [0, 1]."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(text)
    return value


def thresholds(metric_ids: Sequence[str]) -> dict[str, float]:
    """Per-metric thresholds from sidebar sliders synced with ?th_<metric>=; Table 2's defaults otherwise."""
    out = dict(DEFAULT_THRESHOLDS)
    with st.sidebar.expander("Thresholds (low < threshold ≤ high)", expanded=False):
        for m in metric_ids:
            default = registry.threshold(m)
            out[m] = synced(st.slider, f"{m.upper()} threshold", f"th_{m}", default, unit, remember=True,
                            min_value=0.0, max_value=1.0, step=0.01)
    for m in DEFAULT_THRESHOLDS:  # rules may read a metric this run lacks; keep a URL value for it
        if m not in metric_ids:
            out[m] = url_value(f"th_{m}", DEFAULT_THRESHOLDS[m], unit)
    return out


def band() -> Band | None:
    """The uncertainty band in the URL (?band=LO,HI), or None for each judge kind's default band; a
    value that is not a band reads as None (band_control() says so)."""
    try:
        return parse_band(st.query_params["band"]) if "band" in st.query_params else None
    except ValueError:
        return None


def band_control() -> Band | None:
    """A sidebar field for the uncertainty band, synced with ?band=: a verdict with LO < p < HI is
    unsure and left out of its score. Empty: each judge kind's default band. A bad value is named
    and ignored, never a crash."""
    defaults = ", ".join(f"{kind} {format_band(b)}" for kind, b in DEFAULT_BANDS.items() if kind != LABEL)
    text = synced(st.sidebar.text_input, "Uncertainty band (LO,HI)", "band", "", remember=True,
                  placeholder="default per judge",
                  help=f"A verdict whose p = P(match is 1) lies strictly between LO and HI is unsure: left out "
                       f"of its score and shown neither 0 nor 1. Empty: the default band of each judge kind "
                       f"({defaults}); label-only judges are never unsure. Moving it calls no judge.")
    if not text.strip():
        return None
    try:
        return parse_band(text)
    except ValueError as exc:
        st.sidebar.warning(f"Uncertainty band ignored, the default bands apply: {md(exc)}")
        return None


SCORES = ("raw", "corrected")  # ?scores=: the judge's verdicts, or people's corrections in their place


def corrected() -> bool:
    """Whether the URL asks for corrected scores (?scores=corrected); anything else reads raw."""
    return st.query_params.get("scores") == "corrected"


def scores_control() -> bool:
    """A sidebar switch between the judge's scores and scores with people's corrections in place of
    its verdicts, synced with ?scores=; returns True for corrected."""
    choice = synced(st.sidebar.radio, "Scores", "scores", SCORES[0], options=list(SCORES), horizontal=True,
                    format_func={"raw": "judge's", "corrected": "corrected by people"}.get, remember=True,
                    help="Corrected: every verdict people corrected on the Item page or in an imported labels "
                         "file counts with their value; the judge's own scores never change.")
    return choice == "corrected"


def save(outcome_key: str, write: Callable[[], Any], busy: str, done: str) -> bool:
    """Run one of the user's saves (a form's callback); its outcome waits in the session for show_outcome().

    A refused, busy or invalid save says why (`busy` ends the busy message) and the form keeps what
    the user typed; returns whether it saved.
    """
    try:
        write()
    except access.Refused as exc:
        st.session_state[outcome_key] = ("error", str(exc))
    except store.StoreBusy:
        st.session_state[outcome_key] = ("warning", f"The database is busy, try again in a moment: {busy}")
    except ValueError as exc:
        st.session_state[outcome_key] = ("warning", str(exc))
    else:
        st.session_state[outcome_key] = ("success", done)
        return True
    return False


def show_outcome(outcome_key: str) -> tuple[str, str] | None:
    """Show (once) the outcome save() left under this key, and return it."""
    outcome = st.session_state.pop(outcome_key, None)
    if outcome:
        getattr(st, outcome[0])(outcome[1])
    return outcome


def current_run() -> tuple[str, list[str], dict[str, float]]:
    """The run picked in the sidebar or URL, its metrics and thresholds (and the band control); stops
    the page when there is none."""
    run_id = pick_run(runs())
    if run_id is None:
        st.info("No runs yet.")
        st.stop()
    metric_ids = metrics(run_id)
    th = thresholds(metric_ids)
    band_control()
    scores_control()
    return run_id, metric_ids, th


def link(**extra: Any) -> dict[str, str]:
    """Query params for a link to another page: the current run, thresholds and band, plus `extra`."""
    keep = {k: v for k, v in st.query_params.to_dict().items() if k in ("run", "band") or k.startswith("th_")}
    keep.update({k: str(v) for k, v in extra.items() if v is not None})
    return keep


def item_link(run_id: str, item_id: str, label: str | None = None, tab: str | None = None) -> None:
    """A page link to one item's drill-down (on `tab`, one of ITEM_TABS); a `label` given is markdown, with
    user text through md()."""
    page_link("item", label=label or f"Open item {md(item_id)}", icon="🔎",
              query_params=link(run=run_id, item=item_id, tab=tab))


def page_link(page: str, label: str, query_params: Mapping[str, str], icon: str | None = None,
              where: Any = None) -> None:
    """A link to one of PAGES ('run', 'item', ...) with these query params."""
    (where or st).page_link(PAGES[page].file, label=label, icon=icon, query_params=query_params)


def switch_page(page: str, query_params: Mapping[str, str]) -> None:
    """Go to one of PAGES now, with these query params."""
    st.switch_page(PAGES[page].file, query_params=query_params)


def page_url(page: str, **extra: Any) -> str:
    """A relative URL to one of PAGES with the current context, for link columns in tables."""
    return f"{PAGES[page].url_path}?" + urlencode(link(**extra))


def item_url(run_id: str, item_id: str, rule: str | None = None, tab: str | None = None) -> str:
    """A relative URL to an item's drill-down; with `rule` (ids, comma-separated) it opens their evidence,
    with `tab` (one of ITEM_TABS) that tab."""
    return page_url("item", run=run_id, item=item_id, rule=rule or None, tab=tab)


# ---------------------------------------------------------------- formatting

# What markdown (CommonMark, GFM, Streamlit's directives and LaTeX) can act on: these characters
# anywhere; ':' and '.' before a non-space (autolinks 'http://', 'www.x', 'a@b.co'; ':red[', ':smile:');
# a leading '-', '+', '#', '=' or '1.' (lists, headings). Quotes, commas and slashes never start anything.
# GFM turns URLs and emails in text into links after escapes are resolved, so backslashes cannot stop
# it: an invisible word joiner (U+2060) goes where its patterns start ('://', 'www.', '@').
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?i:(?<=www))(?=\.)|(?=@)")
_MARKDOWN_ACTIVE = re.compile(r"[!$&()*<>@\[\\\]^_`{|}~]|[:.](?=\S)|^[-+#=]|(?<=^\d)[.)]|(?<=^\d\d)[.)]")


def md(value: Any) -> str:
    """A user-supplied string (run name, item id, judge, template, document id, author, path...) made
    safe to put in anything Streamlit draws as markdown: labels, captions, headers, alerts, expander
    and tab titles. Every character markdown could act on is backslash-escaped, so no link, image,
    emphasis, heading, list or directive (:red[...], :material/...:) can form, and an invisible word
    joiner breaks what GFM would autolink. The text shows as typed, except that each run of whitespace
    becomes one space (a label is one line)."""
    text = _AUTOLINK.sub("\u2060", " ".join(str(value).split()))
    return _MARKDOWN_ACTIVE.sub(lambda m: "\\" + m.group(0), text)


def n_items(n: int) -> str:
    """'1 item', '3 items'."""
    return f"{n} item" if n == 1 else f"{n} items"


def fmt_score(value: Any, status: str | None = OK) -> str:
    """A score as text; a failure shows its status, never a number."""
    if status not in (None, OK) or value is None or pd.isna(value):
        return f"⚠ {status}" if status not in (None, OK) else "–"
    return f"{float(value):.2f}"


def fmt_verdict(value: Any, status: str) -> str:
    """✓ 1 / ✗ 0 for a scored verdict, ? unsure for one inside the band, ⚠ status for a failure."""
    if status == UNSURE:
        return "? unsure"
    if status != OK:
        return f"⚠ {status}"
    return "✓ 1" if float(value) >= 0.5 else "✗ 0"


def fmt_p(row: Record) -> str:
    """' · p 0.93' for a verdict with a calibrated or logprob p; '' for a label or no p."""
    p, kind = row.get("p"), row.get("p_kind")
    if p is None or pd.isna(p) or kind in (None, LABEL) or (isinstance(kind, float) and pd.isna(kind)):
        return ""
    return f" · p {float(p):.2f}"


def score_counts(n_scored: Any, n_total: Any, n_unsure: Any) -> str:
    """'3 of 4 scored, 1 unsure': the counts behind one score (or one metric over a run's items)."""
    n_unsure = 0 if n_unsure is None or pd.isna(n_unsure) else int(n_unsure)
    return f"{int(n_scored)} scored of {int(n_total)}, {n_unsure} unsure"


def failure_text(frame: pd.DataFrame) -> str:
    """'2 timeout, 1 unparsed' from rows with status and n."""
    return ", ".join(f"{int(n)} {s}" for s, n in zip(frame["status"], frame["n"])) or "none"


def item_scores(frame: pd.DataFrame) -> dict[str, Score]:
    """An item's scores (queries.items.item_detail's `scores`) as Scores with their counts, by metric."""
    return {r["metric"]: Score(r.get("item_id", ""), r["metric"], None if pd.isna(r["value"]) else float(r["value"]),
                               int(r["n_scored"]), int(r["n_total"]), Status(r["status"]), int(r["n_unsure"] or 0))
            for r in frame.to_dict("records")}


def rules_table(scores: Mapping[str, Score], th: Mapping[str, float]) -> tuple[list[Fired], pd.DataFrame]:
    """The Table-2 rules that fire for one item's scores (only on metrics decided from enough confident
    verdicts), and a table of them with the component to fix and the scores behind them."""
    found = fired(scores, th)

    def behind(f: Fired) -> str:
        return "; ".join(f"{c.metric.upper()} {c.level} {c.score.value:.2f} "
                         f"({score_counts(c.score.n_scored, c.score.n_total, c.score.n_unsure)})"
                         for c in f.conditions)
    return found, pd.DataFrame([{"rule": f.rule.name, "pattern": f.rule.pattern, "meaning": f.rule.meaning,
                                 "fix": f.rule.components, "scores": behind(f)} for f in found],
                               columns=["rule", "pattern", "meaning", "fix", "scores"])


def quadrant_counts(combos: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Items per quadrant of (x, y) from queries.diagnosis.rule_counts(): x_low, y_low and n; unscored items left out."""
    cols = [f"x_low:{x}|{y}", f"y_low:{x}|{y}"]
    scored = combos.dropna(subset=cols)
    counts = scored.groupby(cols, as_index=False)["n"].sum()
    return counts.set_axis(["x_low", "y_low", "n"], axis=1).astype({"x_low": bool, "y_low": bool})


def rule_label(rule_id: str) -> str:
    """'T2.2 · SQC low, RQC low'; a rule of ours says so: 'X1 (ours) · SQC high, GR low'."""
    return f"{RULES[rule_id].name} · {RULES[rule_id].pattern}"


def highlight(text: str, marks: Sequence[tuple[str, str, str]]) -> tuple[str, list[int]]:
    """HTML of `text` with each (fragment, colour, title) mark found in it highlighted.

    Every piece of evaluated text is html-escaped, so a `<script>` shows as text. Returns the HTML and
    the indexes of marks whose fragment is not in the text (claims a judge paraphrased), to list apart.
    """
    spans: list[tuple[int, int, int]] = []
    missing: list[int] = []
    for i, (fragment, _, _) in enumerate(marks):
        start, found = 0, False
        while fragment and (pos := text.find(fragment, start)) >= 0:
            end = pos + len(fragment)
            if all(end <= s or pos >= e for s, e, _ in spans):
                spans.append((pos, end, i))
                found = True
                break
            start = pos + 1
        if not found:
            missing.append(i)
    out, cursor = [], 0
    for start, end, i in sorted(spans):
        _, colour, title = marks[i]
        out.append(html.escape(text[cursor:start]))
        out.append(f'<span style="background:{colour};border-radius:3px;padding:0 2px" '
                   f'title="{html.escape(title)}">{html.escape(text[start:end])}</span>')
        cursor = end
    out.append(html.escape(text[cursor:]))
    return "".join(out), missing


def text_block(body_html: str) -> None:
    """Show escaped, highlighted text in a wrapped block (st.html sanitises it a second time); a long
    word wraps anywhere rather than widen the page."""
    st.html(f'<div style="white-space:pre-wrap;overflow-wrap:anywhere;line-height:1.6;'
            f'border-left:3px solid #ddd;padding-left:8px">{body_html}</div>')


def plain(text: str) -> None:
    """Evaluated text, escaped, as a text block."""
    text_block(html.escape(text))


def verdict_colour(value: Any, status: str) -> str:
    """Green for 1, red for 0, pale amber for unsure (never green or red), grey for a failure."""
    if status == UNSURE:
        return UNSURE_COLOUR
    if status != OK:
        return FAIL
    return GOOD if float(value) >= 0.5 else BAD


# The item page works on plain records (lists of dicts), its verdicts joined to their components
# once (by_component), and draws its long lists a page at a time: an item may carry 200 sources or
# 10,000 claims, and a scan of every verdict per component, or a widget per row, would not finish.
Record = dict[str, Any]
Judged = dict[tuple[str, int], list[Record]]
# The Item page's tabs, kept in its URL as ?tab= (the first, the default, is left out); a label is part
# of links into the page, so renaming one breaks them.
ITEM_TABS = ("Query", "Sources", "Response", "Verdicts", "Triage")
ITEM_PAGE = 50     # components per page (sub-questions, claims, sentences, other suites' verdicts)
SOURCES_PAGE = 10  # sources per page: each draws its text and its judge exchanges
VERDICT_PAGE = 200  # rows of the Verdicts tab's one table


def records(frame: pd.DataFrame) -> list[Record]:
    """A frame as a list of dicts."""
    return frame.to_dict("records")


def pick(rows: Sequence[Record], **equal: Any) -> list[Record]:
    """The rows whose fields equal the given values."""
    return [r for r in rows if all(r[k] == v for k, v in equal.items())]


def by_component(verdicts: Sequence[Record]) -> Judged:
    """Verdicts by the component they judge, (kind, idx), in their stored order: one pass, so each
    component then finds its verdicts without scanning the others."""
    judged: Judged = {}
    for v in verdicts:
        judged.setdefault((v["component_kind"], int(v["component_idx"])), []).append(v)
    return judged


EVIDENCE_COLUMNS = ["metric", "component", "text", "target", "verdict", "value", "p", "p kind", "tier", "detail"]


def rule_evidence(condition_metric: str, level: str, verdicts: Sequence[Record], texts: Mapping[tuple[str, int], str],
                  limit: int = ITEM_PAGE) -> tuple[pd.DataFrame, int, int]:
    """The verdicts that made one metric of a fired rule low (its confident 0s) or high (its confident
    1s), then the unsure ones it left out; SQC's 0s only of sub-questions that no confident 1 covers.

    Returns at most `limit` rows, the number of deciding verdicts and the number of unsure ones.
    """
    mine = [v for v in verdicts if v["metric"] == condition_metric and v["target"] != "decompose"]
    want = 0.0 if level == "low" else 1.0
    deciding = [v for v in mine if v["status"] == OK and float(v["value"]) == want]
    if condition_metric in queries.sql.aggregated_by(aggregate_coverage) and level == "low":
        covered = {v["component_idx"] for v in mine if v["status"] == OK and float(v["value"]) == 1.0}
        deciding = [v for v in deciding if v["component_idx"] not in covered]
    unsure = [v for v in mine if v["status"] == UNSURE]
    rows = [{"metric": v["metric"].upper(), "component": f"{v['component_kind']} {v['component_idx']}",
             "text": texts.get((v["component_kind"], int(v["component_idx"])), ""), "target": v["target"],
             "verdict": fmt_verdict(v["value"], v["status"]) if v["status"] != UNSURE else "? unsure (left out)",
             "value": v["value"], "p": v["p"], "p kind": v["p_kind"], "tier": v["tier"], "detail": v["detail"]}
            for v in (deciding + unsure)[:limit]]
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS), len(deciding), len(unsure)


def verdict_table(verdicts: Sequence[Record], texts: Mapping[tuple[str, int], str]) -> pd.DataFrame:
    """Verdicts as rows with how sure the judge was (p, its kind) and the tier that decided each."""
    return pd.DataFrame([{"metric": v["metric"].upper(), "component": f"{v['component_kind']} {v['component_idx']}",
                          "text": texts.get((v["component_kind"], int(v["component_idx"])), ""),
                          "target": v["target"], "verdict": fmt_verdict(v["value"], v["status"]),
                          "value": v["value"], "p": v["p"], "p kind": v["p_kind"], "tier": v["tier"],
                          "detail": v["detail"]} for v in verdicts], columns=EVIDENCE_COLUMNS)


def whole(low: int, high: int) -> Callable[[str], int]:
    """A URL parser for a whole number within [low, high]; anything else raises ValueError, so
    url_value() falls back to the default (a huge, negative or NaN page number is ignored)."""
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value
    return parse


def pager(label: str, key: str, n: int, size: int) -> tuple[int, int]:
    """Rows [lo, hi) of a list of n shown `size` at a time; past one page, a page number kept in the URL."""
    pages = max(1, -(-n // size))
    if pages == 1:
        return 0, n
    number = synced(st.number_input, f"{label}: page (of {pages})", key, 1, whole(1, pages),
                    min_value=1, max_value=pages, step=1)
    lo = (number - 1) * size
    hi = min(lo + size, n)
    st.caption(f"{label} {lo + 1}–{hi} of {n}")
    return lo, hi


def exchange_keys(*groups: Sequence[Record]) -> tuple[str, ...]:
    """The judge call keys behind these verdicts, to read only the calls a page shows."""
    return tuple(sorted({v["call_key"] for rows in groups for v in rows if isinstance(v.get("call_key"), str)}))


REPEAT_CHARS = 2_000  # a prompt this long is drawn once per list of exchanges, then referred to


def raw_exchange(verdict: Record, calls: Mapping[str, Record], seen: dict[str, str] | None = None,
                 title: str = "") -> None:
    """The judge's raw exchange behind one verdict: prompt, reply, status, tokens and latency.

    seen: the long prompts already drawn in this list ({call key: title}); a batched call stands
    behind many verdicts, and repeating its prompt in each would cost the browser megabytes."""
    call = calls.get(verdict.get("call_key") or "")
    if call is None:  # the offline judge and SD's embeddings make no calls: the explanation is the exchange
        source = "Sentence embeddings" if verdict.get("metric") == "sd" else "Offline judge"
        st.caption(f"{source} (no LLM call). Its explanation:")
        st.code(str(verdict.get("detail") or "(no detail stored)"), language=None, wrap_lines=True)
        return
    cost = "–" if call["cost"] is None or pd.isna(call["cost"]) else f"{call['cost']:.6f}"
    st.caption(f"model {md(call['model'])} · prompt {md(call['prompt_name'])} ({md(call['prompt_hash'])}) · "
               f"call status {md(call['status'])} · tokens {call['prompt_tokens']} in / "
               f"{call['completion_tokens']} out · latency {call['latency_ms']:.0f} ms · cost {cost}"
               # masked again: a database written before URLs were masked may hold a key in one
               + (f" · endpoint {md(mask_url(call['endpoint']))}" if isinstance(call.get("endpoint"), str) else ""))
    messages = json.loads(call["messages"] or "[]")
    size = sum(len(str(m.get("content", ""))) for m in messages)
    if seen is not None and size >= REPEAT_CHARS and call["key"] in seen:
        st.caption(f"prompt: the same {size:,}-character prompt as in «{md(seen[call['key']])}» above")
        messages = []
    elif seen is not None and size >= REPEAT_CHARS:
        seen[call["key"]] = title
    for message in messages:
        st.markdown(f"**{md(message.get('role', '?'))}**")
        st.code(str(message.get("content", "")), language=None, wrap_lines=True)
    st.markdown("**reply**")
    st.code("(no reply)" if call["reply"] is None else str(call["reply"]), language=None, wrap_lines=True)
    if call["error"]:
        st.error(f"error: {md(call['error'])}")
    if verdict.get("detail"):
        st.caption(f"detail: {md(verdict['detail'])}")


def exchange_key(row: Record) -> str:
    """The widget key of a verdict's raw-exchange expander (its open state is kept under it)."""
    return f"raw:{row['metric']}:{row['component_kind']}:{row['component_idx']}:{row['target']}"


def verdict_expanders(rows: Sequence[Record], calls: Mapping[str, Record], title: Callable[[Record], str],
                      seen: dict[str, str] | None = None) -> None:
    """One expander per verdict, opening onto the judge's raw exchange; pass one `seen` dict to the
    lists of a tab to draw each long prompt once there.

    An exchange is drawn only once its expander is opened (a click reruns the page): a browser draws
    every element it is sent, collapsed or not, and an item's prompts and replies are most of its page.
    """
    seen = {} if seen is None else seen
    keys: set[str] = set()
    for row in rows:
        key, n = exchange_key(row), 1
        while key in keys:  # two verdicts on one component and target (a list given twice): keys stay unique
            key, n = f"{exchange_key(row)}#{n}", n + 1
        keys.add(key)
        box = st.expander(f"{md(title(row))} · {fmt_verdict(row['value'], row['status'])}{fmt_p(row)} · raw exchange",
                          key=key, on_change="rerun")
        if box.open:
            with box:
                raw_exchange(row, calls, seen, title(row))


def verdict_cell(rows: Sequence[Record]) -> str:
    """One verdict cell: ✓ 1, ✗ 0, ? unsure, ⚠ status, or – when there is no verdict; with p when it has one."""
    return "–" if not rows else fmt_verdict(rows[0]["value"], rows[0]["status"]) + fmt_p(rows[0])


def subquestion_table(comps: Sequence[Record], judged: Judged, n_sources: int) -> pd.DataFrame:
    """Per sub-question: SQC against each source and the whole set, whether it is covered, and RQC."""
    rows = []
    for comp in comps:
        mine = judged.get(("subquestion", comp["idx"]), [])
        sqc, rqc = pick(mine, metric="sqc"), pick(mine, metric="rqc")
        by_target: dict[str, list[Record]] = {}
        for v in sqc:
            by_target.setdefault(v["target"], []).append(v)
        row = {"#": comp["idx"], "sub-question": comp["text"]}
        for j in range(n_sources):
            row[f"source {j}"] = verdict_cell(by_target.get(f"source:{j}", []))
        row["whole set"] = verdict_cell(pick(sqc, target="sources"))
        # as metrics.aggregate_coverage folds it: a confident 1 covers; all confident 0s do not
        statuses = [v["status"] for v in sqc]
        covered = any(v["status"] == OK and v["value"] >= 0.5 for v in sqc)
        row["SQC covered"] = ("–" if not sqc else "✓ yes" if covered else "✗ no" if all(s == OK for s in statuses)
                              else "? unsure" if UNSURE in statuses else f"⚠ {next(s for s in statuses if s != OK)}")
        row["RQC"] = verdict_cell(rqc)
        rows.append(row)
    return pd.DataFrame(rows)


def marks_for(comps: Sequence[Record], judged: Judged, metrics: Sequence[str]) -> list[tuple]:
    """(text, colour, title) highlight marks for these components, coloured by the last metric given."""
    marks = []
    for comp in comps:
        mine = judged.get((comp["kind"], comp["idx"]), [])
        title = " · ".join(f"{m.upper()} {verdict_cell(pick(mine, metric=m))}" for m in metrics)
        colour_rows = pick(mine, metric=metrics[-1])
        colour = FAIL if not colour_rows else verdict_colour(colour_rows[0]["value"], colour_rows[0]["status"])
        marks.append((comp["text"], colour, f"{comp['kind']} {comp['idx']}: {title}"))
    return marks


def component_table(comps: Sequence[Record], judged: Judged, metrics: Sequence[str]) -> pd.DataFrame:
    """Components with one verdict column per metric (and the most similar sentence for SD)."""
    rows = []
    for comp in comps:
        mine = judged.get((comp["kind"], comp["idx"]), [])
        row = {"#": comp["idx"], comp["kind"]: comp["text"]}
        for m in metrics:
            row[m.upper()] = verdict_cell(pick(mine, metric=m))
        sd = pick(mine, metric="sd")
        if "sd" in metrics and sd:
            row["most similar"] = sd[0]["target"].replace("sentence:", "sentence ")
            row["similarity"] = None if pd.isna(sd[0]["evidence"]) else round(float(sd[0]["evidence"]), 3)
            row["SD"] = "⚠ " + sd[0]["status"] if sd[0]["status"] != OK else (
                "distinct" if sd[0]["value"] >= 0.5 else "repeats")
        rows.append(row)
    return pd.DataFrame(rows)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def claim_diff(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Claims of one item in two runs, matched by normalised text: new, gone, changed verdict or same."""
    def verdicts(row: Any) -> str:
        rp = fmt_verdict(row.rp, row.rp_status) if isinstance(row.rp_status, str) else "–"
        gr = fmt_verdict(row.gr, row.gr_status) if isinstance(row.gr_status, str) else "–"
        return f"RP {rp} · GR {gr}"
    a = {_norm(r.text): (r.text, verdicts(r)) for r in before.itertuples()}
    b = {_norm(r.text): (r.text, verdicts(r)) for r in after.itertuples()}
    rows = []
    for key in list(a) + [k for k in b if k not in a]:
        text = (b.get(key) or a[key])[0]
        va, vb = a.get(key, (None, None))[1], b.get(key, (None, None))[1]
        change = "new" if va is None else "gone" if vb is None else "changed verdict" if va != vb else "same"
        rows.append({"change": change, "claim": text, "before": va or "", "after": vb or ""})
    order = {"changed verdict": 0, "new": 1, "gone": 2, "same": 3}
    frame = pd.DataFrame(rows, columns=["change", "claim", "before", "after"])
    return frame.sort_values("change", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- statistics

def headline(dist: pd.DataFrame, metric: str) -> Any:
    """Bootstrap 95% interval of a metric's mean from its (value, n) distribution.

    Values are grouped to 1e-3 for the resampling (so a continuous metric stays cheap); the mean
    reported is the exact one.
    """
    rows = dist[dist["metric"] == metric]
    grouped = rows.groupby(rows["value"].round(3))["n"].sum()
    ci = bootstrap_ci(grouped.index.to_numpy(), grouped.to_numpy())
    if ci is None:
        return None
    exact = float((rows["value"] * rows["n"]).sum() / rows["n"].sum())
    return type(ci)(exact, ci.low, ci.high, ci.n)


def share_below(dist: pd.DataFrame, metric: str, threshold: float) -> tuple[int, int]:
    """(items below threshold, items scored) for one metric, exactly, from its distribution."""
    rows = dist[dist["metric"] == metric]
    return int(rows.loc[rows["value"] < threshold, "n"].sum()), int(rows["n"].sum())
