"""AppTest for every dashboard page against a seeded DuckDB (tests/seed.py): deep links, failure
statuses, filters, thresholds in the URL, escaping, read-only mode, login gating and triage saves."""
from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from evaluators.dashboard import markup, reads, ui
from evaluators.dashboard.views import item as item_view
from evaluators.dashboard.views import runs as runs_view
from evaluators.storage import ownership, queries, writes
from tests.conftest import app_db, hold_write_lock
from tests.seed import INJECTION, set_scores

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


_COMPONENTS: dict[str, object] = {}


def new_app() -> AppTest:
    """An AppTest of the app. Each new AppTest rescans every installed package for Streamlit
    components (about 1.5 s here); the app uses none, so the first scan's result is reused."""
    at = AppTest.from_file(APP, default_timeout=30)
    if "manager" in _COMPONENTS:
        at._bidi_component_manager = _COMPONENTS["manager"]
    return at


def open_page(page: str, **params: str) -> AppTest:
    """Run one page of the app with these query params, the way a pasted link opens it."""
    at = new_app()
    if page != "app.py":
        at.switch_page(page)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    _COMPONENTS.setdefault("manager", at._bidi_component_manager)
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_expander(at: AppTest, label_start: str) -> Any:
    """Open the first expander whose label starts so, as a click does (it reruns the page), and return it:
    the Item page draws a raw exchange or a rule's evidence only once its expander is open."""
    closed = next(e for e in at.expander if e.label.startswith(label_start))
    assert not closed.children, "drawn while closed"
    at.session_state[closed.proto.id.split("-", 2)[2]] = True  # the widget id ends with the page's key
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return next(e for e in at.expander if e.label.startswith(label_start))


def frame_with(at: AppTest, column: str):
    """The first dataframe on the page that has this column."""
    for element in at.dataframe:
        if column in element.value.columns:
            return element.value
    raise AssertionError(f"no dataframe with column {column!r}")


def shown(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe with this column as the page shows it: a styled table's display text."""
    for element in at.dataframe:
        if column in element.value.columns:
            styled = element.proto.arrow_data.styler.display_values
            return convert_arrow_bytes_to_pandas_df(styled) if styled else element.value
    raise AssertionError(f"no dataframe with column {column!r}")


def all_text(at: AppTest) -> list[str]:
    """Every text the page shows, by element type, to check what reaches the browser."""
    kinds = ("markdown", "caption", "html", "code", "info", "warning", "error", "success", "title", "subheader")
    return [str(e.value) for kind in kinds for e in getattr(at, kind)]


# ---------------------------------------------------------------- Runs (home)

def test_home_lists_runs_with_judge_and_prompt_hashes(db: Path) -> None:
    at = open_page("app.py")
    runs = frame_with(at, "judge")
    assert list(runs["run"]) == ["llm-judge", "better-retriever", "weak-retriever"]
    runs = runs.set_index("run", drop=False)
    assert runs.loc["llm-judge", "judge"] == "openai/qwen2.5-coder-1.5b"
    # prompt files read as names; the hash is on hover (the column's tooltip), ✎ marks the run whose differ
    assert "claims ✎" in runs.loc["llm-judge", "prompts"].split(", ")
    assert "claims: c1a2b3c4d5e6 (✎ other runs: c9f8e7d6c5b4)" in column_help(at, "prompts")
    assert shown(at, "judge").set_index("run").loc["weak-retriever", "items"] == "6 of 6"


def column_help(at: AppTest, column: str) -> str:
    """The tooltip of a dataframe column's header (its column_config help)."""
    for element in at.dataframe:
        config = json.loads(element.proto.columns or "{}")
        if column in config:
            return config[column].get("help", "")
    raise AssertionError(f"no column config for {column!r}")


def test_home_prompts_read_as_names_not_hashes(db: Path) -> None:
    runs = frame_with(open_page("app.py"), "prompts").set_index("run")
    assert runs.loc["weak-retriever", "prompts"] == "claims, essential, groundedness"
    assert not any(re.search(r"[0-9a-f]{8}", cell) for cell in runs["prompts"])


def test_prompt_names_fold_batch_forms_and_mark_the_run_whose_file_differs() -> None:
    newest = json.dumps({"claims": "b" * 12, "claims_batch": "c" * 12, "groundedness": "g" * 12})
    older = json.dumps({"claims": "a" * 12, "claims_batch": "c" * 12, "groundedness": "g" * 12})
    cells, hover = runs_view.prompt_names([newest, older])
    assert cells == [["claims", "groundedness"], ["claims ✎", "groundedness"]]  # a tie: the newest run's is usual
    assert f"claims: {'b' * 12} (✎ other runs: {'a' * 12})" in hover and f"claims_batch: {'c' * 12}" in hover
    cells, _ = runs_view.prompt_names([older, newest, newest])
    assert cells == [["claims ✎", "groundedness"], ["claims", "groundedness"], ["claims", "groundedness"]]


def test_home_explains_how_to_read_it(db: Path) -> None:
    at = open_page("app.py")
    how = next(e for e in at.expander if e.label == "How to read this")
    text = " ".join(m.value for m in how.markdown)
    for needle in ("**SP1**", "**SP2**", "**SQC**", "**RP**", "**RQC**", "**SD**", "**GR**", "**Table 2**", "**Unsure**"):
        assert needle in text


def test_home_headline_counts_failures_apart_from_scores(db: Path) -> None:
    at = open_page("app.py", run="llm-judge")
    table = frame_with(at, "95% CI").set_index("metric")
    assert table.loc["SQC", "n scored"] == "5 of 6"
    assert table.loc["SQC", "unscored items"] == "1 timeout"
    assert table.loc["SQC", "failed verdicts"] == "6 timeout" and table.loc["SQC", "unsure verdicts"] == 0
    assert table.loc["GR", "unscored items"] == "1 empty, 1 error"
    assert table.loc["RP", "failed verdicts"] == "1 unparsed"
    # The mean is over scored items only: q02's timed-out SQC is not a 0.
    assert table.loc["SQC", "mean"] == pytest.approx(0.9)
    low, high = (float(x) for x in table.loc["SQC", "95% CI"].strip("[]").split(","))
    assert low <= 0.9 <= high and high <= 1.0
    assert {m.label: m.value for m in at.metric}["SQC"] == "0.90"


def test_home_threshold_change_is_written_to_url_and_read_back(db: Path) -> None:
    at = open_page("app.py", run="weak-retriever")
    # SP1 0, 1/3 and twice 1/2 are below 0.55 (half is not a majority); at 0.4 only 0 and 1/3 are.
    assert frame_with(at, "95% CI").set_index("metric").loc["SP1", "below threshold"] == "4 (67%)"
    at.slider(key="th_sp1").set_value(0.4).run()
    assert at.query_params["th_sp1"] == "0.4"
    assert frame_with(at, "95% CI").set_index("metric").loc["SP1", "below threshold"] == "2 (33%)"
    shared = open_page("app.py", run="weak-retriever", th_sp1="0.4")
    assert shared.slider(key="th_sp1").value == pytest.approx(0.4)
    assert frame_with(shared, "95% CI").set_index("metric").loc["SP1", "below threshold"] == "2 (33%)"


def test_home_histograms_draw_threshold_lines(db: Path) -> None:
    # plotly's histograms are drawn on demand; the table's distribution column is always there
    at = open_page("app.py", run="weak-retriever", th_gr="0.9")
    assert not at.get("plotly_chart")
    table = frame_with(at, "95% CI").set_index("metric")
    n_scored = int(table.loc["GR", "n scored"].split(" of ")[0])
    assert len(table.loc["GR", "distribution"]) == 10 and sum(table.loc["GR", "distribution"]) == n_scored
    at.toggle(key="hist").set_value(True).run()
    assert at.query_params["hist"] == "True"
    at = open_page("app.py", run="weak-retriever", th_gr="0.9", hist="1")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    lines = [s["x0"] for s in spec["layout"]["shapes"]]
    assert 0.9 in lines and len(spec["data"]) == 7


def test_new_run_appears_without_restart(db: Path) -> None:
    at = open_page("app.py")
    assert len(frame_with(at, "judge")) == 3
    from evaluators.core.records import Item, Run, Score, Status
    ownership.start_run(db, Run("fresh", "offline", {}, {}), 1)
    writes.write_batch(db, "fresh", items=[Item("z1", "q?", ("s",), "r")],
                      scores=[Score("z1", "sp1", 1.0, 1, 1, Status.OK)])
    at.run()
    assert "fresh" in list(frame_with(at, "judge")["run"])


def test_missing_database_shows_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TRIAGE_DB", str(tmp_path / "absent.duckdb"))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = open_page("app.py")
    assert any("No database" in w.value for w in at.warning)


# ---------------------------------------------------------------- Run

def ids(at: AppTest) -> list[str]:
    return list(frame_with(at, "rules")["item_id"])


def test_run_deep_link_filters_by_rule(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="weak-retriever", rule="T2.2")
    assert ids(at) == ["q02"]
    assert at.multiselect(key="rule").value == ["T2.2"]


def test_run_filters_below_threshold_search_metadata_and_quadrant(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="weak-retriever", sort="item_id")  # the filters, in id order
    assert len(ids(at)) == 6
    at.multiselect(key="below").set_value(["gr"]).run()
    assert ids(at) == ["q01", "q02", "q05"] and at.query_params["below"] == "gr"
    # a filter on scores: the item opens on the verdicts that made it low
    assert frame_with(at, "rules")["open"].iloc[0] == "Item?run=weak-retriever&item=q01&tab=Verdicts"
    at.multiselect(key="below").set_value([]).run()
    at.text_input(key="q").set_value("battery").run()
    assert ids(at) == ["q06"] and at.query_params["q"] == "battery"
    at.text_input(key="q").set_value("").run()
    at.selectbox(key="mk").set_value("topic").run()
    at.selectbox(key="mv").set_value("billing").run()
    assert ids(at) == ["q01", "q05"] and at.query_params["mv"] == "billing"
    assert frame_with(at, "rules")["open"].iloc[0] == "Item?run=weak-retriever&item=q01"  # a search: its query
    quad = open_page("pages/1_Run.py", run="weak-retriever", quad="sqc:low,rqc:low", sort="item_id")
    assert ids(quad) == ["q02"]


def test_run_failure_filter_shows_failed_metrics(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="llm-judge", failed="1", sort="item_id")
    table = frame_with(at, "rules").set_index("item_id")
    assert list(table.index) == ["q01", "q02", "q03", "q06"]
    assert "SQC timeout" in table.loc["q02", "unscored"]
    assert table.loc["q02", "sqc"] != table.loc["q02", "sqc"]  # NaN (unscored), not 0
    assert table.loc["q01", "unscored"] == "1 failed verdict"  # a verdict failed, every metric scored
    everything = frame_with(open_page("pages/1_Run.py", run="llm-judge"), "rules").set_index("item_id")
    assert (everything.loc[everything.index.difference(table.index), "unscored"] == "").all()  # empty, never "0"


def test_unscored_text_names_each_metric_s_reason_and_counts_failed_verdicts() -> None:
    assert markup.unscored_text("gr:timeout, sqc:unsure", 2) == "GR timeout, SQC unsure; 2 failed verdicts"
    assert markup.unscored_text("rqc:unsure", 0) == "RQC unsure"  # unsure: unscored, and no failure
    assert markup.unscored_text("", 1) == "1 failed verdict" and markup.unscored_text("", 0) == ""


def test_run_sorting(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="weak-retriever", sort="gr", desc="1")
    table = frame_with(at, "rules")
    assert list(table["gr"]) == sorted(table["gr"], reverse=True)
    at.selectbox(key="sort").set_value("sp1").run()
    assert at.query_params["sort"] == "sp1" and frame_with(at, "rules")["sp1"].iloc[0] == 1.0


def test_run_row_click_opens_the_item(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="weak-retriever", rule="T2.5")
    at.session_state["items_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert at.title[0].value == "Item"
    assert at.query_params["item"] == "q05" and at.query_params["run"] == "weak-retriever"
    assert "tab" not in at.query_params  # a rule's evidence is above the tabs
    below = open_page("pages/1_Run.py", run="weak-retriever", below="gr", sort="item_id")
    below.session_state["items_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    below.run()
    assert below.query_params["item"] == "q01" and below.query_params["tab"] == "Verdicts"


# ---------------------------------------------------------------- Item

def test_item_shows_failures_as_failures_not_zeros(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="llm-judge", item="q02")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["SQC"] == "⚠" and metrics["RQC"] == "⚠"  # a glyph on the card, its status beneath
    assert metrics["SP1"] == "0.00"  # a real, scored 0 stays a 0
    assert sum(c.value.startswith("⚠ timeout · ") for c in at.caption) == 2
    subq = frame_with(at, "sub-question")
    assert set(subq["source 0"]) == {"⚠ timeout"} and set(subq["SQC covered"]) == {"⚠ timeout"}
    timeout = next(e for e in at.expander if "SQC" in e.label and "timeout" in e.label)
    assert any("Timeout: no reply" in x.value for x in open_expander(at, timeout.label).error)


def test_item_raw_exchange_of_an_unparsed_verdict(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="llm-judge", item="q01", tab="Response")
    claims = frame_with(at, "claim").set_index("#")
    assert claims.loc[1, "RP"] == "⚠ unparsed" and claims.loc[1, "GR"] == "✗ 0"
    exp = open_expander(at, "RP · claim 1")
    codes = [c.value for c in exp.code]
    assert "I believe these claims are mostly fine." in codes
    assert any("latency" in c.value and "tokens" in c.value for c in exp.caption)


def test_item_offline_judge_exchange_is_its_explanation(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q01", tab="Response")
    exp = open_expander(at, "GR · claim 1")
    assert any("offline judge: cosine 0.31" in c.value for c in exp.code)


def test_item_layout_subquestions_sources_claims_and_sd(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q06")
    subq = frame_with(at, "sub-question")
    assert list(subq.columns[2:]) == ["source 0", "source 1", "whole set", "SQC covered", "RQC"]
    sd = frame_with(open_page("pages/2_Item.py", run="weak-retriever", item="q06", tab="Response"), "sentence")
    assert list(sd["SD"]) == ["distinct", "repeats", "repeats"]
    assert sd["similarity"].iloc[1] == pytest.approx(0.93)
    sources = open_page("pages/2_Item.py", run="weak-retriever", item="q06", tab="Sources")
    assert any(m.value.startswith("**Source 1** · SP1 ✗ 0") for m in sources.markdown)
    rules = frame_with(at, "fix")
    # One of its two sources is not essential (SP1 1/2, no majority) while the query is covered: T2.3 too.
    assert list(rules["rule"]) == ["T2.1", "T2.3"] and rules["fix"].iloc[0] == "Prompt or Generator"


def test_item_rules_follow_thresholds_in_the_url(db: Path) -> None:
    # q05's RP (1/3) is no longer low at 0.3: T2.5 goes; its GR (1/3) with its query covered is our X1.
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q05", th_rp="0.3")
    assert list(frame_with(at, "fix")["rule"]) == ["X1 (ours)"]
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q05", th_rp="0.3", th_gr="0.3")
    assert any("No Table-2 rule fires" in s.value for s in at.success)


def test_item_html_injection_renders_as_text(db: Path) -> None:
    tabs = [open_page("pages/2_Item.py", run="weak-retriever", item="q05", tab=t) for t in item_view.ITEM_TABS]
    texts = [t for at in tabs for t in all_text(at)]
    assert any(html.escape(INJECTION) in t for t in texts)  # shown, as text
    for at in tabs:
        for t in (e.value for e in at.html):
            assert "<script" not in t and "<b>" not in t
        for t in (e.value for e in at.markdown):
            assert "<script" not in t


def test_item_unknown_id_warns(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="weak-retriever", item="nope")
    assert any("no item with id 'nope'" in w.value for w in at.warning)


def frame_columns(at: AppTest) -> set[str]:
    """Every column of every dataframe the page sent."""
    return {c for element in at.dataframe for c in element.value.columns}


def n_verdict_frames(at: AppTest) -> int:
    """Dataframes of verdicts: the Verdicts tab's grid and the fired rules' evidence (above the tabs)."""
    return sum(list(element.value.columns) == item_view.EVIDENCE_COLUMNS for element in at.dataframe)


def test_item_sends_only_its_open_tab(db: Path) -> None:
    """A hidden tab's content never reaches the browser: the Verdicts grid comes with ?tab=Verdicts only,
    and the sub-questions with the default Query tab only; what sits above the tabs comes with both."""
    query = open_page("pages/2_Item.py", run="weak-retriever", item="q06")
    verdicts = open_page("pages/2_Item.py", run="weak-retriever", item="q06", tab="Verdicts")
    assert n_verdict_frames(verdicts) == n_verdict_frames(query) + 1  # the grid, on top of the rules' evidence
    assert [c for c in all_text(verdicts) if c.startswith("Every verdict with p")]
    assert not [c for c in all_text(query) if c.startswith("Every verdict with p")]
    assert "sub-question" in frame_columns(query) and "sub-question" not in frame_columns(verdicts)
    assert not [e for e in query.expander if e.label == "Correct a verdict"]
    assert [e for e in verdicts.expander if e.label == "Correct a verdict"]
    assert "fix" in frame_columns(query) and "fix" in frame_columns(verdicts)  # the fired rules
    assert query.session_state["tab"] == "Query" and verdicts.session_state["tab"] == "Verdicts"
    nav = {p.proto.label: p.proto.query_string for p in verdicts.get("page_link")}  # Previous stays on Verdicts
    assert "tab=Verdicts" in nav["◀ Previous"] and "tab=" not in nav["Back to Run"]
    assert "tab=" not in {p.proto.label: p.proto.query_string for p in query.get("page_link")}["◀ Previous"]
    unknown = open_page("pages/2_Item.py", run="weak-retriever", item="q06", tab="Nope")
    assert "sub-question" in frame_columns(unknown) and "tab" not in unknown.query_params  # ignored, dropped


# ---------------------------------------------------------------- Compare

def test_compare_warns_on_different_judge_and_prompts(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="llm-judge")
    warnings = " ".join(w.value for w in at.warning)
    assert "Different judges" in warnings and "Different prompt files" in warnings
    same = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever")
    assert not same.warning


def test_compare_deltas_carry_paired_intervals(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever")
    table = frame_with(at, "ci_low").set_index("metric")
    assert table.loc["SQC", "delta"] == pytest.approx(0.25)
    assert table.loc["RP", "delta"] == 0 and table.loc["RP", "real"].startswith("noise")
    for _, row in table.iterrows():
        assert row["ci_low"] <= row["delta"] <= row["ci_high"]
        assert row["real"].startswith("✓") == (row["ci_low"] > 0 or row["ci_high"] < 0)
    assert len(at.get("plotly_chart")) == 1


def test_compare_crossed_items_and_claim_diff(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever", xm="sqc", xd="better")
    crossed = frame_with(at, "fell below").set_index("metric")
    assert crossed.loc["SQC", "rose above"] == 2 and crossed.loc["SQC", "fell below"] == 0
    assert list(frame_with(at, "open")["item_id"]) == ["q02", "q01"]
    assert frame_with(at, "open")["open"].iloc[0] == "Item?run=better-retriever&item=q02&tab=Verdicts"
    at.text_input(key="item").set_value("q01").run()
    diff = frame_with(at, "change")
    changes = dict(zip(diff["claim"], diff["change"]))
    assert changes["Refunds are requested by email to billing."] == "gone"
    assert changes["Refunds are requested under Settings > Billing."] == "new"
    assert changes["Refunds are possible within 30 days."] == "same"
    assert at.query_params["item"] == "q01"


def test_compare_heads_each_run_s_columns_before_and_after_with_the_run_on_hover(db: Path) -> None:
    """A run's name may be wider than its column: every table of Compare with a column per run (items that
    crossed, the claim diff, an item's flips) heads them before and after and names the run on hover."""
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever", xm="sqc", xd="better",
                   item="q01")
    tables = [json.loads(e.proto.columns or "{}") for e in at.dataframe if "weak-retriever" in e.value.columns]
    assert len(tables) == 3
    for config in tables:
        assert config["weak-retriever"]["label"] == "before" and config["better-retriever"]["label"] == "after"
        assert "weak-retriever" in config["weak-retriever"]["help"]
        assert "better-retriever" in config["better-retriever"]["help"]


FIELDS = ("item_id", "run_id", "source_fact")


@pytest.mark.parametrize(
    ("page", "params"),
    [
        ("pages/1_Run.py", {"run": "weak-retriever"}),
        ("pages/3_Compare.py", {"run": "weak-retriever", "other": "better-retriever", "item": "q01"}),
        ("pages/5_Triage.py", {}),
        ("pages/8_Trust.py", {"run": "weak-retriever", "tab": "Label next"}),
        ("pages/2_Item.py", {"run": "weak-retriever", "item": "q01", "tab": "Sources"}),
    ],
)
def test_no_table_is_headed_by_a_field_name(db: Path, page: str, params: dict[str, str]) -> None:
    """A column of items, runs or source facts is headed by what it holds (item, run, fact), not its field."""
    writes.add_triage(db, "weak-retriever", "q01", "confirmed", "Retriever", "misses the refunds chunk", "a")
    at = open_page(page, **params)
    keyed = [e for e in at.dataframe if set(FIELDS) & set(e.value.columns)]
    assert keyed, "no table with an item, run or fact column"
    for element in keyed:
        config = json.loads(element.proto.columns or "{}")
        headers = [config.get(str(c), {}).get("label") or str(c) for c in element.value.columns]
        assert not set(FIELDS) & set(headers), headers


def test_compare_claim_verdict_change(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="llm-judge", item="q01")
    diff = frame_with(at, "change").set_index("claim")
    assert diff.loc["Refunds are requested by email to billing.", "change"] == "changed verdict"


def test_compare_preference_mode_agreement(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever", pref="1",
                   better="better-retriever")
    table = frame_with(at, "agreement").set_index("metric")
    assert table.loc["SQC", "agree"] == 2 and table.loc["SQC", "ties"] == 4
    assert table.loc["SQC", "agreement"] == pytest.approx(0.333)
    at.radio(key="better").set_value("weak-retriever").run()
    assert frame_with(at, "agreement").set_index("metric").loc["SQC", "disagree"] == 2


# ---------------------------------------------------------------- Diagnosis

def test_diagnosis_ranks_rules_and_fix_first(db: Path) -> None:
    at = open_page("pages/4_Diagnosis.py", run="weak-retriever")
    rules = frame_with(at, "fix").set_index("rule")
    # T2.3 on q04 (SP1 1/3) and q06 (SP1 1/2); every other rule on one item.
    assert rules["items"].to_dict() == {r: 2 if r == "T2.3" else 1 for r in rules.index}
    assert rules.loc["T2.2", "fix"] == "Retriever or Source text"
    assert any(m.value.startswith("1. **Prompt**: 4 items") for m in at.markdown)
    links = {p.proto.label: p.proto.query_string for p in at.get("page_link")}
    assert "quad=sqc%3Alow%2Crqc%3Alow" in links["SQC low · RQC low: 1 item"]
    assert "rule=T2.2" in links["T2.2 · SQC low, RQC low: 1 item"]
    assert {json.loads(c.proto.spec)["data"][0]["type"] for c in at.get("plotly_chart")} == {"heatmap"}
    at.toggle(key="plots").set_value(True).run()  # the scatter plots are drawn on demand
    assert at.query_params["plots"] == "True"
    charts = at.get("plotly_chart")
    assert len(charts) == 5
    spec = json.loads(charts[0].proto.spec)
    assert {s["type"] for s in spec["layout"]["shapes"]} == {"line"}
    assert len(open_page("pages/4_Diagnosis.py", run="weak-retriever", plots="1").get("plotly_chart")) == 5


def test_diagnosis_quadrant_grids_carry_the_counts_of_the_links(db: Path) -> None:
    set_scores(db, "weak-retriever", "sqc", {"q04": 0.2})  # SQC low, RQC high: 2 items; high, low: 1
    at = open_page("pages/4_Diagnosis.py", run="weak-retriever", th_rqc="0.6")
    listed: dict[str, dict[tuple[str, str], int]] = {}
    for link in at.get("page_link"):
        found = re.fullmatch(r"(\w+) (low|high) · (\w+) (low|high): (\d+) items?", link.proto.label)
        if found:
            x, lx, y, ly, n = found.groups()
            listed.setdefault(f"{x}×{y}".lower(), {})[(lx, ly)] = int(n)
    drawn = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        (grid,) = spec["data"]
        x = spec["layout"]["xaxis"]["title"]["text"].split()[0].lower()
        y = spec["layout"]["yaxis"]["title"]["text"].split()[0].lower()
        cells = {(lx, ly): grid["z"][j][i] for j, ly in enumerate(grid["y"]) for i, lx in enumerate(grid["x"])}
        drawn[f"{x}×{y}"] = {quad: n for quad, n in cells.items() if n}
    assert len(drawn) == 5 and drawn == listed
    assert drawn["sqc×rqc"] == {("low", "low"): 1, ("low", "high"): 2, ("high", "low"): 1, ("high", "high"): 2}
    ticks = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["yaxis"]["ticktext"]
    assert ticks == ["low (< 0.6)", "high (≥ 0.6)"]  # RQC's threshold: the sidebar's, from the URL
    grid = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert grid["text"][0] == ["T2.2", "T2.4"]  # the low-RQC row names the rules read there


def test_diagnosis_threshold_change_moves_counts(db: Path) -> None:
    at = open_page("pages/4_Diagnosis.py", run="weak-retriever")
    at.slider(key="th_sqc").set_value(0.4).run()
    assert at.query_params["th_sqc"] == "0.4"
    rules = frame_with(at, "fix").set_index("rule")
    assert rules.loc["T2.6", "items"] == 0  # q01's SQC 0.5 is now high


def test_diagnosis_says_busy_when_the_run_profile_it_needs_is_locked(db: Path) -> None:
    """A threshold change counts the rules from the run's profile, cached per band; when it must be read
    again while another process writes, the page says the database is busy and draws no counts."""
    at = open_page("pages/4_Diagnosis.py", run="weak-retriever")
    reads._profile.clear()  # as once the cache let it go: the next threshold must read the file
    holder = hold_write_lock(db, seconds=30.0)  # past the readers' 10 s deadline
    try:
        at.slider(key="th_sqc").set_value(0.4).run(timeout=60)
        assert not at.exception
        assert any("busy" in w.value for w in at.warning)
        assert not any("fix" in d.value.columns for d in at.dataframe)
    finally:
        holder.terminate()
        holder.wait(timeout=20)


def test_item_at_a_band_with_corrections_says_busy_when_locked(db: Path) -> None:
    """An item's scores at the URL's band with people's corrections are recomputed from its verdicts on
    the file; while another process writes past the readers' deadline the page says the database is busy
    and draws no scores, and once the file is free it draws them."""
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q04")  # the file checked, the runs listed
    holder = hold_write_lock(db, seconds=30.0)  # past the readers' 10 s deadline
    try:
        at.query_params.update({"band": "0.3,0.7", "scores": "corrected"})
        at.run(timeout=60)
        assert not at.exception
        assert any("busy" in w.value for w in at.warning)
        assert not at.metric
    finally:
        holder.terminate()
        holder.wait(timeout=20)
    at.run(timeout=60)
    assert not at.exception and at.metric and not any("busy" in w.value for w in at.warning)


# ---------------------------------------------------------------- Triage, read-only, login

def test_triage_save_then_listed_and_exported(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q02", tab="Triage")
    assert at.selectbox(key="triage_component").value == "Retriever"  # suggested by T2.2
    at.selectbox(key="triage_label").set_value("confirmed")
    at.text_area(key="triage_note").set_value("corpus lacks the founding facts")
    next(b for b in at.button if b.label == "Save triage note").click().run()
    assert any("saved" in s.value for s in at.success)
    listed = open_page("pages/5_Triage.py")
    notes = frame_with(listed, "note")
    assert list(notes["note"]) == ["corpus lacks the founding facts"]
    # no login: the note is signed as the server's OS user, with no name to type
    assert notes["author"].iloc[0] == ownership.os_user() and notes["component"].iloc[0] == "Retriever"
    csv = listed.get("download_button")
    assert csv


def test_triage_save_retries_a_short_lock(db: Path) -> None:
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q01", tab="Triage")
    holder = hold_write_lock(db, seconds=1.0)
    try:
        at.text_area(key="triage_note").set_value("saved after the lock")
        next(b for b in at.button if b.label == "Save triage note").click().run()
    finally:
        holder.wait(timeout=20)
    assert any("saved" in s.value for s in at.success)
    assert list(queries.items.triage_notes(db)["note"]) == ["saved after the lock"]


def test_triage_save_says_busy_when_locked(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q01", tab="Triage")
    monkeypatch.setattr(ui, "SAVE_DEADLINE_S", 0.3)
    holder = hold_write_lock(db, seconds=3.0)
    try:
        at.text_area(key="triage_note").set_value("lost?")
        next(b for b in at.button if b.label == "Save triage note").click().run()
        assert not at.exception
        assert any("busy" in w.value for w in at.warning)
    finally:
        holder.terminate()
        holder.wait(timeout=20)


def test_read_only_mode_hides_writes(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TRIAGE_READ_ONLY", "1")
    at = open_page("pages/2_Item.py", run="weak-retriever", item="q01", tab="Triage")
    assert not [b for b in at.button if b.label == "Save triage note"]
    assert any("Read-only" in i.value for i in at.sidebar.info)
    upload = open_page("pages/6_Evaluate.py")
    assert not upload.get("file_uploader") and any("Read-only" in i.value for i in upload.info)


def test_login_gate_when_auth_is_configured(db: Path) -> None:
    at = new_app()
    at.secrets["auth"] = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x"}
    at.user = {"is_logged_in": False}
    at.run()
    assert [b.label for b in at.button] == ["Log in"] and not at.dataframe
    at.user = {"is_logged_in": True, "email": "lead@example.com"}
    at.switch_page("pages/2_Item.py")
    at.query_params.update({"run": "weak-retriever", "item": "q01", "tab": "Triage"})
    at.run()
    assert not at.exception and at.dataframe
    assert "triage_author" not in [t.key for t in at.text_input]  # the author is the login email


# ---------------------------------------------------------------- Evaluate

def test_evaluate_reports_malformed_upload(db: Path) -> None:
    pytest.importorskip("evaluators.runs.ingest")
    at = open_page("pages/6_Evaluate.py")
    at.file_uploader(key="upload").set_value(("bad.jsonl", b'{"query": "q"}\nnot json\n', "application/json"))
    at.run()
    next(b for b in at.button if b.key == "evaluate").click().run()
    assert any("cannot be evaluated" in e.value for e in at.error)
    problems = " ".join(c.value for c in at.code)
    assert "bad.jsonl:1" in problems and "bad.jsonl:2" in problems
    assert len(queries.runs.runs(db)) == 3  # nothing was written


def test_evaluate_offline_run_appears(db: Path) -> None:
    pytest.importorskip("evaluators.runs.runner")
    at = open_page("pages/6_Evaluate.py")
    rows = [{"id": f"u{i}", "query": "How long is the refund window?",
             "sources": ["Refunds are accepted within 30 days.", "Offices close on holidays."],
             "response": "The refund window is 30 days. It is 30 days."} for i in range(2)]
    at.file_uploader(key="upload").set_value(("two.jsonl", "\n".join(map(json.dumps, rows)).encode(), "text/plain"))
    at.run()
    at.multiselect(key="eval_metrics").set_value(["sp1", "sd"])
    at.text_input(key="run_name").set_value("uploaded")
    next(b for b in at.button if b.key == "evaluate").click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert any("Run uploaded finished" in s.value for s in at.success)
    assert "uploaded" in list(queries.runs.runs(db)["run_id"])
    home = open_page("app.py", run="uploaded")
    assert {m.label for m in home.metric} == {"SP1", "SD"}


def test_evaluate_names_a_taken_run_in_the_dashboard_s_words(db: Path) -> None:
    pytest.importorskip("evaluators.runs.runner")
    at = open_page("pages/6_Evaluate.py")
    row = {"id": "u1", "query": "How long is the refund window?", "sources": ["Refunds within 30 days."],
           "response": "30 days."}
    at.file_uploader(key="upload").set_value(("one.jsonl", json.dumps(row).encode(), "text/plain"))
    at.run()
    at.multiselect(key="eval_metrics").set_value(["sp1"])
    at.text_input(key="run_name").set_value("weak-retriever")  # seeded with other params
    next(b for b in at.button if b.key == "evaluate").click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    errors = " ".join(e.value for e in at.error)
    assert "already has a run named 'weak-retriever'" in errors and "Run name" in errors
    assert "--run" not in " ".join(all_text(at))
    assert sorted(queries.runs.runs(db)["run_id"]) == ["better-retriever", "llm-judge", "weak-retriever"]


# ---------------------------------------------------------------- navigation

def test_every_page_opens_from_its_file_with_its_title(db: Path) -> None:
    for key, page in ui.PAGES.items():
        at = open_page(page.file, run="weak-retriever")
        assert at.title[0].value == page.title, key


def test_navigation_titles_and_url_paths(db: Path) -> None:
    at = open_page("app.py")
    pages = {info["url_pathname"]: info for info in at._registered_pages.values()}  # st.navigation's registry
    assert list(pages) == ["", "Run", "Item", "Compare", "Diagnosis", "Triage", "Trust", "Sources", "Trends",
                           "Evaluate", "Robustness"]
    assert [p["page_name"] for p in pages.values()] == [
        "Runs", "Run", "Item", "Compare", "Diagnosis", "Triage", "Trust", "Sources", "Trends", "Evaluate", "Robustness"]


def test_links_name_the_run_and_navigation_keeps_it(db: Path) -> None:
    at = open_page("app.py")
    assert at.query_params["run"] == "llm-judge"  # the default is written out: a pasted link stays on it
    at.selectbox(key="run").set_value("weak-retriever").run()
    at.query_params.clear()  # the sidebar navigation drops the query string
    at.switch_page("pages/4_Diagnosis.py").run()
    assert not at.exception and at.query_params["run"] == "weak-retriever"


# ---------------------------------------------------------------- first visit on the demo

@pytest.fixture(scope="module")
def demo_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo database (three THELMA runs, then two GRAMMAR runs, the newest)."""
    from data import build_demo

    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo.build(db, emit=lambda _: None)
    return db


@pytest.fixture
def demo(demo_built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "demo.duckdb"
    path.write_bytes(demo_built.read_bytes())
    yield from app_db(path, monkeypatch)


def test_home_and_pickers_open_on_the_newest_thelma_run_not_a_grammar_one(demo: Path) -> None:
    newest = list(queries.runs.runs(demo)["run_id"])
    assert newest[0] in queries.grammar.grammar_runs(demo)  # the newest run is a GRAMMAR one: not what to open on
    at = open_page("app.py")
    assert at.query_params["run"] == "verbose_generator"
    assert "verbose\\_generator" in at.header[0].value
    compare = open_page("pages/3_Compare.py")
    # the run before the newest, then the newest, as the home page's link pairs them
    assert (compare.query_params["run"], compare.query_params["other"]) == ("better_retriever", "verbose_generator")
    assert open_page("pages/1_Run.py").query_params["run"] == "verbose_generator"
    assert open_page("app.py", run="grammar-bm25").query_params["run"] == "grammar-bm25"  # asked for: kept


def test_readme_commands_are_plain_make_because_the_makefile_sets_the_environment() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Two commands for a fresh machine", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    assert [line for line in block.splitlines() if line and not line.startswith("#")] == ["make run", "make test"]
    # a fresh shell with nothing set: the Makefile alone gives every recipe the offline environment
    shown = subprocess.run(["make", "--no-print-directory", "--eval", "env-check: ; @env", "env-check"], cwd=ROOT,
                           env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True).stdout
    env = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    assert {k: env.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
                                    "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_MODE")} == {
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().endswith("make test")
