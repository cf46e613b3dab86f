"""The dashboard's reads (evaluators/storage/queries/): Table 2 in SQL agrees with diagnosis.diagnose()
on every item, filters and paging over a run table, grouped counts, compare, and one connection
per batch of reads."""
from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from evaluators.core.records import Item, Run, Score, Status
from evaluators.metrics.diagnosis import DEFAULT_THRESHOLDS, RULES, diagnose
from evaluators.metrics.registry import THELMA, order_metrics
from evaluators.storage import ownership, queries, store, writes
from tests.seed import seed

METRICS = list(THELMA)


@pytest.fixture(scope="module")
def random_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, float | None]]]:
    """400 items with random scores on a coarse grid (so ties with thresholds happen) and gaps."""
    rng = random.Random(4)
    path = tmp_path_factory.mktemp("rules") / "rules.duckdb"
    ownership.start_run(path, Run("r", "offline", {}, {}), 400)
    truth: dict[str, dict[str, float | None]] = {}
    items, scores = [], []
    for n in range(400):
        iid = f"i{n:03d}"
        items.append(Item(iid, "q", ("s",), "r"))
        truth[iid] = {}
        for m in METRICS:
            if rng.random() < 0.15:  # unscored: a failure status, or no score row at all
                truth[iid][m] = None
                if rng.random() < 0.5:
                    scores.append(Score(iid, m, None, 0, 2, rng.choice([Status.TIMEOUT, Status.EMPTY])))
                continue
            value = rng.choice([0.0, 0.25, 0.3, 1 / 3, 0.5, 0.6, 2 / 3, 0.75, 0.8, 1.0])
            truth[iid][m] = value
            scores.append(Score(iid, m, value, 3, 3, Status.OK))
    writes.write_batch(path, "r", items=items, scores=scores)
    return path, truth


@pytest.fixture(scope="module")
def table(random_db):
    return queries.runs.run_scores_wide(random_db[0], "r", METRICS)


@pytest.mark.parametrize("seed_", range(6))
def test_sql_rules_agree_with_diagnose(random_db, table, seed_: int) -> None:
    _, truth = random_db
    rng = random.Random(seed_)
    th = dict(DEFAULT_THRESHOLDS) if seed_ == 0 else {
        m: rng.choice([0.25, 0.3, 0.5, 0.6, 0.75, 0.8]) for m in DEFAULT_THRESHOLDS}
    frame, total = queries.diagnosis.filter_items(table, METRICS, th, limit=1000)
    assert total == 400
    fired_sql = {row.item_id: row.rules for row in frame.itertuples()}
    for iid, scores in truth.items():
        expected = ", ".join(r.name for r in diagnose(scores, th))  # as shown: "X1 (ours)"
        assert fired_sql[iid] == expected, (iid, scores, th)
    combos = queries.diagnosis.rule_counts(queries.diagnosis.profile(table), th)
    firsts = queries.diagnosis.first_items(combos)
    for rid in RULES:
        n_sql = int(combos.loc[combos[rid], "n"].sum())
        firing = [iid for iid, s in truth.items() if rid in [r.id for r in diagnose(s, th)]]
        assert n_sql == len(firing)
        assert firsts[rid] == (min(firing) if firing else None)


def test_rule_filter_and_below_filter_match_python(random_db, table) -> None:
    _, truth = random_db
    th = dict(DEFAULT_THRESHOLDS)
    _, n_rule = queries.diagnosis.filter_items(table, METRICS, th, rules=["T2.2", "T2.6"], limit=1)
    assert n_rule == sum(1 for s in truth.values() if {r.id for r in diagnose(s, th)} & {"T2.2", "T2.6"})
    _, n_below = queries.diagnosis.filter_items(table, METRICS, th, below=["gr", "sd"], limit=1)
    assert n_below == sum(1 for s in truth.values()
                          if any(s[m] is not None and s[m] < th[m] for m in ("gr", "sd")))
    _, n_quad = queries.diagnosis.filter_items(table, METRICS, th, levels={"sqc": "low", "rqc": "high"}, limit=1)
    assert n_quad == sum(1 for s in truth.values() if s["sqc"] is not None and s["sqc"] < th["sqc"]
                         and s["rqc"] is not None and s["rqc"] >= th["rqc"])


def test_paging_and_sorting_cover_every_item_once(table) -> None:
    seen, last = [], 2.0
    for page in range(3):
        frame, total = queries.diagnosis.filter_items(table, METRICS, DEFAULT_THRESHOLDS, sort="gr", descending=True,
                                          limit=150, offset=page * 150)
        seen += list(frame["item_id"])
        scored = frame["gr"].dropna()
        assert list(scored) == sorted(scored, reverse=True) and (scored.empty or scored.iloc[0] <= last)
        last = scored.iloc[-1] if len(scored) else last
        assert total == 400
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 400
    empty, total = queries.diagnosis.filter_items(table, METRICS, DEFAULT_THRESHOLDS, limit=10, offset=1000)
    assert empty.empty and total == 400


def test_share_below_is_exact_at_the_threshold(random_db) -> None:
    from evaluators.dashboard.views import runs as runs_view

    path, truth = random_db
    _, dist, _ = queries.runs.run_summary(path, "r")
    values = [s["sp1"] for s in truth.values() if s["sp1"] is not None]
    assert runs_view.share_below(dist, "sp1", 0.5) == (sum(v < 0.5 for v in values), len(values))  # 0.5 is high
    ci = runs_view.headline(dist, "sp1")
    assert ci.mean == pytest.approx(sum(values) / len(values)) and ci.low < ci.mean < ci.high


def test_search_and_failures_filter(tmp_path: Path) -> None:
    path = seed(tmp_path / "s.duckdb")
    table = queries.runs.run_scores_wide(path, "llm-judge", METRICS)
    frame, n = queries.diagnosis.filter_items(table, METRICS, DEFAULT_THRESHOLDS, failed_only=True)
    assert list(frame["item_id"]) == ["q01", "q02", "q03", "q06"] and n == 4
    assert frame.set_index("item_id").loc["q02", "failed_metrics"] == "rqc:timeout, sqc:timeout"
    ids = queries.items.search_ids(path, "llm-judge", "BATTERY")
    assert list(queries.diagnosis.filter_items(table, METRICS, DEFAULT_THRESHOLDS, ids=ids)[0]["item_id"]) == ["q06"]
    ids = queries.items.search_ids(path, "llm-judge", meta=("topic", "billing"))
    assert sorted(ids["item_id"]) == ["q01", "q05"]


def test_compare_tables_align_items(tmp_path: Path) -> None:
    path = seed(tmp_path / "s.duckdb")
    a, b = (queries.runs.run_scores_wide(path, r, METRICS) for r in ("weak-retriever", "better-retriever"))
    out = queries.compare.compare_tables(a, b, METRICS, DEFAULT_THRESHOLDS)
    summary = out["summary"].set_index("metric")
    assert summary.loc["sqc", "delta"] == pytest.approx(0.25) and summary.loc["sqc", "n_better"] == 2
    deltas = out["deltas"][out["deltas"]["metric"] == "sqc"]
    assert dict(zip(deltas["delta"], deltas["n"])) == {0.0: 4, 0.5: 1, 1.0: 1}
    assert list(queries.compare.crossed_items(a, b, "sqc", 0.75, "better")["item_id"]) == ["q02", "q01"]
    pref = queries.compare.preference_agreement(b, a, METRICS).set_index("metric")
    assert (pref.loc["sqc", "agree"], pref.loc["sqc", "ties"], pref.loc["sqc", "disagree"]) == (2, 4, 0)


def test_distribution_and_failures_are_grouped_in_sql(random_db) -> None:
    path, truth = random_db
    overview, dist, fails = queries.runs.run_summary(path, "r")
    assert int(dist.loc[dist["metric"] == "gr", "n"].sum()) == sum(s["gr"] is not None for s in truth.values())
    assert overview.set_index("metric").loc["gr", "n_scored"] == sum(s["gr"] is not None for s in truth.values())
    assert set(fails["status"]) <= {"timeout", "empty"} and set(fails["grain"]) == {"items"}


def test_metric_ids_refuse_sql_in_names() -> None:
    with pytest.raises(ValueError):
        queries.diagnosis.correlations(pd.DataFrame({"sp1": [1.0]}), ["sp1", 'gr" FROM items; --'])
    assert order_metrics(["ragas_faithfulness", "gr", "sp1", "de_x"]) == [
        "sp1", "gr", "de_x", "ragas_faithfulness"]


def test_catalog_lists_runs_and_their_metrics(tmp_path: Path) -> None:
    path = seed(tmp_path / "s.duckdb")
    runs, metrics = queries.runs.catalog(path)
    assert list(runs["run_id"]) == ["llm-judge", "better-retriever", "weak-retriever"]
    assert metrics["weak-retriever"] == METRICS


def test_reads_in_one_block_share_one_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = seed(tmp_path / "s.duckdb")
    opened = []
    real = store._open

    def counting(path, read_only, deadline_s, *sealed):
        opened.append(read_only)
        return real(path, read_only, deadline_s, *sealed)

    monkeypatch.setattr(store, "_open", counting)
    with store.reading(path):
        queries.runs.run_summary(path, "weak-retriever")
        queries.items.item_detail(path, "llm-judge", "q01")
        queries.items.triage_notes(path)
    assert opened == [True]
    queries.items.triage_notes(path)  # outside the block: its own connection, closed again
    assert opened == [True, True]
    writes.add_triage(path, "weak-retriever", "q01", "confirmed", "Retriever", "n", "a")  # not locked by us


def test_quadrant_levels_come_from_the_same_scan(random_db, table) -> None:
    _, truth = random_db
    th = dict(DEFAULT_THRESHOLDS)
    combos = queries.diagnosis.rule_counts(queries.diagnosis.profile(table), th, [("sqc", "rqc"), ("sp1", "sqc")])
    assert int(combos["n"].sum()) == 400
    cols = ["x_low:sqc|rqc", "y_low:sqc|rqc"]
    both_low = int(combos.loc[(combos[cols[0]] == True) & (combos[cols[1]] == True), "n"].sum())  # noqa: E712
    assert both_low == sum(1 for s in truth.values() if s["sqc"] is not None and s["rqc"] is not None
                           and s["sqc"] < th["sqc"] and s["rqc"] < th["rqc"])
    unscored = int(combos.loc[combos[cols[0]].isna() | combos[cols[1]].isna(), "n"].sum())
    assert unscored == sum(1 for s in truth.values() if s["sqc"] is None or s["rqc"] is None)


def test_reads_and_saves_wait_out_this_process_s_own_connections(tmp_path: Path) -> None:
    """One server process: a session saving (read-write) while another reads (read-only) must wait, not crash."""
    import threading
    import time

    path = seed(tmp_path / "s.duckdb")
    release = threading.Event()

    def hold(read_only: bool) -> None:
        with store.connect(path, read_only=read_only):
            release.wait(5)

    writer = threading.Thread(target=hold, args=(False,))
    writer.start()
    time.sleep(0.2)
    threading.Timer(0.5, release.set).start()
    assert len(queries.items.triage_notes(path)) == 0  # waited for the writer, then read
    writer.join()

    release.clear()
    reader = threading.Thread(target=hold, args=(True,))
    reader.start()
    time.sleep(0.2)
    threading.Timer(0.5, release.set).start()
    writes.add_triage(path, "weak-retriever", "q01", "fixed", "Prompt", "after the reader", "a")
    reader.join()
    assert list(queries.items.triage_notes(path)["note"]) == ["after the reader"]

    release.clear()
    reader = threading.Thread(target=hold, args=(True,))
    reader.start()
    time.sleep(0.2)
    try:
        with pytest.raises(store.StoreBusy):
            writes.add_triage(path, "weak-retriever", "q01", "fixed", "Prompt", "lost?", "a", deadline_s=0.3)
    finally:
        release.set()
        reader.join()
