"""The Diagnosis page's helpers: items per quadrant of a metric pair."""

from __future__ import annotations

from typing import cast

import pandas as pd


def quadrant_counts(combos: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Items per quadrant of (x, y) from queries.diagnosis.rule_counts(): x_low, y_low and n; unscored items left out."""
    cols = [f"x_low:{x}|{y}", f"y_low:{x}|{y}"]
    scored = combos.dropna(subset=cols)
    counts = cast(pd.DataFrame, scored.groupby(cols, as_index=False)["n"].sum())  # a frame: as_index=False
    return counts.set_axis(["x_low", "y_low", "n"], axis=1).astype({"x_low": bool, "y_low": bool})
