"""The judge cascade (`--judge offline>openai/...`): each tier decides what it is sure of, the rest go on.

Every model tier is a real LLMJudge talking through litellm to the loopback OpenAI-protocol server.
The mechanics are pinned with a scripted first tier whose confidences are chosen; the runs end to end
use the real offline judge, whose p is its calibrated one, or, where it gives none, its evidence
clipped into the half that agrees with its verdict (`evidence_as_p`): what is under test here is
what the cascade does with a p, not how the offline judge obtains it.
"""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest
from openai_server import MODEL, OpenAIServer, Reply, elements, identify
from test_access import EVALUATE, ROW, app, click, run, upload
from test_runner import ROOT, TRIPLET, items, scores, write_jsonl

from evaluators import cli
from evaluators.core.confidence import DEFAULT_BANDS, is_unsure
from evaluators.core.records import CALIBRATED, CLAIM, LABEL, LOGPROB, Answer, Confidence, Elements, Status, unit
from evaluators.judges import registry
from evaluators.judges.cascade import CascadeJudge, parse_chain
from evaluators.judges.llm import LLMJudge
from evaluators.judges.offline import OfflineJudge
from evaluators.metrics import registry as metric_registry
from evaluators.metrics import thelma as metrics
from evaluators.runs import runner
from evaluators.storage import store

LLM = f"openai/{MODEL}"
CHAIN = f"offline>{LLM}"
BAND = (0.3, 0.7)  # the mechanics tests name their band: the default ones are the calibration's to tune
SOURCES = "The tower was completed in 1896. It was named after Chimnabai I."
CLAIMS = ["The tower was completed in 1896.", "The tower is blue.", "It was named after Chimnabai I.",
          "The tower is in Paris.", "It has a clock."]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def llm(server: OpenAIServer, **options: Any) -> LLMJudge:
    return LLMJudge(LLM, api_base=server.base_url, api_key="x", timeout=5.0, max_attempts=2, **options)


class Scripted:
    """A first tier with chosen answers by prompt; it records what it was asked."""

    name = "scripted"

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def ask(self, prompt: str, **variables: Any) -> Answer:
        self.asked.append((prompt, variables))
        return self.answers[prompt]


def sure_of(values: dict[Any, int], ps: dict[Any, float]) -> Answer:
    """A batched first-tier answer: these values, each with a calibrated p."""
    return Answer(Elements(values), Status.OK, evidence={k: (p, f"evidence {p}") for k, p in ps.items()},
                  confidences={k: Confidence(p, CALIBRATED, "scripted") for k, p in ps.items()})


def verdicts_of(judge: CascadeJudge, answer: Answer, keys: list[Any]) -> dict[Any, Any]:
    """The verdict each element of a batched answer becomes, as the metrics make it."""
    work = metrics.ItemWork(TRIPLET, judge, frozenset())
    split = metrics.split_elements(answer, keys)
    return {k: work.verdict("gr", CLAIM, i, "sources", split[k]) for i, k in enumerate(keys)}


def request_elements(body: dict[str, Any]) -> tuple[str, int]:
    """(prompt name, elements it asks) of a request the server received: 1 for a single prompt."""
    name, raw = identify(body["messages"][0]["content"])
    if name == "source_answers_batch":
        return name, len(elements(raw["questions"])) * (len(elements(raw["sources"])) + 1)
    keyed = registry.BATCH_ELEMENTS.get(name)
    return name, len(elements(raw[keyed])) if keyed else 1


# ---------------------------------------------------------------- the mechanics, with a scripted first tier

def test_only_the_unsure_elements_reach_the_next_tier_as_a_renumbered_batch(openai_server: OpenAIServer) -> None:
    first = Scripted({"groundedness_batch": sure_of({1: 1, 2: 1, 3: 1, 4: 0, 5: 1},
                                                    {1: 0.95, 2: 0.5, 3: 0.9, 4: 0.35, 5: 0.99})})
    judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
    openai_server.replies.append("<output>\n1: 0\n2: 1\n</output>")
    answer = asyncio.run(judge.ask("groundedness_batch", sources=SOURCES, claims=CLAIMS))

    assert len(openai_server.requests) == 1
    name, raw = identify(openai_server.requests[0]["messages"][0]["content"])
    assert name == "groundedness_batch" and elements(raw["claims"]) == {1: CLAIMS[1], 2: CLAIMS[3]}
    got = verdicts_of(judge, answer, [1, 2, 3, 4, 5])
    assert {k: v.value for k, v in got.items()} == {1: 1.0, 2: 0.0, 3: 1.0, 4: 1.0, 5: 1.0}
    assert {k: v.tier for k, v in got.items()} == {1: "offline", 2: LLM, 3: "offline", 4: LLM, 5: "offline"}
    assert {k: v.p_kind for k, v in got.items()} == {1: CALIBRATED, 2: LABEL, 3: CALIBRATED, 4: LABEL, 5: CALIBRATED}
    assert (got[1].p, got[2].p, got[4].p) == (0.95, 0.0, 1.0)
    assert got[1].detail == "evidence 0.95" and got[2].call_key == answer.call_key is not None
    assert (judge.decided, judge.escalated) == ({"offline": 3, LLM: 2}, {"offline": 2})


def test_each_element_points_at_the_call_that_decided_it(openai_server: OpenAIServer) -> None:
    """The first tier's sure elements keep its call (none for the offline judge), not the escalated call's."""
    for first_key in (None, "first-tier-call"):
        openai_server.reset()
        first = Scripted({"groundedness_batch": replace(sure_of({1: 1, 2: 1, 3: 0}, {1: 0.95, 2: 0.5, 3: 0.05}),
                                                        call_key=first_key)})
        judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
        openai_server.replies.append("<output>\n1: 0\n</output>")
        answer = asyncio.run(judge.ask("groundedness_batch", sources=SOURCES, claims=CLAIMS[:3]))
        got = verdicts_of(judge, answer, [1, 2, 3])
        assert answer.call_key is not None and answer.call_key != first_key
        assert {k: (v.tier, v.call_key) for k, v in got.items()} == {
            1: ("offline", first_key), 2: (LLM, answer.call_key), 3: ("offline", first_key)}


def test_sub_questions_with_an_unsure_element_are_asked_again_and_only_those_elements_taken(
        openai_server: OpenAIServer) -> None:
    questions = ["When was it completed?", "Who was it named after?", "How tall is it?"]
    sources = ["It was completed in 1896.", "It was named after Chimnabai I."]
    keys = [(n, t) for n in (1, 2, 3) for t in (1, 2, "all")]
    ps = {k: 0.05 for k in keys} | {(2, 1): 0.6, (3, "all"): 0.4}
    first = Scripted({"source_answers_batch": sure_of({k: 0 for k in keys}, ps)})
    judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
    openai_server.replies.append("<output>\nQ1 S1: 1\nQ1 S2: 1\nQ1 ALL: 1\nQ2 S1: 1\nQ2 S2: 1\nQ2 ALL: 1\n</output>")
    answer = asyncio.run(judge.ask("source_answers_batch", sources=sources, questions=questions))

    name, raw = identify(openai_server.requests[0]["messages"][0]["content"])
    assert elements(raw["questions"]) == {1: questions[1], 2: questions[2]}  # renumbered from 1
    assert elements(raw["sources"]) == {1: sources[0], 2: sources[1]}  # the prompt always asks every source
    assert dict(answer.value) == {k: 0 for k in keys} | {(2, 1): 1, (3, "all"): 1}
    assert {k for k, c in answer.confidences.items() if c.tier == "offline"} == set(keys) - {(2, 1), (3, "all")}


def test_a_batch_the_first_tier_is_sure_of_sends_nothing(openai_server: OpenAIServer) -> None:
    first = Scripted({"groundedness_batch": sure_of({1: 1, 2: 0}, {1: 0.9, 2: 0.1})})
    judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
    answer = asyncio.run(judge.ask("groundedness_batch", sources=SOURCES, claims=CLAIMS[:2]))
    assert openai_server.requests == [] and dict(answer.value) == {1: 1, 2: 0}
    assert {c.tier for c in answer.confidences.values()} == {"offline"}


@pytest.mark.parametrize("first_answer", [
    Answer(None, Status.NOT_APPLICABLE, detail="the offline judge reads English only"),
    Answer(None, Status.ERROR, detail="boom"),
    Answer(1, Status.OK),  # a label only: nobody knows how sure it is
], ids=["not_applicable", "error", "label_only"])
def test_a_failed_or_label_only_answer_escalates_whole(openai_server: OpenAIServer, first_answer: Answer) -> None:
    first = Scripted({"groundedness": first_answer, "groundedness_batch": replace(first_answer, value=(
        Elements({1: 1, 2: 1}) if first_answer.status is Status.OK else None))})
    judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
    openai_server.replies.extend(["<output>0</output>", "<output>\n1: 0\n2: 0\n</output>"])
    single = asyncio.run(judge.ask("groundedness", sources=SOURCES, claim=CLAIMS[1]))
    batch = asyncio.run(judge.ask("groundedness_batch", sources=SOURCES, claims=CLAIMS[:2]))
    assert (single.status, single.value) == (Status.OK, 0)
    assert dict(batch.value) == {1: 0, 2: 0}
    _, raw = identify(openai_server.requests[1]["messages"][0]["content"])
    assert elements(raw["claims"]) == {1: CLAIMS[0], 2: CLAIMS[1]}  # the whole batch, as asked
    assert {v.tier for v in verdicts_of(judge, batch, [1, 2]).values()} == {LLM}


def test_a_sub_batch_reply_numbering_unasked_elements_fails_only_the_escalated_ones(
        openai_server: OpenAIServer) -> None:
    first = Scripted({"groundedness_batch": sure_of({1: 1, 2: 1, 3: 0}, {1: 0.9, 2: 0.5, 3: 0.1})})
    judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
    openai_server.replies.append("<output>\n1: 1\n7: 0\n</output>")
    answer = asyncio.run(judge.ask("groundedness_batch", sources=SOURCES, claims=CLAIMS[:3]))
    got = verdicts_of(judge, answer, [1, 2, 3])
    assert [got[k].status for k in (1, 2, 3)] == [Status.OK, Status.UNPARSED, Status.OK]
    assert "not asked (7)" in got[2].detail and got[2].tier is None


def test_the_last_tier_failing_leaves_the_escalated_elements_failed(openai_server: OpenAIServer) -> None:
    first = Scripted({"groundedness_batch": sure_of({1: 1, 2: 1}, {1: 0.9, 2: 0.5})})
    judge = CascadeJudge([("offline", first), (LLM, llm(openai_server))], band=BAND)
    openai_server.fail_when(lambda i, body: True, "garbage")
    answer = asyncio.run(judge.ask("groundedness_batch", sources=SOURCES, claims=CLAIMS[:2]))
    got = verdicts_of(judge, answer, [1, 2])
    assert (got[1].status, got[1].tier) == (Status.OK, "offline")
    assert got[2].status is Status.UNPARSED and got[2].value is None and got[2].call_key is not None


def test_decompositions_come_from_the_named_tier_only(openai_server: OpenAIServer) -> None:
    first = Scripted({"claims": Answer(["from the first tier"], Status.OK)})
    by_last = CascadeJudge([("offline", first), (LLM, llm(openai_server))])
    assert asyncio.run(by_last.ask("claims", input="Paris is in France.")).value == ["Paris is in France."]
    assert first.asked == [] and len(openai_server.requests) == 1
    by_first = CascadeJudge([("offline", first), (LLM, llm(openai_server))], decompose_with="offline")
    assert asyncio.run(by_first.ask("claims", input="Paris is in France.")).value == ["from the first tier"]
    assert len(openai_server.requests) == 1


def test_a_logprob_last_tier_gives_logprob_confidences_under_its_tier(openai_server: OpenAIServer) -> None:
    unsure = Answer(1, Status.OK, prob=0.55, confidence=Confidence(0.55, CALIBRATED, "offline"))
    first = Scripted({"groundedness": unsure, "claims": Answer(["It was completed in 1896.", "It is blue."],
                                                               Status.OK)})
    judge = CascadeJudge([("offline", first), ("local", llm(openai_server, logprob_binary=True))],
                         decompose_with="offline", band=BAND)
    openai_server.replies.extend([Reply("1", {"1": 0.72, "0": 0.18}), Reply("0", {"0": 0.6, "1": 0.15})])
    result = asyncio.run(metrics.evaluate_item(TRIPLET, {"gr": metric_registry.METRICS["gr"]}, judge, per_component=True))
    got = sorted(result.verdicts, key=lambda v: v.component_idx)
    assert [(v.tier, v.p_kind) for v in got] == [("local", LOGPROB)] * 2
    assert sorted(round(v.p, 6) for v in got) == [0.2, 0.8]
    assert all(r["logprobs"] is True and r["max_tokens"] == 1 for r in openai_server.requests)


@pytest.mark.parametrize("chain, problem", [
    ("offline>", "tier 2 of the chain is empty"),
    ("offline>>openai/x", "tier 2 of the chain is empty"),
    ("offline>offline", "offline appears twice"),
    ("offline>open ai/x", "has a space inside"),
])
def test_a_bad_chain_is_one_line_and_exit_2_before_anything_is_written(
        tmp_path: Path, chain: str, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_chain(chain)
    data, db = write_jsonl(tmp_path / "in.jsonl", items(1)), tmp_path / "e.duckdb"
    assert cli.main(["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", chain]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --judge") and problem in err and err.count("\n") == 1 and "Traceback" not in err
    assert cli.main(["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", CHAIN,
                     "--decompose-with", "local"]) == 2
    err = capsys.readouterr().err
    assert "--decompose-with local is not a tier" in err and err.count("\n") == 1
    assert not db.exists()


# ---------------------------------------------------------------- runs end to end, with the real offline judge

def _with_p(answer: Answer) -> Answer:
    """The offline answer with a p for every 0/1 verdict that has none: its evidence, clipped to agree."""
    def p(value: Any, prob: float | None) -> Confidence | None:
        if value not in (0, 1) or prob is None:
            return None
        return Confidence(max(unit(prob), 0.5) if value == 1 else min(unit(prob), 0.5), CALIBRATED, "offline")

    if answer.status is not Status.OK or answer.confidence is not None or answer.confidences:
        return answer
    if isinstance(answer.value, dict):
        found = {k: p(v, answer.evidence.get(k, (None, ""))[0]) for k, v in answer.value.items()}
        return replace(answer, confidences={k: c for k, c in found.items() if c is not None})
    return replace(answer, confidence=p(answer.value, answer.prob))


@pytest.fixture
def evidence_as_p(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline judge's answers carry a p, in this process, wherever it gives none of its own."""
    real = OfflineJudge.ask

    async def ask(self: OfflineJudge, prompt: str, **variables: Any) -> Answer:
        return _with_p(await real(self, prompt, **variables))

    monkeypatch.setattr(OfflineJudge, "ask", ask)


def stored(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in store.query(db, sql, params or []).itertuples(index=False)]


def evaluate(data: Path, db: Path, server: OpenAIServer, *extra: str, judge: str = CHAIN) -> int:
    return cli.main(["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", judge,
                     "--api-base", server.base_url, "--quiet", *extra])


# Every judged metric but SQC, whose smaller batch re-asks a question against every source while
# taking only its unsure elements: here each element the server sees is one verdict.
JUDGED = "sp1,sp2,rp,rqc,gr"


def test_a_cascade_run_sends_only_unsure_elements_and_records_each_verdict_s_tier(
        tmp_path: Path, openai_server: OpenAIServer, evidence_as_p: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(3)), tmp_path / "e.duckdb"
    args = ("--metrics", JUDGED, "--decompose-with", "offline")
    assert evaluate(data, db, openai_server, *args, "--dry-run") == 0
    planned = capsys.readouterr().out
    assert openai_server.requests == [] and not db.exists()

    assert evaluate(data, db, openai_server, *args) == 0
    out = capsys.readouterr().out
    sent = [request_elements(r) for r in openai_server.requests]
    assert sent and all(name in registry.BATCH_ELEMENTS for name, _ in sent)  # decompositions stayed offline
    by_tier = dict(stored(db, "SELECT tier, count(*) FROM verdicts WHERE run_id = 'r' AND status = 'ok' "
                              "AND tier IS NOT NULL GROUP BY tier"))
    assert by_tier["offline"] > 0 and by_tier[LLM] > 0
    assert sum(n for _, n in sent) == by_tier[LLM]  # every element the server saw is one verdict it decided
    for tier, p, kind, value in stored(db, "SELECT tier, p, p_kind, value FROM verdicts WHERE run_id = 'r' "
                                           "AND status = 'ok' AND metric != 'sd'"):
        if tier == "offline":
            assert kind == CALIBRATED and not is_unsure(p, kind) and value == float(p >= 0.5)
        else:
            assert (tier, kind, p) == (LLM, LABEL, value)
    assert stored(db, "SELECT count(*) FROM verdicts WHERE run_id = 'r' AND status != 'ok'") == [(0,)]
    # The offline tier makes no stored call: its verdicts point at none; the model's at stored calls.
    assert stored(db, "SELECT count(*) FROM verdicts WHERE run_id = 'r' AND tier = 'offline' "
                      "AND call_key IS NOT NULL") == [(0,)]
    assert stored(db, "SELECT count(*) FROM verdicts v WHERE run_id = 'r' AND tier = ? AND NOT EXISTS "
                      "(SELECT 1 FROM judge_calls c WHERE c.key = v.call_key)", [LLM]) == [(0,)]

    # The summary counts verdicts per tier, on the command line and in the stats stored on the run.
    assert f"verdicts by tier: offline {by_tier['offline']}, {LLM} {by_tier[LLM]}" in out
    judge, params, stats = stored(db, "SELECT judge, params, stats FROM runs WHERE run_id = 'r'")[0]
    assert judge == CHAIN and json.loads(stats)["verdicts_by_tier"] == by_tier
    assert json.loads(params)["cascade"]["tiers"] == ["offline", LLM]
    assert json.loads(params)["cascade"]["decompose_with"] == "offline"

    # The dry run ran the offline tier for real: its estimate is what the run then sent.
    assert int(planned.split("judge calls ")[1].split()[0]) == len(openai_server.requests)
    assert f"offline decides {by_tier['offline']}, escalates {sum(n for _, n in sent)} (" in planned
    assert f"{LLM} alone:" in planned and "fewer)" in planned

    openai_server.reset()  # a finished cascade run asks nothing again
    assert evaluate(data, db, openai_server, *args) == 0 and openai_server.requests == []


def test_the_dry_run_of_a_cascade_counts_what_the_run_calls(tmp_path: Path, openai_server: OpenAIServer,
                                                           evidence_as_p: None,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(2)), tmp_path / "e.duckdb"
    assert evaluate(data, db, openai_server, "--dry-run") == 0  # the last tier decomposes: estimated claims
    planned = int(capsys.readouterr().out.split("judge calls ")[1].split()[0])
    assert evaluate(data, db, openai_server) == 0
    assert planned == len(openai_server.requests)


def test_a_failing_last_tier_gives_visible_failures(tmp_path: Path, openai_server: OpenAIServer,
                                                    evidence_as_p: None, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A wide offline band: some verdicts of this item are sure to go on to the last tier, whatever the judge's p.
    monkeypatch.setitem(DEFAULT_BANDS, CALIBRATED, (0.1, 0.9))
    data, db = write_jsonl(tmp_path / "in.jsonl", items(1)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda i, body: True, "garbage")
    assert evaluate(data, db, openai_server, "--metrics", "gr,rqc", "--decompose-with", "offline") == 5
    out = capsys.readouterr().out
    assert "finished with failures" in out and "judge steps failed (unparsed" in out
    assert stored(db, "SELECT status FROM runs")[0][0] == "finished with failures"
    failed = stored(db, "SELECT tier IS NULL AND value IS NULL FROM verdicts WHERE status = 'unparsed'")
    assert failed and all(nothing for (nothing,) in failed)
    assert all(tier == "offline" for (tier,) in stored(db, "SELECT tier FROM verdicts WHERE status = 'ok'"))


def test_resuming_with_another_chain_or_decomposer_is_a_run_conflict(tmp_path: Path, openai_server: OpenAIServer,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(1)), tmp_path / "e.duckdb"
    assert evaluate(data, db, openai_server, "--metrics", "gr") == 0
    capsys.readouterr()
    for other in ([f"--judge={LLM}"], ["--decompose-with", "offline"]):
        assert evaluate(data, db, openai_server, "--metrics", "gr", *other) == 2
        err = capsys.readouterr().err
        assert "already exists" in err and err.count("\n") == 1


def test_a_killed_cascade_run_resumes_without_repeating_calls(tmp_path: Path, openai_server: OpenAIServer) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(6)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda index, body: index >= 8, "hang")  # 8 answers, then calls in flight
    cmd = [sys.executable, "-m", "evaluators", "evaluate", str(data), "--db", str(db), "--run", "r",
           "--judge", CHAIN, "--api-base", openai_server.base_url, "--concurrency", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if len(openai_server.requests) > 8 and stored(db, "SELECT count(*) FROM judge_calls")[0][0] >= 8:
                break
        except (duckdb.Error, store.StoreBusy, store.StoreMissing):  # the run holds the file, or has not made it
            pass
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = [json.dumps(r, sort_keys=True) for r in openai_server.requests]
    assert stored(db, "SELECT count(*) FROM items")[0][0] < 6

    openai_server.reset()
    assert cli.main(cmd[3:]) == 0
    again = {json.dumps(r, sort_keys=True) for r in openai_server.requests}
    assert not again & set(before[:8]), "a call answered before the kill was made again"
    clean = tmp_path / "clean.duckdb"
    runner.evaluate(items(6), clean, "r", CHAIN, api_base=openai_server.base_url)
    assert scores(db, "r") == scores(clean, "r")


def test_the_evaluate_page_runs_a_cascade_to_a_listed_judge(db: Path, openai_server: OpenAIServer) -> None:
    judges = [{"label": "Team judge", "model": LLM, "api_base": openai_server.base_url,
               "key_env": "OPENAI_API_KEY"}]
    at = upload(run(app(EVALUATE, "evaluator", secrets={"judges": judges})), [ROW], "cascaded")
    assert at.selectbox(key="escalate").options[1:] == [*at.selectbox(key="judge").options[1:]]
    at.selectbox(key="escalate").set_value("Team judge")
    at.multiselect(key="eval_metrics").set_value(["sp1", "gr"])  # GR's claims come from the last tier
    click(at, "Evaluate", timeout=120)
    assert any("finished" in s.value for s in at.success), [e.value for e in at.error]
    assert stored(db, "SELECT judge FROM runs WHERE run_id = 'cascaded'") == [(CHAIN,)]
    assert openai_server.requests  # the listed judge was asked at its listed address
    at.selectbox(key="judge").set_value("Team judge")
    run(at)
    assert at.selectbox(key="escalate").disabled  # a label-only judge has nothing unsure to pass on
