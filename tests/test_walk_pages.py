"""One click from every table that lists items (AppTest): a row's click opens the item in the same tab on
the tab it means, with the list it came from in the URL; the Item page's Back returns to that table with
its filters, and ◀ Previous / ▶ Next walk the same filtered list."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from evaluators.core.records import Label
from evaluators.dashboard import tables
from evaluators.dashboard.views import walk
from evaluators.storage import store, writes
from tests.test_pages import frame_with, new_app, open_page

ROW0 = {"selection": {"rows": [0], "columns": [], "cells": []}}


def click(at: AppTest, table: str, row: int = 0) -> AppTest:
    """Select one row of a table, as a click on its row does, and run the page."""
    at.session_state[table] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_item(params: dict[str, str]) -> AppTest:
    """The Item page at a link's query params (which may hold the Run page's `page`)."""
    at = new_app()
    at.switch_page("pages/2_Item.py")
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def links(at: AppTest) -> dict[str, dict[str, str]]:
    """The page's links by label: their query params."""
    return {p.proto.label: {k: v[0] for k, v in parse_qs(p.proto.query_string).items()} for p in at.get("page_link")}


def test_run_click_walks_the_filtered_sorted_list_and_back_keeps_it(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="weak-retriever", below="gr,sp1", sort="gr", desc="1")
    listed = list(frame_with(at, "rules")["item_id"])
    assert len(listed) >= 3
    click(at, "items_table", 1)
    assert at.title[0].value == "Item"
    q = at.query_params
    assert (q["item"], q["from"], q["below"], q["sort"], q["desc"], q["tab"]) == (
        listed[1], "run", "gr,sp1", "gr", "1", "Verdicts")
    nav = links(at)
    assert nav["◀ Previous"]["item"] == listed[0] and nav["▶ Next"]["item"] == listed[2]  # the list, not id order
    assert nav["▶ Next"]["below"] == "gr,sp1" and nav["▶ Next"]["tab"] == "Verdicts"
    back = nav["Back to Run"]
    assert (back["below"], back["sort"], back["desc"], back["run"]) == ("gr,sp1", "gr", "1", "weak-retriever")
    assert "item" not in back and "from" not in back
    last = open_item({**nav["▶ Next"], "item": listed[-1]})
    assert "▶ Next" not in links(last) and links(last)["◀ Previous"]["item"] == listed[-2]


def test_diagnosis_click_opens_the_rules_first_item_on_its_evidence(db: Path) -> None:
    at = open_page("pages/4_Diagnosis.py", run="weak-retriever")
    top = frame_with(at, "fix")["rule"].iloc[0]
    rid = top.split()[0]
    click(at, "rules_table")
    assert at.title[0].value == "Item"
    assert (at.query_params["from"], at.query_params["rule"]) == ("diagnosis", rid)
    firing = list(frame_with(open_page("pages/1_Run.py", run="weak-retriever", rule=rid), "rules")["item_id"])
    assert at.query_params["item"] == firing[0]
    nav = links(at)
    assert nav["Back to Diagnosis"]["run"] == "weak-retriever"
    if len(firing) > 1:
        assert nav["▶ Next"]["item"] == firing[1] and nav["▶ Next"]["rule"] == rid


def test_triage_click_opens_the_note_and_next_walks_the_notes_of_every_run(db: Path) -> None:
    writes.add_triage(db, "weak-retriever", "q04", "confirmed", "Retriever", "first", "a")
    writes.add_triage(db, "better-retriever", "q01", "confirmed", "Generator", "second", "a")
    at = open_page("pages/5_Triage.py", labels="confirmed")
    notes = frame_with(at, "note")
    click(at, "triage_table")
    q = at.query_params
    assert (q["run"], q["item"], q["tab"], q["from"], q["fr"], q["labels"]) == (
        notes["run_id"].iloc[0], notes["item_id"].iloc[0], "Triage", "triage", "", "confirmed")
    nav = links(at)
    assert (nav["▶ Next"]["run"], nav["▶ Next"]["item"]) == (notes["run_id"].iloc[1], notes["item_id"].iloc[1])
    assert "run" not in nav["Back to Triage"] and nav["Back to Triage"]["labels"] == "confirmed"


def test_compare_click_opens_the_crossed_item_and_back_returns_to_the_pair(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever", xm="sqc", xd="better")
    assert list(frame_with(at, "open")["item_id"]) == ["q02", "q01"]
    click(at, "crossed_items")
    q = at.query_params
    assert (q["run"], q["item"], q["tab"], q["from"], q["fr"]) == (
        "better-retriever", "q02", "Verdicts", "compare", "weak-retriever")
    nav = links(at)
    assert nav["▶ Next"]["item"] == "q01" and "◀ Previous" not in nav  # the crossed list, not id order
    back = nav["Back to Compare"]
    assert (back["run"], back["other"], back["xm"], back["xd"]) == (
        "weak-retriever", "better-retriever", "sqc", "better")


def test_trust_queue_click_opens_the_item_and_back_returns_to_the_queue(db: Path) -> None:
    at = open_page("pages/8_Trust.py", run="weak-retriever", tab="Label next")
    first = frame_with(at, "reason")["item_id"].iloc[0]
    click(at, "queue_table")
    assert (at.title[0].value, at.query_params["item"], at.query_params["from"]) == ("Item", first, "trust")
    nav = links(at)
    assert nav["Back to Trust"]["tab"] == "Label next"
    queue = list(frame_with(open_page("pages/8_Trust.py", run="weak-retriever", tab="Label next"), "reason")["item_id"])
    assert nav["▶ Next"]["item"] == queue[1] and nav["▶ Next"]["ft"] == "Label next"  # the queue's order


def test_sources_click_opens_the_retrieving_item_and_next_walks_the_retrievals(db: Path) -> None:
    at = click(open_page("pages/9_Sources.py", runs="weak-retriever,better-retriever"), "retrieved_table")
    source = at.query_params["source"]
    found = frame_with(at, "position")
    assert len(found) >= 2
    click(at, "retrievals", 0)
    q = at.query_params
    assert (q["item"], q["tab"], q["from"], q["source"]) == (found["item_id"].iloc[0], "Sources", "sources", source)
    nav = links(at)
    assert (nav["▶ Next"]["run"], nav["▶ Next"]["item"]) == (found["run_id"].iloc[1], found["item_id"].iloc[1])
    assert nav["Back to Sources"]["source"] == source


def test_a_list_in_the_url_that_makes_no_sense_falls_back_without_an_error(db: Path) -> None:
    for junk in (
        {"from": "run", "page": "-3", "below": "zz", "sort": "nope", "desc": "x", "quad": "sp1:odd", "rule": "T9"},
        {"from": "compare", "cl": "crossed", "xm": "sqc", "fr": "no-such-run", "xd": "sideways"},
        {"from": "triage", "fr": "no-such-run", "labels": "odd"},
        {"from": "sources", "source": "nope", "runs": "no-such-run"},
        {"from": "trust", "ft": "Label next"},
        {"from": "elsewhere"},
    ):
        at = open_item({"run": "weak-retriever", "item": "q03", **junk})
        assert at.title[0].value == "Item" and "Back to" in " ".join(links(at)), junk


def test_next_and_previous_cross_the_run_tables_pages(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = list(frame_with(open_page("pages/1_Run.py", run="weak-retriever", sort="sp2"), "rules")["item_id"])
    monkeypatch.setattr(walk, "PAGE_SIZE", 2)  # the Run page reads its page size from walk
    at = open_page("pages/1_Run.py", run="weak-retriever", sort="sp2")
    assert list(frame_with(at, "rules")["item_id"]) == listed[:2]
    nav = links(click(at, "items_table", 1))
    assert (nav["▶ Next"]["item"], nav["▶ Next"]["page"]) == (listed[2], "2")  # the first row of page 2
    back = links(open_item(nav["▶ Next"]))
    assert (back["◀ Previous"]["item"], back["◀ Previous"]["page"]) == (listed[1], "1")
    assert back["▶ Next"]["item"] == listed[3] and back["Back to Run"]["page"] == "2"


def test_compare_flips_click_walks_the_flips_list_and_back_returns_to_the_pair(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever", xm="sqc")
    listed = list(frame_with(at, "flips")["item_id"])
    assert listed == ["q02", "q01"]  # most flips first, not id order
    click(at, "flip_items", 0)
    q = at.query_params
    assert (q["run"], q["item"], q["tab"], q["from"], q["cl"], q["fr"]) == (
        "better-retriever", "q02", "Verdicts", "compare", "flips", "weak-retriever")
    nav = links(at)
    assert nav["▶ Next"]["item"] == "q01" and "◀ Previous" not in nav  # the flips, not id order
    back = nav["Back to Compare"]
    assert (back["run"], back["other"], back["xm"], back["item"]) == (
        "weak-retriever", "better-retriever", "sqc", "q02")
    last = links(open_item(nav["▶ Next"]))
    assert "▶ Next" not in last and last["◀ Previous"]["item"] == "q02"


def test_compare_retrieval_click_walks_the_moved_sources_items_across_both_runs(db: Path) -> None:
    at = open_page("pages/3_Compare.py", run="weak-retriever", other="better-retriever")
    moved = frame_with(at, "ledger")
    pairs = list(dict.fromkeys(
        ("weak-retriever" if c == "dropped" else "better-retriever", i) for c, i in zip(moved["change"], moved["item_id"])))
    assert len(pairs) >= 3
    at.session_state["retrieval_changes"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert (at.query_params["run"], at.query_params["item"], at.query_params["cl"]) == (*pairs[0], "moved")
    nav = links(at)
    assert (nav["▶ Next"]["run"], nav["▶ Next"]["item"]) == pairs[1] and "◀ Previous" not in nav
    after = links(open_item(nav["▶ Next"]))
    assert (after["▶ Next"]["run"], after["▶ Next"]["item"]) == pairs[2]
    assert after["Back to Compare"]["run"] == "weak-retriever" and after["Back to Compare"]["other"] == "better-retriever"


def test_trust_disagreements_walk_each_item_once(db: Path) -> None:
    # Two of q01's sure GR verdicts and one of q02's, each corrected: q01 is listed twice in a row.
    sure = store.query(db, """SELECT item_id, component_idx, value FROM verdicts WHERE run_id = 'weak-retriever'
                              AND item_id IN ('q01', 'q02') AND metric = 'gr' AND status = 'ok'
                              AND (p IS NULL OR p NOT BETWEEN 0.2 AND 0.8) ORDER BY item_id, component_idx""")
    picked = pd.concat([sure[sure["item_id"] == "q01"].head(2), sure[sure["item_id"] == "q02"].head(1)])
    assert len(picked) == 3
    writes.add_labels(db, "weak-retriever", [
        Label(i, 1 - int(v), metric="gr", component_idx=int(c)) for i, c, v in picked.itertuples(index=False)])
    at = open_page("pages/8_Trust.py", run="weak-retriever")  # on its first tab, Agreement
    listed = list(frame_with(at, "people")["item"])
    assert listed == ["q01", "q01", "q02"]
    nav = links(click(at, "disagreements", 0))
    assert nav["▶ Next"]["item"] == "q02" and nav["▶ Next"]["ft"] == "Agreement"  # not q01 again


def test_a_click_on_a_plain_cell_opens_the_item_as_the_row_marker_does(db: Path) -> None:
    at = open_page("pages/1_Run.py", run="weak-retriever", below="gr,sp1")
    listed = list(frame_with(at, "rules")["item_id"])
    at.session_state["items_table"] = {"selection": {"rows": [], "columns": [], "cells": [(1, "query")]}}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert (at.title[0].value, at.query_params["item"], at.query_params["tab"]) == ("Item", listed[1], "Verdicts")


def test_fit_cuts_a_text_past_its_lines_at_a_word_and_never_a_link() -> None:
    table = pd.DataFrame({"open": ["Item?run=r&item=" + "x" * 300], "text": ["word " * 200], "short": ["a b"]})
    shown, rows = tables.fit(table, {"open": 36, "text": 120, "short": 60})
    assert shown["open"][0] == table["open"][0]  # a link column keeps its whole URL
    assert shown["text"][0].endswith("word…") and tables.text_lines(shown["text"][0], 120) == tables.MAX_LINES
    assert rows["row_height"] == tables.WRAP_PX + tables.LINE_PX * (tables.MAX_LINES - 4)
    assert tables.fit(table[["short"]], {"short": 60})[1]["row_height"] == tables.ROW_PX  # one line each: the grid's rows
    assert tables.fit(table[["short"]], {"short": 30})[1]["row_height"] == tables.WRAP_PX  # two lines: rows that wrap
    cut, rows = tables.fit(table, {"text": 120}, lines=tables.WRAP_LINES)  # as few lines as a wrapping row holds
    assert tables.text_lines(cut["text"][0], 120) == tables.WRAP_LINES and rows["row_height"] == tables.WRAP_PX


def test_the_run_table_cuts_a_long_query_so_its_rows_stay_one_wrapping_row_high(db: Path) -> None:
    with store.connect(db) as con:
        for table in ("items", "run_wide"):  # the item, and the Run table's stored row of it
            con.execute(f"UPDATE {table} SET query = repeat('how long may a refund take ', 30) WHERE item_id = 'q02'")
    at = open_page("pages/1_Run.py", run="weak-retriever")
    table = next(e for e in at.dataframe if "rules" in e.value.columns)
    query = table.value.set_index("item_id").loc["q02", "query"]
    assert query.startswith("how long may a refund take") and query.endswith("…")
    assert table.proto.row_height == tables.WRAP_PX  # not the 8 lines the whole query would take


def test_the_evidence_table_fits_a_rule_expander_and_breaks_no_word_of_its_short_columns() -> None:
    from evaluators.dashboard.views import item as item_view

    widths = item_view.EVIDENCE_PX
    assert sum(widths.values()) <= tables.TABLE_PX - 36  # the row markers beside it, inside the expander's padding
    words = {
        "component": ["subquestion", "source_fact", "sentence", "claim", "source"],
        "target": ["response", "sources", "source:", "query"],
        "verdict": ["unsure", "unparsed", "timeout"],
        "p kind": ["calibrated", "logprob"],
        "tier": ["offline"],
    }
    broken = [(c, w) for c, ws in words.items() for w in ws if tables.text_lines(w, widths[c]) > 1]
    assert not broken, broken


def test_a_line_breaks_as_the_grid_breaks_it_at_spaces_and_newlines_not_at_a_no_break_space() -> None:
    assert tables.text_lines("one\ntwo", 200) == 1  # the grid draws a newline as a space
    joined = "\u00a0".join(["word"] * 12)
    assert tables.text_lines(joined.replace("\u00a0", " "), 120) == 4
    assert tables.text_lines(joined, 120) == tables.text_lines("word" * 12, 120)  # one word, broken where lines end


def test_the_sub_question_table_of_three_sources_fits_and_breaks_no_word() -> None:
    from evaluators.dashboard.views import item_tabs

    cells = {f"source {j}": ["✗ 0 · p 0.01", "? unsure · p 0.50"] for j in range(3)}
    table = pd.DataFrame({"#": [0, 1], "sub-question": ["How long is the crossing?"] * 2, **cells,
                          "whole set": ["✓ 1 · p 0.96"] * 2, "SQC covered": ["✓ yes", "? unsure"],
                          "RQC": ["⚠ timeout", "✓ 1 · p 0.96"]})
    shown, widths = item_tabs.subquestion_layout(table)
    assert shown is table  # a column per source
    assert sum(widths.values()) <= tables.TABLE_PX and widths["sub-question"] >= item_tabs.SUBQUESTION_MIN_PX
    broken = [v for c in table.columns[2:] for v in table[c] for w in str(v).split() if tables.text_lines(w, widths[c]) > 1]
    assert not broken, broken  # a verdict wraps at its spaces, never inside a word


def test_past_what_fits_the_sources_fold_into_one_column_each_verdict_whole() -> None:
    from evaluators.dashboard.views import item as view
    from evaluators.dashboard.views import item_tabs

    verdicts = ["✗ 0 · p 0.01", "? unsure · p 0.50", "⚠ unparsed", "✓ 1 · p 0.97", "–", "✗ 0 · p 0.12"]
    cells = {f"source {j}": [v, "✓ 1 · p 0.91"] for j, v in enumerate(verdicts)}
    table = pd.DataFrame({"#": [0, 1], "sub-question": ["How long is the crossing?"] * 2, **cells,
                          "whole set": ["✓ 1 · p 0.96"] * 2, "SQC covered": ["✓ yes", "? unsure"],
                          "RQC": ["⚠ timeout", "✓ 1 · p 0.96"]})
    assert sum(item_tabs.subquestion_px(table).values()) > tables.TABLE_PX  # a column each would scroll sideways
    shown, widths = item_tabs.subquestion_layout(table)
    assert list(shown.columns) == ["#", "sub-question", view.EACH_SOURCE, "whole set", "SQC covered", "RQC"]
    each = shown[view.EACH_SOURCE].iloc[0].split("; ")
    assert [s.replace("\u00a0", " ") for s in each] == [f"{j}: {v}" for j, v in enumerate(verdicts)]
    assert sum(widths.values()) <= tables.TABLE_PX and widths["sub-question"] >= item_tabs.SUBQUESTION_MIN_PX
    assert set(widths) == set(shown.columns)
    # a source's verdict keeps its line (the cell wraps between them), and no word of the others breaks
    assert all(tables.text_lines(s, widths[view.EACH_SOURCE]) == 1 for s in each)
    assert tables.text_lines(shown[view.EACH_SOURCE].iloc[0], widths[view.EACH_SOURCE]) < len(each)  # more than one a line
    broken = [v for c in shown.columns[3:] for v in shown[c] for w in str(v).split() if tables.text_lines(w, widths[c]) > 1]
    assert not broken, broken
