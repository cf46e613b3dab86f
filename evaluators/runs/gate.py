"""The CI gate: does a candidate run regress on a baseline run?

Per metric, over the items both runs scored, the paired bootstrap 95 % interval of the mean of
(candidate - baseline) is computed exactly as Compare computes it (queries.compare.compare_tables, then
stats.bootstrap_ci on the per-item deltas). A metric regresses when the interval's upper end lies
below -max_drop (default 0), and improves when its lower end lies above 0. For a metric where lower
is better (its Metric's lower_is_better) the deltas are read with their sign turned, so "regressed"
always means worse. A metric also fails when the candidate leaves more of the shared items
unscored (a judge failure or an unsure verdict; `empty`, nothing to judge, does not count) than the
baseline by more than max_unscored_rise of them: a judge that failed on most items must not pass the
gate on the few it scored. The markdown summary is written for a pull-request comment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlencode

import pandas as pd

from evaluators.core.confidence import Band, format_band
from evaluators.core.stats import bootstrap_ci
from evaluators.metrics import registry
from evaluators.metrics.registry import order_metrics
from evaluators.runs import flips as flips_mod
from evaluators.storage import queries, store

REGRESSED, OK, IMPROVED, NO_DATA = "regressed", "ok", "improved", "no shared scores"
LESS_SCORED = "fewer scored"  # fails like a regression: the candidate's judge left more items unscored
FAILING = (REGRESSED, LESS_SCORED)
MAX_UNSCORED_RISE = 0.05  # share of the shared items; unsure shares move a little with any pipeline change
SHOWN_ITEMS = 10  # items listed per metric in the markdown; the rest are counted


class GateInput(ValueError):
    """Bad input to the gate: one line naming the option and the value (exit code 2)."""


@dataclass(frozen=True)
class MetricResult:
    """One metric's verdict: means over the n items both runs scored, delta (candidate - baseline)
    with its interval, the allowed drop, and the items that fell below / rose above the threshold."""

    metric: str
    n: int
    mean_baseline: float | None
    mean_candidate: float | None
    delta: float | None
    low: float | None
    high: float | None
    max_drop: float
    verdict: str
    unscored: tuple[int, int] = (0, 0)  # shared items left unscored by a failure or unsure: baseline, candidate
    n_worse: int = 0
    n_better: int = 0
    worse_items: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass(frozen=True)
class GateResult:
    """The gate's outcome for a baseline and a candidate run."""

    baseline: str
    candidate: str
    n_shared: int
    metrics: list[MetricResult]
    band: Band | None
    judges: tuple[str, str]
    flips: flips_mod.Flips

    @property
    def regressed(self) -> list[str]:
        """The metrics that regressed or lost scored items."""
        return [m.metric for m in self.metrics if m.verdict in FAILING]

    @property
    def exit_code(self) -> int:
        """1 when any metric regressed or lost scored items, else 0."""
        return 1 if self.regressed else 0


def parse_max_drop(text: str, known: Sequence[str]) -> dict[str, float]:
    """'gr=0.02,rp=0.05' as {metric: allowed drop}; GateInput naming the bad part otherwise."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise GateInput(f"--max-drop: {part!r} is not METRIC=DROP (e.g. gr=0.02)")
        if name not in registry.METRICS:
            raise GateInput(f"--max-drop: unknown metric {name!r}; known: {', '.join(registry.METRICS)}")
        if name not in known:
            raise GateInput(f"--max-drop: metric {name!r} is not gated (gated: {', '.join(known)})")
        try:
            value = float(raw)
        except ValueError:
            raise GateInput(f"--max-drop: {name}={raw.strip()!r} is not a number") from None
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise GateInput(f"--max-drop: {name}={raw.strip()} must be within [0, 1]")
        out[name] = value
    return out


def check_runs(db: str, baseline: str, candidate: str) -> None:
    """GateInput naming the option when a run does not exist or both options name the same run."""
    for flag, run in (("--baseline", baseline), ("--candidate", candidate)):
        if not queries.runs.run_exists(db, run):
            raise GateInput(f"{flag}: no run named {run!r} in {db} (see: python -m evaluators runs --db {db})")
    if baseline == candidate:
        raise GateInput(f"--candidate: {candidate!r} is the baseline itself")


def gated_metrics(db: str, baseline: str, candidate: str, wanted: str | None) -> list[str]:
    """The metrics to gate: those given (each known and scored in both runs), else every metric both
    runs scored."""
    in_a, in_b = queries.runs.run_metric_ids(db, baseline), queries.runs.run_metric_ids(db, candidate)
    if wanted is None:
        both = order_metrics(m for m in in_a & in_b if m in registry.METRICS)
        if not both:
            raise GateInput(f"--candidate: runs {baseline!r} and {candidate!r} share no scored metric")
        return both
    out = []
    for name in (m.strip().lower() for m in wanted.split(",")):
        if not name:
            continue
        if name not in registry.METRICS:
            raise GateInput(f"--metrics: unknown metric {name!r}; known: {', '.join(registry.METRICS)}")
        for run, has in ((baseline, in_a), (candidate, in_b)):
            if name not in has:
                raise GateInput(f"--metrics: metric {name!r} is not scored in run {run!r}")
        out.append(name)
    if not out:
        raise GateInput(f"--metrics: {wanted!r} names no metric")
    return order_metrics(out)


def _verdict(low: float, high: float, max_drop: float) -> str:
    if high < -max_drop:
        return REGRESSED
    return IMPROVED if low > 0 else OK


def unscored(frame: pd.DataFrame, items: pd.Index, metric: str) -> int:
    """How many of `items` a run's wide table (queries.runs.run_scores_wide) left unscored on `metric` by a judge
    failure or an unsure verdict; `empty` (nothing to judge) and not-applicable do not count."""
    failed = frame.loc[frame["item_id"].isin(items), "failed_metrics"].fillna("")
    return int(failed.str.contains(rf"(?:^|, ){metric}:(?!empty(?:,|$))", regex=True).sum())


def run_gate(
    db: str,
    baseline: str,
    candidate: str,
    metrics: Sequence[str],
    max_drop: Mapping[str, float],
    band: Band | None = None,
    thresholds: Mapping[str, float] | None = None,
    max_unscored_rise: float = MAX_UNSCORED_RISE,
) -> GateResult:
    """Gate `candidate` against `baseline` on `metrics`; GateInput for an unknown run or no shared items."""
    check_runs(db, baseline, candidate)
    n_shared = queries.compare.shared_item_count(db, baseline, candidate)
    if n_shared == 0:
        raise GateInput(f"--candidate: runs {baseline!r} and {candidate!r} share no item ids")
    th = dict(thresholds or {})
    scores = queries.sql.scores_sql(band)
    with store.reading(db):
        a = queries.runs.run_scores_wide(db, baseline, metrics, scores)
        b = queries.runs.run_scores_wide(db, candidate, metrics, scores)
        judges = queries.runs.runs(db).set_index("run_id")["judge"]
    compared = queries.compare.compare_tables(a, b, metrics, th)
    summary, dist = compared["summary"].set_index("metric"), compared["deltas"]
    shared = pd.Index(a["item_id"]).intersection(pd.Index(b["item_id"]))
    results = []
    for m in metrics:
        drop = float(max_drop.get(m, 0.0))
        lost = (unscored(a, shared, m), unscored(b, shared, m))
        fewer = lost[1] - lost[0] > max_unscored_rise * len(shared)
        if m not in summary.index:
            results.append(
                MetricResult(m, 0, None, None, None, None, None, drop, LESS_SCORED if fewer else NO_DATA, lost)
            )
            continue
        worse = queries.compare.crossed_items(
            a, b, m, th.get(m, registry.threshold(m)), "better" if registry.lower_is_better(m) else "worse"
        )
        results.append(_metric_result(m, summary.loc[m], dist[dist["metric"] == m], drop, fewer, lost, worse))
    if all(r.verdict == NO_DATA for r in results):  # nothing to compare and no coverage lost
        raise GateInput(
            f"--candidate: no item is scored in both {baseline!r} and {candidate!r} on {', '.join(metrics)}"
        )
    attributed = flips_mod.between(
        db, baseline, candidate, band, [m for m in metrics if m in registry.component_metrics()]
    )
    return GateResult(
        baseline,
        candidate,
        n_shared,
        results,
        band,
        (str(judges.get(baseline, "")), str(judges.get(candidate, ""))),
        attributed,
    )


def _metric_result(
    m: str, s: Any, part: pd.DataFrame, drop: float, fewer: bool, lost: tuple[int, int], worse: pd.DataFrame
) -> MetricResult:
    """One gated metric: its means, the paired interval of the deltas read in the metric's own direction
    (a lower-is-better metric's turned), and its verdict."""
    sign = -1.0 if registry.lower_is_better(m) else 1.0
    ci = bootstrap_ci(sign * part["delta"].to_numpy(), part["n"].to_numpy())
    assert ci is not None  # a metric with pairs has deltas
    low, high = sign * ci.low, sign * ci.high  # reported in the metric's own direction
    low, high = min(low, high), max(low, high)
    return MetricResult(
        m,
        int(s["n_pairs"]),
        float(s["mean_a"]),
        float(s["mean_b"]),
        float(s["delta"]),
        low,
        high,
        drop,
        LESS_SCORED if fewer else _verdict(ci.low, ci.high, drop),
        lost,
        int(s["n_better"] if sign < 0 else s["n_worse"]),
        int(s["n_worse"] if sign < 0 else s["n_better"]),
        worse,
    )


def _num(x: float | None, signed: bool = False) -> str:
    return "–" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


def table(result: GateResult) -> str:
    """The gate's outcome as a short plain-text table for the terminal."""
    lines = [
        f"gate: {result.candidate} against {result.baseline}, {result.n_shared} shared items"
        + (f", band {format_band(result.band)}" if result.band else ""),
        f"{'metric':<24} {'n':>6} {'baseline':>9} {'candidate':>9} {'delta':>7} {'95% CI':>17} "
        f"{'max drop':>8}  verdict",
    ]
    for r in result.metrics:
        ci = "–" if r.low is None else f"[{r.low:+.3f}, {r.high:+.3f}]"
        lines.append(
            f"{r.metric:<24} {r.n:>6} {_num(r.mean_baseline):>9} {_num(r.mean_candidate):>9} "
            f"{_num(r.delta, True):>7} {ci:>17} {r.max_drop:>8.3f}  {r.verdict}"
        )
    for r in result.metrics:
        if r.verdict == NO_DATA:
            lines.append(f"warning: {r.metric} is not gated: no item has a score in both runs (unsure or failed)")
        if r.verdict == LESS_SCORED:
            lines.append(f"{r.metric}: {_less_scored(r, result.n_shared)}")
    if result.judges[0] != result.judges[1]:
        lines.append(
            f"warning: different judges ({result.judges[0]} / {result.judges[1]}): "
            "deltas mix a pipeline change with a judge change"
        )
    lines.append(f"regressed: {', '.join(result.regressed)}" if result.regressed else "no metric regressed")
    return "\n".join(lines)


def _less_scored(r: MetricResult, n_shared: int) -> str:
    return (
        f"the candidate left {r.unscored[1]} of {n_shared} shared items unscored (failed or unsure), "
        f"the baseline {r.unscored[0]}"
    )


def _url(base: str, path: str, **params: str | None) -> str:
    return f"{base.rstrip('/')}/{path}?" + urlencode({k: v for k, v in params.items() if v is not None})


def _esc(text: object) -> str:
    """A markdown table cell: no pipes, no line breaks."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(result: GateResult, base_url: str | None = None) -> str:
    """A summary fit for a pull-request comment: per metric the delta, interval and verdict, the items
    that crossed a threshold (capped), why verdicts flipped, and dashboard links when `base_url` is set."""
    band = format_band(result.band) if result.band else None

    def item(run: str, item_id: str) -> str:
        code = f"`{_esc(item_id)}`"
        return f"[{code}]({_url(base_url, 'Item', run=run, item=item_id, band=band)})" if base_url else code

    out = _md_head(result, base_url, band) + _md_table(result) + _md_crossed(result, item) + _md_flips(result, item)
    return "\n".join(out) + "\n"


def _md_head(result: GateResult, base_url: str | None, band: str | None) -> list[str]:
    """The verdict, the rule, and what was not gated or differs between the runs."""
    a, b = result.baseline, result.candidate
    head = (
        "❌ **Regression**: " + ", ".join(f"`{m}`" for m in result.regressed)
        if result.regressed
        else "✅ **No metric regressed**"
    )
    out = [
        f"## RAG Triage gate: `{_esc(b)}` against `{_esc(a)}`",
        "",
        head,
        "",
        f"{result.n_shared} items in both runs. A metric regresses when the upper end of the paired bootstrap "
        "95% interval of (candidate − baseline) lies below −max drop.",
    ]
    not_gated = [r.metric for r in result.metrics if r.verdict == NO_DATA]
    if not_gated:
        out += [
            "",
            "⚠ Not gated, no item has a score in both runs (unsure or failed): "
            + ", ".join(f"`{m}`" for m in not_gated),
        ]
    out += [
        f"- `{r.metric}` fewer scored: {_less_scored(r, result.n_shared)}"
        for r in result.metrics
        if r.verdict == LESS_SCORED
    ]
    if result.judges[0] != result.judges[1]:
        out += [
            "",
            f"⚠ Different judges (`{_esc(result.judges[0])}` / `{_esc(result.judges[1])}`): deltas mix a "
            "pipeline change with a judge change.",
        ]
    if base_url:
        out += ["", f"[Open the comparison]({_url(base_url, 'Compare', run=a, other=b, band=band)})"]
    return out


def _md_table(result: GateResult) -> list[str]:
    """One row per metric: n, means, delta, interval, max drop and verdict."""
    out = [
        "",
        "| metric | n scored in both | baseline | candidate | delta | 95% CI | max drop | verdict |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    icons = {
        REGRESSED: "❌ regressed",
        LESS_SCORED: "❌ fewer scored",
        IMPROVED: "⬆ improved",
        OK: "ok",
        NO_DATA: NO_DATA,
    }
    for r in result.metrics:
        ci = "–" if r.low is None else f"[{r.low:+.3f}, {r.high:+.3f}]"
        out.append(
            f"| `{r.metric}` | {r.n} of {result.n_shared} | {_num(r.mean_baseline)} | {_num(r.mean_candidate)} "
            f"| {_num(r.delta, True)} | {ci} | {r.max_drop:g} | {icons[r.verdict]} |"
        )
    return out


def _md_crossed(result: GateResult, item: Callable[[str, str], str]) -> list[str]:
    """The items that fell below a threshold, per metric (capped)."""
    crossed = [r for r in result.metrics if r.n_worse]
    out = ["", "### Items that fell below a threshold", ""]
    if not crossed:
        out.append("None.")
    for r in crossed:
        shown = r.worse_items.head(SHOWN_ITEMS)
        listed = ", ".join(
            f"{item(result.candidate, i)} ({x:.2f} → {y:.2f})"
            for i, x, y in zip(shown["item_id"], shown["a"], shown["b"])
        )
        more = f", and {r.n_worse - len(shown)} more" if r.n_worse > len(shown) else ""
        out.append(f"- `{r.metric}`: {r.n_worse} item(s): {listed}{more}")
    return out


def _md_flips(result: GateResult, item: Callable[[str, str], str]) -> list[str]:
    """Why verdicts flipped: causes per metric, and the items with the most flips (capped)."""
    f = result.flips
    out = ["", "### Why verdicts flipped", ""]
    if f.rollup.empty:
        return out + ["No claim, sub-question or source metric gated."]
    causes = f.cause_counts()
    out.append(
        f"{f.n_flips} verdict(s) flipped: "
        + ", ".join(f"{n} {c}" for c, n in causes.items())
        + ". A verdict unsure or failed in either run is not a flip."
    )
    out += [
        "",
        "| metric | compared | flipped | " + " | ".join(flips_mod.CAUSES) + " | unsure or failed | in one run only |",
        "|---|" + "---:|" * (4 + len(flips_mod.CAUSES)),
    ]
    for row in f.rollup.to_dict("records"):
        out.append(
            f"| `{row['metric']}` | {row['compared']} | {row['flipped']} | "
            + " | ".join(str(row[c]) for c in flips_mod.CAUSES)
            + f" | {row[flips_mod.UNDECIDED]} | {row[flips_mod.UNMATCHED]} |"
        )
    if not f.items.empty:
        shown = f.items.sort_values(["flips", "item_id"], ascending=[False, True]).head(SHOWN_ITEMS)
        out += ["", "Items with the most flips:"]
        out += [
            f"- {item(result.candidate, r.item_id)}: {r.flips} ({_esc(r.metrics)}), {r.cause}"
            for r in queries.sql.rows(shown)
        ]
        if len(f.items) > len(shown):
            out.append(f"- and {len(f.items) - len(shown)} more items")
    return out
