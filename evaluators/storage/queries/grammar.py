"""GRAMMAR's reads (migration 2's grammar_correctness table): the runs with correctness, group counts,
item outcomes, retrieval hits and a group's items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from evaluators.storage import store


def grammar_runs(path: str | Path) -> list[str]:
    """Runs with stored GRAMMAR correctness, newest first (none in a file without the table)."""
    if not Path(path).exists():
        return []
    found = store.query(
        path, "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'grammar_correctness'"
    )
    if not found["n"].iloc[0]:
        return []
    frame = store.query(
        path,
        """SELECT run_id, max(created_at) AS latest FROM grammar_correctness
                           GROUP BY run_id ORDER BY latest DESC, run_id""",
    )
    return list(frame["run_id"])


# Items may be clustered by these columns only: they enter SQL as names.
_GRAMMAR_CLUSTERS = ("sql_template", "text_template")


def _grammar_cluster(cluster_by: str) -> str:
    if cluster_by not in _GRAMMAR_CLUSTERS:
        raise ValueError(f"cluster_by must be one of {', '.join(_GRAMMAR_CLUSTERS)}, not {cluster_by!r}")
    return cluster_by


def grammar_group_counts(path: str | Path, run_id: str, cluster_by: str) -> pd.DataFrame:
    """Per (cluster, group) of a run: cluster, group_id, total (judged), n_correct, unscored."""
    col = _grammar_cluster(cluster_by)
    return store.query(
        path,
        f"""
        SELECT {col} AS cluster, group_id,
               count(correct) AS total, count(*) FILTER (WHERE correct) AS n_correct,
               count(*) FILTER (WHERE correct IS NULL) AS unscored
        FROM grammar_correctness WHERE run_id = ? GROUP BY ALL ORDER BY ALL""",
        [run_id],
    )


def grammar_outcomes(
    path: str | Path, run_id: str, cluster_by: str, groups: Sequence[str] | None = None
) -> pd.DataFrame:
    """Item-level correctness of a run (only these groups, when given): item_id, cluster, group_id,
    correct, retrieved_doc_ids, true_doc_ids."""
    col = _grammar_cluster(cluster_by)
    where, params = "run_id = ?", list[Any]([run_id])
    if groups is not None:
        where += " AND group_id IN (SELECT unnest(?::VARCHAR[]))"
        params.append(list(groups))
    return store.query(
        path,
        f"""SELECT item_id, {col} AS cluster, group_id, correct, retrieved_doc_ids, true_doc_ids
                           FROM grammar_correctness WHERE {where} ORDER BY item_id""",
        params,
    )


def grammar_hits(path: str | Path, run_id: str, cluster_by: str) -> pd.DataFrame:
    """Retrieval hits per cluster of a run: cluster, hits, known (items with true document ids)."""
    col = _grammar_cluster(cluster_by)
    return store.query(
        path,
        f"""
        SELECT {col} AS cluster, count(*) FILTER (WHERE retrieval_hit) AS hits, count(retrieval_hit) AS known
        FROM grammar_correctness WHERE run_id = ? GROUP BY ALL""",
        [run_id],
    )


def grammar_group_items(path: str | Path, run_id: str, groups: Sequence[str]) -> pd.DataFrame:
    """The items of some groups of a run with their correctness, query, response and ground truth."""
    return store.query(
        path,
        """
        SELECT g.group_id, g.sql_template, g.text_template, g.item_id, i.query, i.response, i.reference AS truth,
               g.correct, g.status, g.detail, g.retrieved_doc_ids, g.true_doc_ids, g.retrieval_hit
        FROM grammar_correctness g JOIN items i ON i.run_id = g.run_id AND i.item_id = g.item_id
        WHERE g.run_id = ? AND g.group_id IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY g.group_id, g.text_template, g.item_id""",
        [run_id, list(groups)],
    )
