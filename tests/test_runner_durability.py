"""No paid call lost, a run is what its input says: the engine under a busy database, kill -9, edited
input, a judge outage and a second process, with real DuckDB files, real subprocesses and the loopback
judge through litellm."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import pytest
from openai_server import OpenAIServer, identify
from test_runner import JUDGE, ROOT, items, scores, write_jsonl

from evaluators import cli
from evaluators.core.records import Item
from evaluators.runs import runner
from evaluators.storage import queries, store


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def evaluate_args(data: Path, db: Path, server: OpenAIServer, *extra: str) -> list[str]:
    return ["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", JUDGE,
            "--api-base", server.base_url, *extra]


def start_cli(args: list[str], stderr: Path, heartbeat_s: float | None = None) -> subprocess.Popen:
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    if heartbeat_s is not None:
        env["RAG_TRIAGE_HEARTBEAT_S"] = str(heartbeat_s)
    return subprocess.Popen([sys.executable, "-m", "evaluators", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr.open("w"))


def wait_for(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def stored(db: Path, sql: str, params: list[object] | None = None) -> int:
    return int(store.query(db, sql, params or [])["n"].iloc[0]) if db.exists() else 0


def sent(server: OpenAIServer) -> list[str]:
    return [json.dumps(r, sort_keys=True) for r in server.requests]


def prompt_of(body: dict) -> str:
    return (identify(body["messages"][0]["content"]) or ("?",))[0]


def hold_read_lock(db: Path, seconds: float) -> subprocess.Popen:
    """A reader in another process that keeps the file open: DuckDB then refuses every writer."""
    code = textwrap.dedent(f"""
        import time
        from evaluators.storage import store
        with store.connect({str(db)!r}, read_only=True):
            print("locked", flush=True)
            time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_reader_holding_the_database_loses_no_answered_call(tmp_path: Path, openai_server: OpenAIServer) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(12)), tmp_path / "e.duckdb"
    openai_server.latency = 0.2  # a run of about ten seconds, so the reader comes mid-run
    err = tmp_path / "err.txt"
    proc = start_cli(evaluate_args(data, db, openai_server, "--concurrency", "2"), err)
    wait_for(lambda: stored(db, "SELECT count(*) AS n FROM judge_calls") >= 5)
    holder = hold_read_lock(db, 30)
    # The workers pause when the writer meets the lock, which the progress line says; then the calls
    # in flight come back. Waiting for the line, not a fixed time, holds on a loaded machine too.
    wait_for(lambda: "waiting for the database (" in err.read_text(), 15)
    time.sleep(2)
    paused_at = len(openai_server.requests)
    assert stored(db, "SELECT count(*) AS n FROM items") < 12
    time.sleep(12)
    assert len(openai_server.requests) == paused_at, "judge calls were made while nothing could be stored"
    holder.wait()
    assert proc.wait(timeout=120) == 0, err.read_text()
    log = err.read_text()
    assert "waiting for the database (" in log and "Traceback" not in log
    requests = sent(openai_server)
    assert len(requests) == len(set(requests)), "a request was sent twice"
    assert stored(db, "SELECT count(*) AS n FROM judge_calls") == len(requests)  # each answer stored once
    assert stored(db, "SELECT count(*) AS n FROM items") == 12
    assert queries.runs.runs(db)["status"].tolist() == ["finished"]


def test_kill_9_repeats_only_the_calls_in_flight(tmp_path: Path, openai_server: OpenAIServer) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(6)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda index, body: index >= 20, "hang")  # 20 answers, then calls in flight
    args = evaluate_args(data, db, openai_server, "--concurrency", "4", "--quiet")
    proc = start_cli(args, tmp_path / "err.txt")
    wait_for(lambda: len(openai_server.requests) > 20)
    answered_at = time.monotonic()
    wait_for(lambda: stored(db, "SELECT count(*) AS n FROM judge_calls") >= 20)
    assert time.monotonic() - answered_at < 10, "answered calls were not stored promptly"
    time.sleep(0.5)  # the workers send what they can; those calls hang
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = sent(openai_server)
    answered, in_flight = set(before[:20]), set(before[20:])
    assert in_flight and stored(db, "SELECT count(*) AS n FROM items") < 6

    openai_server.reset()
    assert cli.main([*args]) == 0
    again = set(sent(openai_server)) & set(before)
    assert not again & answered, "a call answered before the kill was made again"
    assert again <= in_flight
    clean = tmp_path / "clean.duckdb"
    runner.evaluate(items(6), clean, "r", JUDGE, api_base=openai_server.base_url)
    assert scores(db, "r") == scores(clean, "r")


def test_edited_input_stops_and_update_reevaluates_exactly_those(
        tmp_path: Path, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "e.duckdb"
    first = items(4)
    assert cli.main(evaluate_args(write_jsonl(tmp_path / "v1.jsonl", first), db, openai_server, "--quiet")) == 0
    before = scores(db, "r")
    edited = Item("i01", first[1].query, first[1].sources, "EDITED answer. The tower is a clock.")
    second = [first[0], edited, first[3], items(10)[9]]  # i01 changed, i02 removed, i09 added
    v2 = write_jsonl(tmp_path / "v2.jsonl", second)
    openai_server.reset()
    capsys.readouterr()

    assert cli.main(evaluate_args(v2, db, openai_server, "--quiet")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "changed 'i01'" in err and "added 'i09'" in err and "removed 'i02'" in err and "--update" in err
    assert openai_server.requests == [] and scores(db, "r") == before

    assert cli.main(evaluate_args(v2, db, openai_server, "--update", "--quiet")) == 0
    for body in openai_server.requests:  # only the new texts were judged: the rest came from the cache
        text = json.dumps(body)
        assert "EDITED" in text or "case 9" in text or "Case 9" in text or "Record 9" in text, prompt_of(body)
    clean = tmp_path / "clean.duckdb"
    runner.evaluate(second, clean, "r", JUDGE, api_base=openai_server.base_url)
    assert scores(db, "r") == scores(clean, "r")
    assert {k: v for k, v in scores(db, "r").items() if k[0] in ("i00", "i03")} == \
        {k: v for k, v in before.items() if k[0] in ("i00", "i03")}
    for table in ("components", "verdicts", "items"):  # the old rows of i01 were replaced, not kept beside
        count = "SELECT item_id, count(*) AS n FROM {} WHERE run_id = 'r' GROUP BY item_id ORDER BY item_id"
        assert store.query(db, count.format(table)).values.tolist() == \
            store.query(clean, count.format(table)).values.tolist()

    openai_server.reset()
    assert cli.main(evaluate_args(v2, db, openai_server, "--quiet")) == 0
    assert openai_server.requests == []


def test_retry_failed_after_a_judge_outage(tmp_path: Path, openai_server: OpenAIServer,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(2)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda i, body: prompt_of(body) == "groundedness_batch", "503")
    assert cli.main(evaluate_args(data, db, openai_server, "--quiet")) == 5
    out, err = capsys.readouterr()
    assert "finished with failures" in out and "--retry-failed" in err and "Traceback" not in err
    assert queries.runs.runs(db)["status"].tolist() == ["finished with failures"]
    assert {v[3] for k, v in scores(db, "r").items() if k[1] == "gr"} == {"error"}

    openai_server.reset()
    assert cli.main(evaluate_args(data, db, openai_server, "--quiet")) == 5  # a plain rerun asks nothing
    assert openai_server.requests == []

    assert cli.main(evaluate_args(data, db, openai_server, "--retry-failed", "--quiet")) == 0
    assert [prompt_of(r) for r in openai_server.requests] == ["groundedness_batch"] * 2  # answered ones cached
    assert queries.runs.runs(db)["status"].tolist() == ["finished"]
    clean = tmp_path / "clean.duckdb"
    runner.evaluate(items(2), clean, "r", JUDGE, api_base=openai_server.base_url)
    assert scores(db, "r") == scores(clean, "r")
    verdicts = "SELECT count(*) AS n FROM verdicts WHERE run_id = 'r'"
    assert stored(db, verdicts) == stored(clean, verdicts)
    failed = "SELECT count(*) AS n FROM judge_calls WHERE reply IS NULL"
    assert stored(db, failed) == 0  # the answers replaced the failed calls in the cache


def test_all_calls_failing_exit_5_and_finished_with_failures(
        tmp_path: Path, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(1)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda i, body: True, "garbage")
    assert cli.main(evaluate_args(data, db, openai_server, "--quiet")) == 5
    out = capsys.readouterr().out
    assert "judge steps failed (unparsed" in out and "in 1 item" in out
    assert cli.main(["runs", "--db", str(db)]) == 0
    assert "\tfinished with failures\t" in capsys.readouterr().out


def test_second_process_refuses_and_a_killed_run_reads_interrupted(
        tmp_path: Path, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(3)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda index, body: index >= 4, "hang")
    first = start_cli(evaluate_args(data, db, openai_server, "--quiet"), tmp_path / "first.txt", heartbeat_s=1)
    wait_for(lambda: stored(db, "SELECT count(*) AS n FROM judge_calls") >= 4)
    assert queries.runs.runs(db)["status"].tolist() == ["running"]

    with OpenAIServer() as other:  # the second process's judge: it must never be called
        second = subprocess.run([sys.executable, "-m", "evaluators", *evaluate_args(data, db, other)], cwd=ROOT,
                                env={**os.environ, "OPENAI_API_KEY": "x"}, capture_output=True, text=True)
        assert second.returncode == 6
        assert second.stderr.startswith("error: run 'r' is being evaluated by another process (pid ")
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert other.requests == []

    first.send_signal(signal.SIGKILL)
    first.wait()
    wait_for(lambda: queries.runs.runs(db)["status"].tolist() == ["interrupted"], 10)  # 3 missed heartbeats
    assert cli.main(["runs", "--db", str(db)]) == 0
    assert "\tinterrupted\t" in capsys.readouterr().out

    openai_server.reset()
    assert cli.main(evaluate_args(data, db, openai_server, "--quiet")) == 0  # the next process takes over
    assert queries.runs.runs(db)["status"].tolist() == ["finished"]
