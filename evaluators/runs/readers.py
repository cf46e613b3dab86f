"""Located rows from input files: UTF-8 decoded line by line, JSONL lines, CSV rows (by the line they start
on), Parquet rows and JSON documents, each row with where it came from ("FILE:LINE", "FILE:row N"), and
InputError, which lists every problem found, one located line each; and how a value read is named
and judged (missing, invisible, not finite). This module only reads.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_MAX_SHOWN = 100  # problems spelled out in str(InputError); .problems keeps them all


# Internally a row is (line or row number, "FILE:LINE" for messages, parsed value), and a problem
# is (line or row number, message), so problems from reading and from checking sort into line order.
Row = tuple[int, str, Any]


Problem = tuple[int, str]


@dataclass(frozen=True)
class NotFinite:
    """A NaN or +-Infinity literal: Python's json reads them, but JSON has no such numbers, and a NaN
    read as "no value" would silently turn an id into a content hash."""

    literal: str


class InputError(ValueError):
    """Input that cannot be evaluated. `.problems` lists every problem, one line each:
    `FILE:LINE: field FIELD: message`, or `FILE:LINE: message` when no single field is at fault,
    or `FILE: message` for the file as a whole."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:_MAX_SHOWN]
        more = len(self.problems) - len(shown)
        lines = [f"{len(self.problems)} problem(s) in the input:", *shown]
        if more:
            lines.append(f"... and {more} more")
        super().__init__("\n".join(lines))


def raise_problems(problems: list[Problem], empty: str | None) -> None:
    """Raise InputError with every problem in line order; `empty` is the problem of a file with no
    rows, reported when nothing else was found."""
    if empty and not problems:
        problems.append((0, empty))
    if problems:
        raise InputError([text for _, text in sorted(problems, key=lambda p: p[0])])


def file_rows(path: Path, suffixes: tuple[str, ...]) -> tuple[list[Row], list[Problem]]:
    """The located rows of a small .jsonl or .csv file and the problems reading it; InputError for a
    file of another type or one that cannot be read."""
    name = str(path)
    if path.suffix.lower() not in suffixes:
        raise InputError(
            [f"{name}: unknown file type {path.suffix or '(no suffix)'!r}; expected {' or '.join(suffixes)}"]
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError([f"{name}: {exc.strerror.lower() if exc.strerror else 'cannot read'}"]) from None
    text, problems = decode(raw, name)
    rows, parse_problems = (jsonl_rows if path.suffix.lower() == ".jsonl" else csv_rows)(text, name)
    return rows, problems + parse_problems


def export_rows(path: Path) -> tuple[list[Row], list[Problem]]:
    """The located records of another tool's export: one JSON document (located at the file), JSONL
    lines, CSV rows, or Parquet rows (a Phoenix frame's span id index becomes its column again)."""
    name, suffix = str(path), path.suffix.lower()
    if suffix == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InputError([f"{name}: cannot read as Parquet: {exc}"]) from None
        if any(frame.index.names):
            frame = frame.reset_index()
        return [(n, f"{name}:row {n}", r) for n, r in enumerate(frame.to_dict("records"), start=1)], []
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError([f"{name}: cannot read: {exc.strerror}"]) from None
    text, problems = decode(raw, name)
    if suffix != ".json":
        rows, parse_problems = (jsonl_rows if suffix == ".jsonl" else csv_rows)(text, name)
        return rows, problems + parse_problems
    if problems:
        raise InputError([p for _, p in problems])
    try:
        return [(0, name, json.loads(text, parse_constant=NotFinite))], []
    except json.JSONDecodeError as exc:
        raise InputError([f"{name}:{exc.lineno}: malformed JSON: {exc.msg} at column {exc.colno}"]) from None
    except (ValueError, RecursionError) as exc:
        raise InputError([f"{name}: malformed JSON: {type(exc).__name__}: {exc}"]) from None


def decode(raw: bytes, name: str) -> tuple[str, list[Problem]]:
    """Decode UTF-8 line by line, reporting the first bad byte of each bad line.

    Bad bytes become U+FFFD so the rest of the file can still be checked for more problems.
    """
    start = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    problems = []
    lines = []
    for number, line in enumerate(raw[start:].split(b"\n"), start=1):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problems.append(
                (
                    number,
                    f"{name}:{number}: not UTF-8: byte 0x{line[exc.start]:02x} "
                    f"at byte offset {start + exc.start} of the file "
                    f"(byte {exc.start} of the line)",
                )
            )
            lines.append(line.decode("utf-8", errors="replace"))
        start += len(line) + 1
    return "\n".join(lines), problems


def jsonl_rows(text: str, name: str) -> tuple[list[Row], list[Problem]]:
    """Parse one JSON value per non-blank line; return (located rows, problems)."""
    rows, problems = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value, error = parse_json(line)
        if error:
            problems.append((number, f"{name}:{number}: malformed JSON: {error}"))
        else:
            rows.append((number, f"{name}:{number}", value))
    return rows, problems


def csv_rows(text: str, name: str) -> tuple[list[Row], list[Problem]]:
    """Parse CSV with a header line; return (rows located by their first line, problems).

    Empty cells count as absent, since CSV cannot tell an empty string from no value.
    """
    # A sources cell may hold several long texts; the default 128 KiB cell limit would reject
    # valid rows, and oversize texts are reported field by field against MAX_TEXT_BYTES instead.
    csv.field_size_limit(2**31 - 1)
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, problems = [], []
    try:
        header = [column.strip() for column in next(reader, [])]
        for column in sorted({c for c in header if header.count(c) > 1}):
            problems.append((1, f"{name}:1: column {column!r} appears more than once in the header"))
        last_line = reader.line_num
        for cells in reader:
            first_line, last_line = last_line + 1, reader.line_num
            if not cells:  # a blank line
                continue
            if len(cells) != len(header):
                problems.append(
                    (first_line, f"{name}:{first_line}: {len(cells)} cells, but the header has {len(header)} columns")
                )
                continue
            row = {column: cell or None for column, cell in zip(header, cells)}
            rows.append((first_line, f"{name}:{first_line}", row))
    except csv.Error as exc:
        problems.append((reader.line_num, f"{name}:{reader.line_num}: malformed CSV: {exc}"))
    return rows, problems


def parse_json(text: str) -> tuple[Any, str | None]:
    """Parse JSON text; return (value, None), or (None, why it is not JSON)."""
    try:
        return json.loads(text, parse_constant=NotFinite), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at character {exc.pos + 1}"
    except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, or absurd nesting
        return None, f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------- values read


def plain_json(value: Any) -> Any:
    """json.dumps fallback: numpy arrays and scalars become lists and numbers."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"{type_name(value)} is not JSON")


def is_missing(value: Any) -> bool:
    """None, NaN and pd.NA all mean "no value" (frames fill absent cells with them)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def type_name(value: Any) -> str:
    """A short type name for messages (a NaN or Infinity literal is named as itself)."""
    return value.literal if isinstance(value, NotFinite) else type(value).__name__


def non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN or Infinity inside a metadata value, or None when it has none."""
    if isinstance(value, NotFinite) or (isinstance(value, float) and not math.isfinite(value)):
        return path
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, (list, tuple, np.ndarray))
        else ()
    )
    for key, child in children:
        found = non_finite(child, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def invisible(text: str) -> bool:
    """True when no character of `text` would show: spaces, controls, zero-width and format marks."""
    return all(unicodedata.category(ch)[0] in "ZC" for ch in text)
