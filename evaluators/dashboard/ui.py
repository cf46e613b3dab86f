"""What the dashboard pages share: the page table, configuration and login, the start of every page
(with the database check), the run pickers, links between pages and the user's saves (the plotly
figures are in charts.py, tables as the grid draws them in tables.py, reads in reads.py, URL state in
state.py, text in markup.py; each page's own helpers in views/).
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence
from urllib.parse import urlencode

import pandas as pd
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from evaluators.dashboard import access, reads, timing
from evaluators.dashboard.markup import md
from evaluators.dashboard.reads import db_path, metrics, read, runs
from evaluators.dashboard.state import band_control, csv_list, scores_control, synced, thresholds
from evaluators.storage import queries, schema, store


class PageFile(NamedTuple):
    """One dashboard page: its file under pages/, its sidebar title, its URL path and its sidebar section."""

    file: str
    title: str
    url_path: str
    section: str = "Triage"


# The navigation, in sidebar order and by section (app.py declares it from this). The URL paths are the
# ones links have always used, so pasted links keep working; Runs is the default page, at "/".
PAGES: dict[str, PageFile] = {
    "runs": PageFile("pages/0_Runs.py", "Runs", ""),
    "run": PageFile("pages/1_Run.py", "Run", "Run"),
    "item": PageFile("pages/2_Item.py", "Item", "Item"),
    "compare": PageFile("pages/3_Compare.py", "Compare", "Compare"),
    "diagnosis": PageFile("pages/4_Diagnosis.py", "Diagnosis", "Diagnosis"),
    "triage": PageFile("pages/5_Triage.py", "Triage", "Triage"),
    "trust": PageFile("pages/8_Trust.py", "Trust", "Trust"),
    "sources": PageFile("pages/9_Sources.py", "Sources", "Sources"),
    "trends": PageFile("pages/10_Trends.py", "Trends", "Trends"),
    "evaluate": PageFile("pages/6_Evaluate.py", "Evaluate", "Evaluate", "New runs"),
    "robustness": PageFile("pages/7_Robustness.py", "Robustness", "Robustness", "Robustness tests"),
}


SAVE_DEADLINE_S = 5.0  # how long a triage save retries a locked file before saying "busy"


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
    ctx = get_script_run_ctx()
    if PagesManager.uses_pages_directory and ctx is not None:
        runpy.run_path(ctx.main_script_path)
        st.stop()


def page(title: str, need_db: bool = True) -> Path:
    """Start a page (through app.py's navigation): config, login gate, read-only notice; stops with a
    hint when there is no database."""
    _hand_over_to_app()
    st.set_page_config(page_title=f"{title} · RAG Triage", layout="wide")
    # serve's own start-up views (timing.warming) pass the gate as a viewer: behind login too, the first visitor
    # finds the pages read
    if _auth_configured() and not st.user.get("is_logged_in", False) and not timing.warming():
        st.title("RAG Triage")
        st.info("Log in to see the evaluation runs.")
        st.html(REMEMBER_LINK_JS, unsafe_allow_javascript=True)
        st.button("Log in", key="login", on_click=st.login)
        st.stop()
    if _auth_configured() and title == PAGES["runs"].title:  # the root, where the login's callback lands
        st.html(RESTORE_LINK_JS, unsafe_allow_javascript=True)
    locked, unknown = access.read_only_setting(os.environ.get(access.READ_ONLY_ENV))
    if unknown is not None:
        st.sidebar.warning(
            f"{access.READ_ONLY_ENV} has a value the dashboard does not know (below), so it stays "
            "read-only. Use 1/true/yes/on (read-only) or 0/false/no/off (writable).",
            icon="⚠️",
        )
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


# Links survive login: the login's callback always lands on the app's root, so the page a logged-out
# visitor opened (path and query string) is kept in the tab's sessionStorage, which the round trip
# through the provider keeps, and the root, logged in, sends the tab on to it once. Only a link to
# this app's own origin, younger than LINK_TTL_MS, is followed, and only where the tab is not there
# already (the page may have added a parameter of its own, such as the run a picker opened on).
LINK_KEY, LINK_TTL_MS = "rag_triage_login_link", 10 * 60 * 1000
REMEMBER_LINK_JS = (
    "<script>sessionStorage.setItem('" + LINK_KEY + "', JSON.stringify("
    "{path: location.pathname + location.search, at: Date.now()}));</script>"
)
RESTORE_LINK_JS = (
    "<script>(() => { const raw = sessionStorage.getItem('" + LINK_KEY + "'); if (!raw) return;"
    " sessionStorage.removeItem('" + LINK_KEY + "'); let link, to;"
    " try { link = JSON.parse(raw); to = new URL(String(link.path), location.origin); } catch { return; }"
    " const here = new URLSearchParams(location.search);"
    " const there = to.pathname === location.pathname && [...to.searchParams].every(([k, v]) => here.get(k) === v);"
    f" if (to.origin !== location.origin || there || !(Date.now() - link.at < {LINK_TTL_MS})) return;"
    " location.replace(to.href); })();</script>"
)


# Long words (a 60,000-character id or token) wrap inside the app's text instead of widening the page.
WRAP_CSS = (
    "<style>[data-testid=stMarkdownContainer], [data-testid=stCaptionContainer], "
    "[data-testid=stAlertContentInfo], [data-testid=stAlertContentWarning], "
    "[data-testid=stAlertContentError], [data-testid=stAlertContentSuccess], "
    "[data-testid=stExpander] summary, [data-testid=stMetricLabel], "
    "[data-testid=stWidgetLabel], [data-testid=stPageLink] "
    "{overflow-wrap:anywhere; word-break:break-word; min-width:0}</style>"
)


def _check_database(path: Path, need_db: bool) -> None:
    """Stop the page with what is wrong and what to do when `path` is not a database this version
    reads; checked once per page run, cached on the file's version. Pages that write (need_db=False)
    may start a missing or empty database, and upgrade an older one."""
    try:
        health = reads.database_health(str(path), reads.db_version(path))
    except store.StoreBusy:
        st.warning(
            f"The database {md(path)} is locked by another process (a run or a save is writing); "
            "retried for a few seconds. Reload the page or press Retry in a moment."
        )
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
        f"reads {len(schema.MIGRATIONS)}): evaluating a file into it upgrades it, e.g. "
        f"`python -m evaluators evaluate ITEMS.jsonl --db FILE --run NAME` or the Evaluate page.",
        "newer": f"{where} was made by a newer version of RAG Triage (schema {health.version}, this version "
        f"reads {len(schema.MIGRATIONS)}): open it with that version, or update RAG Triage.",
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


def default_run(ids: Sequence[str], skip: str | None = None) -> str:
    """The run a picker opens on: the newest THELMA run (not a GRAMMAR robustness run) other than
    `skip`, else the newest run other than `skip`. `ids` lists runs newest first."""
    thelma = set(read(queries.runs.thelma_runs))
    return next((r for r in ids if r != skip and r in thelma), next((r for r in ids if r != skip), ids[0]))


def partner(ids: Sequence[str], run: str, older: bool = False) -> str | None:
    """The newest run (THELMA runs first, as default_run() orders them) that holds some of `run`'s items, and
    with `older` was made before it; None when no run shares an item with it. `ids` lists runs newest first."""
    thelma = set(read(queries.runs.thelma_runs))
    shared = set(read(queries.runs.sharing_items, run))
    order = [r for r in ids if r in thelma] + [r for r in ids if r not in thelma]
    return next((r for r in order if r in shared and (not older or ids.index(r) > ids.index(run))), None)


def default_pair(ids: Sequence[str], after: str | None = None) -> tuple[str, str]:
    """The two runs Compare opens on, (before, after), of two runs that share items: `after` (default:
    default_run(), the newest THELMA run) against its partner() made before it, else a newer one; when `after`
    shares items with no run, the newest such pair (as default_run() orders the runs). Two runs that share
    nothing only when no two runs do. `ids` lists at least two runs, newest first."""
    thelma = set(read(queries.runs.thelma_runs))
    order = [r for r in ids if r in thelma] + [r for r in ids if r not in thelma]
    first = after if after is not None and after in ids else order[0]
    for candidate in [first, *(r for r in order if r != first)]:
        before = partner(ids, candidate, older=True) or partner(ids, candidate)
        if before is not None:
            return before, candidate
    return default_run(ids, first), first


def pick_run(
    frame: pd.DataFrame, key: str = "run", label: str = "Run", skip: str | None = None, where: Any = None
) -> str | None:
    """A run selectbox synced with ?run= (default: default_run(), the newest THELMA run)."""
    ids = list(frame["run_id"])
    if not ids:
        return None
    return synced(
        (where or st.sidebar).selectbox, label, key, default_run(ids, skip), remember=True, explicit=True, options=ids
    )


def pick_runs(frame: pd.DataFrame, key: str = "runs", label: str = "Runs") -> list[str]:
    """A multiselect of runs synced with ?runs=a,b (default: the run in ?run=, else default_run())."""
    ids = list(frame["run_id"])
    if not ids:
        return []
    first = st.query_params.get("run")
    default = [first if first in ids else default_run(ids)]
    return synced(st.sidebar.multiselect, label, key, default, csv_list, remember=True, explicit=True, options=ids)


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


def write_refusal(role: str, doing: str, what: str) -> str | None:
    """Why this user may not write here, said where the form would be ("You are a viewer: correcting a verdict
    needs the triager role"), or None when they may: read-only mode, or a role below `role`."""
    if read_only():
        return f"Read-only mode: {what} cannot be saved here."
    me = user()
    return None if me.can(role) else f"You are a {me.role}: {doing} needs the {role} role (ask an admin)."


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


def link(**extra: Any) -> dict[str, str]:
    """Query params for a link to another page: the current run, thresholds and band, plus `extra`."""
    keep = {k: v for k, v in st.query_params.to_dict().items() if k in ("run", "band") or k.startswith("th_")}
    keep.update({k: str(v) for k, v in extra.items() if v is not None})
    return keep


def item_link(run_id: str, item_id: str, label: str | None = None, tab: str | None = None) -> None:
    """A page link to one item's drill-down (on `tab`, one of ITEM_TABS); a `label` given is markdown, with
    user text through md()."""
    page_link(
        "item",
        label=label or f"Open item {md(item_id)}",
        icon="🔎",
        query_params=link(run=run_id, item=item_id, tab=tab),
    )


def page_link(
    page: str, label: str, query_params: Mapping[str, str], icon: str | None = None, where: Any = None
) -> None:
    """A link to one of PAGES ('run', 'item', ...) with these query params."""
    (where or st).page_link(PAGES[page].file, label=label, icon=icon, query_params=query_params)


def switch_page(page: str, query_params: Mapping[str, str]) -> None:
    """Go to one of PAGES now, with these query params (this page's widgets let go of the URL's)."""
    _unbind([*st.query_params.keys(), *query_params])
    st.switch_page(PAGES[page].file, query_params=query_params)


def _unbind(keys: Iterable[str]) -> None:
    """Widgets bound to these query params (Trust's tabs to ?tab=) let go of them and of their value, so
    that the next run's widget of that key reads the URL: Streamlit refuses to set a bound param
    otherwise, and the Item page's and Trust's ?tab= would carry one page's tab to the other."""
    ctx, unbound = get_script_run_ctx(), []
    if ctx is None:
        return
    with ctx.session_state.query_params() as bound:
        for key in keys:
            if (binding := bound.get_binding_for_param(key)) is not None:
                bound.unbind_widget(binding.widget_id)
                unbound.append(key)
    for key in unbound:
        st.session_state.pop(key, None)


def page_url(page: str, **extra: Any) -> str:
    """A relative URL to one of PAGES with the current context, for link columns in tables."""
    return f"{PAGES[page].url_path}?" + urlencode(link(**extra))


def item_url(run_id: str, item_id: str, rule: str | None = None, tab: str | None = None) -> str:
    """A relative URL to an item's drill-down; with `rule` (ids, comma-separated) it opens their evidence,
    with `tab` (one of ITEM_TABS) that tab."""
    return page_url("item", run=run_id, item=item_id, rule=rule or None, tab=tab)
