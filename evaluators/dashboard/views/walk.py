"""The list an item was opened from: a table's row click, the Item page's Back, ◀ Previous and ▶ Next.

A table that opens an item writes its list's identity into the item's URL: `from` (the page), `fr` (the
run that page showed, when the item lives in another run) and the page's own filter keys, which the
Item page leaves alone. The neighbours are read again over the same filter, so the URL never carries a
list of ids however long the list is.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import pandas as pd
import streamlit as st

from evaluators.dashboard import reads, ui
from evaluators.dashboard.state import band, corrected, csv_list
from evaluators.metrics import registry
from evaluators.metrics.diagnosis import RULES
from evaluators.runs import flips, labelling
from evaluators.storage import queries
from evaluators.storage.queries.diagnosis import WORST

PAGE_SIZE = 200  # the Run page's rows per page


# Each page whose tables open items, with the URL keys that make up its list (its filters, sort and
# page) and that Back restores; the Item page's own keys (item, tab) are never among them.
KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("hist",),
    "run": ("below", "rule", "failed", "q", "mk", "mv", "quad", "sort", "desc", "page"),
    "diagnosis": ("rule", "page", "plots"),
    "compare": ("other", "xm", "xd", "pref", "better", "why", "cl"),
    "triage": ("labels",),
    "sources": ("source", "runs", "lr_min", "lr_stale", "lr_dead"),
    "trust": ("ft", "pairs_run"),
}


class Step(NamedTuple):
    """Where a click leads: one of ui.PAGES and its query params."""

    page: str
    params: dict[str, str]


def flag(text: str | None) -> bool:
    """A toggle or checkbox as the URL keeps it ('1' or 'True')."""
    return text in ("1", "True")


def open_item(origin: str, run_id: str, item_id: str, tab: str | None = None, **extra: Any) -> None:
    """Go to the item in this tab from a row of `origin`'s table, carrying that table's list in the URL."""
    here = st.query_params
    params = ui.link(run=run_id, item=item_id, tab=tab, **{"from": origin})
    params.update({k: here[k] for k in KEYS[origin] if k in here})
    if here.get("run", run_id) != run_id:  # Back returns to the run the table showed
        params["fr"] = here["run"]
    if origin == "trust":
        params["ft"] = here.get("tab", "Agreement")
    params.update({k: str(v) for k, v in extra.items() if v is not None})
    ui.switch_page("item", params)


# The Run table's orders beside its metrics': worst first (queries.diagnosis.WORST), by item id, by failures.
SORTS = (WORST, "item_id", "n_failed")


def run_filter(run_id: str, metric_ids: Sequence[str]) -> dict[str, Any]:
    """The Run page's filter and sort, read from the URL, as queries.diagnosis.filter_items' keywords."""
    q = st.query_params
    levels = dict(p.split(":", 1) for p in csv_list(q.get("quad", "")) if ":" in p)
    search, meta = q.get("q", ""), (q.get("mk", ""), q.get("mv", ""))
    sort = q.get("sort", WORST)
    return {
        "below": [m for m in csv_list(q.get("below", "")) if m in metric_ids],
        "rules": [r for r in csv_list(q.get("rule", "")) if r in RULES],
        "levels": {m: lv for m, lv in levels.items() if m in metric_ids and lv in ("low", "high")},
        "failed_only": flag(q.get("failed")),
        "ids": reads.read(queries.items.search_ids, run_id, search, meta if all(meta) else None)
        if search or all(meta)
        else None,
        "sort": sort if sort in SORTS or sort in metric_ids else WORST,
        "descending": flag(q.get("desc")),
    }


def run_rows(
    run_id: str, metric_ids: Sequence[str], th: Mapping[str, float], offset: int, limit: int
) -> tuple[pd.DataFrame, int]:
    """Rows [offset, offset + limit) of the Run page's filtered list, and how many items match."""
    return reads.derived(
        queries.diagnosis.filter_items,
        [run_id],
        metric_ids,
        th,
        **run_filter(run_id, metric_ids),
        limit=limit,
        offset=offset,
    )


def _page() -> int:
    try:
        return max(1, int(st.query_params.get("page", "1")))
    except ValueError:
        return 1


def _around(ids: Sequence[Any], at: Any) -> tuple[int | None, int | None]:
    """The positions before and after `at` in ids, None at an end or when `at` is not there."""
    if at not in ids:
        return None, None
    i = list(ids).index(at)
    return (i - 1 if i > 0 else None), (i + 1 if i + 1 < len(ids) else None)


def _run_steps(run_id: str, item_id: str, metric_ids: Sequence[str], th: Mapping[str, float]) -> list[dict | None]:
    """The Run page's neighbours of the item: the page it was listed on, the very read the Run page made
    (so it comes from the cache), and at its edges the page before or after, read as the Run page reads
    it (so the step across and Back to it read nothing more); each step names the page it falls on, so
    Back returns to the page that holds it."""

    def listed(page: int) -> list[str]:  # the item ids of one of the Run page's pages
        return list(run_rows(run_id, metric_ids, th, (page - 1) * PAGE_SIZE, PAGE_SIZE)[0]["item_id"])

    def beyond(page: int, at: int) -> dict | None:  # the row at position `at` of another page
        ids = listed(page) if page >= 1 else []
        return {"item": ids[at], "page": str(page)} if ids else None

    page = _page()
    ids = listed(page)
    if item_id not in ids:
        return [None, None]
    i = ids.index(item_id)
    prev = {"item": ids[i - 1], "page": str(page)} if i > 0 else beyond(page - 1, -1)
    full = len(ids) == PAGE_SIZE
    nxt = {"item": ids[i + 1], "page": str(page)} if i + 1 < len(ids) else (beyond(page + 1, 0) if full else None)
    return [prev, nxt]


def triage_notes(run_id: str | None, labels: Sequence[str]) -> pd.DataFrame:
    """The Triage page's notes: of one run or every run (None), with one of these labels (any when empty)."""
    notes = reads.read(queries.items.triage_notes, run_id)
    return notes[notes["label"].isin(labels)] if labels else notes


def _pair_steps(pairs: Sequence[tuple[str, str]], run_id: str, item_id: str) -> list[dict | None]:
    """The neighbours of (run, item) in a list of (run, item) pairs, which may span runs."""
    pairs = list(dict.fromkeys(pairs))
    return [None if j is None else {"run": pairs[j][0], "item": pairs[j][1]} for j in _around(pairs, (run_id, item_id))]


def _id_steps(ids: Sequence[str], item_id: str) -> list[dict | None]:
    """The neighbours of an item in a list of one run's item ids (an item listed twice, once)."""
    ids = list(dict.fromkeys(ids))
    return [None if j is None else {"item": ids[j]} for j in _around(ids, item_id)]


def _triage_steps(run_id: str, item_id: str) -> list[dict | None]:
    """The Triage page's neighbours: the next noted item, in the notes' order, possibly of another run."""
    notes = triage_notes(st.query_params.get("fr", run_id) or None, csv_list(st.query_params.get("labels", "")))
    return _pair_steps(list(zip(notes["run_id"], notes["item_id"])), run_id, item_id)


def _source_steps(run_id: str, item_id: str) -> list[dict | None]:
    """The Sources page's neighbours: the next item that retrieved the same source, over the same runs."""
    q = st.query_params
    found = reads.read(queries.ledger.source_retrievals, csv_list(q.get("runs", run_id)), q.get("source", ""), band())
    return _pair_steps(list(zip(found["run_id"], found["item_id"])), run_id, item_id)


def _trust_steps(run_id: str, item_id: str, th: Mapping[str, float]) -> list[dict | None]:
    """Trust's neighbours: in its review queue (Label next), else in its disagreements (Agreement)."""
    if st.query_params.get("ft") == "Label next":
        return _id_steps(list(reads.read(labelling.review_queue, run_id, dict(th), band())["item_id"]), item_id)
    report = labelling.judged(reads.read(labelling.labelled, run_id, band()), dict(th))
    return _id_steps([p.item_id for p in report.disagreements], item_id)


def crossed(base: str, other: str, metric: str, threshold: float, direction: str) -> pd.DataFrame:
    """Compare's items that crossed `metric`'s threshold from `base` to `other` in `direction`."""
    return reads.derived(queries.compare.crossed_items, [base, other], metric, threshold, direction)


def flipped(base: str, other: str) -> flips.Flips:
    """Compare's verdicts that flipped from `base` to `other` at the URL's band, over their component metrics."""
    metrics = tuple(m for m in reads.metrics(base, other) if m in registry.component_metrics())
    return reads.read(flips.between, base, other, band(), metrics)


def flip_list(found: flips.Flips) -> pd.DataFrame:
    """Compare's items whose verdicts flipped, in the order its table lists them: the judge's expectation moved
    most first (a flip between two sure verdicts before one across the band's edge), then most flips."""
    return found.items.sort_values(["moved", "flips", "item_id"], ascending=[False, False, True])


def _compare_steps(run_id: str, item_id: str, th: Mapping[str, float]) -> list[dict | None]:
    """Compare's neighbours in the list the item was opened from (`cl`): the items that crossed the
    threshold or whose verdicts flipped (the item is in the newer run), or the items whose retriever
    added or dropped a source (in the run that retrieved it, so the list spans both runs)."""
    q = st.query_params
    base, other, listed = q.get("fr") or run_id, q.get("other", ""), q.get("cl")
    if not {base, other} <= set(reads.runs()["run_id"]):
        return [None, None]
    if listed == "crossed":
        metric = q.get("xm", "")
        found = crossed(base, run_id, metric, th[metric], q.get("xd", "worse")) if metric in th else None
        return [None, None] if found is None else _id_steps(list(found["item_id"]), item_id)
    if listed == "flips":
        return _id_steps(list(flip_list(flipped(base, run_id))["item_id"]), item_id)
    changes = reads.read(queries.compare.retrieval_changes, base, other, band(), corrected())
    where = [base if c == "dropped" else other for c in changes["change"]]
    return _pair_steps(list(zip(where, changes["item_id"])), run_id, item_id)


def carried(tab: str | None) -> dict[str, str]:
    """What a step to another item keeps: the run, thresholds and band, the open tab, and the list it
    walks (from, fr and that list's keys)."""
    q = st.query_params
    params = ui.link(tab=tab)
    params.update({k: q[k] for k in ("from", "fr", *KEYS.get(q.get("from", ""), ())) if k in q})
    return params


def steps(
    run_id: str, item_id: str, metric_ids: Sequence[str], th: Mapping[str, float], tab: str | None
) -> list[Step | None]:
    """◀ Previous and ▶ Next for the Item page: in the list the item was opened from (?from=), else the
    run's items in id order. Each keeps the open tab and the list's keys."""
    origin = st.query_params.get("from")
    if origin in ("run", "diagnosis"):
        found = _run_steps(run_id, item_id, metric_ids, th)
    elif origin == "triage":
        found = _triage_steps(run_id, item_id)
    elif origin == "compare" and st.query_params.get("cl") in ("crossed", "flips", "moved"):
        found = _compare_steps(run_id, item_id, th)
    elif origin == "sources" and st.query_params.get("source"):
        found = _source_steps(run_id, item_id)
    elif origin == "trust":
        found = _trust_steps(run_id, item_id, th)
    else:  # no list: the run's items in id order
        prev_id, next_id = reads.read(queries.items.item_neighbours, run_id, item_id)
        found = [None if i is None else {"item": i} for i in (prev_id, next_id)]
    keep = carried(tab)
    if origin in KEYS:  # a step into another run still names the run the table showed, for the walk and Back
        keep.setdefault("fr", run_id)
    return [None if f is None else Step("item", {**keep, **f}) for f in found]


def back() -> Step:
    """Back to the table the item was opened from, with its filters, sort and page; the Run page's
    table when it came from none."""
    q = st.query_params
    origin = q.get("from")
    if origin not in KEYS:
        return Step("run", ui.link())
    params = ui.link(run=q.get("fr") or q.get("run"))
    params.update({k: q[k] for k in KEYS[origin] if k in q})
    if origin == "triage" and "fr" in q and not q["fr"]:  # the notes of every run
        params.pop("run", None)
    if origin == "trust":
        params["tab"] = params.pop("ft", "Label next")
    if origin == "compare":
        params["item"] = q.get("item", "")  # the claim diff opens on the item just read
    return Step(origin, params)


def returned(url_path: str) -> None:
    """Give a table's page back its own URL when the browser's Back lands on it carrying the item's.

    st.switch_page sets the item's query string on the table's history entry before it pushes the item's
    page, so Back shows the table's path with the item's parameters. The page they came from reads
    them back into the table's filters, sort and page (back()) and opens again in place, as on a first visit
    (a bound widget such as Trust's tabs reads the URL only then)."""
    q = st.query_params
    origin = q.get("from")
    if "item" not in q or origin not in KEYS or ui.PAGES[origin].url_path != url_path:
        return
    step = back()
    if step.page == origin:
        ui.switch_page(origin, step.params)
