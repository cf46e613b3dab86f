"""The last frictions a newcomer met in a triage session (issue 52), each held here with AppTest on the seeded
DuckDB: a viewer told why a form is missing, the home page's links opening in place, Compare's defaults, scores
coloured on the Run page, a tooltip for every term of jargon, GRAMMAR's runs apart from the board, and a mean
over fewer than half of the items shown as not settled. (The hosted warm-up is in test_serve.py, the local
author in test_access.py, the README's first screen in test_docs.py.)"""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from evaluators.dashboard import markup
from evaluators.dashboard.views import runs as runs_view
from evaluators.metrics import registry
from evaluators.storage import store, wide
from tests.test_access import app, run
from tests.test_pages import frame_with, open_page, shown

ITEM, TRUST, COMPARE = "pages/2_Item.py", "pages/8_Trust.py", "pages/3_Compare.py"


def coloured(at: AppTest, column: str) -> dict[str, set[tuple[int, str]]]:
    """The cells of the first table with `column`, by colour: {"pass": {(row, column)}, "fail": ...}."""
    element = next(d for d in at.dataframe if column in d.value.columns)
    columns, styles = list(element.value.columns), element.proto.arrow_data.styler.styles
    out: dict[str, set[tuple[int, str]]] = {}
    for name, css in (("pass", runs_view.PASS_COLOUR), ("fail", runs_view.FAIL_COLOUR)):
        rule = next((r for r in styles.split("}") if css.split(": ")[1] in r), "")
        out[name] = {(int(r), columns[int(c)]) for r, c in re.findall(r"_row(\d+)_col(\d+)", rule)}
    return out


def help_of(at: AppTest, column: str) -> str:
    """The tooltip of a column of the first table that has it."""
    element = next(d for d in at.dataframe if column in d.value.columns)
    return json.loads(element.proto.columns)[column]["help"]


def unscore(db: Path, run_id: str, metric: str, items: list[str]) -> None:
    """Leave a metric of these items unscored (a judge error), the run's stored table with it."""
    with store.connect(db) as con:
        for item in items:
            con.execute("UPDATE scores SET value = NULL, n_scored = 0, status = 'error' "
                        "WHERE run_id = ? AND item_id = ? AND metric = ?", [run_id, item, metric])
        wide.refresh_wide(con, run_id)


def copy_run(db: Path, source: str, name: str) -> None:
    """A new run, the newest, with `source`'s scores on items of other ids (an upload of other questions)."""
    with store.connect(db) as con:
        con.execute(f"INSERT INTO runs SELECT * REPLACE ('{name}' AS run_id, now()::TIMESTAMP AS created_at) "
                    "FROM runs WHERE run_id = ?", [source])
        for table in ("items", "scores"):
            con.execute(f"INSERT INTO {table} SELECT * REPLACE ('{name}' AS run_id, 'u-' || item_id AS item_id) "
                        f"FROM {table} WHERE run_id = ?", [source])
        wide.refresh_wide(con, name)


# ---------------------------------------------------------------- 1. a viewer is told why a form is missing

def test_a_viewer_sees_why_there_is_no_correction_form_and_no_labelling_form(db: Path) -> None:
    verdicts = run(app(ITEM, "viewer", run="weak-retriever", item="q01", tab="Verdicts"))
    assert not [e for e in verdicts.expander if e.label == "Correct a verdict"]
    assert "You are a viewer: correcting a verdict needs the triager role (ask an admin)." in [
        i.value for i in verdicts.info]
    for tab in ("Label next", "Import labels"):
        trust = run(app(TRUST, "viewer", run="weak-retriever", tab=tab))
        assert not trust.get("form")
        assert "You are a viewer: saving labels needs the triager role (ask an admin)." in [i.value for i in trust.info]
    triager = run(app(ITEM, "triager", run="weak-retriever", item="q01", tab="Verdicts"))
    assert [e for e in triager.expander if e.label == "Correct a verdict"] and not triager.info


# ---------------------------------------------------------------- 2. the home page's links open in place

def test_the_boards_evidence_and_run_cells_open_in_this_tab_and_back_returns_to_the_board(db: Path) -> None:
    at = open_page("app.py")
    board = frame_with(at, "evidence")
    row = next(i for i, mark in enumerate(board["evidence"]) if mark == "🔎")
    at.session_state["runs_table"] = {"selection": {"rows": [], "columns": [], "cells": [(row, "evidence")]}}
    at.run()
    assert not at.exception and at.title[0].value == "Item"  # switched, in this session: no new tab
    assert at.query_params["run"] == board["run"][row] and at.query_params["from"] == "runs"
    assert [p.proto.label for p in at.get("page_link") if p.proto.label.startswith("Back to")] == ["Back to Runs"]
    at = open_page("app.py")
    at.session_state["runs_table"] = {"selection": {"rows": [], "columns": [], "cells": [(0, "run")]}}
    at.run()
    assert at.title[0].value == "Run" and at.query_params["run"] == board["run"][0]


# ---------------------------------------------------------------- 3. Compare's defaults

def test_compare_from_the_sidebar_opens_on_the_pair_the_home_page_links(db: Path) -> None:
    home = open_page("app.py")
    linked = next(p.proto.query_string for p in home.get("page_link") if p.proto.label.startswith("Compare "))
    home.query_params.clear()  # the sidebar's navigation drops the query string; the session keeps the run
    home.switch_page(COMPARE).run()
    assert not home.exception
    assert (home.query_params["run"], home.query_params["other"]) == (
        parse_qs(linked)["run"][0], parse_qs(linked)["other"][0]) == ("better-retriever", "llm-judge")


def test_a_link_that_names_one_run_compares_it_with_the_newest_run_that_shares_its_items(db: Path) -> None:
    copy_run(db, "weak-retriever", "upload-1")  # newer, but none of its items are weak-retriever's
    at = open_page(COMPARE, run="weak-retriever")
    assert (at.query_params["run"], at.query_params["other"]) == ("weak-retriever", "llm-judge")


@pytest.mark.parametrize("before, after", [("weak-retriever", "better-retriever"), ("better-retriever", "llm-judge")])
def test_compare_opens_on_a_direction_that_has_crossed_items(db: Path, before: str, after: str) -> None:
    at = open_page(COMPARE, run=before, other=after)
    crossed = frame_with(at, "fell below")
    assert crossed[["fell below", "rose above"]].to_numpy().sum() > 0
    assert "No item crossed in that direction." not in [c.value for c in at.caption]
    direction = at.radio(key="xd").value
    metric = at.selectbox(key="xm").value
    moved = crossed.set_index("metric").loc[metric.upper(), "fell below" if direction == "worse" else "rose above"]
    assert moved > 0


def test_after_an_upload_of_other_items_compare_opens_on_runs_that_share_items_and_says_so(db: Path) -> None:
    copy_run(db, "weak-retriever", "upload-1")  # the newest run, sharing no item with any other
    at = open_page(COMPARE)
    assert (at.query_params["run"], at.query_params["other"]) == ("better-retriever", "llm-judge")
    assert any("upload-1 shares no item with another run" in i.value.replace("\\", "") for i in at.info)
    home = open_page("app.py")
    assert any(p.proto.query_string.startswith("run=better-retriever&other=llm-judge")
               for p in home.get("page_link") if p.proto.label.startswith("Compare "))


# ---------------------------------------------------------------- 4. the Run page colours its scores

def test_the_run_page_colours_each_score_against_its_threshold_unless_it_is_not_settled(db: Path) -> None:
    with store.connect(db) as con:  # q02's GR: one claim scored, three unsure: Table 2 does not read it
        con.execute('UPDATE run_wide SET "gr:scored" = 1, "gr:unsure" = 3 WHERE run_id = ? AND item_id = ?',
                    ["weak-retriever", "q02"])
    at = open_page("pages/1_Run.py", run="weak-retriever")
    table = frame_with(at, "rules")
    cells = coloured(at, "rules")
    metrics = [m for m in registry.THELMA if m in table.columns]
    expected = {"pass": set(), "fail": set()}
    for i, row in table.iterrows():
        for m in metrics:
            if pd.isna(row[m]) or (row["item_id"], m) == ("q02", "gr"):
                continue
            expected["pass" if row[m] >= registry.threshold(m) else "fail"].add((i, m))
    assert cells == expected and cells["fail"]
    assert any("has no colour" in c.value for c in at.caption)


# ---------------------------------------------------------------- 5. jargon gets its words where it is shown

def test_p_kind_tier_and_kappa_carry_their_meaning_as_tooltips(db: Path) -> None:
    verdicts = open_page(ITEM, run="weak-retriever", item="q01", tab="Verdicts")
    assert help_of(verdicts, "p kind") == markup.TERMS["p kind"] and help_of(verdicts, "tier") == markup.TERMS["tier"]
    trust = open_page(TRUST, run="weak-retriever")
    assert help_of(trust, "kappa") == markup.TERMS["kappa"]


def test_lambda_r_acc_and_lm_shortfall_carry_their_meaning_where_they_are_shown(demo: Path) -> None:
    at = open_page("pages/7_Robustness.py", run="grammar-bm25")
    for column in ("lambda", "R", "Acc"):
        assert help_of(at, column) == markup.TERMS[column]
    assert help_of(at, "R (retrieval)") == markup.TERMS["R (retrieval)"]
    shortfalls = [c for c in at.caption if "LM shortfall" in c.value]
    assert shortfalls and all(markup.TERMS["LM shortfall"] in c.help for c in shortfalls)


def test_a_hex_source_key_says_what_it_is(db: Path) -> None:
    at = open_page("pages/9_Sources.py", run="weak-retriever")
    first = frame_with(at, "source")["source"].iloc[0]
    detail = open_page("pages/9_Sources.py", run="weak-retriever", source=first)
    keyed = [c for c in detail.caption if "text key" in c.value]
    assert keyed and markup.TERMS["text key"] in keyed[0].help


# ---------------------------------------------------------------- 6 and 9. GRAMMAR's runs apart; means not settled

def test_grammar_runs_are_listed_apart_from_the_board(demo: Path) -> None:
    at = open_page("app.py")
    board = shown(at, "top rule")
    assert list(board["run"]) == ["verbose_generator", "better_retriever", "weak_retriever"]
    robustness = [(p.proto.label, p.proto.query_string) for p in at.get("page_link") if p.proto.page == "Robustness"]
    assert [q for _, q in robustness] == ["run=grammar-dense", "run=grammar-bm25"]


def test_a_mean_over_fewer_than_half_the_items_is_not_settled_and_not_coloured(db: Path) -> None:
    unscore(db, "llm-judge", "gr", ["q01", "q02", "q03", "q04"])  # 2 of 6 at most: its mean is not settled
    at = open_page("app.py")
    board = shown(at, "top rule")
    row = list(board["run"]).index("llm-judge")
    scored = int(re.search(r"\((\d)/6", board["GR"][row]).group(1))
    assert board["GR"][row].endswith(", not settled)") and 0 < scored < 3
    cells = coloured(at, "top rule")
    assert (row, "GR") not in cells["pass"] | cells["fail"]
    assert (row, "SP1") in cells["pass"] | cells["fail"]  # its settled metrics keep their colour
    assert any("not settled" in c.value for c in at.caption)
    detail = open_page("app.py", run="llm-judge")
    assert any("not settled" in c.value for c in detail.caption if c.value.startswith(f"n scored {scored} of 6"))


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_built: Path):
    from tests.conftest import app_db

    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo_built.read_bytes())
    yield from app_db(path, monkeypatch)


@pytest.fixture(scope="module")
def demo_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from data import build_demo

    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo.build(path, emit=lambda _: None)
    return path
