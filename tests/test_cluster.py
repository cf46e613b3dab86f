"""`evaluate --ray`: a run judged by Ray workers on a REAL local Ray instance (one per module: it takes
seconds to start), against the loopback OpenAI-protocol server with its request log, into DuckDB.

Nothing lost, nothing twice: a worker killed mid-run, a driver killed mid-run (resumed with --ray and
without), each ending equal row for row to an uninterrupted run, with no answered call asked again;
and a run judged on Ray equals the same run judged in one process."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pandas as pd
import pytest
from openai_server import OpenAIServer
from test_runner import JUDGE, ROOT, items, write_jsonl
from test_runner_durability import evaluate_args, prompt_of, start_cli, stored, wait_for

from evaluators import cli
from evaluators.judges.factory import JudgeConfig
from evaluators.runs import runner
from evaluators.runs.cluster import ClusterOptions
from evaluators.runs.runner import RunOptions
from evaluators.storage import queries, store
from tests.conftest import app_db
from tests.test_pages import open_page

# One machine alone: Ray binds the loopback address (read when ray is imported), never the host's own.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="Ray is the optional cluster extra: make cluster (requirements-cluster.txt)")
pytestmark = pytest.mark.cluster

# What a run's rows are, table by table, without what differs between two sittings of one evaluation
# (when a call was made and how long it took).
TABLES = {
    "items": "SELECT * EXCLUDE (run_id) FROM items WHERE run_id = $run ORDER BY item_id",
    "components": "SELECT * EXCLUDE (run_id) FROM components WHERE run_id = $run ORDER BY item_id, kind, idx",
    "verdicts": """SELECT * EXCLUDE (run_id) FROM verdicts WHERE run_id = $run
                   ORDER BY item_id, metric, component_kind, component_idx, target""",
    "scores": "SELECT * EXCLUDE (run_id) FROM scores WHERE run_id = $run ORDER BY item_id, metric",
    "run_wide": "SELECT * EXCLUDE (run_id) FROM run_wide WHERE run_id = $run ORDER BY item_id",
    "judge_calls": """SELECT * EXCLUDE (created_at, latency_ms) FROM judge_calls
                      WHERE key IN (SELECT call_key FROM verdicts WHERE run_id = $run
                                    UNION SELECT call_key FROM components WHERE run_id = $run) ORDER BY key""",
}


def rows(db: Path, run: str = "r") -> dict[str, pd.DataFrame]:
    """Every row of a run, table by table, in one order."""
    return {table: store.query(db, sql, {"run": run}) for table, sql in TABLES.items()}


def assert_same_rows(db: Path, other: Path, same_server: bool = True) -> None:
    """The run "r" of two databases has the same rows in every table; the endpoints that answered its calls
    too when both ran against one server."""
    mine, theirs = rows(db), rows(other)
    for table in TABLES:
        assert len(mine[table]) > 0, table
        if not same_server and table == "judge_calls":
            mine[table], theirs[table] = mine[table].drop(columns="endpoint"), theirs[table].drop(columns="endpoint")
        pd.testing.assert_frame_equal(mine[table], theirs[table], check_exact=True, obj=table)


def answered(log: Path) -> list[str]:
    """The digests of the requests the server answered (one per line of its log)."""
    return [json.loads(line)["digest"] for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture(scope="module")
def gcs() -> Iterator[str]:
    """ONE local Ray instance for the module (2 CPUs, loopback only, no dashboard): its GCS address."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as --ray starts a local instance
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def on_ray(server: OpenAIServer | None = None, workers: int = 2, shard_size: int | None = 3, **judge: object) -> RunOptions:
    config = JudgeConfig(JUDGE, server.base_url, **judge) if server else JudgeConfig()  # type: ignore[arg-type]
    return RunOptions(config, cluster=ClusterOptions(None, workers, shard_size))


def worker_pids() -> dict[str, int]:
    """The run's Ray workers by name, with their process ids."""
    named = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "rag-triage"]
    return {a["name"]: ray.get(ray.get_actor(a["name"], namespace=a["namespace"]).pid.remote()) for a in named}


def test_a_run_on_ray_equals_the_run_in_one_process(tmp_path: Path, gcs: str, openai_server: OpenAIServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    data = items(8)
    # The loopback judge: the same calls, replies, tokens, verdicts and scores, and the same failures (its
    # groundedness replies cannot be read: unparsed, the raw reply kept); no request asked twice.
    openai_server.fail_when(lambda i, body: prompt_of(body) == "groundedness_batch", "garbage")
    plain = runner.evaluate(data, tmp_path / "plain.duckdb", "r", JUDGE, api_base=openai_server.base_url)
    plain_requests = sorted(json.dumps(r, sort_keys=True) for r in openai_server.requests)
    openai_server.requests.clear()
    summary = runner.evaluate(data, tmp_path / "ray.duckdb", "r", options=on_ray(openai_server))
    assert sorted(json.dumps(r, sort_keys=True) for r in openai_server.requests) == plain_requests
    assert_same_rows(tmp_path / "ray.duckdb", tmp_path / "plain.duckdb")
    assert summary.stats["calls"] == len(plain_requests) and summary.stats["prompt_tokens"] > 0
    assert summary.status == "finished with failures" and "unparsed" in summary.failed_steps
    assert (summary.metrics, summary.failed_steps) == (plain.metrics, plain.failed_steps)
    # The offline judge: the same verdicts, p and scores (a vector moves by 3e-7 with its encoding batch).
    runner.evaluate(data, tmp_path / "plain.duckdb", "o")
    runner.evaluate(data, tmp_path / "ray.duckdb", "o", options=on_ray())
    mine, theirs = rows(tmp_path / "ray.duckdb", "o"), rows(tmp_path / "plain.duckdb", "o")
    for table in ("items", "components", "verdicts", "scores"):
        pd.testing.assert_frame_equal(mine[table], theirs[table], check_exact=False, atol=1e-6, rtol=0, obj=table)

    # The run's params say where it was judged, and the Run page shows it.
    params = json.loads(queries.runs.runs(tmp_path / "ray.duckdb").set_index("run_id").loc["o", "params"])
    assert params["judged_on"] == [{"where": "ray", "address": gcs, "workers": 2, "shard_size": 3, "shards": 3,
                                    "items": 8}]
    next(app_db(tmp_path / "ray.duckdb", monkeypatch))
    at = open_page("pages/1_Run.py", run="o")
    shown = [c.value.replace("\\", "") for c in at.caption]  # markdown escapes taken out
    assert f"Judged on Ray at {gcs} (2 workers; 8 items in 3 shards of up to 3)." in shown
    plain_params = queries.runs.runs(tmp_path / "plain.duckdb").set_index("run_id").loc["r", "params"]
    assert "judged_on" not in json.loads(plain_params)  # a run judged in one process records no sitting


def test_a_worker_killed_mid_run_is_restarted_and_nothing_is_lost_or_asked_twice(
        tmp_path: Path, gcs: str) -> None:
    data, db, log = items(12), tmp_path / "e.duckdb", tmp_path / "requests.jsonl"
    with OpenAIServer(log=log, hang_seconds=2) as server:
        server.fail_when(lambda index, body: index >= 16, "hang")  # 16 answers, then every call hangs
        done: list[object] = []
        run = threading.Thread(target=lambda: done.append(runner.evaluate(
            data, db, "r", options=on_ray(server, concurrency=4))))
        run.start()
        try:
            wait_for(lambda: len(answered(log)) >= 16 and stored(db, "SELECT count(*) AS n FROM judge_calls") >= 16)
            assert stored(db, "SELECT count(*) AS n FROM items") < 12, "the run ended before the kill"
            before = worker_pids()
            assert len(before) == 2
            name, pid = sorted(before.items())[0]
            os.kill(pid, signal.SIGKILL)  # mid-shard: its calls hang, its items are not delivered
            server.rules.clear()  # from now on every call is answered
            wait_for(lambda: worker_pids().get(name, pid) != pid, 60)  # Ray restarted it
        finally:
            run.join(120)
        assert done and not run.is_alive()
    assert stored(db, "SELECT count(*) AS n FROM items") == 12
    digests = answered(log)
    assert len(digests) == len(set(digests)), "an answered call was asked again"
    with OpenAIServer() as clean_server:
        runner.evaluate(data, tmp_path / "clean.duckdb", "r", JUDGE, api_base=clean_server.base_url)
    assert_same_rows(db, tmp_path / "clean.duckdb", same_server=False)


def test_a_killed_driver_resumes_with_ray_and_without(tmp_path: Path, gcs: str) -> None:
    data, db, log = write_jsonl(tmp_path / "in.jsonl", items(12)), tmp_path / "e.duckdb", tmp_path / "requests.jsonl"
    with OpenAIServer(log=log, hang_seconds=2) as server:
        args = evaluate_args(data, db, server, "--concurrency", "4", "--quiet")

        def killed_after(extra: list[str], answers: int) -> None:
            """Run `evaluate` in a process of its own until `answers` more calls are answered and stored
            (the calls after them hang), then kill -9 it."""
            server.rules.clear()
            last, target = len(server.requests) + answers, len(answered(log)) + answers
            server.fail_when(lambda index, body: index >= last, "hang")
            proc = start_cli([*args, *extra], tmp_path / "err.txt")
            try:
                wait_for(lambda: len(answered(log)) >= target
                         and stored(db, "SELECT count(*) AS n FROM judge_calls") >= target, 90)
                time.sleep(0.3)  # the workers send what they can: those calls hang
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            assert stored(db, "SELECT count(*) AS n FROM items") < 12, (tmp_path / "err.txt").read_text()

        killed_after([], 16)  # a run started in one process, killed
        killed_after(["--ray", gcs, "--workers", "2"], 16)  # resumed on Ray, killed: its workers go with it
        server.rules.clear()
        assert cli.main(args) == 0  # resumed in one process, to the end
    digests = answered(log)
    assert len(digests) == len(set(digests)), "an answered call was asked again"
    assert queries.runs.runs(db)["status"].tolist() == ["finished"]
    sittings = json.loads(queries.runs.runs(db)["params"].iloc[0])["judged_on"]
    assert [s["where"] for s in sittings] == ["ray", "process"] and sittings[0]["workers"] == 2
    with OpenAIServer() as clean_server:
        runner.evaluate(items(12), tmp_path / "clean.duckdb", "r", JUDGE, api_base=clean_server.base_url)
    assert_same_rows(db, tmp_path / "clean.duckdb", same_server=False)


def test_a_judge_refusing_the_requests_stops_a_run_on_ray_with_exit_3(
        tmp_path: Path, gcs: str, openai_server: OpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(2)), tmp_path / "e.duckdb"
    openai_server.fail_when(lambda i, body: True, "401")
    assert cli.main([*evaluate_args(data, db, openai_server, "--quiet"), "--ray", gcs, "--workers", "1"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: judge openai/test-judge refused the request: ") and err.count("\n") == 1, err
    assert queries.runs.runs(db)["status"].tolist() == ["failed"]


@pytest.mark.parametrize("extra, message", [
    (["--ray", "--dry-run"], "error: --dry-run calls nothing, so it needs no cluster: drop --ray"),
    (["--ray", "--client-processes", "2"], "error: --client-processes sends the calls from processes of this machine"),
    (["--ray", "--judge", "offline>local"], "error: --judge local serves the model from this machine's llama.cpp"),
    (["--workers", "2"], "error: --workers sets how many Ray workers judge: add --ray [ADDRESS]"),
    (["--ray", "in.jsonl"], "error: --ray must be auto, ray://HOST:PORT (Ray Client) or HOST:PORT"),
])
def test_options_ray_cannot_honour_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                extra: list[str], message: str) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(1)), tmp_path / "e.duckdb"
    assert cli.main(["evaluate", str(data), "--db", str(db), "--run", "r", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not db.exists()


def test_an_unreachable_cluster_and_a_missing_ray_are_one_line(tmp_path: Path) -> None:
    data, db = write_jsonl(tmp_path / "in.jsonl", items(1)), tmp_path / "e.duckdb"
    args = ["evaluate", str(data), "--db", str(db), "--run", "r"]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    # Nothing listens there: refused at once, not after Ray's minutes of retries.
    gone = subprocess.run([sys.executable, "-m", "evaluators", *args, "--ray", "127.0.0.1:1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert gone.returncode == 2
    assert gone.stderr.startswith("error: --ray 127.0.0.1:1: no Ray cluster answers at 127.0.0.1:1")
    assert gone.stderr.count("\n") == 1 and not db.exists()
    # Without the extra installed (ray cannot be imported).
    code = f"import sys; sys.modules['ray'] = None; from evaluators import cli; sys.exit(cli.main({[*args, '--ray']!r}))"
    missing = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2
    assert missing.stderr == "error: --ray needs Ray: install rag-triage[cluster] (pip install 'rag-triage[cluster]')\n"
    assert not db.exists()
