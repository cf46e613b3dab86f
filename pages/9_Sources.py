"""Sources: the source ledger of one or several runs (evaluators/metrics/ledger.py), its dead-weight and
possibly-stale lists, each source named by its first words, and one source's full text and retrievals
with their verdicts (?source=ID or text key; a click on a row opens it)."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from evaluators.dashboard import markup, reads, state, tables, ui
from evaluators.dashboard.views import walk
from evaluators.metrics import ledger
from evaluators.storage import queries

path = ui.page("Sources")
runs = reads.runs()
if runs.empty:
    st.info("The database has no runs yet.")
    st.stop()
chosen = ui.pick_runs(runs)
band = state.band_control()
if not chosen:
    st.info("Pick one or more runs in the sidebar.")
    st.stop()
base = ledger.DEFAULT_THRESHOLDS
with st.sidebar.expander("List thresholds", expanded=False):
    th = ledger.Thresholds(
        state.synced(
            st.number_input,
            "Retrieved at least (times)",
            "lr_min",
            base.min_retrieved,
            state.whole(1, 10**9),
            min_value=1,
            step=1,
        ),
        state.synced(
            st.slider,
            "Dead weight: essential share at most",
            "lr_dead",
            base.dead_max_essential,
            state.unit,
            min_value=0.0,
            max_value=1.0,
            step=0.05,
        ),
        state.synced(
            st.slider,
            "Stale: share beside unsupported claims at least",
            "lr_stale",
            base.stale_min_unsupported,
            state.unit,
            min_value=0.0,
            max_value=1.0,
            step=0.05,
        ),
    )


def source_params(key: str) -> dict[str, str]:
    """The URL of one source's detail view over the chosen runs."""
    return {**ui.link(), "runs": ",".join(chosen), "source": key}


source = state.synced(st.sidebar.text_input, "Find a source by its id or key", "source", "").strip()
ATTRIBUTION = (
    "Claims a source supports come from GR verdicts whose judge named the supporting source sentence "
    "(the offline judge does); an LLM judge answers for the whole source set, so its supported claims "
    "count as *source unknown*."
)

if source:
    found = reads.read(queries.ledger.source_retrievals, chosen, source, band)
    if found.empty:
        st.warning(f"No source {markup.md(source)} in {markup.md(', '.join(chosen))}.")
        st.stop()
    first = found.iloc[0]
    st.subheader(markup.md(first["name"]))
    has_id = first["source_id"] is not None and not pd.isna(first["source_id"])
    st.caption(
        (f"id {markup.md(first['source_id'])} · " if has_id else "") + f"text key {markup.md(first['text_key'])}",
        help=f"Text key: {markup.TERMS['text key']}",
    )
    markup.plain(str(first["text"]))
    n, sp1 = int(first["n_match"]), found["sp1"].value_counts()
    decided = int(sp1.get("yes", 0) + sp1.get("no", 0))
    c1, c2, c3 = st.columns(3)
    c1.metric("Retrieved", n)
    c2.metric("Judged essential (SP1)", "–" if not decided else f"{sp1.get('yes', 0) / decided:.0%}")
    c2.caption(
        f"n scored {decided} of {len(found)}, {int(sp1.get('unsure', 0))} unsure, {int(sp1.get('failed', 0))} failed"
    )
    beside = int((found["n_unsupported"] > 0).sum())
    c3.metric("Beside unsupported claims", beside)
    c3.caption(f"of {int((found['n_decided'] > 0).sum())} retrievals where GR decided a claim")
    if n > len(found):
        st.caption(f"Showing the first {len(found)} of {n} retrievals.")
    table = found.assign(
        open=[ui.item_url(r, i, tab="Sources") for r, i in zip(found["run_id"], found["item_id"])],
        position=found["idx"] + 1,
        essential=found["sp1"]
        .map({"yes": "✓ essential", "no": "✗ not essential", "unsure": "? unsure", "failed": "⚠ failed"})
        .fillna("not run"),
        # the grid draws a newline as a space: the claims are parted by "; "
        claims=["" if c is None or (not isinstance(c, list) and pd.isna(c)) else "; ".join(c) for c in found["claims"]],
    )
    # ids keep their line and short cells their words; the query, SP1's reason and the claims wrap in what is
    # left of 1280 px beside the row markers
    widths = {
        "open": tables.OPEN_PX,
        "run_id": min(130, tables.one_line_px(table["run_id"], 60)),
        "item_id": min(90, tables.one_line_px(table["item_id"], 50)),
        "position": 46,
        "essential": 80,
        "n_unsupported": 80,
    }
    room = tables.TABLE_PX - tables.MARKERS_PX - sum(widths.values())
    widths |= {"query": room * 3 // 10, "sp1_detail": room * 4 // 10}
    widths["claims"] = room - widths["query"] - widths["sp1_detail"]
    order = ["open", "run_id", "item_id", "position", "essential", "query", "sp1_detail", "claims", "n_unsupported"]
    row = tables.clickable(
        table[order],
        "retrievals",
        widths,
        {
            **tables.OPEN,
            # short headers that fit their columns, each named in full on hover
            "position": st.column_config.NumberColumn("rank", help="its position among the item's sources"),
            "sp1_detail": "SP1 detail",
            "claims": st.column_config.TextColumn("supports", help="the claims of its item that it supports"),
            "n_unsupported": st.column_config.NumberColumn("✗ in item", help="unsupported claims in its item"),
        },
    )
    items = found.drop_duplicates(["run_id", "item_id"])
    if unknown := int(items["n_unattributed"].fillna(0).sum()):
        st.caption(f"The judge named no source for {unknown} supported claim(s) of these items: none is listed here.")
    st.caption("Click a row to open its item on its sources. " + ATTRIBUTION)
    if row is not None:
        walk.open_item("sources", table["run_id"].iloc[row], table["item_id"].iloc[row], "Sources")
    ui.page_link("sources", "Back to the ledger", {**ui.link(), "runs": ",".join(chosen)}, icon="📚")
    st.stop()

frame = reads.read(queries.ledger.source_ledger, chosen, th, band, cache=reads.cache_dir())
if frame.empty:
    st.info("These runs have no retrieved sources.")
    st.stop()
c1, c2, c3 = st.columns(3)
c1.metric("Sources", int(frame["n_sources"].iloc[0]))
c2.metric("Dead weight", int(frame["n_dead"].iloc[0]))
c3.metric("Possibly stale or misleading", int(frame["n_stale"].iloc[0]))
st.caption(
    f"Over {len(chosen)} run{'s' if len(chosen) > 1 else ''}: each source is named by its first words; its id "
    "or key is its metadata `source_ids` entry when the item has one, else the first 12 hex digits of sha256 of "
    "its whitespace-collapsed text. Click a row for its full text and the items that retrieved it. Unsure and "
    "failed SP1 verdicts are counted apart, never as 0."
)

COLUMNS = {
    "open": st.column_config.LinkColumn("open", display_text="🔎", width="small"),
    "name": st.column_config.TextColumn("source", help="Its first words; click the row for its full text"),
    "source": st.column_config.TextColumn(
        "id or key", help="Its metadata source id, else the first 12 hex digits of sha256 of its text"
    ),
    "n_retrieved": "retrieved",
    "essential": st.column_config.TextColumn(
        "essential (SP1)",
        help="The share of its scored SP1 verdicts that found it essential (scored/retrieved, unsure, failed)",
    ),
    # short headers that fit their columns, each named in full on hover
    "claims_supported": st.column_config.NumberColumn("supports", help="claims it supports"),
    "claims_source_unknown": st.column_config.NumberColumn(
        "source unknown", help="supported beside it, source unknown"
    ),
    "beside": st.column_config.TextColumn("beside unsupported", help="beside unsupported claims"),
}
# The ledger's widths at 1280 px beside the row markers: its name and SP1's counts wrap in their cells, and
# a hash id keeps one line.
LEDGER_PX = {"name": 150, "n_retrieved": 66, "essential": 100, "claims_supported": 64}
LEDGER_PX |= {"claims_source_unknown": 110, "beside": 132, "source": 112, "open": tables.OPEN_PX}


def essential_cell(share: float, scored: int, retrieved: int, unsure: int, failed: int) -> str:
    """'18% (11/16, 5 unsure)', as the Runs page reads a mean: the share judged essential, its scored SP1
    verdicts of its retrievals, and the unsure and failed ones when there are any; '–' when none is scored."""
    counts = [f"{scored}/{retrieved}"] + [f"{n} {what}" for n, what in ((unsure, "unsure"), (failed, "failed")) if n]
    return f"{f'{share:.0%}' if scored else '–'} ({', '.join(counts)})"


def show(rows: pd.DataFrame, key: str) -> None:
    """One list of sources with their counts; a row's click (or its link) opens its text and retrievals."""
    shown = rows.assign(
        open=["Sources?" + urlencode(source_params(k)) for k in rows["source"]],
        essential=[
            essential_cell(s, e + o, n, u, f)
            for s, e, o, n, u, f in zip(
                rows["essential_share"],
                rows["sp1_essential"],
                rows["sp1_not"],
                rows["n_retrieved"],
                rows["sp1_unsure"],
                rows["sp1_failed"],
            )
        ],
        beside=[f"{b} of {d}" for b, d in zip(rows["beside_unsupported"], rows["gr_decided"])],
    )
    if (row := tables.clickable(shown[list(LEDGER_PX)], key, LEDGER_PX, COLUMNS)) is not None:
        ui.switch_page("sources", source_params(rows["source"].iloc[row]))


LISTS = (
    (
        "dead weight",
        "Dead weight",
        f"Retrieved at least {th.min_retrieved} times and judged essential by SP1 in at most "
        f"{th.dead_max_essential:.0%} of its scored verdicts: the retriever should stop returning it.",
    ),
    (
        "stale",
        "Possibly stale or misleading",
        f"Retrieved at least {th.min_retrieved} times, and at least "
        f"{th.stale_min_unsupported:.0%} of its retrievals (where GR decided a claim) sat beside an unsupported claim: "
        "check its text.",
    ),
    ("retrieved", "Most retrieved", "Every source, most retrieved first."),
)
for name, title, why in LISTS:
    st.subheader(title)
    st.caption(why)
    rows = frame[frame["list"] == name]
    if rows.empty:
        st.caption("No source is on this list at these thresholds.")
    else:
        show(rows, f"{name.replace(' ', '_')}_table")
st.caption(ATTRIBUTION)
st.download_button(
    "Download the whole ledger (CSV)",
    lambda: ledger.to_csv(queries.ledger.source_ledger(path, chosen, th, band, limit=None, cache=reads.cache_dir())),
    file_name="source_ledger.csv",
    mime="text/csv",
    key="ledger_csv",
    on_click="ignore",
)
