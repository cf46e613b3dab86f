"""Batched judge replies read strictly, for real: litellm to the loopback server, the runner, DuckDB.

A batched reply that leaves an element out has it asked again alone (the single-component prompt,
or the suite's prompt with that one element), then `unparsed`; an element given twice is `unparsed`
whatever its values, never last-wins; a reply that numbers elements nobody asked is trusted for
none. Escaped text a judge copies back is stored unescaped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from openai_server import OpenAIServer, format_aware, identify

from evaluators.core.records import Item
from evaluators.runs import runner
from evaluators.storage import store

JUDGE = "openai/test-judge"
Script = dict[str, "str | Callable[[dict[str, str]], str]"]

ITEM = Item(
    id="tower",
    query="How tall is the Eiffel Tower?",
    sources=("The Eiffel Tower is 330 metres tall.",
             "Bananas are yellow fruit.",
             "Rome is the capital of Italy."),
    response=("The Eiffel Tower is 330 metres tall. The Eiffel Tower is in Paris. The Eiffel Tower is made of iron. "
              "The Eiffel Tower was finished in 1889. The Eiffel Tower is painted brown."),
)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def scripted(script: Script) -> Callable[[dict[str, Any]], str]:
    """A responder answering the prompts in `script` as scripted and every other one format-aware."""
    def respond(request: dict[str, Any]) -> str:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        found = identify(user)
        if found is not None and found[0] in script:
            reply = script[found[0]]
            return reply(found[1]) if callable(reply) else reply
        return format_aware(request)
    return respond


def prompts_sent(server: OpenAIServer) -> list[str]:
    return [identify(next(m["content"] for m in r["messages"] if m["role"] == "user"))[0] for r in server.requests]


def evaluate(tmp_path: Path, server: OpenAIServer, metrics: list[str], item: Item = ITEM) -> Path:
    db = tmp_path / "e.duckdb"
    runner.evaluate([item], db, "r", JUDGE, api_base=server.base_url, metrics=metrics, timeout=5.0)
    return db


def score(db: Path, metric: str) -> tuple[float | None, int, int, str]:
    row = store.query(db, "SELECT value, n_scored, n_total, status FROM scores WHERE metric = ?", [metric]).iloc[0]
    return (None if row.value != row.value else float(row.value), int(row.n_scored), int(row.n_total), row.status)


def verdicts(db: Path, metric: str) -> list[dict[str, Any]]:
    return store.query(db, """SELECT component_idx, target, value, status, detail FROM verdicts
                              WHERE metric = ? ORDER BY component_idx, target""", [metric]).to_dict("records")


# ---------------------------------------------------------------- left out: asked again alone

def test_sp1_elements_left_out_of_the_batch_are_asked_alone(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # Measured before: SP1 1.0 from the one surviving element, "scored 1 of 1". Truly: 1 of 3 sources.
    openai_server.responder = scripted({"source_essential_batch": "<output>\n1: 1\n</output>"})
    db = evaluate(tmp_path, openai_server, ["sp1"])
    assert score(db, "sp1") == (pytest.approx(1 / 3), 3, 3, "ok")
    assert prompts_sent(openai_server) == ["source_essential_batch", "source_essential", "source_essential"]
    assert [v["value"] for v in verdicts(db, "sp1")] == [1.0, 0.0, 0.0]


def test_an_element_left_out_again_when_asked_alone_is_unparsed(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = scripted({"source_essential_batch": "<output>\n1: 1\n</output>",
                                        "source_essential": "I would rather not say."})
    db = evaluate(tmp_path, openai_server, ["sp1"])
    assert score(db, "sp1") == (1.0, 1, 3, "ok")
    rows = verdicts(db, "sp1")
    assert [r["status"] for r in rows] == ["ok", "unparsed", "unparsed"]
    assert rows[1]["value"] is None or rows[1]["value"] != rows[1]["value"]  # no value, not a 0


def test_gr_claims_left_out_are_asked_alone(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # Measured before: GR 1.0 instead of 0.8 from a reply that kept only the supported claims.
    openai_server.responder = scripted({"groundedness_batch": "<output>\n1: 1\n2: 1\n</output>",
                                        "groundedness": lambda v: "<output>1</output>" if "iron" in v["claim"]
                                        or "1889" in v["claim"] else "<output>0</output>"})
    db = evaluate(tmp_path, openai_server, ["gr"])
    assert score(db, "gr") == (pytest.approx(0.8), 5, 5, "ok")
    assert prompts_sent(openai_server).count("groundedness") == 3


def test_sqc_pairs_left_out_are_asked_alone(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # The reply answers every source on its own but never "ALL": each whole-set pair is asked alone.
    openai_server.responder = scripted({"source_answers_batch": "<output>\nQ1 S1: 0\nQ1 S2: 0\nQ1 S3: 0\n</output>",
                                        "source_answers": "<output>1</output>"})
    db = evaluate(tmp_path, openai_server, ["sqc"])
    assert score(db, "sqc") == (1.0, 1, 1, "ok")
    sent = prompts_sent(openai_server)
    assert sent.count("source_answers") == 1 and sent.count("source_answers_batch") == 1
    whole = [r for r in verdicts(db, "sqc") if r["target"] == "sources"]
    assert [(r["value"], r["status"]) for r in whole] == [(1.0, "ok")]


def test_a_source_left_out_of_the_claims_batch_is_split_alone(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = scripted({"claims_batch": '<output id="1">\n- The Eiffel Tower is 330 metres tall.\n'
                                                        '</output>'})
    db = evaluate(tmp_path, openai_server, ["sp2"])
    sent = prompts_sent(openai_server)
    assert sent.count("claims") == 2  # sources 2 and 3, each by itself
    facts = store.query(db, "SELECT parent, text FROM components WHERE kind = 'source_fact' ORDER BY idx")
    assert sorted(set(facts["parent"])) == [0, 1, 2]
    assert score(db, "sp2")[1:] == (3, 3, "ok")


def test_suite_statements_left_out_are_asked_alone(tmp_path: Path, openai_server: OpenAIServer) -> None:
    def faithfulness(values: dict[str, str]) -> str:
        if values["claims"].count("<claim ") > 1:
            return "<output>\n1: yes - stated\n3: no - not stated\n</output>"  # statement 2 left out
        return "<output>\n1: no - contradicted\n</output>"
    openai_server.responder = scripted({
        "de_statements": "<output>\n- The Eiffel Tower is 330 metres tall.\n- The Eiffel Tower is in Paris.\n"
                         "- The Eiffel Tower is painted brown.\n</output>",
        "de_faithfulness": faithfulness})
    db = evaluate(tmp_path, openai_server, ["de_faithfulness"])
    assert [(r["value"], r["status"]) for r in verdicts(db, "de_faithfulness")] == [(1.0, "ok"), (0.0, "ok"),
                                                                                    (0.0, "ok")]
    assert score(db, "de_faithfulness") == (pytest.approx(1 / 3), 3, 3, "ok")
    assert prompts_sent(openai_server).count("de_faithfulness") == 2


# ---------------------------------------------------------------- given twice, or misnumbered: unparsed

def test_a_claim_given_twice_is_unparsed_never_last_wins(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # Measured before: "2: 1" then "2: 0" kept the 0 silently.
    reply = "<output>\n1: 1\n2: 1\n2: 0\n3: 1\n4: 1\n5: 0\n</output>"
    openai_server.responder = scripted({"groundedness_batch": reply})
    db = evaluate(tmp_path, openai_server, ["gr"])
    assert score(db, "gr") == (0.75, 4, 5, "ok")
    second = verdicts(db, "gr")[1]
    assert second["status"] == "unparsed" and "given 2 times" in second["detail"] and "1, then 0" in second["detail"]
    assert "groundedness" not in prompts_sent(openai_server)  # given, so not asked again


def test_a_suite_statement_judged_twice_is_unparsed(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = scripted({
        "de_statements": "<output>\n- The Eiffel Tower is 330 metres tall.\n- The Eiffel Tower is in Paris.\n</output>",
        "de_faithfulness": "<output>\n1: yes - stated\n2: yes - stated\n2: no - contradicted\n</output>"})
    db = evaluate(tmp_path, openai_server, ["de_faithfulness"])
    assert [r["status"] for r in verdicts(db, "de_faithfulness")] == ["ok", "unparsed"]
    assert score(db, "de_faithfulness") == (1.0, 1, 2, "ok")


def test_an_sqc_pair_given_twice_is_unparsed(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = scripted({"source_answers_batch": "<output>\nQ1 S1: 0\nQ1 S1: 1\nQ1 S2: 0\nQ1 S3: 0\n"
                                                                "Q1 ALL: 0\n</output>"})
    db = evaluate(tmp_path, openai_server, ["sqc"])
    rows = {r["target"]: r for r in verdicts(db, "sqc")}
    assert rows["source:0"]["status"] == "unparsed"
    assert score(db, "sqc") == (None, 0, 1, "unparsed")  # no OK 1, one pair unread: not guessed as 0


def test_a_reply_numbering_elements_nobody_asked_is_trusted_for_none(tmp_path: Path,
                                                                    openai_server: OpenAIServer) -> None:
    # Numbered from 0: every number may be off by one, so no element is read from it.
    openai_server.responder = scripted({"source_essential_batch": "<output>\n0: 1\n1: 0\n2: 0\n</output>"})
    db = evaluate(tmp_path, openai_server, ["sp1"])
    assert score(db, "sp1") == (None, 0, 3, "unparsed")
    assert all("not asked (0)" in r["detail"] for r in verdicts(db, "sp1"))


# ---------------------------------------------------------------- escaped text copied back

def test_escaped_text_copied_back_is_stored_unescaped(tmp_path: Path, openai_server: OpenAIServer) -> None:
    item = Item(id="att", query="When was AT&T founded?", sources=("AT&T was founded in 1885. It is in Dallas.",),
                response="AT&T was founded in 1885.")
    openai_server.responder = scripted({
        "claims": "<output>\n- AT&amp;T was founded in 1885.\n</output>",
        "ragas_context_sentences": "<output>\n- AT&amp;T was founded in 1885.\n</output>"})
    db = evaluate(tmp_path, openai_server, ["gr", "ragas_context_relevance"], item)
    texts = set(store.query(db, "SELECT text FROM components WHERE kind IN ('claim', 'extracted_sentence')")["text"])
    assert texts == {"AT&T was founded in 1885."}
    extracted = store.query(db, "SELECT parent FROM components WHERE kind = 'extracted_sentence'")["parent"]
    assert list(extracted) == [0]  # matched to the first context sentence
    assert score(db, "ragas_context_relevance") == (0.5, 2, 2, "ok")
