"""Every dashboard page x every URL parameter it reads x hostile values, on a database whose run
names, judge, item ids, metadata, GRAMMAR templates and document ids, triage authors and notes carry
markdown images and links, HTML and quotes: no exception, and nothing user-supplied is drawn as
markdown or HTML.

`hostile_db` is shared with the real-browser test (tests/test_hostile_browser.py), which points the
payloads' URLs at a loopback recorder.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from evaluators.core.records import Component, Item, JudgeCall, Run, Score, Status, Verdict
from evaluators.dashboard import markup, ui
from evaluators.grammar.robustness import Correctness, write_correctness
from evaluators.metrics.diagnosis import DEFAULT_THRESHOLDS
from evaluators.storage import ownership, store, writes
from tests.seed import seed
from tests.test_bad_db import new_app

LONG_WORD = "W" * 60_000


def payloads(url: str) -> dict[str, str]:
    """Markdown and HTML that would fetch or link to `url` if any page drew it as markup."""
    img, link = f"![x]({url}/p.png)", f"[click]({url}/l)"
    return {"img": img, "link": link, "html": f'<img src="{url}/h.png"><b>b</b>',
            "mark": f'{img} {link} <img src="{url}/t.png"> *em* `c` :red[r] $x$ "q" \'s\' {url}/bare'}


def hostile_db(path: Path, url: str = "http://127.0.0.1:9") -> dict[str, str]:
    """The seeded database plus a newest run whose every user-supplied string is hostile, a run
    with items but no scores, a GRAMMAR report and a triage note. Returns the names used."""
    seed(path)
    p = payloads(url)
    names = {
        "run": f'{p["img"]} {p["link"]} "run"',
        "empty_run": f'empty {p["img"]}',
        "judge": f'openai/{p["img"]}',
        "item": f'{p["img"]} {p["link"]} <b>"i"</b>',
        "item2": f'{p["html"]} 2',
        "meta_key": f'a"b {p["img"]}',
    }
    run, key = names["run"], f"call {p['img']}"
    texts = {"query": f'{p["mark"]} {LONG_WORD}?', "response": f'{p["mark"]} {LONG_WORD}. Second {p["link"]}.'}
    items = [Item(names["item"], texts["query"], (p["mark"], LONG_WORD), texts["response"],
                  metadata={names["meta_key"]: p["img"], "topic": p["link"]}),
             Item(names["item2"], p["mark"], (p["html"],), p["mark"], metadata={names["meta_key"]: p["html"]})]
    comps, verdicts, scores = [], [], []
    for item in items:
        i = item.id
        comps += [Component(i, "subquestion", 0, p["mark"]), Component(i, "source_fact", 0, p["mark"], parent=0),
                  Component(i, "claim", 0, p["mark"]), Component(i, "claim", 1, LONG_WORD),
                  Component(i, "sentence", 0, p["mark"]), Component(i, "sentence", 1, LONG_WORD)]
        verdicts += [Verdict(i, "sp1", "source", 0, "query", 1.0, Status.OK, call_key=key, detail=p["mark"]),
                     Verdict(i, "sp2", "source_fact", 0, "query", 0.0, Status.OK, detail=p["mark"]),
                     Verdict(i, "sqc", "subquestion", 0, "source:0", 1.0, Status.OK, detail=p["mark"]),
                     Verdict(i, "rqc", "subquestion", 0, "response", None, Status.ERROR, call_key=key,
                             detail=p["mark"]),
                     Verdict(i, "gr", "claim", 0, "sources", 0.0, Status.OK, call_key=key, detail=p["mark"]),
                     Verdict(i, "rp", "claim", 1, "query", 1.0, Status.OK, detail=p["mark"]),
                     Verdict(i, "sd", "sentence", 0, "sentence:1", 1.0, Status.OK, evidence=0.2, detail=p["mark"])]
        scores += [Score(i, m, v, 1, 1, Status.OK) for m, v in
                   (("sp1", 1.0), ("sp2", 0.0), ("sqc", 1.0), ("gr", 0.0), ("rp", 1.0), ("sd", 1.0))]
        scores.append(Score(i, "rqc", None, 0, 1, Status.ERROR))
    call = JudgeCall(key=key, model=names["judge"], prompt_name=p["img"], prompt_hash=p["link"],
                     messages=[{"role": p["img"], "content": p["mark"]}], params={}, reply=p["mark"],
                     status=Status.ERROR, prompt_tokens=3, completion_tokens=1, latency_ms=5.0, error=p["mark"])
    ownership.start_run(path, Run(run, names["judge"], {}, {p["img"]: p["link"]}), len(items))
    writes.write_batch(path, run, items=items, components=comps, verdicts=verdicts, scores=scores, calls=[call])
    ownership.finish_run(path, run, "failed", {}, error=p["mark"])
    ownership.start_run(path, Run(names["empty_run"], names["judge"], {}, {}), 1)
    writes.write_batch(path, names["empty_run"], items=[Item(p["img"], p["mark"], (p["mark"],), p["mark"])])
    write_correctness(path, run, [
        Correctness(i.id, p["img"], p["link"], tpl, ok, Status.OK, names["judge"], retrieved=(p["img"],),
                    true_docs=(p["link"],))
        for i, tpl, ok in ((items[0], p["img"], True), (items[1], p["html"], False))])
    writes.add_triage(path, run, names["item"], "confirmed", p["link"], p["mark"], p["img"])
    with store.connect(path) as con:  # the hostile run is the newest: every page opens on it
        con.execute("UPDATE runs SET created_at = TIMESTAMP '2026-12-01 10:00:00' WHERE run_id = ?", [run])
    return names


# ---------------------------------------------------------------- what a page draws as markdown

_PLAIN = {"Code", "Text", "Html", "Arrow", "Dataframe", "Selectbox", "MultiSelect", "Empty", "Json"}


def markdown_strings(at: AppTest) -> list[str]:
    """Every string the page hands Streamlit to draw as markdown: bodies of markdown, captions,
    headings and alerts; labels and help of widgets, metrics, expanders, tabs and page links;
    radio options. Code, text, HTML, tables and selectbox options are drawn as they are."""
    found: list[str] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and type(proto).__name__ not in _PLAIN:
            for field, value in proto.ListFields():
                if field.name in ("body", "label", "help"):
                    found.append(str(value))
                elif field.name == "options" and type(proto).__name__ == "Radio":
                    found.extend(map(str, value))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return found


def assert_plain(at: AppTest, where: str) -> None:
    """No exception; no markdown link (but the app's own, to a page of its own), image or autolink and
    no raw HTML tag formed from user text."""
    assert not at.exception, (where, [e.value for e in at.exception])
    own = "|".join(p.url_path for p in ui.PAGES.values() if p.url_path)
    for text in markdown_strings(at):
        assert not re.search(rf"(?<!\\)\]\((?!({own})\?[^()\s]*\))|(?<!\\)<(img|b)\b|(?<!\\):(?!\\)//", text), (
            where, text[:300])
    for element in at.get("html"):
        assert not re.search(r"<(img|b)\b", element.proto.body.replace("<style>", "")), (where, element.proto.body[:300])


# ---------------------------------------------------------------- the fuzz

THRESHOLDS = [f"th_{m}" for m in DEFAULT_THRESHOLDS]
PARAMS: dict[str, list[str]] = {
    "runs": ["run", "band", *THRESHOLDS],
    "run": ["run", "below", "rule", "failed", "q", "mk", "mv", "quad", "sort", "desc", "page", "band", *THRESHOLDS],
    "item": ["run", "item", "src_page", "claim_page", "sent_page", "subq_page", "qx_page", "rx_page", "other_page",
             "verdict_page", "rule", "band", *THRESHOLDS],
    "compare": ["run", "other", "xm", "xd", "item", "pref", "better", "band", *THRESHOLDS],
    "diagnosis": ["run", "band", *THRESHOLDS],
    "triage": ["run", "labels"],
    "evaluate": ["run"],
    "robustness": ["run", "cluster", "group"],
}


def hostile_values(names: dict[str, str]) -> list[str]:
    p = payloads("http://127.0.0.1:9")
    return ["9223372036854775808", "-1", "0", "nan", "-inf", "1e309", '"', '"; DROP TABLE runs; --',
            p["img"], p["link"], p["html"], p["mark"], "unknown-id", "", ",,,", "sqc:low,rqc:sideways,x:y:z,:,",
            "\u202e\u200b", "x" * 5000, names["run"], names["empty_run"], names["item"], names["meta_key"],
            "0.7,0.3", "0.3,0.7", "nan,nan", "T2.2,T2.5"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    path = tmp_path_factory.mktemp("fuzz") / "hostile.duckdb"
    names = hostile_db(path)
    mp = pytest.MonkeyPatch()
    mp.setenv("RAG_TRIAGE_DB", str(path))
    mp.delenv("RAG_TRIAGE_READ_ONLY", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield path, names
    mp.undo()
    st.cache_data.clear()
    st.cache_resource.clear()


def open_page(page: str, params: dict[str, str]) -> AppTest:
    at = new_app()
    if page != "runs":
        at.switch_page(ui.PAGES[page].file)
    at.query_params.update(params)
    at.run()
    return at


@pytest.mark.parametrize("page", list(PARAMS))
def test_every_parameter_takes_every_hostile_value(page: str, hostile: tuple[Path, dict[str, str]]) -> None:
    """Run k gives parameter i the value (i + k) mod n: over n runs every parameter meets every value,
    in changing company. A second pass holds run and item to the hostile run's first item, so the
    Item page's own parameters are read past its 'no such item' stop."""
    _, names = hostile
    values = hostile_values(names)
    params = PARAMS[page]
    for pinned in ({}, {"run": names["run"], "item": names["item"]}):
        free = [p for p in params if p not in pinned]
        for k in range(len(values)):
            query = {**{p: values[(i + k) % len(values)] for i, p in enumerate(free)}, **pinned}
            at = open_page(page, query)
            assert_plain(at, f"{page} {query}")
        if page not in ("item", "compare"):
            break


@pytest.mark.parametrize("page", list(PARAMS))
def test_each_page_on_the_hostile_run(page: str, hostile: tuple[Path, dict[str, str]]) -> None:
    _, names = hostile
    for run in (names["run"], names["empty_run"]):
        at = open_page(page, {"run": run, "item": names["item"], "other": "weak-retriever", "mk": names["meta_key"]})
        assert_plain(at, f"{page} on {run}")
        assert at.title and at.title[0].value == ui.PAGES[page].title


def test_run_page_reads_huge_pages_and_quoted_metadata_keys(hostile: tuple[Path, dict[str, str]]) -> None:
    _, names = hostile
    at = open_page("run", {"run": names["run"], "page": "9223372036854775808", "mk": names["meta_key"],
                           "mv": payloads("http://127.0.0.1:9")["img"]})
    assert_plain(at, "run page")
    assert at.number_input(key="page").value == 1
    assert at.selectbox(key="mk").value == names["meta_key"]
    # the one item is listed, as its plain text: whole, or cut at a word to fit its cell (its page shows it whole)
    [shown] = list(next(d.value for d in at.dataframe if "item_id" in d.value.columns)["item_id"])
    assert shown == names["item"] or (shown.endswith("…") and names["item"].startswith(shown[:-1]))
    empty = open_page("run", {"run": names["empty_run"]})
    assert_plain(empty, "run without scores")
    assert any("no scores yet" in i.value for i in empty.info)


def test_item_page_names_the_hostile_item_as_text(hostile: tuple[Path, dict[str, str]]) -> None:
    _, names = hostile
    at = open_page("item", {"run": names["run"], "item": names["item"]})
    assert_plain(at, "item page")
    shown = " ".join(markdown_strings(at))
    assert markup.md(names["item"]) in shown and markup.md(names["run"]) in shown
    unknown = open_page("item", {"run": names["run"], "item": payloads("http://127.0.0.1:9")["link"]})
    assert_plain(unknown, "unknown item")
    assert any("has no item with id" in w.value for w in unknown.warning)


def test_md_escapes_every_markdown_active_character() -> None:
    text = "![x](http://h/p.png) [l](u) <b> *e* _u_ `c` :red[r] :material/home: $x$ # h | t ~s~ www.h.com a@b.co"
    escaped = markup.md(text)
    assert re.sub(r"\\(.)", r"\1", escaped).replace("\u2060", "") == text
    assert "://" not in escaped.replace("\\", "") and "www." not in escaped.replace("\\", "")
    assert not re.search(r"(?<!\\)(\]\(|!|\[|:/|:red|:material|\.[a-z]|<|\*|_|`|\$|~|\||@|^#)", escaped)
    assert markup.md("a\n\n    b\tc") == "a b c"
    assert markup.md("- a") == "\\- a" and markup.md("1. a") == "1\\. a" and markup.md("# h") == "\\# h"
    assert markup.md("Timeout: no reply in 60 s.") == "Timeout: no reply in 60 s."  # nothing to act on
