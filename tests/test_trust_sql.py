"""The trust report and review queue, computed in SQL on the labelled items, equal their Python
definition over every item of the run (the report and queue as first written), on random runs."""
from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.dashboard_scale import generate
from evaluators.core.confidence import CALIBRATED, Band
from evaluators.core.records import Component, Item, Label, Run, Status, Verdict
from evaluators.metrics import diagnosis, registry, trust
from evaluators.metrics.registry import THELMA
from evaluators.metrics.thelma import rescore, with_band
from evaluators.runs import labelling
from evaluators.storage import ownership, queries, store, writes

RUN = "weak-retriever"


def _every_item(path: Path, run_id: str, band: Band | None) -> dict[str, dict]:
    """Each item's THELMA scores, diagnosed in Python: the whole run, at the band."""
    wide = queries.runs.run_scores_wide(path, run_id, list(THELMA), queries.sql.scores_sql(band))
    return {r["item_id"]: {m: queries.diagnosis.wide_score(r, m) for m in THELMA} for r in wide.to_dict("records")}


def _fires(scores, th) -> set[str]:
    return {rule.id for rule in diagnosis.diagnose(scores, th)}


def python_report(path: Path, run_id: str, thresholds: dict, band: Band | None) -> labelling.Report:
    """labelling.report's definition: every item of the run diagnosed, candidates from every score."""
    th = {**diagnosis.DEFAULT_THRESHOLDS, **thresholds}
    scores = _every_item(path, run_id, band)
    saved = queries.trust.rule_labels(path, run_id)
    triage = queries.trust.triage_verdicts(path, run_id)
    every = queries.trust.verdict_corrections(path, run_id, band)
    corrections = every.dropna(subset=["judge"])
    fired = {item: _fires(s, th) for item, s in scores.items()}
    rule_labels = list(saved[["item_id", "rule", "label"]].itertuples(index=False, name=None))
    pairs = trust.rule_pairs(rule_labels, dict(zip(triage["item_id"], triage["label"])), fired, labelling.RULE_IDS)
    pairs += [trust.Pair(r.metric, r.item_id, int(r.judge), int(r.label), int(r.component_idx))
              for r in corrections.itertuples(index=False)]
    rows = trust.report(pairs, [*THELMA, *labelling.RULE_IDS], {m: 0 for m in THELMA})
    labelled = [(p.item_id, p.target, p.human) for p in pairs if p.target in diagnosis.RULES]
    suggestions = [trust.suggest_threshold(
        m, {item: None if s.get(m) is None else s[m].value for item, s in scores.items()},
        [l for l in labelled if labelling._reads(l[1], m)], th, lambda item, at: _fires(scores[item], at))
        for m in THELMA]
    on_unsure = every[every["unsure"].astype(bool)]
    unsure = trust.unsure_tally(list(zip(on_unsure["metric"], on_unsure["label"].astype(int))), list(THELMA))
    return labelling.Report(rows, trust.disagreements(pairs), suggestions, unsure)


def python_queue(path: Path, run_id: str, thresholds: dict, band: Band | None, limit: int) -> list[tuple]:
    """labelling.review_queue's definition: every unsure item, every item diagnosed, every other shuffled."""
    th = {**diagnosis.DEFAULT_THRESHOLDS, **thresholds}
    unsure = queries.trust.unsure_counts(path, run_id, band)
    scores = _every_item(path, run_id, band)
    seen = set(queries.trust.labelled_items(path, run_id))
    queue = []
    for row in unsure.itertuples(index=False):
        if row.item_id not in seen:
            queue.append((row.item_id, labelling.QUEUE_REASONS[0], f"{row.n_unsure} unsure verdict(s)"))
            seen.add(row.item_id)
    for item in sorted(set(scores) - seen):
        thin = [f"{rule.id} ({metric.upper()} from {score.n_scored} verdicts)"
                for rule in diagnosis.diagnose(scores[item], th) for metric in THELMA
                if labelling._reads(rule.id, metric) and (score := scores[item].get(metric)) is not None
                and score.value is not None and score.n_scored <= labelling.THIN]
        if thin:
            queue.append((item, labelling.QUEUE_REASONS[1], "; ".join(thin)))
            seen.add(item)
    rest = sorted(set(scores) - seen)
    random.Random(f"{run_id}:0").shuffle(rest)
    queue += [(item, labelling.QUEUE_REASONS[2], "") for item in rest]
    return queue[:limit]


def _label(path: Path, run_id: str, rng: random.Random, n: int) -> None:
    """Random rule labels, verdict corrections and triage notes on a run."""
    items = sorted(store.query(path, "SELECT item_id FROM items WHERE run_id = ?", [run_id])["item_id"])
    parts = store.query(path, """SELECT DISTINCT item_id, metric, component_idx FROM verdicts
                                 WHERE run_id = ? AND component_idx >= 0 ORDER BY ALL""", [run_id])
    rows = list(parts.itertuples(index=False, name=None))
    labels = [Label(rng.choice(items), rng.randint(0, 1), rule=rng.choice(list(diagnosis.RULES)), author="t")
              for _ in range(n)]
    labels += [Label(i, rng.randint(0, 1), metric=m, component_idx=int(c), author="t")
               for i, m, c in rng.sample(rows, min(n // 2, len(rows)))]
    writes.add_labels(path, run_id, labels)
    for item in rng.sample(items, min(n // 4, len(items))):
        writes.add_triage(path, run_id, item, rng.choice(["confirmed", "false alarm", "fixed"]), "Retriever", "", "t")


def _thresholds(rng: random.Random) -> dict[str, float]:
    return {m: rng.choice([0.25, 0.5, 0.6, 0.75, 0.8]) for m in diagnosis.DEFAULT_THRESHOLDS}


@pytest.mark.parametrize("seed_", [1, 2, 3])
def test_report_and_queue_equal_the_python_definition_on_random_runs(tmp_path: Path, seed_: int) -> None:
    path = tmp_path / "random.duckdb"
    rng = random.Random(seed_)
    generate(path, "r", rng.randint(150, 300), quality=rng.choice([0.5, 0.7, 0.9]), seed=seed_)
    _label(path, "r", rng, 120)
    for th in ({}, _thresholds(rng), _thresholds(rng)):
        sql = labelling.report(path, "r", th)
        assert sql == python_report(path, "r", th, None)
        assert any(s.best is not None or s.kappa_now is not None for s in sql.suggestions), \
            "the labels are enough to fit some threshold"
        assert sum(t.n_labelled for t in sql.rows) > 100
        for limit in (5, 50, 10_000):  # filled by thin evidence, then by the seeded random rest
            queue = labelling.review_queue(path, "r", th, limit=limit)
            assert list(queue.itertuples(index=False, name=None)) == python_queue(path, "r", th, None, limit)
        assert set(labelling.review_queue(path, "r", th, limit=10_000)["reason"]) >= set(labelling.QUEUE_REASONS[1:])


def _unsure_run(path: Path, n: int, rng: random.Random) -> None:
    """A run of n items whose verdicts carry calibrated p's, many near 0.5: unsure at some bands."""
    ownership.start_run(path, Run(RUN, "offline", {}, {}), n)
    kinds = {"sp1": ("source", "query"), "sp2": ("source_fact", "query"), "sqc": ("subquestion", "source:0"),
             "rp": ("claim", "query"), "rqc": ("subquestion", "response"), "gr": ("claim", "sources"),
             "sd": ("sentence", "sentence:1")}
    specs = {m: registry.METRICS[m] for m in kinds}
    for k in range(n):
        item = f"u{k:03d}"
        verdicts, comps = [], []
        for metric, (kind, target) in kinds.items():
            for idx in range(rng.randint(1, 4)):
                p = rng.choice([0.02, 0.3, 0.48, 0.55, 0.7, 0.97])
                value, status = (float(p >= 0.5), Status.OK) if rng.random() > 0.05 else (None, Status.TIMEOUT)
                verdicts.append(Verdict(item, metric, kind, idx, target, value, status,
                                        p=p if status is Status.OK else None, p_kind=CALIBRATED))
                comps.append(Component(item, kind, idx, f"{kind} {idx}"))
        writes.write_batch(path, RUN, items=[Item(item, f"Question {k}?", ("Source.",), "Answer.")],
                          components=list({(c.kind, c.idx): c for c in comps}.values()), verdicts=verdicts,
                          scores=list(rescore(item, verdicts, specs).values()))


def _labelled_unsure_run(tmp_path: Path, n: int, n_labels: int, seed: int) -> tuple[Path, random.Random]:
    """_unsure_run with random labels on it (_label), seeded; the path and the generator, for more draws."""
    path, rng = tmp_path / "unsure.duckdb", random.Random(seed)
    _unsure_run(path, n, rng)
    _label(path, RUN, rng, n_labels)
    return path, rng


@pytest.mark.parametrize("band", [None, (0.2, 0.8), (0.45, 0.6)])
def test_report_and_queue_equal_the_python_definition_with_unsure_verdicts(tmp_path: Path,
                                                                           band: Band | None) -> None:
    path, rng = _labelled_unsure_run(tmp_path, 80, 60, seed=7)
    assert not queries.trust.unsure_counts(path, RUN, band).empty, "the run has unsure verdicts at the band"
    for th in ({}, _thresholds(rng)):
        assert labelling.report(path, RUN, th, band) == python_report(path, RUN, th, band)
        for limit in (1, 5, 50, 1000):
            queue = labelling.review_queue(path, RUN, th, band, limit=limit)
            assert list(queue.itertuples(index=False, name=None)) == python_queue(path, RUN, th, band, limit)


def test_score_midpoints_give_the_candidates_of_every_score() -> None:
    # Scores a hair apart: the midpoints in one 0.0001 bucket round two ways, and both are kept.
    rp = [0.1, 0.10004, 0.10006, 0.10011, 0.3, 0.5, 0.5, 0.9, None, 0.2, 0.7, 0.65]
    table = pd.DataFrame({"item_id": [f"i{k:02d}" for k in range(len(rp))], "rp": rp})
    kept = queries.trust.score_midpoints(table, ["rp"])
    distinct = sorted({v for v in rp if v is not None})
    every = [(a + b) / 2 for a, b in zip(distinct, distinct[1:])]
    assert len({round(m, 4) for m in every[:3]}) == 2
    assert {round(m, 4) for m in kept["midpoint"]} == {round(m, 4) for m in every}
    assert set(kept["metric"]) == {"rp"}
    values = dict(zip(table["item_id"], rp))
    labels = [(i, "T2.5", int(v is not None and v < 0.6)) for i, v in values.items()]

    def fires(item: str, at) -> set[str]:
        return {"T2.5"} if values[item] is not None and values[item] < at["rp"] else set()

    fitted = trust.suggest_threshold("rp", values, labels, {"rp": 0.5}, fires, kept["midpoint"].tolist())
    assert fitted == trust.suggest_threshold("rp", values, labels, {"rp": 0.5}, fires)
    assert fitted.best == pytest.approx(0.575) and fitted.kappa_best == pytest.approx(1.0)


def _interval_by_draws(judge: list[int], human: list[int], samples: int = 2000) -> tuple[float, float] | None:
    """kappa_interval's definition: each resample drawn pair by pair with randrange."""
    pairs = list(zip(judge, human))
    rng = random.Random(0)
    values = []
    for _ in range(samples):
        drawn = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        k = trust.kappa([a for a, _ in drawn], [b for _, b in drawn])
        if k is not None:
            values.append(k)
    if len(values) < samples / 2:
        return None
    values.sort()
    return values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 33, 100, 257])
def test_the_kappa_interval_equals_its_draw_by_draw_definition(n: int) -> None:
    rng = random.Random(n)
    judge = [rng.randint(0, 1) for _ in range(n)]
    human = [j if rng.random() < 0.7 else 1 - j for j in judge]
    assert trust.kappa_interval(judge, human) == _interval_by_draws(judge, human)
    assert trust.kappa_interval(judge, human, samples=50) == _interval_by_draws(judge, human, samples=50)


@pytest.mark.parametrize("band", [None, (0.2, 0.8), (0.45, 0.6)])
def test_a_correction_s_judge_call_is_sure_or_unsure_as_the_band_reads_its_verdicts(tmp_path: Path,
                                                                                    band: Band | None) -> None:
    path, _ = _labelled_unsure_run(tmp_path, 40, 80, seed=11)
    verdicts = store.query(path, "SELECT * FROM verdicts WHERE run_id = ?", [RUN])
    rows = queries.trust.verdict_corrections(path, RUN, band)
    assert rows["unsure"].any() and rows["judge"].notna().any()
    for r in rows.itertuples(index=False):
        part = verdicts[(verdicts["item_id"] == r.item_id) & (verdicts["metric"] == r.metric)
                        & (verdicts["component_idx"] == r.component_idx)]
        vs = [Verdict(v.item_id, v.metric, v.component_kind, int(v.component_idx), v.target,
                      None if pd.isna(v.value) else float(v.value), Status(v.status),
                      p=None if pd.isna(v.p) else float(v.p), p_kind=v.p_kind) for v in part.itertuples()]
        banded = with_band(vs, band)  # each verdict as the scores read it
        sure_one = any(v.status is Status.OK and v.value == 1 for v in banded)
        all_sure = bool(banded) and all(v.status is Status.OK for v in banded)
        assert r.unsure == (not sure_one and any(v.status is Status.UNSURE for v in banded))
        assert (None if pd.isna(r.judge) else int(r.judge)) == (1 if sure_one else 0 if all_sure else None)
