"""Fit the offline judge's learned decisions and their calibration, on licensed development data only.

    python -m benchmarks.train_judge [--folds 5] [--seed 27] [--dry-run]

One seeded command that reproduces the shipped files from ../shared/datasets and our demo:
- evaluators/judges/judge_model.json: a logistic model per match type (support, essential, source_essential,
  covers, addresses, answer_phrase) over that decision's signals (evaluators/judges/signals.py), each weight kept to the
  direction its signal argues in, fitted on every licensed development example of its type
  (benchmarks/labelled.py), each data set's construction weighed equally (SOURCE_WEIGHT);
- evaluators/judges/calibration.json: per (match type, value) a binned isotonic curve from the model's raw
  probability to p, fitted on out-of-fold probabilities (grouped cross-validation: a claim's or a
  question's examples stay in one fold), so the curve never sees a probability of a model fitted on
  its own example, and on real matches only (not the perturbed claims, all negatives in numbers we
  chose); SD's curve maps the cosine to the most similar other sentence.

It prints, per match type and label source, the out-of-fold AUROC and accuracy. Held-out data is never
read here. With --dry-run nothing is written.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.labelled import DEV_SPLIT, LICENSED, SEED, Example, examples, sd_cosines  # noqa: E402
from evaluators.core import text  # noqa: E402
from evaluators.judges import calibration, embeddings, learned, signals  # noqa: E402
from evaluators.judges.calibration import (  # noqa: E402
    ADDRESSES,
    ANSWER_PHRASE,
    COVERS,
    ESSENTIAL,
    LEARNED_TYPES,
    SD,
    SOURCE_ESSENTIAL,
    SUPPORT,
)
from evaluators.judges.learned import Logistic  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
FEATURES = {SUPPORT: signals.SUPPORT, ESSENTIAL: signals.ESSENTIAL, SOURCE_ESSENTIAL: signals.COVERS,
            COVERS: signals.COVERS, ADDRESSES: signals.COVERS, ANSWER_PHRASE: signals.PHRASE}
C = 1.0  # inverse L2 strength of the logistic fit, on standardized signals
# Each label source (data set and construction, e.g. "wice:claim", "factcheck:negated") weighs as
# much as SOURCE_WEIGHT examples in all, so a big set does not drown the others.
SOURCE_WEIGHT = 200.0
# The calibration curves: equal-count bins of at least MIN_BIN matches, each bin's rate shrunk towards
# its curve's overall rate by PRIOR pseudo-matches (few matches never give p = 0 or 1), then made
# monotone (PAV); linear between knots.
MIN_BIN = 15
PRIOR = 4.0


# ---------------------------------------------------------------- signals of an example

def signals_of(example: Example) -> dict[str, float]:
    """The signals the offline judge reads for this match, as the engine computes them."""
    v = example.variables
    if example.match_type == SUPPORT:
        return signals.support(v["claim"], v["sources"]).values
    if example.match_type == ESSENTIAL:
        return signals.essential(v["response"], v["query"]).values
    if example.match_type == SOURCE_ESSENTIAL:
        return signals.source_essential(v["source"], v["query"]).values
    if example.match_type in (ADDRESSES, ANSWER_PHRASE):
        return signals.covers(v["response"], v["question"], response=True).values
    return signals.covers(v["source"], v["question"]).values


def _code_hash() -> str:
    """What the signals depend on: a cached signal is stale once any of these files changes."""
    files = [Path(module.__file__ or "") for module in (signals, text, embeddings)]
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]


def measured(found: Sequence[Example], cache: Path | None) -> list[dict[str, float]]:
    """The signals of every example, read from `cache` where its code hash matches (benchmarks/out only)."""
    key = _code_hash()
    stored: dict[tuple[str, str], dict[str, float]] = {}
    if cache is not None and cache.exists():
        loaded = pickle.loads(cache.read_bytes())
        stored = loaded["signals"] if loaded.get("code") == key else {}
    out = []
    for e in found:
        k = (e.prompt, json.dumps(e.variables, sort_keys=True))
        if k not in stored:
            stored[k] = signals_of(e)
        out.append(stored[k])
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps({"code": key, "signals": stored}))
    return out


# ---------------------------------------------------------------- the fit

def weights(found: Sequence[Example], balanced: bool = False) -> np.ndarray:
    """Each example's weight: its label source's SOURCE_WEIGHT shared among the source's examples. With
    `balanced`, the matches labelled 1 are then scaled to weigh as much as those labelled 0 in all."""
    counts = Counter(e.source for e in found)
    w = np.array([SOURCE_WEIGHT / counts[e.source] for e in found])
    positive = np.array([e.label == 1 for e in found])
    if balanced and positive.any() and (~positive).any():
        w[positive] *= w[~positive].sum() / w[positive].sum()
    return w


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, directions: dict[str, int]) -> Logistic:
    """A weighted, L2-regularised logistic model on standardized features, each weight kept to its
    signal's direction (scipy's L-BFGS-B with bounds: a signal that argues against a match never gets a
    positive weight)."""
    from scipy.optimize import minimize

    center, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - center) / scale

    def loss(b: np.ndarray) -> tuple[float, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(z @ b[1:] + b[0])))
        nll = -np.sum(w * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
        gradient = np.concatenate([[np.sum(w * (p - y))], z.T @ (w * (p - y)) + b[1:] / C])
        return float(nll + np.sum(b[1:] ** 2) / (2 * C)), gradient

    bounds = [(None, None)] + [{1: (0.0, None), -1: (None, 0.0), 0: (None, None)}[d] for d in directions.values()]
    b = minimize(loss, np.zeros(z.shape[1] + 1), jac=True, method="L-BFGS-B", bounds=bounds).x
    return Logistic(tuple(directions), tuple(np.round(center, 6)), tuple(np.round(scale, 6)),
                    tuple(np.round(b[1:], 6)), round(float(b[0]), 6))


def out_of_fold(x: np.ndarray, y: np.ndarray, w: np.ndarray, groups: Sequence[str], directions: dict[str, int],
                folds: int, seed: int) -> np.ndarray:
    """Each example's probability from a model fitted without its group (grouped k-fold, shuffled by seed)."""
    from sklearn.model_selection import GroupKFold

    pred = np.zeros(len(y))
    for train, test in GroupKFold(folds, shuffle=True, random_state=seed).split(x, y, groups):
        model = fit_logistic(x[train], y[train], w[train], directions)
        pred[test] = [model.probability(dict(zip(directions, row))) for row in x[test]]
    return pred


def _pav(rates: list[float], weights_: list[float]) -> list[float]:
    """Pool adjacent violators: the non-decreasing sequence closest to `rates` (weighted least squares)."""
    blocks: list[list[float]] = []  # [rate, weight, count]
    for r, w in zip(rates, weights_):
        blocks.append([r, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            r2, w2, n2 = blocks.pop()
            r1, w1, n1 = blocks.pop()
            blocks.append([(r1 * w1 + r2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return [b[0] for b in blocks for _ in range(int(b[2]))]


def fit_curve(points: Sequence[tuple[float, int]], increasing: bool) -> dict[str, Any]:
    """A binned isotonic curve through (score, label) points: knots [score, p] in score order."""
    if not points:  # a value the judge never gave on the dev data: nothing known, fully unsure
        return {"n": 0, "rate": None, "knots": [[0.0, 0.5], [1.0, 0.5]]}
    n = len(points)
    # The overall rate with one pseudo-match each way: a curve whose matches were all 1 still says p < 1.
    overall = (sum(y for _, y in points) + 1) / (n + 2)
    ties: dict[float, list[int]] = {}
    for s, y in points:
        ties.setdefault(s, []).append(y)
    # Equal-count bins that never split a score: tied matches share a bin.
    target = n / max(1, n // MIN_BIN)
    bins: list[list[tuple[float, int]]] = [[]]
    for s in sorted(ties, reverse=not increasing):
        if len(bins[-1]) >= target:
            bins.append([])
        bins[-1] += [(s, y) for y in ties[s]]
    if len(bins) > 1 and len(bins[-1]) < MIN_BIN / 2:  # a short tail joins its neighbour
        tail = bins.pop()
        bins[-1] += tail
    scores = [sum(s for s, _ in b) / len(b) for b in bins]
    rates = [(sum(y for _, y in b) + PRIOR * overall) / (len(b) + PRIOR) for b in bins]
    probs = _pav(rates, [float(len(b)) for b in bins])
    # A pooled run of equal p needs only its two ends: the curve is flat between them.
    knots = [(s, p) for k, (s, p) in enumerate(zip(scores, probs))
             if k in (0, len(probs) - 1) or not probs[k - 1] == p == probs[k + 1]]
    if not increasing:
        knots.reverse()
    return {"n": n, "rate": round(sum(y for _, y in points) / n, 4),
            "knots": [[round(s, 4), round(p, 4)] for s, p in knots]}


def curves(points: Sequence[tuple[float, int]], increasing: bool = True) -> dict[str, dict[str, Any]]:
    """The curve of each value (score >= 0.5 is value 1 for a learned type, cosine < threshold for SD)."""
    return {str(value): fit_curve([(s, y) for s, y in points if _value(s, increasing) == value], increasing)
            for value in (0, 1)}


def _value(score: float, increasing: bool) -> int:
    from evaluators.metrics.thelma import SD_THRESHOLD

    return int(score >= 0.5) if increasing else int(score < SD_THRESHOLD)


# ---------------------------------------------------------------- report

def auroc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    """Area under the ROC curve (ties count half); None when one class is missing."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if 0 < sum(labels) < len(labels) else None


def report_rows(match_type: str, found: Sequence[Example], pred: np.ndarray) -> list[str]:
    """Per label source: examples, label-1 share, out-of-fold AUROC and accuracy at p >= 0.5."""
    rows = []
    for source in sorted({e.source for e in found}):
        idx = [i for i, e in enumerate(found) if e.source == source]
        labels = [found[i].label for i in idx]
        auc = auroc([pred[i] for i in idx], labels)
        acc = sum((pred[i] >= 0.5) == found[i].label for i in idx) / len(idx)
        rows.append(f"| {match_type} | {source} | {len(idx)} | {sum(labels) / len(idx):.2f} | "
                    f"{'-' if auc is None else f'{auc:.3f}'} | {acc:.2f} |")
    return rows


# ---------------------------------------------------------------- command line

def train(dev: Sequence[Example], folds: int, seed: int,
          cache: Path | None) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The model file's and calibration table's contents, and the report's rows, fitted on `dev`: licensed
    development examples only, anything else is refused."""
    if not all(e.split == DEV_SPLIT and e.licensed for e in dev):
        raise ValueError("the offline judge is fitted on licensed development data only")
    by_type: dict[str, list[Example]] = defaultdict(list)
    for e in dev:
        by_type[e.match_type].append(e)
    models, table, rows = {}, {}, []
    for match_type in LEARNED_TYPES:
        found = by_type[match_type]
        directions = FEATURES[match_type]
        x = np.array([[s[f] for f in directions] for s in measured(found, cache)])
        y = np.array([e.label for e in found])
        # Support's constructions are all negatives and its people-labelled sets run from 26% to 72% supported:
        # balanced classes put a raw p of 0.5 where the evidence is even, not at the share of negatives we made.
        w = weights(found, balanced=match_type == SUPPORT)
        pred = out_of_fold(x, y, w, [e.group for e in found], directions, folds, seed)
        models[match_type] = fit_logistic(x, y, w, directions).to_json()
        # The curves read real matches only: perturbed claims are all negatives, in numbers we chose.
        table[match_type] = curves([(pred[i], int(y[i])) for i, e in enumerate(found) if not e.perturbed])
        rows += report_rows(match_type, found, pred)
    sd = by_type[SD]
    points = [(sd_cosines(e.variables["sentences"])[e.variables["index"]], e.label) for e in sd]
    table[SD] = curves(points, increasing=False)
    fitted_on = dict(sorted(Counter(e.source for e in dev).items()))
    provenance = {"fitted_on": "licensed development data only (benchmarks/labelled.py): "
                               f"{', '.join(sorted(LICENSED))}; never held-out data, LFQA or WikiEval",
                  "command": "python -m benchmarks.train_judge", "seed": seed, "folds": folds, "matches": fitted_on}
    model_file = {**provenance, "method": f"L2 logistic regression (C={C}) on standardized signals, each weight "
                                          "kept to its signal's direction (signals.py), each label source weighing "
                                          f"{SOURCE_WEIGHT:g} examples", "models": models}
    table_file = {**provenance, "method": f"out-of-fold raw probability ({folds}-fold, grouped) -> binned isotonic "
                                          f"per (match type, value): equal-count bins of >= {MIN_BIN}, rates shrunk "
                                          f"by {PRIOR:g} pseudo-matches, PAV; SD: the cosine", "curves": table}
    return model_file, table_file, rows


def _write(path: Path, data: dict[str, Any]) -> None:
    text = re.sub(r"\[\s+(\S+),\s+(\S+)\s+\]", r"[\1, \2]", json.dumps(data, indent=1))  # a knot per line
    path.write_text(text + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds for the calibration")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    p.add_argument("--cache", type=Path, default=None,
                   help="keep measured signals in this file (e.g. benchmarks/out/signals.pkl) to refit faster")
    args = p.parse_args(argv)
    started = time.monotonic()
    dev = [e for e in examples(DEV_SPLIT) if e.licensed]
    model_file, table_file, rows = train(dev, args.folds, args.seed, args.cache)
    print("| match type | label source | n | label-1 share | out-of-fold AUROC | accuracy |")
    print("|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"fitted in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if not args.dry_run:
        _write(learned.MODEL_FILE, model_file)
        _write(calibration.TABLE, table_file)
        print(f"wrote {learned.MODEL_FILE} and {calibration.TABLE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
