"""Table 2 in SQL over run tables, generated from evaluators/metrics/diagnosis.py's rules: one page of a
run's items filtered by rules, levels and failures, the rules' counts, quadrant samples and correlations.

A run table (sql.RunTable) is the run's stored table in the file (store.StoredRun, the default band: a
million items stay in DuckDB and only the answer comes back) or one recomputed at another band (a
DataFrame, in memory), answered by store.frame_query().
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.core.records import CLAIM, Score, Status
from evaluators.metrics.diagnosis import CONDITIONS, LEVELS, READINGS, RULES, SHARED_CLAIMS
from evaluators.metrics.registry import THELMA
from evaluators.storage import store
from evaluators.storage.queries.runs import stored_table
from evaluators.storage.queries.sql import SQL_OPERATORS, RunTable, decided_sql, threshold_sql, unsure_sql
from evaluators.storage.wide import column, count_column, ev_column


def wide_score(row: Mapping[Any, Any], metric: str) -> Score | None:
    """One metric of a run table row as a Score with its counts (None when the item has no score row),
    for diagnosis.diagnose() and fired() in Python. The row does not carry failed verdicts, so n_total
    counts the verdicts the judge answered (scored and unsure)."""
    scored: Any = row.get(f"{metric}:scored")
    unsure: Any = row.get(f"{metric}:unsure")
    if scored is None or scored != scored:
        return None
    value = row.get(metric)
    value = None if value is None or value != value else float(value)
    return Score(
        str(row["item_id"]),
        metric,
        value,
        int(scored),
        int(scored) + int(unsure),
        Status.OK if value is not None else Status.UNSURE if unsure else Status.EMPTY,
        int(unsure),
    )


def _level_sql(metric: str, want: str, thresholds: Mapping[str, float]) -> str:
    """diagnosis.level(metric) == want as SQL over run table columns: NULL when unscored or not decided.

    Written from diagnosis.READINGS, LEVELS and decided() alone, so the rules have one definition.
    """
    reads = READINGS.get(metric, (metric,))
    op = SQL_OPERATORS[LEVELS[want]]

    def compare(m: str) -> str:
        return f"(CASE WHEN {decided_sql(m)} THEN {column(m)} {op} {threshold_sql(thresholds, m)} END)"

    if len(reads) == 1:
        return compare(metric)
    cases = " ".join(f"WHEN {column(m)} IS NOT NULL THEN {compare(m)}" for m in reads[:-1])
    return f"(CASE {cases} ELSE {compare(reads[-1])} END)"


def rule_sql(rule_id: str, thresholds: Mapping[str, float]) -> str:
    """A boolean SQL expression over run table columns: does this Table-2 rule fire?"""
    conds = " AND ".join(_level_sql(m, want, thresholds) for m, want in CONDITIONS[rule_id])
    return f"coalesce({conds}, FALSE)"


# The levels Table 2's rules read, (metric or reading, "low" | "high"): each computed once per item.
_RULE_LEVELS = sorted({cond for conds in CONDITIONS.values() for cond in conds})


def _level_column(metric: str, want: str) -> str:
    return f'"level:{metric}:{want}"'


def _rules_cte(thresholds: Mapping[str, float]) -> str:
    """`base`: the run table `wide` plus one flag per Table-2 rule and the list of rules fired (by their
    shown names: 'X1 (ours)'), and the levels the rules read (_RULE_LEVELS, as _level_column()): each
    level is computed once however many rules read it (spelling out rule_sql() for every rule costs a
    quarter more at a million items)."""
    levels = ", ".join(f"{_level_sql(m, want, thresholds)} AS {_level_column(m, want)}" for m, want in _RULE_LEVELS)
    flags = ", ".join(
        f'coalesce({" AND ".join(_level_column(m, want) for m, want in conds)}, FALSE) AS "{r}"'
        for r, conds in CONDITIONS.items()
    )
    fired = ", ".join(f"CASE WHEN \"{r}\" THEN '{RULES[r].name}' END" for r in CONDITIONS)
    return (
        f"WITH levels AS (SELECT *, {levels} FROM wide), flagged AS (SELECT *, {flags} FROM levels), "
        f"base AS (SELECT *, concat_ws(', ', {fired}) AS rules FROM flagged)"
    )


WORST = "worst"  # the Run table's default order: each item's lowest expected value first


def sort_sql(sort: str, metrics: Sequence[str]) -> str:
    """The Run table's ORDER BY key: a metric sorts by its expected value where the item has one, else by
    its score ("m:ev", then "m": items a judge is surer are bad come first among equal scores); WORST by
    the item's lowest of those over `metrics`; "item_id" and "n_failed" as they are."""
    if sort in ("item_id", "n_failed"):
        return sort
    if sort == WORST:
        return (
            f"least({', '.join(f'coalesce({ev_column(m)}, {column(m)})' for m in metrics)})" if metrics else "item_id"
        )
    return f"coalesce({ev_column(sort)}, {column(sort)})"


def filter_items(
    table: RunTable,
    metrics: Sequence[str],
    thresholds: Mapping[str, float],
    *,
    below: Sequence[str] = (),
    rules: Sequence[str] = (),
    levels: Mapping[str, str] | None = None,
    failed_only: bool = False,
    ids: pd.DataFrame | None = None,
    sort: str = "item_id",
    descending: bool = False,
    limit: int = 200,
    offset: int = 0,
) -> tuple[pd.DataFrame, int]:
    """One page of a run table, filtered and sorted, and the number of matching items.

    below: below threshold on ANY of these metrics; rules: firing ANY of these rules; levels:
    {metric: 'low'|'high'} that must ALL hold (a quadrant); failed_only: items with a failed verdict
    or an unscored metric; ids: only these item ids (a search_ids() result). Each metric's "settled:<metric>"
    says whether its score rests on enough confident verdicts for Table 2 to read it (decided_sql()).
    """
    frames = {"wide": table}
    where = ["TRUE"]
    if below:
        where.append("(" + " OR ".join(_level_sql(m, "low", thresholds) for m in below) + ")")
    known = [r for r in rules if r in CONDITIONS]
    if known:
        where.append("(" + " OR ".join(f'"{r}"' for r in known) + ")")
    for m, want in (levels or {}).items():
        where.append(f"coalesce({_level_sql(m, 'low' if want == 'low' else 'high', thresholds)}, FALSE)")
    if failed_only:
        where.append("(n_failed > 0 OR failed_metrics <> '')")
    if ids is not None:
        frames["ids"] = ids
        where.append("item_id IN (SELECT item_id FROM ids)")
    order = sort_sql(sort, metrics)
    # The count, the page's ids (a top-N that computes no rule flags unless a rule filter needs them),
    # then the rules fired by the page's rows alone: a million items cost a scan, not a million flags.
    match = f"{_rules_cte(thresholds)} SELECT * FROM base WHERE {' AND '.join(where)}"
    ordered = f"ORDER BY {order} {'DESC' if descending else 'ASC'} NULLS LAST, item_id"
    count = store.frame_query(f"SELECT count(*) AS n FROM ({match})", frames)
    page = store.frame_query(f"SELECT item_id FROM ({match}) {ordered} LIMIT {int(limit)} OFFSET {int(offset)}", frames)
    frame = store.frame_query(
        f"""{_rules_cte(thresholds)}
        SELECT item_id, query, {"".join(f"{column(m)}, " for m in metrics)} n_failed, failed_metrics, rules,
               {", ".join(f'coalesce({decided_sql(m)}, FALSE) AS "settled:{m}"' for m in metrics) or "NULL AS _"}
        FROM base WHERE item_id IN (SELECT item_id FROM page) {ordered}""",
        {"wide": table, "page": page},
    )
    return frame, int(count["n"].iloc[0])


def profile(table: RunTable) -> pd.DataFrame:
    """A run table folded to what the rules and the quadrants read of it: one row per distinct combination
    of THELMA's scores and their scored and unsure counts, with its items `n` and the first of them
    in id order (`item_id`). No threshold is read here, so one profile serves every threshold: at a million
    items per run it is some thousands of rows (24,042 in the scale benchmark's run), and a threshold
    change reads those instead of the run."""
    cols = ", ".join(f"{column(m)}, {count_column(m, 'scored')}, {count_column(m, 'unsure')}" for m in THELMA)
    return store.frame_query(
        f"SELECT {cols}, count(*) AS n, min(item_id) AS item_id FROM wide GROUP BY ALL", {"wide": table}
    )


def rule_counts(
    folded: pd.DataFrame, thresholds: Mapping[str, float], pairs: Sequence[tuple[str, str]] = ()
) -> pd.DataFrame:
    """Items per combination of fired Table-2 rules (one bool column per rule), n, and the first item
    id of the combination (in id order: first_items() reads it, so one pass serves both), from a run
    table's profile().

    For each metric pair (x, y) in `pairs` it adds columns "x_low:x|y" and "y_low:x|y": True/False for
    low/high, NULL when unscored, so quadrant counts come from the same pass.
    """
    flags = [f'"{r}"' for r in CONDITIONS]

    def low(m: str) -> str:  # a level the rules read already is a column of `base`
        return _level_column(m, "low") if (m, "low") in _RULE_LEVELS else _level_sql(m, "low", thresholds)

    for x, y in pairs:
        flags.append(f'{low(x)} AS "x_low:{x}|{y}"')
        flags.append(f'{low(y)} AS "y_low:{x}|{y}"')
    return store.frame_query(
        f"""{_rules_cte(thresholds)}
        SELECT {", ".join(flags)}, sum(n)::BIGINT AS n, min(item_id) AS first FROM base GROUP BY ALL ORDER BY n DESC""",
        {"wide": folded},
    )


def headline(path: str | Path, run_ids: Sequence[str], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Per run (the home page's row of it), from its stored per-item table at the default band in one
    pass: n_items, and per metric its mean over the scored items ("mean:m", None when none), items
    scored ("scored:m"), items left unscored as unsure ("unsure:m"), and the mean of its expected values
    ("ev:m", over the "ev_n:m" items that have one: unsure ones too)."""
    cols = "".join(
        f', avg({column(m)}) AS "mean:{m}", count({column(m)}) AS "scored:{m}", '
        f"count(*) FILTER (WHERE list_contains(string_split(failed_metrics, ', '), '{column(m)[1:-1]}:unsure')) "
        f'AS "unsure:{m}", avg({ev_column(m)}) AS "ev:{m}", count({ev_column(m)}) AS "ev_n:{m}"'
        for m in metrics
    )
    return _per_run(path, run_ids, metrics, f"SELECT count(*) AS n_items{cols} FROM wide")


def rule_tops(path: str | Path, run_ids: Sequence[str], thresholds: Mapping[str, float]) -> list[dict[str, Any]]:
    """Per run, from its stored per-item table at the default band in one pass: per Table-2 rule the
    items it fires on ("rule:T2.1", ...), those where no other rule fires ("alone:T2.1": only it explains
    them) and the first of them in id order ("first:T2.1", where its evidence shows; None when it fires
    on none)."""

    def alone(r: str) -> str:
        return " AND ".join([f'"{r}"', *(f'NOT "{o}"' for o in CONDITIONS if o != r)])

    rules = ", ".join(
        f'count(*) FILTER (WHERE "{r}") AS "rule:{r}", min(item_id) FILTER (WHERE "{r}") AS "first:{r}", '
        f'count(*) FILTER (WHERE {alone(r)}) AS "alone:{r}"'
        for r in CONDITIONS
    )
    return _per_run(path, run_ids, THELMA, f"{_rules_cte(thresholds)} SELECT {rules} FROM base")


def _per_run(path: str | Path, run_ids: Sequence[str], metrics: Sequence[str], sql: str) -> list[dict[str, Any]]:
    """The one row `sql` answers over each run's stored table (as `wide`, with these metrics' columns)."""
    with store.reading(path):
        return [
            {str(k): v for k, v in store.frame_query(sql, {"wide": stored_table(path, r, metrics)}).iloc[0].items()}
            for r in run_ids
        ]


def top_rule(row: Mapping[str, Any]) -> tuple[str, int, int] | None:
    """The rule of a rule_tops() row with the most items that no other rule explains, then the most items
    (the first in Table 2's order on a tie): (rule, items it fires on, of them those only it explains), or
    None when no rule fires."""
    counts = {r: (int(row[f"alone:{r}"]), int(row[f"rule:{r}"])) for r in CONDITIONS}
    best = max(counts, key=lambda r: counts[r])
    return (best, counts[best][1], counts[best][0]) if counts[best][1] else None


def shared_claims(
    table: RunTable, path: str | Path, run_id: str, thresholds: Mapping[str, float], band: Band | None
) -> pd.DataFrame:
    """Per item of run table `table` (run `run_id` of `path`) that both rules of diagnosis.SHARED_CLAIMS fire on
    (X1 and T2.5): of its claims RP decides are not essential (0), how many GR decides are unsupported (0) and
    supported (1), unsure verdicts (at `band`) left out. Columns: item_id, unsupported, supported."""
    both = " AND ".join(f'"{r}"' for r in SHARED_CLAIMS)
    ids = store.frame_query(f"{_rules_cte(thresholds)} SELECT item_id FROM base WHERE {both}", {"wide": table})
    decided = f"status = 'ok' AND NOT {unsure_sql(band)}"
    return store.query(
        path,
        f"""WITH ids AS (SELECT unnest($ids) AS item_id),
            rp AS (SELECT item_id, component_idx FROM verdicts WHERE run_id = $run AND metric = 'rp' AND value = 0
                   AND {decided} AND item_id IN (SELECT item_id FROM ids)),
            gr AS (SELECT item_id, component_idx, value FROM verdicts WHERE run_id = $run AND metric = 'gr'
                   AND component_kind = '{CLAIM}' AND {decided} AND item_id IN (SELECT item_id FROM ids))
            SELECT i.item_id, count(*) FILTER (WHERE gr.value = 0) AS unsupported,
                   count(*) FILTER (WHERE gr.value = 1) AS supported
            FROM ids i LEFT JOIN rp USING (item_id) LEFT JOIN gr USING (item_id, component_idx)
            GROUP BY i.item_id ORDER BY i.item_id""",
        {"ids": list(ids["item_id"]), "run": run_id},
    )


def first_items(combos: pd.DataFrame) -> dict[str, str | None]:
    """Per Table-2 rule, the first item id (in id order) that fires it, or None: where its evidence
    shows; from rule_counts()'s combinations, without another pass over the run."""
    return {r: (None if not combos[r].any() else str(combos.loc[combos[r], "first"].min())) for r in CONDITIONS}


def sample_points(table: RunTable, metrics: Sequence[str], limit: int = 2000) -> pd.DataFrame:
    """At most `limit` items with their scores: a stable pseudo-random sample for scatter plots."""
    cols = ", ".join(column(m) for m in metrics)
    return store.frame_query(
        f"SELECT item_id, {cols} FROM wide ORDER BY hash(item_id) LIMIT {int(limit)}", {"wide": table}
    )


def correlations(table: RunTable, metrics: Sequence[str]) -> pd.DataFrame:
    """Pearson correlation of every metric pair over the items that have both: columns a, b, r, n."""
    pairs = [(a, b) for i, a in enumerate(metrics) for b in metrics[i + 1 :]]
    if not pairs:
        return pd.DataFrame(columns=["a", "b", "r", "n"])
    cols = ", ".join(
        f'corr({column(a)}, {column(b)}) AS "r{i}", count({column(a)} + {column(b)}) AS "n{i}"'
        for i, (a, b) in enumerate(pairs)
    )
    row = store.frame_query(f"SELECT {cols} FROM wide", {"wide": table}).iloc[0]
    return pd.DataFrame([{"a": a, "b": b, "r": row[f"r{i}"], "n": int(row[f"n{i}"])} for i, (a, b) in enumerate(pairs)])
