"""Judge faults driven for real: litellm to the loopback OpenAI-protocol server, through the runner into DuckDB.

Each test injects one fault, runs an evaluation (in process, through `runner.evaluate` or `cli.main`),
and reads back what was stored: a reply without a message is a failed call, never a verdict;
Retry-After is never undercut; a rate limit past the patience stops the run; no API key reaches
the database or the terminal; a judge without its key fails before any call.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import time
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer

from evaluators import cli
from evaluators.core.masking import mask_url
from evaluators.core.records import Item, Status
from evaluators.judges import factory
from evaluators.judges.llm import NO_KEY, JudgeFatal, JudgeUnavailable, LLMJudge
from evaluators.runs import runner
from evaluators.storage import queries, store

JUDGE = "openai/test-judge"
SECRET = "sk-test-SECRET-0123456789abcdefXYZ"  # shaped like a real key, long enough to be searched for
ITEM = Item(
    id="paris",
    query="Where is Paris?",
    sources=("Paris is the capital of France.", "Rome is the capital of Italy."),
    response="Paris is in France. It is the capital.",
)
CLAIM_VARS = {"sources": ["The sky is blue on a clear day."], "claim": "The sky is blue on a clear day."}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def evaluate(db: Path, server: OpenAIServer, **options: Any) -> runner.RunSummary:
    """GR only (a decomposition and a batched match): few calls, both kinds of prompt."""
    options = {"metrics": ["gr"], "timeout": 3.0, **options}
    return runner.evaluate([ITEM], db, "r", JUDGE, api_base=server.base_url, **options)


def rows(db: Path, sql: str) -> list[dict[str, Any]]:
    return store.query(db, sql).to_dict("records")


def everything_stored(db: Path) -> str:
    """Every value of every column of every table, as one text to search."""
    tables = [r["table_name"] for r in rows(db, "SELECT table_name FROM information_schema.tables")]
    return "\n".join(str(row) for table in tables for row in rows(db, f'SELECT * FROM "{table}"'))


def write_input(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": ITEM.id, "query": ITEM.query, "sources": list(ITEM.sources),
                                "response": ITEM.response}) + "\n")
    return path


def cli_evaluate(tmp_path: Path, server: OpenAIServer | None, *extra: str) -> int:
    args = ["evaluate", str(write_input(tmp_path)), "--db", str(tmp_path / "e.duckdb"), "--run", "r",
            "--metrics", "gr", "--timeout", "3", "--quiet", *extra]
    if server is not None:
        args += ["--judge", JUDGE, "--api-base", server.base_url]
    return cli.main(args)


# ---------------------------------------------------------------- replies without a message

@pytest.mark.parametrize("fault, says", [("empty_choices", "no choices"), ("no_message", "Invalid response object"),
                                         ("null_content", "no message content")])
def test_reply_without_a_message_is_a_failed_call_never_a_verdict(tmp_path: Path, openai_server: OpenAIServer,
                                                                  fault: str, says: str) -> None:
    openai_server.fail_when(lambda index, body: True, fault)
    db = tmp_path / "e.duckdb"
    summary = evaluate(db, openai_server)  # no IndexError, no traceback: the run ends normally
    assert summary.metrics == {"gr": {"error": 1}}
    calls = rows(db, "SELECT status, reply, error FROM judge_calls")
    assert len(calls) == 1  # the decomposition failed: nothing was matched against it
    assert calls[0]["status"] == Status.ERROR.value and calls[0]["reply"] is None
    assert says in calls[0]["error"] and "after 4 attempts" in calls[0]["error"] and "\n" not in calls[0]["error"]
    assert len(openai_server.requests) == 4  # retried like a server error, within the attempts
    assert rows(db, "SELECT count(*) AS n FROM verdicts WHERE status = 'ok'")[0]["n"] == 0
    run = rows(db, "SELECT status, error FROM runs")[0]
    assert run["status"] != "failed" and run["error"] == ""


@pytest.mark.parametrize("fault", ["empty_choices", "no_message", "null_content"])
def test_one_reply_without_a_message_is_retried_and_the_item_scores(tmp_path: Path, openai_server: OpenAIServer,
                                                                    fault: str) -> None:
    openai_server.fail_next(fault)
    db = tmp_path / "e.duckdb"
    summary = evaluate(db, openai_server)
    assert summary.metrics == {"gr": {"ok": 1}}
    assert rows(db, "SELECT DISTINCT status FROM judge_calls") == [{"status": "ok"}]
    assert len(openai_server.requests) == len(rows(db, "SELECT key FROM judge_calls")) + 1


def test_a_failed_call_is_not_cached_so_a_rerun_asks_again(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.fail_when(lambda index, body: index < 4, "null_content")
    db = tmp_path / "e.duckdb"
    evaluate(db, openai_server)
    judge = LLMJudge(JUDGE, api_base=openai_server.base_url, cache=queries.runs.load_cache(db, JUDGE))
    assert judge.cache == {}  # nothing to replay: a reply without content was never an answer


# ---------------------------------------------------------------- Retry-After

@pytest.mark.parametrize("fault", ["429", "503"])
def test_retry_after_in_seconds_is_never_undercut(tmp_path: Path, openai_server: OpenAIServer, fault: str) -> None:
    openai_server.retry_after = 1.5
    openai_server.fail_next(fault)
    db = tmp_path / "e.duckdb"
    summary = evaluate(db, openai_server)
    assert summary.metrics == {"gr": {"ok": 1}}
    first, retry = openai_server.received[:2]
    assert retry - first >= 1.5, f"retried {retry - first:.3f} s after a Retry-After of 1.5 s"
    assert openai_server.requests[0] == openai_server.requests[1]


def test_retry_after_as_an_http_date_is_never_undercut(tmp_path: Path, openai_server: OpenAIServer) -> None:
    not_before = int(time.time()) + 3  # HTTP dates have whole seconds
    openai_server.retry_after = email.utils.formatdate(not_before, usegmt=True)
    openai_server.fail_next("429")
    summary = evaluate(tmp_path / "e.duckdb", openai_server)
    assert summary.metrics == {"gr": {"ok": 1}}
    assert openai_server.received[1] >= not_before, openai_server.received[1] - not_before


def test_retry_after_holds_every_call_of_the_judge(openai_server: OpenAIServer) -> None:
    """A 429 on one call says when the key may call again: a call started meanwhile waits too."""
    openai_server.retry_after = 1.5
    openai_server.fail_next("429")
    judge = LLMJudge(JUDGE, api_base=openai_server.base_url, api_key="x", timeout=3.0)

    async def two() -> list[Any]:
        first = asyncio.create_task(judge.ask("groundedness", **CLAIM_VARS))
        while not judge.stats.waiting_until:  # the 429 has come back
            await asyncio.sleep(0.01)
        assert judge.stats.waiting_until > time.monotonic() + 1.0
        second = asyncio.create_task(judge.ask("groundedness", sources=["Paris is in France."],
                                               claim="Paris is in France."))
        return await asyncio.gather(first, second)

    answers = asyncio.run(two())
    assert [a.value for a in answers] == [1, 1]
    assert len(openai_server.received) == 3
    assert min(openai_server.received[1:]) - openai_server.received[0] >= 1.5


def test_progress_line_says_the_judge_waits_for_a_rate_limit(tmp_path: Path, openai_server: OpenAIServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "WAIT_TICK_S", 0.2)
    openai_server.retry_after = 2
    openai_server.fail_next("429")
    lines: list[str] = []
    evaluate(tmp_path / "e.duckdb", openai_server, on_progress=lambda p: lines.append(p.line()))
    waiting = [line for line in lines if "waiting for rate limit (" in line]
    assert waiting, lines
    assert waiting[0].endswith(("waiting for rate limit (2s)", "waiting for rate limit (1s)"))
    assert "waiting" not in lines[-1]  # the last line, after the item, waits for nothing


def test_progress_line_rounds_the_wait_up() -> None:
    progress = runner.Progress(0, 3, 0, 1, 0, 10, 0.0, 5.0, rate_wait_s=41.2)
    assert progress.line().endswith(" | ETA ? | waiting for rate limit (42s)")
    assert "waiting" not in runner.Progress(0, 3, 0, 1, 0, 10, 0.0, 5.0).line()


def test_a_permanent_429_stops_the_run_after_the_patience(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.retry_after = 0.2
    openai_server.fail_when(lambda index, body: True, "429")
    db = tmp_path / "e.duckdb"
    started = time.monotonic()
    with pytest.raises(JudgeFatal, match="rate limited.*patience of 0.025 min"):
        evaluate(db, openai_server, rate_limit_patience=1.5)
    assert time.monotonic() - started < 5.0  # not 10 minutes per step
    run = rows(db, "SELECT status, error FROM runs")[0]
    assert run["status"] == "failed" and "rate limited" in run["error"]
    assert rows(db, "SELECT count(*) AS n FROM verdicts")[0]["n"] == 0  # nothing judged as nothing
    # Never earlier than the server asked, every time.
    gaps = [b - a for a, b in zip(openai_server.received, openai_server.received[1:])]
    assert gaps and min(gaps) >= 0.2


def test_a_retry_after_longer_than_the_patience_stops_the_run_at_once(tmp_path: Path,
                                                                        openai_server: OpenAIServer,
                                                                        capfd: pytest.CaptureFixture[str]) -> None:
    openai_server.retry_after = 3600
    openai_server.fail_when(lambda index, body: True, "429")
    started = time.monotonic()
    assert cli_evaluate(tmp_path, openai_server, "--rate-limit-patience", "10") == 3
    assert time.monotonic() - started < 5.0
    assert len(openai_server.requests) == 1
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rate limited" in err and "3600 s" in err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-inf"])
def test_rate_limit_patience_must_be_a_positive_finite_number_of_minutes(tmp_path: Path, value: str,
                                                                         capfd: pytest.CaptureFixture[str]) -> None:
    assert cli_evaluate(tmp_path, None, f"--rate-limit-patience={value}") == 2
    err = capfd.readouterr().err.strip()
    assert err.startswith("error: --rate-limit-patience must be") and len(err.splitlines()) == 1
    assert not (tmp_path / "e.duckdb").exists()


def test_rate_limit_patience_reaches_the_judge_in_seconds(tmp_path: Path, openai_server: OpenAIServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    real = factory.open_judge

    async def spy(*args: Any, **kwargs: Any) -> Any:
        judge, forced = await real(*args, **kwargs)
        seen.append(judge.rate_limit_patience)
        return judge, forced

    monkeypatch.setattr(factory, "open_judge", spy)
    assert cli_evaluate(tmp_path, openai_server, "--rate-limit-patience", "2.5") == 0
    assert seen == [150.0]


# ---------------------------------------------------------------- secrets in errors

def test_an_error_echoing_the_key_is_stored_and_printed_masked(tmp_path: Path, openai_server: OpenAIServer,
                                                               capfd: pytest.CaptureFixture[str]) -> None:
    openai_server.fail_when(lambda index, body: True, "echo_key_500")
    # every step failed: the exit code is the runner's to decide
    cli_evaluate(tmp_path, openai_server, "--key-env", "OPENAI_API_KEY")
    # The key was sent, and the server did quote it back: the masking below has something to do.
    assert openai_server.headers[0]["authorization"] == f"Bearer {SECRET}"
    db = tmp_path / "e.duckdb"
    error = rows(db, "SELECT error FROM judge_calls")[0]["error"]
    assert "Authorization: Bearer ***" in error and "api_key=***" in error
    stored, out = everything_stored(db), capfd.readouterr()
    for text in (stored, out.out, out.err):
        assert SECRET not in text and SECRET[:12] not in text


def test_a_refusal_echoing_the_key_stops_the_run_with_the_key_masked(tmp_path: Path, openai_server: OpenAIServer,
                                                                    capfd: pytest.CaptureFixture[str]) -> None:
    openai_server.fail_when(lambda index, body: True, "echo_key_401")
    assert cli_evaluate(tmp_path, openai_server, "--key-env", "OPENAI_API_KEY") == 3
    db = tmp_path / "e.duckdb"
    run = rows(db, "SELECT status, error FROM runs")[0]
    assert run["status"] == "failed" and "Bearer ***" in run["error"]
    out = capfd.readouterr()
    assert len(out.err.strip().splitlines()) == 1 and "Bearer ***" in out.err
    for text in (everything_stored(db), out.out, out.err):
        assert SECRET not in text and SECRET[:12] not in text


def test_a_key_given_to_the_judge_is_masked_even_without_a_known_shape(openai_server: OpenAIServer) -> None:
    key = "plain-looking-credential-42"
    openai_server.fail_when(lambda index, body: True, "echo_key_401")
    judge = LLMJudge(JUDGE, api_base=openai_server.base_url, api_key=key, timeout=3.0)
    with pytest.raises(JudgeFatal) as caught:
        asyncio.run(judge.ask("groundedness", **CLAIM_VARS))
    assert key not in str(caught.value) and "***" in str(caught.value)


# ---------------------------------------------------------------- which key goes where

def test_an_api_base_is_sent_no_provider_key_from_the_environment(tmp_path: Path, openai_server: OpenAIServer,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """OPENAI_API_KEY is set (the autouse fixture): a self-hosted --api-base must never receive it."""
    assert cli_evaluate(tmp_path, openai_server) == 0
    assert openai_server.headers and {h["authorization"] for h in openai_server.headers} == {f"Bearer {NO_KEY}"}


def test_key_env_sends_exactly_that_variable_to_the_api_base(tmp_path: Path, openai_server: OpenAIServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_KEY", "team-key-0123456789")
    assert cli_evaluate(tmp_path, openai_server, "--key-env", "TEAM_KEY") == 0
    assert openai_server.headers and {h["authorization"] for h in openai_server.headers} == {"Bearer team-key-0123456789"}
    assert "team-key-0123456789" not in everything_stored(tmp_path / "e.duckdb")


def test_key_env_unset_or_not_a_name_fails_before_any_call(tmp_path: Path, openai_server: OpenAIServer,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TEAM_KEY", raising=False)
    assert cli_evaluate(tmp_path, openai_server, "--key-env", "TEAM_KEY") == 2
    assert cli_evaluate(tmp_path, openai_server, "--key-env", SECRET) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "TEAM_KEY is not set" in err[0] and "--key-env must be the name" in err[1]
    assert SECRET not in "".join(err) and openai_server.requests == []


def test_a_model_that_needs_more_than_its_key_env_is_refused_before_any_call(tmp_path: Path,
                                                                             openai_server: OpenAIServer,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_KEY", "team-key-0123456789")
    monkeypatch.delenv("AZURE_API_VERSION", raising=False)
    # bedrock/ takes the AWS SDK's own credentials, and no api_base: it is refused for the base first
    for model, says in (("azure/gpt-4o", "its key comes from TEAM_KEY alone, but it would also need .*AZURE_API_VERSION"),
                        ("bedrock/anthropic.claude-v2", "does not send bedrock/ calls to an api_base")):
        with pytest.raises(JudgeUnavailable, match=says):
            runner.evaluate([ITEM], tmp_path / "e.duckdb", "r", model, api_base=openai_server.base_url,
                            key_env="TEAM_KEY", metrics=["gr"])
    assert openai_server.requests == []


@pytest.mark.parametrize("credential", ["http://bob:pa55word-0123@{host}/v1", "http://{host}/v1?api-key=SECRET-0123456789",
                                        "http://{host}/v1?x=1&access_token=SECRET-0123456789&sig=s1gnature-0123"])
def test_credentials_in_an_api_base_are_masked_wherever_they_are_kept_or_shown(
        tmp_path: Path, openai_server: OpenAIServer, capfd: pytest.CaptureFixture[str], credential: str) -> None:
    url = credential.format(host=openai_server.base_url.removeprefix("http://").removesuffix("/v1"))
    cli_evaluate(tmp_path, None, "--judge", JUDGE, "--api-base", url)  # the SDK refuses user:password@: errors
    db, out = tmp_path / "e.duckdb", capfd.readouterr()
    endpoints = {r["endpoint"] for r in rows(db, "SELECT DISTINCT endpoint FROM judge_calls")}
    assert mask_url(url) in endpoints and "***" in mask_url(url)
    stats = json.loads(rows(db, "SELECT stats FROM runs")[0]["stats"])
    for text in (everything_stored(db), out.out, out.err, json.dumps(stats)):
        assert "pa55word" not in text and "SECRET" not in text and "s1gnature" not in text


# ---------------------------------------------------------------- a judge without its key or endpoint

def test_a_judge_without_its_key_fails_at_once_with_one_line(tmp_path: Path, openai_server: OpenAIServer,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    started = time.monotonic()
    assert cli_evaluate(tmp_path, None, "--judge", "anthropic/claude-3-5-haiku-20241022") == 2
    assert time.monotonic() - started < 2.0
    err = capfd.readouterr().err.strip()
    assert err.startswith("error: judge anthropic/claude-3-5-haiku-20241022: ANTHROPIC_API_KEY not set")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    db = tmp_path / "e.duckdb"
    assert not db.exists() or rows(db, "SELECT count(*) AS n FROM runs")[0]["n"] == 0
    assert not db.exists() or rows(db, "SELECT count(*) AS n FROM judge_calls")[0]["n"] == 0
    assert openai_server.requests == []


def test_a_judge_without_its_endpoint_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(JudgeUnavailable, match="OLLAMA_API_BASE"):
        runner.evaluate([ITEM], tmp_path / "e.duckdb", "r", "ollama/llama3", metrics=["gr"])


def test_an_openai_compatible_server_without_a_key_still_works(tmp_path: Path, openai_server: OpenAIServer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    summary = evaluate(tmp_path / "e.duckdb", openai_server)
    assert summary.metrics == {"gr": {"ok": 1}}
    assert {h["authorization"] for h in openai_server.headers} == {f"Bearer {NO_KEY}"}


def test_a_server_that_needs_the_missing_key_stops_the_run_at_the_first_call(tmp_path: Path,
                                                                              openai_server: OpenAIServer,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    openai_server.fail_when(lambda index, body: True, "401")
    with pytest.raises(JudgeFatal, match="refused the request"):
        evaluate(tmp_path / "e.duckdb", openai_server)
    assert len(openai_server.requests) == 1
