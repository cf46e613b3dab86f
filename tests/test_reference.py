"""Our reference-based metrics (ref_precision, ref_recall, ref_f1): pure aggregation on hand-written
verdicts, the engine with the offline judge, not_applicable without a reference, the LLM judge through
litellm and the loopback server (the reference, then the response, as the prompt's knowledge source),
the CLI's default metric set, and the Run, Item and Compare pages of a run whose items carry references."""
from __future__ import annotations

import asyncio
import html
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
from openai_server import OpenAIServer, elements, identify
from streamlit.testing.v1 import AppTest

from evaluators.cli import main
from evaluators.core.confidence import CALIBRATED
from evaluators.core.records import CLAIM, Item, Status, Verdict
from evaluators.dashboard import ui
from evaluators.judges.llm import LLMJudge
from evaluators.metrics import registry
from evaluators.metrics.registry import REFERENCE, THELMA
from evaluators.metrics.suites.reference import REFERENCE_CLAIM, aggregate_f1, f1
from evaluators.metrics.thelma import aggregate, evaluate_item
from evaluators.runs import runner
from evaluators.storage import queries, store
from tests.conftest import app_db
from tests.test_bad_db import new_app

OK = Status.OK
REF = {m: registry.METRICS[m] for m in REFERENCE}


def v(kind: str, idx: int, value: float | None, status: Status = OK, p: float | None = None) -> Verdict:
    return Verdict(item_id="a", metric="ref_f1", component_kind=kind, component_idx=idx, target="t", value=value,
                   status=status, p=p, p_kind=CALIBRATED if p is not None else None)


# ---------------------------------------------------------------- pure aggregation

def test_f1_is_the_harmonic_mean_of_the_two_sides_means() -> None:
    # Response claims: 2 of 3 in the reference; reference claims: 1 of 2 in the response.
    verdicts = [v(CLAIM, 0, 1.0), v(CLAIM, 1, 1.0), v(CLAIM, 2, 0.0), v(REFERENCE_CLAIM, 0, 1.0),
                v(REFERENCE_CLAIM, 1, 0.0)]
    score = aggregate_f1("a", "ref_f1", verdicts)
    assert score.value == pytest.approx(f1(2 / 3, 1 / 2)) == pytest.approx(4 / 7)
    assert (score.n_scored, score.n_total, score.n_unsure, score.status) == (5, 5, 0, OK)
    # The same verdicts under their own ids are the plain means.
    precision = [replace(x, metric="ref_precision") for x in verdicts if x.component_kind == CLAIM]
    assert aggregate(REF["ref_precision"], "a", "ref_precision", precision).value == pytest.approx(2 / 3)


def test_f1_of_two_decided_zeros_is_a_real_zero() -> None:
    score = aggregate_f1("a", "ref_f1", [v(CLAIM, 0, 0.0), v(REFERENCE_CLAIM, 0, 0.0)])
    assert (score.value, score.status) == (0.0, OK)


def test_f1_without_a_side_has_no_value_and_says_why_never_zero() -> None:
    # The reference split into no claims: recall has nothing to score.
    empty = aggregate_f1("a", "ref_f1", [v(CLAIM, 0, 1.0), v(CLAIM, 1, 0.0)])
    assert (empty.value, empty.status, empty.n_scored, empty.n_total) == (None, Status.EMPTY, 2, 2)
    # The reference's decomposition failed: its failure is the score's status.
    failed = aggregate_f1("a", "ref_f1", [v(CLAIM, 0, 1.0), v(REFERENCE_CLAIM, -1, None, Status.TIMEOUT)])
    assert (failed.value, failed.status) == (None, Status.TIMEOUT)
    # A reference that states nothing ("N/A"): the verdict names the text, on the recall side.
    blank = aggregate_f1("a", "ref_f1", [v(CLAIM, 0, 1.0), v("reference", -1, None, Status.EMPTY)])
    assert (blank.value, blank.status) == (None, Status.EMPTY)
    assert aggregate_f1("a", "ref_f1", []).status is Status.EMPTY


def test_f1_with_a_side_all_unsure_is_unsure_and_counts_them() -> None:
    verdicts = [v(CLAIM, 0, 1.0, p=0.95), v(REFERENCE_CLAIM, 0, 0.0, p=0.45), v(REFERENCE_CLAIM, 1, 1.0, p=0.55)]
    score = aggregate(REF["ref_f1"], "a", "ref_f1", verdicts, (0.3, 0.7))
    assert (score.value, score.status, score.n_scored, score.n_unsure) == (None, Status.UNSURE, 1, 2)
    # Unsure wins over the other side's failure: moving the band may score it.
    mixed = aggregate(REF["ref_f1"], "a", "ref_f1", [v(CLAIM, -1, None, Status.ERROR)] + verdicts[1:], (0.3, 0.7))
    assert mixed.status is Status.UNSURE
    # At a narrow band every verdict is decided: F1 of 1 and 1/2.
    narrow = aggregate(REF["ref_f1"], "a", "ref_f1", verdicts, (0.5, 0.5))
    assert (narrow.value, narrow.n_unsure) == (pytest.approx(f1(1.0, 0.5)), 0)


# ---------------------------------------------------------------- the engine, offline judge

SOURCES = ("The Harbour Museum opens at 10:00 every day. An adult ticket costs 12 euros. "
           "Children under 6 enter free.",)
QUERY = "When does the Harbour Museum open, and what does a ticket cost?"
GOLDEN = "The Harbour Museum opens at 10:00 every day. An adult ticket costs 12 euros. Children under 6 enter free."
INVENTED = GOLDEN + " Its rooftop cafe has been run by Ilse Marrowby since 1987."
SHORT = "The Harbour Museum opens at 10:00 every day."


def offline_scores(response: str, reference: str | None = GOLDEN) -> tuple[dict[str, Any], list[Verdict]]:
    from evaluators.judges.offline import OfflineJudge

    item = Item("m", QUERY, SOURCES, response, reference=reference)
    result = asyncio.run(evaluate_item(item, {"gr": registry.METRICS["gr"], **REF}, OfflineJudge()))
    return {s.metric: s for s in result.scores}, result.verdicts


def test_invented_claims_lower_precision_and_missing_ones_lower_recall_offline() -> None:
    clean, _ = offline_scores(GOLDEN)
    invented, verdicts = offline_scores(INVENTED)
    short, _ = offline_scores(SHORT)
    value = {name: {m: s.value for m, s in scores.items()} for name, scores in
             (("clean", clean), ("invented", invented), ("short", short))}
    assert value["clean"]["ref_precision"] == value["clean"]["ref_recall"] == 1.0
    assert value["invented"]["ref_precision"] < 1.0 and value["invented"]["ref_recall"] == 1.0
    assert value["short"]["ref_recall"] < 1.0 and value["short"]["ref_precision"] == 1.0
    for name in ("invented", "short"):
        p, r = value[name]["ref_precision"], value[name]["ref_recall"]
        assert value[name]["ref_f1"] == pytest.approx(f1(p, r)) and value[name]["ref_f1"] < 1.0
    # The invented claim is the one the reference does not support, decided like GR's (calibrated p, tier).
    unsupported = [x for x in verdicts if x.metric == "ref_precision" and x.value == 0.0]
    assert len(unsupported) == 1 and (unsupported[0].p_kind, unsupported[0].tier) == (CALIBRATED, "offline")
    assert unsupported[0].p < 0.5 and unsupported[0].target == "reference"
    # ref_f1 re-aggregates from its own copies of both sides' verdicts.
    assert sorted((x.component_kind, x.component_idx) for x in verdicts if x.metric == "ref_f1") == sorted(
        (x.component_kind, x.component_idx) for x in verdicts if x.metric in ("ref_precision", "ref_recall"))


def test_reference_metrics_are_not_applicable_without_a_reference() -> None:
    scores, verdicts = offline_scores(GOLDEN, reference=None)
    for m in REFERENCE:
        assert (scores[m].value, scores[m].n_total, scores[m].status) == (None, 0, Status.NOT_APPLICABLE)
    assert not [x for x in verdicts if x.metric in REFERENCE] and scores["gr"].status is OK


# ---------------------------------------------------------------- the LLM judge, through the loopback server

RESPONSE_CLAIMS = ["The museum opens at 10:00.", "A ticket costs 12 euros.", "The cafe opened in 1987."]
REFERENCE_CLAIMS = ["The museum opens at 10:00.", "A ticket costs 12 euros.", "Children enter free.",
                    "Dogs are not allowed."]
LLM_SOURCES = ("The museum opens at 10:00. A ticket costs 12 euros. The cafe opened in 1987. Parking is free.",)
LLM_RESPONSE = " ".join(RESPONSE_CLAIMS)
LLM_REFERENCE = " ".join(REFERENCE_CLAIMS)


def test_the_llm_judge_gets_the_reference_then_the_response_as_the_knowledge_source(
        openai_server: OpenAIServer) -> None:
    asked: list[tuple[str, str, list[str]]] = []

    def scripted(request: dict[str, Any]) -> str:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        name, values = identify(user)
        if name == "claims":  # B.1 of the response, or of the reference
            text = html.unescape(values["input"])
            asked.append((name, text, []))
            claims = REFERENCE_CLAIMS if text == LLM_REFERENCE else RESPONSE_CLAIMS
            return "<output>\n" + "\n".join(f"- {c}" for c in claims) + "\n</output>"
        assert name == "groundedness_batch", name
        knowledge = html.unescape(values["sources"])
        claims = [html.unescape(c) for c in elements(values["claims"]).values()]
        asked.append((name, knowledge, claims))
        # Supported exactly when the knowledge source states the claim word for word.
        return "<output>\n" + "\n".join(f"{n}: {int(c in knowledge)}" for n, c in enumerate(claims, 1)) + "\n</output>"

    openai_server.responder = scripted
    judge = LLMJudge("openai/test-judge", api_base=openai_server.base_url, api_key="x", timeout=5.0, max_attempts=2)
    item = Item("museum", QUERY, LLM_SOURCES, LLM_RESPONSE, reference=LLM_REFERENCE)
    metrics = {"gr": registry.METRICS["gr"], **REF}
    result = asyncio.run(evaluate_item(item, metrics, judge))
    scores = {s.metric: s for s in result.scores}
    # One decomposition of the response, shared by GR and ref_precision, and one of the reference.
    assert sorted(text for name, text, _ in asked if name == "claims") == sorted([LLM_RESPONSE, LLM_REFERENCE])
    checks = sorted((knowledge, claims) for name, knowledge, claims in asked if name == "groundedness_batch")
    assert checks == sorted([(LLM_SOURCES[0], RESPONSE_CLAIMS), (LLM_REFERENCE, RESPONSE_CLAIMS),
                             (LLM_RESPONSE, REFERENCE_CLAIMS)])
    assert len(openai_server.requests) == 5  # ref_f1 asks nothing of its own
    assert scores["gr"].value == 1.0
    assert scores["ref_precision"].value == pytest.approx(2 / 3) and scores["ref_recall"].value == pytest.approx(2 / 4)
    assert scores["ref_f1"].value == pytest.approx(f1(2 / 3, 1 / 2))
    assert (scores["ref_f1"].n_scored, scores["ref_f1"].n_total) == (7, 7)
    # The verdicts carry p, its kind and tier as GR's do.
    gr = next(x for x in result.verdicts if x.metric == "gr")
    assert {(x.p_kind, x.tier) for x in result.verdicts if x.metric in REFERENCE} == {(gr.p_kind, gr.tier)}


# ---------------------------------------------------------------- the default metric set (CLI)

def _write(path: Path, with_reference: bool) -> Path:
    rows = [{"id": "a", "query": QUERY, "sources": list(SOURCES), "response": INVENTED},
            {"id": "b", "query": QUERY, "sources": list(SOURCES), "response": SHORT}]
    if with_reference:
        rows[0]["reference"] = GOLDEN  # one item with a golden answer is enough
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_evaluate_adds_the_reference_metrics_by_default_only_where_items_carry_a_reference(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    assert main(["evaluate", str(_write(tmp_path / "gold.jsonl", True)), "--db", str(db), "--run", "gold",
                 "--quiet"]) == 0
    assert main(["evaluate", str(_write(tmp_path / "plain.jsonl", False)), "--db", str(db), "--run", "plain",
                 "--quiet"]) == 0
    assert main(["evaluate", str(tmp_path / "gold.jsonl"), "--db", str(db), "--run", "ref-only", "--quiet",
                 "--metrics", "ref_precision,ref_recall,ref_f1"]) == 0
    assert sorted(queries.runs.run_metric_ids(db, "gold")) == sorted([*THELMA, *REFERENCE])
    assert sorted(queries.runs.run_metric_ids(db, "plain")) == sorted(THELMA)
    assert sorted(queries.runs.run_metric_ids(db, "ref-only")) == sorted(REFERENCE)
    status = store.query(db, "SELECT item_id, metric, status FROM scores WHERE run_id = 'ref-only' ORDER BY ALL")
    assert set(status[status["item_id"] == "b"]["status"]) == {"not_applicable"}
    assert set(status[status["item_id"] == "a"]["status"]) == {"ok"}
    assert runner.default_metrics([]) == list(THELMA)


# ---------------------------------------------------------------- the pages

@pytest.fixture
def gold_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two runs of the same four items, three with a golden answer: the generator of `after` invents."""
    path = tmp_path / "gold.duckdb"
    questions = [("museum", QUERY, SOURCES, GOLDEN),
                 ("ferry", "How long does the crossing take?", ("The crossing takes 50 minutes.",),
                  "The crossing takes 50 minutes."),
                 ("cafe", "Where is the cafe?", ("The cafe is on the top deck.",), "The cafe is on the top deck.")]
    before = [Item(i, q, s, a, reference=a) for i, q, s, a in questions]
    after = [Item(i, q, s, a + " It was opened by Wren Talmadge in 1971.", reference=a) for i, q, s, a in questions]
    plain = Item("plain", QUERY, SOURCES, SHORT)
    for run, items in (("before", before), ("after", after)):
        runner.evaluate([*items, plain], path, run, metrics=[*THELMA, *REFERENCE])
    yield from app_db(path, monkeypatch)


def open_page(page: str, **params: str) -> AppTest:
    at = new_app()
    at.switch_page(ui.PAGES[page].file)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def frame_with(at: AppTest, column: str) -> Any:
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_run_item_and_compare_pages_show_the_reference_metrics(gold_db: Path) -> None:
    runs = open_page("runs", run="after")
    assert {"REF_PRECISION", "REF_RECALL", "REF_F1"} <= {m.label for m in runs.metric}
    table = frame_with(runs, "n scored").set_index("metric")
    for m in REFERENCE:  # the item without a reference is not scored: n scored of N
        assert table.loc[m.upper(), "n scored"] == "3 of 4" and "unsure" not in table.loc[m.upper(), "unscored items"]
    assert table.loc["REF_PRECISION", "mean"] < 1.0 and table.loc["REF_RECALL", "mean"] == 1.0

    items = frame_with(open_page("run", run="after"), "item_id").set_index("item_id")
    assert {"ref_precision", "ref_recall", "ref_f1"} <= set(items.columns)
    assert items.loc["museum", "ref_precision"] < 1.0 and items.loc["plain", "ref_precision"] != items.loc[
        "plain", "ref_precision"]  # NaN: not applicable, never 0

    item = open_page("item", run="after", item="museum", tab="Response")
    shown = {m.label: m.value for m in item.metric}
    assert shown["REF_RECALL"] == "1.00" and float(shown["REF_PRECISION"]) < 1.0
    captions = [c.value for c in item.caption]
    counts = dict(zip([m.label for m in item.metric], [c for c in captions if not c.startswith("expected")]))
    assert (counts["REF_PRECISION"], counts["REF_RECALL"], counts["REF_F1"]) == (
        "4 scored of 4, 0 unsure", "3 scored of 3, 0 unsure", "7 scored of 7, 0 unsure")  # F1: both sides
    expected = [c for c in captions if c.startswith("expected")]  # under a card, after its counts
    assert any(c.endswith("(mean p of 7 of 7 verdicts)") for c in expected)
    assert any(c.endswith("(mean p of 3 of 3 verdicts)") for c in expected)
    assert "REF_PRECISION" in frame_with(item, "claim").columns
    reference = frame_with(item, "reference_claim")
    assert len(reference) == 3 and all(cell.startswith("✓ 1") for cell in reference["REF_RECALL"])
    plain = open_page("item", run="after", item="plain")
    assert {m.label: m.value for m in plain.metric}["REF_F1"] == "–"  # not applicable: no reference, no failure
    assert any(c.value.startswith("not applicable · ") for c in plain.caption)

    compare = frame_with(open_page("compare", run="before", other="after"), "delta").set_index("metric")
    assert {"REF_PRECISION", "REF_RECALL", "REF_F1"} <= set(compare.index)
    assert compare.loc["REF_PRECISION", "delta"] < 0 and compare.loc["REF_RECALL", "delta"] == 0
    assert compare.loc["REF_PRECISION", "items in both"] == 3
