"""Server-side timing of the dashboard's page runs: one INFO line per script run on the logger
"rag_triage.pages", so an operator can grep how long each page took for whom.

    2026-11-21 11:30:02,114 INFO    rag_triage.pages: page=/Run ms=412.7 session=3f9c0a1e outcome=ok

`outcome` is `ok`, `stop` (st.stop), `rerun` (st.rerun or st.switch_page cut the run short) or the
class name of the exception the page raised. The session is a short hash of Streamlit's session id:
enough to follow one session through the log without printing the id itself; `session=warmup` marks
the views `python -m evaluators serve` opens itself at start (evaluators/dashboard/serve.py), which pass
the login gate as a viewer would, so behind login the first visitor finds them read too.

A deep link that is a fresh server's first request is served from the pages/ folder without app.py;
ui.page() hands it over to app.py, so it is logged too, once (tests/test_deep_links.py).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from contextlib import contextmanager
from typing import Iterator

import streamlit as st
from streamlit.runtime.scriptrunner import RerunException, StopException, get_script_run_ctx

LOGGER_NAME = "rag_triage.pages"
WARMUP_HEADER = "X-Rag-Triage-Warmup"  # sent by serve's own start-up views, so the log tells them apart
# Its value: a secret of this process, which serve's views send to the server they run in. No client can know
# it, so a header sent from outside is an ordinary visit (behind login, a logged-out one).
WARMUP_TOKEN = secrets.token_urlsafe(24)
LOG = logging.getLogger(LOGGER_NAME)
LOG.setLevel(logging.INFO)
# `streamlit run` configures no root handler, so without one of our own the line would be dropped
# (Python's last-resort handler prints warnings only). Where logging is configured already (an
# operator's setup, pytest) the line propagates there instead of being printed twice.
if not LOG.handlers and not logging.getLogger().handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname) -7s %(name)s: %(message)s"))
    LOG.addHandler(_handler)


def session_tag() -> str:
    """A short, stable hash of the current Streamlit session's id, "warmup" for serve's own start-up
    views, or "-" outside a script run."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return "-"
    if warming():
        return "warmup"
    return hashlib.sha256(ctx.session_id.encode()).hexdigest()[:8]


def warming() -> bool:
    """Whether this page run is one of serve's own start-up views (its header carries WARMUP_TOKEN)."""
    return get_script_run_ctx(suppress_warning=True) is not None and secrets.compare_digest(
        st.context.headers.get(WARMUP_HEADER) or "", WARMUP_TOKEN
    )


@contextmanager
def page_run(url_path: str) -> Iterator[None]:
    """Time the page run inside the block and log it, however the run ends; exceptions pass through.

    st.stop() and st.rerun() end a run by raising (BaseException subclasses), so they are timed and
    re-raised like any error the page raises, which Streamlit then shows as it always does.
    """
    outcome = "ok"
    start = time.perf_counter()
    try:
        yield
    except StopException:
        outcome = "stop"
        raise
    except RerunException:
        outcome = "rerun"
        raise
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        LOG.info(
            "page=/%s ms=%.1f session=%s outcome=%s",
            url_path,
            (time.perf_counter() - start) * 1000,
            session_tag(),
            outcome,
        )
