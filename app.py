"""The RAG Triage dashboard (`streamlit run app.py`): the navigation, declared once.

Each page is a file in pages/; ui.PAGES gives its sidebar title and section and the URL path links use.
Every page run is timed and logged on the server (evaluators/dashboard/timing.py).
"""

from __future__ import annotations

import streamlit as st

from evaluators.dashboard import timing, ui
from evaluators.dashboard.views import walk

sections: dict[str, list[st.Page]] = {}
for p in ui.PAGES.values():
    sections.setdefault(p.section, []).append(
        st.Page(p.file, title=p.title, url_path=p.url_path, default=p.url_path == "")
    )
pg = st.navigation(sections)
walk.returned(pg.url_path)  # Back from an item: the table's own URL again
with timing.page_run(pg.url_path):
    pg.run()
