"""The offline judge's learned decisions and calibrated p: models whose weights keep their signals'
directions, a monotone mapping that agrees with the judge's value, both fitted on licensed development
data only, and a p stored on every THELMA verdict of a real offline run."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import calibration as bench
from benchmarks import labelled, train_judge
from evaluators.core.confidence import is_unsure
from evaluators.core.records import CALIBRATED, LABEL, Item, Status
from evaluators.judges import calibration, learned, registry
from evaluators.judges.calibration import MATCH_TYPES, PROMPT_TYPES, SD
from evaluators.judges.offline import OfflineJudge
from evaluators.metrics.registry import THELMA
from evaluators.metrics.thelma import sd_verdicts
from evaluators.runs import runner
from evaluators.storage import store

GRID = [x / 100 for x in range(-5, 106)]  # the whole score range, and a little beyond it


@pytest.mark.parametrize("match_type", MATCH_TYPES)
@pytest.mark.parametrize("value", [0, 1])
def test_calibrated_p_is_monotone_in_the_evidence_score(match_type: str, value: int) -> None:
    ps = [calibration.probability(match_type, value, s) for s in GRID]
    # SD's score is a cosine: the more similar, the less likely the sentence is distinct.
    steps = np.diff(ps) if match_type != SD else -np.diff(ps)
    assert (steps >= 0).all(), ps


@pytest.mark.parametrize("match_type", MATCH_TYPES)
def test_calibrated_p_agrees_with_the_judges_value(match_type: str) -> None:
    for score in GRID:
        assert 0.5 <= calibration.probability(match_type, 1, score) <= 1.0
        assert 0.0 <= calibration.probability(match_type, 0, score) < 0.5


def test_fitted_table_loads_and_covers_every_match_type_from_development_data_only() -> None:
    curves = calibration.read_table()
    assert set(curves) == set(MATCH_TYPES)
    for match_type in MATCH_TYPES:
        assert set(curves[match_type]) == {0, 1}
        for curve in curves[match_type].values():
            assert list(curve.scores) == sorted(curve.scores)
            assert all(0.0 <= p <= 1.0 for p in curve.probs)
    for path in (calibration.TABLE, learned.MODEL_FILE):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert "licensed development data only" in data["fitted_on"]
        assert not any("test" in source or "held" in source for source in data["matches"])
        assert {source.split(":")[0] for source in data["matches"]} <= labelled.LICENSED  # no WikiEval, no LFQA


def test_table_missing_a_match_type_is_refused(tmp_path: Path) -> None:
    data = json.loads(calibration.TABLE.read_text(encoding="utf-8"))
    del data["curves"][SD]
    broken = tmp_path / "calibration.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(KeyError):
        calibration.read_table(broken)


def test_every_mapped_prompt_has_an_offline_answer() -> None:
    assert set(PROMPT_TYPES) <= set(registry.OFFLINE_ANSWERS)
    # SD is decided from embeddings, an answer phrase by calibration.match_type on the response.
    assert set(PROMPT_TYPES.values()) | {SD, calibration.ANSWER_PHRASE} == set(MATCH_TYPES)


def test_the_demo_s_grammar_extractive_answers_are_decided_at_the_default_band() -> None:
    """Our GRAMMAR demo's extractive answers (development data, in the fit) read answering, not unsure;
    another question's answer of another kind does not read as a confident 1."""
    examples = labelled.grammar_examples()
    judged = {source: [bench.judge(e) for e in examples if e.source == source]
              for source in ("grammar:extracted", "grammar:other-kind")}
    extracted = [j for j in judged["grammar:extracted"] if j is not None]
    assert extracted and all(j.example.match_type == calibration.ANSWER_PHRASE for j in extracted)
    sure = [j for j in extracted if j.value == 1 and not is_unsure(bench._p(j), CALIBRATED)]
    assert len(sure) >= 0.8 * len(extracted), [(j.example.variables, bench._p(j)) for j in extracted]
    wrong = [j for j in judged["grammar:other-kind"] if j is not None and j.value == 1]
    assert sum(bench._p(j) for j in wrong) / len(wrong) < sum(bench._p(j) for j in sure) / len(sure)


def test_fit_is_monotone_keeps_ties_together_and_refuses_held_out_data() -> None:
    points = [(0.1, 0)] * 20 + [(0.5, 0)] * 10 + [(0.5, 1)] * 10 + [(1.0, 1)] * 40 + [(1.0, 0)] * 2
    fitted = train_judge.fit_curve(points, increasing=True)
    scores = [s for s, _ in fitted["knots"]]
    probs = [p for _, p in fitted["knots"]]
    assert scores == sorted(scores) and len(set(scores)) == len(scores)  # one knot per score at most
    assert probs == sorted(probs) and 0.0 < probs[0] and probs[-1] < 1.0  # a few matches never give certainty
    # A tie group fills one bin, and the short tail after the next bin joins it: still one knot per bin.
    tailed = [(k / 100, k % 2) for k in range(14)] + [(0.2, 1)] * 10 + [(0.3 + k / 100, 1) for k in range(21)]
    knots = train_judge.fit_curve(tailed, increasing=True)["knots"]
    assert len(knots) <= 2 and [s for s, _ in knots] == sorted({s for s, _ in knots})
    falling = train_judge.fit_curve(points, increasing=False)
    assert [p for _, p in falling["knots"]] == sorted((p for _, p in falling["knots"]), reverse=True)
    held_out = labelled.Example(SD, "wice:claim", labelled.HELD_OUT_SPLIT, "sd", {}, 1)
    unlicensed = labelled.Example(SD, "wikieval:answer", labelled.DEV_SPLIT, "sd", {}, 1)
    for refused in (held_out, unlicensed):
        with pytest.raises(ValueError, match="licensed development data only"):
            train_judge.train([refused], folds=2, seed=1, cache=None)


def test_sd_verdicts_carry_a_calibrated_p_of_distinctness() -> None:
    similarity = np.array([[1.0, 0.97, 0.1], [0.97, 1.0, 0.2], [0.1, 0.2, 1.0]])
    verdicts = sd_verdicts("a", similarity, threshold=0.78)
    assert [v.value for v in verdicts] == [0.0, 0.0, 1.0]
    assert all(v.p_kind == CALIBRATED and v.tier == "offline" for v in verdicts)
    assert verdicts[0].p < 0.5 <= verdicts[2].p
    assert verdicts[0].evidence == pytest.approx(0.97)  # the cosine stays the evidence
    only = sd_verdicts("b", np.array([[1.0]]))[0]
    assert (only.value, only.p, only.p_kind) == (1.0, 1.0, CALIBRATED)


def test_offline_answer_keeps_the_raw_evidence_score_beside_the_calibrated_p() -> None:
    judge = OfflineJudge()
    sources = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris."]
    single = asyncio.run(judge.ask("groundedness", sources=sources[0], claim="The Eiffel Tower was completed in 1889."))
    assert single.value == 1 and single.confidence is not None
    assert single.confidence == calibration.confidence("support", 1, single.prob, "offline")
    batch = asyncio.run(judge.ask("groundedness_batch", sources=sources[0],
                                  claims=["The Eiffel Tower was completed in 1889.", "It is painted bright green."]))
    assert set(batch.confidences) == {1, 2}
    for key, conf in batch.confidences.items():
        score = batch.evidence[key][0]
        assert conf.kind == CALIBRATED and conf.tier == "offline"
        assert conf.p == calibration.probability("support", batch.value[key], score)
        assert (batch.value[key] == 1) == (conf.p >= 0.5)
    peer = asyncio.run(judge.ask("ragas_faithfulness", sources=sources, claims=["The tower was completed in 1889."]))
    assert peer.confidences[1].p == calibration.probability("support", int(peer.value[1][0] == "yes"),
                                                             peer.evidence[1][0])


ITEMS = [
    Item("tower", "When was the Eiffel Tower completed and how tall is it?",
         ("The Eiffel Tower in Paris was completed in 1889 for the World's Fair. It is 330 metres tall.",
          "The Louvre is the world's most visited museum."),
         "The Eiffel Tower was completed in 1889. It is 330 metres tall. It was completed in 1889. "
         "It is painted bright green."),
    Item("ferry", "How much does an adult single ticket on the Red route cost?",
         ("An adult single ticket on the Red or Blue route costs 6.40 euros, and a return costs 11.20 euros.",),
         "An adult single ticket on the Red route costs 6.40 euros."),
]


@pytest.mark.parametrize("per_component", [False, True])
def test_offline_run_stores_a_calibrated_p_on_every_thelma_verdict(tmp_path: Path, per_component: bool) -> None:
    db = tmp_path / "runs.duckdb"
    metrics = [*THELMA, "ragas_faithfulness", "de_faithfulness"]
    runner.evaluate(ITEMS, db, "calibrated", metrics=metrics, per_component=per_component)
    verdicts = store.query(db, "SELECT metric, status, value, evidence, p, p_kind, tier FROM verdicts "
                               "WHERE run_id = 'calibrated'")
    ok = verdicts[verdicts.status == Status.OK.value]
    thelma = ok[ok.metric.isin(THELMA)]
    assert set(thelma.metric) == set(THELMA)
    assert (thelma.p_kind == CALIBRATED).all() and (thelma.tier == "offline").all()
    assert thelma.p.notna().all()
    assert ((thelma.value == 1) == (thelma.p >= 0.5)).all()  # the design's invariant
    # The raw evidence score stays beside p (SD's single sentence has no other sentence to compare).
    assert thelma[thelma.metric != "sd"].evidence.notna().all()
    # The peers' support prompt is calibrated too; de_faithfulness counts "idk" as 1, so it keeps its label.
    ragas = ok[ok.metric == "ragas_faithfulness"]
    assert len(ragas) and (ragas.p_kind == CALIBRATED).all()
    deepeval = ok[ok.metric == "de_faithfulness"]
    assert len(deepeval) and (deepeval.p_kind == LABEL).all() and (deepeval.p == deepeval.value).all()


# ---------------------------------------------------------------- the learned models


@pytest.mark.parametrize("match_type", calibration.LEARNED_TYPES)
def test_each_shipped_weight_keeps_its_signals_direction(match_type: str) -> None:
    """A signal that argues against a match (a missing number, a refusal) never weighs for it, and the other way
    round: the fit keeps every weight to the direction signals.py declares."""
    model = learned.model(match_type)
    directions = train_judge.FEATURES[match_type]
    assert model.features == tuple(directions)
    for feature, weight in zip(model.features, model.weights):
        assert weight * directions[feature] >= 0, (feature, weight)


def test_the_fit_keeps_a_weight_to_its_direction_where_the_data_would_flip_it() -> None:
    """On data where a signal meant to argue against a match goes with it, the fitted weight stays at 0."""
    rng = np.random.default_rng(0)
    good = rng.normal(size=400)
    against = good + rng.normal(scale=0.1, size=400)  # correlates with the label, though declared against it
    y = (good > 0).astype(int)
    x = np.column_stack([good, against])
    free = train_judge.fit_logistic(x, y, np.ones(400), {"good": 1, "against": 0})
    kept = train_judge.fit_logistic(x, y, np.ones(400), {"good": 1, "against": -1})
    assert free.weights[1] > 0 and kept.weights[1] == 0.0 and kept.weights[0] > 0


def test_a_model_is_its_contributions_through_a_sigmoid(tmp_path: Path) -> None:
    model = learned.Logistic(("a", "b"), (1.0, 0.0), (2.0, 1.0), (1.5, -0.5), 0.25)
    values = {"a": 3.0, "b": 2.0}
    assert model.contributions(values) == {"a": 1.5, "b": -1.0}
    assert model.probability(values) == pytest.approx(1 / (1 + np.exp(-0.75)))
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"models": {"support": model.to_json()}}))
    assert learned.read_models(path) == {"support": model}


def test_a_model_file_with_a_missing_weight_is_refused(tmp_path: Path) -> None:
    data = json.loads(learned.MODEL_FILE.read_text(encoding="utf-8"))
    data["models"]["support"]["weights"].pop()
    broken = tmp_path / "judge_model.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="one center, scale and weight per feature"):
        learned.read_models(broken)


def test_a_number_the_sources_lack_is_sure_evidence_against_support() -> None:
    """The clearest case: a changed time or count reads unsupported at the default band, not unsure."""
    judge = OfflineJudge()
    for sources, claim in [("The museum opens at 10:00 and closes at 18:00 every day except Monday.",
                            "The museum opens at 8:00."),
                           ("MV Lowmere Star carries 320 passengers and 48 cars.", "MV Lowmere Star carries 410 passengers.")]:
        answer = asyncio.run(judge.ask("groundedness", sources=sources, claim=claim))
        assert answer.value == 0 and not is_unsure(answer.confidence.p, CALIBRATED), answer
        assert "not in the matching source sentences" in answer.detail


def test_the_source_that_answers_is_essential_and_its_neighbour_is_not() -> None:
    """The demo's q04: the Blue route's source answers "How long is the crossing on the Blue route?"; the Red
    route's, with a crossing time of its own, is not essential to it."""
    from data.demo_runs import load_corpus

    by_id = {c.id: c for c in load_corpus()}
    ask = lambda cid: asyncio.run(OfflineJudge().ask(  # noqa: E731
        "source_essential", query="How long is the crossing on the Blue route?", source=by_id[cid].text))
    blue, red = ask("routes-2"), ask("routes-1")
    assert blue.value == 1 and not is_unsure(blue.confidence.p, CALIBRATED)
    assert red.value == 0 and red.confidence.p < blue.confidence.p
