"""benchmarks/prompt_health.py and benchmarks/peers_side_by_side.py on the loopback server: the held-out rows
refused, asks counted as repaired or unparsed from the stored calls, the proxy's counts and embeddings, and the
side-by-side's agreement and pair accuracy from stored results."""
from __future__ import annotations

import asyncio
import base64
import json
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from openai_server import OpenAIServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import peers_side_by_side as side
from benchmarks import prompt_health as health
from evaluators.core.records import JudgeCall
from evaluators.judges.embeddings import embed
from evaluators.judges.llm import LLMJudge
from evaluators.storage import store, writes

MODEL = "openai/test-judge"
VERDICTS = {"sources": ["Paris is in France."], "claims": ["Paris is in France."]}


def test_held_out_rows_are_refused() -> None:
    assert health.parse_rows("0-2,19") == [0, 1, 2, 19]
    with pytest.raises(SystemExit, match=r"rows \[20, 21\] are not development rows"):
        health.parse_rows("18-21")


def test_health_counts_asks_repaired_and_unparsed_from_the_stored_calls(openai_server: OpenAIServer,
                                                                          tmp_path: Path) -> None:
    openai_server.replies.extend([
        "<output>\n1: Yes - stated.\n</output>",             # read at once
        "N: Yes - reason", "<output>\n1: No - not stated.\n</output>",  # re-asked, then read: repaired
        "Yes", "Still yes.",                                # re-asked, still unreadable: unparsed
    ])
    calls: list[JudgeCall] = []
    judge = LLMJudge(MODEL, api_base=openai_server.base_url, api_key="x", timeout=5.0, on_call=calls.append)
    for claim in ("a", "b", "c"):
        asyncio.run(judge.ask("ragas_faithfulness", sources=VERDICTS["sources"], claims=[claim]))
    db = tmp_path / "h.duckdb"
    store.migrate(db)
    writes.write_batch(db, "r", calls=calls)
    counts = health.health(health.stored_calls(db, MODEL))["ragas_faithfulness"]
    assert (counts["asks"], counts["calls"], counts["repaired"], counts["unparsed"]) == (3, 5, 2, 1)
    assert "| ragas_faithfulness | 3 | 5 | 2 (67%) | 1 (33%) |" in health.table({"ragas_faithfulness": counts})


def test_the_proxy_counts_each_samples_calls_and_serves_minilm(openai_server: OpenAIServer) -> None:
    openai_server.replies.extend(["<output>1</output>", "<output>2</output>"])
    with side.Proxy(openai_server.base_url, key=None) as proxy:
        for messages in ([{"role": "user", "content": "Rate."}],
                         [{"role": "user", "content": "Rate."}, {"role": "assistant", "content": "x"},
                          {"role": "user", "content": "Again."}]):
            body = json.dumps({"model": "m", "messages": messages}).encode()
            request = urllib.request.Request(f"{proxy.url}/t/ragas/faithfulness/r0-answer/v1/chat/completions", body,
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as reply:
                assert json.load(reply)["choices"][0]["message"]["content"].startswith("<output>")
        counted = proxy.tally[("ragas", "faithfulness", "r0-answer")]
        assert (counted["calls"], counted["repaired"]) == (2, 1) and counted["prompt_tokens"] > 0
        for encoding in ("float", "base64"):
            body = json.dumps({"input": ["Where is Paris?"], "model": "x", "encoding_format": encoding}).encode()
            request = urllib.request.Request(f"{proxy.url}/t/ragas/answer_relevancy/r0-answer/v1/embeddings", body,
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as reply:
                got = json.load(reply)["data"][0]["embedding"]
            vector = np.frombuffer(base64.b64decode(got), dtype=np.float32) if encoding == "base64" else np.array(got)
            assert np.allclose(vector, embed(["Where is Paris?"])[0], atol=1e-6)
    assert len(openai_server.requests) == 2  # embeddings never reach the endpoint


@pytest.mark.skipif(not side.WIKIEVAL.exists(), reason="../shared/datasets/wikieval is absent: the samples come from it")
def test_the_report_reads_agreement_and_pair_accuracy_from_the_results(tmp_path: Path) -> None:
    results = side.Results(tmp_path / "results.jsonl")
    ours, theirs = side.prompts_hash("ragas_faithfulness"), "ragas==0.4.3"
    values = {  # row: (answer, ungrounded) for ours, then the library's
        0: ((1.0, 0.5), (1.0, 0.0)), 1: ((0.8, 0.2), (0.5, 0.5)), 2: ((1.0, 0.0), (None, 0.0)),
    }
    for row, (mine, lib) in values.items():
        for tool, stamp, pair in (("ours", ours, mine), ("ragas", theirs, lib)):
            for variant, value in zip(("answer", "ungrounded"), pair):
                results.add({"tool": tool, "metric": "ragas_faithfulness" if tool == "ours" else "faithfulness",
                             "sample": f"r{row}-{variant}", "stamp": stamp, "value": value,
                             "status": "ok" if value is not None else "unparsed", "detail": "", "calls": 2,
                             "repaired": 0, "prompt_tokens": 100, "completion_tokens": 10, "seconds": 1.0})
    again = side.Results(tmp_path / "results.jsonl")  # read back from the file, as a resumed run does
    text = side.report(again, [0, 1, 2], {"ragas": "0.4.3"})
    line = next(l for l in text.splitlines() if l.startswith("| ragas_faithfulness | ragas faithfulness"))
    cells = [c.strip() for c in line.split("|")]
    assert cells[3] == "5 of 9"  # r2-answer unscored by the library; the poor answers not run
    assert cells[6] == "1.00 (3/3, 0 ties, 0 failed)"
    assert cells[7] == "0.33 (1/3, 1 ties, 1 failed)"
    assert cells[9].startswith("5/6 / 1/6 / 0/12 calls")
