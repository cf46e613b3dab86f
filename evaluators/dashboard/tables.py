"""Tables as the grid draws them at 1280 x 800: column widths in pixels, long text wrapped or cut at a word
with '…' so no cell is cut off, rows as high as their text, keys headed by what they hold, and rows that open
something with one click."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable, Literal, Mapping

import pandas as pd
import streamlit as st

from evaluators.dashboard.markup import TERMS
from evaluators.dashboard.ui import PAGES

# A table whose rows open something takes one click anywhere on a row: its marker selects the row, any
# other cell selects that cell (a link cell too, which would otherwise need a second click for a new tab).
ONE_CLICK: tuple[Literal["single-row"], Literal["single-cell"]] = ("single-row", "single-cell")


def clicked(event: Any, n_rows: int) -> int | None:
    """The row a click selected, by its marker or one of its cells, in a table drawn with on_select="rerun"
    and selection_mode=ONE_CLICK (its event), if any."""
    selection = event["selection"] if event else {}
    rows = [*selection.get("rows", []), *(cell[0] for cell in selection.get("cells", []))]
    return rows[0] if rows and rows[0] < n_rows else None


# At 1280 x 800 beside the open sidebar a table's grid is 818 px wide, less its row markers when rows
# can be picked. Columns whose pixel widths sum to TABLE_PX fit it (a wider window stretches them), and rows
# WRAP_PX high (the least the grid wraps text in) let a long text wrap in its cell, not widen the table.
TABLE_PX, WRAP_PX = 780, 72
ROW_PX = 35  # the grid's own row: one line, unwrapped
MARKERS_PX = 36  # the row markers of a table whose rows can be picked (clickable())
# The grid's 14 px font, measured in Chromium: each character's advance in px, rounded up by class (any
# other character counts as 12 px). A cell's text wraps in its width less CELL_PAD_PX, its rows hold
# WRAP_LINES lines at WRAP_PX and LINE_PX more a line after that, and a row holds MAX_LINES at most.
_ADVANCE = {" \u00a0": 2.8, "ijlI'.,:;|": 3.7, "f()[]{}!-": 4.4, "rt/\\": 4.9, 'sz?"*': 6.0, "cxyvYJLFk": 6.8}
_ADVANCE |= {"0123456789#$+<=>^~_aegXVESTZ`oA": 7.6, "bdpqhunPRC": 8.0, "BK&DG": 8.7, "HNUOQ": 9.3, "Mw": 10.2}
_ADVANCE |= {"mW%@": 11.9}
CHAR_PX = {ch: px for chars, px in _ADVANCE.items() for ch in chars}
CELL_PAD_PX, LINE_PX, WRAP_LINES, MAX_LINES = 16, 19, 4, 8
# The grid wraps a line before it is full: "ask about" (57 px drawn) went onto two lines in a cell with 60 px
# of room. fit() counts a cell's lines as if it were this much narrower, so its row holds them all.
WRAP_SLACK_PX = 4
# Where the grid may break a line: any space but a no-break one, which keeps its words on one line.
_BREAKS = re.compile(r"[^\S\u00a0]+")


def text_px(text: str) -> float:
    """The width of `text` in the grid's font (at most a few percent wide of what Chromium draws)."""
    return sum(CHAR_PX.get(ch, 12.0) for ch in text)


def one_line_px(texts: Iterable[str], least: int) -> int:
    """The width of a column whose texts each keep one line (an id, a count), `least` at the least."""
    return max([least, *(math.ceil(text_px(t)) + CELL_PAD_PX for t in texts)])


def text_lines(text: str, px: int) -> int:
    """How many lines `text` wraps onto in a cell `px` wide: at spaces and newlines alike (the grid draws
    a newline as a space), never at a no-break space, and a word longer than a line breaks where the line ends."""
    room, lines, used = px - CELL_PAD_PX, 1, 0.0
    for word in filter(None, _BREAKS.split(text)):
        width = text_px(word)
        if used and used + CHAR_PX[" "] + width <= room:
            used += CHAR_PX[" "] + width
            continue
        lines += 1 if used else 0
        while width > room:  # a word wider than the cell breaks
            lines, width = lines + 1, width - room
        used = width
    return lines


def _cut(text: str, px: int, lines: int) -> str:
    """`text` as it fits `lines` lines of a cell `px` wide: whole, or cut at a word with '…'."""
    if text_lines(text, px) <= lines:
        return text
    words = text.split(" ")
    lo, hi = 0, len(words)  # the most words that still fit with '…', by halving
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if text_lines(" ".join(words[:mid]) + "…", px) <= lines else (lo, mid - 1)
    return " ".join(words[:lo]).rstrip() + "…" if lo else _cut_word(text, px, lines)


def _cut_word(text: str, px: int, lines: int) -> str:
    """A text whose first word alone is longer than `lines` lines: its start that fits, with '…'."""
    room = (px - CELL_PAD_PX) * lines - CHAR_PX.get("…", 12.0)
    end, used = 0, 0.0
    while end < len(text) and used + CHAR_PX.get(text[end], 12.0) <= room:
        used, end = used + CHAR_PX.get(text[end], 12.0), end + 1
    return text[:end] + "…"


OPEN = {"open": st.column_config.LinkColumn("open", display_text="🔎")}  # item links (item_url()) as an icon
OPEN_PX = 44  # its header whole: 29 px of text and the cell's padding
HEADERS = {"item_id": "item", "run_id": "run", "source_fact": "fact"}  # headed by what it holds, not its field


def fitted(
    table: pd.DataFrame,
    key: str,
    widths: Mapping[str, int],
    config: Mapping[str, Any] | None = None,
    style: Callable[[pd.DataFrame], Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Draw a table across the page, its long text fitted to `widths` (fit(), sized()), styled by `style` (the
    fitted frame to a pandas Styler) if given; `kwargs` go to st.dataframe, whose value is returned."""
    shown, rows = fit(table, widths)
    return st.dataframe(
        shown if style is None else style(shown),
        hide_index=True,
        key=key,
        width="stretch",
        column_config=sized(config, widths),
        **rows,
        **kwargs,
    )


def clickable(
    table: pd.DataFrame,
    key: str,
    widths: Mapping[str, int],
    config: Mapping[str, Any] | None = None,
    style: Callable[[pd.DataFrame], Any] | None = None,
    **kwargs: Any,
) -> int | None:
    """A table whose rows open something with one click (ONE_CLICK), drawn by fitted(); the row clicked, if any."""
    event = fitted(table, key, widths, config, style, on_select="rerun", selection_mode=ONE_CLICK, **kwargs)
    return clicked(event, len(table))


def _links(column: pd.Series) -> bool:
    """Whether a column holds links to pages (page_url()), which a link column draws as an icon."""
    starts = tuple(f"{p.url_path}?" for p in PAGES.values())
    return all(v.startswith(starts) for v in column if isinstance(v, str))


def fit(table: pd.DataFrame, widths: Mapping[str, int], lines: int = MAX_LINES) -> tuple[pd.DataFrame, dict]:
    """A table whose long text wraps, as it is drawn: each text of a column in `widths` (its pixels) that
    would wrap past `lines` lines cut at a word, with '…' (its page shows it whole a click away), and
    st.dataframe's row_height and height for the most lines left (wrapped()): a table whose every text keeps
    its line gets rows of one line."""
    table, most = table.copy(), 1
    for name, px in widths.items():
        if name in table.columns and pd.api.types.is_string_dtype(table[name]) and not _links(table[name]):
            room = px - WRAP_SLACK_PX
            table[name] = [_cut(v, room, lines) if isinstance(v, str) else v for v in table[name]]
            most = max([most, *(text_lines(v, room) for v in table[name] if isinstance(v, str))])
    return table, wrapped(len(table), most)


def wrapped(n_rows: int, lines: int, shown: int = 10) -> dict[str, Any]:
    """st.dataframe's row_height and height for a table whose long text wraps: rows that hold `lines`
    lines (fit(); MAX_LINES at most), as many in view as `shown` rows of WRAP_PX take (the rest
    scroll, as in any table). One line takes the grid's own ROW_PX; the grid wraps text only in rows over
    64 px, so any more take WRAP_PX at the least."""
    row = ROW_PX if lines <= 1 else WRAP_PX + LINE_PX * (min(max(lines, WRAP_LINES), MAX_LINES) - WRAP_LINES)
    return {"row_height": row, "height": 38 + max(1, min(n_rows, shown * WRAP_PX // row)) * row}


def label(column: Any) -> Any:
    """A column config's header: its label, or the config itself when it is a plain header."""
    return column.get("label") if isinstance(column, dict) else column


def sized(config: Mapping[str, Any] | None, widths: Mapping[str, int]) -> dict[str, Any]:
    """A table's column config with each column in `widths` set to that many pixels (the widths of a
    table sum to at most TABLE_PX, less MARKERS_PX when its rows can be picked); a column
    without help gets what the term means (markup.TERMS: p kind, tier, kappa, λ, R, Acc) or else its label as
    help, and a key column without one its HEADERS name."""
    out: dict[str, Any] = dict(config or {})
    for name, px in widths.items():
        column, default = out.get(name), HEADERS.get(name, name)
        label = column.get("label") or default if isinstance(column, dict) else column or default
        # a header cut short by a narrow column reads whole on hover
        base = column if isinstance(column, dict) else {"label": label}
        out[name] = {**base, "help": base.get("help") or TERMS.get(str(name)) or label, "width": px}
    return out
