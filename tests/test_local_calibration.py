"""The local judge's calibration: its first-token P("1") read through the curves fitted on development data.

The judge is the one `--judge local` builds (local_llm.judge), addressed to the loopback OpenAI-protocol
server instead of a started llama.cpp: through litellm, with scripted first-token logprobs.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import numpy as np
import pytest
from openai_server import OpenAIServer, Reply
from test_cascade import SOURCES, Scripted

from benchmarks.labelled import LICENSED
from evaluators.core.confidence import DEFAULT_BANDS, is_unsure
from evaluators.core.records import CALIBRATED, LOGPROB, Answer, Confidence, Item, Status
from evaluators.judges import local_llm
from evaluators.judges.cascade import CascadeJudge
from evaluators.judges.local_calibration import POOLED, TABLE
from evaluators.metrics import registry as metric_registry
from evaluators.metrics import thelma as metrics

TRIPLET = Item("tower", "When was the tower completed?", (SOURCES,), "The tower was completed in 1896. It is blue.")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def curve(name: str) -> Any:
    """The table's curve as numpy reads it: linear between knots, flat beyond them."""
    knots = np.array(table()["curves"][name]["knots"], dtype=float)
    return lambda raw: float(np.interp(raw, knots[:, 0], knots[:, 1]))


def judged_by_local(openai_server: OpenAIServer, responder: Callable[[dict[str, Any]], Reply]) -> metrics.ItemResult:
    """TRIPLET's GR through `offline>local`: the offline tier unsure of both claims, the local judge (litellm to
    the test server, answering with `responder`) deciding each."""
    offline = Scripted({"groundedness": Answer(1, Status.OK, prob=0.55, confidence=Confidence(0.55, CALIBRATED,
                                                                                               "offline")),
                        "claims": Answer(["The tower was completed in 1896.", "The tower is blue."], Status.OK)})
    server = local_llm.LocalServer()  # not started: the test server answers at its address
    server.base_url = openai_server.base_url
    judge = CascadeJudge([("offline", offline), ("local", local_llm.judge(server, timeout=5.0))],
                         decompose_with="offline")
    openai_server.responder = responder
    return asyncio.run(metrics.evaluate_item(TRIPLET, {"gr": metric_registry.METRICS["gr"]}, judge,
                                             per_component=True))


def test_the_table_says_what_it_saw_and_its_band_is_the_default() -> None:
    data = table()
    assert data["command"].startswith("python -m benchmarks.logprob_band") and "--fit" in data["command"]
    assert data["model"] == local_llm.MODEL
    assert {source.split(":")[0] for source in data["matches"]} <= LICENSED  # licensed development data only
    assert POOLED in data["curves"]
    assert DEFAULT_BANDS[LOGPROB] == tuple(data["band"])


def test_the_local_judge_gives_the_calibrated_p_and_keeps_its_raw_p1(openai_server: OpenAIServer) -> None:
    support = curve("support" if "support" in table()["curves"] else POOLED)
    lo, hi = DEFAULT_BANDS[LOGPROB]
    grid = [i / 100 for i in range(1, 100)]
    # A raw P("1") the curve moves, and one each whose calibrated p is sure and unsure at the fitted band.
    sure = next(r for r in grid if not lo < support(r) < hi and abs(support(r) - r) > 0.02)
    unsure = next(r for r in grid if lo < support(r) < hi and abs(support(r) - r) > 0.02)
    def p1(body: dict[str, Any]) -> Reply:  # the blue claim gets `unsure`, whatever order the calls come in
        raw = unsure if "The tower is blue." in body["messages"][0]["content"] else sure
        return Reply(str(int(raw >= 0.5)), {"1": raw, "0": 1 - raw})

    result = judged_by_local(openai_server, p1)
    got = sorted(result.verdicts, key=lambda v: v.component_idx)
    assert [(v.tier, v.p_kind) for v in got] == [("local", LOGPROB)] * 2
    assert [round(v.evidence, 6) for v in got] == [sure, unsure]  # the raw P("1") is kept as the evidence
    assert [v.p for v in got] == pytest.approx([support(sure), support(unsure)], abs=1e-9)
    assert [v.value for v in got] == [float(support(r) >= 0.5) for r in (sure, unsure)]
    assert [is_unsure(v.p, v.p_kind) for v in got] == [False, True]
    gr = next(s for s in result.scores if s.metric == "gr")
    assert (gr.n_scored, gr.n_total, gr.n_unsure) == (1, 2, 1) and gr.value == float(support(sure) >= 0.5)


def test_a_local_answer_without_0_or_1_stays_a_failure_the_curves_never_turn_into_a_p(
    openai_server: OpenAIServer,
) -> None:
    def answered_in_part(body: dict[str, Any]) -> Reply:  # the blue claim's first token is neither 0 nor 1
        if "The tower is blue." in body["messages"][0]["content"]:
            return Reply("maybe", {"maybe": 0.9, "perhaps": 0.1})
        return Reply("1", {"1": 0.95, "0": 0.05})

    result = judged_by_local(openai_server, answered_in_part)
    answered, failed = sorted(result.verdicts, key=lambda v: v.component_idx)
    assert answered.status is Status.OK and answered.p is not None and answered.tier == "local"
    assert failed.status is Status.UNPARSED and (failed.value, failed.p) == (None, None)
    assert "neither 0 nor 1" in failed.detail
    gr = next(s for s in result.scores if s.metric == "gr")
    assert (gr.n_scored, gr.n_total) == (1, 2)  # the failure is counted out, never a 0 or a 1
