"""The runner end to end, through litellm to the loopback OpenAI-protocol server, into DuckDB.

The command line's own tests are in test_cli.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai_server import OpenAIServer

from evaluators.core.records import Item, Status
from evaluators.runs import runner
from evaluators.storage import ownership, store

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


def test_resuming_with_other_options_is_refused(tmp_path: Path, openai_server: OpenAIServer) -> None:
    db = tmp_path / "e.duckdb"
    runner.evaluate(items(1), db, "r", JUDGE, api_base=openai_server.base_url, metrics=["gr"])
    with pytest.raises(ownership.RunConflict, match="already exists") as refused:
        runner.evaluate(items(1), db, "r", JUDGE, api_base=openai_server.base_url, metrics=["rp"])
    assert "--" not in str(refused.value)  # the engine speaks of runs; the CLI adds its flags


def test_finished_items_share_a_commit_and_an_answered_call_is_written_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline judge's items come one by one: each commit opens, checkpoints and closes the file, so they
    wait up to writer.ITEMS_GAP_S (1 s) for others; a paid answer is written at once."""
    import asyncio
    import time

    from evaluators.core.records import JudgeCall, Run
    from evaluators.metrics.thelma import ItemResult
    from evaluators.runs import writer as writer_mod

    db, data = tmp_path / "e.duckdb", items(10)
    commits: list[tuple[float, int, int]] = []
    real = ownership.write_results

    def counted(*args: object, **kwargs: list) -> None:
        commits.append((time.monotonic(), len(kwargs["items"]), len(kwargs["calls"])))
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ownership, "write_results", counted)
    owner = ownership.Owner.this_process()
    ownership.claim_run(db, Run("r", "offline", {}, {}), {i.id: i.content_hash() for i in data}, owner, 20.0)
    writer = writer_mod.Writer(db, "r", owner, 20.0, lambda: None)
    call = JudgeCall("k", JUDGE, "claims", "h", [], {}, "<output>1</output>", Status.OK)

    async def feed() -> float:
        loop = asyncio.create_task(writer.loop())
        writer.add_item(data[0], ItemResult([], [], []))
        while not commits:
            await asyncio.sleep(0.01)
        sent = time.monotonic()  # within the items' gap after that commit
        writer.add_call(call)
        while not any(n_calls for _, _, n_calls in commits):
            await asyncio.sleep(0.01)
        for item in data[1:]:  # nine items over half a second
            writer.add_item(item, ItemResult([], [], []))
            await asyncio.sleep(0.06)
        writer.close()
        await loop
        return sent

    sent = asyncio.run(feed())
    called = next(k for k, (_, _, n) in enumerate(commits) if n)
    assert commits[called][0] - sent < 0.5  # the call did not wait out the gap (about 0.9 s more)
    later = [n for _, n, _ in commits[called + 1:] if n]
    assert sum(later) == 9 and len(later) <= 2, commits  # not a commit per item
    assert stored_count(db, "items") == 10 and stored_count(db, "judge_calls") == 1


def stored_count(db: Path, table: str) -> int:
    return int(store.query(db, f"SELECT count(*) AS n FROM {table}")["n"].iloc[0])
