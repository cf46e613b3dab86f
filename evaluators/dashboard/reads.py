"""The dashboard's reads of its database: the file (RAG_TRIAGE_DB), its version, and the named reads of
evaluators/storage/queries/ through Streamlit's cache.

Reads go through `read()`, cached on the read function, the DB path and the file's modification time,
so a new run shows up without a restart, and no connection is held open past a page's run by more than
store.KEEP_S; computations over run
tables go through `derived()`, at the URL's band, and those that read only scores and counts through
`folded()`, over a run's profile. A busy database is said, never a crash.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import streamlit as st

from evaluators.core import resources
from evaluators.core.confidence import Band
from evaluators.dashboard.state import band, corrected
from evaluators.metrics.registry import order_metrics
from evaluators.storage import health, queries, store

DEFAULT_DB = "data/demo.duckdb"


def db_path() -> Path:
    """The database file, from RAG_TRIAGE_DB (relative paths are relative to the checkout, or to the
    working folder when the package runs installed)."""
    path = Path(os.environ.get("RAG_TRIAGE_DB") or DEFAULT_DB)
    return path if path.is_absolute() else (resources.checkout() or Path.cwd()) / path


def cache_dir() -> Path:
    """Where the dashboard keeps files it derives from the database (the Sources page's grouped ledgers,
    queries.ledger.grouped_file): RAG_TRIAGE_CACHE, else a folder of this user's in the system's temporary
    directory (named for the user: the files are kept only in a folder that is the user's alone)."""
    return Path(os.environ.get("RAG_TRIAGE_CACHE") or Path(tempfile.gettempdir()) / f"rag-triage-cache-{os.getuid()}")


def db_version(path: Path) -> float:
    """Changes whenever the database or its write-ahead log is written: part of every cache key."""
    return store.version(path) / 1e9


@st.cache_data(show_spinner=False, max_entries=64)
def database_health(path: str, version: float) -> health.Health:
    """What the database file is (health.check_database), cached on its version."""
    return health.check_database(path)


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
            return [
                _cached(fn, _name(fn), str(path), version, tuple(args), tuple(sorted(kwargs.items())))
                for fn, args, kwargs in calls
            ]
    except store.StoreBusy:  # a writer held the file past the deadline: say so, don't crash
        st.warning("The database is busy (a run or a save is writing), try again in a moment.")
        st.stop()


def warm() -> pd.DataFrame | None:
    """Fill the cached reads that every page's first run needs and no view setting changes (the
    database check, the runs catalog, the runs a picker opens on), outside any page run: for the
    server (serve.py). Keyed by the database's version like every read; raises store
    errors. Returns the runs as queries.runs.runs() lists them, newest first, or None when the database is
    not one the dashboard reads."""
    path = db_path()
    version = db_version(path)
    if database_health(str(path), version).state != "ok":
        return None
    with store.reading(path):  # both scan a run's items or scores: 0.1-0.5 s at 1M
        _cached(queries.runs.thelma_runs, _name(queries.runs.thelma_runs), str(path), version, (), ())
        return _cached(queries.runs.catalog, _name(queries.runs.catalog), str(path), version, (), ())[0]


def read(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(db, *args, **kwargs) through the cache, e.g. read(queries.runs.metadata_keys, run_id)."""
    return read_all((fn, args, kwargs))[0]


@st.cache_resource(show_spinner=False, max_entries=8)
def _run_table(
    path: str, version: float, run_id: str, metric_ids: tuple[str, ...], band: Band | None, corrected: bool
) -> pd.DataFrame:
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


def _relation(
    path: str, version: float, run_id: str, every: tuple[str, ...], band: Band | None, corrected: bool
) -> pd.DataFrame | store.StoredRun:
    """A run table for derived(): at the default band the stored one, queried in the file (a million
    items are never pulled into memory); at another band or corrected, the cached recomputed frame."""
    if band is None and not corrected:
        return queries.runs.stored_table(path, run_id, every)
    return _run_table(path, version, run_id, every, band, corrected)


@st.cache_resource(show_spinner=False, max_entries=8)
def _profile(
    path: str, version: float, run_id: str, every: tuple[str, ...], band: Band | None, corrected: bool
) -> pd.DataFrame:
    # cache_resource hands out the same frame without a copy: callers must not modify it.
    with store.reading(path):
        return queries.diagnosis.profile(_relation(path, version, run_id, every, band, corrected))


@st.cache_data(show_spinner=False, max_entries=128)
def _derived(
    _fn: Callable[..., Any],
    name: str,
    path: str,
    version: float,
    every: tuple[str, ...],
    band: Band | None,
    corrected: bool,
    run_ids: tuple[str, ...],
    fold: bool,
    args: tuple,
    kwargs: tuple,
) -> Any:
    tables = [(_profile if fold else _relation)(path, version, r, every, band, corrected) for r in run_ids]
    with store.reading(path):  # the stored run tables of one call share a connection
        return _fn(*tables, *args, **dict(kwargs))


def derived(fn: Callable[..., Any], run_ids: Sequence[str], *args: Any, **kwargs: Any) -> Any:
    """fn(*run tables of run_ids, *args, **kwargs), e.g. derived(queries.diagnosis.correlations, [run], metrics):
    a computation over run tables (at the URL's band) in DuckDB, itself cached, so a rerun for an
    unrelated widget costs nothing."""
    return _derive(fn, run_ids, False, args, kwargs)


def folded(fn: Callable[..., Any], run_ids: Sequence[str], *args: Any, **kwargs: Any) -> Any:
    """As derived(), over the runs' profiles (queries.diagnosis.profile, cached per band) instead of their
    tables, e.g. folded(queries.diagnosis.rule_counts, [run], thresholds): a threshold change then reads
    the profile, not the run."""
    return _derive(fn, run_ids, True, args, kwargs)


def _derive(fn: Callable[..., Any], run_ids: Sequence[str], fold: bool, args: tuple, kwargs: dict) -> Any:
    path = db_path()
    try:
        with store.reading(path):  # recomputed run tables share one connection
            if band() is not None or corrected():
                for run_id in run_ids:
                    run_table(run_id)  # builds (or reports busy) outside the cached call
            return _derived(
                fn,
                _name(fn),
                str(path),
                db_version(path),
                _every_metric(),
                band(),
                corrected(),
                tuple(run_ids),
                fold,
                args,
                tuple(sorted(kwargs.items())),
            )
    except store.StoreBusy:
        st.warning("The database is busy (a run or a save is writing), try again in a moment.")
        st.stop()


@st.cache_data(show_spinner=False, max_entries=128)
def _view(_fn: Callable[..., Any], name: str, path: str, version: float, args: tuple, kwargs: tuple) -> Any:
    return _fn(*args, **dict(kwargs))


def view(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), a page's computation over the reads it makes through read(), cached per
    database version like them: a new session or a rerun redoes none of its pandas work."""
    path = db_path()
    return _view(fn, _name(fn), str(path), db_version(path), args, tuple(sorted(kwargs.items())))


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
