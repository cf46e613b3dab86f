"""One judge behind several OpenAI-compatible replicas: calls spread, a dead replica routed around.

Real loopback servers (tests/openai_server.py) and real litellm calls; the servers' request logs
say which replica answered what, the DuckDB store says what the run recorded.
"""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

import duckdb
import pytest
from openai_server import OpenAIServer
from test_runner import JUDGE, items, write_jsonl

from evaluators import cli
from evaluators.cli import evaluate as cli_evaluate
from evaluators.core.records import Answer, JudgeCall, Status
from evaluators.dashboard import markup
from evaluators.judges.llm import LLMJudge
from evaluators.storage import queries, store, writes

SOURCES = ["The sky is blue on a clear day because air scatters short wavelengths more than long ones."]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")


def answered(log: Path) -> list[str]:
    """The digests of the requests a server answered, from its log."""
    if not log.exists():
        return []
    return [json.loads(line)["digest"] for line in log.read_text().splitlines() if line.strip()]


def ask_all(judge: LLMJudge, n: int, tag: str) -> list:
    async def go() -> list:
        return await asyncio.gather(*(judge.ask("groundedness", sources=SOURCES, claim=f"Claim {tag} {k}: sky is blue.")
                                      for k in range(n)))
    return asyncio.run(go())


@pytest.mark.parametrize("processes", [1, 2])
def test_a_replica_killed_mid_run_loses_nothing_and_repeats_nothing(tmp_path: Path, processes: int) -> None:
    """Through the CLI with two --api-base replicas, one killed mid-run: every item scored, each call
    answered exactly once over both servers, calls recorded on both endpoints, and a resume that
    only has the surviving replica makes no call (the cache key does not depend on the endpoint)."""
    logs = tmp_path / "a.log", tmp_path / "b.log"
    db, data = tmp_path / "r.duckdb", write_jsonl(tmp_path / "items.jsonl", items(24))
    with OpenAIServer(latency=0.05, log=logs[0]) as a, OpenAIServer(latency=0.05, log=logs[1]) as b:
        url_a, url_b = a.base_url, b.base_url
        args = ["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", JUDGE, "--api-base", url_a,
                "--api-base", url_b, "--concurrency", "6", "--quiet", "--client-processes", str(processes)]
        codes: list[int] = []
        worker = threading.Thread(target=lambda: codes.append(cli.main(args)))
        worker.start()
        deadline = time.monotonic() + 120
        while len(answered(logs[0])) < 20 and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        a.kill()
        killed_at = len(answered(logs[0]))
        worker.join(timeout=300)
        assert codes == [0]
        on_a, on_b = answered(logs[0]), answered(logs[1])
        assert 20 <= killed_at == len(on_a) and on_b, (len(on_a), len(on_b))
        assert len(on_a) + len(on_b) == len(set(on_a) | set(on_b)), "a call was answered twice"
        assert queries.runs.count_items(db, "r") == 24
        statuses = store.query(db, "SELECT status, count(*) AS n FROM scores WHERE run_id = 'r' GROUP BY status")
        assert statuses.values.tolist() == [["ok", 24 * 7]]
        calls = store.query(db, "SELECT endpoint, count(*) AS n FROM judge_calls WHERE reply IS NOT NULL "
                                "GROUP BY endpoint ORDER BY endpoint")
        assert dict(calls.values.tolist()) == {url_a: len(on_a), url_b: len(on_b)}
        stats = json.loads(store.query(db, "SELECT stats FROM runs WHERE run_id = 'r'")["stats"].iloc[0])
        assert stats["endpoints"] == {url_a: len(on_a), url_b: len(on_b)}

        # Another run of the same items with replica B alone: every answer comes from the cache, A's too.
        code = cli.main(["evaluate", str(data), "--db", str(db), "--run", "again", "--judge", JUDGE,
                         "--api-base", url_b, "--quiet"])
        assert code == 0 and answered(logs[1]) == on_b


def test_a_large_run_sends_its_calls_from_worker_processes_by_default(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """100 items at 32 in flight without --client-processes, on a 2-core machine: the calls go out from
    the two worker processes that are then the default, every item is scored and no call is made twice."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    log, db = tmp_path / "calls.log", tmp_path / "pool.duckdb"
    data = write_jsonl(tmp_path / "items.jsonl", items(cli_evaluate.POOL_ITEMS))
    with OpenAIServer(latency=0.02, log=log) as server:
        args = ["evaluate", str(data), "--db", str(db), "--run", "pool", "--judge", JUDGE,
                "--api-base", server.base_url, "--concurrency", str(cli_evaluate.POOL_CONCURRENCY), "--quiet"]
        codes: list[int] = []
        worker = threading.Thread(target=lambda: codes.append(cli.main(args)))
        worker.start()
        clients: set[int | None] = set()
        while worker.is_alive():
            clients |= {p.pid for p in multiprocessing.active_children() if p.name == "judge-client"}
            time.sleep(0.01)
        worker.join()
    assert codes == [0] and len(clients) == 2
    digests = answered(log)
    assert len(digests) == len(set(digests)) > cli_evaluate.POOL_ITEMS, "a call was answered twice"
    assert queries.runs.count_items(db, "pool") == cli_evaluate.POOL_ITEMS
    statuses = store.query(db, "SELECT status, count(*) AS n FROM scores WHERE run_id = 'pool' GROUP BY status")
    assert statuses.values.tolist() == [["ok", cli_evaluate.POOL_ITEMS * 7]]
    stored = store.query(db, "SELECT count(*) AS n FROM judge_calls WHERE reply IS NOT NULL")["n"].iloc[0]
    assert stored == len(digests)


def test_a_hanging_replica_times_out_once_then_is_passed_over(tmp_path: Path) -> None:
    """The Router shuffles its replicas, so calls go one at a time until one has reached the hanging
    replica A (each call has even odds: 20 misses in a row is one chance in a million). That call times
    out and is answered by B; A then rests, and six more calls all go to B."""
    with OpenAIServer(hang_seconds=30) as a, OpenAIServer() as b:
        a.fail_when(lambda i, body: True, "hang")
        judge = LLMJudge(JUDGE, api_base=[a.base_url, b.base_url], api_key="x", timeout=1.0, concurrency=1)

        async def ask(k: str) -> Answer:
            return await judge.ask("groundedness", sources=SOURCES, claim=f"Claim hang {k}: sky is blue.")

        async def go() -> list[Answer]:
            first: list[Answer] = []
            while not a.requests and len(first) < 20:
                first.append(await ask(f"first {len(first)}"))
            assert len(a.requests) == 1, "20 calls in a row went to B"
            return first + list(await asyncio.gather(*(ask(str(k)) for k in range(6))))

        answers = asyncio.run(go())
        assert [x.status for x in answers] == [Status.OK] * len(answers)
        assert len(a.requests) == 1 and len(b.requests) == len(answers)  # A rests after its timeout
        assert judge.stats.endpoints == {b.base_url: len(answers)} and judge.stats.failures == 0


def test_calls_are_spread_over_live_replicas(tmp_path: Path) -> None:
    with OpenAIServer(latency=0.05) as a, OpenAIServer(latency=0.05) as b:
        judge = LLMJudge(JUDGE, api_base=[a.base_url, b.base_url], api_key="x", concurrency=8)
        answers = ask_all(judge, 40, "spread")
        assert all(x.status is Status.OK for x in answers)
        assert len(a.requests) + len(b.requests) == 40 and min(len(a.requests), len(b.requests)) >= 10


def test_when_every_replica_fails_the_call_fails_visibly(tmp_path: Path) -> None:
    recorded: list[JudgeCall] = []
    with OpenAIServer() as a, OpenAIServer() as b:
        a.fail_when(lambda i, body: True, "500")
        b.fail_when(lambda i, body: True, "503")
        judge = LLMJudge(JUDGE, api_base=[a.base_url, b.base_url], api_key="x", max_attempts=2,
                         on_call=recorded.append)
        [answer] = ask_all(judge, 1, "dead")
        assert answer.status is Status.ERROR and answer.value is None
        assert "after 2 attempts" in answer.detail
        # The Router tried both replicas (a failed one rests unless its 503 says to come back at once).
        assert a.requests and b.requests and len(a.requests) + len(b.requests) >= 3
        assert recorded[0].reply is None and recorded[0].endpoint in (a.base_url, b.base_url)


def test_the_endpoint_migration_adds_the_endpoint_to_stored_calls(tmp_path: Path) -> None:
    """A version-7 database upgrades: its calls keep answering from the cache, with no endpoint."""
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version, sql in enumerate(store.MIGRATIONS[:7], start=1):
            con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (?)", [version])
        con.execute("""INSERT INTO judge_calls VALUES ('k', 'm', 'p', 'h', '[]', '{}', '<output>1</output>', 'ok',
                       1, 1, NULL, 5.0, '', now())""")
    assert store.migrate(path) == len(store.MIGRATIONS) >= 8
    assert store.query(path, "SELECT endpoint FROM judge_calls")["endpoint"].isna().tolist() == [True]
    assert queries.runs.load_cache(path, "m")["k"].reply == "<output>1</output>"
    writes.write_batch(path, "r", calls=[JudgeCall("k2", "m", "p", "h", [], {}, "<output>0</output>", Status.OK,
                                                  endpoint="http://replica-b/v1")])
    rows = store.query(path, "SELECT key, endpoint FROM judge_calls ORDER BY key").values.tolist()
    assert rows[0][0] == "k" and rows[1] == ["k2", "http://replica-b/v1"]


def test_the_item_page_shows_the_endpoint_that_answered(db: Path) -> None:
    from test_pages import open_expander, open_page

    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE judge_calls SET endpoint = 'http://replica-b:8000/v1'")
    at = open_page("pages/2_Item.py", run="llm-judge", item="q01", tab="Response")
    exp = open_expander(at, "RP · claim 1")
    shown = f"endpoint {markup.md('http://replica-b:8000/v1')}"  # escaped as every stored text the page shows
    assert any(shown in c.value and "latency" in c.value for c in exp.caption)


def test_the_item_page_never_shows_a_credential_an_endpoint_carries(db: Path) -> None:
    """A database written before endpoints were masked: the raw-exchange caption masks the URL itself."""
    from test_pages import open_expander, open_page

    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE judge_calls SET endpoint = 'http://bob:hunter2-pw@replica-b:8000/v1?api-key=SECRET-42'")
    at = open_page("pages/2_Item.py", run="llm-judge", item="q01", tab="Response")
    exp = open_expander(at, "RP · claim 1")
    captions = [c.value for c in exp.caption if "latency" in c.value]
    assert captions and all("hunter2" not in c and "SECRET-42" not in c for c in captions)
    assert any(markup.md("http://***@replica-b:8000/v1?api-key=***") in c for c in captions)


def test_a_long_lived_process_keeps_its_newest_routers_tracking_failures() -> None:
    """Each Router hooks its failure tracking into litellm's global callback lists (100 at most): a server
    that builds judges for many configurations must keep the newest one's tracking, or its replicas never rest."""
    import litellm

    from evaluators.judges import llm, routes

    for port in range(20000, 20130):  # more configurations than litellm's lists take
        config = routes.router_config(routes.from_flags(JUDGE, [f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port + 1}/v1"], None), [None, None], 5.0)
        router, _ = llm._router(config)
    hooked = [c for c in litellm._async_failure_callback if getattr(c, "__self__", None) is router]
    assert hooked, "the newest Router's failure tracking was not hooked into litellm"
    assert len(litellm._async_failure_callback) <= llm.ROUTERS_KEPT + 5
