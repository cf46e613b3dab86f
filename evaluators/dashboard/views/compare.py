"""The Compare page's helpers: one item's claims in two runs, matched by their text."""

from __future__ import annotations

import re
from typing import Any, Iterable, cast

import pandas as pd

from evaluators.dashboard.markup import fmt_verdict


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def claim_diff(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Claims of one item in two runs, matched by normalised text: new, gone, changed verdict or same."""

    def verdicts(row: Any) -> str:
        rp = fmt_verdict(row.rp, row.rp_status) if isinstance(row.rp_status, str) else "–"
        gr = fmt_verdict(row.gr, row.gr_status) if isinstance(row.gr_status, str) else "–"
        return f"RP {rp} · GR {gr}"

    a = {_norm(r.text): (r.text, verdicts(r)) for r in cast(Iterable[Any], before.itertuples())}
    b = {_norm(r.text): (r.text, verdicts(r)) for r in cast(Iterable[Any], after.itertuples())}
    rows = []
    for key in list(a) + [k for k in b if k not in a]:
        text = (b.get(key) or a[key])[0]
        va, vb = a.get(key, (None, None))[1], b.get(key, (None, None))[1]
        change = "new" if va is None else "gone" if vb is None else "changed verdict" if va != vb else "same"
        rows.append({"change": change, "claim": text, "before": va or "", "after": vb or ""})
    order = {"changed verdict": 0, "new": 1, "gone": 2, "same": 3}
    frame = pd.DataFrame(rows, columns=["change", "claim", "before", "after"])
    return frame.sort_values("change", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)
