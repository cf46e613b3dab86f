"""The command line as its users drive it: `python -m evaluators ...` in a subprocess.

These tests import nothing from the engine. They check only the CLI contract (commands, flags,
stdout/stderr, exit codes) and the DuckDB rows a command leaves behind, read with duckdb
directly, so they hold whatever the engine's modules are called.

Exit codes (evaluators/cli.py): 0 done; 2 bad input or options, one line per problem and no
traceback; 3 the judge refused or the run could not finish; 4 the database is busy; 130 interrupted.
"""
from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from openai_server import OpenAIServer, identify

ROOT = Path(__file__).resolve().parents[1]
JUDGE = "openai/test-judge"
# Every metric that asks a judge: SD is left out where the judge is what matters, because it
# loads the embedding model and asks no judge.
JUDGED = "sp1,sp2,sqc,rp,rqc,gr"
THELMA = ["sp1", "sp2", "sqc", "rp", "rqc", "sd", "gr"]
SD_DEFAULT = 0.78  # --sd-threshold's default
TABLE2_RULES = {"T2.1", "T2.2", "T2.3", "T2.4", "T2.5", "T2.6"}

# The Makefile's offline environment, plus the key litellm's openai provider wants (any value).
ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_MODE": "PRODUCTION",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OPENAI_API_KEY": "x",
}

# Three triplets the scripted judge (word overlap, see openai_server.format_aware) reads as:
# answered and grounded; answered in part; and a query the sources and response never touch
# (SQC and RQC low: Table 2's rule T2.2).
ITEMS: list[dict[str, Any]] = [
    {"id": "refund", "query": "How long is the refund window?",
     "sources": ["Refunds are accepted within 30 days of purchase.", "Our offices close on public holidays."],
     "response": "The refund window is 30 days. You can return items for a month. Offices close on holidays."},
    {"id": "store", "query": "When does the store open? Is parking free?",
     "sources": ["The store opens at 9 am on weekdays.", "Parking costs two dollars per hour."],
     "response": "The store opens at 9 am on weekdays. Parking is free on Sundays."},
    {"id": "peru", "query": "What is the capital of Peru?",
     "sources": ["Refunds are accepted within 30 days of purchase.", "The store opens at 9 am on weekdays."],
     "response": "Refunds take a week to arrive."},
]


def variant(row: dict[str, Any], k: int) -> dict[str, Any]:
    """Case k of a triplet: every text differs, so no judge request is shared with another case."""
    if k == 0:
        return row
    return {"id": f"{row['id']}-{k}", "query": f"{row['query']} (case {k})",
            "sources": [f"{s} Record {k}." for s in row["sources"]], "response": f"{row['response']} Case {k}."}


def write_items(path: Path, n: int = len(ITEMS)) -> Path:
    """A JSONL input of n distinct triplets: the three above, then their cases 1, 2, ..."""
    rows = [variant(row, k) for k in range(math.ceil(n / len(ITEMS))) for row in ITEMS][:n]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `python -m evaluators ARGS` from the repository root, as a user does."""
    return subprocess.run([sys.executable, "-m", "evaluators", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """Rows of a query against the CLI's database, opened read-only as a second reader would."""
    con = duckdb.connect(str(db), read_only=True,
                         config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def scores(db: Path, run: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    """(item, metric) -> (value, n_scored, n_total, status) of a stored run."""
    return {(item, metric): rest for item, metric, *rest in rows(
        db, "SELECT item_id, metric, value, n_scored, n_total, status FROM scores WHERE run_id = ?", [run])}


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """Assert the CLI failed with `code` and a single stderr line and no traceback; return that line."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, len(lines)) == (code, 1), (result.returncode, result.stderr)
    return lines[0]


def prompt_names(server: OpenAIServer) -> set[str]:
    """The prompt files the judge was asked, by name."""
    return {(identify(r["messages"][0]["content"]) or ("?",))[0] for r in server.requests}


# ---------------------------------------------------------------- a scripted judge's runs

@dataclass(frozen=True)
class Scripted:
    """One database with the same input evaluated batched and per component by the scripted judge."""

    db: Path
    prompts: dict[str, set[str]]  # run name -> prompt files its judge calls used
    outputs: dict[str, str]       # run name -> the command's stdout


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Scripted:
    """Runs "batched" and then "per-component" of the three triplets, judged by the loopback server."""
    tmp = tmp_path_factory.mktemp("scripted")
    data, db = write_items(tmp / "in.jsonl"), tmp / "e.duckdb"
    prompts, outputs = {}, {}
    with OpenAIServer() as server:
        for run, extra in (("batched", []), ("per-component", ["--per-component"])):
            server.reset()
            result = cli("evaluate", str(data), "--db", str(db), "--run", run, "--judge", JUDGE,
                         "--api-base", server.base_url, "--metrics", JUDGED, "--quiet", *extra)
            assert result.returncode == 0, result.stderr
            prompts[run], outputs[run] = prompt_names(server), result.stdout
        assert not server.errors, server.errors
    return Scripted(db, prompts, outputs)


def test_batched_and_per_component_modes_give_the_same_scores(scripted: Scripted) -> None:
    batched, per_component = scores(scripted.db, "batched"), scores(scripted.db, "per-component")
    assert len(batched) == len(ITEMS) * len(JUDGED.split(","))
    assert batched == per_component
    assert {status for *_, status in batched.values()} == {"ok"}
    # The modes really differ in what they ask: one call per list, or one per component.
    assert "groundedness_batch" in scripted.prompts["batched"]
    assert "groundedness" not in scripted.prompts["batched"]
    assert "groundedness" in scripted.prompts["per-component"]
    assert not {p for p in scripted.prompts["per-component"] if p.endswith("_batch")}
    stored = dict(rows(scripted.db, "SELECT run_id, params FROM runs"))
    assert json.loads(stored["batched"])["per_component"] is False
    assert json.loads(stored["per-component"])["per_component"] is True
    # The summary says how much of each metric was scored.
    assert scripted.outputs["batched"].startswith(f"run batched: {len(ITEMS)} items")
    assert f"gr                     scored {len(ITEMS)} of {len(ITEMS)}" in scripted.outputs["batched"]


def test_runs_lists_names_judges_statuses_and_item_counts(scripted: Scripted) -> None:
    result = cli("runs", "--db", str(scripted.db))
    assert result.returncode == 0, result.stderr
    listed = [line.split("\t") for line in result.stdout.strip().splitlines()]
    # Newest first: run, judge, status, done/total items, creation time.
    assert [fields[:4] for fields in listed] == [
        ["per-component", JUDGE, "finished", f"{len(ITEMS)}/{len(ITEMS)} items"],
        ["batched", JUDGE, "finished", f"{len(ITEMS)}/{len(ITEMS)} items"],
    ]
    for fields in listed:
        assert len(fields) == 5
        time.strptime(fields[4], "%Y-%m-%d %H:%M")  # raises on another format


def test_export_writes_one_row_per_item_with_every_metric(scripted: Scripted, tmp_path: Path) -> None:
    out = tmp_path / "export.csv"
    result = cli("export", "--db", str(scripted.db), "--run", "batched", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote {len(ITEMS)} items to {out}"
    exported = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(exported[0]) == ["item_id", *THELMA, "n_failed"]
    assert sorted(r["item_id"] for r in exported) == sorted(i["id"] for i in ITEMS)
    stored = scores(scripted.db, "batched")
    for row in exported:
        assert row["sd"] == "" and row["n_failed"] == "0"  # SD was not asked for: blank, not 0
        for metric in JUDGED.split(","):
            assert float(row[metric]) == pytest.approx(stored[(row["item_id"], metric)][0])


def test_diagnose_writes_the_fired_table2_rules(scripted: Scripted, tmp_path: Path) -> None:
    out = tmp_path / "diagnosis.csv"
    result = cli("diagnose", "--db", str(scripted.db), "--run", "batched", "--out", str(out))
    assert result.returncode == 0, result.stderr
    fired = list(csv.DictReader(out.open(encoding="utf-8")))
    assert result.stdout.strip() == f"wrote {len(fired)} fired rules for {len(ITEMS)} items to {out}"
    assert {r["rule"] for r in fired} <= TABLE2_RULES and all(r["components"] for r in fired)
    # Neither the sources nor the response touch the Peru query: bad retrieval (T2.2).
    assert {"item_id": "peru", "rule": "T2.2", "components": "Retriever or Source text"} in fired
    # With every threshold at 0 no score is low, so no rule fires.
    result = cli("diagnose", "--db", str(scripted.db), "--run", "batched", "--out", str(out),
                 "--thresholds", ",".join(f"{m}=0" for m in THELMA))
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8").splitlines() == ["item_id,rule,components"]


def test_export_to_a_missing_directory_is_a_one_line_error(scripted: Scripted, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "dir" / "export.csv"
    result = cli("export", "--db", str(scripted.db), "--run", "batched", "--out", str(out))
    assert str(out) in one_line_error(result)


# ---------------------------------------------------------------- options the CLI refuses

def test_concurrency_zero_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "e.duckdb"
    result = cli("evaluate", str(write_items(tmp_path / "in.jsonl")), "--db", str(db), "--run", "r",
                 "--concurrency", "0")
    assert "--concurrency" in one_line_error(result)
    assert result.stdout == "" and not db.exists()


def test_unknown_metrics_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    db = tmp_path / "e.duckdb"
    result = cli("evaluate", str(write_items(tmp_path / "in.jsonl")), "--db", str(db), "--run", "r",
                 "--metrics", "sp1,nope,gr")
    line = one_line_error(result)
    assert "nope" in line and "unknown" in line
    assert not db.exists()


def test_out_of_range_sd_threshold_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "e.duckdb"
    result = cli("evaluate", str(write_items(tmp_path / "in.jsonl", 1)), "--db", str(db), "--run", "r",
                 "--metrics", "sd", "--sd-threshold", "1.5", "--quiet")
    assert "--sd-threshold" in one_line_error(result)  # a cosine threshold lies in [-1, 1]
    assert not db.exists()


def test_database_in_a_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "no" / "such" / "dir" / "e.duckdb"
    result = cli("evaluate", str(write_items(tmp_path / "in.jsonl", 1)), "--db", str(db), "--run", "r",
                 "--metrics", "gr", "--quiet")
    assert str(db) in one_line_error(result)


def test_runs_on_a_database_without_runs_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    duckdb.connect(str(db)).close()  # a DuckDB file, but not one the engine wrote
    assert str(db) in one_line_error(cli("runs", "--db", str(db)))


# ---------------------------------------------------------------- SD's threshold

def test_sd_threshold_changes_the_stored_verdicts(tmp_path: Path) -> None:
    db = tmp_path / "e.duckdb"
    result = cli("evaluate", str(write_items(tmp_path / "in.jsonl", 2)), "--db", str(db), "--run", "r",
                 "--metrics", "sd", "--sd-threshold", "0.5", "--quiet")
    assert result.returncode == 0, result.stderr
    verdicts = rows(db, "SELECT item_id, value, evidence, detail FROM verdicts "
                        "WHERE run_id = 'r' AND metric = 'sd'")
    assert len(verdicts) == 5  # one per response sentence
    # A sentence repeats (0) when its cosine to another one (the evidence) reaches the threshold.
    assert all(value == float(cosine < 0.5) and detail.endswith("vs threshold 0.50")
               for _, value, cosine, detail in verdicts)
    # The refund response paraphrases itself: the default threshold would have kept it distinct.
    assert any(0.5 <= cosine < SD_DEFAULT for item, _, cosine, _ in verdicts if item == "refund")
    # SD is the share of distinct sentences.
    for (item, _), (value, *_) in scores(db, "r").items():
        mine = [v for i, v, _, _ in verdicts if i == item]
        assert value == pytest.approx(sum(mine) / len(mine))
    assert scores(db, "r")[("refund", "sd")][0] < 1.0
    assert json.loads(rows(db, "SELECT params FROM runs WHERE run_id = 'r'")[0][0])["sd_threshold"] == 0.5


# ---------------------------------------------------------------- a busy database, an interrupt

def test_database_held_by_another_writer_exits_4(tmp_path: Path) -> None:
    db = tmp_path / "e.duckdb"
    code = ("import sys, time, duckdb\ncon = duckdb.connect(sys.argv[1])\n"
            "print('locked', flush=True)\ntime.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        line = one_line_error(cli("runs", "--db", str(db)), 4)  # gives up after the store's 10 s deadline
        assert str(db) in line and "busy" in line
    finally:
        holder.terminate()
        holder.wait(timeout=20)


def test_interrupt_exits_130_and_the_run_resumes(tmp_path: Path, openai_server: OpenAIServer) -> None:
    data, db = write_items(tmp_path / "in.jsonl", 4), tmp_path / "e.duckdb"
    # GR asks two calls per item (claims, then groundedness). With --concurrency 1 the CLI works on
    # two items at a time, one call in flight: the fifth call is sent once the fourth is answered,
    # when the first two items are finished, and it hangs.
    openai_server.fail_when(lambda index, body: index >= 4, "hang")
    cmd = [sys.executable, "-m", "evaluators", "evaluate", str(data), "--db", str(db), "--run", "r",
           "--judge", JUDGE, "--api-base", openai_server.base_url, "--metrics", "gr", "--concurrency", "1",
           "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(openai_server.requests) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(openai_server.requests) >= 5, "the run never reached the hanging judge"
        answered = {json.dumps(r, sort_keys=True) for r in openai_server.requests[:4]}
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    interrupted = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    assert "interrupted" in one_line_error(interrupted, 130)
    listed = [line.split("\t")[:4] for line in cli("runs", "--db", str(db)).stdout.splitlines()]
    assert listed == [["r", JUDGE, "failed", "2/4 items"]]

    # The same command continues: only the two unfinished items are judged.
    openai_server.reset()
    resumed = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert not answered & {json.dumps(r, sort_keys=True) for r in openai_server.requests}
    assert len(openai_server.requests) == 4
    assert rows(db, "SELECT status, n_items FROM runs WHERE run_id = 'r'") == [("finished", 4)]
    assert {status for *_, status in scores(db, "r").values()} == {"ok"} and len(scores(db, "r")) == 4
