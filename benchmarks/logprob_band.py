"""Where the local judge is right: its logprob P("1") and the band of it that is unsure.

The local judge (Qwen2.5-Coder-1.5B through llama.cpp) reads P("1") / (P("0") + P("1")) from its first
answer token, and its verdicts are unsure when that lies inside the logprob band. This asks it a seeded
sample of the licensed development matches of benchmarks/labelled.py (up to N per learned match type, as
many labelled 1 as 0 where there are, texts of at most MAX_CHARS so a call stays short) and prints, per
match type, the ECE of P("1") and, for candidate bands, the unsure share and the accuracy of the rest: on
all sampled matches and on those the offline judge is unsure of (what the cascade `offline>local` sends on).

`--fit` also fits the local judge's calibration (evaluators/judges/local_calibration.py): a Platt curve
from P("1") to P(match is 1) per match type with at least MIN_FIT sampled matches (the pooled curve for the
rest), and the band: the widest of BANDS that leaves at most UNSURE_AT_MOST of the sampled matches unsure.
Both are chosen on out-of-fold p (FOLDS folds, a claim's or question's matches in one fold), and the figures
printed are out of fold; the curves written are fitted on every sampled match.

TUNING RULE: development split only; the held-out examples are never built here.

    python -m benchmarks.logprob_band [--per-type 80] [--answers benchmarks/out/local_answers.json] [--fit]

`--answers` keeps the local judge's P("1") per match in a JSON file, so a rerun asks only new matches.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import calibration as cal  # noqa: E402
from benchmarks.labelled import DEV_SPLIT, SEED, Example, examples  # noqa: E402
from evaluators.core.confidence import DEFAULT_BANDS, LOGPROB, Band  # noqa: E402
from evaluators.core.records import CALIBRATED, Status  # noqa: E402
from evaluators.judges import local_calibration, registry  # noqa: E402
from evaluators.judges.calibration import LEARNED_TYPES  # noqa: E402
from evaluators.judges.local_calibration import POOLED  # noqa: E402

DRAWN = 40  # matches drawn per (match type, label); a smaller --per-type takes the first of them, so samples nest
MAX_CHARS = 2500  # the longest text of a sampled match: a 1.5B model on 2 cores reads ~100 tokens a second
SCORED = registry.BINARY_PROMPTS | set(registry.LABEL_PROMPTS)  # prompts the local judge reads from one token
FOLDS = 5
MIN_FIT = 30  # sampled matches a match type needs for a curve of its own; fewer use the pooled curve
UNSURE_AT_MOST = 0.30  # the band's rule, the offline band's too (evaluators/core/confidence.py)
# The knots a curve is kept at (linear between them): close together where P("1") crowds, near 0 and 1.
GRID = (0.001, 0.005, 0.01, 0.02, *(round(i / 20, 2) for i in range(1, 20)), 0.98, 0.99, 0.995, 0.999)
BANDS: tuple[Band, ...] = tuple((round(0.5 - w / 100, 2), round(0.5 + w / 100, 2)) for w in range(0, 50, 5))
Rows = list[tuple[Example, float]]  # a sampled match and the local judge's P("1") on it


def sample(per_type: int, seed: int = SEED) -> list[Example]:
    """Up to `per_type` licensed development matches per learned match type, balanced by label, seeded."""
    rng = random.Random(seed)
    pool = [e for e in examples(DEV_SPLIT) if e.licensed and not e.perturbed and e.prompt in SCORED
            and max(len(str(v)) for v in e.variables.values()) <= MAX_CHARS]
    chosen: list[Example] = []
    for match_type in LEARNED_TYPES:
        for label in (0, 1):
            group = [e for e in pool if e.match_type == match_type and e.label == label]
            chosen += rng.sample(group, min(DRAWN, len(group)))[: per_type // 2]
    return chosen


def key(example: Example) -> str:
    """A stable id of a match: its prompt and variables."""
    return hashlib.sha256(json.dumps([example.prompt, example.variables], sort_keys=True).encode()).hexdigest()[:16]


async def ask_local(todo: Sequence[Example], known: dict[str, float | None],
                    save: Callable[[dict[str, float | None]], None]) -> dict[str, float | None]:
    """P("1") of the local judge per match (None when it failed), asking only matches not in `known`."""
    from evaluators.judges import local_llm

    missing = [e for e in todo if key(e) not in known]
    if not missing:
        return known
    with local_llm.LocalServer() as server:
        judge = local_llm.judge(server, timeout=600.0)
        for n, e in enumerate(missing, 1):
            answer = await judge.ask(e.prompt, **e.variables)
            ok = answer.status is Status.OK and answer.prob is not None
            known[key(e)] = answer.prob if ok else None
            save(known)
            print(f"{n}/{len(missing)} {e.match_type} label {e.label} p {known[key(e)]}", file=sys.stderr, flush=True)
    return known


def offline_unsure(example: Example) -> bool:
    """Whether the offline judge is unsure of the match at its default band: what `offline>local` sends on."""
    judged = cal.judge(example)
    return judged is not None and cal._unsure(judged, DEFAULT_BANDS[CALIBRATED])


def fitted(rows: Rows) -> dict[str, Any]:
    """The curves of a local calibration table fitted on these rows: Platt fits (scikit-learn's logistic
    regression of the label on the logit of P("1")), pooled over all rows and one per match type with at
    least MIN_FIT rows and both labels, each kept as its values at the knots of GRID."""
    from sklearn.linear_model import LogisticRegression

    def curve(part: Rows) -> dict[str, Any]:
        platt = LogisticRegression().fit([[_logit(p)] for _, p in part], [e.label for e, _ in part])
        ps = platt.predict_proba([[_logit(x)] for x in GRID])[:, 1]
        return {"n": len(part), "knots": [[x, round(float(p), 6)] for x, p in zip(GRID, ps)]}

    curves = {POOLED: curve(rows)}
    for match_type in LEARNED_TYPES:
        part = [r for r in rows if r[0].match_type == match_type]
        if len(part) >= MIN_FIT and len({e.label for e, _ in part}) == 2:
            curves[match_type] = curve(part)
    return curves


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def out_of_fold(rows: Rows, seed: int = SEED) -> list[float]:
    """Each row's calibrated p from curves fitted without its fold (stratified by match type and label)."""
    from sklearn.model_selection import StratifiedGroupKFold

    strata = [f"{e.match_type}:{e.label}" for e, _ in rows]
    groups = [e.group or key(e) for e, _ in rows]
    ps = [0.0] * len(rows)
    for train, test in StratifiedGroupKFold(FOLDS, shuffle=True, random_state=seed).split(rows, strata, groups):
        curves = local_calibration.parse({"curves": fitted([rows[i] for i in train])})
        for i in test:
            ps[i] = curves.probability(rows[i][0].match_type, rows[i][1])
    return ps


def chosen_band(ps: Sequence[float]) -> Band:
    """The widest of BANDS that leaves at most UNSURE_AT_MOST of these p unsure."""
    return max((b for b in BANDS if sum(b[0] < p < b[1] for p in ps) <= UNSURE_AT_MOST * len(ps)),
               key=lambda b: b[1] - b[0])


def fit(rows: Rows, sent_on: set[int], per_type: int, out: Path) -> None:
    """Fit the curves and band on the rows, print the out-of-fold figures (apart for the rows in `sent_on`, those
    the offline judge is unsure of), and write the table to `out`."""
    oof = out_of_fold(rows)
    band = chosen_band(oof)
    figures: dict[str, dict[str, Any]] = {}
    print(f"## The local calibration, out of fold ({FOLDS} folds); band {band}\n")
    print("| match type | n | ECE raw | ECE calibrated | unsure, raw at (0.2, 0.8) | unsure, calibrated at the band "
          "| right of the rest, raw / calibrated |\n|---|---:|---:|---:|---:|---:|---:|")
    for name in (*LEARNED_TYPES, "all", "offline unsure"):
        idx = [i for i, (e, _) in enumerate(rows) if name in ("all", e.match_type) or name == "offline unsure"
               and i in sent_on]
        if not idx:
            continue
        labels, raw, cal_p = [rows[i][0].label for i in idx], [rows[i][1] for i in idx], [oof[i] for i in idx]
        sure_raw = [(y, p) for y, p in zip(labels, raw) if not 0.2 < p < 0.8]
        sure_cal = [(y, p) for y, p in zip(labels, cal_p) if not band[0] < p < band[1]]
        figures[name] = {"n": len(idx), "ece_raw": round(cal.ece(raw, labels) or 0.0, 3),
                         "ece_calibrated": round(cal.ece(cal_p, labels) or 0.0, 3),
                         "unsure": round(1 - len(sure_cal) / len(idx), 3)}
        print(f"| {name} | {len(idx)} | {figures[name]['ece_raw']:.3f} | {figures[name]['ece_calibrated']:.3f} "
              f"| {1 - len(sure_raw) / len(idx):.0%} | {figures[name]['unsure']:.0%} "
              f"| {_right(sure_raw)} / {_right(sure_cal)} |")
    text = json.dumps({
        "fitted_on": "licensed development matches only (benchmarks/labelled.py, DEV_SPLIT), no perturbations, "
                     "balanced by label per match type; never held-out data, LFQA or WikiEval",
        "command": f"python -m benchmarks.logprob_band --per-type {per_type} --answers FILE --fit",
        "model": local_llm_model(), "seed": SEED, "folds": FOLDS, "min_fit": MIN_FIT,
        "matches": dict(sorted(Counter(e.source for e, _ in rows).items())),
        "band": list(band), "band_rule": f"the widest symmetric band leaving at most {UNSURE_AT_MOST:.0%} of the "
                                         "sampled matches unsure, on out-of-fold p",
        "out_of_fold": figures, "curves": fitted(rows)}, indent=1)
    out.write_text(re.sub(r"\[\s+([-\d.e]+),\s+([-\d.e]+)\s+\]", r"[\1, \2]", text) + "\n", encoding="utf-8")  # a knot a line
    print(f"\nwrote {out}")


def _right(pairs: Sequence[tuple[int, float]]) -> str:
    return f"{sum(y == int(p >= 0.5) for y, p in pairs) / len(pairs):.2f}" if pairs else "–"


def local_llm_model() -> str:
    """The local model's name, which the curves belong to."""
    from evaluators.judges import local_llm

    return local_llm.MODEL


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-type", type=int, default=80, help="matches per match type (default 80, the most: DRAWN per label)")
    p.add_argument("--answers", type=Path, default=None, help="JSON file keeping the local judge's p per match")
    p.add_argument("--fit", action="store_true", help=f"fit the local calibration and write {local_calibration.TABLE.name}")
    p.add_argument("--out", type=Path, default=local_calibration.TABLE, help="where --fit writes the table")
    args = p.parse_args(argv)
    chosen = sample(args.per_type)
    known: dict[str, float | None] = (json.loads(args.answers.read_text()) if args.answers and args.answers.exists()
                                      else {})

    def save(answers: dict[str, float | None]) -> None:
        if args.answers:
            args.answers.parent.mkdir(parents=True, exist_ok=True)
            args.answers.write_text(json.dumps(answers), encoding="utf-8")

    got = asyncio.run(ask_local(chosen, known, save))
    rows: Rows = [(e, p) for e in chosen if (p := got.get(key(e))) is not None]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# The local judge on {len(rows)} licensed development matches ({len(chosen) - len(rows)} failed; "
          f"load {load})\n\nECE over 10 bins, of the raw P(\"1\") below; --fit maps it to the calibrated p, which "
          f"the default logprob band {DEFAULT_BANDS[LOGPROB]} applies to.\n")
    sent_on = {i for i, (e, _) in enumerate(rows) if offline_unsure(e)}  # what offline>local asks the local judge
    for name in (*LEARNED_TYPES, "all"):
        idx = [i for i, (e, _) in enumerate(rows) if name in ("all", e.match_type)]
        if not idx:
            continue
        labels = [rows[i][0].label for i in idx]
        raw = [rows[i][1] for i in idx]
        unsure_offline = [i for i in idx if i in sent_on]
        print(f"## {name}: {len(idx)} matches, {sum(labels)} labelled 1; ECE {cal.ece(raw, labels):.3f}\n")
        print("\n".join(cal.band_rows([(y, int(p >= 0.5), p) for y, p in zip(labels, raw)])) + "\n")
        if unsure_offline:
            print(f"of them, the {len(unsure_offline)} the offline judge is unsure of:\n")
            print("\n".join(cal.band_rows([(rows[i][0].label, int(rows[i][1] >= 0.5), rows[i][1])
                                        for i in unsure_offline])) + "\n")
    if args.fit:
        fit(rows, sent_on, args.per_type, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
