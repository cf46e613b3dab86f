"""The RAG Triage dashboard (`streamlit run app.py`): the navigation, declared once.

Each page is a file in pages/; ui.PAGES gives its sidebar title and section and the URL path links use.
Every page run is timed and logged on the server (evaluators/dashboard/timing.py).
"""

from __future__ import annotations

from contextlib import nullcontext

import streamlit as st

from evaluators.dashboard import reads, timing, ui
from evaluators.dashboard.views import walk
from evaluators.storage import store

sections: dict[str, list[st.Page]] = {}
for p in ui.PAGES.values():
    sections.setdefault(p.section, []).append(
        st.Page(p.file, title=p.title, url_path=p.url_path, default=p.url_path == "")
    )
pg = st.navigation(sections)
walk.returned(pg.url_path)  # Back from an item: the table's own URL again
# A page's reads that miss the cache share one connection to the database, opened by the first of them
# and parked for the next page run (store.KEEP_S): at 1M items per run opening and closing the file costs
# more than most of those reads. Not on Evaluate, whose engine writes from threads of its own.
shared = nullcontext() if pg.url_path == ui.PAGES["evaluate"].url_path else store.reading(reads.db_path(), keep=True)
with timing.page_run(pg.url_path), shared:
    pg.run()
