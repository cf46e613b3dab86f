"""The owner's labels of one run, put to work: the trust report, threshold suggestions, a review queue;
and a labelling team's file read into labels.

Reads through evaluators/storage/queries/ and computes with evaluators/metrics/trust.py; the CLI's `trust` command
and the Trust page both call these, so they always agree. Nothing here calls a judge.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from evaluators.core.confidence import Band
from evaluators.core.records import Label, Score
from evaluators.metrics import diagnosis, trust
from evaluators.metrics.registry import THELMA
from evaluators.runs.readers import file_rows, is_missing, raise_problems, type_name
from evaluators.storage import queries, store

RULE_IDS = tuple(diagnosis.RULES)
QUEUE_REASONS = ("unsure verdicts", "rule on thin evidence", "random")
THIN = 2  # a metric decided from this many scored verdicts or fewer is thin evidence for a rule


@dataclass(frozen=True)
class Report:
    """A run's trust figures: a row per THELMA metric then per rule (over the calls the judge was sure of),
    the disagreements, suggestions, and how people labelled the verdicts the judge was unsure of."""

    rows: list[trust.Trust]
    disagreements: list[trust.Pair]
    suggestions: list[trust.Suggestion]
    unsure: list[trust.Unsure]


def _table(path: str | Path, run_id: str, band: Band | None) -> queries.sql.RunTable:
    """The run table at the band: the stored one at the default band, queried where it lies (a million
    items stay in the file), else recomputed from the verdicts."""
    if band is None:
        return queries.runs.stored_table(path, run_id, THELMA)
    return queries.runs.run_table(path, run_id, list(THELMA), queries.sql.scores_sql(band))


def _scores(rows: pd.DataFrame) -> dict[str, dict[str, Score | None]]:
    """Each row's THELMA scores with their counts: what the quiet diagnosis reads."""
    return {r["item_id"]: {m: queries.diagnosis.wide_score(r, m) for m in THELMA} for r in rows.to_dict("records")}


def _value(score: Score | None) -> float | None:
    return None if score is None else score.value


def _read(scores: dict[str, dict[str, Score | None]]) -> dict[str, dict[str, tuple[str, float] | None]]:
    """What the rules read of each item's scores (diagnosis.readings), whatever the thresholds."""
    return {item: diagnosis.readings(s) for item, s in scores.items()}


def _reads(rule: str, metric: str) -> bool:
    """Whether a rule's conditions read this metric (directly or through a reading such as "sp")."""
    return any(metric in diagnosis.READINGS.get(m, (m,)) for m, _ in diagnosis.CONDITIONS[rule])


@dataclass(frozen=True)
class Labelled:
    """A run's labels and what the trust report reads beside them that no threshold changes, so a
    threshold change only diagnoses again (the dashboard caches this per run and band)."""

    rule_labels: tuple[tuple[str, str, int], ...]  # (item, rule, label): the latest per item and rule
    triage: dict[str, int]  # the latest confirmed (1) / false alarm (0) triage note per item
    corrections: tuple[trust.Pair, ...]  # verdict corrections beside the judge's sure verdict
    on_unsure: tuple[tuple[str, int], ...]  # (metric, label): corrections of verdicts the judge was unsure of
    scores: dict[str, dict[str, Score | None]]  # the THELMA scores of the run's rule-labelled items
    readings: dict[str, dict[str, tuple[str, float] | None]]  # what the rules read of them (diagnosis.readings)
    midpoints: dict[str, list[float]]  # threshold candidates of the metrics that can have enough labels


def labelled(path: str | Path, run_id: str, band: Band | None = None) -> Labelled:
    """Read a run's labels, the labelled items' scores at the band, and the threshold candidates of each
    metric that some thresholds could give enough rule labels (a triage note labels every rule that
    fires): the midpoints of its distinct scores over the whole run, in one query."""
    with store.reading(path):
        saved = queries.trust.rule_labels(path, run_id)
        triage = queries.trust.triage_verdicts(path, run_id)
        every = queries.trust.verdict_corrections(path, run_id, band)
        corrections, on_unsure = every.dropna(subset=["judge"]), every[every["unsure"].astype(bool)]
        rule_labels = tuple(saved[["item_id", "rule", "label"]].itertuples(index=False, name=None))
        table = _table(path, run_id, band)
        scores = _scores(queries.trust.run_rows(table, sorted({l[0] for l in rule_labels} | set(triage["item_id"]))))
        noted = sum(item in scores for item in triage["item_id"])
        possible = [
            m
            for m in THELMA
            if sum(item in scores and _reads(rule, m) for item, rule, _ in rule_labels)
            + noted * sum(_reads(rule, m) for rule in RULE_IDS)
            >= trust.MIN_LABELS_TO_SUGGEST
        ]
        midpoints = queries.trust.score_midpoints(table, possible)
    return Labelled(
        rule_labels,
        dict(zip(triage["item_id"], triage["label"])),
        tuple(
            trust.Pair(r.metric, r.item_id, int(r.judge), int(r.label), int(r.component_idx))
            for r in queries.sql.rows(corrections)
        ),
        tuple(zip(on_unsure["metric"], on_unsure["label"].astype(int).tolist())),
        scores,
        _read(scores),
        {m: midpoints["midpoint"][midpoints["metric"] == m].tolist() for m in possible},
    )


def judged(labels: Labelled, thresholds: Mapping[str, float]) -> Report:
    """Every label against the judge at these thresholds (labelled() read them at the band).

    A correction of a verdict the judge was unsure of at the band is neither agreement nor
    disagreement (the judge made no call): it is counted apart, in the report's `unsure`.

    A rule's call of interest is "fired" (its precision: how often a fired rule was right); a metric's
    is the "low" verdict, 0 (how often a verdict of "not supported / not covered" was right). Rules
    are diagnosed on the labelled items alone: the cost follows the labels, not the run's size.
    """
    th = {**diagnosis.DEFAULT_THRESHOLDS, **thresholds}
    scores, read = labels.scores, labels.readings
    fired = {item: set(diagnosis.rules_firing(r, th)) for item, r in read.items()}
    pairs = trust.rule_pairs(labels.rule_labels, labels.triage, fired, RULE_IDS)
    labelled_rules = [(p.item_id, p.target, p.human) for p in pairs if p.target in diagnosis.RULES]
    pairs += labels.corrections
    rows = trust.report(pairs, [*THELMA, *RULE_IDS], {m: 0 for m in THELMA})
    suggestions = [
        trust.suggest_threshold(
            m,
            {item: _value(s.get(m)) for item, s in scores.items()},
            [l for l in labelled_rules if _reads(l[1], m)],
            th,
            lambda item, at: set(diagnosis.rules_firing(read[item], at)),
            labels.midpoints.get(m, []),
        )
        for m in THELMA
    ]
    return Report(rows, trust.disagreements(pairs), suggestions, trust.unsure_tally(labels.on_unsure, list(THELMA)))


def report(path: str | Path, run_id: str, thresholds: Mapping[str, float], band: Band | None = None) -> Report:
    """Every label on the run against the judge at these thresholds and uncertainty band (judged())."""
    return judged(labelled(path, run_id, band), thresholds)


def review_queue(
    path: str | Path,
    run_id: str,
    thresholds: Mapping[str, float],
    band: Band | None = None,
    limit: int = 50,
    seed: int = 0,
) -> pd.DataFrame:
    """Items in the order where one label teaches the most, leaving out items already labelled:

    1. items with unsure verdicts (p inside the band, or each judge kind's default), most unsure first;
    2. items where a rule fired on thin evidence (a metric it needs decided from THIN verdicts or fewer);
    3. the rest at random (seeded by the run), so labels also give an unbiased agreement estimate.
    Columns: item_id, reason, detail. Each step asks for no more items than the queue has room for,
    and runs only when the steps before it could not fill it.
    """
    th = {**diagnosis.DEFAULT_THRESHOLDS, **thresholds}
    with store.reading(path):
        done = set(queries.trust.labelled_items(path, run_id))
        unsure = queries.trust.unsure_counts(path, run_id, band, skip=sorted(done), limit=limit)
        queue = [
            (row.item_id, QUEUE_REASONS[0], f"{row.n_unsure} unsure verdict(s)") for row in queries.sql.rows(unsure)
        ]
        # Short of the limit, every unsure item is in the queue already: the rest are known to skip.
        table = _table(path, run_id, band) if len(queue) < limit else None
        if table is not None:
            rows = queries.trust.thin_items(table, th, THIN, sorted(done | {q[0] for q in queue}), limit - len(queue))
            for item, scores in _scores(rows).items():
                thin = [
                    f"{rule.id} ({metric.upper()} from {score.n_scored} verdicts)"
                    for rule in diagnosis.diagnose(scores, th)
                    for metric in THELMA
                    if _reads(rule.id, metric)
                    and (score := scores.get(metric)) is not None
                    and score.value is not None
                    and score.n_scored <= THIN
                ]
                queue.append((item, QUEUE_REASONS[1], "; ".join(thin)))
        if table is not None and len(queue) < limit:
            seen = sorted(done | {q[0] for q in queue})
            # The seeded shuffle of the remaining items in id order, drawn over their ranks.
            ranks = list(range(queries.trust.count_items(table, seen)))
            random.Random(f"{run_id}:{seed}").shuffle(ranks)
            picks = ranks[: limit - len(queue)]
            ids = queries.trust.items_at(table, seen, picks)
            queue += [(ids[r], QUEUE_REASONS[2], "") for r in picks]
    return pd.DataFrame(queue[:limit], columns=["item_id", "reason", "detail"])


# ---------------------------------------------------------------- a labelling team's file


def load_labels(
    path: str | Path,
    rules: set[str],
    metrics: set[str],
    items: set[str],
    components: set[tuple[str, str, int]],
    author: str = "",
) -> list[Label]:
    """Read a labelling team's file (.jsonl or .csv) for one run: one label per row, either
    `item_id, rule, label` or `item_id, metric, component, label`, label 1 or 0, optional `note`.

    `items` and `components` ((item, metric, component index) triples) are what the run holds.
    Raises InputError listing every problem, located as FILE:LINE with the field.
    """
    name = str(path)
    rows, problems = file_rows(Path(path), (".jsonl", ".csv"))
    labels: list[Label] = []
    for line, where, row in rows:
        label, row_problems = _label(row, where, rules, metrics, author)
        if label is not None and label.item_id not in items:
            row_problems.append(f"{where}: field item_id: the run has no item {label.item_id!r}")
        elif (
            label is not None and label.metric and (label.item_id, label.metric, label.component_idx) not in components
        ):
            row_problems.append(
                f"{where}: field component: item {label.item_id!r} has no {label.metric} "
                f"component {label.component_idx}"
            )
        problems += [(line, p) for p in row_problems]
        if label is not None and not row_problems:
            labels.append(label)
    raise_problems(problems, empty=None if rows else f"{name}: no labels (the file is empty)")
    return labels


def _label(row: Any, where: str, rules: set[str], metrics: set[str], author: str) -> tuple[Label | None, list[str]]:
    """One label row checked field by field: (the label, or None, and its problems)."""
    if not isinstance(row, dict):
        return None, [f"{where}: expected an object with item_id and label, got {type_name(row)}"]
    problems = []
    item_id, rule, metric, component = (row.get(k) for k in ("item_id", "rule", "metric", "component"))
    if is_missing(item_id) or not str(item_id).strip():
        problems.append(f"{where}: field item_id: missing")
    value = str(row.get("label", "")).strip()
    if value not in ("0", "1", "0.0", "1.0", "True", "False", "true", "false"):
        problems.append(f"{where}: field label: must be 1 or 0, got {row.get('label')!r}")
    has_rule, has_metric = not is_missing(rule), not is_missing(metric)
    if has_rule == has_metric:
        problems.append(f"{where}: give either rule or metric and component, not {'both' if has_rule else 'neither'}")
    elif has_rule and str(rule).strip().upper() not in rules:
        problems.append(f"{where}: field rule: unknown rule {rule!r}; known: {', '.join(sorted(rules))}")
    elif has_metric:
        if str(metric).strip().lower() not in metrics:
            problems.append(f"{where}: field metric: unknown metric {metric!r}; known: {', '.join(sorted(metrics))}")
        try:
            index = int(str(component).strip())
            if index < 0 or str(index) != str(component).strip():
                raise ValueError
        except ValueError:
            problems.append(f"{where}: field component: must be the component's index (0, 1, ...), got {component!r}")
    if problems:
        return None, problems
    note = row.get("note")
    return Label(
        item_id=str(item_id).strip(),
        label=int(value in ("1", "1.0", "True", "true")),
        rule=str(rule).strip().upper() if has_rule else None,
        metric=str(metric).strip().lower() if has_metric else None,
        component_idx=int(str(component).strip()) if has_metric else None,
        note="" if is_missing(note) else str(note),
        author=author,
        origin="import",
    ), []
