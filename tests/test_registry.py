"""The registry: every prompt file has a parser, every entry has its prompt file, and any judge answers any
registered prompt whatever was imported first (checked in fresh interpreters)."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

from openai_server import OpenAIServer

from evaluators.judges import prompts, registry
from evaluators.metrics import registry as metric_registry
from evaluators.metrics.registry import REFERENCE, THELMA

ROOT = Path(__file__).resolve().parents[1]
PROMPT_FILES = {p.stem for p in prompts.PROMPT_DIR.glob("*.txt")}


def fresh_python(code: str, **env: str) -> dict[str, object]:
    """Run `code` in a new interpreter at the repository root; it prints one JSON line, returned here."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_prompt_file_has_a_parser_and_every_entry_has_its_file() -> None:
    assert set(registry.PARSERS) == PROMPT_FILES
    assert set(registry.OFFLINE_ANSWERS) <= PROMPT_FILES
    assert registry.BINARY_PROMPTS | registry.DISTRIBUTION_PROMPTS <= PROMPT_FILES
    assert {p for metric in metric_registry.METRICS.values() for p in metric.prompts} <= PROMPT_FILES


def test_offline_answers_take_exactly_their_prompts_variables() -> None:
    for name, answer in registry.OFFLINE_ANSWERS.items():
        assert set(inspect.signature(answer).parameters) == prompts.load(name).variables, name


def test_the_offline_judge_answers_every_prompt_but_the_template_writers() -> None:
    assert PROMPT_FILES - set(registry.OFFLINE_ANSWERS) == {"grammar_sql_templates", "grammar_text_templates"}


def test_metrics_are_thelma_first_then_ours_then_the_suites_all_with_display_names() -> None:
    assert tuple(metric_registry.THELMA_METRICS) == THELMA
    assert tuple(metric_registry.REFERENCE_METRICS) == REFERENCE
    assert list(metric_registry.METRICS) == [*THELMA, *REFERENCE, *metric_registry.SUITE_METRICS]
    assert all(spec.name and spec.name != m for m, spec in metric_registry.METRICS.items())


def test_offline_judge_alone_answers_other_suites_and_grammar_prompts() -> None:
    found = fresh_python("""
import asyncio, json, sys
import evaluators.judges.offline
judge = evaluators.judges.offline.OfflineJudge()
statements = asyncio.run(judge.ask("ragas_statements", query="Where was Einstein born?",
                                   response="Einstein was born in Ulm. He liked sailing."))
correct = asyncio.run(judge.ask("grammar_correctness", query="Where is the office?", true_answer="Cork, Ireland",
                                given_response="In Cork (Ireland)."))
print(json.dumps({"statements": [statements.status.value, statements.value],
                  "correct": [correct.status.value, correct.value]}))
""")
    assert found["statements"] == ["ok", ["Einstein was born in Ulm.", "Einstein liked sailing."]]
    assert found["correct"] == ["ok", 1]


def test_llm_judge_alone_asks_and_parses_another_suites_prompt(openai_server: OpenAIServer) -> None:
    openai_server.responder = lambda request: "<output>\n- Einstein was born in Ulm.\n- He liked sailing.\n</output>"
    found = fresh_python(f"""
import asyncio, json
from evaluators.judges.llm import LLMJudge
judge = LLMJudge("openai/test-judge", api_base={openai_server.base_url!r}, api_key="x", timeout=10.0, max_attempts=2)
answer = asyncio.run(judge.ask("ragas_statements", query="Where was Einstein born?", response="In Ulm."))
print(json.dumps([answer.status.value, answer.value]))
""", OPENAI_API_KEY="x")
    assert found == ["ok", ["Einstein was born in Ulm.", "He liked sailing."]]
    assert len(openai_server.requests) == 1
