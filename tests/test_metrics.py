"""Pure aggregation and Table-2 rules (and our X1), on hand-written verdicts: THELMA Appendix A's golden numbers."""
from __future__ import annotations

import numpy as np
import pytest

from evaluators.core.records import Score, Status, Verdict
from evaluators.metrics import diagnosis
from evaluators.metrics.thelma import aggregate_coverage, aggregate_mean, sd_verdicts

OK, ERR, UNP = Status.OK, Status.ERROR, Status.UNPARSED


def verdicts(metric: str, kind: str, values: list[float | None], statuses: list[Status] | None = None,
             targets: list[str] | None = None, idx: list[int] | None = None) -> list[Verdict]:
    statuses = statuses or [OK] * len(values)
    return [Verdict(item_id="a", metric=metric, component_kind=kind,
                    component_idx=(idx or list(range(len(values))))[k],
                    target=(targets or ["query"] * len(values))[k], value=v, status=s)
            for k, (v, s) in enumerate(zip(values, statuses))]


def test_appendix_a_golden_numbers() -> None:
    # A.1: source (a) essential, (b) not.
    assert aggregate_mean("a", "sp1", verdicts("sp1", "source", [1, 0])).value == 0.5
    # A.2: one source; sub-question (a) answered, (b) not.
    sqc = verdicts("sqc", "subquestion", [1, 0], targets=["source:0", "source:0"])
    assert aggregate_coverage("a", "sqc", sqc).value == 0.5
    # A.3: seven claims, essential 1,1,0,0,0,0,1.
    rp = aggregate_mean("a", "rp", verdicts("rp", "claim", [1, 1, 0, 0, 0, 0, 1]))
    assert rp.value == pytest.approx(3 / 7) and round(rp.value, 2) == 0.43 and (rp.n_scored, rp.n_total) == (7, 7)
    # A.4: the short response addresses the first sub-question only.
    assert aggregate_mean("a", "rqc", verdicts("rqc", "subquestion", [1, 0])).value == 0.5
    # A.5: sentences (a) and (c) repeat each other; (b) is distinct.
    sim = np.array([[1.0, 0.30, 0.93], [0.30, 1.0, 0.35], [0.93, 0.35, 1.0]])
    sd = aggregate_mean("a", "sd", sd_verdicts("a", sim, threshold=0.75))
    assert sd.value == pytest.approx(1 / 3)
    # A.6: claims (a) and (g) carry the wrong year.
    assert aggregate_mean("a", "gr", verdicts("gr", "claim", [0, 1, 1, 1, 1, 1, 0])).value == pytest.approx(5 / 7)


def test_failures_are_counted_not_scored() -> None:
    score = aggregate_mean("a", "gr", verdicts("gr", "claim", [1, None, 0], [OK, UNP, OK]))
    assert (score.value, score.n_scored, score.n_total, score.status) == (0.5, 2, 3, OK)
    failed = aggregate_mean("a", "gr", verdicts("gr", "claim", [None, None], [ERR, ERR]))
    assert (failed.value, failed.n_scored, failed.n_total, failed.status) == (None, 0, 2, ERR)


def test_nothing_to_score_is_none_not_zero() -> None:
    empty = aggregate_mean("a", "rp", [])
    assert empty.value is None and empty.status is Status.EMPTY and empty.n_total == 0


def test_coverage_any_source_or_whole_set() -> None:
    # q0: only the whole set answers (multi-hop) -> covered; q1: nothing answers -> not covered.
    v = verdicts("sqc", "subquestion", [0, 0, 1, 0, 0, 0], idx=[0, 0, 0, 1, 1, 1],
                 targets=["source:0", "source:1", "sources"] * 2)
    score = aggregate_coverage("a", "sqc", v)
    assert (score.value, score.n_scored, score.n_total) == (0.5, 2, 2)


def test_coverage_with_a_failed_verdict_is_not_guessed() -> None:
    # No OK 1 for q0 and one verdict failed: it might have been the 1, so q0 is not scored.
    v = verdicts("sqc", "subquestion", [0, None, 1], [OK, ERR, OK], idx=[0, 0, 1],
                 targets=["source:0", "sources", "source:0"])
    score = aggregate_coverage("a", "sqc", v)
    assert (score.value, score.n_scored, score.n_total) == (1.0, 1, 2)
    # ... but a failure beside an OK 1 does not matter.
    v = verdicts("sqc", "subquestion", [1, None], [OK, ERR], idx=[0, 0], targets=["source:0", "sources"])
    assert aggregate_coverage("a", "sqc", v).value == 1.0


def test_sd_single_sentence_is_distinct() -> None:
    assert aggregate_mean("a", "sd", sd_verdicts("a", np.array([[1.0]]))).value == 1.0


@pytest.mark.parametrize("scores, fired", [
    ({"sd": 0.5, "rp": 0.9}, ["T2.1"]),
    ({"sqc": 0.5, "rqc": 0.5}, ["T2.2"]),
    ({"sp1": 0.3, "sqc": 1.0}, ["T2.3"]),
    ({"sp1": None, "sp2": 0.1, "sqc": 1.0}, ["T2.3"]),
    ({"rqc": 0.5, "sqc": 1.0}, ["T2.4"]),
    ({"rp": 0.2, "sp1": 1.0}, ["T2.5"]),
    ({"sqc": 0.5, "rqc": 1.0, "gr": 0.4}, ["T2.6"]),
    ({"sqc": 0.5, "rqc": 1.0, "gr": 1.0}, []),
    ({"sqc": None, "rqc": 0.0}, []),  # not scored is neither low nor high
    ({}, []),
])
def test_table2_rules(scores: dict[str, float | None], fired: list[str]) -> None:
    assert [r.id for r in diagnosis.diagnose(scores)] == fired


@pytest.mark.parametrize("scores, fired", [
    ({"sqc": 1.0, "gr": 0.4}, ["X1"]),
    ({"sqc": 1.0, "rqc": 1.0, "gr": 0.6}, ["X1"]),
    ({"sqc": 0.75, "gr": 0.79}, ["X1"]),  # SQC at its threshold is high; GR just below its own is low
    ({"sqc": 1.0, "gr": 0.8}, []),
    ({"sqc": 0.5, "gr": 0.4}, []),  # retrieval does not cover the query: not the generator's invention
    ({"sqc": 0.5, "rqc": 1.0, "gr": 0.4}, ["T2.6"]),  # SQC low: T2.6, never X1 beside it
    ({"sqc": None, "gr": 0.4}, []),
    ({"sqc": 1.0, "gr": None}, []),
])
def test_x1_names_the_generator_when_retrieval_covers_the_query_but_claims_are_unsupported(
        scores: dict[str, float | None], fired: list[str]) -> None:
    assert [r.id for r in diagnosis.diagnose(scores)] == fired


def test_x1_is_quiet_when_gr_or_sqc_is_undecided_or_unsure() -> None:
    sqc, gr = Score("a", "sqc", 1.0, 2, 2, OK), Score("a", "gr", 0.0, 2, 2, OK)
    assert [r.id for r in diagnosis.diagnose({"sqc": sqc, "gr": gr})] == ["X1"]
    unsure_gr = Score("a", "gr", None, 0, 3, Status.UNSURE, n_unsure=3)
    thin_gr = Score("a", "gr", 0.0, 1, 4, OK, n_unsure=3)  # one confident verdict against three unsure
    unsure_sqc = Score("a", "sqc", None, 0, 1, Status.UNSURE, n_unsure=1)
    thin_sqc = Score("a", "sqc", 1.0, 1, 3, OK, n_unsure=2)
    failed_gr = Score("a", "gr", None, 0, 1, Status.TIMEOUT)
    for scores in ({"sqc": sqc, "gr": unsure_gr}, {"sqc": sqc, "gr": thin_gr}, {"sqc": unsure_sqc, "gr": gr},
                   {"sqc": thin_sqc, "gr": gr}, {"sqc": sqc, "gr": failed_gr}):
        assert diagnosis.diagnose(scores) == [], scores


def test_x1_is_marked_ours_wherever_a_rule_is_named() -> None:
    from evaluators.dashboard import markup

    x1 = diagnosis.RULES["X1"]
    assert (x1.ours, x1.name, x1.components) == (True, "X1 (ours)", "Generator")
    assert x1.origin != diagnosis.RULES["T2.6"].origin and "ours" in x1.origin
    assert markup.rule_label("X1") == "X1 (ours) · SQC high, GR low" and markup.rule_label("T2.6").startswith("T2.6 · ")
    assert not any(r.ours for rid, r in diagnosis.RULES.items() if rid != "X1")


def test_thresholds_change_the_diagnosis() -> None:
    scores = {"sqc": 0.5, "rqc": 0.5}
    assert [r.id for r in diagnosis.diagnose(scores)] == ["T2.2"]
    assert diagnosis.diagnose(scores, diagnosis.parse_thresholds("sqc=0.4,rqc=0.4")) == []


@pytest.mark.parametrize("text", ["bogus=0.5", "gr=1.5", "gr=high"])
def test_bad_thresholds_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        diagnosis.parse_thresholds(text)


@pytest.mark.parametrize("scores, fired", [
    ({"sp1": 0.5, "sqc": 1.0}, ["T2.3"]),  # one of two sources not essential: no majority, retriever named
    ({"sp1": 4 / 7, "sqc": 1.0}, []),  # four of seven essential: a majority
    ({"rp": 0.5, "sp1": 1.0}, ["T2.5"]),  # half the claims extraneous: the response carries extraneous content
    ({"rp": 0.5, "sp1": 0.5}, []),  # sources essential only by half: not T2.5's "majority essential"
    ({"rp": 4 / 7, "sp1": 1.0}, []),
])
def test_sp1_and_rp_are_high_only_above_half(scores: dict[str, float], fired: list[str]) -> None:
    # Table 2's T2.5 reads SP1 high as "the majority of retrieved sources are essential": exactly
    # half is not a majority, so it reads low (T2.3's "some sources only loosely relevant"); RP alike.
    assert [r.id for r in diagnosis.diagnose(scores)] == fired
