"""The dashboard's plotly figures: the only module that imports plotly.

Figures are built as plain dicts and validated once by go.Figure(dict): plotly's incremental helpers
(make_subplots, add_vline per subplot) cost about 0.1 s per call, more than the whole page's SQL.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence, cast

import pandas as pd
import plotly.graph_objects as go

# Passed to st.plotly_chart: no plotly logo in the chart's toolbar.
PLOT_CONFIG = {"displaylogo": False}


def _vline(x: float, xref: str = "x") -> dict:
    return {
        "type": "line",
        "xref": xref,
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"dash": "dash", "color": "#d33"},
    }


def tenths(dist: pd.DataFrame, metric: str) -> pd.Series:
    """A metric's scored items per tenth of the score range, indexed by the tenth 0 ... 9 (a score of 1.0
    falls in the last), from a (metric, value, n) distribution; empty tenths left out."""
    rows = dist[dist["metric"] == metric]
    return rows.groupby((rows["value"].clip(0, 1) * 10).astype(int).clip(upper=9))["n"].sum()


def tenth_counts(dist: pd.DataFrame, metric: str) -> list[int]:
    """tenths() as ten counts, empty tenths included: an inline bar chart's values."""
    return tenths(dist, metric).reindex(range(10), fill_value=0).astype(int).tolist()


def histograms(dist: pd.DataFrame, metric_ids: Sequence[str], th: Mapping[str, float]) -> go.Figure:
    """Small multiples: the score distribution of each metric with its threshold line."""
    n, gap = len(metric_ids), 0.02
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {
        "height": 260,
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "showlegend": False,
        "yaxis": {"title": {"text": "items"}},
        "shapes": [],
        "annotations": [],
    }
    for i, m in enumerate(metric_ids):
        axis = "x" if i == 0 else f"x{i + 1}"
        counts = tenths(dist, m)
        data.append(
            {
                "type": "bar",
                "x": (counts.index.to_numpy(float) / 10 + 0.05).round(2),
                "y": counts.to_numpy(),
                "width": 0.1,
                "xaxis": axis,
                "yaxis": "y",
                "name": m.upper(),
                "hovertemplate": "%{x:.2f}±0.05: %{y} items<extra></extra>",
            }
        )
        domain = [i / n + (gap if i else 0), (i + 1) / n - (gap if i < n - 1 else 0)]
        layout["xaxis" if i == 0 else f"xaxis{i + 1}"] = {"domain": domain, "range": [0, 1], "anchor": "y"}
        layout["shapes"].append(_vline(th.get(m, 0.5), axis))
        layout["annotations"].append(
            {"text": m.upper(), "x": sum(domain) / 2, "y": 1.12, "xref": "paper", "yref": "paper", "showarrow": False}
        )
    return go.Figure({"data": data, "layout": layout})


def heatmap(corr: pd.DataFrame, metric_ids: Sequence[str]) -> go.Figure:
    """Correlation matrix of the metrics across items."""
    index = {m: i for i, m in enumerate(metric_ids)}
    grid = [[1.0 if a == b else None for b in metric_ids] for a in metric_ids]
    for a, b, r in corr[["a", "b", "r"]].itertuples(index=False):
        value = None if pd.isna(r) else round(float(r), 2)
        grid[index[a]][index[b]] = grid[index[b]][index[a]] = value
    names = [m.upper() for m in metric_ids]
    return go.Figure(
        {
            "data": [
                {
                    "type": "heatmap",
                    "z": grid,
                    "x": names,
                    "y": names,
                    "zmin": -1,
                    "zmax": 1,
                    "colorscale": "RdBu",
                    "texttemplate": "%{z}",
                }
            ],
            "layout": {"height": 360, "margin": {"l": 10, "r": 10, "t": 10, "b": 10}},
        }
    )


def delta_chart(frame: pd.DataFrame) -> go.Figure:
    """Mean delta per metric with its paired-bootstrap 95% interval as error bars."""
    return go.Figure(
        {
            "data": [
                {
                    "type": "bar",
                    "x": [m.upper() for m in frame["metric"]],
                    "y": frame["delta"].tolist(),
                    "marker": {"color": ["#2a9d8f" if r else "#bbbbbb" for r in frame["real"]]},
                    "error_y": {
                        "type": "data",
                        "symmetric": False,
                        "array": (frame["ci_high"] - frame["delta"]).tolist(),
                        "arrayminus": (frame["delta"] - frame["ci_low"]).tolist(),
                    },
                }
            ],
            "layout": {
                "height": 300,
                "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
                "yaxis": {"title": {"text": "mean delta (other − run)"}, "zeroline": True},
            },
        }
    )


def quadrant(points: pd.DataFrame, x: str, y: str, th: Mapping[str, float], counts: pd.DataFrame) -> go.Figure:
    """Scatter of one metric pair over a sample of items, with threshold lines and all-item quadrant counts."""
    tx, ty = th.get(x, 0.5), th.get(y, 0.5)
    hline = {
        "type": "line",
        "xref": "paper",
        "yref": "y",
        "x0": 0,
        "x1": 1,
        "y0": ty,
        "y1": ty,
        "line": {"dash": "dash", "color": "#d33"},
    }
    notes = [
        {
            "x": tx / 2 if x_low else (1 + tx) / 2,
            "y": ty / 2 if y_low else (1 + ty) / 2,
            "text": f"{int(n)} item{'' if n == 1 else 's'}",
            "showarrow": False,
            "font": {"size": 14, "color": "#333"},
        }
        for x_low, y_low, n in counts[["x_low", "y_low", "n"]].itertuples(index=False)
    ]
    return go.Figure(
        {
            "data": [
                {
                    "type": "scattergl",
                    "x": points[x].to_numpy(float),
                    "y": points[y].to_numpy(float),
                    "mode": "markers",
                    "text": points["item_id"].to_numpy(object),
                    "opacity": 0.5,  # numpy: plotly skips per-element checks
                    "hovertemplate": f"%{{text}}<br>{x.upper()} %{{x:.2f}}, {y.upper()} %{{y:.2f}}<extra></extra>",
                }
            ],
            "layout": {
                "height": 320,
                "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
                "shapes": [_vline(tx), hline],
                "annotations": notes,
                "xaxis": {"title": {"text": x.upper()}, "range": [-0.05, 1.05]},
                "yaxis": {"title": {"text": y.upper()}, "range": [-0.05, 1.05]},
            },
        }
    )


def quadrant_grid(
    counts: pd.DataFrame, x: str, y: str, th: Mapping[str, float], rules: Mapping[tuple[bool, bool], str]
) -> go.Figure:
    """A metric pair's four quadrants as a 2 x 2 grid of item counts (x_low, y_low, n as
    views.diagnosis.quadrant_counts() gives them; a missing quadrant is 0), darker for more items, each
    square naming the rules that read it."""
    n = {(bool(a), bool(b)): int(c) for a, b, c in counts[["x_low", "y_low", "n"]].itertuples(index=False)}
    lows = (True, False)  # low first: columns left to right, rows bottom to top, as on a scatter
    z = [[n.get((x_low, y_low), 0) for x_low in lows] for y_low in lows]
    text = [[rules.get((x_low, y_low), "") for x_low in lows] for y_low in lows]

    def axis(metric: str) -> dict[str, Any]:
        t = th.get(metric, 0.5)
        ticks = [f"low (< {t:g})", f"high (≥ {t:g})"]
        return {"title": {"text": metric.upper()}, "tickvals": ["low", "high"], "ticktext": ticks, "fixedrange": True}

    return go.Figure(
        {
            "data": [
                {
                    "type": "heatmap",
                    "z": z,
                    "x": ["low", "high"],
                    "y": ["low", "high"],
                    "text": text,
                    "texttemplate": "<b>%{z}</b><br>%{text}",
                    "textfont": {"size": 14},
                    "colorscale": "Blues",
                    "zmin": 0,
                    "showscale": False,
                    "xgap": 3,
                    "ygap": 3,
                    "hovertemplate": f"{x.upper()} %{{x}} · {y.upper()} %{{y}}: %{{z}} items<extra></extra>",
                }
            ],
            "layout": {
                "height": 220,
                "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
                "xaxis": axis(x),
                "yaxis": axis(y),
            },
        }
    )


# What trend_chart()'s markers mean: the colours are the metrics, in its legend.
TREND_KEY = (
    "★ the baseline · ◆ a real change against it (its 95% interval excludes 0) · ● no real change; "
    "bars: each mean's 95% interval."
)


def trend_chart(frame: pd.DataFrame, metric_ids: Sequence[str], order: Sequence[str]) -> go.Figure:
    """Metric means over trend points (runs in time order, or time buckets) with their 95% intervals as
    error bars; the baseline is a star, a real change against it a large diamond, and every point's
    hover says "n scored of N"."""
    data = []
    for m in metric_ids:
        rows = (
            frame[(frame["metric"] == m) & frame["mean"].notna()]
            .set_index("point")
            .reindex([p for p in order if p in set(frame.loc[frame["metric"] == m, "point"])])
            .dropna(subset=["mean"])
        )
        if rows.empty:
            continue
        notes = [
            f"n scored {int(r.n_scored)} of {int(r.n_total)}"
            + (
                " · baseline"
                if r.baseline
                else ""
                if pd.isna(r.delta)
                else f" · change {r.delta:+.3f} [{r.delta_low:+.3f}, {r.delta_high:+.3f}] "
                f"{'real' if r.real else 'noise'} ({r.test})"
            )
            for r in cast(Iterable[Any], rows.itertuples())
        ]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": m.upper(),
                "x": list(rows.index),
                "y": rows["mean"].tolist(),
                "text": notes,
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": (rows["high"] - rows["mean"]).tolist(),
                    "arrayminus": (rows["mean"] - rows["low"]).tolist(),
                },
                "marker": {
                    "size": [14 if b or r else 7 for b, r in zip(rows["baseline"], rows["real"])],
                    "symbol": [
                        "star" if b else "diamond" if r else "circle" for b, r in zip(rows["baseline"], rows["real"])
                    ],
                },
                "hovertemplate": f"{m.upper()} %{{x}}: %{{y:.3f}}<br>%{{text}}<extra></extra>",
            }
        )
    return go.Figure(
        {
            "data": data,
            "layout": {
                "height": 380,
                "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
                "xaxis": {"type": "category", "categoryorder": "array", "categoryarray": list(order)},
                "yaxis": {"title": {"text": "mean (95% CI)"}, "range": [-0.05, 1.05]},
            },
        }
    )
