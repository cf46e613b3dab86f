"""GRAMMAR end to end: correctness judged and stored for a run, the report and the Robustness page on
it, and the offline pipeline stored and judged like any run."""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from openai_server import OpenAIServer
from streamlit.testing.v1 import AppTest

from evaluators import grammar
from evaluators.cli import grammar as grammar_cli
from evaluators.cli import main
from evaluators.core.records import Item
from evaluators.dashboard.views.robustness import suggestion
from evaluators.grammar import generate, pipeline, robustness, runs
from evaluators.storage import queries, store, writes

ROOT = Path(__file__).resolve().parents[1]


def _item(item_id: str, group: str, text: str, response: str, truth: str, retrieved: list[str],
          template: str = "tpl", status: str = "ok") -> Item:
    meta = {grammar.META_GROUP: group, grammar.META_SQL_TEMPLATE: template, grammar.META_TEXT_TEMPLATE: text,
            grammar.META_TRUE_DOCS: ["d1"], grammar.META_RETRIEVED: retrieved, grammar.META_GENERATOR_STATUS: status}
    return Item(item_id, f"question {item_id}", ("source",), response, truth, meta)


def seed_run(db: Path, run: str = "r1") -> None:
    """Three groups of two variants: robust, gap, non-robust (one wrong answer with the right context)."""
    items = [_item("g1-a", "g1", "a", "It is Cork.", "Cork", ["d1"]), _item("g1-b", "g1", "b", "Cork", "Cork", ["d1"]),
             _item("g2-a", "g2", "a", "no idea", "Lisbon", ["d2"]), _item("g2-b", "g2", "b", "Porto", "Lisbon", ["d2"]),
             _item("g3-a", "g3", "a", "Leeds", "Leeds", ["d1"]), _item("g3-b", "g3", "b", "York", "Leeds", ["d1"])]
    store.migrate(db)
    writes.write_batch(db, run, items=items)


def test_offline_correctness_is_stored_and_reported(tmp_path: Path) -> None:
    db = tmp_path / "eval.duckdb"
    seed_run(db)
    summary = runs.evaluate_correctness(db, "r1")
    assert (summary.items, summary.correct, summary.statuses) == (6, 3, {"ok": 6})
    rows = store.query(db, "SELECT item_id, correct, detail FROM grammar_correctness ORDER BY item_id")
    assert list(rows["correct"]) == [True, True, False, False, True, False]
    assert "normalised match" in rows["detail"][0]
    counts = robustness.group_counts(db, "r1")
    assert counts == robustness.count_groups(robustness.outcomes(db, "r1"))  # SQL and Python grouping agree
    rep = robustness.report(db, "r1")
    assert rep.classes == {"g1": "robust", "g2": "gap", "g3": "non_robust"}
    f = rep.plain["tpl"]
    assert (f.items, f.correct, f.gap_items, f.robustness) == (6, 3, 2, pytest.approx(3 / 4))
    assert rep.blame == {"g3-b": "lm"} and rep.modular["tpl"].robustness == 1.0
    assert list(rep.non_robust["item_id"]) == ["g3-a", "g3-b"]
    assert queries.grammar.grammar_runs(db) == ["r1"]
    assert "LM shortfall 1" in robustness.report_text(rep)


def test_generator_failures_are_not_judged_and_show_as_unscored(tmp_path: Path) -> None:
    db = tmp_path / "eval.duckdb"
    store.migrate(db)
    writes.write_batch(db, "r", items=[_item("x", "g", "a", "", "Cork", [], status="error"),
                                      _item("y", "g", "b", "Cork", "Cork", ["d1"])])
    summary = runs.evaluate_correctness(db, "r")
    assert summary.statuses == {"error": 1, "ok": 1} and summary.correct == 1
    f = robustness.report(db, "r").plain["tpl"]
    assert (f.items, f.unscored, f.groups["robust"]) == (1, 1, 1)


def _table6_reply(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    truth = re.search(r"<true_answer>(.*?)</true_answer>", prompt, re.S).group(1)
    given = re.search(r"<given_response>(.*?)</given_response>", prompt, re.S).group(1)
    if "York" in given:
        return "It depends."  # unparseable, twice: the verdict must be `unparsed`, not a guess
    return f"<output>{'Correct' if truth.lower() in given.lower() else 'Incorrect'}</output>"


def test_litellm_correctness_judge_uses_table6_stores_calls_and_caches(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key
    db = tmp_path / "eval.duckdb"
    seed_run(db)
    with OpenAIServer(responder=_table6_reply) as server:
        summary = runs.evaluate_correctness(db, "r1", "openai/test-judge", server.base_url)
        assert summary.statuses == {"ok": 5, "unparsed": 1} and summary.correct == 3
        first = len(server.requests)
        assert "Evaluate the accuracy of the given response" in server.requests[0]["messages"][0]["content"]
        again = runs.evaluate_correctness(db, "r1", "openai/test-judge", server.base_url)
        assert again.statuses == summary.statuses and len(server.requests) == first  # answered from the cache
    row = store.query(db, "SELECT correct, status FROM grammar_correctness WHERE item_id = 'g3-b'").iloc[0]
    assert row["status"] == "unparsed" and pd.isna(row["correct"])
    n_calls = store.query(db, "SELECT count(*) AS n FROM judge_calls WHERE prompt_name = 'grammar_correctness'")
    assert int(n_calls["n"].iloc[0]) == first
    assert robustness.report(db, "r1").plain["tpl"].unscored == 1



def test_grammar_eval_takes_a_judge_chain_like_evaluate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The offline match gives a label only, so the chain's model decides every item; a bad chain is one line."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key
    db = tmp_path / "eval.duckdb"
    seed_run(db)
    with OpenAIServer(responder=_table6_reply) as server:
        code = main(["grammar-eval", "--db", str(db), "--run", "r1", "--judge", "offline>openai/test-judge",
                     "--api-base", server.base_url])
        assert code == 0 and len(server.requests) >= 6
    assert "3 correct of 5 judged, 6 items (unparsed 1)" in capsys.readouterr().out
    rows = store.query(db, "SELECT judge, count(*) AS n FROM grammar_correctness GROUP BY judge")
    assert rows.to_dict("records") == [{"judge": "openai/test-judge", "n": 6}]
    assert main(["grammar-eval", "--db", str(db), "--run", "r1", "--judge", "offline>"]) == 2
    testset = tmp_path / "t.jsonl"
    assert main(["grammar-generate", "--out", str(testset), "--max-groups", "1", "--per-group", "1"]) == 0
    assert main(["grammar-run", str(testset), "--db", str(tmp_path / "new.duckdb"), "--run", "x",
                 "--judge", "offline>openai/test-judge", "--decompose-with", "local"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("error: ") for e in errors) and "--decompose-with local" in errors[1]
    assert not (tmp_path / "new.duckdb").exists()

def _judged_run_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The Robustness page on seed_run's run, its correctness judged."""
    db = tmp_path / "eval.duckdb"
    seed_run(db)
    runs.evaluate_correctness(db, "r1")
    monkeypatch.setenv("RAG_TRIAGE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "7_Robustness.py"), default_timeout=30)
    at.run()
    return at


def test_robustness_page_shows_clusters_variants_and_blame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _judged_run_page(tmp_path, monkeypatch)
    assert not at.exception
    clusters = at.dataframe[0].value.set_index("cluster")
    assert clusters.loc["tpl", "R"] == pytest.approx(0.75) and clusters.loc["tpl", "Acc"] == pytest.approx(0.5)
    assert clusters.loc["tpl", "groups: gap · robust · non-robust"] == "1 · 1 · 1"
    assert at.dataframe[1].value.set_index("cluster").loc["tpl", "R (retrieval)"] == 1.0
    grid = at.dataframe[2].value
    assert list(grid["group_id"]) == ["g3"] and list(grid[["a", "b"]].iloc[0]) == ["✓ right", "✗ wrong"]
    marks = [m.value for m in at.markdown]
    assert "**b** · ✗ wrong" in marks and "[open item](Item?run=r1&item=g3-b)" in marks
    assert [m.value for m in at.metric] == ["1", "0", "0"]
    assert list(at.dataframe[3].value["attribution"]) == ["lm"]


def test_robustness_page_without_grammar_runs_says_how_to_make_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "eval.duckdb"
    store.migrate(db)
    monkeypatch.setenv("RAG_TRIAGE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "7_Robustness.py"), default_timeout=30)
    at.run()
    assert not at.exception and "grammar-demo" in at.info[0].value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    grammar_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def _cli(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    return args.handler(args)


def test_offline_pipeline_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """BM25 + the extractive generator on two demo query logics, stored and judged like any run."""
    templates = [t for t in generate.load_templates(grammar.TEMPLATES) if t.id in ("client_location", "employee_manager")]
    with generate.open_source(grammar.COMPANY_SQL) as con:
        cases = [c for c in generate.generate(con, templates, max_groups=2, seed=1).cases]
        docs = pipeline.render_corpus(con)
    db = tmp_path / "eval.duckdb"
    result = runs.run_pipeline(cases, docs, db, "demo", retriever="bm25", metrics=["sd"])
    assert result.correctness.items == len(cases) == 12
    stored = store.query(db, "SELECT item_id, response, metadata FROM items WHERE run_id = 'demo' ORDER BY item_id")
    meta = json.loads(stored["metadata"][0])
    assert meta[grammar.META_RETRIEVED] and meta["retriever"] == "bm25" and meta[grammar.META_GROUP]
    assert "extractive" in meta["generator_detail"]
    location = stored[stored["item_id"].str.startswith("client_location")]
    assert all("," in r for r in location["response"])  # the span "City, Country", not a whole sentence
    rep = robustness.report(db, "demo")
    assert rep.plain["client_location"].correct == 6 and rep.plain["client_location"].groups["robust"] == 2
    assert set(rep.classes) == {c.group for c in cases}
    # The CLI re-judges and reports the same run.
    assert _cli("grammar-eval", "--db", str(db), "--run", "demo", "--cluster-by", "text_template") == 0
    assert "clusters by text_template" in capsys.readouterr().out


def test_robustness_page_opens_with_its_question_one_action_and_a_glossary(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    at = _judged_run_page(tmp_path, monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    assert at.markdown[0].value.startswith(
        "Do answers stay right when the question is rephrased or its SQL template changes?")
    # g3's wrong wording saw the documents of its right one: the generator, not retrieval, is to fix.
    (action,) = [i.value for i in at.info if i.value.startswith("**What to do:**")]
    assert "Fix the generator first" in action and "in 1 of the 1 wrong answers" in action
    (glossary,) = [e for e in at.expander if e.label.startswith("Glossary")]
    words = " ".join(m.value for m in glossary.markdown)
    for term in ("**Gap group**", "**Robust group**", "**Non-robust group**", "**λ (lambda)**", "**R (robustness)**",
                 "**Acc (accuracy)**", "**Blame**", "**LM shortfall**", "**possible retrieval failure**"):
        assert term in words, term


def _report(groups: dict[str, int], blame: dict[str, str]) -> robustness.Report:
    every = robustness.Figures(grammar.ALL, items=12, correct=6, gap_items=3, unscored=0, groups=groups)
    return robustness.Report("r", "sql_template", {}, {grammar.ALL: every}, {grammar.ALL: every}, {}, blame,
                             pd.DataFrame())


def test_the_robustness_action_follows_what_the_report_found() -> None:
    mixed = {grammar.GAP: 1, grammar.ROBUST: 2, grammar.NON_ROBUST: 2}
    retrieval = suggestion(_report(mixed, {"a": grammar.RETRIEVAL, "b": grammar.RETRIEVAL, "c": grammar.LM}))
    assert retrieval.startswith("Fix retrieval first: 2 of the 3 wrong answers")
    assert suggestion(_report(mixed, {"a": grammar.LM})).startswith("Fix the generator first")
    gaps = suggestion(_report({grammar.GAP: 2, grammar.ROBUST: 3, grammar.NON_ROBUST: 0}, {}))
    assert gaps.startswith("No wording changes an answer, but 2 question(s) are never answered right")
    assert suggestion(_report({grammar.GAP: 0, grammar.ROBUST: 3, grammar.NON_ROBUST: 0}, {})).startswith("Nothing to fix")
