"""Judged as nothing: texts that state nothing, text the offline judge cannot read, scores out of [0, 1].

- a response, query or reference with no content word ("...", "Yes", "N/A") leaves every metric
  that judges it `empty`, never 0: one test per metric, ours and the suites';
- a piece with no content word is no claim, sub-question, fact or source to judge;
- list numbering with nothing after it ("1. 2. 3.") states nothing: every metric is `empty`, and
  under a heading it is no claim, statement or sentence;
- text the offline judge cannot read (another script, another language) is `not_applicable` with
  the reason, never 0; LLM judges still judge it;
- every stored score, value and probability of a run lies within [0, 1].
"""
from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer, format_aware, identify

from evaluators.core.records import Item, Status
from evaluators.judges import factory
from evaluators.judges.offline import OfflineJudge
from evaluators.metrics import registry
from evaluators.metrics.suites.deepeval import aggregate_ranked_precision
from evaluators.metrics.thelma import aggregate_coverage, aggregate_mean, evaluate_item
from evaluators.runs import runner
from evaluators.storage import store

JUDGE = "openai/test-judge"
QUERY = "When was the Eiffel Tower finished, and how tall is it?"
SOURCES = ("The Eiffel Tower was finished in 1889. It is 330 metres tall.", "The tower is made of wrought iron.")
RESPONSE = "The Eiffel Tower was finished in 1889. It is 330 metres tall."
REFERENCE = "It was finished in 1889 and is 330 metres tall."
BLANKS = ("...", "Yes", "N/A")
ARABIC = "اكتمل بناء برج إيفل عام 1889. يبلغ ارتفاعه 330 مترا."


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def item(**texts: Any) -> Item:
    fields = {"query": QUERY, "sources": SOURCES, "response": RESPONSE, "reference": REFERENCE, **texts}
    return Item(id="x", **fields)


def offline(it: Item, *metrics: str) -> Any:
    return asyncio.run(evaluate_item(it, {m: registry.METRICS[m] for m in metrics}, OfflineJudge()))


def the_text_it_judges(metric: str) -> str:
    """The item text a metric judges: the response where it reads one, else the query, else the reference."""
    reads = registry.METRICS[metric].reads
    return next(t for t in ("response", "query", "reference") if t in reads)


# ---------------------------------------------------------------- nothing to judge is empty, per metric

def test_every_metric_says_which_item_texts_it_judges() -> None:
    assert all(registry.METRICS[m].reads for m in registry.METRICS)


@pytest.mark.parametrize("metric", list(registry.METRICS))
def test_a_text_with_nothing_to_judge_leaves_the_metric_empty(metric: str) -> None:
    text = the_text_it_judges(metric)
    for blank in BLANKS:
        result = offline(item(**{text: blank}), metric)
        (score,) = result.scores
        assert (score.value, score.n_scored, score.status) == (None, 0, Status.EMPTY), (metric, blank)
        assert all(v.value is None and v.status is Status.EMPTY for v in result.verdicts)
        assert any(f"the {text} has no content word" in v.detail for v in result.verdicts)


@pytest.mark.parametrize("metric", ["nv_groundedness", "de_geval"])
def test_the_answer_yes_is_no_zero_for_the_rating_metrics(metric: str) -> None:
    # Measured before: 0.0 with status ok, the mean of no claims.
    (score,) = offline(item(response="Yes"), metric).scores
    assert score.status is Status.EMPTY and score.value is None
    # With something to judge they score as before.
    (score,) = offline(item(), metric).scores
    assert score.status is Status.OK and score.value is not None


def test_a_response_with_content_still_scores_on_every_metric() -> None:
    # The golden answer is the response itself: against the paraphrased REFERENCE the offline judge is
    # honestly unsure of some of ref_precision's claims ("It was finished in 1889 and ...").
    result = offline(item(reference=RESPONSE), *registry.METRICS)
    assert {s.metric: s.status for s in result.scores} == {m: Status.OK for m in registry.METRICS}


def test_every_aggregate_over_nothing_is_empty_not_zero() -> None:
    for aggregate in (aggregate_mean, aggregate_coverage, aggregate_ranked_precision):
        score = aggregate("x", "m", [])
        assert (score.value, score.n_scored, score.n_total, score.status) == (None, 0, 0, Status.EMPTY)


# ---------------------------------------------------------------- no content word: no component

def test_a_punctuation_source_is_not_judged_and_has_no_facts() -> None:
    result = offline(item(sources=(SOURCES[0], "...")), "sp1", "sp2")
    sp1 = sorted((v for v in result.verdicts if v.metric == "sp1"), key=lambda v: v.component_idx)
    assert [(v.value, v.status) for v in sp1] == [(1.0, Status.OK), (None, Status.EMPTY)]
    assert {c.parent for c in result.components if c.kind == "source_fact"} == {0}
    scores = {s.metric: s for s in result.scores}
    assert (scores["sp1"].value, scores["sp1"].n_scored, scores["sp1"].n_total) == (1.0, 1, 2)


def test_llm_pieces_with_no_content_word_are_no_claims_or_subquestions(tmp_path: Path,
                                                                       openai_server: OpenAIServer) -> None:
    def respond(request: dict[str, Any]) -> str:
        name = identify(request["messages"][0]["content"])[0]
        if name == "claims":
            return "<output>\n- The Eiffel Tower was finished in 1889.\n- ...\n- Yes.\n- N/A\n</output>"
        if name == "subquestions":
            return "<output>\n- When was the Eiffel Tower finished?\n- ?\n- ...\n</output>"
        return format_aware(request)
    openai_server.responder = respond
    db = tmp_path / "e.duckdb"
    runner.evaluate([item()], db, "r", JUDGE, api_base=openai_server.base_url, metrics=["gr", "rqc"], timeout=5.0)
    kinds = store.query(db, "SELECT kind, count(*) AS n FROM components GROUP BY kind ORDER BY kind")
    assert dict(zip(kinds["kind"], kinds["n"])) == {"claim": 1, "source": 2, "subquestion": 1}
    scores = store.query(db, "SELECT metric, n_total, status FROM scores ORDER BY metric").to_dict("records")
    assert scores == [{"metric": "gr", "n_total": 1, "status": "ok"}, {"metric": "rqc", "n_total": 1, "status": "ok"}]


def test_nothing_to_judge_costs_no_judge_call(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    runner.evaluate([item(response="...", query="...")], db, "r", JUDGE, api_base=openai_server.base_url,
                    metrics=["gr", "rp", "rqc", "sqc", "sd"], timeout=5.0)
    assert openai_server.requests == []
    statuses = store.query(db, "SELECT DISTINCT status FROM scores")["status"].tolist()
    assert statuses == ["empty"]
    assert store.query(db, "SELECT status FROM runs")["status"].iloc[0] == "finished"  # empty is no failure


# ---------------------------------------------------------------- list numbering is no claim

NUMBERED = "1. 2. 3."
UNDER_A_HEADING = "**Steps:**\n1.\n2.\n3."  # the heading has a content word, the items none
# The metrics built on the response's claims, statements or sentences: nothing to split is nothing to score.
SPLIT_METRICS = ("rp", "gr", "sd", "ragas_faithfulness", "ragas_answer_relevance", "nv_groundedness",
                 "de_faithfulness", "de_answer_relevancy")


@pytest.fixture(scope="module")
def numbered_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One offline run of every metric into DuckDB, an item per text that is the numbered fragment."""
    items = [Item(name, **{"query": QUERY, "sources": SOURCES, "response": RESPONSE, "reference": REFERENCE,
                           name: NUMBERED}) for name in ("query", "response", "reference")]
    items += [Item("heading", QUERY, SOURCES, UNDER_A_HEADING, REFERENCE),
              Item("sources", QUERY, (NUMBERED, "1)\n2)\n3)"), RESPONSE, REFERENCE)]
    db = tmp_path_factory.mktemp("numbered") / "e.duckdb"
    runner.evaluate(items, db, "r", factory.OFFLINE, metrics=list(registry.METRICS))
    return db


def numbered_score(db: Path, item_id: str, metric: str) -> dict[str, Any]:
    (row,) = store.query(db, "SELECT value, n_scored, n_total, status FROM scores WHERE item_id = ? AND metric = ?",
                         [item_id, metric]).to_dict("records")
    return row


@pytest.mark.parametrize("metric", list(registry.METRICS))
def test_a_numbered_fragment_leaves_the_metric_empty_not_zero(numbered_run: Path, metric: str) -> None:
    # Measured before: RP, GR, SD, ragas_faithfulness and de_faithfulness 0.00 with status ok.
    row = numbered_score(numbered_run, the_text_it_judges(metric), metric)
    assert row["status"] == "empty" and math.isnan(row["value"]) and row["n_scored"] == 0, (metric, row)


@pytest.mark.parametrize("metric", SPLIT_METRICS)
def test_numbered_fragments_under_a_heading_are_no_claims(numbered_run: Path, metric: str) -> None:
    row = numbered_score(numbered_run, "heading", metric)
    assert row["status"] == "empty" and math.isnan(row["value"]) and row["n_scored"] == 0, (metric, row)


@pytest.mark.parametrize("metric", ["sp1", "sp2", "ragas_context_relevance", "de_contextual_relevancy"])
def test_numbered_sources_have_no_facts_or_statements(numbered_run: Path, metric: str) -> None:
    row = numbered_score(numbered_run, "sources", metric)
    assert row["status"] == "empty" and math.isnan(row["value"]) and row["n_scored"] == 0, (metric, row)


def test_numbered_fragments_leave_no_component(numbered_run: Path) -> None:
    split = store.query(numbered_run, """SELECT count(*) AS n FROM components WHERE item_id IN ('response', 'heading')
                                         AND kind IN ('claim', 'sentence', 'ragas_statement', 'de_statement',
                                                      'generated_question')""")
    assert split["n"].iloc[0] == 0
    facts = store.query(numbered_run, "SELECT count(*) AS n FROM components WHERE item_id = 'sources' "
                                      "AND kind IN ('source_fact', 'context_sentence', 'context_statement')")
    assert facts["n"].iloc[0] == 0


# ---------------------------------------------------------------- text the offline judge cannot read

def test_a_correct_arabic_answer_is_not_applicable_offline_never_zero(tmp_path: Path) -> None:
    # Measured before: GR 0 with status ok.
    db = tmp_path / "e.duckdb"
    runner.evaluate([item(response=ARABIC)], db, "r", factory.OFFLINE, metrics=["gr", "rp", "rqc", "sd"])
    rows = store.query(db, "SELECT metric, value, status FROM scores ORDER BY metric").to_dict("records")
    assert all(r["status"] == "not_applicable" and math.isnan(r["value"]) for r in rows), rows
    details = store.query(db, "SELECT DISTINCT detail FROM verdicts")["detail"].tolist()
    assert details and all("English only" in d and "Arabic script" in d for d in details)


def test_a_french_answer_is_not_applicable_offline() -> None:
    result = offline(item(response="La tour Eiffel a été achevée en 1889 et elle est haute de 330 mètres."), "gr")
    assert result.scores[0].status is Status.NOT_APPLICABLE
    assert "another language than English" in result.verdicts[0].detail


def test_only_the_unreadable_elements_of_a_batch_are_not_applicable() -> None:
    result = offline(item(sources=(SOURCES[0], "برج إيفل مصنوع من الحديد المطاوع.")), "sp1")
    sp1 = sorted(result.verdicts, key=lambda v: v.component_idx)
    assert [(v.value, v.status) for v in sp1] == [(1.0, Status.OK), (None, Status.NOT_APPLICABLE)]
    assert "source 2 is mostly Arabic script" in sp1[1].detail
    assert (result.scores[0].value, result.scores[0].n_scored) == (1.0, 1)


def test_llm_judges_still_judge_text_the_offline_judge_cannot_read(tmp_path: Path,
                                                                    openai_server: OpenAIServer) -> None:
    openai_server.responder = lambda request: (
        f'<output>\n- {ARABIC}\n</output>' if identify(request["messages"][0]["content"])[0] == "claims"
        else "<output>\n1: 1\n</output>")
    db = tmp_path / "e.duckdb"
    runner.evaluate([item(response=ARABIC)], db, "r", JUDGE, api_base=openai_server.base_url, metrics=["gr"],
                    timeout=5.0)
    assert store.query(db, "SELECT value, status FROM scores").to_dict("records") == [{"value": 1.0, "status": "ok"}]


# ---------------------------------------------------------------- within [0, 1]

def test_identical_sentences_give_a_cosine_of_at_most_one() -> None:
    # float32 cosines of a sentence with itself reached 1.0000001.
    result = offline(item(response="The Eiffel Tower is in Paris. " * 4), "sd")
    assert all(v.evidence is not None and 0.0 <= v.evidence <= 1.0 for v in result.verdicts)
    assert result.scores[0].value == 0.0


def test_every_stored_score_value_and_probability_of_a_run_is_within_0_and_1(tmp_path: Path) -> None:
    items = [item(), item(response=RESPONSE + " " + RESPONSE), item(response="Bananas are yellow. They grow on trees."),
             item(response="...", query="Yes"), item(response=ARABIC)]
    items = [Item(f"i{k}", it.query, it.sources, it.response, it.reference) for k, it in enumerate(items)]
    db = tmp_path / "e.duckdb"
    runner.evaluate(items, db, "r", factory.OFFLINE, metrics=list(registry.METRICS))
    values = store.query(db, "SELECT value FROM scores UNION ALL SELECT value FROM verdicts")["value"]
    assert len(values.dropna()) > 100 and values.dropna().between(0.0, 1.0).all()
    # Evidence is a probability or a cosine, except the raw ratings Nvidia and G-Eval keep (0-4, 1-5).
    evidence = store.query(db, """SELECT evidence FROM verdicts
                                  WHERE metric NOT LIKE 'nv_%' AND metric <> 'de_geval'""")["evidence"].dropna()
    assert len(evidence) > 50 and evidence.between(0.0, 1.0).all()
