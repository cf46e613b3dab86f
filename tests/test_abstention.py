"""Abstention decided on read: unsure verdicts are left out of every aggregate and counted, the scores
recomputed in SQL at any band equal metrics.aggregate() in Python, the store keeps p, p_kind, tier and
n_unsure, and the quiet diagnosis fires a rule only on metrics decided from enough confident verdicts."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from evaluators.core.confidence import CALIBRATED, DEFAULT_BANDS, LABEL, LOGPROB, parse_band
from evaluators.core.records import Item, Label, Run, Score, Status, Verdict
from evaluators.metrics import diagnosis, registry
from evaluators.metrics.thelma import GR, SQC, aggregate, rescore, with_band
from evaluators.storage import ownership, queries, store, writes

OK = Status.OK


def v(metric: str, idx: int, value: float | None, p: float | None = None, kind: str | None = CALIBRATED,
      status: Status = OK, target: str = "sources") -> Verdict:
    return Verdict(item_id="a", metric=metric, component_kind="claim", component_idx=idx, target=target,
                   value=value, status=status, p=p, p_kind=kind if p is not None else None, tier="offline")


BAND = (0.3, 0.7)


def test_all_sure_scores_as_before() -> None:
    score = aggregate(GR, "a", "gr", [v("gr", 0, 1.0, 0.9), v("gr", 1, 0.0, 0.1), v("gr", 2, 1.0, 1.0, LABEL)], BAND)
    assert (score.value, score.n_scored, score.n_total, score.n_unsure, score.status) == (2 / 3, 3, 3, 0, OK)


def test_some_unsure_are_left_out_and_counted() -> None:
    score = aggregate(GR, "a", "gr", [v("gr", 0, 1.0, 0.9), v("gr", 1, 0.0, 0.45), v("gr", 2, 1.0, 0.6),
                                      v("gr", 3, None, status=Status.TIMEOUT)], BAND)
    assert (score.value, score.n_scored, score.n_total, score.n_unsure, score.status) == (1.0, 1, 4, 2, OK)
    # the band's edges are sure: lo < p < hi is unsure
    edge = aggregate(GR, "a", "gr", [v("gr", 0, 0.0, 0.3), v("gr", 1, 1.0, 0.7)], BAND)
    assert (edge.value, edge.n_unsure) == (0.5, 0)


def test_all_unsure_is_unsure_never_zero_or_one() -> None:
    score = aggregate(GR, "a", "gr", [v("gr", 0, 0.0, 0.4), v("gr", 1, 1.0, 0.55, LOGPROB)], BAND)
    assert (score.value, score.n_scored, score.n_unsure, score.status) == (None, 0, 2, Status.UNSURE)
    # unsure and failed: the judge did answer, so it reads unsure (the band may score it)
    mixed = aggregate(GR, "a", "gr", [v("gr", 0, 0.0, 0.4), v("gr", 1, None, status=Status.ERROR),
                                      v("gr", 2, None, status=Status.ERROR)], BAND)
    assert (mixed.value, mixed.status, mixed.n_unsure) == (None, Status.UNSURE, 1)


def test_labels_are_never_unsure_and_a_wider_band_quiets_more() -> None:
    labels = [v("gr", 0, 1.0, 1.0, LABEL), v("gr", 1, 0.0, 0.0, LABEL)]
    assert aggregate(GR, "a", "gr", labels, (0.0, 1.0)).n_unsure == 0
    logprob = [v("gr", 0, 1.0, 0.75, LOGPROB), v("gr", 1, 0.0, 0.1, LOGPROB)]
    assert aggregate(GR, "a", "gr", logprob, (0.5, 0.5)).value == 0.5
    assert aggregate(GR, "a", "gr", logprob, (0.2, 0.8)).value == 0.0
    assert with_band(logprob, (0.2, 0.8))[0].p == 0.75  # the mark keeps p


def test_sqc_folding_a_confident_one_covers_an_unsure_one_does_not() -> None:
    def sqc(idx: int, target: str, value: float | None, p: float | None, status: Status = OK) -> Verdict:
        return Verdict(item_id="a", metric="sqc", component_kind="subquestion", component_idx=idx, target=target,
                       value=value, status=status, p=p, p_kind=CALIBRATED if p is not None else None)
    verdicts = [
        sqc(0, "source:0", 1.0, 0.95), sqc(0, "source:1", 0.0, 0.5),   # covered: a confident 1
        sqc(1, "source:0", 0.0, 0.1), sqc(1, "source:1", 1.0, 0.6),    # an unsure 1 only: unsure
        sqc(2, "source:0", 0.0, 0.1), sqc(2, "source:1", 0.0, 0.05),   # confidently not covered
        sqc(3, "source:0", 0.0, 0.45), sqc(3, "source:1", None, None, Status.TIMEOUT),  # unsure beats failed
    ]
    score = aggregate(SQC, "a", "sqc", verdicts, BAND)
    assert (score.value, score.n_scored, score.n_total, score.n_unsure) == (0.5, 2, 4, 2)
    narrow = aggregate(SQC, "a", "sqc", verdicts, (0.5, 0.5))  # nothing unsure: q1 covered, q3 failed
    assert (narrow.value, narrow.n_scored, narrow.n_unsure) == (pytest.approx(2 / 3), 3, 0)
    all_unsure = aggregate(SQC, "a", "sqc", verdicts[2:4], BAND)
    assert (all_unsure.value, all_unsure.status, all_unsure.n_unsure) == (None, Status.UNSURE, 1)


# ---------------------------------------------------------------- SQL agrees with Python at any band

KINDS = [CALIBRATED, LOGPROB, LABEL, None]
METRIC_IDS = ["sp1", "sqc", "rqc", "gr", "nv_groundedness", "ref_precision", "ref_f1"]
FAILS = [Status.TIMEOUT, Status.UNPARSED, Status.ERROR, Status.EMPTY]


def _random_verdicts(rng: random.Random, item_id: str, metric: str) -> list[Verdict]:
    out = []
    kind_of_item = "subquestion" if metric in ("sqc", "rqc") else "claim"
    targets = ["source:0", "source:1", "sources"] if metric == "sqc" else ["sources"]
    for idx in range(rng.randint(0, 4)):
        if metric == "ref_f1":  # two sides: the response's claims and the reference's
            kind_of_item = rng.choice(["claim", "reference_claim"])
        for target in targets:
            if rng.random() < 0.15:
                status, value, p, kind = rng.choice(FAILS), None, None, None
            elif metric == "nv_groundedness":  # a rating: never unsure
                status, value, p, kind = OK, rng.choice([0.0, 0.5, 1.0]), None, None
            else:
                kind = rng.choice(KINDS)
                p = rng.choice([rng.random(), 0.3, 0.7, 0.2, 0.8, 0.5, 0.45, 0.55])
                if kind == LABEL or kind is None:
                    p = rng.choice([0.0, 1.0]) if kind == LABEL else None
                    value = p if p is not None else float(rng.random() < 0.5)
                else:
                    value = float(p >= 0.5)
                status = OK
            out.append(Verdict(item_id=item_id, metric=metric, component_kind=kind_of_item, component_idx=idx,
                               target=target, value=value, status=status, p=p, p_kind=kind,
                               tier="offline" if p is not None else None))
    return out


@pytest.fixture(scope="module")
def verdict_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Verdict]]]:
    rng = random.Random(10)
    path = tmp_path_factory.mktemp("band") / "band.duckdb"
    ownership.start_run(path, Run("r", "offline", {}, {}), 150)
    metric_ids = METRIC_IDS
    per_item: dict[str, list[Verdict]] = {}
    items, verdicts, scores = [], [], []
    for n in range(150):
        iid = f"i{n:03d}"
        items.append(Item(iid, "q", ("s", "t"), "r"))
        per_item[iid] = [x for m in metric_ids for x in _random_verdicts(rng, iid, m)]
        verdicts += per_item[iid]
        specs = {m: registry.METRICS[m] for m in metric_ids}
        scores += rescore(iid, per_item[iid], specs).values()  # what the runner stores: the default bands
    writes.write_batch(path, "r", items=items, verdicts=verdicts, scores=scores)
    return path, per_item


@pytest.mark.parametrize("seed_", range(5))
def test_sql_scores_at_a_band_agree_with_python(verdict_db, seed_: int) -> None:
    path, per_item = verdict_db
    rng = random.Random(seed_)
    band = None if seed_ == 0 else (0.5, 0.5) if seed_ == 1 else (rng.choice([0.2, 0.3, rng.random() / 2]),
                                                                rng.choice([0.7, 0.8, 0.5 + rng.random() / 2]))
    sql = store.query(path, f"SELECT * FROM {queries.sql.scores_sql(band)} WHERE run_id = $run", {"run": "r"})
    got = {(r.item_id, r.metric): r for r in sql.itertuples()}
    specs = {m: registry.METRICS[m] for m in METRIC_IDS}
    for iid, verdicts in per_item.items():
        for m, want in rescore(iid, verdicts, specs, band).items():
            row = got[(iid, m)]
            value = None if row.value != row.value or row.value is None else row.value
            assert (row.status, row.n_scored, row.n_total, row.n_unsure) == (
                want.status.value, want.n_scored, want.n_total, want.n_unsure), (iid, m, band, verdicts)
            assert value == pytest.approx(want.value), (iid, m, band)


@pytest.mark.parametrize("corrected", [False, True])
def test_one_item_s_scores_are_the_run_s_rows_of_that_item(verdict_db, tmp_path: Path, corrected: bool) -> None:
    """The Item page reads one item's scores with the filter inside the scans: the very rows the whole
    run's relation holds for that item, at the stored scores, at other bands, with corrections in place."""
    path = tmp_path / "labelled.duckdb"
    shutil.copy(verdict_db[0], path)
    rng = random.Random(7)
    corrections = [Label(f"i{n:03d}", rng.randint(0, 1), metric=m, component_idx=0, author="t")
                   for n in range(0, 150, 3) for m in ("gr", "sqc")]
    writes.add_labels(path, "r", corrections)
    for band in (None, (0.5, 0.5), (0.3, 0.7)):
        whole = store.query(path, f"SELECT * FROM {queries.sql.scores_sql(band, corrected)} WHERE run_id = $run "
                                  "ORDER BY item_id, metric", {"run": "r"})
        for item_id in ("i000", "i001", "i003", "i149"):
            one = store.query(path, f"SELECT * FROM {queries.sql.scores_sql(band, corrected, one_item=True)} "
                                    "WHERE run_id = $run AND item_id = $item ORDER BY metric",
                              {"run": "r", "item": item_id})
            want = whole[whole["item_id"] == item_id].reset_index(drop=True)
            assert len(one) == len(METRIC_IDS) and one.equals(want), (item_id, band, corrected)
    if corrected:  # the corrections moved some item's score: the check above compared corrected rows
        raw = store.query(path, f"SELECT * FROM {queries.sql.scores_sql((0.3, 0.7))} WHERE run_id = $run "
                                "ORDER BY item_id, metric", {"run": "r"})
        assert not raw.equals(whole)


def test_stored_scores_round_trip_p_kind_tier_and_n_unsure(verdict_db) -> None:
    path, per_item = verdict_db
    stored = store.query(path, "SELECT item_id, metric, component_idx, target, p, p_kind, tier FROM verdicts "
                               "WHERE p IS NOT NULL ORDER BY ALL")
    want = sorted((x.item_id, x.metric, x.component_idx, x.target, x.p, x.p_kind, x.tier)
                  for xs in per_item.values() for x in xs if x.p is not None)
    assert [tuple(r) for r in stored.itertuples(index=False)] == want
    n_unsure = store.query(path, "SELECT sum(n_unsure) AS n FROM scores WHERE metric = 'gr'")["n"].iloc[0]
    specs = {"gr": registry.METRICS["gr"]}
    assert n_unsure == sum(rescore(i, xs, specs)["gr"].n_unsure for i, xs in per_item.items()) > 0
    unsure = store.query(path, "SELECT count(*) AS n FROM scores WHERE status = 'unsure'")["n"].iloc[0]
    assert unsure > 0


def test_the_wide_table_at_a_band_carries_counts_and_unsure_status(verdict_db) -> None:
    path, per_item = verdict_db
    band = (0.1, 0.9)
    wide = queries.runs.run_scores_wide(path, "r", ["gr"], queries.sql.scores_sql(band)).set_index("item_id")
    specs = {"gr": registry.METRICS["gr"]}
    for iid, verdicts in per_item.items():
        want = rescore(iid, verdicts, specs, band)["gr"]
        if want.n_total:
            assert (wide.loc[iid, "gr:scored"], wide.loc[iid, "gr:unsure"]) == (want.n_scored, want.n_unsure)
        assert ("gr:unsure" in wide.loc[iid, "failed_metrics"]) == (want.status is Status.UNSURE)


# ---------------------------------------------------------------- the quiet diagnosis

def test_a_rule_needs_metrics_decided_from_enough_confident_verdicts() -> None:
    low = Score("a", "sqc", 0.0, 1, 1, OK)
    assert [r.id for r in diagnosis.diagnose({"sqc": low, "rqc": Score("a", "rqc", 0.0, 2, 2, OK)})] == ["T2.2"]
    shaky = Score("a", "rqc", 0.0, 1, 4, OK, n_unsure=2)  # one confident verdict, two unsure: not decided
    assert diagnosis.diagnose({"sqc": low, "rqc": shaky}) == []
    half = Score("a", "rqc", 0.0, 2, 4, OK, n_unsure=2)  # half unsure: still decided (MAX_UNSURE_SHARE)
    assert [r.id for r in diagnosis.diagnose({"sqc": low, "rqc": half})] == ["T2.2"]
    unsure = Score("a", "rqc", None, 0, 2, Status.UNSURE, n_unsure=2)
    assert diagnosis.diagnose({"sqc": low, "rqc": unsure}) == []
    fired = diagnosis.fired({"sqc": low, "rqc": half})
    assert fired[0].rule.id == "T2.2" and [(c.metric, c.level, c.score) for c in fired[0].conditions] == [
        ("sqc", "low", low), ("rqc", "low", half)]


@pytest.mark.parametrize("seed_", range(3))
def test_quiet_rules_in_sql_agree_with_python(tmp_path: Path, seed_: int) -> None:
    rng = random.Random(seed_)
    path = tmp_path / "q.duckdb"
    ownership.start_run(path, Run("r", "offline", {}, {}), 300)
    items, scores, truth = [], [], {}
    for n in range(300):
        iid = f"i{n:03d}"
        items.append(Item(iid, "q", ("s",), "r"))
        truth[iid] = {}
        for m in diagnosis.DEFAULT_THRESHOLDS:
            if rng.random() < 0.1:
                continue
            n_scored, n_unsure = rng.randint(0, 4), rng.randint(0, 4)
            value = rng.choice([0.0, 0.25, 0.5, 0.75, 0.8, 1.0]) if n_scored else None
            status = OK if n_scored else Status.UNSURE if n_unsure else Status.TIMEOUT
            score = Score(iid, m, value, n_scored, n_scored + n_unsure + 1, status, n_unsure)
            scores.append(score)
            truth[iid][m] = score
    writes.write_batch(path, "r", items=items, scores=scores)
    table = queries.runs.run_scores_wide(path, "r", list(diagnosis.DEFAULT_THRESHOLDS))
    frame, _ = queries.diagnosis.filter_items(table, list(diagnosis.DEFAULT_THRESHOLDS), diagnosis.DEFAULT_THRESHOLDS,
                                    limit=1000)
    fired_sql = dict(zip(frame["item_id"], frame["rules"]))
    for iid, s in truth.items():
        assert fired_sql[iid] == ", ".join(r.name for r in diagnosis.diagnose(s)), (iid, s)


def test_band_parsing_refuses_what_it_cannot_read() -> None:
    assert parse_band("0.3,0.7") == (0.3, 0.7) and parse_band(" 0.5 , 0.5 ") == (0.5, 0.5)
    for bad in ["", "0.3", "0.7,0.3", "a,b", "0.3,0.7,0.9", "-0.1,0.7", "0.3,1.5", "nan,nan"]:
        with pytest.raises(ValueError):
            parse_band(bad)
    assert set(DEFAULT_BANDS) >= {CALIBRATED, LOGPROB, LABEL}


def test_cli_export_and_diagnose_read_at_a_band(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import csv

    from evaluators.cli import main

    path = tmp_path / "c.duckdb"
    ownership.start_run(path, Run("r", "offline", {}, {}), 1)
    sqc = [Verdict(item_id="x", metric="sqc", component_kind="subquestion", component_idx=0, target="source:0",
                   value=0.0, status=OK, p=0.45, p_kind=CALIBRATED, tier="offline")]
    rqc = [Verdict(item_id="x", metric="rqc", component_kind="subquestion", component_idx=0, target="response",
                   value=0.0, status=OK, p=0.1, p_kind=CALIBRATED, tier="offline")]
    specs = {m: registry.METRICS[m] for m in ("sqc", "rqc")}
    writes.write_batch(path, "r", items=[Item("x", "q", ("s",), "r")], verdicts=sqc + rqc,
                      scores=list(rescore("x", sqc + rqc, specs).values()))
    out = tmp_path / "d.csv"
    assert main(["diagnose", "--db", str(path), "--run", "r", "--out", str(out)]) == 0
    assert list(csv.DictReader(out.open())) == []  # SQC is unsure at the default band: quiet
    assert main(["diagnose", "--db", str(path), "--run", "r", "--out", str(out), "--band", "0.5,0.5"]) == 0
    assert [r["rule"] for r in csv.DictReader(out.open())] == ["T2.2"]  # no band: SQC 0, RQC 0
    assert main(["export", "--db", str(path), "--run", "r", "--out", str(out)]) == 0
    row = next(csv.DictReader(out.open()))
    assert (row["sqc"], row["rqc"]) == ("", "0.0")
    assert main(["export", "--db", str(path), "--run", "r", "--out", str(out), "--band", "0.5,0.5"]) == 0
    row = next(csv.DictReader(out.open()))
    assert (row["sqc"], row["rqc"]) == ("0.0", "0.0")
    capsys.readouterr()
