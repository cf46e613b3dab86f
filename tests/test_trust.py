"""Trust arithmetic against cases computed by hand."""
import pytest

from evaluators.metrics.trust import (
    Confusion,
    Unsure,
    confusion,
    kappa,
    kappa_interval,
    suggest_threshold,
    trust,
    unsure_tally,
)

JUDGE = [1, 1, 0, 0, 1, 0, 1, 0, 1, 1]
HUMAN = [1, 0, 0, 0, 1, 1, 1, 0, 1, 0]


def test_confusion_counts_by_hand() -> None:
    assert confusion(JUDGE, HUMAN) == Confusion(tp=4, fp=2, fn=1, tn=3)
    # With "low" (0) as the call of interest the roles swap.
    assert confusion(JUDGE, HUMAN, positive=0) == Confusion(tp=3, fp=1, fn=2, tn=4)


def test_kappa_by_hand() -> None:
    # observed 7/10; chance 0.6*0.5 + 0.4*0.5 = 0.5; kappa (0.7 - 0.5) / 0.5 = 0.4
    assert kappa(JUDGE, HUMAN) == pytest.approx(0.4)
    assert kappa([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    # observed 3/4; chance 0.75*0.5 + 0.25*0.5 = 0.5; kappa 0.5
    assert kappa([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(0.5)


def test_kappa_undefined_is_none_not_zero() -> None:
    assert kappa([], []) is None
    assert kappa([1, 1, 1], [1, 1, 1]) is None


def test_trust_row_by_hand() -> None:
    t = trust("gr", JUDGE, HUMAN)
    assert (t.n_labelled, t.agreement, t.precision) == (10, pytest.approx(0.7), pytest.approx(4 / 6))
    assert t.kappa == pytest.approx(0.4)
    assert t.kappa_lo is not None and t.kappa_hi is not None
    assert -1.0 <= t.kappa_lo < 0.4 < t.kappa_hi <= 1.0
    assert trust("gr", JUDGE, HUMAN, positive=0).precision == pytest.approx(0.75)


def test_interval_is_seeded_and_narrows_with_more_labels() -> None:
    assert kappa_interval(JUDGE, HUMAN) == kappa_interval(JUDGE, HUMAN)
    lo, hi = kappa_interval(JUDGE, HUMAN)
    lo10, hi10 = kappa_interval(JUDGE * 10, HUMAN * 10)
    assert hi10 - lo10 < hi - lo
    assert lo10 <= 0.4 <= hi10


def test_a_target_without_labels_has_an_empty_row() -> None:
    row = trust("T2.5", [], []).row()
    assert row == {"target": "T2.5", "n_labelled": 0, "agreement": None, "kappa": None, "kappa_lo": None,
                   "kappa_hi": None, "precision": None}


def _fires_on(rp: dict[str, float | None]):
    """A one-rule world: T2.5 fires when rp is low (below its threshold)."""
    def fires(item: str, thresholds) -> set[str]:
        return {"T2.5"} if rp[item] is not None and rp[item] < thresholds["rp"] else set()
    return fires


def test_a_threshold_is_suggested_where_labels_split_the_scores() -> None:
    # People say T2.5 is right for rp at 0.6 or below, wrong from 0.7 up; today's 0.5 misses 0.6.
    rp = {f"i{k}": v for k, v in enumerate([0.2, 0.4, 0.6, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 0.3, 0.75, 0.55])}
    labels = [(i, "T2.5", int(v <= 0.6)) for i, v in rp.items()]
    s = suggest_threshold("rp", rp, labels, {"rp": 0.5}, _fires_on(rp))
    assert s.best == pytest.approx(0.65)  # the midpoint between 0.6 and 0.7
    assert s.kappa_best == pytest.approx(1.0)
    assert s.kappa_now is not None and s.kappa_now < 1.0
    assert s.n_labelled == 12


def test_too_few_labels_suggest_nothing() -> None:
    rp = {"a": 0.2, "b": 0.9}
    s = suggest_threshold("rp", rp, [("a", "T2.5", 1), ("b", "T2.5", 0)], {"rp": 0.5}, _fires_on(rp))
    assert s.best is None and "too few labels" in s.why and s.n_labelled == 2


def test_the_current_threshold_stays_when_it_is_already_best() -> None:
    rp = {f"i{k}": v for k, v in enumerate([0.1, 0.2, 0.3, 0.4, 0.45, 0.6, 0.7, 0.8, 0.9, 1.0])}
    labels = [(i, "T2.5", int(v < 0.5)) for i, v in rp.items()]
    s = suggest_threshold("rp", rp, labels, {"rp": 0.5}, _fires_on(rp))
    assert s.best is None and s.kappa_now == pytest.approx(1.0)


def test_a_fitted_threshold_diagnoses_each_item_at_most_twice_and_equals_trying_every_candidate() -> None:
    # Two rules read rp, with an unscored item and ties among the scores: the fit asks fires() about an
    # item once per side of its score, and finds what trying every candidate threshold finds.
    rp = {f"i{k}": v for k, v in enumerate([0.1, 0.2, 0.2, 0.35, 0.5, 0.55, 0.6, 0.8, 0.9, None, 0.45, 0.65])}
    labels = [(i, "T2.5", int(v is not None and v < 0.6)) for i, v in rp.items()]
    labels += [(i, "T2.1", int(v is not None and v >= 0.3)) for i, v in list(rp.items())[::2]]
    asked: dict[str, int] = {}

    def fires(item: str, thresholds) -> set[str]:
        asked[item] = asked.get(item, 0) + 1
        v = rp[item]
        return set() if v is None else ({"T2.5"} if v < thresholds["rp"] else {"T2.1"})

    s = suggest_threshold("rp", rp, labels, {"rp": 0.5}, fires)
    assert max(asked.values()) <= 2 and asked["i9"] == 1

    distinct = sorted({v for v in rp.values() if v is not None})
    candidates = sorted({round((a + b) / 2, 4) for a, b in zip(distinct, distinct[1:])} | {0.5})

    def kappa_at(t: float) -> float | None:
        return kappa([int(rule in fires(item, {"rp": t})) for item, rule, _ in labels], [h for _, _, h in labels])

    best_k, best_t = max(((k, t) for t in candidates if (k := kappa_at(t)) is not None),
                         key=lambda kt: (kt[0], -abs(kt[1] - 0.5)))
    assert (s.best, s.kappa_best, s.kappa_now) == (best_t, best_k, kappa_at(0.5))


def test_labels_on_unsure_calls_are_tallied_per_target_in_order() -> None:
    tally = unsure_tally([("gr", 1), ("sp1", 0), ("gr", 0), ("gr", 1)], ["sp1", "gr", "rp"])
    assert tally == [Unsure("sp1", 1, 0), Unsure("gr", 3, 2)]
    assert unsure_tally([], ["gr"]) == []
