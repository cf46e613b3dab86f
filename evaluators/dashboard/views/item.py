"""The Item page's helpers: its verdicts joined to their components once (by_component), the tables of
sub-questions, claims and verdicts, highlight marks, a fired rule's evidence, long lists a page at a
time, and the judge's raw exchanges drawn only when opened.

The item page works on plain records (lists of dicts): an item may carry 200 sources or 10,000
claims, and a scan of every verdict per component, or a widget per row, would not finish.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from evaluators.core.masking import mask_url
from evaluators.core.records import Score, Status
from evaluators.dashboard.markup import FAIL, OK, UNSURE, Record, fmt_p, fmt_verdict, md, score_counts, verdict_colour
from evaluators.dashboard.state import synced, whole
from evaluators.metrics.diagnosis import Condition, Fired, fired
from evaluators.metrics.thelma import aggregate_coverage
from evaluators.storage import queries

# The Item page's tabs, kept in its URL as ?tab= (the first, the default, is left out); a label is part
# of links into the page, so renaming one breaks them.
ITEM_TABS = ("Query", "Sources", "Response", "Verdicts", "Triage")


ITEM_PAGE = 50  # components per page (sub-questions, claims, sentences, other suites' verdicts)


SOURCES_PAGE = 10  # sources per page: each draws its text and its judge exchanges


VERDICT_PAGE = 200  # rows of the Verdicts tab's one table


Judged = dict[tuple[str, int], list[Record]]


def item_scores(frame: pd.DataFrame) -> dict[str, Score]:
    """An item's scores (queries.items.item_detail's `scores`) as Scores with their counts, by metric."""
    return {
        r["metric"]: Score(
            r.get("item_id", ""),
            r["metric"],
            None if pd.isna(r["value"]) else float(r["value"]),
            int(r["n_scored"]),
            int(r["n_total"]),
            Status(r["status"]),
            int(r["n_unsure"] or 0),
        )
        for r in frame.to_dict("records")
    }


def expected_captions(expected: pd.DataFrame) -> dict[str, str]:
    """By metric, its score's expected value (item_detail's `expected`: the mean of its verdicts' p, unsure
    ones included) as a caption: "expected 0.79 (mean p of 3 of 3 verdicts)"."""
    return {
        r["metric"]: f"expected {r['value']:.2f} (mean p of {int(r['n_scored'])} of {int(r['n_total'])} verdicts)"
        for r in expected.to_dict("records")
    }


def condition_score(condition: Condition) -> Score:
    """The score behind a fired rule's condition: an item's scores come with their counts (Scores)."""
    assert isinstance(condition.score, Score)
    return condition.score


def counts(score: Score) -> tuple[int, int, int]:
    """n scored, n total and n unsure of a score."""
    return score.n_scored, score.n_total, score.n_unsure


def rules_table(scores: Mapping[str, Score], th: Mapping[str, float]) -> tuple[list[Fired], pd.DataFrame]:
    """The Table-2 rules that fire for one item's scores (only on metrics decided from enough confident
    verdicts), and a table of them with the component to fix and the scores behind them."""
    found = fired(scores, th)

    def behind(f: Fired) -> str:
        return "; ".join(
            f"{c.metric.upper()} {c.level} {condition_score(c).value:.2f} ({score_counts(*counts(condition_score(c)))})"
            for c in f.conditions
        )

    return found, pd.DataFrame(
        [
            {
                "rule": f.rule.name,
                "pattern": f.rule.pattern,
                "meaning": f.rule.meaning,
                "fix": f.rule.components,
                "scores": behind(f),
            }
            for f in found
        ],
        columns=["rule", "pattern", "meaning", "fix", "scores"],
    )


def pick(rows: Sequence[Record], **equal: Any) -> list[Record]:
    """The rows whose fields equal the given values."""
    return [r for r in rows if all(r[k] == v for k, v in equal.items())]


def by_component(verdicts: Sequence[Record]) -> Judged:
    """Verdicts by the component they judge, (kind, idx), in their stored order: one pass, so each
    component then finds its verdicts without scanning the others."""
    judged: Judged = {}
    for v in verdicts:
        judged.setdefault((v["component_kind"], int(v["component_idx"])), []).append(v)
    return judged


EVIDENCE_COLUMNS = ["metric", "component", "text", "target", "verdict", "value", "p", "p kind", "tier", "detail"]
# Their widths at 1280 px (tables.sized), summing to tables.TABLE_PX less the row markers, so the table also fits
# a rule's evidence expander: the component's text and the judge's reason share the room left and wrap; every
# other word fits its cell ("subquestion", "source_fact", "response", "unparsed", "calibrated").
EVIDENCE_PX = dict(zip(EVIDENCE_COLUMNS, (50, 92, 110, 72, 75, 45, 55, 80, 60, 105)))
RULES_PX = {"rule": 55, "pattern": 150, "meaning": 220, "fix": 120, "scores": 220}


def rule_evidence(
    condition_metric: str,
    level: str,
    verdicts: Sequence[Record],
    texts: Mapping[tuple[str, int], str],
    limit: int = ITEM_PAGE,
) -> tuple[pd.DataFrame, int, int]:
    """The verdicts that made one metric of a fired rule low (its confident 0s) or high (its confident
    1s), then the unsure ones it left out; SQC's 0s only of sub-questions that no confident 1 covers.

    Returns at most `limit` rows, the number of deciding verdicts and the number of unsure ones.
    """
    mine = [v for v in verdicts if v["metric"] == condition_metric and v["target"] != "decompose"]
    want = 0.0 if level == "low" else 1.0
    deciding = [v for v in mine if v["status"] == OK and float(v["value"]) == want]
    if condition_metric in queries.sql.aggregated_by(aggregate_coverage) and level == "low":
        covered = {v["component_idx"] for v in mine if v["status"] == OK and float(v["value"]) == 1.0}
        deciding = [v for v in deciding if v["component_idx"] not in covered]
    unsure = [v for v in mine if v["status"] == UNSURE]
    rows = [
        {
            "metric": v["metric"].upper(),
            "component": f"{v['component_kind']} {v['component_idx']}",
            "text": texts.get((v["component_kind"], int(v["component_idx"])), ""),
            "target": v["target"],
            "verdict": fmt_verdict(v["value"], v["status"]) if v["status"] != UNSURE else "? unsure (left out)",
            "value": v["value"],
            "p": v["p"],
            "p kind": v["p_kind"],
            "tier": v["tier"],
            "detail": v["detail"],
        }
        for v in (deciding + unsure)[:limit]
    ]
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS), len(deciding), len(unsure)


def verdict_table(verdicts: Sequence[Record], texts: Mapping[tuple[str, int], str]) -> pd.DataFrame:
    """Verdicts as rows with how sure the judge was (p, its kind) and the tier that decided each."""
    return pd.DataFrame(
        [
            {
                "metric": v["metric"].upper(),
                "component": f"{v['component_kind']} {v['component_idx']}",
                "text": texts.get((v["component_kind"], int(v["component_idx"])), ""),
                "target": v["target"],
                "verdict": fmt_verdict(v["value"], v["status"]),
                "value": v["value"],
                "p": v["p"],
                "p kind": v["p_kind"],
                "tier": v["tier"],
                "detail": v["detail"],
            }
            for v in verdicts
        ],
        columns=EVIDENCE_COLUMNS,
    )


def pager(label: str, key: str, n: int, size: int) -> tuple[int, int]:
    """Rows [lo, hi) of a list of n shown `size` at a time; past one page, a page number kept in the URL."""
    pages = max(1, -(-n // size))
    if pages == 1:
        return 0, n
    number = synced(
        st.number_input, f"{label}: page (of {pages})", key, 1, whole(1, pages), min_value=1, max_value=pages, step=1
    )
    lo = (number - 1) * size
    hi = min(lo + size, n)
    st.caption(f"{label} {lo + 1}–{hi} of {n}")
    return lo, hi


def exchange_keys(*groups: Sequence[Record]) -> tuple[str, ...]:
    """The judge call keys behind these verdicts, to read only the calls a page shows."""
    return tuple(sorted({v["call_key"] for rows in groups for v in rows if isinstance(v.get("call_key"), str)}))


REPEAT_CHARS = 2_000  # a prompt this long is drawn once per list of exchanges, then referred to


def raw_exchange(
    verdict: Record, calls: Mapping[str, Record], seen: dict[str, str] | None = None, title: str = ""
) -> None:
    """The judge's raw exchange behind one verdict: prompt, reply, status, tokens and latency.

    seen: the long prompts already drawn in this list ({call key: title}); a batched call stands
    behind many verdicts, and repeating its prompt in each would cost the browser megabytes."""
    call = calls.get(verdict.get("call_key") or "")
    if call is None:  # the offline judge and SD's embeddings make no calls: the explanation is the exchange
        source = "Sentence embeddings" if verdict.get("metric") == "sd" else "Offline judge"
        st.caption(f"{source} (no LLM call). Its explanation:")
        st.code(str(verdict.get("detail") or "(no detail stored)"), language=None, wrap_lines=True)
        return
    cost = "–" if call["cost"] is None or pd.isna(call["cost"]) else f"{call['cost']:.6f}"
    st.caption(
        f"model {md(call['model'])} · prompt {md(call['prompt_name'])} ({md(call['prompt_hash'])}) · "
        f"call status {md(call['status'])} · tokens {call['prompt_tokens']} in / "
        f"{call['completion_tokens']} out · latency {call['latency_ms']:.0f} ms · cost {cost}"
        # masked again: a database written before URLs were masked may hold a key in one
        + (f" · endpoint {md(mask_url(call['endpoint']))}" if isinstance(call.get("endpoint"), str) else "")
    )
    messages = json.loads(call["messages"] or "[]")
    size = sum(len(str(m.get("content", ""))) for m in messages)
    if seen is not None and size >= REPEAT_CHARS and call["key"] in seen:
        st.caption(f"prompt: the same {size:,}-character prompt as in «{md(seen[call['key']])}» above")
        messages = []
    elif seen is not None and size >= REPEAT_CHARS:
        seen[call["key"]] = title
    for message in messages:
        st.markdown(f"**{md(message.get('role', '?'))}**")
        st.code(str(message.get("content", "")), language=None, wrap_lines=True)
    st.markdown("**reply**")
    st.code("(no reply)" if call["reply"] is None else str(call["reply"]), language=None, wrap_lines=True)
    if call["error"]:
        st.error(f"error: {md(call['error'])}")
    if verdict.get("detail"):
        st.caption(f"detail: {md(verdict['detail'])}")


def exchange_key(row: Record) -> str:
    """The widget key of a verdict's raw-exchange expander (its open state is kept under it)."""
    return f"raw:{row['metric']}:{row['component_kind']}:{row['component_idx']}:{row['target']}"


def verdict_expanders(
    rows: Sequence[Record],
    calls: Mapping[str, Record],
    title: Callable[[Record], str],
    seen: dict[str, str] | None = None,
) -> None:
    """One expander per verdict, opening onto the judge's raw exchange; pass one `seen` dict to the
    lists of a tab to draw each long prompt once there.

    An exchange is drawn only once its expander is opened (a click reruns the page): a browser draws
    every element it is sent, collapsed or not, and an item's prompts and replies are most of its page.
    """
    seen = {} if seen is None else seen
    keys: set[str] = set()
    for row in rows:
        key, n = exchange_key(row), 1
        while key in keys:  # two verdicts on one component and target (a list given twice): keys stay unique
            key, n = f"{exchange_key(row)}#{n}", n + 1
        keys.add(key)
        box = st.expander(
            f"{md(title(row))} · {fmt_verdict(row['value'], row['status'])}{fmt_p(row)} · raw exchange",
            key=key,
            on_change="rerun",
        )
        if box.open:
            with box:
                raw_exchange(row, calls, seen, title(row))


def verdict_cell(rows: Sequence[Record]) -> str:
    """One verdict cell: ✓ 1, ✗ 0, ? unsure, ⚠ status, or – when there is no verdict; with p when it has one."""
    return "–" if not rows else fmt_verdict(rows[0]["value"], rows[0]["status"]) + fmt_p(rows[0])


def subquestion_table(comps: Sequence[Record], judged: Judged, n_sources: int) -> pd.DataFrame:
    """Per sub-question: SQC against each source and the whole set, whether it is covered, and RQC."""
    rows = []
    for comp in comps:
        mine = judged.get(("subquestion", comp["idx"]), [])
        sqc, rqc = pick(mine, metric="sqc"), pick(mine, metric="rqc")
        by_target: dict[str, list[Record]] = {}
        for v in sqc:
            by_target.setdefault(v["target"], []).append(v)
        row = {"#": comp["idx"], "sub-question": comp["text"]}
        for j in range(n_sources):
            row[f"source {j}"] = verdict_cell(by_target.get(f"source:{j}", []))
        row["whole set"] = verdict_cell(pick(sqc, target="sources"))
        # as metrics.aggregate_coverage folds it: a confident 1 covers; all confident 0s do not
        statuses = [v["status"] for v in sqc]
        covered = any(v["status"] == OK and v["value"] >= 0.5 for v in sqc)
        row["SQC covered"] = (
            "–"
            if not sqc
            else "✓ yes"
            if covered
            else "✗ no"
            if all(s == OK for s in statuses)
            else "? unsure"
            if UNSURE in statuses
            else f"⚠ {next(s for s in statuses if s != OK)}"
        )
        row["RQC"] = verdict_cell(rqc)
        rows.append(row)
    return pd.DataFrame(rows)


EACH_SOURCE = "each source"  # the folded table's column of per-source verdicts


def fold_sources(table: pd.DataFrame) -> pd.DataFrame:
    """subquestion_table() with its "source j" columns folded into one, EACH_SOURCE ("0: ✓ 1 · p 0.93;
    1: ✗ 0"), which wraps where a column per source would not fit the page; a source's verdict keeps its
    line (no-break spaces)."""
    columns = [c for c in table.columns if str(c).startswith("source ")]
    folded = [
        "; ".join(f"{c.removeprefix('source ')}: {row[c]}".replace(" ", "\u00a0") for c in columns)
        for _, row in table.iterrows()
    ]
    out = table.drop(columns=columns)
    out.insert(2, EACH_SOURCE, folded)
    return out


def marks_for(comps: Sequence[Record], judged: Judged, metrics: Sequence[str]) -> list[tuple]:
    """(text, colour, title) highlight marks for these components, coloured by the last metric given."""
    marks = []
    for comp in comps:
        mine = judged.get((comp["kind"], comp["idx"]), [])
        title = " · ".join(f"{m.upper()} {verdict_cell(pick(mine, metric=m))}" for m in metrics)
        colour_rows = pick(mine, metric=metrics[-1])
        colour = FAIL if not colour_rows else verdict_colour(colour_rows[0]["value"], colour_rows[0]["status"])
        marks.append((comp["text"], colour, f"{comp['kind']} {comp['idx']}: {title}"))
    return marks


def component_table(comps: Sequence[Record], judged: Judged, metrics: Sequence[str]) -> pd.DataFrame:
    """Components with one verdict column per metric (and the most similar sentence for SD)."""
    rows = []
    for comp in comps:
        mine = judged.get((comp["kind"], comp["idx"]), [])
        row = {"#": comp["idx"], comp["kind"]: comp["text"]}
        for m in metrics:
            row[m.upper()] = verdict_cell(pick(mine, metric=m))
        sd = pick(mine, metric="sd")
        if "sd" in metrics and sd:
            row["most similar"] = sd[0]["target"].replace("sentence:", "sentence ")
            row["similarity"] = None if pd.isna(sd[0]["evidence"]) else round(float(sd[0]["evidence"]), 3)
            row["SD"] = (
                "⚠ " + sd[0]["status"]
                if sd[0]["status"] != OK
                else ("distinct" if sd[0]["value"] >= 0.5 else "repeats")
            )
        rows.append(row)
    return pd.DataFrame(rows)
