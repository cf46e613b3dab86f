"""The runner and CLI end to end, through litellm to the loopback OpenAI-protocol server, into DuckDB."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluators import cli, runner, store
from evaluators.records import Item, Status
from openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
JUDGE = "openai/test-judge"

TRIPLET = Item(
    id="clock",
    query="When was the Chimnabai Clock Tower completed? And who was it named after?",
    sources=(
        "The Chimnabai Clock Tower is a clock tower in Vadodara, India. It was completed in 1896. "
        "It was named in memory of Chimnabai I, a queen of Baroda State.",
        "The tower was inaugurated by Mir Kamaluddin Hussainkhan. It was a stoppage for horse drawn trams.",
        "Vadodara is a city in Gujarat. It is known for its palaces and gardens.",
    ),
    response=("The Chimnabai Clock Tower was completed in 1896. It was named after Chimnabai I. "
              "Chimnabai I was a queen of Baroda State. The tower was a stop for horse drawn trams. "
              "Vadodara is known for its gardens."),
)


def items(n: int) -> list[Item]:
    """Distinct items: no two share a request, so call counts are per item."""
    return [Item(f"i{k:02d}", f"{TRIPLET.query} (case {k})", tuple(f"{s} Record {k}." for s in TRIPLET.sources),
                 f"{TRIPLET.response} Case {k}.") for k in range(n)]


def write_jsonl(path: Path, rows: list[Item]) -> Path:
    path.write_text("".join(json.dumps({"id": i.id, "query": i.query, "sources": list(i.sources),
                                        "response": i.response}) + "\n" for i in rows))
    return path


def scores(db: Path, run: str) -> dict[tuple[str, str], tuple[float | None, int, int, str]]:
    frame = store.query(db, "SELECT item_id, metric, value, n_scored, n_total, status FROM scores WHERE run_id = ?", [run])
    return {(r.item_id, r.metric): (None if r.value != r.value else r.value, r.n_scored, r.n_total, r.status)
            for r in frame.itertuples()}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def test_batched_suite_stays_within_eight_calls(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    summary = runner.evaluate([TRIPLET], db, "r", JUDGE, api_base=openai_server.base_url)
    assert len(openai_server.requests) <= 8
    assert all(counts == {"ok": 1} for counts in summary.metrics.values()), summary.metrics
    # Every call is stored with its prompt hash and token counts; verdicts point at their calls.
    calls = store.query(db, "SELECT prompt_name, prompt_hash, prompt_tokens, completion_tokens FROM judge_calls")
    assert len(calls) == len(openai_server.requests)
    assert (calls["prompt_tokens"] > 0).all() and (calls["prompt_hash"].str.len() == 12).all()
    orphan = store.query(db, """SELECT count(*) AS n FROM verdicts v LEFT JOIN judge_calls c ON c.key = v.call_key
                                WHERE v.metric <> 'sd' AND c.key IS NULL""")
    assert orphan["n"].iloc[0] == 0


def test_per_component_makes_one_call_per_component(tmp_path: Path, openai_server: OpenAIServer) -> None:
    runner.evaluate([TRIPLET], tmp_path / "e.duckdb", "r", JUDGE, api_base=openai_server.base_url, per_component=True)
    names = [runner_prompt(r) for r in openai_server.requests]
    assert "groundedness" in names and "groundedness_batch" not in names
    assert len(names) > 8


def runner_prompt(request: dict) -> str:
    from openai_server import identify

    found = identify(request["messages"][0]["content"])
    return found[0] if found else "?"


def test_rerun_of_a_finished_run_makes_no_calls(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    runner.evaluate(items(3), db, "r", JUDGE, api_base=openai_server.base_url)
    first = scores(db, "r")
    openai_server.reset()
    runner.evaluate(items(3), db, "r", JUDGE, api_base=openai_server.base_url)
    assert openai_server.requests == []
    # A new run over the same items answers every request from the cache.
    runner.evaluate(items(3), db, "again", JUDGE, api_base=openai_server.base_url)
    assert openai_server.requests == []
    assert {k[0:2]: v for k, v in scores(db, "again").items()} == first


def test_killed_run_resumes_without_repeating_calls(tmp_path: Path, openai_server: OpenAIServer) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", items(6))
    db = tmp_path / "e.duckdb"
    # Answer the first 20 requests, then hang: the run is killed mid-flight.
    openai_server.fail_when(lambda index, body: index >= 20, "hang")
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    cmd = [sys.executable, "-m", "evaluators", "evaluate", str(data), "--db", str(db), "--run", "r",
           "--judge", JUDGE, "--api-base", openai_server.base_url, "--concurrency", "4", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the 20 answered calls are stored
        if db.exists() and store.query(db, "SELECT count(*) AS n FROM judge_calls")["n"].iloc[0] >= 20:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    answered = [json.dumps(r, sort_keys=True) for r in openai_server.requests[:20]]
    assert len(store.done_item_ids(db, "r")) < 6

    openai_server.reset()
    assert cli.main(cmd[3:]) == 0
    again = [json.dumps(r, sort_keys=True) for r in openai_server.requests]
    assert not set(again) & set(answered), "a call answered before the kill was made again"

    clean = tmp_path / "clean.duckdb"
    runner.evaluate(items(6), clean, "r", JUDGE, api_base=openai_server.base_url)
    assert scores(db, "r") == scores(clean, "r")


def test_judge_failures_are_statuses_not_scores(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    from openai_server import identify

    # Groundedness always answers garbage: GR is unparsed, with the raw reply kept; the rest is fine.
    openai_server.fail_when(lambda i, body: (identify(body["messages"][0]["content"]) or ("",))[0]
                            == "groundedness_batch", "garbage")
    runner.evaluate([TRIPLET], db, "r", JUDGE, api_base=openai_server.base_url)
    gr = scores(db, "r")[("clock", "gr")]
    assert gr == (None, 0, 5, Status.UNPARSED.value)
    raw = store.query(db, """SELECT c.reply FROM verdicts v JOIN judge_calls c ON c.key = v.call_key
                             WHERE v.metric = 'gr' LIMIT 1""")["reply"].iloc[0]
    assert "banana" in raw
    assert scores(db, "r")[("clock", "rqc")][3] == "ok"


def test_refused_requests_stop_the_run_with_a_clear_message(tmp_path: Path, openai_server: OpenAIServer,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", items(2))
    openai_server.fail_when(lambda i, body: True, "401")
    code = cli.main(["evaluate", str(data), "--db", str(tmp_path / "e.duckdb"), "--run", "r",
                     "--judge", JUDGE, "--api-base", openai_server.base_url, "--quiet"])
    err = capsys.readouterr().err
    assert code == 3 and "refused the request" in err and "Traceback" not in err
    sent = [json.dumps(r, sort_keys=True) for r in openai_server.requests]
    assert len(sent) == len(set(sent)) <= 8  # only the first calls, already in flight; no retries
    assert store.runs(tmp_path / "e.duckdb")["status"].iloc[0] == "failed"


def test_dry_run_counts_calls_and_calls_nothing(tmp_path: Path, openai_server: OpenAIServer,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", items(2))
    db = tmp_path / "e.duckdb"
    args = ["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", JUDGE,
            "--api-base", openai_server.base_url]
    assert cli.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert openai_server.requests == [] and not db.exists()
    planned = int(out.split("judge calls ")[1].split()[0])
    assert cli.main([*args, "--quiet"]) == 0
    assert planned == len(openai_server.requests)  # batched counts are exact
    capsys.readouterr()
    assert cli.main([*args, "--dry-run"]) == 0
    assert "0 items to evaluate" in capsys.readouterr().out


def test_export_and_diagnose_files(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    runner.evaluate(items(2), db, "r", JUDGE, api_base=openai_server.base_url, metrics=["sqc", "rqc", "gr"])
    assert cli.main(["export", "--db", str(db), "--run", "r", "--out", str(tmp_path / "x.csv")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "x.csv")))
    assert list(rows[0])[:8] == ["item_id", "sp1", "sp2", "sqc", "rp", "rqc", "sd", "gr"]
    assert rows[0]["sp1"] == "" and 0.0 <= float(rows[0]["gr"]) <= 1.0 and rows[0]["n_failed"] == "0"
    assert cli.main(["diagnose", "--db", str(db), "--run", "r", "--out", str(tmp_path / "d.csv"),
                     "--thresholds", "gr=1.0"]) == 0
    header = open(tmp_path / "d.csv").readline().strip()
    assert header == "item_id,rule,components"


def test_bad_input_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "query": "q", "sources": "not a list", "response": "r"}\n{oops\n')
    code = cli.main(["evaluate", str(bad), "--db", str(tmp_path / "e.duckdb"), "--run", "r"])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}:1: field sources" in err and f"{bad}:2:" in err and "Traceback" not in err
    assert not (tmp_path / "e.duckdb").exists()


def test_unknown_run_and_missing_db_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["runs", "--db", str(tmp_path / "none.duckdb")]) == 2
    store.migrate(tmp_path / "e.duckdb")
    assert cli.main(["export", "--db", str(tmp_path / "e.duckdb"), "--run", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err


def test_resuming_with_other_options_is_refused(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    runner.evaluate(items(1), db, "r", JUDGE, api_base=openai_server.base_url, metrics=["gr"])
    with pytest.raises(store.RunConflict, match="already exists") as refused:
        runner.evaluate(items(1), db, "r", JUDGE, api_base=openai_server.base_url, metrics=["rp"])
    assert "--" not in str(refused.value)  # the engine speaks of runs; the CLI adds its flags


def test_the_cli_adds_its_flag_advice_to_a_run_conflict(tmp_path: Path, openai_server: OpenAIServer,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", items(1))
    args = ["evaluate", str(data), "--db", str(tmp_path / "e.duckdb"), "--run", "r", "--judge", JUDGE,
            "--api-base", openai_server.base_url, "--quiet"]
    assert cli.main([*args, "--metrics", "gr"]) == 0
    capsys.readouterr()
    assert cli.main([*args, "--metrics", "rp"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "choose another --run name" in err and err.count("\n") == 1
