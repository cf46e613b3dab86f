"""benchmarks/people.py's pieces on hand-made inputs: the RAGChecker Spearman protocol, word overlap,
AUROC with unscored units, and the scores read back from a real DuckDB run (offline judge)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import people
from benchmarks.agreement import RunCost
from evaluators.core.records import Item
from evaluators.storage import store

LABELS = people.LABELS


def _instance(k: int, labels: tuple[int, int], answers: tuple[str, str] = ("one answer.", "another answer.")
              ) -> people.Instance:
    return people.Instance(k, "kiwi", f"question {k}?", f"reference {k}.", answers,
                           tuple({label: y for label in LABELS} for y in labels), ((0.0,) * 3, (0.0,) * 3))


# Precision of (model1, model2) per instance: deltas 0.1, 0.5, 0.9, and an unscored model2 for D.
PRECISION = {0: (0.4, 0.5), 1: (0.2, 0.7), 2: (0.0, 0.9), 3: (0.3, None)}
INSTANCES = [_instance(0, (-1, -2)), _instance(1, (0, 1)), _instance(2, (2, 2)), _instance(3, (0, 0))]


def test_the_spearman_protocol_correlates_each_annotator_s_label_with_the_delta() -> None:
    got = people.meta_eval(INSTANCES, lambda inst, side: (PRECISION[inst.id][side], 1.0, None))
    correctness = got["correctness_label"]
    # Scored records: x = [.1,.1,.5,.5,.9,.9] against y = [-1,-2,0,1,2,2]; ranks give 16 / sqrt(16 * 17).
    assert correctness.rho_scored == pytest.approx(4 / math.sqrt(17))
    assert (correctness.n, correctness.n_scored, correctness.scored) == (8, 6, {0, 1, 2})  # D's records counted apart
    # All records, as RAGChecker fills NaN: D's delta is the median scored delta, 0.5, against labels 0, 0,
    # which ranks give 36 / sqrt(36 * 39.5).
    assert correctness.rho == pytest.approx(6 / math.sqrt(39.5))
    # Recall never differs between the answers: no correlation at all, not a 0.
    assert got["completeness_label"].rho is None
    assert got["overall_label"].n_scored == 0


def test_the_annotators_are_correlated_with_each_other() -> None:
    # [-1, 0, 2, 0] against [-2, 1, 2, 0]: ranks [1, 2.5, 4, 2.5] and [1, 3, 4, 2].
    assert people.annotators(INSTANCES)["overall_label"] == pytest.approx(math.sqrt(0.9))


def test_an_answer_reads_precision_recall_and_f1_and_an_empty_answer_scores_0() -> None:
    inst = _instance(0, (1, 1), answers=("  ", "The museum opens at 10:00."))
    precision, recall = people.ragchecker_items(inst, 1, "gr")
    assert (precision.sources, precision.response) == ((inst.gt_answer,), inst.answers[1])
    assert (recall.sources, recall.response) == ((inst.answers[1],), inst.gt_answer)
    assert people.ragchecker_items(inst, 0, "gr") == []
    scores = {(precision.id, "gr"): 1.0, (recall.id, "gr"): 0.5}
    metric = people.ragchecker_metric(scores, "gr")
    assert metric(inst, 0) == (0.0, 0.0, 0.0)
    assert metric(inst, 1) == pytest.approx((1.0, 0.5, 2 / 3))
    del scores[(recall.id, "gr")]  # unscored recall: no F1 either
    assert metric(inst, 1) == (1.0, None, None)
    [one] = people.ragchecker_items(inst, 1, "ref")
    assert (one.sources, one.response, one.reference) == ((inst.gt_answer,), inst.answers[1], inst.gt_answer)
    ref = people.ragchecker_metric({(one.id, "ref_precision"): 0.8, (one.id, "ref_recall"): 0.4,
                                    (one.id, "ref_f1"): 0.53}, "ref")
    assert ref(inst, 1) == (0.8, 0.4, 0.53)


def test_the_ref_protocol_names_the_metrics_the_engine_lacks() -> None:
    assert people.missing_metrics("ref", {"gr": None, "ref_recall": None}) == ["ref_precision", "ref_f1"]
    assert people.missing_metrics("gr", {"gr": None}) == []


def test_word_overlap_is_the_share_of_content_words_in_the_best_source() -> None:
    claim = "The museum opens at 10:00 on Sundays."  # museum, open, 10:00, sunday
    assert people.overlap(claim, ["The museum opens at 8:00.", "On Sundays the museum opens at 10:00."]) == 1.0
    assert people.overlap(claim, ["The museum opens at 8:00."]) == 0.5
    assert people.overlap(claim, []) == 0.0
    # Per claim, then the mean: the museum claim is found, the cafe claim is not.
    assert people.claims_overlap("The museum opens at 10:00. The cafe sells tea.",
                                 ["The museum opens at 10:00."]) == 0.5
    inst = _instance(0, (0, 0), answers=("", "The museum opens at 10:00. The cafe sells tea."))
    inst = people.Instance(0, "kiwi", "When?", "The museum opens at 10:00.", inst.answers, inst.labels, inst.peer)
    assert people.overlap_metric(inst, 0) == (0.0, 0.0, 0.0)
    assert people.overlap_metric(inst, 1) == pytest.approx((0.5, 1.0, 2 / 3))


def test_auroc_over_scored_units_and_with_unscored_ones_ranked_at_one_half() -> None:
    scores, labels = [1.0, None, 0.0, None], [1, 1, 0, 0]
    assert people.auroc_scored(scores, labels) == 1.0
    # positives 1.0, 0.5 against negatives 0.0, 0.5: three wins and one tie out of four pairs.
    assert people.auroc_all(scores, labels) == 0.875
    assert people.auroc_scored([None, 0.4], [1, 0]) is None  # no scored positive
    assert people.balanced_accuracy([1, 0, 0, 0], labels) == 0.75
    assert people.balanced_accuracy([1, 1], [1, 1]) is None


def test_the_scored_units_row_compares_word_overlap_on_the_same_units() -> None:
    source = ("The museum opens at 10:00.",)
    cases = [people.Case(f"c{k}", Item(f"c{k}", "When?", source, response), supported)
             for k, (response, supported) in enumerate([
                 ("The museum opens at 10:00.", True),          # GR 1, overlap 1
                 ("The cafe sells tea.", True),                 # unscored, overlap 0
                 ("The museum opens on Sundays at 8:00.", False),  # GR 0, overlap 0.5
                 ("The museum opens at 10:00.", False)])]      # unscored, overlap 1
    scores = {("c0", "gr"): 1.0, ("c1", "gr"): None, ("c2", "gr"): 0.0}
    expected = {("c0", "gr"): 0.9, ("c1", "gr"): 0.55, ("c2", "gr"): 0.2}  # c3's verdict failed: no p
    scored, every, soft, unscored, balanced = people.support_rows("wice", cases, scores, expected, "dev")
    assert (scored.judge, scored.overlap, scored.n, scored.n_scored) == ("1.00", "1.00", 2, 2)
    assert (every.judge, every.overlap, every.n, every.n_scored) == ("0.88", "0.38", 4, 2)
    # 0.9 and 0.55 against 0.2 and c3 at 0.5: every pair in order
    assert (soft.judge, soft.overlap, soft.n, soft.n_scored) == ("1.00", "0.38", 4, 3)
    assert unscored.judge == "0.50 (2 of 4)"
    assert balanced.judge == "0.75"  # GR = 1 on one of two supported, no false alarm


def test_a_sample_is_seeded_in_file_order_and_grows_by_adding_units() -> None:
    units = list(range(40))
    small, large = people.sample(units, 5, "wice"), people.sample(units, 12, "wice")
    assert small == sorted(small) and len(small) == 5 and set(small) < set(large)
    assert small == people.sample(units, 5, "wice") != people.sample(units, 5, "lfqa")
    assert people.sample(units, None, "wice") == units == people.sample(units, 99, "wice")


def test_scores_come_back_from_the_engine_run_and_a_response_with_no_claim_scores_0(tmp_path: Path) -> None:
    source = "The museum opens at 10:00 every day."
    grounded = Item("grounded", "When does the museum open?", (source,), "The museum opens at 10:00 every day.")
    nothing = Item("nothing", "When does the museum open?", (source,), "...")
    engine = people.Engine("offline", tmp_path / "p.duckdb", "dev")
    cost = RunCost()
    scores = engine.score([grounded, nothing, grounded], "hand", ["gr"], cost)
    assert scores == {("grounded", "gr"): 1.0, ("nothing", "gr"): 0.0}
    assert cost.judged == 2  # the repeated item is scored once
    engine.score([grounded, nothing], "hand", ["gr"], cost)
    assert cost.judged == 2  # a rerun judges nothing
    # read as expected: the mean of the stored verdicts' p; no claim still scores 0
    stored = store.query(engine.db, "SELECT avg(p) AS p, count(*) AS n FROM verdicts WHERE run_id = $run AND "
                         "item_id = 'grounded' AND metric = 'gr'", {"run": engine.run("hand")})
    assert stored.n[0] >= 1 and 0.5 < stored.p[0] < 1.0
    assert engine.expected("hand") == {("grounded", "gr"): pytest.approx(stored.p[0]), ("nothing", "gr"): 0.0}


def test_bad_options_and_missing_data_stop_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(people.PATHS, "wice", tmp_path / "absent.jsonl")  # as where ../shared is not there
    for argv, says in ((["--sets", "wice,nope"], "nope"), (["--judge", "offline>>local"], "tier 2"),
                       (["--sets", "wice"], "absent.jsonl not found")):
        assert people.main(argv + ["--db", str(tmp_path / "p.duckdb")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and says in err
    assert not (tmp_path / "p.duckdb").exists()


@pytest.mark.skipif(not people.WICE.exists(), reason="../shared/datasets/wice is absent")
def test_wice_claims_carry_their_oracle_chunks_and_label() -> None:
    cases = people.load_wice("dev")
    assert len(cases) == 349 and sum(c.supported for c in cases) == 114  # the oracle-chunk file's labels
    first = cases[0]
    assert first.id == "dev02986" and first.item.query == "Roger Hedgecock: Other endeavors"
    assert len(first.item.sources) == 3 and first.item.response.startswith("Arnold is currently the publisher")
