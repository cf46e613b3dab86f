"""View state in the URL: every setting that makes a view (run, item, thresholds, band, filters) lives in
st.query_params, so a view is a link someone can paste into a triage chat. Widgets synced with the
URL, parsers that refuse a value out of range (the view falls back to its default), and the
thresholds, band and corrected-scores controls every page shares.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import streamlit as st

from evaluators.core.confidence import DEFAULT_BANDS, LABEL, Band, format_band, parse_band
from evaluators.dashboard.markup import md
from evaluators.metrics import registry
from evaluators.metrics.diagnosis import DEFAULT_THRESHOLDS


def _ctx() -> dict[str, str]:
    """Per-session memory of URL state, restored when the sidebar navigation drops the query string."""
    return st.session_state.setdefault("_url_ctx", {})


def remembered(key: str) -> str | None:
    """A view setting as the URL gives it, else as this session last set it (what url_value() would read)."""
    return st.query_params.get(key) or _ctx().get(key)


def url_value(key: str, default: Any, parse: Callable[[str], Any] = str, remember: bool = True) -> Any:
    """A view setting from the URL (the source of truth), else this session's last one, else default."""
    raw = st.query_params.get(key)
    if raw is None and remember and key in _ctx():
        raw = _ctx()[key]
        st.query_params[key] = raw
    try:
        return default if raw is None else parse(raw)
    except (TypeError, ValueError):
        return default


def set_url(key: str, value: Any, default: Any = None, remember: bool = True) -> None:
    """Write one view setting to the URL; the default value is left out to keep links short."""
    text = (
        ",".join(map(str, value))
        if isinstance(value, (list, tuple))
        else ("" if value is None else (f"{value:g}" if isinstance(value, float) else str(value)))
    )
    if value == default or value in (None, "", [], ()):
        st.query_params.pop(key, None)
        _ctx().pop(key, None)
    else:
        st.query_params[key] = text
        if remember:
            _ctx()[key] = text


def synced(
    widget: Callable[..., Any],
    label: str,
    key: str,
    default: Any,
    parse: Callable[[str], Any] = str,
    remember: bool = False,
    explicit: bool = False,
    **kwargs: Any,
) -> Any:
    """Draw a keyed widget whose value lives in the URL under `key`: read it first, write it on change.

    explicit: always keep the value in the URL, even the default (a run or item id: "the newest run"
    would point elsewhere once a new run lands, so a pasted link names it).
    """
    value = url_value(key, default, parse, remember)
    options = kwargs.get("options")
    if options is not None and not isinstance(value, list) and value not in options:
        value = default
    if isinstance(value, list) and options is not None:
        value = [v for v in value if v in options]
    st.session_state[key] = value

    def _write() -> None:
        set_url(key, st.session_state[key], None if explicit else default, remember)

    if explicit and value not in (None, ""):
        set_url(key, value, None, remember)
    return widget(label, key=key, on_change=_write, **kwargs)


def csv_list(text: str) -> list[str]:
    """Parse 'a,b' from the URL into ['a', 'b']."""
    return [p for p in text.split(",") if p]


def unit(text: str) -> float:
    """Parse a threshold from the URL: a number within [0, 1]."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(text)
    return value


def whole(low: int, high: int) -> Callable[[str], int]:
    """A URL parser for a whole number within [low, high]; anything else raises ValueError, so
    url_value() falls back to the default (a huge, negative or NaN page number is ignored)."""

    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value

    return parse


def thresholds(metric_ids: Sequence[str]) -> dict[str, float]:
    """Per-metric thresholds from sidebar sliders synced with ?th_<metric>=; Table 2's defaults otherwise."""
    out = dict(DEFAULT_THRESHOLDS)
    with st.sidebar.expander("Thresholds (low < threshold ≤ high)", expanded=False):
        for m in metric_ids:
            default = registry.threshold(m)
            out[m] = synced(
                st.slider,
                f"{m.upper()} threshold",
                f"th_{m}",
                default,
                unit,
                remember=True,
                min_value=0.0,
                max_value=1.0,
                step=0.01,
            )
    for m in DEFAULT_THRESHOLDS:  # rules may read a metric this run lacks; keep a URL value for it
        if m not in metric_ids:
            out[m] = url_value(f"th_{m}", DEFAULT_THRESHOLDS[m], unit)
    return out


def band() -> Band | None:
    """The uncertainty band in the URL (?band=LO,HI), or None for each judge kind's default band; a
    value that is not a band reads as None (band_control() says so)."""
    try:
        return parse_band(st.query_params["band"]) if "band" in st.query_params else None
    except ValueError:
        return None


def band_control() -> Band | None:
    """A sidebar field for the uncertainty band, synced with ?band=: a verdict with LO < p < HI is
    unsure and left out of its score. Empty: each judge kind's default band. A bad value is named
    and ignored, never a crash."""
    defaults = ", ".join(f"{kind} {format_band(b)}" for kind, b in DEFAULT_BANDS.items() if kind != LABEL)
    text = synced(
        st.sidebar.text_input,
        "Uncertainty band (LO,HI)",
        "band",
        "",
        remember=True,
        placeholder="default per judge",
        help=f"A verdict whose p = P(match is 1) lies strictly between LO and HI is unsure: left out "
        f"of its score and shown neither 0 nor 1. Empty: the default band of each judge kind "
        f"({defaults}); label-only judges are never unsure. Moving it calls no judge.",
    )
    if not text.strip():
        return None
    try:
        return parse_band(text)
    except ValueError as exc:
        st.sidebar.warning(f"Uncertainty band ignored, the default bands apply: {md(exc)}")
        return None


SCORES = ("raw", "corrected")  # ?scores=: the judge's verdicts, or people's corrections in their place


def corrected() -> bool:
    """Whether the URL asks for corrected scores (?scores=corrected); anything else reads raw."""
    return st.query_params.get("scores") == "corrected"


def scores_control() -> bool:
    """A sidebar switch between the judge's scores and scores with people's corrections in place of
    its verdicts, synced with ?scores=; returns True for corrected."""
    choice = synced(
        st.sidebar.radio,
        "Scores",
        "scores",
        SCORES[0],
        options=list(SCORES),
        horizontal=True,
        format_func={"raw": "judge's", "corrected": "corrected by people"}.get,
        remember=True,
        help="Corrected: every verdict people corrected on the Item page or in an imported labels "
        "file counts with their value; the judge's own scores never change.",
    )
    return choice == "corrected"
