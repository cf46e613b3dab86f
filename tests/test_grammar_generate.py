"""GRAMMAR's Algorithm 1: generator counts, placeholders and ground truth, sampling, templates from a judge."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer

from evaluators.grammar import generate

TINY_SQL = """
CREATE TABLE items (name VARCHAR, colour VARCHAR, size INTEGER);
INSERT INTO items VALUES ('cup', 'red', 1), ('mug', 'red', 2), ('jug', 'blue', 2), ('O''Brien vase', 'blue', 2);
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.sql"
    path.write_text(TINY_SQL, encoding="utf-8")
    return path


def tiny_templates() -> list[generate.SqlTemplate]:
    T = generate.TextTemplate
    return [
        generate.SqlTemplate("colour", "SELECT colour FROM items WHERE name = '[items.name]'",
                        (T("short", "Colour of '[items.name]'?"), T("long", "What colour is the '[items.name]'?")),
                        "SELECT 'item:' || name FROM items WHERE name = '[items.name]'"),
        generate.SqlTemplate("which", "SELECT name FROM items WHERE colour = '[items.colour]' AND size = [items.size]",
                        (T("a", "Which [items.colour] item has size [items.size]?"),
                         T("b", "Name the [items.colour] one of size [items.size]."),
                         T("c", "[items.colour], size [items.size]: which item?"))),
    ]


def test_generator_counts_follow_m_n_q_on_a_tiny_schema(tiny: Path) -> None:
    with generate.open_source(tiny) as con:
        testset = generate.generate(con, tiny_templates())
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
    with generate.open_source(tiny) as con:
        assert generate.distinct_values(con, "items.colour") == ["blue", "red"]
        assert generate.distinct_values(con, "ITEMS.size") == [1, 2]  # names matched case-insensitively
        with pytest.raises(generate.TemplateError, match="no such column"):
            generate.distinct_values(con, "items.price")
        cases = generate.generate(con, tiny_templates()).cases
    by_id = {c.id: c for c in cases}
    vase = by_id["colour-001-long"]  # values sorted: "O'Brien vase" < "cup" < "jug" < "mug"
    assert vase.query == "What colour is the 'O'Brien vase'?"
    assert vase.sql == "SELECT colour FROM items WHERE name = 'O''Brien vase'"  # quotes escaped in the group's SQL
    assert vase.answer == "blue" and vase.true_doc_ids == ("item:O'Brien vase",)
    red_two = next(c for c in cases if c.sql_template == "which" and c.text_template == "a" and "red" in c.query)
    assert red_two.query == "Which red item has size 1?" and red_two.answer == "cup"
    assert red_two.sql.endswith("colour = 'red' AND size = 1")  # a bare numeric placeholder stays bare
    assert generate.bind("SELECT a FROM t WHERE b = '[t.b]' AND c = [t.c]", {"t.b": "x'y", "t.c": 3}) == (
        "SELECT a FROM t WHERE b = ? AND c = ?", ["x'y", 3])


def test_multi_column_answers_and_dates_become_text(tmp_path: Path) -> None:
    source = tmp_path / "d.sql"
    source.write_text("CREATE TABLE p (name VARCHAR, start DATE, budget DECIMAL(6,2), city VARCHAR, country VARCHAR);"
                      "INSERT INTO p VALUES ('Dock', DATE '2022-03-14', 12.50, 'Cork', 'Ireland');", encoding="utf-8")
    T = generate.TextTemplate
    ask = (T("q", "[p.name]?"),)
    templates = [generate.SqlTemplate("start", "SELECT start, budget FROM p WHERE name = '[p.name]'", ask),
                 generate.SqlTemplate("where", "SELECT city, country FROM p WHERE name = '[p.name]'", ask)]
    with generate.open_source(source) as con:
        cases = generate.generate(con, templates).cases
    assert [c.answer for c in cases] == ["2022-03-14, 12.5", "Cork, Ireland"]


def test_stratified_sampling_gives_every_group_the_same_number_of_variants(tiny: Path) -> None:
    with generate.open_source(tiny) as con:
        first = generate.generate(con, tiny_templates(), per_group=2, seed=7)
        again = generate.generate(con, tiny_templates(), per_group=2, seed=7)
        few = generate.generate(con, tiny_templates(), max_groups=1, seed=7)
        with pytest.raises(generate.TemplateError, match="colour has 2"):
            generate.generate(con, tiny_templates(), per_group=3)
        every = generate.generate(con, tiny_templates())
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
    with pytest.raises(generate.TemplateError) as err:
        generate.load_templates(path)
    text = str(err.value)
    assert "a/s: the text template must use exactly the placeholders ['t.y']" in text
    assert "b: the SQL template is not a SELECT" in text and "b: the SQL template has no [table.column]" in text


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
    from evaluators.judges.llm import LLMJudge

    with OpenAIServer(responder=_template_replies) as server, generate.open_source(tiny) as con:
        judge = LLMJudge("openai/test-judge", api_base=server.base_url, api_key="x", timeout=5.0)
        templates, notes = asyncio.run(generate.complete_templates(judge, con, None, True, 2))
        schema = server.requests[0]["messages"][0]["content"]
        assert "Table items (name VARCHAR, colour VARCHAR, size INTEGER)" in schema
        testset = generate.generate(con, templates)
    assert [t.sql for t in templates] == ["SELECT colour FROM items WHERE name = '[items.name]'",
                                          "SELECT name FROM items WHERE colour = '[items.colour]'"]
    assert any("selects *" in n for n in notes) and any("price" in n and "does not run" in n for n in notes)
    assert any("no [table.column] placeholder" in n for n in notes)
    assert [x.text for x in templates[0].texts] == ["What colour is '[items.name]'?", "Colour of the '[items.name]'?"]
    # Text variants that lose or change the placeholders are dropped; the single-answer criterion
    # drops both colours of the second template (two items each).
    assert [(c.template, c.groups, c.multi) for c in testset.counts] == [("sql01", 4, 0), ("sql02", 0, 2)]
