"""Reads of items: one item whole (its scores, components, verdicts and judge calls), its neighbours,
its claims' verdicts, its triage notes and imported scores, the items of a search, items' inputs, and what a run holds (before it is
deleted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.core.records import Status, Verdict
from evaluators.metrics.expected import expected_scores
from evaluators.storage import store
from evaluators.storage.queries.sql import json_pointer, scores_sql, unsure_sql


def search_ids(path: str | Path, run_id: str, search: str = "", meta: tuple[str, str] | None = None) -> pd.DataFrame:
    """Ids of the items whose id, query or response contains `search` (any case) and whose metadata
    field meta[0] equals meta[1]."""
    where, params = ["run_id = $run"], {"run": run_id}
    if search:
        # ILIKE on the text as stored (lower-casing every text first costs more). With an ESCAPE clause
        # DuckDB matches through its generic matcher, twice the CPU of a plain '%text%' pattern at a
        # million items, so only a text holding a wildcard is escaped (without ESCAPE a backslash is plain text).
        if "%" in search or "_" in search:
            params["q"] = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            escape = " ESCAPE '\\'"
        else:
            params["q"], escape = f"%{search}%", ""
        where.append(f"(item_id ILIKE $q{escape} OR query ILIKE $q{escape} OR response ILIKE $q{escape})")
    if meta:
        params["mk"], params["mv"] = json_pointer(meta[0]), meta[1]
        where.append("json_extract_string(metadata, $mk) = $mv")
    return store.query(path, f"SELECT item_id FROM items WHERE {' AND '.join(where)}", params)


ITEM_CALLS = 40  # an item with up to this many judge calls gets them with its other rows (4 in a usual item)


def item_detail(
    path: str | Path, run_id: str, item_id: str, band: Band | None = None, corrected: bool = False
) -> dict[str, pd.DataFrame]:
    """Everything stored for one item: item, scores and verdicts at the band, components, the judge
    calls behind its verdicts when there are at most ITEM_CALLS of them (else none: judge_calls() reads
    those of the verdicts a page shows), and each score's expected value (metrics.expected; at any band,
    from the judge's own verdicts, so none when `corrected`). A verdict unsure at the band reads status 'unsure', with its value, p, p_kind
    and the tier that decided it kept."""
    ids = {"run": run_id, "item": item_id}
    with store.reading(path):
        item = store.query(path, "SELECT * FROM items WHERE run_id = $run AND item_id = $item", ids)
        scores = store.query(
            path,
            f"""SELECT item_id, metric, value, n_scored, n_total, status,
                                              coalesce(n_unsure, 0) AS n_unsure
                                       FROM {scores_sql(band, corrected, one_item=True)} WHERE run_id = $run AND item_id = $item""",
            ids,
        )
        comps = store.query(
            path,
            """SELECT kind, idx, text, coalesce(parent, -1) AS parent, call_key
                                     FROM components WHERE run_id = $run AND item_id = $item
                                     ORDER BY kind, idx""",
            ids,
        )
        verdicts = store.query(
            path,
            f"""
            SELECT metric, component_kind, component_idx, target, value,
                   CASE WHEN {unsure_sql(band)} THEN 'unsure' ELSE status END AS status,
                   evidence, call_key, detail, p, p_kind, tier
            FROM verdicts WHERE run_id = $run AND item_id = $item
            ORDER BY metric, component_kind, component_idx, target""",
            ids,
        )
        keys = sorted(verdicts["call_key"].dropna().unique())
        calls = judge_calls(path, keys if len(keys) <= ITEM_CALLS else [])  # on this connection: no second open
    # the judge's own verdicts: read with people's corrections, an item has none
    judged = [] if corrected else verdict_records(verdicts, item_id)
    expected = [s for s in expected_scores(judged).values() if s.value is not None]
    return {
        "item": item,
        "scores": scores,
        "components": comps,
        "verdicts": verdicts,
        "calls": calls,
        "expected": pd.DataFrame(
            [(s.metric, s.value, s.n_scored, s.n_total) for s in expected],
            columns=["metric", "value", "n_scored", "n_total"],
        ),
    }


STATUSES = {s.value: s for s in Status}  # a dict lookup: Status(text) costs microseconds a call


def verdict_records(frame: pd.DataFrame, item_id: str = "") -> list[Verdict]:
    """Stored verdict rows as records: the verdicts table's columns, or item_detail's (which read a
    verdict unsure at the band as 'unsure' and carry no item_id: `item_id` is theirs). Read column by
    column: an item may hold 30,000 verdicts, and a row at a time costs a second."""
    n = len(frame)

    def column(name: str, default: Any = None) -> list[Any]:
        return frame[name].tolist() if name in frame.columns else [default] * n

    def numbers(name: str) -> list[float | None]:  # NULL reads NaN: x != x
        return [None if x != x else x for x in frame[name].astype("float64").tolist()]

    return [
        Verdict(i, m, kind, int(idx), target, value, STATUSES[status], p=p, p_kind=p_kind)
        for i, m, kind, idx, target, value, status, p, p_kind in zip(
            column("item_id", item_id),
            column("metric"),
            column("component_kind"),
            column("component_idx"),
            column("target"),
            numbers("value"),
            column("status"),
            numbers("p"),
            [None if k != k else k for k in column("p_kind")],  # the one text column that may be NULL: NaN
        )
    ]


def judge_calls(path: str | Path, keys: Sequence[str]) -> pd.DataFrame:
    """The stored judge calls with these keys: prompt, reply, status, tokens, cost, latency, error, endpoint."""
    if not keys:
        return pd.DataFrame(columns=["key"])
    marks = ", ".join("?" for _ in keys)  # an IN list of constants lets DuckDB use the primary-key index
    return store.query(
        path,
        f"""SELECT key, model, prompt_name, prompt_hash, messages, params, reply, status,
                                        prompt_tokens, completion_tokens, cost, latency_ms, error, endpoint
                                 FROM judge_calls WHERE key IN ({marks})""",
        list(keys),
    )


def item_neighbours(path: str | Path, run_id: str, item_id: str) -> tuple[str | None, str | None]:
    """The previous and next item ids of a run, in id order."""
    frame = store.query(
        path,
        """
        SELECT (SELECT max(item_id) FROM items WHERE run_id = $run AND item_id < $item) AS prev,
               (SELECT min(item_id) FROM items WHERE run_id = $run AND item_id > $item) AS next""",
        {"run": run_id, "item": item_id},
    )
    prev, nxt = frame.iloc[0]
    return (None if pd.isna(prev) else prev, None if pd.isna(nxt) else nxt)


def claim_verdicts(path: str | Path, run_id: str, item_id: str, band: Band | None = None) -> pd.DataFrame:
    """The response claims of one item with their RP and GR verdicts (value, status; 'unsure' at the
    band) side by side."""
    return store.query(
        path,
        f"""
        WITH v AS (SELECT item_id, metric, component_kind, component_idx, value,
                          CASE WHEN {unsure_sql(band)} THEN 'unsure' ELSE status END AS status
                   FROM verdicts WHERE run_id = $run AND item_id = $item)
        SELECT c.idx, c.text,
               any_value(v.value) FILTER (WHERE v.metric = 'rp') AS rp,
               any_value(v.status) FILTER (WHERE v.metric = 'rp') AS rp_status,
               any_value(v.value) FILTER (WHERE v.metric = 'gr') AS gr,
               any_value(v.status) FILTER (WHERE v.metric = 'gr') AS gr_status
        FROM components c LEFT JOIN v
          ON v.item_id = c.item_id AND v.component_kind = 'claim' AND v.component_idx = c.idx
        WHERE c.run_id = $run AND c.item_id = $item AND c.kind = 'claim'
        GROUP BY c.idx, c.text ORDER BY c.idx""",
        {"run": run_id, "item": item_id},
    )


def triage_notes(path: str | Path, run_id: str | None = None, item_id: str | None = None) -> pd.DataFrame:
    """Triage notes, newest first, optionally for one run or one item."""
    return store.query(
        path,
        """
        SELECT created_at, run_id, item_id, label, component, note, author FROM triage
        WHERE ($run IS NULL OR run_id = $run) AND ($item IS NULL OR item_id = $item)
        ORDER BY created_at DESC""",
        {"run": run_id, "item": item_id},
    )


def imported_item_scores(path: str | Path, run_id: str, item_id: str) -> pd.DataFrame:
    """One item's imported peer scores: origin, metric, value (NULL: the peer tool gave no score)."""
    return store.query(
        path,
        """SELECT origin, metric, value FROM imported_scores
                                WHERE run_id = $run AND item_id = $item ORDER BY origin, metric""",
        {"run": run_id, "item": item_id},
    )


def run_items(path: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """The items stored for these runs, by run and id: run_id, item_id, query, sources, response,
    reference and metadata (JSON text)."""
    return store.query(
        path,
        """SELECT run_id, item_id, query, sources, response, reference, metadata FROM items
                          WHERE list_contains(?, run_id) ORDER BY run_id, item_id""",
        [list(run_ids)],
    )


def item_inputs(path: str | Path, run_ids: Sequence[str], item_ids: Sequence[str]) -> pd.DataFrame:
    """The query, sources and response of these items in these runs: run_id, item_id, query, sources,
    response, reference, metadata (JSON text)."""
    return store.query(
        path,
        """SELECT run_id, item_id, query, sources, response, reference, metadata FROM items
                                WHERE list_contains($runs, run_id) AND item_id IN (SELECT unnest($items))
                                ORDER BY run_id, item_id""",
        {"runs": list(run_ids), "items": list(item_ids)},
    )


def run_contents(path: str | Path, run_id: str) -> dict[str, int] | None:
    """What deleting a run removes, counted: its items, verdicts, labels and triage notes; None when the
    database holds no run of this name."""
    frame = store.query(
        path,
        """
        SELECT (SELECT count(*) FROM items WHERE run_id = $run) AS items,
               (SELECT count(*) FROM verdicts WHERE run_id = $run) AS verdicts,
               (SELECT count(*) FROM labels WHERE run_id = $run) AS labels,
               (SELECT count(*) FROM triage WHERE run_id = $run) AS notes
        FROM runs WHERE run_id = $run""",
        {"run": run_id},
    )
    return None if frame.empty else {str(k): int(v) for k, v in frame.iloc[0].items()}
