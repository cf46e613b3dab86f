"""The Runs page's helpers: prompt files as names, failures as text, headline intervals and shares below
a threshold from a run's score distribution."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from evaluators.core.confidence import Band
from evaluators.core.stats import bootstrap_ci
from evaluators.dashboard import charts, reads, tables, ui
from evaluators.dashboard.views import walk
from evaluators.metrics.diagnosis import RULES
from evaluators.metrics.registry import THELMA, display_name, lower_is_better
from evaluators.storage import queries
from evaluators.storage.queries.diagnosis import top_rule


def prompt_names(prompt_hashes: Sequence[str]) -> tuple[list[list[str]], str]:
    """The runs' prompt files (runs.prompt_hashes JSON) as names a person reads: per run its prompt
    names (a batched form folded into its name), a name marked ✎ when its hash differs from the one
    most runs used; and a hover text with every name's hash, and which runs used another."""
    runs = [json.loads(p) for p in prompt_hashes]
    by_name: dict[str, list[tuple[int, str]]] = {}
    for i, hashes in enumerate(runs):
        for name, digest in hashes.items():
            by_name.setdefault(name, []).append((i, digest))
    # the hash most runs used; on a tie the newest run's (runs are listed newest first, max keeps the first)
    usual = {n: max(dict.fromkeys(d for _, d in seen), key=[d for _, d in seen].count) for n, seen in by_name.items()}
    cells = []
    for hashes in runs:
        names: dict[str, bool] = {}
        for name, digest in sorted(hashes.items()):
            base = name.removesuffix("_batch")
            names[base] = names.get(base, False) or digest != usual[name]
        cells.append([f"{n} ✎" if edited else n for n, edited in names.items()])
    lines = [
        f"{n}: {usual[n][:12]}"
        + (
            ""
            if all(d == usual[n] for _, d in seen)
            else " (✎ other runs: " + ", ".join(sorted({d[:12] for _, d in seen if d != usual[n]})) + ")"
        )
        for n, seen in sorted(by_name.items())
    ]
    return (
        cells,
        "Prompt files (sha256, first 12 hex) most runs used; ✎ marks a run whose file differed:  \n"
        + "  \n".join(lines),
    )


def failure_text(frame: pd.DataFrame) -> str:
    """'2 timeout, 1 unparsed' from rows with status and n."""
    return ", ".join(f"{int(n)} {s}" for s, n in zip(frame["status"], frame["n"])) or "none"


def headline(dist: pd.DataFrame, metric: str) -> Any:
    """Bootstrap 95% interval of a metric's mean from its (value, n) distribution.

    Values are grouped to 1e-3 for the resampling (so a continuous metric stays cheap); the mean
    reported is the exact one.
    """
    rows = dist[dist["metric"] == metric]
    grouped = rows.groupby(rows["value"].round(3))["n"].sum()
    ci = bootstrap_ci(grouped.index.to_numpy(), grouped.to_numpy())
    if ci is None:
        return None
    exact = float((rows["value"] * rows["n"]).sum() / rows["n"].sum())
    return type(ci)(exact, ci.low, ci.high, ci.n)


def share_below(dist: pd.DataFrame, metric: str, threshold: float) -> tuple[int, int]:
    """(items below threshold, items scored) for one metric, exactly, from its distribution."""
    rows = dist[dist["metric"] == metric]
    return int(rows.loc[rows["value"] < threshold, "n"].sum()), int(rows["n"].sum())


def metric_rows(run_id: str, band: Band | None, corrected: bool) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """The run's metric table, a row per metric without its threshold columns, each also holding its
    card ("card": the mean shown, "scored" and "items"); and the run's score distribution (metric, value,
    n), which metric_table() reads for them. Nothing here depends on a threshold, so the page keeps it
    per database version (reads.view): the intervals' bootstrap runs once, not on every visit or slider move."""
    overview, dist, fails = reads.read(queries.runs.run_summary, run_id, band, corrected)
    overview = overview.set_index("metric")
    rows = []
    for m in reads.metrics(run_id):
        o, ci = overview.loc[m], headline(dist, m)
        item_fails = fails[(fails["metric"] == m) & (fails["grain"] == "items")]
        verdicts = fails[(fails["metric"] == m) & (fails["grain"] == "verdicts")]
        scored, items = int(dist.loc[dist["metric"] == m, "n"].sum()), int(o["n_items"])
        rows.append(
            {
                "metric": m,
                "mean": None if ci is None else round(ci.mean, 3),
                "95% CI": "–" if ci is None else f"[{ci.low:.2f}, {ci.high:.2f}]",
                "n scored": f"{scored} of {items}",
                "unsure items": int(o["n_unsure"]),
                "unscored items": failure_text(item_fails),
                "failed verdicts": failure_text(verdicts[verdicts["status"] != "unsure"]),
                "unsure verdicts": int(verdicts.loc[verdicts["status"] == "unsure", "n"].sum()),
                "distribution": charts.tenth_counts(dist, m),
                "card": "–" if ci is None else f"{ci.mean:.2f}",
                "scored": scored,
                "items": items,
            }
        )
    return rows, dist


def metric_table(
    rows: Sequence[Mapping[str, Any]], dist: pd.DataFrame, thresholds: Mapping[str, float]
) -> pd.DataFrame:
    """metric_rows()' table with each metric's threshold and the items below it (exact, from `dist`), without
    the unsure items its cards show; a metric is named as every page names it (SP1, GR)."""
    table = []
    for r in rows:
        threshold = thresholds.get(r["metric"], 0.5)
        n_below, scored = share_below(dist, r["metric"], threshold)
        # the unsure items are on the metric's card (and among the unscored items): the columns fit 1280 px
        shown = {k: v for k, v in r.items() if k not in ("distribution", "card", "scored", "items", "unsure items")}
        below = f"{n_below} ({n_below / scored:.0%})" if scored else "–"
        named = {"metric": r["metric"].upper(), "threshold": threshold, "below threshold": below}
        table.append(shown | named | {"distribution": r["distribution"]})
    return pd.DataFrame(table)


PASS_COLOUR, FAIL_COLOUR = "background-color: #d3f2dc", "background-color: #fbd9d7"
SETTLED_SHARE = 0.5  # a run's mean over fewer of its items than this share is not settled: it passes or fails nothing
LEGEND = (
    "Each metric reads **mean (items scored/items, items unsure)**, the unsure only when there are any: the "
    "mean over scored items at each "
    "judge's default uncertainty band; unsure and failed items are left out, never counted as 0. "
    ":green-background[green] passes its threshold (sidebar), :red-background[red] does not; a mean over fewer "
    "than half of the run's items is **not settled** and has no colour; an empty cell: "
    "the run has no such metric. **Top rule**: the Table-2 rule that fires on the most items at the metrics' "
    "default thresholds (the Diagnosis page reads the sidebar's). A click on a run or on 🔎 opens it here. "
    "Select two rows to compare them (the newest pair of runs that share items otherwise)."
)


def settled(scored: int, items: int) -> bool:
    """Whether a mean over `scored` of `items` items may pass or fail its threshold: it stands on at least
    SETTLED_SHARE of them (GRAMMAR's runs read GR over 21 of 72 items: not settled)."""
    return scored > 0 and scored >= SETTLED_SHARE * items


def headline_cell(row: Mapping[str, Any], metric: str) -> str:
    """'0.62 (40/48, 3 unsure) · ev 0.58 (46/48)' from a queries.diagnosis.headline() row: the mean, items
    scored of items, and the items left unsure when there are any ('0.62 (48/48)'); '– (0/48, 48 unsure)'
    when nothing is scored; ', not settled' closes a mean over fewer than half of the items (settled());
    then the mean of the items' expected values (the judge's p read as a share, unsure items included), over
    the items that have one, where the metric has one. Short, so seven
    metrics fit a screen's width. The mean comes first with two
    decimals, so sorting the text sorts the means (every metric lies in [0, 1]; '–' sorts after digits)."""
    mean, unsure = row[f"mean:{metric}"], int(row[f"unsure:{metric}"])
    scored, items = int(row[f"scored:{metric}"]), int(row["n_items"])
    shown = "–" if mean is None or pd.isna(mean) else f"{mean:.2f}"
    loose = ", not settled" if scored and not settled(scored, items) else ""
    ev, n_ev = row.get(f"ev:{metric}"), int(row.get(f"ev_n:{metric}") or 0)
    expected = f" · ev {ev:.2f} ({n_ev}/{items})" if n_ev and ev is not None and not pd.isna(ev) else ""
    return f"{shown} ({scored}/{items}{f', {unsure} unsure' if unsure else ''}{loose}){expected}"


def passes(mean: float, metric: str, threshold: float) -> bool:
    """Whether a mean passes its threshold: at or above it, or below it for a lower-is-better metric."""
    return (mean < threshold) if lower_is_better(metric) else (mean >= threshold)


def board_colours(
    heads: Sequence[Mapping[str, Any]], metrics: Sequence[str], thresholds: Mapping[str, float]
) -> pd.DataFrame:
    """Per run (rows as `heads`) and metric, the cell's CSS: pass or fail against its threshold, none when
    nothing is scored or the mean is not settled."""
    return pd.DataFrame(
        [
            {
                m: ""
                if pd.isna(h[f"mean:{m}"]) or not settled(int(h[f"scored:{m}"]), int(h["n_items"]))
                else PASS_COLOUR
                if passes(float(h[f"mean:{m}"]), m, thresholds[m])
                else FAIL_COLOUR
                for m in metrics
            }
            for h in heads
        ]
    )


def score_colours(frame: pd.DataFrame, metrics: Sequence[str], thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The Run page's item scores (a metric's column, and its "settled:" flag: queries.diagnosis.filter_items)
    coloured as the board colours a run's mean: pass or fail against the threshold, none when unscored or not
    settled (decided from too few confident verdicts, as Table 2 reads it)."""
    return pd.DataFrame(
        {
            m: [
                ""
                if pd.isna(v) or not ok
                else PASS_COLOUR
                if passes(float(v), m, thresholds.get(m, 0.5))
                else FAIL_COLOUR
                for v, ok in zip(frame[m], frame[f"settled:{m}"])
            ]
            for m in metrics
        },
        index=frame.index,
    )


def board(
    runs: pd.DataFrame,
    heads: Sequence[Mapping[str, Any]],
    present: Mapping[str, Sequence[str]],
    thresholds: Mapping[str, float],
) -> tuple[tuple[Any, Any], dict[str, Any], tuple[dict[str, Any], dict[str, Any]]]:
    """The home page's runs side by side, as two tables (SCORE_COLUMNS, then DETAIL_COLUMNS): a pandas Styler
    for st.dataframe of each, their column config, and each table's row_height and height that hold its own
    longest text wrapped (tables.fit(): a long list of prompts below does not make the scores' rows taller). A row
    per run (as `runs` lists them, `heads` their queries.diagnosis.headline() rows, `present` each
    run's metric ids): the run's name, THELMA's metrics as headline_cell() coloured against `thresholds`, the top
    rule and a 🔎 for its first item's evidence. The run and the 🔎 are plain cells that a click opens in this tab
    (open_clicked()): a link cell opened a new tab, and on a board shown again, opened it on the first click."""
    ids = list(runs["run_id"])
    tops = [top_rule(h) for h in heads]
    prompts, prompt_help = prompt_names(list(runs["prompt_hashes"]))
    frame = pd.DataFrame(
        {
            "run": ids,
            **{
                m.upper(): [headline_cell(h, m) if m in present.get(r, ()) else "" for h, r in zip(heads, ids)]
                for m in THELMA
            },
            "top rule": [
                ""
                if t is None
                else f"{RULES[t[0]].name}: {t[1]} of {int(h['n_items'])} items ({t[2]} only it explains), "
                f"fix {RULES[t[0]].components}"
                for h, t in zip(heads, tops)
            ],
            "evidence": ["" if t is None else "🔎" for t in tops],
            "items": list(runs["n_done"]),
            "judge": list(runs["judge"]),
            "status": list(runs["status"]),
            "created": list(runs["created_at"]),
            "who": [w or "" for w in runs["who"]],
            "prompts": [", ".join(names) for names in prompts],  # a list's bubbles would not wrap in their cell
        }
    )
    counts = [f"{done} of {total}" for done, total in zip(runs["n_done"], runs["n_items"])]
    widths = board_px(counts, [str(j) for j in runs["judge"]], ids)
    # each table is sent with its own columns only: the page is drawn sooner than with the whole frame twice
    (score_frame, score_rows), (detail_frame, detail_rows) = (tables.fit(frame[c], widths) for c in TABLES)
    colours = board_colours(heads, THELMA, thresholds).rename(columns=str.upper)
    scores = score_frame.style.apply(lambda _: colours, axis=None, subset=list(colours.columns))
    details = detail_frame.style
    for i, count in enumerate(counts):
        # the items count sorts as a number and reads "done of total"
        details = details.format(_fixed(count), subset=pd.IndexSlice[[i], ["items"]])
    return (scores.format(na_rep=""), details), _board_columns(prompt_help, widths), (score_rows, detail_rows)


def _fixed(text: str) -> Callable[[Any], str]:
    """A Styler formatter that shows this text whatever the cell's value."""
    return lambda _: text


# board()'s frame is drawn twice so that neither scrolls sideways at 1280 px: the scores (beside the row
# markers; a cell wraps onto a second line for its counts) and, below, each run's details.
SCORE_COLUMNS = ["run", *(m.upper() for m in THELMA), "top rule", "evidence"]
DETAIL_COLUMNS = ["run", "items", "judge", "status", "created", "who", "prompts"]
TABLES = (SCORE_COLUMNS, DETAIL_COLUMNS)
BOARD_PX = {"run": 126, **{m.upper(): 72 for m in THELMA}, "top rule": 104, "evidence": 40}
# the prompts' names are the details' longest text: they have the room a judge's name seldom needs
# who: an imported run's importer, time and what the file claims ("imported by ana@example.com on 2026-12-07 19:02;
# written as ci@example.com in the file") wraps in four lines
BOARD_PX |= {"items": 70, "judge": 130, "status": 70, "created": 120, "who": 150, "prompts": 150}
JUDGE_MAX_PX = 200
RUN_MAX_PX = 160  # "upload-20261207-1930", the Evaluate page's default name, takes 159 px


def board_px(counts: Sequence[str], judges: Sequence[str] = (), runs: Sequence[str] = ()) -> dict[str, int]:
    """BOARD_PX, with the items column as wide as its longest "done of total" (a number's cell does not
    wrap: "100000 of 100000" takes 116 px) and the judge's as wide as its longest name, up to JUDGE_MAX_PX (a
    model's name is one word, which the grid would break), both taken from the prompts' column, whose names wrap;
    and the run's as wide as its longest name, up to RUN_MAX_PX (an upload's default name), taken from the
    prompts' column below and from the top rule's, which wraps, above."""
    items = tables.one_line_px(counts, BOARD_PX["items"])
    judge = min(JUDGE_MAX_PX, tables.one_line_px(judges, BOARD_PX["judge"]))
    run = min(RUN_MAX_PX, tables.one_line_px(runs, BOARD_PX["run"]))
    wider = items - BOARD_PX["items"] + judge - BOARD_PX["judge"] + run - BOARD_PX["run"]
    return BOARD_PX | {
        "run": run,
        "items": items,
        "judge": judge,
        "prompts": BOARD_PX["prompts"] - wider,
        "top rule": BOARD_PX["top rule"] - (run - BOARD_PX["run"]),
    }


def _board_columns(prompt_help: str, widths: Mapping[str, int]) -> dict[str, Any]:
    """board()'s column config: dates, a tooltip per metric, and widths that fit 1280 px."""
    config = {
        "run": st.column_config.TextColumn("run", help="a click opens the run's items", pinned=True),
        "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm"),
        "who": st.column_config.TextColumn("who", help="who started the run, or who imported it"),
        **{
            m.upper(): st.column_config.TextColumn(
                m.upper(),
                help=f"{display_name(m)}: mean (scored/items, unsure) · ev: the mean expected value, the judge's "
                "p read as a share (items that have one)",
            )
            for m in THELMA
        },
        "top rule": st.column_config.TextColumn(
            "top rule", help="the rule with the most items that no other rule explains; a click on its 🔎 opens one"
        ),
        "evidence": st.column_config.TextColumn(
            "item", help="a click on 🔎 opens the top rule's first item, on its evidence"
        ),
        "prompts": st.column_config.TextColumn("prompts", help=prompt_help),
    }
    return tables.sized(config, widths)


def open_clicked(event: Any, ids: Sequence[str], heads: Sequence[Mapping[str, Any]]) -> None:
    """Open what a click on the board's cell names, in this tab: a run's cell its Run page, a 🔎 the first
    item its top rule fires on, on the rule's evidence (the Item page's Back returns to the board)."""
    for row, column in (event["selection"].get("cells") or []) if event else []:
        top = top_rule(heads[row])
        if column == "run":
            ui.switch_page("run", ui.link(run=ids[row]))
        if column == "evidence" and top is not None:
            walk.open_item("runs", ids[row], heads[row][f"first:{top[0]}"], rule=top[0])
