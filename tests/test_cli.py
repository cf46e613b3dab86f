"""The command line as its users drive it: `python -m evaluators ...` in a subprocess, or its main().

These tests import nothing from the engine but the CLI's entry point. They check only the CLI
contract (commands, flags, stdout/stderr, exit codes) and the DuckDB rows a command leaves behind,
read with duckdb directly, so they hold whatever the engine's modules are called.

Exit codes (evaluators/cli/): 0 done; 2 bad input or options, one line per problem and no
traceback; 3 the judge refused or the run could not finish; 4 the database is busy; 130 interrupted.
"""
from __future__ import annotations

import csv
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest
from openai_server import OpenAIServer, identify

from evaluators.cli import main
from evaluators.cli.evaluate import client_processes
from evaluators.core.confidence import is_unsure
from evaluators.core.records import CALIBRATED

ROOT = Path(__file__).resolve().parents[1]
JUDGE = "openai/test-judge"
# Every metric that asks a judge: SD is left out where the judge is what matters, because it
# loads the embedding model and asks no judge.
JUDGED = "sp1,sp2,sqc,rp,rqc,gr"
THELMA = ["sp1", "sp2", "sqc", "rp", "rqc", "sd", "gr"]
SD_DEFAULT = 0.78  # --sd-threshold's default
TABLE2_RULES = {"T2.1", "T2.2", "T2.3", "T2.4", "T2.5", "T2.6", "X1"}

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


def test_large_runs_send_their_calls_from_two_processes_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert client_processes(None, 32, 100) == 2
    assert client_processes(None, 31, 10_000) == 1  # few calls in flight: one event loop keeps up
    assert client_processes(None, 64, 99) == 1  # a small run: the workers' start-up would cost more
    assert client_processes(1, 64, 10_000) == 1 and client_processes(3, 8, 1) == 3  # as asked
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert client_processes(None, 64, 10_000) == 1  # one core: worker processes only take turns


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
    assert {"item_id": "peru", "rule": "T2.2", "components": "Retriever or Source text",
            "origin": "THELMA Table 2"} in fired
    # With every threshold at 0 no score is low, so no rule fires.
    result = cli("diagnose", "--db", str(scripted.db), "--run", "batched", "--out", str(out),
                 "--thresholds", ",".join(f"{m}=0" for m in THELMA))
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8").splitlines() == ["item_id,rule,components,origin"]


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


# Each command with good arguments; a case below gives one of its options a bad value. {db} is a RAG
# Triage database with the run "batched", {new} a database file not made yet, {in} a JSONL input.
COMMANDS: dict[str, list[str]] = {
    "evaluate": ["evaluate", "{in}", "--db", "{new}", "--run", "r", "--metrics", "gr", "--quiet"],
    "export": ["export", "--db", "{db}", "--run", "batched", "--out", "{out}"],
    "diagnose": ["diagnose", "--db", "{db}", "--run", "batched", "--out", "{out}"],
    "runs": ["runs", "--db", "{db}"],
    "delete-run": ["delete-run", "--db", "{db}", "--run", "batched"],
    "grammar-generate": ["grammar-generate", "--out", "{out}", "--max-groups", "1"],
    "grammar-run": ["grammar-run", "{in}", "--db", "{new}", "--run", "g"],
    "grammar-eval": ["grammar-eval", "--db", "{db}", "--run", "batched", "--no-judge"],
    "grammar-demo": ["grammar-demo", "--db", "{new}", "--max-groups", "1"],
}

# Bad paths by kind (made by the bad_paths fixture), with what the one error line says of each.
PATH_KINDS = {
    "@missing folder": "no such folder",
    "@missing file": "no such",
    "@folder": "is a folder",
    "@text file": "not a DuckDB database file",
    "@empty file": "not a DuckDB database file",
    "@JSONL file": "not a DuckDB database file",
    "@SQLite file": "not a DuckDB database file (a SQLite file)",
    "@foreign DuckDB file": "not a RAG Triage database",
    "@empty DuckDB file": "not a RAG Triage database",
}
DB_KINDS = ["@folder", "@text file", "@empty file", "@JSONL file", "@SQLite file", "@foreign DuckDB file"]
READ_DB = [*DB_KINDS, "@missing file", "@empty DuckDB file"]
WRITE_DB = [*DB_KINDS, "@missing folder"]
NUMBERS = {
    "--concurrency": ["0", "-3", "1.5", "many"],
    "--timeout": ["-1", "0", "inf", "nan", "soon"],
    "--rate-limit-patience": ["0", "-1", "inf", "nan"],
    "--sd-threshold": ["nan", "1.5", "-1.01", "inf", "-inf"],
}
BAD: list[tuple[str, str, str]] = [
    *(("evaluate", option, value) for option, values in NUMBERS.items() for value in values),
    *(("evaluate", "--db", kind) for kind in WRITE_DB),
    ("evaluate", "input", "@folder"), ("evaluate", "input", "@missing file"),
    *((command, "--db", kind) for command in ("export", "diagnose", "runs", "delete-run") for kind in READ_DB),
    *((command, "--out", kind) for command in ("export", "diagnose") for kind in ("@missing folder", "@folder")),
    ("diagnose", "--thresholds", "gr=nan"), ("diagnose", "--thresholds", "gr=1.5"),
    ("diagnose", "--thresholds", "nope=0.5"),
    ("export", "--band", "0.7,0.3"), ("export", "--band", "nan,nan"), ("diagnose", "--band", "0.5"),
    ("diagnose", "--band", "low,high"),
    ("grammar-generate", "--source", "@text file"), ("grammar-generate", "--source", "@JSONL file"),
    ("grammar-generate", "--source", "@folder"), ("grammar-generate", "--source", "@missing file"),
    ("grammar-generate", "--templates", "@missing file"), ("grammar-generate", "--templates", "@folder"),
    ("grammar-generate", "--out", "@missing folder"), ("grammar-generate", "--save-templates", "@folder"),
    ("grammar-generate", "--text-variants", "0"), ("grammar-generate", "--per-group", "0"),
    ("grammar-generate", "--max-groups", "-1"), ("grammar-generate", "--seed", "1.5"),
    ("grammar-run", "testset", "@missing file"), ("grammar-run", "--corpus", "@folder"),
    ("grammar-run", "--top-k", "0"), ("grammar-run", "--concurrency", "0"),
    *(("grammar-run", "--db", kind) for kind in WRITE_DB),
    *(("grammar-eval", "--db", kind) for kind in READ_DB),
    ("grammar-eval", "--concurrency", "0"),
    *(("grammar-demo", "--db", kind) for kind in WRITE_DB), ("grammar-demo", "--max-groups", "0"),
]


@pytest.fixture
def bad_paths(tmp_path: Path) -> dict[str, Path]:
    """One path of every bad kind, under tmp_path/bad."""
    root = tmp_path / "bad"
    root.mkdir()
    made = {"@missing folder": root / "no" / "such" / "e.duckdb", "@missing file": root / "none.duckdb",
            "@folder": root / "folder", "@text file": root / "notes.duckdb", "@empty file": root / "empty.duckdb",
            "@JSONL file": write_items(root / "items.jsonl", 1), "@SQLite file": root / "sqlite.db",
            "@foreign DuckDB file": root / "foreign.duckdb", "@empty DuckDB file": root / "blank.duckdb"}
    made["@folder"].mkdir()
    made["@text file"].write_text("run_id,judge\nr,offline\n", encoding="utf-8")
    made["@empty file"].touch()
    lite = sqlite3.connect(made["@SQLite file"])
    lite.execute("CREATE TABLE runs (run_id TEXT)")  # even a runs table: still not DuckDB's
    lite.commit()
    lite.close()
    foreign = duckdb.connect(str(made["@foreign DuckDB file"]))
    foreign.execute("CREATE TABLE orders (id INTEGER)")
    foreign.close()
    duckdb.connect(str(made["@empty DuckDB file"])).close()
    return made


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its size and modification time."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


# The door: a run name that does not show as itself, an endpoint that is no http(s) URL, and more calls in
# flight than a machine holds (10,000,000 reached 4.9 GB in 40 s) are refused like a bad path.
DOOR: list[tuple[str, str, str]] = [
    ("evaluate", "--concurrency", "10000000"), ("evaluate", "--concurrency", "1025"),
    ("evaluate", "--run", ""), ("evaluate", "--run", "weak_retriever\u200b"), ("evaluate", "--run", "tab\there"),
    ("evaluate", "--run", " padded"), ("evaluate", "--run", "line\nbreak"), ("evaluate", "--run", "bom\ufeff"),
    ("evaluate", "--api-base", "file:///etc/passwd"), ("evaluate", "--api-base", "not a url"),
    ("evaluate", "--api-base", "http://"), ("evaluate", "--api-base", "ftp://host/v1"),
    ("evaluate", "--api-base", "http://host:port/v1"), ("evaluate", "--key-env", "sk-live-0123456789"),
    ("grammar-run", "--run", "g\u200b"), ("grammar-run", "--concurrency", "2000"),
    ("grammar-run", "--api-base", "file:///etc/passwd"), ("grammar-eval", "--api-base", "not a url"),
    ("grammar-eval", "--concurrency", "1025"), ("grammar-generate", "--api-base", "file:///x"),
]


@pytest.mark.parametrize(("command", "option", "value"), BAD, ids=[" ".join(case) for case in BAD])
def test_every_path_and_number_option_is_checked_before_any_work(
        command: str, option: str, value: str, scripted: Scripted, bad_paths: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    refused_before_any_work(command, option, value, scripted, bad_paths, tmp_path, capsys)


@pytest.mark.parametrize(("command", "option", "value"), DOOR, ids=[" ".join(map(repr, case)) for case in DOOR])
def test_run_names_endpoints_and_concurrency_are_checked_at_the_door(
        command: str, option: str, value: str, scripted: Scripted, bad_paths: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    refused_before_any_work(command, option, value, scripted, bad_paths, tmp_path, capsys)


def refused_before_any_work(command: str, option: str, value: str, scripted: Scripted, bad_paths: dict[str, Path],
                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`command` with `option` set to `value` exits 2 with one line naming the option, and writes nothing."""
    good = {"{db}": str(scripted.db), "{new}": str(tmp_path / "new.duckdb"), "{out}": str(tmp_path / "out.csv"),
            "{in}": str(write_items(tmp_path / "in.jsonl", 1))}
    args = [good.get(a, a) for a in COMMANDS[command]]
    bad = str(bad_paths[value]) if value.startswith("@") else value
    if option.startswith("--"):
        args = args[:args.index(option)] + args[args.index(option) + 2:] if option in args else args
        args += [option, bad]
    else:  # the positional input, right after the command
        args[1] = bad
    before, scripted_before = files(tmp_path), files(scripted.db.parent)
    code = main(args)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert (code, len(lines), captured.out) == (2, 1, ""), (code, captured.err)
    assert lines[0].startswith(f"error: {option}")  # the option is named first
    if value.startswith("@"):
        assert PATH_KINDS[value] in lines[0] and str(bad_paths[value]) in lines[0]
    assert files(tmp_path) == before and files(scripted.db.parent) == scripted_before  # nothing written


def test_bad_options_are_one_line_from_the_command_line_too(tmp_path: Path) -> None:
    """The same checks as a user meets them: one line on stderr, exit 2, no database file."""
    db = tmp_path / "e.duckdb"
    for option, value in (("--timeout", "nan"), ("--sd-threshold", "nan"), ("--rate-limit-patience", "inf")):
        result = cli("evaluate", str(write_items(tmp_path / "in.jsonl", 1)), "--db", str(db), "--run", "r",
                     "--metrics", "sd", option, value, "--quiet")
        assert option in one_line_error(result)
        assert result.stdout == "" and not db.exists()
    (tmp_path / "text.duckdb").write_text("not a database\n", encoding="utf-8")
    assert "not a DuckDB database file" in one_line_error(cli("runs", "--db", str(tmp_path / "text.duckdb")))
    assert "is a folder" in one_line_error(cli("runs", "--db", str(tmp_path)))


# ---------------------------------------------------------------- SD's threshold

def test_sd_threshold_changes_the_stored_verdicts(tmp_path: Path) -> None:
    db = tmp_path / "e.duckdb"
    result = cli("evaluate", str(write_items(tmp_path / "in.jsonl", 2)), "--db", str(db), "--run", "r",
                 "--metrics", "sd", "--sd-threshold", "0.5", "--quiet")
    assert result.returncode == 0, result.stderr
    verdicts = rows(db, "SELECT item_id, value, evidence, detail, p FROM verdicts "
                        "WHERE run_id = 'r' AND metric = 'sd'")
    assert len(verdicts) == 5  # one per response sentence
    # A sentence repeats (0) when its cosine to another one (the evidence) reaches the threshold.
    assert all(value == float(cosine < 0.5) and detail.endswith("vs threshold 0.50")
               for _, value, cosine, detail, _ in verdicts)
    # The refund response paraphrases itself: the default threshold would have kept it distinct.
    assert any(0.5 <= cosine < SD_DEFAULT and value == 0 for item, value, cosine, _, _ in verdicts if item == "refund")
    # SD is the share of distinct sentences among those the judge is sure of: the calibration, fitted at the
    # default threshold, is unsure of a repeat this far below it.
    for (item, _), (value, n_scored, *_) in scores(db, "r").items():
        mine = [v for i, v, _, _, p in verdicts if i == item and not is_unsure(p, CALIBRATED)]
        assert n_scored == len(mine)
        assert value == (pytest.approx(sum(mine) / len(mine)) if mine else None)
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



@pytest.fixture(scope="module")
def held_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A database with two offline runs, held open for writing by another process for the module."""
    tmp = tmp_path_factory.mktemp("held")
    data, db = write_items(tmp / "in.jsonl", 3), tmp / "e.duckdb"
    for run in ("a", "b"):
        done = cli("evaluate", str(data), "--db", str(db), "--run", run, "--metrics", "sp1,gr", "--quiet")
        assert done.returncode == 0, done.stderr
    code = ("import sys, time, duckdb\ncon = duckdb.connect(sys.argv[1])\n"
            "print('locked', flush=True)\ntime.sleep(300)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield db
    finally:
        holder.terminate()
        holder.wait(timeout=20)


@pytest.mark.parametrize("command", [
    ["gate", "--baseline", "a", "--candidate", "b"],
    ["ledger", "--run", "a", "--out", "{out}"],
    ["export-suite", "--run", "a", "--out", "{out}"],
    ["export-run", "--run", "a", "--out", "{out}"],
])
def test_daily_loop_commands_on_a_busy_database_exit_4(held_db: Path, tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "out.file"
    args = [a.format(out=out) for a in command]
    line = one_line_error(cli(args[0], "--db", str(held_db), *args[1:]), 4)
    assert str(held_db) in line and "busy" in line
    assert not out.exists()  # nothing half-written

def test_interrupt_exits_130_and_the_run_resumes(tmp_path: Path, openai_server: OpenAIServer) -> None:
    data, db = write_items(tmp_path / "in.jsonl", 4), tmp_path / "e.duckdb"
    # GR asks two calls per item (claims, then groundedness). With --concurrency 1 the CLI works on
    # two items at a time, one call in flight: the fifth call is sent once the fourth is answered,
    # when the first two items are finished, and it hangs.
    openai_server.fail_when(lambda index, body: index >= 4, "hang")
    cmd = [sys.executable, "-m", "evaluators", "evaluate", str(data), "--db", str(db), "--run", "r",
           "--judge", JUDGE, "--api-base", openai_server.base_url, "--metrics", "gr", "--concurrency", "1"]
    # Ctrl-C as a terminal sends it: with SIGINT's default action, whatever the test runner's own is (a
    # background job of a non-interactive shell ignores SIGINT, and a child would inherit that).
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        # The fifth call can go out a moment before the second item is finished: wait for its progress
        # line too (the CLI prints one per item finished), so the interrupt comes with two items done.
        deadline = time.monotonic() + 60
        while not (len(openai_server.requests) >= 5 and any(line.startswith("items 2/4") for line in err_lines)):
            assert time.monotonic() < deadline, ("the run never reached the hanging judge", err_lines)
            time.sleep(0.05)
        answered = {json.dumps(r, sort_keys=True) for r in openai_server.requests[:4]}
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Progress lines, then one line that says what happened.
    said = [line for line in err_lines if not line.startswith("items ")]
    interrupted = subprocess.CompletedProcess(cmd, proc.returncode, "", "".join(said))
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


# ---------------------------------------------------------------- in process: main()

@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # litellm's openai provider wants some key


def test_killed_run_resumes_without_repeating_calls(tmp_path: Path, openai_server: OpenAIServer, key: None) -> None:
    data = write_items(tmp_path / "in.jsonl", 6)
    db = tmp_path / "e.duckdb"
    # Answer the first 20 requests, then hang: the run is killed mid-flight.
    openai_server.fail_when(lambda index, body: index >= 20, "hang")
    cmd = [sys.executable, "-m", "evaluators", "evaluate", str(data), "--db", str(db), "--run", "r",
           "--judge", JUDGE, "--api-base", openai_server.base_url, "--concurrency", "4", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the 20 answered calls are stored
        # Read the file only once 20 calls are answered: each read holds the run's writes off a moment.
        try:
            if len(openai_server.requests) >= 20 and rows(db, "SELECT count(*) FROM judge_calls")[0][0] >= 20:
                break
        except duckdb.Error:  # the run holds the file
            pass
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    answered = [json.dumps(r, sort_keys=True) for r in openai_server.requests[:20]]
    assert rows(db, "SELECT count(*) FROM items WHERE run_id = 'r'")[0][0] < 6

    openai_server.reset()
    assert main(cmd[3:]) == 0
    again = [json.dumps(r, sort_keys=True) for r in openai_server.requests]
    assert not set(again) & set(answered), "a call answered before the kill was made again"

    clean = tmp_path / "clean.duckdb"
    assert main(["evaluate", str(data), "--db", str(clean), "--run", "r", "--judge", JUDGE,
                 "--api-base", openai_server.base_url, "--quiet"]) == 0
    assert scores(db, "r") == scores(clean, "r")


def test_refused_requests_stop_the_run_with_a_clear_message(tmp_path: Path, openai_server: OpenAIServer, key: None,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = write_items(tmp_path / "in.jsonl", 2)
    openai_server.fail_when(lambda i, body: True, "401")
    code = main(["evaluate", str(data), "--db", str(tmp_path / "e.duckdb"), "--run", "r",
                 "--judge", JUDGE, "--api-base", openai_server.base_url, "--quiet"])
    err = capsys.readouterr().err
    assert code == 3 and "refused the request" in err and "Traceback" not in err
    sent = [json.dumps(r, sort_keys=True) for r in openai_server.requests]
    assert len(sent) == len(set(sent)) <= 8  # only the first calls, already in flight; no retries
    assert rows(tmp_path / "e.duckdb", "SELECT status FROM runs")[0][0] == "failed"


def test_dry_run_counts_calls_and_calls_nothing(tmp_path: Path, openai_server: OpenAIServer, key: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = write_items(tmp_path / "in.jsonl", 2)
    db = tmp_path / "e.duckdb"
    args = ["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", JUDGE,
            "--api-base", openai_server.base_url]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert openai_server.requests == [] and not db.exists()
    planned = int(out.split("judge calls ")[1].split()[0])
    assert main([*args, "--quiet"]) == 0
    assert planned == len(openai_server.requests)  # batched counts are exact
    capsys.readouterr()
    assert main([*args, "--dry-run"]) == 0
    assert "0 items to evaluate" in capsys.readouterr().out


def test_export_and_diagnose_files(tmp_path: Path, openai_server: OpenAIServer, key: None) -> None:
    db = tmp_path / "e.duckdb"
    assert main(["evaluate", str(write_items(tmp_path / "in.jsonl", 2)), "--db", str(db), "--run", "r",
                 "--judge", JUDGE, "--api-base", openai_server.base_url, "--metrics", "sqc,rqc,gr", "--quiet"]) == 0
    assert main(["export", "--db", str(db), "--run", "r", "--out", str(tmp_path / "x.csv")]) == 0
    exported = list(csv.DictReader(open(tmp_path / "x.csv")))
    assert list(exported[0])[:8] == ["item_id", "sp1", "sp2", "sqc", "rp", "rqc", "sd", "gr"]
    assert exported[0]["sp1"] == "" and 0.0 <= float(exported[0]["gr"]) <= 1.0 and exported[0]["n_failed"] == "0"
    assert main(["diagnose", "--db", str(db), "--run", "r", "--out", str(tmp_path / "d.csv"),
                 "--thresholds", "gr=1.0"]) == 0
    header = open(tmp_path / "d.csv").readline().strip()
    assert header == "item_id,rule,components,origin"


def test_bad_input_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "query": "q", "sources": "not a list", "response": "r"}\n{oops\n')
    code = main(["evaluate", str(bad), "--db", str(tmp_path / "e.duckdb"), "--run", "r"])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}:1: field sources" in err and f"{bad}:2:" in err and "Traceback" not in err
    assert not (tmp_path / "e.duckdb").exists()


def test_unknown_run_and_missing_db_are_one_line_errors(scripted: Scripted, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert main(["export", "--db", str(scripted.db), "--run", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err


def test_the_cli_adds_its_flag_advice_to_a_run_conflict(tmp_path: Path, openai_server: OpenAIServer, key: None,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = write_items(tmp_path / "in.jsonl", 1)
    args = ["evaluate", str(data), "--db", str(tmp_path / "e.duckdb"), "--run", "r", "--judge", JUDGE,
            "--api-base", openai_server.base_url, "--quiet"]
    assert main([*args, "--metrics", "gr"]) == 0
    capsys.readouterr()
    assert main([*args, "--metrics", "rp"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "choose another --run name" in err and err.count("\n") == 1
