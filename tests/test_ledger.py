"""The source ledger: keys, counts on a hand-built run and on the demo (counted here in Python from the
demo's input files and stored verdicts, not with the ledger's SQL), the lists, the CLI export and the page."""
from __future__ import annotations

import csv
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from data import build_demo
from data.demo_runs import RUNS, RUNS_DIR
from evaluators import cli
from evaluators.core.confidence import is_unsure
from evaluators.core.records import CALIBRATED, LABEL, Component, Item, Run, Score, Status, Verdict
from evaluators.dashboard import markup
from evaluators.metrics import ledger
from evaluators.storage import ownership, queries, store, writes
from tests.conftest import app_db, hold_write_lock

ROOT = Path(__file__).resolve().parents[1]
RUN = "hand"
A, B, C = "Alpha text one. Alpha has more to say.", "Bravo text two.", "Charlie text three."
B_SPACED = " Bravo\u00a0 text\ttwo.\u2003"  # B with other whitespace: the same text key
SUPPORTED_A = "supported: best source sentence 'Alpha text one.' (cosine 0.91, 100% of claim words)"


def _verdict(item: str, metric: str, idx: int, value: float | None, status: Status = Status.OK, detail: str = "",
             p: float | None = None, kind: str = LABEL) -> Verdict:
    kind_of = "source" if metric == "sp1" else "claim"
    target = "query" if metric == "sp1" else "sources"
    return Verdict(item, metric, kind_of, idx, target, value, status, detail=detail,
                   p=value if p is None else p, p_kind=kind if status is Status.OK else None, tier="hand")


def build_ledger_db(path: Path) -> Path:
    """A run of three items whose ledger is counted by hand below:
    i1 sources [A, B] with metadata ids doc-a, doc-b: SP1 A=1, B=0; GR claim 0 supported by A (quoted), claim 1 = 0.
    i2 sources [B, C], no ids: SP1 B failed (error), C unsure (p 0.5, offline band); GR claim 0 = 1 with no
    quote (an LLM judge's reply): supported, source unknown.
    i3 sources [B with other whitespace]: SP1 0; GR claim 0 = 0.
    """
    items = [Item("i1", "What about alpha?", (A, B), "Alpha text one. Alpha is wrong.", metadata={"source_ids": ["doc-a", "doc-b"]}),
             Item("i2", "What about bravo?", (B, C), "Bravo is fine.", metadata={"source_ids": ["only-one"]}),
             Item("i3", "What about bravo again?", (B_SPACED,), "Bravo is nine.")]
    verdicts = [_verdict("i1", "sp1", 0, 1.0), _verdict("i1", "sp1", 1, 0.0),
                _verdict("i1", "gr", 0, 1.0, detail=SUPPORTED_A),
                _verdict("i1", "gr", 1, 0.0, detail="unsupported: no source sentence matches closely enough"),
                _verdict("i2", "sp1", 0, None, Status.ERROR, detail="error: 503"),
                _verdict("i2", "sp1", 1, 1.0, p=0.5, kind=CALIBRATED),
                _verdict("i2", "gr", 0, 1.0, detail="1"),
                _verdict("i3", "sp1", 0, 0.0), _verdict("i3", "gr", 0, 0.0, detail="unsupported")]
    components = [Component("i1", "claim", 0, "Alpha text one."), Component("i1", "claim", 1, "Alpha is wrong."),
                  Component("i2", "claim", 0, "Bravo is fine."), Component("i3", "claim", 0, "Bravo is nine.")]
    scores = [Score(i.id, "gr", 0.5, 1, 1, Status.OK) for i in items]
    ownership.start_run(path, Run(RUN, "hand", {}, {"claims": "0123456789ab"}), len(items))
    writes.write_batch(path, RUN, items=items, components=components, verdicts=verdicts, scores=scores)
    ownership.finish_run(path, RUN, "finished", {})
    return path


@pytest.fixture(scope="module")
def hand_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger_db(tmp_path_factory.mktemp("ledger") / "hand.duckdb")


def _by_source(frame) -> dict[str, dict]:
    return {row["source"]: row for row in frame.to_dict("records")}


# ---------------------------------------------------------------- keys

def test_source_key_is_the_sha256_of_the_whitespace_collapsed_text() -> None:
    import hashlib
    assert ledger.source_key("  Bravo \n text\ttwo. ") == hashlib.sha256(b"Bravo text two.").hexdigest()[:12]
    assert ledger.source_key(B_SPACED) == ledger.source_key(B) != ledger.source_key(C)


def test_source_ids_use_metadata_only_when_aligned_with_the_sources() -> None:
    assert ledger.source_ids([A, B], {"source_ids": ["doc-a", "doc-b"]}) == ["doc-a", "doc-b"]
    assert ledger.source_ids([A, B], {"source_ids": ["doc-a"]}) == [ledger.source_key(A), ledger.source_key(B)]
    assert ledger.source_ids([A, B], {"source_ids": ["doc-a", None]}) == ["doc-a", ledger.source_key(B)]
    assert ledger.source_ids([A], {"source_ids": "doc-a"}) == [ledger.source_key(A)]


def test_the_written_out_spaces_are_every_character_python_splits_on() -> None:
    assert ledger.SPACES == "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


def test_the_sql_key_equals_source_key_for_every_kind_of_whitespace(tmp_path: Path) -> None:
    texts = ["plain text", "  lead and trail  ", "tab\tand\nnewline", "nbsp\u00a0here", "em\u2003space\u3000ideo",
             "line\u2028sep", "vt\x0bff\x0c", "fs\x1cgs\x1d", "nel\x85x", "zero\u200bwidth", "é accents ünïcode"]
    db = tmp_path / "keys.duckdb"
    ownership.start_run(db, Run("k", "hand", {}, {}), 1)
    writes.write_batch(db, "k", items=[Item("x", "q", tuple(texts), "r")])
    got = set(queries.ledger.source_ledger(db, ["k"], limit=None)["text_key"])
    assert got == {ledger.source_key(t) for t in texts}


def test_supporting_quote_reads_the_offline_judges_detail() -> None:
    assert ledger.supporting_quote(SUPPORTED_A) == "Alpha text one."
    two = "supported: best source sentence \"It's one. Then the next source's.\" (cosine 0.8, 90% of claim words)"
    assert ledger.supporting_quote(two) == "It's one"  # a window of two sentences: its first
    assert ledger.supporting_quote("unsupported: number 3 not in the matching source sentences; best source "
                                   "sentence 'Alpha text one.' (cosine 0.9, 100% of claim words)") is None
    assert ledger.supporting_quote("1") is None
    assert ledger.supporting_sources(SUPPORTED_A, [B, A, A + " more"]) == [1, 2]


def test_the_sql_attribution_equals_supporting_sources(tmp_path: Path) -> None:
    sources = ("The pier's café opens at 8. It closes at 6.", "Tickets cost 5 euros.\nChildren  ride free.",
               "x" * 200 + " end.")
    details = [
        "supported: best source sentence \"The pier's café opens at 8.\" (cosine 0.9, 100% of claim words)",
        "supported: best source sentence 'Children ride free.' (cosine 0.8, 90% of claim words)",
        "supported: best source sentence 'Tickets cost 5 euros. Children ride free.' (cosine 0.8, 90% of claim words)",
        f"supported: best source sentence '{'x' * 159}…' (cosine 0.7, 80% of claim words)",
        "supported: best source sentence 'Nowhere to be found.' (cosine 0.7, 80% of claim words)",
        "unsupported: best source sentence 'Tickets cost 5 euros.' (cosine 0.4, 20% of claim words)",
        "1"]
    db = tmp_path / "quotes.duckdb"
    ownership.start_run(db, Run("q", "hand", {}, {}), 1)
    writes.write_batch(db, "q", items=[Item("x", "q", sources, "r")], verdicts=[
        _verdict("x", "gr", i, 0.0 if d.startswith("unsupported") else 1.0, detail=d) for i, d in enumerate(details)])
    want = Counter(i for d in details for i in ledger.supporting_sources(d, sources) if not d.startswith("un"))
    assert want == Counter({0: 1, 1: 2, 2: 1})  # the quotes this test means to cover are all attributed
    for i, text in enumerate(sources):
        row = queries.ledger.source_retrievals(db, ["q"], ledger.source_key(text)).iloc[0]
        assert row["supports"] == want[i]
    assert row["n_unattributed"] == 2  # "Nowhere to be found." and the LLM judge's bare "1"


# ---------------------------------------------------------------- counts on a hand-built run

def test_hand_built_ledger_counts(hand_db: Path) -> None:
    rows = _by_source(queries.ledger.source_ledger(hand_db, [RUN], limit=None))
    kb, kc = ledger.source_key(B), ledger.source_key(C)
    assert set(rows) == {"doc-a", "doc-b", kb, kc}  # i2's single id does not align with its two sources
    a, b_id, b, c = rows["doc-a"], rows["doc-b"], rows[kb], rows[kc]
    assert (a["n_retrieved"], a["sp1_essential"], a["sp1_not"], a["claims_supported"]) == (1, 1, 0, 1)
    assert (a["beside_unsupported"], a["gr_decided"], a["essential_share"]) == (1, 1, 1.0)
    assert (b_id["n_retrieved"], b_id["sp1_not"], b_id["claims_supported"], b_id["beside_unsupported"]) == (1, 1, 0, 1)
    # B by its text in i2 and i3: one failed SP1 verdict (counted apart), one 0; i3 sits beside a GR 0
    assert (b["n_retrieved"], b["sp1_essential"], b["sp1_not"], b["sp1_failed"], b["sp1_unsure"]) == (2, 0, 1, 1, 0)
    assert b["essential_share"] == 0.0
    assert (b["beside_unsupported"], b["gr_decided"], b["unsupported_share"]) == (1, 2, 0.5)
    assert (b["claims_supported"], b["claims_source_unknown"]) == (0, 1)  # i2's supported claim has no quote
    assert b["text_key"] == kb and pd.isna(b["source_id"])
    # C: its only SP1 verdict is unsure at the offline band, so nothing is decided: no share, not 0
    assert (c["sp1_unsure"], c["sp1_essential"], c["sp1_not"]) == (1, 0, 0)
    assert pd.isna(c["essential_share"])


def test_hand_built_lists_follow_the_thresholds(hand_db: Path) -> None:
    kb = ledger.source_key(B)
    th = ledger.Thresholds(min_retrieved=2, dead_max_essential=0.2, stale_min_unsupported=0.5)
    lists = queries.ledger.source_ledger(hand_db, [RUN], th)
    assert list(lists.loc[lists["list"] == "dead weight", "source"]) == [kb]
    assert list(lists.loc[lists["list"] == "stale", "source"]) == [kb]
    assert (lists["n_sources"].iloc[0], lists["n_dead"].iloc[0], lists["n_stale"].iloc[0]) == (4, 1, 1)
    stricter = queries.ledger.source_ledger(hand_db, [RUN], ledger.Thresholds(2, 0.2, 0.6))
    assert stricter[stricter["list"] == "stale"].empty
    assert stricter[stricter["list"] == "retrieved"]["source"].iloc[0] == kb  # most retrieved first
    assert queries.ledger.source_ledger(hand_db, [RUN], ledger.Thresholds(3, 1.0, 0.0))["n_dead"].iloc[0] == 0


def test_retrievals_accept_the_id_or_the_text_key(hand_db: Path) -> None:
    kb = ledger.source_key(B)
    by_text = queries.ledger.source_retrievals(hand_db, [RUN], kb)
    assert list(by_text["item_id"]) == ["i1", "i2", "i3"]  # i1 names B doc-b, its text key still finds it
    assert list(by_text["sp1"]) == ["no", "failed", "no"]
    by_id = queries.ledger.source_retrievals(hand_db, [RUN], "doc-b")
    assert list(by_id["item_id"]) == ["i1"]
    a = queries.ledger.source_retrievals(hand_db, [RUN], "doc-a").iloc[0]
    assert (a["supports"], list(a["claims"]), a["n_unsupported"]) == (1, ["Alpha text one."], 1)
    assert queries.ledger.source_retrievals(hand_db, [RUN], "nothing").empty


# ---------------------------------------------------------------- counts on the demo, by hand

@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo.build(db, emit=lambda _: None)
    return db


def _hand_counts(db: Path, runs: list[str]) -> dict[str, Counter]:
    """Per source key, counted in Python: retrievals from the demo's run files, SP1 and GR from the
    stored verdict rows."""
    sources: dict[tuple[str, str], list[str]] = {}
    counts: dict[str, Counter] = defaultdict(Counter)
    for run in runs:
        for line in (RUNS_DIR / f"{run}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            sources[(run, row["id"])] = row["sources"]
            for key in ledger.source_ids(row["sources"], row.get("metadata", {})):
                counts[key]["retrieved"] += 1
    verdicts = store.query(db, "SELECT run_id, item_id, metric, component_idx, value, status, detail, p, p_kind "
                               "FROM verdicts WHERE metric IN ('sp1', 'gr')")
    gr_no, gr_decided = Counter(), Counter()
    for v in verdicts.itertuples(index=False):
        if v.run_id not in runs:
            continue
        item = sources[(v.run_id, v.item_id)]
        unsure = v.p_kind == CALIBRATED and is_unsure(v.p, CALIBRATED)  # at the offline judge's default band
        state = "failed" if v.status != "ok" else "unsure" if unsure else "yes" if v.value == 1 else "no"
        if v.metric == "sp1":
            counts[ledger.source_key(item[v.component_idx])][f"sp1_{state}"] += 1
        else:
            gr_no[(v.run_id, v.item_id)] += state == "no"
            gr_decided[(v.run_id, v.item_id)] += state in ("yes", "no")
            if state == "yes":
                for i in ledger.supporting_sources(v.detail, item):
                    counts[ledger.source_key(item[i])]["claims"] += 1
    for (run, item_id), item in sources.items():
        for text in item:
            counts[ledger.source_key(text)]["beside"] += gr_no[(run, item_id)] > 0
            counts[ledger.source_key(text)]["decided"] += gr_decided[(run, item_id)] > 0
    return counts


def test_demo_ledger_matches_a_count_by_hand(demo_db: Path) -> None:
    runs = list(RUNS)
    hand = _hand_counts(demo_db, runs)
    rows = _by_source(queries.ledger.source_ledger(demo_db, runs, limit=None))
    assert set(rows) == set(hand)
    # two sources checked in full: the most retrieved, and one the GR claims lean on most
    top = max(hand, key=lambda k: (hand[k]["retrieved"], k))
    leaned = max(hand, key=lambda k: (hand[k]["claims"], k))
    for key in {top, leaned}:
        row, want = rows[key], hand[key]
        assert row["n_retrieved"] == want["retrieved"]
        assert (row["sp1_essential"], row["sp1_not"], row["sp1_unsure"], row["sp1_failed"]) == (
            want["sp1_yes"], want["sp1_no"], want["sp1_unsure"], want["sp1_failed"])
        assert row["claims_supported"] == want["claims"]
        assert (row["beside_unsupported"], row["gr_decided"]) == (want["beside"], want["decided"])
    assert hand[top]["retrieved"] >= 10 and hand[leaned]["claims"] >= 5  # the checks above are not vacuous
    assert all(rows[k]["n_retrieved"] == hand[k]["retrieved"] for k in hand)


def test_sql_lists_equal_the_python_definitions_on_the_demo(demo_db: Path) -> None:
    for th in (ledger.DEFAULT_THRESHOLDS, ledger.Thresholds(2, 0.4, 0.25), ledger.Thresholds(10, 0.1, 0.9)):
        frame = queries.ledger.source_ledger(demo_db, list(RUNS), th, limit=None)
        for row in frame.to_dict("records"):
            assert row["dead_weight"] == ledger.is_dead_weight(row["n_retrieved"], row["sp1_essential"],
                                                               row["sp1_not"], th)
            assert row["stale"] == ledger.is_stale(row["n_retrieved"], row["beside_unsupported"], row["gr_decided"], th)
    default = queries.ledger.source_ledger(demo_db, list(RUNS), limit=None)
    assert default["dead_weight"].any() and default["stale"].any()


def test_each_list_is_the_whole_ledger_ranked_and_cut(demo_db: Path) -> None:
    """The lists rank on counts and break ties by source key, as the whole ledger (the export) orders its
    rows; each is that ledger's first rows of its kind, in that order, and the counts are the whole ledger's."""
    th = ledger.Thresholds(2, 0.4, 0.25)
    whole = queries.ledger.source_ledger(demo_db, list(RUNS), th, limit=None)
    lists = queries.ledger.source_ledger(demo_db, list(RUNS), th, limit=7)
    dead, stale = whole[whole["dead_weight"]], whole[whole["stale"]]
    want = {
        "retrieved": whole["source"],
        "dead weight": dead.sort_values(["n_retrieved", "essential_share", "source"], ascending=[False, True, True],
                                        kind="stable")["source"],
        "stale": stale.sort_values(["beside_unsupported", "unsupported_share", "source"],
                                   ascending=[False, False, True], kind="stable")["source"],
    }
    for name, sources in want.items():
        assert list(lists.loc[lists["list"] == name, "source"]) == list(sources[:7]), name
    assert len(whole) > 7 and whole["n_retrieved"][:7].duplicated().any() and len(dead) and len(stale)  # ties, cut
    assert (lists["n_sources"].iloc[0], lists["n_dead"].iloc[0], lists["n_stale"].iloc[0]) == (
        len(whole), len(dead), len(stale))
    assert list(lists["list"].drop_duplicates()) == ["retrieved", "dead weight", "stale"]


# ---------------------------------------------------------------- the grouped file the dashboard reads

def test_lists_from_the_grouped_file_equal_the_grouping(demo_db: Path, tmp_path: Path) -> None:
    """The dashboard reads the lists from one file per runs and band: the same rows as grouping again at
    every threshold and band, and a threshold moved reads the file (it is not written again)."""
    cache, runs = tmp_path / "derived", list(RUNS)
    for th in (ledger.DEFAULT_THRESHOLDS, ledger.Thresholds(2, 0.4, 0.25), ledger.Thresholds(10, 0.1, 0.9)):
        for limit in (100, None):
            pd.testing.assert_frame_equal(queries.ledger.source_ledger(demo_db, runs, th, limit=limit, cache=cache),
                                          queries.ledger.source_ledger(demo_db, runs, th, limit=limit))
    [file] = cache.iterdir()
    written = file.stat().st_mtime_ns
    assert not queries.ledger.source_ledger(demo_db, runs, ledger.Thresholds(1, 0.9, 0.1), cache=cache).empty
    assert file.stat().st_mtime_ns == written and list(cache.iterdir()) == [file]
    band = (0.3, 0.7)
    pd.testing.assert_frame_equal(queries.ledger.source_ledger(demo_db, runs, band=band, cache=cache),
                                  queries.ledger.source_ledger(demo_db, runs, band=band))
    assert len(list(cache.iterdir())) == 2  # another band, another file


def test_a_write_to_the_database_groups_again_and_removes_the_old_files(
    hand_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, cache = tmp_path / "hand.duckdb", tmp_path / "derived"
    db.write_bytes(hand_db.read_bytes())
    before = queries.ledger.source_ledger(db, [RUN], limit=None, cache=cache)
    [old] = cache.iterdir()
    monkeypatch.setattr(queries.ledger, "STALE_FILE_S", 0.0)  # an older version's file goes at once
    with store.connect(db) as con:
        con.execute("DELETE FROM verdicts WHERE run_id = ? AND metric = 'sp1'", [RUN])
    place = old.name.split("-")[1]  # what a server killed while writing this version's file leaves
    (cache / f"ledger-{place}-{store.version(db)}-{'0' * 24}.parquet.4242.1.part").write_bytes(b"PAR1 cut short")
    after = queries.ledger.source_ledger(db, [RUN], limit=None, cache=cache)
    assert before["sp1_missing"].sum() < after["sp1_missing"].sum() == after["n_retrieved"].sum()
    [new] = cache.iterdir()  # the killed server's part is gone too
    assert new != old and new.suffix == ".parquet"


def test_a_cache_folder_that_cannot_be_written_or_is_shared_groups_again(hand_db: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "derived"
    blocked.write_text("a file where the folder should be", encoding="utf-8")
    got = queries.ledger.source_ledger(hand_db, [RUN], limit=None, cache=blocked)
    pd.testing.assert_frame_equal(got, queries.ledger.source_ledger(hand_db, [RUN], limit=None))
    assert blocked.read_text(encoding="utf-8") == "a file where the folder should be"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)  # others may open it: the sources' words are not written there
    got = queries.ledger.source_ledger(hand_db, [RUN], limit=None, cache=shared)
    pd.testing.assert_frame_equal(got, queries.ledger.source_ledger(hand_db, [RUN], limit=None))
    assert not list(shared.iterdir())


# ---------------------------------------------------------------- the export

def test_cli_export_writes_the_ledger(hand_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "ledger.csv"
    assert cli.main(["ledger", "--db", str(hand_db), "--run", RUN, "--out", str(out), "--min-retrieved", "2"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(ledger.CSV_COLUMNS)
    got = {r["source"]: r for r in rows}
    b = got[ledger.source_key(B)]
    assert (b["n_retrieved"], b["sp1_failed"], b["dead_weight"], b["stale"]) == ("2", "1", "True", "True")
    assert got[ledger.source_key(C)]["essential_share"] == ""  # nothing decided: empty, not 0
    assert got["doc-a"]["text"] == A


@pytest.mark.parametrize("args", [["--run", "nope"], ["--run", RUN, "--dead-max-essential", "1.5"],
                                  ["--run", RUN, "--min-retrieved", "0"]])
def test_cli_export_refuses_bad_input_and_writes_nothing(hand_db: Path, tmp_path: Path, args: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ledger.csv"
    assert cli.main(["ledger", "--db", str(hand_db), *args, "--out", str(out)]) == 2
    assert not out.exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ---------------------------------------------------------------- the page

@pytest.fixture
def served(hand_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "served.duckdb"
    path.write_bytes(hand_db.read_bytes())
    yield from app_db(path, monkeypatch)


def _open(**params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/9_Sources.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_sources_page_lists_and_thresholds_from_the_url(served: Path) -> None:
    at = _open(run=RUN, lr_min="2")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Sources": "4", "Dead weight": "1", "Possibly stale or misleading": "1"}
    dead = at.dataframe[0].value  # the lists in order: dead weight, stale, most retrieved
    assert list(dead["source"]) == [ledger.source_key(B)]
    assert list(dead["name"]) == [B] and dead.columns[0] == "name"  # named by its words, the key beside
    assert dead["open"].iloc[0].startswith("Sources?") and f"source={ledger.source_key(B)}" in dead["open"].iloc[0]
    assert dead["essential"].iloc[0] == "0% (1/2, 1 failed)"  # 1 of 2 scored: the failed verdict is not a 0
    assert list(at.dataframe[1].value["source"]) == [ledger.source_key(B)]  # stale
    assert at.query_params["runs"] == RUN  # the run from a pasted ?run= link becomes the runs picked
    assert {m.label: m.value for m in _open(run=RUN).metric}["Dead weight"] == "0"  # nothing is retrieved 3 times


def test_sources_page_moves_a_threshold_while_a_writer_holds_the_file(served: Path) -> None:
    """The page's first visit writes the grouped ledger to a file in the derived folder: a threshold moved
    later reads that file, so a run writing to the database does not make the page say "busy"."""
    at = _open(run=RUN, lr_min="2")
    assert len(list((served.parent / "derived").glob("ledger-*.parquet"))) == 1
    holder = hold_write_lock(served, seconds=30.0)  # past the readers' 10 s deadline
    try:
        at.slider(key="lr_stale").set_value(0.6).run(timeout=60)
        assert not at.exception and not any("busy" in w.value for w in at.warning)
        assert {m.label: m.value for m in at.metric}["Possibly stale or misleading"] == "0"  # as the hand count says
    finally:
        holder.terminate()
        holder.wait(timeout=20)


def test_sources_page_detail_opens_the_sources_items(served: Path) -> None:
    at = _open(run=RUN, source=ledger.source_key(B))
    table = at.dataframe[0].value
    assert list(table["item_id"]) == ["i1", "i2", "i3"]
    assert list(table["open"]) == [f"Item?run={RUN}&item={i}&tab=Sources" for i in ("i1", "i2", "i3")]
    assert list(table["essential"]) == ["✗ not essential", "⚠ failed", "✗ not essential"]
    assert {m.label: m.value for m in at.metric}["Retrieved"] == "3"
    assert at.subheader[0].value == markup.md(B)  # its words, not its key
    assert any(c.value.endswith(f"text key {ledger.source_key(B)}") for c in at.caption)
    # i2's supported claim came from an LLM judge's bare "1": its item's count, said once, not a row's
    assert "The judge named no source for 1 supported claim(s) of these items: none is listed here." in [
        c.value for c in at.caption]
    alpha = _open(run=RUN, source=ledger.source_key(A))
    assert list(alpha.dataframe[0].value["claims"]) == ["Alpha text one."]  # the claim it supports, by its words
    assert not any("named no source" in c.value for c in alpha.caption)
    missing = _open(run=RUN, source="no-such-source")
    assert any("No source" in w.value for w in missing.warning)


def test_a_click_on_a_ledger_row_opens_the_source_and_a_click_on_a_retrieval_its_item(served: Path) -> None:
    at = _open(run=RUN, lr_min="2")
    names = at.dataframe[2].value  # most retrieved
    row = list(names["source"]).index(ledger.source_key(B))
    at.session_state["retrieved_table"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["source"] == ledger.source_key(B) and at.query_params["runs"] == RUN
    assert at.subheader[0].value == markup.md(B)
    assert any(B in h.value for h in at.html)  # its full text
    assert list(at.dataframe[0].value["item_id"]) == ["i1", "i2", "i3"]
    at.session_state["retrievals"] = {"selection": {"rows": [1], "columns": [], "cells": []}}
    at.run()
    assert at.title[0].value == "Item"
    assert (at.query_params["run"], at.query_params["item"], at.query_params["tab"]) == (RUN, "i2", "Sources")


@pytest.mark.parametrize("text", ["short text", "  spaced \n out  ", "w" * 70, "word " * 30, ("x" * (ledger.NAME_LENGTH - 1)) + " yy",
                                  ("x" * ledger.NAME_LENGTH) + " yy", ("x" * (ledger.NAME_LENGTH + 1)) + " yy", "é" * 30 + " ünï " * 10])
def test_the_sql_name_equals_source_name(tmp_path: Path, text: str) -> None:
    db = tmp_path / "names.duckdb"
    ownership.start_run(db, Run("n", "hand", {}, {}), 1)
    writes.write_batch(db, "n", items=[Item("x", "q", (text,), "r")])
    name = queries.ledger.source_ledger(db, ["n"], limit=None)["name"].iloc[0]
    assert name == ledger.source_name(text)
    assert len(name) <= ledger.NAME_LENGTH + 1 and " ".join(text.split()).startswith(name.removesuffix("…"))


def test_source_name_is_the_first_words() -> None:
    assert ledger.source_name(" Bravo\u00a0 text\ttwo. ") == "Bravo text two."
    long = "The ferry to the island leaves from Pier 2 every hour between nine and six."
    assert ledger.source_name(long) == "The ferry to the island leaves from Pier 2 every…"
    assert ledger.source_name("x" * 80) == "x" * ledger.NAME_LENGTH + "…"
