"""Regression suites: a run's items written back out as an `evaluate` input that keeps what must hold.

Each line is an item (id, query, sources, response, reference, metadata) plus an `expect` object:
- `rules_quiet`: Table-2 rules that must not fire (quiet now on decided scores, or labelled wrong by people);
- `gr_supported`: response claims that must stay supported by the sources (GR);
- `sqc_covered` / `rqc_covered`: sub-questions the sources / the response must keep covering.
Expectations come from the run's confident verdicts (an unsure or failed verdict promises nothing),
then people's corrections and rule labels override them. `evaluate SUITE --expect` evaluates the
suite, then checks every expectation against the new run and reports each broken one on one line.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

import pandas as pd

from evaluators.core.records import Item
from evaluators.metrics.diagnosis import CONDITIONS, DEFAULT_THRESHOLDS, RULES, diagnose, level
from evaluators.metrics.registry import THELMA
from evaluators.storage import queries, store

EXPECT = "expect"
# expectation key -> (metric, what the component is, what it must stay)
COMPONENT_EXPECTATIONS: dict[str, tuple[str, str, str]] = {
    "gr_supported": ("gr", "claim", "supported"),
    "sqc_covered": ("sqc", "sub-question", "covered by the sources"),
    "rqc_covered": ("rqc", "sub-question", "covered by the response"),
}
MIN_OVERLAP = 0.5  # a component whose text changed a little is still the same one (word Jaccard)
_WORD = re.compile(r"\w+")
_CONDITION = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([0-9.]+)\s*$")


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def parse_filter(text: str) -> list[tuple[str, str, float]]:
    """'gr<0.8,sqc<0.75' as (metric, operator, value) conditions that must all hold; ValueError naming the part."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        found = _CONDITION.match(part.lower())
        if not found or found.group(1) not in THELMA:
            raise ValueError(f"--filter: {part!r} is not METRIC<VALUE, METRIC>=VALUE (<=, >) with a THELMA metric")
        value = float(found.group(3))
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"--filter: {part!r}: the value must be within [0, 1]")
        out.append((found.group(1), found.group(2), value))
    if not out:
        raise ValueError(f"--filter: {text!r} names no condition")
    return out


_OPS = {"<": lambda s, v: s < v, "<=": lambda s, v: s <= v, ">": lambda s, v: s > v, ">=": lambda s, v: s >= v}


def select_items(
    db: str,
    run: str,
    wide: pd.DataFrame,
    *,
    ids: str | None = None,
    triaged: bool = False,
    rule: str | None = None,
    conditions: Sequence[tuple[str, str, float]] = (),
) -> list[str]:
    """The ids of the run's items to export: given ids, triaged or labelled items, items a rule fires
    on, items whose scores meet every condition, or (none of these) all. ValueError naming the option."""
    every = list(wide["item_id"])
    if ids is not None:
        wanted = [i.strip() for i in ids.split(",") if i.strip()]
        missing = [i for i in wanted if i not in set(every)]
        if missing or not wanted:
            raise ValueError(f"--items: run {run!r} has no item {missing[0] if missing else ids!r}")
        return wanted
    if triaged:
        marked = set(queries.trust.labelled_items(db, run)) | set(queries.items.triage_notes(db, run)["item_id"])
        chosen = [i for i in every if i in marked]
        if not chosen:
            raise ValueError(f"--triaged: run {run!r} has no triaged or labelled item")
        return chosen
    if rule is not None:
        if rule.upper() not in RULES:
            raise ValueError(f"--rule: unknown rule {rule!r}; known: {', '.join(RULES)}")
        chosen = [r["item_id"] for r in wide.to_dict("records") if rule.upper() in {f.id for f in diagnose(_scores(r))}]
        if not chosen:
            raise ValueError(f"--rule: {rule.upper()} fires on no item of run {run!r}")
        return chosen
    if conditions:
        chosen = [
            r["item_id"]
            for r in wide.to_dict("records")
            if all(r[m] is not None and r[m] == r[m] and _OPS[op](r[m], v) for m, op, v in conditions)
        ]
        if not chosen:
            raise ValueError(f"--filter: no item of run {run!r} meets it")
        return chosen
    return every


def _scores(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {m: queries.diagnosis.wide_score(row, m) for m in THELMA}


def quiet_rules(scores: Mapping[str, Any]) -> list[str]:
    """The rules kept quiet by a decided score: some condition's metric is decided at the other level.
    A rule quiet only because a metric is unsure or unscored promises nothing."""
    return [
        r
        for r, conds in CONDITIONS.items()
        if any(level(m, scores, DEFAULT_THRESHOLDS) not in (None, want) for m, want in conds)
    ]


def expectations(
    row: Mapping[str, Any], states: pd.DataFrame, corrections: pd.DataFrame, rule_labels: pd.DataFrame
) -> dict[str, list[str]]:
    """One item's expectations from its wide score row, its component states (queries.compare.component_states),
    people's verdict corrections (queries.trust.verdict_corrections) and rule labels (queries.trust.rule_labels)."""
    quiet = set(quiet_rules(_scores(row)))
    for r in queries.sql.rows(rule_labels):
        (quiet.add if int(r.label) == 0 else quiet.discard)(r.rule)  # 0: people say the rule is wrong here
    out: dict[str, list[str]] = {"rules_quiet": [r for r in RULES if r in quiet]}
    fixed = {(c.metric, int(c.component_idx)): int(c.label) for c in queries.sql.rows(corrections)}
    for key, (metric, _, _) in COMPONENT_EXPECTATIONS.items():
        part = states[states["metric"] == metric]
        texts = []
        for s in queries.sql.rows(part):
            holds = fixed.get((metric, int(s.idx)), 1 if s.state == "ok" and s.value == 1 else None)
            if holds == 1 and s.text not in texts:
                texts.append(s.text)
        out[key] = texts
    return out


def export(db: str, run: str, out: str | Path, item_ids: Sequence[str], wide: pd.DataFrame) -> tuple[int, int]:
    """Write the items with their expectations as JSONL (all or nothing); returns (items, expectations)."""
    rows = wide.set_index("item_id")
    with store.reading(db):
        items = queries.items.item_inputs(db, [run], item_ids).set_index("item_id")
        states = queries.compare.component_states(db, run, item_ids=item_ids)
        corrections = queries.trust.verdict_corrections(db, run)
        labels = queries.trust.rule_labels(db, run)
    lines, n_expect = [], 0
    for item_id in item_ids:
        item = items.loc[item_id]
        expect = expectations(
            {"item_id": item_id, **cast(dict[str, Any], rows.loc[item_id].to_dict())},
            states[states["item_id"] == item_id],
            corrections[corrections["item_id"] == item_id],
            labels[labels["item_id"] == item_id],
        )
        n_expect += sum(len(v) for v in expect.values())
        metadata = {k: v for k, v in json.loads(str(item["metadata"])).items() if k != EXPECT}
        record = {"id": item_id, "query": item["query"], "sources": list(item["sources"]), "response": item["response"]}
        if isinstance(item["reference"], str):
            record["reference"] = item["reference"]
        record["metadata"] = metadata
        record[EXPECT] = {"from_run": run, **expect}
        lines.append(json.dumps(record, ensure_ascii=False))
    target = Path(out)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, target)  # a reader never sees half a suite
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(lines), n_expect


def item_lines(path: str | Path, items: Sequence[Item]) -> dict[str, str]:
    """Where each item sits in its input, for messages: 'FILE:LINE' for JSONL, 'FILE:row N' otherwise."""
    name = str(path)
    if Path(path).suffix.lower() != ".jsonl":
        return {item.id: f"{name}:row {n}" for n, item in enumerate(items, start=1)}
    where: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), start=1):
        try:
            value = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("id") is not None:
            where.setdefault(str(value["id"]), f"{name}:{number}")
    return {item.id: where.get(item.id, name) for item in items}


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _find(text: str, candidates: pd.DataFrame) -> Any:
    """The component with this text (normalised), else the one sharing most words (at least MIN_OVERLAP)."""
    exact = candidates[candidates["text"].map(_norm) == _norm(text)]
    if len(exact):
        return exact.iloc[0]
    words, best, found = _words(text), MIN_OVERLAP, None
    for row in queries.sql.rows(candidates):
        other = _words(row.text)
        overlap = len(words & other) / len(words | other) if words | other else 0.0
        if overlap >= best:
            best, found = overlap, row
    return None if found is None else pd.Series(found._asdict())


def _why(row: Any) -> str:
    p = "" if row["p"] is None or row["p"] != row["p"] else f"p={float(row['p']):.2f}"
    if row["state"] == "ok":
        return f"({p})" if p else ""
    return f"({row['state']}{', ' + p if p else ''})"


def check(db: str, run: str, items: Sequence[Item], where: Mapping[str, str]) -> list[str]:
    """Every broken expectation of these items in the evaluated run, one line each, in input order:
    `FILE:LINE: item X: claim "..." no longer supported (p=0.12)`."""
    expecting = [i for i in items if isinstance(i.metadata.get(EXPECT), dict)]
    ids = [i.id for i in expecting]
    with store.reading(db):
        wide = queries.runs.run_scores_wide(db, run, list(THELMA)).set_index("item_id")
        states = queries.compare.component_states(db, run, item_ids=ids)
    broken = []
    for item in expecting:
        expect, at = item.metadata[EXPECT], f"{where.get(item.id, '?')}: item {item.id}"
        mine = states[states["item_id"] == item.id]
        for key, (metric, what, must) in COMPONENT_EXPECTATIONS.items():
            for text in expect.get(key) or []:
                found = _find(str(text), mine[mine["metric"] == metric])
                if found is None:
                    broken.append(f'{at}: {what} "{text}" is no longer there ({metric} has no such {what})')
                elif not (found["state"] == "ok" and found["value"] == 1):
                    broken.append(f'{at}: {what} "{text}" no longer {must} {_why(found)}'.rstrip())
        quiet = expect.get("rules_quiet") or []
        if quiet and item.id in wide.index:
            fired = {r.id: r for r in diagnose(_scores({"item_id": item.id, **wide.loc[item.id].to_dict()}))}
            broken += [
                f"{at}: rule {r} fires ({fired[r].pattern}: fix {fired[r].components})" for r in quiet if r in fired
            ]
    return broken
