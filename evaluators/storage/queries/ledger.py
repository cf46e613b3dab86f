"""The source ledger's reads (evaluators/metrics/ledger.py defines what they count): the sources grouped in
DuckDB (kept in a Parquet file per database version for the dashboard), the lists at the thresholds over
them, and one source's retrievals.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Sequence

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.metrics import ledger
from evaluators.storage import store
from evaluators.storage.queries.sql import number_sql, unsure_sql


def norm_sql(expr: str) -> str:
    """ledger.normalise() as SQL: whitespace runs (Python's str.split() set) collapsed, ends trimmed.
    Most texts are already normal (single spaces, none at the ends): one match test passes them as they
    are, three times faster than the two replacements."""
    ws = ledger.WHITESPACE_CLASS
    odd = "[" + ws[1:-1].replace("\\x{0020}", "") + "]|  |^ | $"
    return (
        f"CASE WHEN regexp_matches({expr}, '{odd}') THEN "
        f"regexp_replace(regexp_replace({expr}, '^{ws}+|{ws}+$', '', 'g'), '{ws}+', ' ', 'g') ELSE {expr} END"
    )


def name_sql(norm: str) -> str:
    """ledger.source_name() over a normalised text (norm_sql) as SQL: its first words. It reads no more
    than the text's first NAME_LENGTH + 1 characters, so it may be given only those."""
    n, cut = int(ledger.NAME_LENGTH), ledger.NAME_CUT
    return (
        f"CASE WHEN length({norm}) <= {n} THEN {norm} "
        f"WHEN contains(left({norm}, {n + 1}), ' ') THEN regexp_replace(left({norm}, {n + 1}), ' [^ ]*$', '') || '{cut}' "
        f"ELSE left({norm}, {n}) || '{cut}' END"
    )


def key_sql(norm: str) -> str:
    """ledger.source_key() over a normalised text (norm_sql) as SQL."""
    return f"left(sha256({norm}), {ledger.KEY_LENGTH})"


def _quote_sql() -> str:
    """ledger.supporting_quote() over a verdicts row's detail as SQL: NULL when it names no source."""
    found = ", ".join(
        f"nullif(regexp_extract(detail, '{p.replace(chr(39), chr(39) * 2)}', 1), '')" for p in ledger.QUOTE_PATTERNS
    )
    quote = norm_sql(f"regexp_replace(coalesce({found}), '…$', '')")
    return (
        f"CASE WHEN starts_with(detail, '{ledger.SUPPORTED_PREFIX}') THEN nullif(left("
        f"split_part({quote}, '{ledger.SENTENCE_END}', 1), {int(ledger.QUOTE_MATCH)}), '') END"
    )


def _ledger_rows_sql(band: Band | None, keyed: bool) -> str:
    """CTEs ending in `rows`: one row per retrieval (run, item, source position) of the runs in $runs,
    with the source's identity, SP1's state on it, the GR claims it supports and its item's GR counts.
    keyed: only the retrievals of the source $source (its id or its text key), the other sources of
    their items read too so that a claim another source supports is not counted as unattributed."""
    runs = "run_id IN (SELECT unnest($runs::VARCHAR[]))"
    only_items = (
        "WHERE (run_id, item_id) IN (SELECT run_id, item_id FROM hashed WHERE $source IN (source_id, text_key))"
        if keyed
        else ""
    )
    state = (
        f"CASE WHEN status <> 'ok' OR value IS NULL OR value NOT IN (0, 1) THEN 'failed' "
        f"WHEN {unsure_sql(band)} THEN 'unsure' WHEN value = 1 THEN 'yes' ELSE 'no' END"
    )
    return f"""WITH src AS (
            SELECT run_id, item_id, pos - 1 AS idx, text, {norm_sql("text")} AS norm,
                   CASE WHEN json_array_length(metadata, '$.source_ids') = len(sources)
                        THEN json_extract_string(metadata, '$.source_ids[' || (pos - 1) || ']') END AS source_id
            FROM (SELECT run_id, item_id, metadata, sources, unnest(sources) AS text,
                         generate_subscripts(sources, 1) AS pos FROM items WHERE {runs})),
        hashed AS (SELECT *, {key_sql("norm")} AS text_key FROM src),
        keyed AS MATERIALIZED (
            SELECT *, coalesce(source_id, text_key) AS source FROM hashed
            {only_items}),
        judged AS (
            SELECT run_id, item_id, metric, component_kind, component_idx, detail, {state} AS state
            FROM verdicts WHERE {runs} AND metric IN ('sp1', 'gr')
              {"AND (run_id, item_id) IN (SELECT run_id, item_id FROM keyed)" if keyed else ""}),
        sp1 AS (SELECT run_id, item_id, component_idx AS idx, state AS sp1, detail AS sp1_detail
                FROM judged WHERE metric = 'sp1' AND component_kind = 'source'),
        gr AS (SELECT run_id, item_id, component_idx, state,
                      CASE WHEN state = 'yes' THEN {_quote_sql()} END AS quote
               FROM judged WHERE metric = 'gr'),
        matches AS MATERIALIZED (
            SELECT g.run_id, g.item_id, g.component_idx, k.idx
            FROM (SELECT * FROM gr WHERE quote IS NOT NULL) g JOIN keyed k USING (run_id, item_id)
            WHERE contains(k.norm, g.quote)),
        supports AS (SELECT run_id, item_id, idx, count(*) AS supports, list(component_idx ORDER BY component_idx) AS claims
                     FROM matches GROUP BY ALL),
        gr_item AS (SELECT g.run_id, g.item_id, count(*) FILTER (WHERE g.state = 'no') AS n_unsupported,
                           count(*) FILTER (WHERE g.state IN ('yes', 'no')) AS n_decided,
                           count(*) FILTER (WHERE g.state = 'yes' AND m.component_idx IS NULL) AS n_unattributed
                    FROM gr g LEFT JOIN (SELECT DISTINCT run_id, item_id, component_idx FROM matches) m
                         USING (run_id, item_id, component_idx) GROUP BY ALL),
        rows AS (SELECT k.run_id, k.item_id, k.idx, k.source, k.source_id, k.text_key, k.text, k.norm, s.sp1, s.sp1_detail,
                        coalesce(m.supports, 0) AS supports, m.claims, g.n_unsupported, g.n_decided, g.n_unattributed
                 FROM keyed k LEFT JOIN sp1 s USING (run_id, item_id, idx) LEFT JOIN supports m USING (run_id, item_id, idx)
                      LEFT JOIN gr_item g USING (run_id, item_id)
                 {"WHERE $source IN (k.source_id, k.text_key)" if keyed else ""})"""


_LEDGER_COLUMNS = """
        count(*) AS n_retrieved, count(DISTINCT run_id) AS n_runs,
        count(*) FILTER (WHERE sp1 = 'yes') AS sp1_essential, count(*) FILTER (WHERE sp1 = 'no') AS sp1_not,
        count(*) FILTER (WHERE sp1 = 'unsure') AS sp1_unsure, count(*) FILTER (WHERE sp1 = 'failed') AS sp1_failed,
        count(*) FILTER (WHERE sp1 IS NULL) AS sp1_missing,
        sum(supports)::BIGINT AS claims_supported, coalesce(sum(n_unattributed), 0)::BIGINT AS claims_source_unknown,
        count(*) FILTER (WHERE n_unsupported > 0) AS beside_unsupported,
        count(*) FILTER (WHERE n_decided > 0) AS gr_decided"""


def _ledger_flags(th: ledger.Thresholds) -> str:
    """ledger.is_dead_weight and ledger.is_stale over a ledger row as SQL (tests hold them equal)."""
    least = int(th.min_retrieved)
    return (
        f"n_retrieved >= {least} AND sp1_essential + sp1_not > 0 AND "
        f"sp1_essential / (sp1_essential + sp1_not) <= {number_sql(th.dead_max_essential)} AS dead_weight, "
        f"n_retrieved >= {least} AND gr_decided > 0 AND "
        f"beside_unsupported / gr_decided >= {number_sql(th.stale_min_unsupported)} AS stale"
    )


def _grouped_sql(band: Band | None) -> str:
    """One row per source over the runs in $runs with its counts (_LEDGER_COLUMNS), before any threshold,
    and its place in the order of their keys (source_order): the lists break ties on it, an integer."""
    return f"""{_ledger_rows_sql(band, keyed=False)}
        SELECT source, left(any_value(norm), {ledger.NAME_LENGTH + 1}) AS head, any_value(source_id) AS source_id,
               any_value(text_key) AS text_key, left(any_value(text), 300) AS text, {_LEDGER_COLUMNS},
               row_number() OVER (ORDER BY source) AS source_order
        FROM rows GROUP BY source"""


def _ledger_cte(grouped: str, th: ledger.Thresholds, name: str = "ledger") -> str:
    """`name` (`ledger`): each source of the relation `grouped` (_grouped_sql's rows) with its shares and list
    flags, computed where each list reads it (a million sources' rows are not copied once more for six reads)."""
    return f"""{name} AS NOT MATERIALIZED (
            SELECT *, sp1_essential / nullif(sp1_essential + sp1_not, 0) AS essential_share,
                   beside_unsupported / nullif(gr_decided, 0) AS unsupported_share, {_ledger_flags(th)}
            FROM {grouped})"""


# A grouped ledger file left by an older version of its database, or a part of one a killed server left,
# is removed once it is this old: a read that named it a moment before the database changed still finds it.
STALE_FILE_S = 60.0


def grouped_file(path: str | Path, run_ids: Sequence[str], band: Band | None, cache: Path) -> Path:
    """These runs' grouped ledger at this band (_grouped_sql) as a Parquet file in the folder `cache`,
    written once per database version (store.version), so a list threshold moved on the Sources page
    reads that file, not every retrieval again. Older versions' files of the same database are removed,
    and parts of files that a killed server left.
    Raises OSError when the folder cannot be written, or when it is not this user's alone: the files hold
    the sources' first words, and a file another user put there could say anything."""
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = cache.stat()
    if folder.st_uid != os.getuid() or folder.st_mode & 0o077:
        raise OSError(f"{cache}: not a folder only this user can open")
    sql = _grouped_sql(band)
    place = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    what = hashlib.sha256(json.dumps([sorted(run_ids), repr(band), sql]).encode()).hexdigest()[:24]
    version = store.version(path)
    file = cache / f"ledger-{place}-{version}-{what}.parquet"
    if file.exists():
        return file
    store.write_parquet(path, sql, {"runs": sorted(run_ids)}, file)
    # An older version's file goes, and so does a part a killed server left (a write in progress is younger).
    for old in cache.glob(f"ledger-{place}-*"):
        try:
            dead = f"-{version}-" not in old.name or old.name.endswith(".part")
            if dead and old.stat().st_mtime < time.time() - STALE_FILE_S:
                old.unlink()
        except OSError:  # another server removed it first
            pass
    return file


def source_ledger(
    path: str | Path,
    run_ids: Sequence[str],
    th: ledger.Thresholds = ledger.DEFAULT_THRESHOLDS,
    band: Band | None = None,
    limit: int | None = 100,
    cache: Path | None = None,
) -> pd.DataFrame:
    """The source ledger of these runs, grouped in DuckDB.

    With a limit: at most `limit` rows of each list, in a column `list`: 'retrieved' (most retrieved
    first), 'dead weight' (most retrieved, then least essential first) and 'stale' (most often beside
    unsupported claims first), with the whole ledger's counts n_sources, n_dead and n_stale on every row,
    each source's name and counts (not its ids or text). Without: every source with all its columns, most
    retrieved first (the export).
    With a `cache` folder, the grouping is read from its file there (grouped_file), written on first use;
    when the folder cannot be written, it is grouped again as without one.
    """
    try:
        file = None if cache is None else grouped_file(path, run_ids, band, cache)
    except OSError:
        file = None
    if file is None:
        start, grouped, params = (
            f"WITH grouped AS MATERIALIZED ({_grouped_sql(band)}),",
            "grouped",
            {"runs": list(run_ids)},
        )
    else:  # the file is read on its own, so a writer holding the database does not stop it
        start, grouped, params = "WITH", f"read_parquet({store.literal(str(file))})", {}

    def read(sql: str) -> pd.DataFrame:
        return store.query(path, sql, params) if file is None else store.frame_query(sql, {})

    if limit is None:
        return read(
            f"""{start} {_ledger_cte(grouped, th)}
            SELECT * EXCLUDE (head, source_order), {name_sql("head")} AS name FROM ledger
            ORDER BY n_retrieved DESC, source"""
        )
    return read(f"{start} {_lists_sql(grouped, th, int(limit))}")


def _lists_sql(grouped: str, th: ledger.Thresholds, n: int) -> str:
    """After a WITH: source_ledger's three lists of at most n sources each over the relation `grouped`, with
    the whole ledger's counts on every row. Each list is ranked on counts alone, its ties broken by
    source_order: at a million sources, sorting their keys and carrying their names through three rankings
    and three counts was most of a threshold move. Only the sources listed are then read whole (their ids
    and text stay unread)."""
    counts = (
        f"(SELECT source_order, n_retrieved, sp1_essential, sp1_not, beside_unsupported, gr_decided FROM {grouped})"
    )
    named = f"(SELECT * EXCLUDE (source_id, text_key, text) FROM {grouped})"
    return f"""{_ledger_cte(counts, th)},
        lists AS (
            (SELECT 1 AS list_no, -n_retrieved AS k1, 0.0 AS k2, source_order FROM ledger ORDER BY ALL LIMIT {n})
            UNION ALL
            (SELECT 2, -n_retrieved, essential_share, source_order FROM ledger WHERE dead_weight ORDER BY ALL LIMIT {n})
            UNION ALL
            (SELECT 3, -beside_unsupported, -unsupported_share, source_order FROM ledger WHERE stale
             ORDER BY ALL LIMIT {n})),
        totals AS (SELECT count(*) AS n_sources, count(*) FILTER (WHERE dead_weight) AS n_dead,
                          count(*) FILTER (WHERE stale) AS n_stale FROM ledger),
        {_ledger_cte(named, th, "listed")}
        SELECT ['retrieved', 'dead weight', 'stale'][list_no] AS list, listed.* EXCLUDE (head, source_order),
               {name_sql("head")} AS name, totals.*
        FROM lists JOIN listed USING (source_order), totals
        ORDER BY list_no, k1, k2, source_order"""


def source_retrievals(
    path: str | Path, run_ids: Sequence[str], source: str, band: Band | None = None, limit: int = 500
) -> pd.DataFrame:
    """Where one source (its id or its text key) was retrieved in these runs: run_id, item_id, idx
    (its position), the item's query, SP1's state and detail on it, the GR claims it supports (claim
    indexes and texts), and its item's GR counts; with n_match, the number of retrievals, on every row."""
    return store.query(
        path,
        f"""{_ledger_rows_sql(band, keyed=True)}
        SELECT r.run_id, r.item_id, r.idx, r.source, {name_sql("r.norm")} AS name, r.source_id, r.text_key, r.text, i.query, r.sp1, r.sp1_detail,
               r.supports, (SELECT list(c.text ORDER BY c.idx) FROM components c
                            WHERE c.run_id = r.run_id AND c.item_id = r.item_id AND c.kind = 'claim'
                              AND list_contains(r.claims, c.idx)) AS claims,
               r.n_unsupported, r.n_decided, r.n_unattributed, count(*) OVER () AS n_match
        FROM rows r JOIN items i USING (run_id, item_id)
        ORDER BY r.run_id, r.item_id, r.idx LIMIT {int(limit)}""",
        {"runs": list(run_ids), "source": source},
    )
