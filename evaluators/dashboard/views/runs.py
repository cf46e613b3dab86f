"""The Runs page's helpers: prompt files as names, failures as text, headline intervals and shares below
a threshold from a run's score distribution."""

from __future__ import annotations

import json
from typing import Any, Sequence

import pandas as pd

from evaluators.core.stats import bootstrap_ci


def prompt_names(prompt_hashes: Sequence[str]) -> tuple[list[list[str]], str]:
    """The runs' prompt files (runs.prompt_hashes JSON) as names a person reads: per run its prompt
    names (a batched form folded into its name), a name marked ✎ when its hash differs from the one
    most runs used; and a hover text with every name's hash, and which runs used another."""
    runs = [json.loads(p) for p in prompt_hashes]
    by_name: dict[str, list[tuple[int, str]]] = {}
    for i, hashes in enumerate(runs):
        for name, digest in hashes.items():
            by_name.setdefault(name, []).append((i, digest))
    # the hash most runs used; on a tie the newest run's (runs are listed newest first, max keeps the first)
    usual = {n: max(dict.fromkeys(d for _, d in seen), key=[d for _, d in seen].count) for n, seen in by_name.items()}
    cells = []
    for hashes in runs:
        names: dict[str, bool] = {}
        for name, digest in sorted(hashes.items()):
            base = name.removesuffix("_batch")
            names[base] = names.get(base, False) or digest != usual[name]
        cells.append([f"{n} ✎" if edited else n for n, edited in names.items()])
    lines = [
        f"{n}: {usual[n][:12]}"
        + (
            ""
            if all(d == usual[n] for _, d in seen)
            else " (✎ other runs: " + ", ".join(sorted({d[:12] for _, d in seen if d != usual[n]})) + ")"
        )
        for n, seen in sorted(by_name.items())
    ]
    return (
        cells,
        "Prompt files (sha256, first 12 hex) most runs used; ✎ marks a run whose file differed:  \n"
        + "  \n".join(lines),
    )


def failure_text(frame: pd.DataFrame) -> str:
    """'2 timeout, 1 unparsed' from rows with status and n."""
    return ", ".join(f"{int(n)} {s}" for s, n in zip(frame["status"], frame["n"])) or "none"


def headline(dist: pd.DataFrame, metric: str) -> Any:
    """Bootstrap 95% interval of a metric's mean from its (value, n) distribution.

    Values are grouped to 1e-3 for the resampling (so a continuous metric stays cheap); the mean
    reported is the exact one.
    """
    rows = dist[dist["metric"] == metric]
    grouped = rows.groupby(rows["value"].round(3))["n"].sum()
    ci = bootstrap_ci(grouped.index.to_numpy(), grouped.to_numpy())
    if ci is None:
        return None
    exact = float((rows["value"] * rows["n"]).sum() / rows["n"].sum())
    return type(ci)(exact, ci.low, ci.high, ci.n)


def share_below(dist: pd.DataFrame, metric: str, threshold: float) -> tuple[int, int]:
    """(items below threshold, items scored) for one metric, exactly, from its distribution."""
    rows = dist[dist["metric"] == metric]
    return int(rows.loc[rows["value"] < threshold, "n"].sum()), int(rows["n"].sum())
