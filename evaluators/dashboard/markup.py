"""The dashboard's text: user strings made safe for markdown (md), scores, verdicts and counts as text,
rule labels, and evaluated text escaped and highlighted.

User text is never markup: run names, item ids, judges, notes and errors go through md() wherever
Streamlit draws markdown; evaluated text is html-escaped before it is highlighted.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, Sequence, cast

import pandas as pd
import streamlit as st

from evaluators.core.confidence import LABEL
from evaluators.core.records import Status
from evaluators.metrics.diagnosis import RULES
from evaluators.storage.ownership import SITTINGS

OK, GOOD, BAD, FAIL = "ok", "#c8ecd0", "#f8d0d0", "#e6e6e6"
# An unsure verdict is neither green nor red: the dashboard stays quiet where the judge is unsure.
UNSURE, UNSURE_COLOUR = Status.UNSURE.value, "#fdf1c7"
# The legend of verdict_colour()'s highlighting, beside every highlighted text.
COLOUR_LEGEND = "green a 1, red a 0, pale amber unsure (left out of its score), grey a judge failure"


# The words a page shows without saying what they are, each with what it means: a column of that name gets it
# as its tooltip (tables.sized), and a caption or line that shows the term gets it as its help.
TERMS = {
    "p": "the judge's probability that the verdict is 1",
    "p kind": "how p was obtained: calibrated (the offline judge's models, calibrated on development data), "
    "logprob (the local judge's first-token probability, calibrated), label (an LLM's 0 or 1: never unsure)",
    "tier": "the judge that decided the verdict: in a cascade (offline>local) each tier decides what it is sure "
    "of and passes the rest on",
    "kappa": "Cohen's kappa: agreement between the judge and people beyond chance; 1 perfect, 0 chance, below 0 "
    "worse than chance",
    "kappa 95% interval": "a seeded bootstrap 95% interval of kappa over the labelled calls",
    "lambda": "λ: the share of items in gap groups (questions no wording answered right)",
    "R": "robustness: right answers ÷ (items − items in gap groups), how often the answer is right when the "
    "system can know it",
    "Acc": "accuracy: R × (1 − λ), the same as right answers ÷ items",
    "R (retrieval)": "R with LM shortfalls counted as right: the retriever alone",
    "Acc (retrieval)": "Acc with LM shortfalls counted as right: the retriever alone",
    "LM shortfall": "a wrong answer whose documents gave a sibling wording of the same question a right answer: "
    "the generator failed, not retrieval",
    "text key": "a source's key: the first 12 hex digits of the sha256 of its text, whitespace collapsed, so one "
    "chunk retrieved by many items is one source",
}

# The item page works on plain records (lists of dicts), its verdicts joined to their components
# once (by_component), and draws its long lists a page at a time: an item may carry 200 sources or
# 10,000 claims, and a scan of every verdict per component, or a widget per row, would not finish.
Record = dict[str, Any]


# What markdown (CommonMark, GFM, Streamlit's directives and LaTeX) can act on: these characters
# anywhere; ':' and '.' before a non-space (autolinks 'http://', 'www.x', 'a@b.co'; ':red[', ':smile:');
# a leading '-', '+', '#', '=' or '1.' (lists, headings). Quotes, commas and slashes never start anything.
# GFM turns URLs and emails in text into links after escapes are resolved, so backslashes cannot stop
# it: an invisible word joiner (U+2060) goes where its patterns start ('://', 'www.', '@').
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?i:(?<=www))(?=\.)|(?=@)")


_MARKDOWN_ACTIVE = re.compile(r"[!$&()*<>@\[\\\]^_`{|}~]|[:.](?=\S)|^[-+#=]|(?<=^\d)[.)]|(?<=^\d\d)[.)]")


def md(value: Any) -> str:
    """A user-supplied string (run name, item id, judge, template, document id, author, path...) made
    safe to put in anything Streamlit draws as markdown: labels, captions, headers, alerts, expander
    and tab titles. Every character markdown could act on is backslash-escaped, so no link, image,
    emphasis, heading, list or directive (:red[...], :material/...:) can form, and an invisible word
    joiner breaks what GFM would autolink. The text shows as typed, except that each run of whitespace
    becomes one space (a label is one line)."""
    text = _AUTOLINK.sub("\u2060", " ".join(str(value).split()))
    return _MARKDOWN_ACTIVE.sub(lambda m: "\\" + m.group(0), text)


def n_items(n: int) -> str:
    """'1 item', '3 items'."""
    return f"{n} item" if n == 1 else f"{n} items"


def judged_on(params: str) -> str:
    """Where a run was judged, from its params (JSON): one phrase per sitting, in order, such as "on Ray at
    ray://head:10001 (4 workers; 500 items in 20 shards of up to 25), then in one process on host-a (120
    items)"; "" for a run judged in one process only, which records no sitting."""
    sittings = json.loads(params or "{}").get(SITTINGS) or []
    parts = []
    for s in sittings:
        count = n_items(int(s.get("items", 0)))
        if s.get("where") == "ray":
            at = "a local Ray instance" if s.get("address") == "local" else f"Ray at {s.get('address')}"
            shards = f"{s.get('shards', 0)} shard{'s' if s.get('shards') != 1 else ''} of up to {s.get('shard_size')}"
            parts.append(f"on {at} ({s.get('workers')} workers; {count} in {shards})")
        else:
            parts.append(f"in one process on {s.get('host') or 'a host'} ({count})")
    return ", then ".join(parts)


def fmt_score(value: Any, status: str | None = OK) -> str:
    """A score as text; a failure shows its status, never a number."""
    if status not in (None, OK) or value is None or pd.isna(value):
        return f"⚠ {status}" if status not in (None, OK) else "–"
    return f"{float(value):.2f}"


def score_card(value: Any, status: str | None, counts: str) -> tuple[str, str]:
    """A metric card's value and caption: a score and its counts; for an unscored one, a glyph that fits a
    narrow card (a status word is cut there at 1280 px) and the status in the caption: "?" unsure, "–" not
    applicable (the item lacks what the metric needs), "⚠" a failure."""
    if status in (None, OK):
        return fmt_score(value, status), counts
    glyph = {UNSURE: "?", Status.NOT_APPLICABLE.value: "–"}.get(str(status), "⚠")
    word = "not applicable" if glyph == "–" else f"{glyph} {status}"
    return glyph, f"{word} · {counts}"


def fmt_verdict(value: Any, status: str) -> str:
    """✓ 1 / ✗ 0 for a scored verdict, ? unsure for one inside the band, ⚠ status for a failure."""
    if status == UNSURE:
        return "? unsure"
    if status != OK:
        return f"⚠ {status}"
    return "✓ 1" if float(value) >= 0.5 else "✗ 0"


def fmt_p(row: Record) -> str:
    """' · p 0.93' for a verdict with a calibrated or logprob p; '' for a label or no p."""
    p, kind = row.get("p"), row.get("p_kind")
    if p is None or pd.isna(p) or kind in (None, LABEL) or (isinstance(kind, float) and pd.isna(kind)):
        return ""
    return f" · p {float(p):.2f}"


def score_counts(n_scored: Any, n_total: Any, n_unsure: Any) -> str:
    """'3 of 4 scored, 1 unsure': the counts behind one score (or one metric over a run's items)."""
    n_unsure = 0 if n_unsure is None or pd.isna(n_unsure) else int(n_unsure)
    return f"{int(n_scored)} scored of {int(n_total)}, {n_unsure} unsure"


def named_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its metric column as every page names a metric (SP1, GR: ids are lower-case in the store)."""
    return frame.assign(metric=frame["metric"].astype(str).str.upper())


def unscored_text(failed_metrics: str, n_failed: int) -> str:
    """A Run row's unscored metrics with their reason and its failed verdicts, '' when it has neither:
    ('gr:timeout, sqc:unsure', 2) reads 'GR timeout, SQC unsure; 2 failed verdicts'. An unsure metric is
    unscored, not failed."""
    reasons = (part.partition(":") for part in failed_metrics.split(", ") if part)
    metrics = ", ".join(f"{m.upper()} {why}" for m, _, why in reasons)
    failed = f"{n_failed} failed verdict{'' if n_failed == 1 else 's'}" if n_failed else ""
    return "; ".join(filter(None, (metrics, failed)))


def rule_label(rule_id: str) -> str:
    """'T2.2 · SQC low, RQC low'; a rule of ours says so: 'X1 (ours) · SQC high, GR low'."""
    return f"{RULES[rule_id].name} · {RULES[rule_id].pattern}"


def highlight(text: str, marks: Sequence[tuple[str, str, str]]) -> tuple[str, list[int]]:
    """HTML of `text` with each (fragment, colour, title) mark found in it highlighted.

    Every piece of evaluated text is html-escaped, so a `<script>` shows as text. Returns the HTML and
    the indexes of marks whose fragment is not in the text (claims a judge paraphrased), to list apart.
    """
    spans: list[tuple[int, int, int]] = []
    missing: list[int] = []
    for i, (fragment, _, _) in enumerate(marks):
        start, found = 0, False
        while fragment and (pos := text.find(fragment, start)) >= 0:
            end = pos + len(fragment)
            if all(end <= s or pos >= e for s, e, _ in spans):
                spans.append((pos, end, i))
                found = True
                break
            start = pos + 1
        if not found:
            missing.append(i)
    out, cursor = [], 0
    for start, end, i in sorted(spans):
        _, colour, title = marks[i]
        out.append(html.escape(text[cursor:start]))
        out.append(
            f'<span style="background:{colour};border-radius:3px;padding:0 2px" '
            f'title="{html.escape(title)}">{html.escape(text[start:end])}</span>'
        )
        cursor = end
    out.append(html.escape(text[cursor:]))
    return "".join(out), missing


def text_block(body_html: str) -> None:
    """Show escaped, highlighted text in a wrapped block (st.html sanitises it a second time); a long
    word wraps anywhere rather than widen the page."""
    st.html(
        f'<div style="white-space:pre-wrap;overflow-wrap:anywhere;line-height:1.6;'
        f'border-left:3px solid #ddd;padding-left:8px">{body_html}</div>'
    )


def plain(text: str) -> None:
    """Evaluated text, escaped, as a text block."""
    text_block(html.escape(text))


def verdict_colour(value: Any, status: str) -> str:
    """Green for 1, red for 0, pale amber for unsure (never green or red), grey for a failure."""
    if status == UNSURE:
        return UNSURE_COLOUR
    if status != OK:
        return FAIL
    return GOOD if float(value) >= 0.5 else BAD


def records(frame: pd.DataFrame) -> list[Record]:
    """A frame as a list of dicts."""
    return cast(list[Record], frame.to_dict("records"))
