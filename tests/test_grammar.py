"""GRAMMAR: generator counts and ground truth, robustness math, correctness judging, pipeline, page, CLI."""
from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from evaluators import grammar, store
from evaluators import grammar_gen as gen
from evaluators import grammar_rag as rag
from evaluators.grammar import GroupCount, Outcome
from evaluators.records import Item
from openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
AURP = ROOT.parent / "shared" / "datasets" / "grammar_aurp"

TINY_SQL = """
CREATE TABLE items (name VARCHAR, colour VARCHAR, size INTEGER);
INSERT INTO items VALUES ('cup', 'red', 1), ('mug', 'red', 2), ('jug', 'blue', 2), ('O''Brien vase', 'blue', 2);
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.sql"
    path.write_text(TINY_SQL, encoding="utf-8")
    return path


def tiny_templates() -> list[gen.SqlTemplate]:
    T = gen.TextTemplate
    return [
        gen.SqlTemplate("colour", "SELECT colour FROM items WHERE name = '[items.name]'",
                        (T("short", "Colour of '[items.name]'?"), T("long", "What colour is the '[items.name]'?")),
                        "SELECT 'item:' || name FROM items WHERE name = '[items.name]'"),
        gen.SqlTemplate("which", "SELECT name FROM items WHERE colour = '[items.colour]' AND size = [items.size]",
                        (T("a", "Which [items.colour] item has size [items.size]?"),
                         T("b", "Name the [items.colour] one of size [items.size]."),
                         T("c", "[items.colour], size [items.size]: which item?"))),
    ]


# ---------------------------------------------------------------- generator

def test_generator_counts_follow_m_n_q_on_a_tiny_schema(tiny: Path) -> None:
    with gen.open_source(tiny) as con:
        testset = gen.generate(con, tiny_templates())
    colour, which = testset.counts
    # colour: N=2 texts x Q=4 names, every name has one colour.
    fields = ("texts", "combos", "empty", "multi", "groups", "queries")
    assert tuple(getattr(colour, f) for f in fields) == (2, 4, 0, 0, 4, 8)
    # which: Q = 2 colours x 2 sizes; (blue, 1) has no row, (blue, 2) has two: dropped.
    assert tuple(getattr(which, f) for f in fields) == (3, 4, 1, 1, 2, 6)
    assert len(testset.cases) == sum(c.texts * c.groups for c in testset.counts) == 14
    assert "2 SQL templates (M) -> 6 semantic groups -> 14 text queries" in testset.summary()
    # One semantic group per filled SQL query, with every text variant of its template.
    groups: dict[str, set[str]] = {}
    for case in testset.cases:
        groups.setdefault(case.group, set()).add(case.sql)
    assert all(len(sqls) == 1 for sqls in groups.values()) and len(groups) == 6


def test_placeholders_fill_from_distinct_values_and_truth_comes_from_sql(tiny: Path) -> None:
    with gen.open_source(tiny) as con:
        assert gen.distinct_values(con, "items.colour") == ["blue", "red"]
        assert gen.distinct_values(con, "ITEMS.size") == [1, 2]  # names matched case-insensitively
        with pytest.raises(gen.TemplateError, match="no such column"):
            gen.distinct_values(con, "items.price")
        cases = gen.generate(con, tiny_templates()).cases
    by_id = {c.id: c for c in cases}
    vase = by_id["colour-001-long"]  # values sorted: "O'Brien vase" < "cup" < "jug" < "mug"
    assert vase.query == "What colour is the 'O'Brien vase'?"
    assert vase.sql == "SELECT colour FROM items WHERE name = 'O''Brien vase'"  # quotes escaped in the group's SQL
    assert vase.answer == "blue" and vase.true_doc_ids == ("item:O'Brien vase",)
    red_two = next(c for c in cases if c.sql_template == "which" and c.text_template == "a" and "red" in c.query)
    assert red_two.query == "Which red item has size 1?" and red_two.answer == "cup"
    assert red_two.sql.endswith("colour = 'red' AND size = 1")  # a bare numeric placeholder stays bare
    assert gen.bind("SELECT a FROM t WHERE b = '[t.b]' AND c = [t.c]", {"t.b": "x'y", "t.c": 3}) == (
        "SELECT a FROM t WHERE b = ? AND c = ?", ["x'y", 3])


def test_multi_column_answers_and_dates_become_text(tmp_path: Path) -> None:
    source = tmp_path / "d.sql"
    source.write_text("CREATE TABLE p (name VARCHAR, start DATE, budget DECIMAL(6,2), city VARCHAR, country VARCHAR);"
                      "INSERT INTO p VALUES ('Dock', DATE '2022-03-14', 12.50, 'Cork', 'Ireland');", encoding="utf-8")
    T = gen.TextTemplate
    ask = (T("q", "[p.name]?"),)
    templates = [gen.SqlTemplate("start", "SELECT start, budget FROM p WHERE name = '[p.name]'", ask),
                 gen.SqlTemplate("where", "SELECT city, country FROM p WHERE name = '[p.name]'", ask)]
    with gen.open_source(source) as con:
        cases = gen.generate(con, templates).cases
    assert [c.answer for c in cases] == ["2022-03-14, 12.5", "Cork, Ireland"]


def test_stratified_sampling_gives_every_group_the_same_number_of_variants(tiny: Path) -> None:
    with gen.open_source(tiny) as con:
        first = gen.generate(con, tiny_templates(), per_group=2, seed=7)
        again = gen.generate(con, tiny_templates(), per_group=2, seed=7)
        few = gen.generate(con, tiny_templates(), max_groups=1, seed=7)
        with pytest.raises(gen.TemplateError, match="colour has 2"):
            gen.generate(con, tiny_templates(), per_group=3)
        every = gen.generate(con, tiny_templates())
    per_group: dict[str, int] = {}
    for case in first.cases:
        per_group[case.group] = per_group.get(case.group, 0) + 1
    assert set(per_group.values()) == {2} and len(per_group) == 6
    assert [c.id for c in first.cases] == [c.id for c in again.cases]  # seeded
    assert [c.groups for c in few.counts] == [1, 1]
    assert {c.group for c in few.cases} <= {c.group for c in every.cases}  # group ids survive sampling


def test_bad_templates_are_refused_with_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"templates": [
        {"id": "a", "sql": "SELECT x FROM t WHERE y = '[t.y]'", "texts": {"s": "About [t.z]?"}},
        {"id": "b", "sql": "DELETE FROM t", "texts": ["Delete?"]},
    ]}), encoding="utf-8")
    with pytest.raises(gen.TemplateError) as err:
        gen.load_templates(path)
    text = str(err.value)
    assert "a/s: the text template must use exactly the placeholders ['t.y']" in text
    assert "b: the SQL template is not a SELECT" in text and "b: the SQL template has no [table.column]" in text


def test_demo_templates_load_and_the_committed_corpus_is_in_sync() -> None:
    templates = gen.load_templates(rag.TEMPLATES)
    with gen.open_source(rag.COMPANY_SQL) as con:
        testset = gen.generate(con, templates)
        docs = rag.render_corpus(con)
    assert (len(templates), len({c.group for c in testset.cases}), len(testset.cases)) == (12, 127, 381)
    assert docs == rag.load_corpus(rag.CORPUS), "data/grammar/corpus.jsonl is stale: re-render it"
    text = {d.id: d.text for d in docs}
    assert len(docs) == 32 and "sector" not in text["client:C08"]  # an omitted fact: a coverage gap
    assert all(set(c.true_doc_ids) <= set(text) for c in testset.cases)


# ---------------------------------------------------------------- robustness math

def test_groups_r_and_acc_on_hand_built_counts() -> None:
    counts = [GroupCount("A", "robust", 3, 3), GroupCount("A", "gap", 3, 0), GroupCount("A", "shaky", 3, 1, unscored=1),
              # right in cluster B only: not a gap group, and non-robust within A
              GroupCount("A", "split", 2, 0), GroupCount("B", "split", 2, 2)]
    classes = grammar.classify_groups(counts)
    assert classes == {"robust": "robust", "gap": "gap", "shaky": "non_robust", "split": "non_robust"}
    figs = grammar.figures(counts, classes)
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
    only_gaps = grammar.figures([GroupCount("A", "g", 2, 0)])["A"]
    assert only_gaps.robustness is None and only_gaps.accuracy == 0.0 and only_gaps.lam == 1.0
    unjudged = grammar.figures([GroupCount("A", "g", 0, 0, unscored=3)])["A"]
    assert unjudged.robustness is None and unjudged.accuracy is None and unjudged.groups["gap"] == 0
    assert grammar.classify_groups([GroupCount("A", "g", 0, 0, unscored=3)]) == {}


def test_context_comparison_blames_the_lm_only_when_a_right_sibling_saw_the_same_documents() -> None:
    outs = [Outcome("ok", "c", "g1", True, ("d1",), ("d1",)),
            Outcome("same-docs", "c", "g1", False, ("d1",), ("d1",)),
            Outcome("other-docs", "c", "g1", False, ("d2",), ("d1",)),
            Outcome("no-ids", "c", "g1", False, ()),
            Outcome("unjudged", "c", "g1", None, ("d1",)),
            Outcome("gap", "c", "g2", False, ("d1",))]
    blame = grammar.context_comparison(outs)
    assert blame == {"same-docs": "lm", "other-docs": "retrieval", "no-ids": "unknown"}
    credited = grammar.credit_lm(outs, blame)
    assert [o.correct for o in credited] == [True, True, False, False, None, False]
    assert grammar.figures(grammar.count_groups(credited))["c"].robustness == pytest.approx(2 / 4)
    assert grammar.hit_rates(outs) == {"c": (2, 3), grammar.ALL: (2, 3)}


def test_answer_match_normalises_case_punctuation_and_dates() -> None:
    assert grammar.answer_match("2022-03-14", "Work began on 14 March 2022.")[0]
    assert grammar.answer_match("2022-03-14", "It started March 14th, 2022")[0]
    assert grammar.answer_match("Cork, Ireland", "in Cork (Ireland)")[0]
    ok, why = grammar.answer_match("Cork, Ireland", "in Cork")
    assert not ok and "'ireland'" in why
    assert not grammar.answer_match("2022-03-14", "14 March 2023")[0]
    assert not grammar.answer_match("Heron", "Herons nest here")[0]  # whole tokens only
    assert grammar.answer_match("Director of Projects", "works as director of projects")[0]
    assert not grammar.answer_match("", "anything")[0]


def test_table6_verdicts_parse_and_ambiguity_is_a_parse_error() -> None:
    assert grammar.parse_correctness("Correct") == 1
    assert grammar.parse_correctness("<output>Incorrect</output>") == 0
    for bad in ("Correct or Incorrect?", "", "<output>maybe</output>"):
        with pytest.raises(Exception, match="Correct or Incorrect"):
            grammar.parse_correctness(bad)


# ---------------------------------------------------------------- stored runs: judge, report, page

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
    store.write_batch(db, run, items=items)


def test_offline_correctness_is_stored_and_reported(tmp_path: Path) -> None:
    db = tmp_path / "eval.duckdb"
    seed_run(db)
    summary = grammar.evaluate_correctness(db, "r1")
    assert (summary.items, summary.correct, summary.statuses) == (6, 3, {"ok": 6})
    rows = store.query(db, "SELECT item_id, correct, detail FROM grammar_correctness ORDER BY item_id")
    assert list(rows["correct"]) == [True, True, False, False, True, False]
    assert "normalised match" in rows["detail"][0]
    counts = grammar.group_counts(db, "r1")
    assert counts == grammar.count_groups(grammar.outcomes(db, "r1"))  # SQL and Python grouping agree
    rep = grammar.report(db, "r1")
    assert rep.classes == {"g1": "robust", "g2": "gap", "g3": "non_robust"}
    f = rep.plain["tpl"]
    assert (f.items, f.correct, f.gap_items, f.robustness) == (6, 3, 2, pytest.approx(3 / 4))
    assert rep.blame == {"g3-b": "lm"} and rep.modular["tpl"].robustness == 1.0
    assert list(rep.non_robust["item_id"]) == ["g3-a", "g3-b"]
    assert grammar.grammar_runs(db) == ["r1"]
    assert "LM shortfall 1" in grammar.report_text(rep)


def test_generator_failures_are_not_judged_and_show_as_unscored(tmp_path: Path) -> None:
    db = tmp_path / "eval.duckdb"
    store.migrate(db)
    store.write_batch(db, "r", items=[_item("x", "g", "a", "", "Cork", [], status="error"),
                                      _item("y", "g", "b", "Cork", "Cork", ["d1"])])
    summary = grammar.evaluate_correctness(db, "r")
    assert summary.statuses == {"error": 1, "ok": 1} and summary.correct == 1
    f = grammar.report(db, "r").plain["tpl"]
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
        summary = grammar.evaluate_correctness(db, "r1", "openai/test-judge", server.base_url)
        assert summary.statuses == {"ok": 5, "unparsed": 1} and summary.correct == 3
        first = len(server.requests)
        assert "Evaluate the accuracy of the given response" in server.requests[0]["messages"][0]["content"]
        again = grammar.evaluate_correctness(db, "r1", "openai/test-judge", server.base_url)
        assert again.statuses == summary.statuses and len(server.requests) == first  # answered from the cache
    row = store.query(db, "SELECT correct, status FROM grammar_correctness WHERE item_id = 'g3-b'").iloc[0]
    assert row["status"] == "unparsed" and pd.isna(row["correct"])
    n_calls = store.query(db, "SELECT count(*) AS n FROM judge_calls WHERE prompt_name = 'grammar_correctness'")
    assert int(n_calls["n"].iloc[0]) == first
    assert grammar.report(db, "r1").plain["tpl"].unscored == 1


def _template_replies(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    if "SQL query Template Generator" in prompt:
        return ("<output>\nSELECT colour FROM items WHERE name = '[items.name]';\nSELECT * FROM items WHERE name = "
                "'[items.name]'\nSELECT price FROM items WHERE name = '[items.name]'\nSELECT name FROM items\n"
                "SELECT name FROM items WHERE colour = '[items.colour]'\n</output>")
    return ("<output>\nWhat colour is '[items.name]'?\nColour of the '[items.name]'?\nWhat colour is it?\n"
            "Which item is [items.colour]?\n</output>")


def test_a_judge_writes_sql_and_text_templates_and_unusable_ones_are_dropped(
        tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    from evaluators.judge import LLMJudge

    with OpenAIServer(responder=_template_replies) as server, gen.open_source(tiny) as con:
        judge = LLMJudge("openai/test-judge", api_base=server.base_url, api_key="x", timeout=5.0)
        templates, notes = asyncio.run(gen.complete_templates(judge, con, None, True, 2))
        schema = server.requests[0]["messages"][0]["content"]
        assert "Table items (name VARCHAR, colour VARCHAR, size INTEGER)" in schema
        testset = gen.generate(con, templates)
    assert [t.sql for t in templates] == ["SELECT colour FROM items WHERE name = '[items.name]'",
                                          "SELECT name FROM items WHERE colour = '[items.colour]'"]
    assert any("selects *" in n for n in notes) and any("price" in n and "does not run" in n for n in notes)
    assert any("no [table.column] placeholder" in n for n in notes)
    assert [x.text for x in templates[0].texts] == ["What colour is '[items.name]'?", "Colour of the '[items.name]'?"]
    # Text variants that lose or change the placeholders are dropped; the single-answer criterion
    # drops both colours of the second template (two items each).
    assert [(c.template, c.groups, c.multi) for c in testset.counts] == [("sql01", 4, 0), ("sql02", 0, 2)]


def test_robustness_page_shows_clusters_variants_and_blame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "eval.duckdb"
    seed_run(db)
    grammar.evaluate_correctness(db, "r1")
    monkeypatch.setenv("RAG_TRIAGE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "7_Robustness.py"), default_timeout=30)
    at.run()
    assert not at.exception
    clusters = at.dataframe[0].value.set_index("cluster")
    assert clusters.loc["tpl", "R"] == pytest.approx(0.75) and clusters.loc["tpl", "Acc"] == pytest.approx(0.5)
    assert clusters.loc["tpl", "R (retrieval)"] == 1.0 and clusters.loc["tpl", "gap groups"] == 1
    grid = at.dataframe[1].value
    assert list(grid["group_id"]) == ["g3"] and list(grid[["a", "b"]].iloc[0]) == ["✓ right", "✗ wrong"]
    marks = [m.value for m in at.markdown]
    assert "**b** · ✗ wrong" in marks and "[open item](Item?run=r1&item=g3-b)" in marks
    assert [m.value for m in at.metric] == ["1", "0", "0"]
    assert list(at.dataframe[2].value["attribution"]) == ["lm"]


def test_robustness_page_without_grammar_runs_says_how_to_make_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "eval.duckdb"
    store.migrate(db)
    monkeypatch.setenv("RAG_TRIAGE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "7_Robustness.py"), default_timeout=30)
    at.run()
    assert not at.exception and "grammar-demo" in at.info[0].value


# ---------------------------------------------------------------- pipeline and CLI

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    grammar.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def _cli(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    return args.handler(args)


def test_cli_generate_writes_a_test_set_and_refuses_bad_input(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "testset.jsonl"
    assert _cli("grammar-generate", "--out", str(out), "--max-groups", "1", "--per-group", "2") == 0
    cases = gen.read_testset(out)
    assert len(cases) == 12 * 2
    assert "12 SQL templates (M) -> 12 semantic groups -> 24 text queries" in capsys.readouterr().out
    row = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert set(row) == {"id", "query", "reference", "metadata"} and grammar.META_GROUP in row["metadata"]
    assert _cli("grammar-generate", "--source", str(tmp_path / "none.sql"), "--out", str(out)) == 2
    assert _cli("grammar-generate", "--source", str(rag.COMPANY_SQL), "--templates", str(rag.COMPANY_SQL),
                "--out", str(out)) == 2
    assert _cli("grammar-generate", "--out", str(out), "--from-schema") == 2  # no --judge
    assert _cli("grammar-eval", "--db", str(tmp_path / "none.duckdb"), "--run", "x") == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4 and all(e.startswith("error: ") for e in errors)


def test_offline_pipeline_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """BM25 + the extractive generator on two demo query logics, stored and judged like any run."""
    templates = [t for t in gen.load_templates(rag.TEMPLATES) if t.id in ("client_location", "employee_manager")]
    with gen.open_source(rag.COMPANY_SQL) as con:
        cases = [c for c in gen.generate(con, templates, max_groups=2, seed=1).cases]
        docs = rag.render_corpus(con)
    db = tmp_path / "eval.duckdb"
    result = rag.run_pipeline(cases, docs, db, "demo", retriever="bm25", metrics=["sd"])
    assert result.correctness.items == len(cases) == 12
    stored = store.query(db, "SELECT item_id, response, metadata FROM items WHERE run_id = 'demo' ORDER BY item_id")
    meta = json.loads(stored["metadata"][0])
    assert meta[grammar.META_RETRIEVED] and meta["retriever"] == "bm25" and meta[grammar.META_GROUP]
    assert "extractive" in meta["generator_detail"]
    location = stored[stored["item_id"].str.startswith("client_location")]
    assert all("," in r for r in location["response"])  # the span "City, Country", not a whole sentence
    rep = grammar.report(db, "demo")
    assert rep.plain["client_location"].correct == 6 and rep.plain["client_location"].groups["robust"] == 2
    assert set(rep.classes) == {c.group for c in cases}
    # The CLI re-judges and reports the same run.
    assert _cli("grammar-eval", "--db", str(db), "--run", "demo", "--cluster-by", "text_template") == 0
    assert "clusters by text_template" in capsys.readouterr().out


# ---------------------------------------------------------------- the authors' artefacts

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
