"""GRAMMAR's robustness: groups, R and Acc, context comparison, correctness matching and parsing, and
the authors' artefacts reproduced with our pure functions."""
from __future__ import annotations

from pathlib import Path

import pytest

from evaluators import grammar
from evaluators.grammar import robustness
from evaluators.grammar.robustness import GroupCount, Outcome
from evaluators.judges.peers import grammar as grammar_prompts

ROOT = Path(__file__).resolve().parents[1]
AURP = ROOT.parent / "shared" / "datasets" / "grammar_aurp"


def test_groups_r_and_acc_on_hand_built_counts() -> None:
    counts = [GroupCount("A", "robust", 3, 3), GroupCount("A", "gap", 3, 0), GroupCount("A", "shaky", 3, 1, unscored=1),
              # right in cluster B only: not a gap group, and non-robust within A
              GroupCount("A", "split", 2, 0), GroupCount("B", "split", 2, 2)]
    classes = robustness.classify_groups(counts)
    assert classes == {"robust": "robust", "gap": "gap", "shaky": "non_robust", "split": "non_robust"}
    figs = robustness.figures(counts, classes)
    a = figs["A"]
    assert (a.items, a.correct, a.gap_items, a.unscored) == (11, 4, 3, 1)
    assert a.groups == {"gap": 1, "robust": 1, "non_robust": 2}
    assert a.robustness == pytest.approx(4 / 8) and a.lam == pytest.approx(3 / 11)
    assert a.accuracy == pytest.approx(4 / 8 * (1 - 3 / 11)) == pytest.approx(4 / 11)
    assert figs["B"].groups == {"gap": 0, "robust": 1, "non_robust": 0} and figs["B"].robustness == 1.0
    pooled = figs[grammar.ALL]
    assert (pooled.items, pooled.correct, pooled.gap_items) == (13, 6, 3)
    assert pooled.groups == {"gap": 1, "robust": 1, "non_robust": 2}  # "split" is one group, counted once


def test_all_gap_and_empty_clusters_have_no_robustness() -> None:
    only_gaps = robustness.figures([GroupCount("A", "g", 2, 0)])["A"]
    assert only_gaps.robustness is None and only_gaps.accuracy == 0.0 and only_gaps.lam == 1.0
    unjudged = robustness.figures([GroupCount("A", "g", 0, 0, unscored=3)])["A"]
    assert unjudged.robustness is None and unjudged.accuracy is None and unjudged.groups["gap"] == 0
    assert robustness.classify_groups([GroupCount("A", "g", 0, 0, unscored=3)]) == {}


def test_context_comparison_blames_the_lm_only_when_a_right_sibling_saw_the_same_documents() -> None:
    outs = [Outcome("ok", "c", "g1", True, ("d1",), ("d1",)),
            Outcome("same-docs", "c", "g1", False, ("d1",), ("d1",)),
            Outcome("other-docs", "c", "g1", False, ("d2",), ("d1",)),
            Outcome("no-ids", "c", "g1", False, ()),
            Outcome("unjudged", "c", "g1", None, ("d1",)),
            Outcome("gap", "c", "g2", False, ("d1",))]
    blame = robustness.context_comparison(outs)
    assert blame == {"same-docs": "lm", "other-docs": "retrieval", "no-ids": "unknown"}
    credited = robustness.credit_lm(outs, blame)
    assert [o.correct for o in credited] == [True, True, False, False, None, False]
    assert robustness.figures(robustness.count_groups(credited))["c"].robustness == pytest.approx(2 / 4)
    assert robustness.hit_rates(outs) == {"c": (2, 3), grammar.ALL: (2, 3)}


def test_answer_match_normalises_case_punctuation_and_dates() -> None:
    assert grammar_prompts.answer_match("2022-03-14", "Work began on 14 March 2022.")[0]
    assert grammar_prompts.answer_match("2022-03-14", "It started March 14th, 2022")[0]
    assert grammar_prompts.answer_match("Cork, Ireland", "in Cork (Ireland)")[0]
    ok, why = grammar_prompts.answer_match("Cork, Ireland", "in Cork")
    assert not ok and "'ireland'" in why
    assert not grammar_prompts.answer_match("2022-03-14", "14 March 2023")[0]
    assert not grammar_prompts.answer_match("Heron", "Herons nest here")[0]  # whole tokens only
    assert grammar_prompts.answer_match("Director of Projects", "works as director of projects")[0]
    assert not grammar_prompts.answer_match("", "anything")[0]


def test_table6_verdicts_parse_and_ambiguity_is_a_parse_error() -> None:
    assert grammar_prompts.parse_correctness("Correct") == 1
    assert grammar_prompts.parse_correctness("<output>Incorrect</output>") == 0
    for bad in ("Correct or Incorrect?", "", "<output>maybe</output>"):
        with pytest.raises(Exception, match="Correct or Incorrect"):
            grammar_prompts.parse_correctness(bad)


@pytest.mark.skipif(not AURP.exists(), reason=f"GRAMMAR's Aurp artefacts are not at {AURP}")
def test_aurp_groups_reproduce_from_their_stored_correctness() -> None:
    from benchmarks import grammar_aurp as aurp

    sm = aurp.semantic_matches()
    data = aurp.results("stratified", sm)
    assert all(r["judgement"] == r["derived"] for rows in data.values() for r in rows)
    found = aurp.analyse(aurp.outcomes(data))
    kinds = sorted(found["classes"].values())
    assert (kinds.count("gap"), kinds.count("robust"), kinds.count("non_robust")) == (112, 36, 9)
    short = found["plain"]["short"]
    assert (short.items, short.correct, short.gap_items) == (471, 129, 336)
