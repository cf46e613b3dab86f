"""The RAG Triage dashboard (`streamlit run app.py`): the navigation, declared once.

Each page is a file in pages/; ui.PAGES gives its sidebar title and the URL path links use.
Every page run is timed and logged on the server (evaluators/dashboard/timing.py).
"""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import timing, ui

pg = st.navigation(
    [st.Page(p.file, title=p.title, url_path=p.url_path, default=p.url_path == "") for p in ui.PAGES.values()]
)
with timing.page_run(pg.url_path):
    pg.run()
