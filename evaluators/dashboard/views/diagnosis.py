"""The Diagnosis page's helpers: items per quadrant of a metric pair, and the rules each quadrant shows."""

from __future__ import annotations

from typing import cast

import pandas as pd

from evaluators.metrics.diagnosis import READINGS, RULES, SHARED_CLAIMS, explained_by


def quadrant_counts(combos: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Items per quadrant of (x, y) from queries.diagnosis.rule_counts(): x_low, y_low and n; unscored items left out."""
    cols = [f"x_low:{x}|{y}", f"y_low:{x}|{y}"]
    scored = combos.dropna(subset=cols)
    counts = cast(pd.DataFrame, scored.groupby(cols, as_index=False)["n"].sum())  # a frame: as_index=False
    return counts.set_axis(["x_low", "y_low", "n"], axis=1).astype({"x_low": bool, "y_low": bool})


def quadrant_rules(x: str, y: str) -> dict[tuple[bool, bool], str]:
    """The rules drawn on the (x, y) pair by the quadrant they read, keyed (x_low, y_low): 'T2.2' or
    'T2.4, X1 (ours)'. A rule may need a third metric too (T2.6 also needs RQC high)."""
    found: dict[tuple[bool, bool], list[str]] = {}
    for rule in RULES.values():
        levels = {m: want for metric, want in rule.conditions for m in READINGS.get(metric, (metric,))}
        if rule.plot == (x, y) and x in levels and y in levels:
            found.setdefault((levels[x] == "low", levels[y] == "low"), []).append(rule.name)
    return {quad: ", ".join(names) for quad, names in found.items()}


def shared_claims_text(split: pd.DataFrame) -> str:
    """'X1 (ours) explains 9 of the 12 items, T2.5 3; 0 cannot be told (GR decided none of their extraneous
    claims)' from queries.diagnosis.shared_claims()."""
    told = [explained_by(int(u), int(s)) for u, s in zip(split["unsupported"], split["supported"])]
    x1, t25 = SHARED_CLAIMS
    counts = {r: told.count(r) for r in SHARED_CLAIMS}
    more = max(SHARED_CLAIMS, key=lambda r: counts[r])
    lead = (
        f"**{RULES[more].name} explains more of them**"
        if counts[x1] != counts[t25]
        else "**Neither explains more of them**"
    )
    return (
        f"{lead}: {RULES[x1].name} {counts[x1]} of the {len(told)} items, {RULES[t25].name} "
        f"{counts[t25]}; {told.count(None)} cannot be told (GR decided none of their extraneous claims)."
    )
