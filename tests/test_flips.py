"""Flip attribution (evaluators/runs/flips.py) on hand-built run pairs: sources changed, response changed,
neither; unsure and failed verdicts; matching by text; the per-item and run roll-ups; the Compare section.

Runs are hand-built here (`write_run`, also used by the gate and suite tests) and written through
writes.write_batch like the engine. An item is given as its texts and one verdict code per component
and target: "1" and "0" are confident verdicts (p 0.95 / 0.05, calibrated), "?" is unsure at the
default band (p 0.5), "t" a timeout. Scores are the mean of the confident verdicts (SQC: of the
sub-questions, each covered by any confident 1), as the engine would store them.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from evaluators.core.records import CALIBRATED, Component, Item, Run, Score, Status, Verdict
from evaluators.runs import flips
from evaluators.storage import ownership, writes

ROOT = Path(__file__).resolve().parents[1]
_P = {"1": 0.95, "0": 0.05, "?": 0.5}


def _verdict(item_id: str, metric: str, kind: str, idx: int, target: str, code: str) -> Verdict:
    if code == "t":
        return Verdict(item_id, metric, kind, idx, target, None, Status.TIMEOUT, detail="timeout")
    value = 1.0 if code == "1" else 0.0 if code == "0" else float(_P[code] >= 0.5)
    return Verdict(item_id, metric, kind, idx, target, value, Status.OK, p=_P[code], p_kind=CALIBRATED,
                   tier="offline")


def _score(item_id: str, metric: str, units: list[str]) -> Score:
    """Units: one code per component ('1', '0', '?', 't'); confident ones are averaged."""
    ok = [float(u) for u in units if u in "01"]
    unsure = sum(u == "?" for u in units)
    if ok:
        return Score(item_id, metric, sum(ok) / len(ok), len(ok), len(units), Status.OK, unsure)
    status = Status.EMPTY if not units else Status.UNSURE if unsure else Status.TIMEOUT
    return Score(item_id, metric, None, 0, len(units), status, unsure)


def write_run(db: Path, run: str, items: dict[str, dict[str, Any]], judge: str = "offline") -> None:
    """Write a finished run. Per item: query, sources, response, and optionally
    sp1 (one code per source), claims [(text, rp code, gr code)], subq [(text, sqc codes per source then
    the whole set, rqc code)], sd (one code per sentence: defaults to all distinct)."""
    ownership.start_run(db, Run(run, judge, {}, {}), len(items))
    records: dict[str, list[Any]] = {"items": [], "components": [], "verdicts": [], "scores": []}
    for item_id, spec in items.items():
        records["items"].append(Item(item_id, spec["query"], tuple(spec["sources"]), spec["response"],
                                     metadata=spec.get("metadata", {})))
        comps, verdicts = records["components"], records["verdicts"]
        sp1 = spec.get("sp1", "1" * len(spec["sources"]))
        for j, (text, code) in enumerate(zip(spec["sources"], sp1)):
            comps.append(Component(item_id, "source", j, text))
            verdicts.append(_verdict(item_id, "sp1", "source", j, "query", code))
        rp, gr = [], []
        for i, (text, rp_code, gr_code) in enumerate(spec.get("claims", [])):
            comps.append(Component(item_id, "claim", i, text))
            verdicts += [_verdict(item_id, "rp", "claim", i, "query", rp_code),
                         _verdict(item_id, "gr", "claim", i, "sources", gr_code)]
            rp.append(rp_code)
            gr.append(gr_code)
        sqc, rqc = [], []
        for i, (text, targets, rqc_code) in enumerate(spec.get("subq", [])):
            comps.append(Component(item_id, "subquestion", i, text))
            names = [f"source:{j}" for j in range(len(targets) - 1)] + ["sources"]
            verdicts += [_verdict(item_id, "sqc", "subquestion", i, t, c) for t, c in zip(names, targets)]
            verdicts.append(_verdict(item_id, "rqc", "subquestion", i, "response", rqc_code))
            sqc.append("1" if "1" in targets else "0" if set(targets) <= {"0"} else "?" if "?" in targets else "t")
            rqc.append(rqc_code)
        sd = spec.get("sd", "1")
        for i, code in enumerate(sd):
            comps.append(Component(item_id, "sentence", i, f"sentence {i}"))
            verdicts.append(_verdict(item_id, "sd", "sentence", i, "response", code))
        records["scores"] += [_score(item_id, "sp1", list(sp1)), _score(item_id, "rp", rp), _score(item_id, "gr", gr),
                              _score(item_id, "sqc", sqc), _score(item_id, "rqc", rqc),
                              _score(item_id, "sd", list(sd))]
    writes.write_batch(db, run, **records)
    ownership.finish_run(db, run, "finished", {})


# ---------------------------------------------------------------- the hand-built pair

SRC = ["The ferry leaves at 9:00 from Pier 2.", "Tickets cost 6 euros."]
BASE: dict[str, dict[str, Any]] = {
    # the retriever changed: a source replaced, GR of claim 0 goes 1 -> 0, SQC of the sub-question 1 -> 0
    "retr": dict(query="When does the ferry leave?", sources=SRC, sp1="10",
                 response="The ferry leaves at 9:00.", claims=[("The ferry leaves at 9:00.", "1", "1")],
                 subq=[("When does the ferry leave?", "101", "1")]),
    # the generator changed: same sources, another response; the shared claim's GR goes 1 -> 0 and it
    # moved from index 0 to 1 with other spacing and case
    "gen": dict(query="How much is a ticket?", sources=SRC, response="Tickets cost 6 euros.",
                claims=[("Tickets cost 6 euros.", "1", "1")], subq=[("How much is a ticket?", "011", "1")]),
    # nothing changed but the judge: RP of claim 0 goes 1 -> 0, SP1 of source 1 goes 0 -> 1
    "judge": dict(query="Where does the ferry leave from?", sources=SRC, sp1="10",
                  response="It leaves from Pier 2.", claims=[("It leaves from Pier 2.", "1", "1")],
                  subq=[("Where does the ferry leave from?", "101", "1")]),
    # verdicts that are unsure or failed in one run: no flip, counted apart
    "unsure": dict(query="Is there a bar on board?", sources=SRC, response="There is a bar.",
                   claims=[("There is a bar.", "1", "1"), ("The bar opens at 10.", "1", "0")],
                   subq=[("Is there a bar on board?", "000", "0")]),
    # only in the baseline: never compared
    "gone": dict(query="Q?", sources=SRC, response="A.", claims=[("A.", "1", "1")]),
}
CAND: dict[str, dict[str, Any]] = {
    "retr": dict(BASE["retr"], sources=["Ferries leave every hour.", SRC[1]], sp1="00",
                 claims=[("The ferry leaves at 9:00.", "1", "0")], subq=[("When does the ferry leave?", "000", "1")]),
    "gen": dict(BASE["gen"], response="A ticket is cheap. Tickets cost  6 EUROS.",
                claims=[("A ticket is cheap.", "1", "0"), ("tickets cost 6   euros.", "1", "0")]),
    "judge": dict(BASE["judge"], sp1="11", claims=[("It leaves from Pier 2.", "0", "1")]),
    "unsure": dict(BASE["unsure"], claims=[("There is a bar.", "1", "?"), ("The bar opens at 10.", "t", "0")],
                   subq=[("Is there a bar on board?", "0?0", "0")]),
}


def two_runs(db: Path, runs: dict[str, dict[str, dict[str, Any]]]) -> Path:
    """A database holding these runs (name: items), written in order."""
    for run, items in runs.items():
        write_run(db, run, items)
    return db


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_runs(tmp_path_factory.mktemp("flips") / "flips.duckdb", {"base": BASE, "cand": CAND})


def ledger_key(text: str) -> str:
    """The source ledger's key of a source, written out: sha256 of the whitespace-normalised text, 12 hex digits."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:12]


def _flip(result: flips.Flips, item: str, metric: str) -> dict[str, Any]:
    rows = result.components[(result.components["item_id"] == item) & (result.components["metric"] == metric)]
    assert len(rows) == 1, rows
    return rows.iloc[0].to_dict()


def test_each_flip_gets_the_cause_its_inputs_show(pair_db: Path) -> None:
    result = flips.between(pair_db, "base", "cand")
    retr = _flip(result, "retr", "gr")
    assert (retr["what"], retr["before"], retr["after"], retr["cause"]) == ("claim", 1, 0, flips.SOURCES)
    assert _flip(result, "retr", "sqc")["cause"] == flips.SOURCES
    assert _flip(result, "retr", "sqc")["what"] == "sub-question"
    gen = _flip(result, "gen", "gr")
    assert (gen["text"], gen["before"], gen["after"], gen["cause"]) == ("tickets cost 6   euros.", 1, 0, flips.RESPONSE)
    assert _flip(result, "judge", "rp")["cause"] == flips.JUDGE
    sp1 = _flip(result, "judge", "sp1")
    assert (sp1["text"], sp1["before"], sp1["after"], sp1["cause"]) == (SRC[1], 0, 1, flips.JUDGE)
    # the new claim "A ticket is cheap." has no counterpart, unsure and failed verdicts are no flips,
    # and the "retr" source that left has nothing to flip against
    assert set(result.components["item_id"]) == {"retr", "gen", "judge"}
    assert result.n_flips == 5
    assert result.cause_counts() == {flips.SOURCES: 2, flips.RESPONSE: 1, flips.JUDGE: 2}


def test_run_roll_up_counts_every_component_once(pair_db: Path) -> None:
    rollup = flips.between(pair_db, "base", "cand").rollup.set_index("metric")
    gr = rollup.loc["gr"]
    # matched: retr, gen (by text), judge, unsure x2 -> 5; flipped retr and gen; "There is a bar" unsure
    assert (gr["compared"], gr["flipped"], gr[flips.SOURCES], gr[flips.RESPONSE], gr[flips.JUDGE]) == (5, 2, 1, 1, 0)
    assert (gr[flips.SAME], gr[flips.UNDECIDED], gr[flips.UNMATCHED]) == (2, 1, 1)  # the failed RP is rp's
    rp = rollup.loc["rp"]
    assert (rp["flipped"], rp[flips.JUDGE], rp[flips.UNDECIDED], rp[flips.SAME]) == (1, 1, 1, 3)
    sqc = rollup.loc["sqc"]
    # the "unsure" sub-question: 000 -> 0?0 is unsure in cand (no confident 1, not all confident)
    assert (sqc["compared"], sqc["flipped"], sqc[flips.SOURCES], sqc[flips.UNDECIDED], sqc[flips.SAME]) == (4, 1, 1, 1, 2)
    sp1 = rollup.loc["sp1"]
    # retr: source 0 left, a new one came (one run only, twice); source 1 kept its 0 in retr
    assert (sp1["flipped"], sp1[flips.JUDGE], sp1[flips.UNMATCHED]) == (1, 1, 2)
    for row in rollup.to_dict("records"):
        assert row["compared"] == row["flipped"] + row[flips.SAME] + row[flips.UNDECIDED]
        assert row["flipped"] == sum(row[c] for c in flips.CAUSES)


def test_per_item_roll_up_and_changed_sources(pair_db: Path) -> None:
    result = flips.between(pair_db, "base", "cand")
    items = result.items.set_index("item_id")
    assert items.loc["retr", "cause"] == flips.SOURCES
    assert (items.loc["retr", "flips"], items.loc["retr", "lost"], items.loc["retr", "gained"]) == (2, 2, 0)
    assert items.loc["retr", "metrics"] == "GR 1, SQC 1"
    assert (items.loc["retr", "sources_removed"], items.loc["retr", "sources_added"]) == (1, 1)
    assert (items.loc["judge", "lost"], items.loc["judge", "gained"]) == (1, 1)
    assert items.loc["gen", "sources_removed"] == 0
    changes = result.source_changes
    assert list(zip(changes["run"], changes["text"])) == [("a", SRC[0]), ("b", "Ferries leave every hour.")]
    assert list(changes["key"]) == [ledger_key(SRC[0]), ledger_key("Ferries leave every hour.")]
    assert ledger_key("  The ferry leaves at 9:00\nfrom Pier 2. ") == ledger_key(SRC[0])  # whitespace-normalised
    assert list(result.for_item("gen")["metric"]) == ["gr"]


def test_a_band_that_decides_the_unsure_verdicts_makes_them_flips(pair_db: Path) -> None:
    # at band (0.5, 0.5) nothing is unsure: p 0.5 reads as a confident 1
    result = flips.between(pair_db, "base", "cand", (0.5, 0.5))
    unsure = result.for_item("unsure")
    assert list(unsure["metric"]) == ["sqc"]  # GR of "There is a bar." reads 1 -> 1 (p 0.5 is a 1): no flip
    rollup = result.rollup.set_index("metric")
    assert rollup.loc["gr", flips.UNDECIDED] == 0 and rollup.loc["sqc", flips.UNDECIDED] == 0
    assert rollup.loc["rp", flips.UNDECIDED] == 1  # a timeout stays a failure at any band
    assert _flip(result, "unsure", "sqc")["cause"] == flips.JUDGE  # 0 -> 1 once p 0.5 decides it


def test_cause_reads_whitespace_and_order() -> None:
    assert flips.cause(["a  b", "c"], ["a b", "c"], "x", "x ") == flips.JUDGE
    assert flips.cause(["a", "c"], ["c", "a"], "x", "x") == flips.SOURCES  # another order: the retriever
    assert flips.cause(["a"], ["a"], "x", "y") == flips.RESPONSE
    assert flips.cause(["a"], ["b"], "x", "y") == flips.SOURCES


def test_identical_runs_have_no_flip(pair_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "same.duckdb"
    write_run(db, "one", BASE)
    write_run(db, "two", BASE)
    result = flips.between(db, "one", "two")
    assert result.n_flips == 0 and result.items.empty
    assert (result.rollup["compared"] == result.rollup[flips.SAME]).all()


# ---------------------------------------------------------------- the Compare section

def _compare(db: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("RAG_TRIAGE_DB", str(db))
    monkeypatch.delenv("RAG_TRIAGE_READ_ONLY", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/3_Compare.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _frame(at: AppTest, column: str) -> Any:
    """The first dataframe on the page with this column."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_compare_shows_why_verdicts_flipped(pair_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _compare(pair_db, monkeypatch, run="base", other="cand", item="retr")
    assert "Why verdicts flipped" in [s.value for s in at.subheader]
    texts = [m.value for m in at.markdown]
    assert "**5** verdicts flipped: **2** retriever or chunking · **1** prompt or generator · **2** judge" in texts
    rollup = _frame(at, flips.UNMATCHED).set_index("metric")
    assert rollup.loc["GR", "flipped"] == 2 and rollup.loc["SQC", flips.UNDECIDED] == 1
    items = _frame(at, "sources_added").set_index("item_id")
    assert items.loc["retr", "open"] == "Item?run=cand&item=retr&tab=Verdicts"  # opens on the verdicts
    assert items.loc["gen", "cause"] == flips.RESPONSE
    mine = _frame(at, "p_before")
    assert set(mine["metric"]) == {"GR", "SQC"} and set(mine["cause"]) == {flips.SOURCES}
    assert list(mine["base"]) == [1, 1] and list(mine["cand"]) == [0, 0]
    links = [t for t in texts if t.startswith("Source ")]
    key_a, key_b = ledger_key(SRC[0]), ledger_key("Ferries leave every hour.")
    assert any(f"(Sources?run=base&source={key_a})" in t and t.startswith("Source removed") for t in links)
    assert any(f"(Sources?run=cand&source={key_b})" in t and t.startswith("Source added") for t in links)
    # another item: the judge is to blame, and no source is linked
    at = _compare(pair_db, monkeypatch, run="base", other="cand", item="judge")
    assert set(_frame(at, "p_before")["cause"]) == {flips.JUDGE}
    assert not [m.value for m in at.markdown if m.value.startswith("Source ")]


def test_compare_asks_before_explaining_the_flips_of_big_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "big.duckdb"
    write_run(db, "base", BASE)
    write_run(db, "cand", CAND)
    n = 20_001  # one more than Compare explains without being asked
    ids = [f"x{k:05d}" for k in range(n)]
    writes.write_frames(db, {
        "items": pd.DataFrame({"run_id": "cand", "item_id": ids, "query": "Q?", "sources": [["S."]] * n,
                               "response": "R.", "reference": None, "metadata": "{}"}),
        "scores": pd.DataFrame({"run_id": "cand", "item_id": ids, "metric": "gr", "value": 1.0, "n_scored": 1,
                                "n_total": 1, "status": "ok"})})
    at = _compare(db, monkeypatch, run="base", other="cand", item="retr")
    assert "Why verdicts flipped" in [s.value for s in at.subheader]
    assert not any(m.value.endswith("judge") and "verdicts flipped" in m.value for m in at.markdown)
    assert [t.label for t in at.toggle][-1].startswith("Explain why verdicts flipped")
    at.toggle(key="why").set_value(True).run()
    assert not at.exception
    assert "**5** verdicts flipped: **2** retriever or chunking · **1** prompt or generator · **2** judge" in \
        [m.value for m in at.markdown]
    assert at.query_params["why"] == "True"


# ---------------------------------------------------------------- sources the retriever added or dropped

S = ["The ferry leaves at 9:00 from Pier 2 on weekdays and at 10:00 on Sundays and public holidays.",
     "Tickets cost 6 euros.", "Bikes ride free on every crossing.", "The café on deck sells coffee."]
RETR_BASE: dict[str, dict[str, Any]] = {
    # a source replaced by a better one: SP1 0.5 -> 1, the sub-question covered, the claim grounded
    "swap": dict(query="When does the ferry leave?", sources=[S[0], S[1]], sp1="10", response="At 9:00.",
                 claims=[("At 9:00 on weekdays.", "1", "0")], subq=[("When does the ferry leave?", "000", "0")]),
    # a source added beside the one it had
    "grow": dict(query="Can I bring a bike?", sources=[S[1]], sp1="0", response="Yes.",
                 claims=[("Bikes ride free.", "1", "0")], subq=[("Can I bring a bike?", "00", "1")]),
    # the same sources in another order, and the same sources: nothing moved
    "order": dict(query="Is there coffee?", sources=[S[3], S[1]], sp1="10", response="Yes.",
                  claims=[("There is a café.", "1", "1")]),
    "kept": dict(query="How much?", sources=[S[1]], sp1="1", response="6 euros.", claims=[("6 euros.", "1", "1")]),
}
RETR_CAND: dict[str, dict[str, Any]] = {
    "swap": dict(RETR_BASE["swap"], sources=[S[0], "  The ferry leaves at 9:00 from Pier 2 on weekdays;\nthe crossing "
                                                   "takes forty minutes."], sp1="11",
                 claims=[("At 9:00 on weekdays.", "1", "1")], subq=[("When does the ferry leave?", "011", "1")]),
    "grow": dict(RETR_BASE["grow"], sources=[S[1], S[2]], sp1="0?", claims=[("Bikes ride free.", "1", "1")],
                 subq=[("Can I bring a bike?", "011", "1")]),
    "order": dict(RETR_BASE["order"], sources=[S[1], S[3]], sp1="01"),
    "kept": RETR_BASE["kept"],
}


@pytest.fixture(scope="module")
def retr_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_runs(tmp_path_factory.mktemp("retrieval") / "retrieval.duckdb", {"weak": RETR_BASE, "better": RETR_CAND})


def _written(spec: dict[str, Any], metric: str) -> float | None:
    """The score write_run stored for one item's metric, from its spec."""
    units = {"sp1": list(spec["sp1"]), "gr": [c[2] for c in spec.get("claims", [])],
             "sqc": ["1" if "1" in t else "0" if set(t) <= {"0"} else "?" for _, t, _ in spec.get("subq", [])]}
    return _score("x", metric, units[metric]).value


def _expected_moves() -> list[tuple[str, str, str]]:
    """(item, change, text) of every source in one run only, read off the two specs by text."""
    moves = []
    for item in sorted(RETR_BASE):
        a = [" ".join(s.split()) for s in RETR_BASE[item]["sources"]]
        b = [" ".join(s.split()) for s in RETR_CAND[item]["sources"]]
        moves += [(item, "dropped", s) for s in a if s not in b] + [(item, "added", s) for s in b if s not in a]
    return moves


def test_sources_in_one_run_only_are_added_or_dropped_with_the_items_scores(retr_db: Path) -> None:
    from evaluators.metrics import ledger
    from evaluators.storage import queries
    rows = queries.compare.retrieval_changes(retr_db, "weak", "better")
    moves = _expected_moves()
    assert len(moves) == 3  # swap: one dropped, one added; grow: one added; order and kept: none
    assert list(zip(rows["item_id"], rows["change"], rows["name"])) == [
        (i, c, ledger.source_name(t)) for i, c, t in moves]
    assert list(rows["key"]) == [ledger_key(t) for _, _, t in moves]
    assert list(rows["sp1"]) == ["unsure", "no", "yes"]  # on S[2] (its "?"), the dropped S[1], the new source
    assert rows["name"].iloc[2].endswith(" weekdays;…") and len(rows["name"].iloc[2]) <= ledger.NAME_LENGTH + 1  # cut
    for row in rows.to_dict("records"):
        for m in ("sp1", "sqc", "gr"):
            a, b = _written(RETR_BASE[row["item_id"]], m), _written(RETR_CAND[row["item_id"]], m)
            assert (row[f"{m}_a"], row[f"{m}_b"]) == (a, b)
            assert row[f"{m}_delta"] == pytest.approx(b - a)
    items = ("swap", "grow")
    first = rows.iloc[0]
    assert (first["n_items"], first["n_dropped"], first["n_added"]) == (2, 1, 2)
    for m in ("sp1", "sqc", "gr"):
        deltas = [_written(RETR_CAND[i], m) - _written(RETR_BASE[i], m) for i in items]
        assert (first[f"{m}_n"], first[f"{m}_mean_delta"]) == (2, pytest.approx(sum(deltas) / 2))
    assert sum(deltas) > 0  # the better retriever's items gained: the check above is not of zeros
    assert queries.compare.retrieval_changes(retr_db, "weak", "weak").empty
    assert len(queries.compare.retrieval_changes(retr_db, "weak", "better", limit=1)) == 1


def test_compare_lists_the_retrievers_changes_beside_the_flips(retr_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _compare(retr_db, monkeypatch, run="weak", other="better")
    assert "Sources the retriever added or dropped" in [s.value for s in at.subheader]
    texts = [m.value for m in at.markdown]
    assert any(t.startswith("**2** items retrieved other sources: **1** dropped · **2** added") for t in texts)
    table = _frame(at, "its SP1")
    assert list(table["item_id"]) == ["grow", "swap", "swap"]
    assert list(table["change"]) == ["added", "dropped", "added"]
    a, b = _written(RETR_BASE["swap"], "sp1"), _written(RETR_CAND["swap"], "sp1")
    assert table["SP1"].iloc[1] == f"{a:.2f}→{b:.2f}"
    assert table["its SP1"].iloc[0] == "?"  # unsure
    assert table["open"].iloc[1] == "Item?run=weak&item=swap&tab=Sources"  # the dropped source: in the run that had it
    assert table["ledger"].iloc[2].startswith("Sources?run=better&source=")
    at.session_state["retrieval_changes"] = {"selection": {"rows": [1], "columns": [], "cells": []}}
    at.run()
    assert at.title[0].value == "Item"
    assert (at.query_params["run"], at.query_params["item"], at.query_params["tab"]) == ("weak", "swap", "Sources")
