"""How far to trust a judge, from the owner's own labels: agreement, Cohen's kappa, precision.

Pure arithmetic over (judge call, human label) pairs of 0/1, one target at a time: a metric (the
judge's verdicts against people's corrections of them) or a Table-2 rule (fired or not, against
labels saying whether it names the component to fix). Nothing here reads a database or calls a judge.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

BOOTSTRAP_SAMPLES = 2000  # resamples for the kappa interval: the 2.5/97.5 percentiles settle to ~0.01
CSV_COLUMNS = ("target", "n_labelled", "agreement", "kappa", "kappa_lo", "kappa_hi", "precision")


@dataclass(frozen=True)
class Confusion:
    """Counts of (judge, human) pairs; "positive" is the call whose precision the owner cares about."""

    tp: int  # judge positive, human agrees
    fp: int  # judge positive, human says no
    fn: int  # judge negative, human says it should have been positive
    tn: int  # both negative

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


@dataclass(frozen=True)
class Trust:
    """One target's trust figures; every figure is None when it is not defined (no labels, one class)."""

    target: str
    n_labelled: int
    agreement: float | None
    kappa: float | None
    kappa_lo: float | None
    kappa_hi: float | None
    precision: float | None
    confusion: Confusion

    def row(self) -> dict[str, object]:
        """The CSV row: an empty cell (None) where a figure is not defined, never a 0."""
        return {name: getattr(self, name) for name in CSV_COLUMNS}


def confusion(judge: Sequence[int], human: Sequence[int], positive: int = 1) -> Confusion:
    """Count the pairs, with `positive` the judge's call of interest (1 = rule fired, 0 = a "low" verdict)."""
    pairs = list(zip(judge, human, strict=True))
    return Confusion(
        tp=sum(j == positive and h == positive for j, h in pairs),
        fp=sum(j == positive and h != positive for j, h in pairs),
        fn=sum(j != positive and h == positive for j, h in pairs),
        tn=sum(j != positive and h != positive for j, h in pairs),
    )


def _kappas(n: int, agree: np.ndarray, judged: np.ndarray, called: np.ndarray) -> np.ndarray:
    """Cohen's kappa from the counts over n pairs, element-wise (one resample per element); NaN where
    chance agreement is 1: both raters used one class only, so agreement says everything, kappa nothing."""
    observed, p_judge, p_human = agree / n, judged / n, called / n
    chance = p_judge * p_human + (1 - p_judge) * (1 - p_human)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance < 1.0, (observed - chance) / (1 - chance), np.nan)


def kappa(judge: Sequence[int], human: Sequence[int]) -> float | None:
    """Cohen's kappa of two 0/1 raters; None when undefined (no pairs, or chance agreement is 1)."""
    n = len(judge)
    if n == 0:
        return None
    agree = sum(j == h for j, h in zip(judge, human, strict=True))
    value = float(_kappas(n, np.array(agree), np.array(sum(judge)), np.array(sum(human))))
    return None if math.isnan(value) else value


def _draws(rng: random.Random, n: int, count: int) -> np.ndarray:
    """`count` successive rng.randrange(n), without a Python call each: CPython's randrange(n) takes the
    top n.bit_length() bits of one 32-bit Mersenne Twister word and draws again while they are >= n,
    and getrandbits(32 * m) is the next m such words, the first least significant."""
    bits = n.bit_length()
    found: list[np.ndarray] = []
    while (have := sum(len(f) for f in found)) < count:
        words = -(-(count - have) * 2**bits // n) + 64  # enough for the rejections, on average and then some
        raw = np.frombuffer(rng.getrandbits(32 * words).to_bytes(4 * words, "little"), dtype="<u4")
        drawn = raw >> np.uint32(32 - bits)
        found.append(drawn[drawn < n])
    return np.concatenate(found)[:count]


def kappa_interval(
    judge: Sequence[int], human: Sequence[int], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """The bootstrap 95 % interval of kappa (percentile method, resampling pairs).

    Resamples where kappa is undefined are skipped; None when fewer than half of them are defined.
    Seeded, so the same labels always give the same interval: resample i is the pairs at
    random.Random(seed).randrange(n) drawn i * n to (i + 1) * n - 1, counted in numpy.
    """
    if len(judge) != len(human):
        raise ValueError("judge and human differ in length")
    # The same pairs give the same interval: a threshold change re-labels only some targets' pairs.
    return _kappa_interval(tuple(int(x) for x in judge), tuple(int(x) for x in human), samples, seed)


@lru_cache(maxsize=256)
def _kappa_interval(
    judge: tuple[int, ...], human: tuple[int, ...], samples: int, seed: int
) -> tuple[float, float] | None:
    n = len(judge)
    if not n:
        return None
    j, h = np.asarray(judge, dtype=np.int64), np.asarray(human, dtype=np.int64)
    picks = _draws(random.Random(seed), n, samples * n).reshape(samples, n)
    values = _kappas(n, (j == h)[picks].sum(axis=1), j[picks].sum(axis=1), h[picks].sum(axis=1))
    values = np.sort(values[~np.isnan(values)])
    if len(values) < samples / 2:
        return None
    last = len(values) - 1
    return float(values[int(0.025 * last)]), float(values[int(0.975 * last)])


def trust(target: str, judge: Sequence[int], human: Sequence[int], positive: int = 1) -> Trust:
    """Every trust figure of one target from its labelled pairs."""
    counts = confusion(judge, human, positive)
    n = counts.n
    interval = kappa_interval(judge, human)
    called = counts.tp + counts.fp
    return Trust(
        target=target,
        n_labelled=n,
        agreement=(counts.tp + counts.tn) / n if n else None,
        kappa=kappa(judge, human),
        kappa_lo=interval[0] if interval else None,
        kappa_hi=interval[1] if interval else None,
        precision=counts.tp / called if called else None,
        confusion=counts,
    )


@dataclass(frozen=True)
class Pair:
    """One labelled call: the judge's 0/1 and the person's, on an item (and a component for a metric)."""

    target: str
    item_id: str
    judge: int
    human: int
    component_idx: int | None = None


def rule_pairs(
    rule_labels: Sequence[tuple[str, str, int]],
    triage: Mapping[str, int],
    fired: Mapping[str, set[str]],
    rules: Sequence[str],
) -> list[Pair]:
    """Labelled calls of the Table-2 rules: judge 1 when the rule fires on the item at the current thresholds.

    `rule_labels` are (item, rule, label) as saved. A confirmed (1) or false-alarm (0) triage note on
    an item labels each rule that fires on it, unless that rule has a label of its own there.
    """
    pairs = [Pair(rule, item, int(rule in fired.get(item, ())), label) for item, rule, label in rule_labels]
    explicit = {(p.item_id, p.target) for p in pairs}
    pairs += [
        Pair(rule, item, 1, label)
        for item, label in triage.items()
        for rule in rules
        if rule in fired.get(item, ()) and (item, rule) not in explicit
    ]
    return pairs


def report(pairs: Sequence[Pair], targets: Sequence[str], positive: Mapping[str, int]) -> list[Trust]:
    """One Trust per target, in the given order; a target without labels has an empty row."""
    by_target: dict[str, list[Pair]] = {t: [] for t in targets}
    for p in pairs:
        by_target.setdefault(p.target, []).append(p)
    return [trust(t, [p.judge for p in ps], [p.human for p in ps], positive.get(t, 1)) for t, ps in by_target.items()]


def disagreements(pairs: Sequence[Pair]) -> list[Pair]:
    """The labelled calls where judge and person differ, by target and item."""
    return sorted(
        (p for p in pairs if p.judge != p.human),
        key=lambda p: (p.target, p.item_id, -1 if p.component_idx is None else p.component_idx),
    )


@dataclass(frozen=True)
class Unsure:
    """People's labels on one target's calls the judge was unsure of (p inside its band). The judge made
    no call there, so they are neither agreement nor disagreement: they say how people decided them."""

    target: str
    n_labelled: int
    said_one: int  # how many of them people labelled 1


def unsure_tally(labels: Sequence[tuple[str, int]], targets: Sequence[str]) -> list[Unsure]:
    """Per target with labels on unsure calls, in the given order (others after): how many, and how many
    people labelled 1. `labels` are (target, human label) pairs."""
    counts: dict[str, list[int]] = {}
    for target, human in labels:
        counts.setdefault(target, []).append(int(human))
    order = [t for t in targets if t in counts] + [t for t in counts if t not in targets]
    return [Unsure(t, len(counts[t]), sum(counts[t])) for t in order]


MIN_LABELS_TO_SUGGEST = 10  # fewer labelled rule calls than this cannot move a threshold with any confidence


@dataclass(frozen=True)
class Suggestion:
    """A metric's threshold fitted to rule labels: the best one, its kappa against the current one's."""

    metric: str
    current: float
    n_labelled: int
    best: float | None = None  # None: too few labels, or nothing beats the current threshold
    kappa_now: float | None = None
    kappa_best: float | None = None
    why: str = ""


def _candidates(values: Mapping[str, float | None], midpoints: Iterable[float] | None, current: float) -> list[float]:
    """The thresholds to try: the midpoints (from `values` when none are given) rounded to 4 places, and
    the current one."""
    if midpoints is None:
        distinct = sorted({float(v) for v in values.values() if v is not None})
        midpoints = [(a + b) / 2 for a, b in zip(distinct, distinct[1:])]
    return sorted({round(m, 4) for m in midpoints} | {current})


def _kappas_at(
    metric: str,
    values: Mapping[str, float | None],
    labels: Sequence[tuple[str, str, int]],
    thresholds: Mapping[str, float],
    fires: Callable[[str, Mapping[str, float]], set[str]],
    candidates: Sequence[float],
) -> dict[float, float | None]:
    """The kappa of the labels against the calls at each candidate threshold of `metric`."""
    items = {l[0] for l in labels}
    # An item's calls move with the threshold only as its score falls below it or not: two calls of
    # fires() per item at most, whatever the number of candidates.
    calls: dict[tuple[str, bool], set[str]] = {}

    def fired_at(item: str, t: float, at: Mapping[str, float]) -> set[str]:
        key = (item, (v := values[item]) is not None and v < t)
        if key not in calls:
            calls[key] = fires(item, at)
        return calls[key]

    def kappa_at(t: float) -> float | None:
        at = {**thresholds, metric: t}
        fired = {item: fired_at(item, t, at) for item in items}
        return kappa([int(rule in fired[item]) for item, rule, _ in labels], [h for _, _, h in labels])

    # A threshold moves the calls only where it passes a labelled item's score: candidates with the
    # same labelled scores below them have one kappa, computed once.
    labelled = sorted(float(v) for item in items if (v := values[item]) is not None)
    by_side: dict[int, float | None] = {}
    for t in candidates:
        side = bisect_left(labelled, t)
        if side not in by_side:
            by_side[side] = kappa_at(t)
    return {t: by_side[bisect_left(labelled, t)] for t in candidates}


def suggest_threshold(
    metric: str,
    values: Mapping[str, float | None],
    labels: Sequence[tuple[str, str, int]],
    thresholds: Mapping[str, float],
    fires: Callable[[str, Mapping[str, float]], set[str]],
    midpoints: Iterable[float] | None = None,
) -> Suggestion:
    """The threshold of `metric` whose fired rules agree best (highest kappa) with the rule labels.

    `values` are the items' scores of this metric (at least every labelled item's: a label on an item
    not in it is left out), `labels` (item, rule, label) for rules that read it, and
    `fires(item, thresholds)` the rules that fire on an item, which must read the metric's threshold
    only as whether the item's value lies below it (as Table 2's levels do). Candidates are the
    midpoints between the run's consecutive distinct scores, rounded to 4 places, so every way of
    splitting them is tried once: `midpoints` when given (a query computes them over the whole run,
    or per 0.0001 wide bucket the least and greatest of them, which round to the same set), else taken
    from `values`.
    """
    current = thresholds[metric]
    labels = [l for l in labels if l[0] in values]
    if len(labels) < MIN_LABELS_TO_SUGGEST:
        return Suggestion(
            metric,
            current,
            len(labels),
            why=f"too few labels to suggest a threshold: {len(labels)} of {MIN_LABELS_TO_SUGGEST} needed",
        )

    candidates = _candidates(values, midpoints, current)
    kappas = _kappas_at(metric, values, labels, thresholds, fires, candidates)
    now = kappas[current]  # the current threshold is one of the candidates
    scored = [(k, t) for t in candidates if (k := kappas[t]) is not None]
    if not scored:
        return Suggestion(
            metric,
            current,
            len(labels),
            kappa_now=now,
            why="kappa is undefined at every threshold: the labels or calls are all one class",
        )
    return _best(metric, current, len(labels), now, scored)


def _best(
    metric: str, current: float, n_labelled: int, now: float | None, scored: list[tuple[float, float]]
) -> Suggestion:
    """The suggestion from the (kappa, threshold) pairs that have a kappa: the highest kappa, among equals
    the one closest to the current threshold, so a tie never moves it; none when it does no better."""
    k_best, t_best = max(scored, key=lambda kt: (kt[0], -abs(kt[1] - current)))
    if now is not None and k_best <= now:
        return Suggestion(
            metric,
            current,
            n_labelled,
            kappa_now=now,
            kappa_best=now,
            why="the current threshold already agrees best with the labels",
        )
    return Suggestion(
        metric,
        current,
        n_labelled,
        t_best,
        now,
        k_best,
        why=f"kappa {k_best:.2f} at {t_best:g} against {'undefined' if now is None else f'{now:.2f}'} "
        f"now, on {n_labelled} labels",
    )
