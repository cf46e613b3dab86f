"""Read triplets to evaluate from JSONL, CSV, Parquet or a DataFrame, and turn them into Items.

Every format goes through the same row normaliser, so the rules are the same everywhere:

- fields: `id` (optional: a content hash when absent or empty), `query`, `sources` (a non-empty
  list of non-empty strings), `response`, optional `reference`, optional `metadata` (an object);
- RAGAS names (`user_input`, `retrieved_contexts`) and DeepEval names (`input`,
  `retrieval_context`, `actual_output`, `expected_output`) are accepted for the same fields;
- in CSV, Parquet and DataFrame cells, `sources` and `metadata` may be JSON text;
- `expect` (optional, an object: a regression suite's expectations) is kept in the metadata under "expect";
- other unknown fields are ignored; texts are kept exactly as given.

Other tools' exports (Phoenix spans, Langfuse traces, RAGAS files, DeepEval test runs, a .json file
among them) are detected by `detect_format` and mapped onto these fields by evaluators/traces.py,
then checked by the same rules; a JSON document's problems are located by JSON path (`FILE:$[2]`).

Bad input raises InputError with every problem found, one line each, located as
`FILE:LINE` (JSONL: physical line; CSV: the line a data row starts on, header = line 1) or
`FILE:row N` (Parquet and DataFrame, 1-based). This module only reads.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import math
import numbers
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluators.core.records import Item, Label
from evaluators.runs import traces

MAX_TEXT_BYTES = 1_000_000
"""Largest accepted text field (query, each source, response, reference), in UTF-8 bytes."""

# Our field name -> the other names it may come under (RAGAS first, then DeepEval).
_NAMES: dict[str, tuple[str, ...]] = {
    "id": (),
    "query": ("user_input", "input"),
    "sources": ("retrieved_contexts", "retrieval_context"),
    "response": ("actual_output",),
    "reference": ("expected_output",),
    "metadata": (),
}
_SUFFIXES = (".jsonl", ".csv", ".parquet")
_MAX_SHOWN = 100  # problems spelled out in str(InputError); .problems keeps them all

# Internally a row is (line or row number, "FILE:LINE" for messages, parsed value), and a problem
# is (line or row number, message), so problems from reading and from checking sort into line order.
_Row = tuple[int, str, Any]
_Problem = tuple[int, str]


@dataclass(frozen=True)
class _NotFinite:
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


def load_items(path: str | Path, fmt: str | None = None) -> list[Item]:
    """Read the items of a .jsonl, .csv or .parquet file (chosen by suffix), or another tool's
    export (.json too): `fmt` is one of traces.FORMATS, None to detect it from the file's shape.

    Raises InputError listing every problem when the file is missing, unreadable, empty,
    of an unknown type, or has any bad row.
    """
    path = Path(path)
    name = str(path)
    suffix = path.suffix.lower()
    file_problems = []
    if suffix == ".json" or (fmt not in (None, traces.ITEMS) and suffix in _SUFFIXES):
        return _load_export(path, fmt)
    if suffix not in _SUFFIXES:
        file_problems.append(f"{name}: unknown file type {suffix or '(no suffix)'!r}; "
                        f"expected one of {', '.join(_SUFFIXES)}")
    if not path.exists():
        file_problems.append(f"{name}: no such file")
    if file_problems:
        raise InputError(file_problems)

    if fmt is None and detect_format(path) != traces.ITEMS:
        return _load_export(path, None)
    if suffix == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError([f"{name}: cannot read as Parquet: {exc}"]) from None
        return items_from_frame(frame, origin=name)

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError([f"{name}: cannot read: {exc.strerror}"]) from None
    text, decode_problems = _decode(raw, name)
    rows, parse_problems = (_jsonl_rows if suffix == ".jsonl" else _csv_rows)(text, name)
    return _build(rows, decode_problems + parse_problems, name, json_cells=suffix == ".csv")


def detect_format(path: str | Path) -> str:
    """The format of an input file (one of traces.FORMATS), from its suffix and its first record (a
    CSV's header, a Parquet file's columns); "items" when nothing marks it as another tool's export or
    it cannot be read (loading then says why)."""
    path = Path(path)
    suffix = path.suffix.lower()
    first: Any = None
    try:
        if suffix == ".json":
            return traces.detect(suffix, _export_rows(path)[0])
        if suffix == ".parquet":
            import pyarrow.parquet as pq  # the schema alone: no rows are read

            first = dict.fromkeys(pq.read_schema(path).names)
        elif suffix in (".jsonl", ".csv"):
            with path.open("rb") as f:
                line = b""
                while not line.strip() and (line := f.readline()) and suffix == ".jsonl":
                    pass  # the first non-blank line, however long
            text = line.decode("utf-8", errors="replace").lstrip("\ufeff")
            if suffix == ".jsonl":
                first, _ = _parse_json(text)
            else:
                first = dict.fromkeys(c.strip() for c in next(csv.reader([text]), []))
    except (OSError, ValueError, InputError):
        return traces.ITEMS
    return traces.detect(suffix, [(1, str(path), first)] if first is not None else [])


def _export_rows(path: Path) -> tuple[list[_Row], list[_Problem]]:
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
    text, problems = _decode(raw, name)
    if suffix != ".json":
        rows, parse_problems = (_jsonl_rows if suffix == ".jsonl" else _csv_rows)(text, name)
        return rows, problems + parse_problems
    if problems:
        raise InputError([p for _, p in problems])
    try:
        return [(0, name, json.loads(text, parse_constant=_NotFinite))], []
    except json.JSONDecodeError as exc:
        raise InputError([f"{name}:{exc.lineno}: malformed JSON: {exc.msg} at column {exc.colno}"]) from None
    except (ValueError, RecursionError) as exc:
        raise InputError([f"{name}: malformed JSON: {type(exc).__name__}: {exc}"]) from None


def _load_export(path: Path, fmt: str | None) -> list[Item]:
    """Items from another tool's export (traces.FORMATS), detected when `fmt` is None."""
    name = str(path)
    if not path.exists():
        raise InputError([f"{name}: no such file"])
    rows, problems = _export_rows(path)
    fmt = fmt or traces.detect(path.suffix.lower(), rows)
    if fmt == traces.ITEMS:  # only a .json file comes here as items
        raise InputError([f"{name}: neither a Langfuse trace export (traces with observations) nor a DeepEval "
                          "test run (testCases); items go in .jsonl, .csv or .parquet"])
    converted, convert_problems = traces.convert(fmt, rows, name)
    return _build(converted, problems + convert_problems, name, json_cells=False)


def load_labels(path: str | Path, rules: set[str], metrics: set[str], items: set[str],
                components: set[tuple[str, str, int]], author: str = "") -> list[Label]:
    """Read a labelling team's file (.jsonl or .csv) for one run: one label per row, either
    `item_id, rule, label` or `item_id, metric, component, label`, label 1 or 0, optional `note`.

    `items` and `components` ((item, metric, component index) triples) are what the run holds.
    Raises InputError listing every problem, located as FILE:LINE with the field.
    """
    name = str(path)
    rows, problems = _file_rows(Path(path), (".jsonl", ".csv"))
    labels: list[Label] = []
    for line, where, row in rows:
        label, row_problems = _label(row, where, rules, metrics, author)
        if label is not None and label.item_id not in items:
            row_problems.append(f"{where}: field item_id: the run has no item {label.item_id!r}")
        elif label is not None and label.metric and (label.item_id, label.metric, label.component_idx) not in components:
            row_problems.append(f"{where}: field component: item {label.item_id!r} has no {label.metric} "
                                f"component {label.component_idx}")
        problems += [(line, p) for p in row_problems]
        if label is not None and not row_problems:
            labels.append(label)
    _raise_problems(problems, empty=None if rows else f"{name}: no labels (the file is empty)")
    return labels


def _raise_problems(problems: list[_Problem], empty: str | None) -> None:
    """Raise InputError with every problem in line order; `empty` is the problem of a file with no
    rows, reported when nothing else was found."""
    if empty and not problems:
        problems.append((0, empty))
    if problems:
        raise InputError([text for _, text in sorted(problems, key=lambda p: p[0])])


def _file_rows(path: Path, suffixes: tuple[str, ...]) -> tuple[list[_Row], list[_Problem]]:
    """The located rows of a small .jsonl or .csv file and the problems reading it; InputError for a
    file of another type or one that cannot be read."""
    name = str(path)
    if path.suffix.lower() not in suffixes:
        raise InputError([f"{name}: unknown file type {path.suffix or '(no suffix)'!r}; "
                          f"expected {' or '.join(suffixes)}"])
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError([f"{name}: {exc.strerror.lower() if exc.strerror else 'cannot read'}"]) from None
    text, problems = _decode(raw, name)
    rows, parse_problems = (_jsonl_rows if path.suffix.lower() == ".jsonl" else _csv_rows)(text, name)
    return rows, problems + parse_problems


def _label(row: Any, where: str, rules: set[str], metrics: set[str], author: str) -> tuple[Label | None, list[str]]:
    """One label row checked field by field: (the label, or None, and its problems)."""
    if not isinstance(row, dict):
        return None, [f"{where}: expected an object with item_id and label, got {_type(row)}"]
    problems = []
    item_id, rule, metric, component = (row.get(k) for k in ("item_id", "rule", "metric", "component"))
    if _is_missing(item_id) or not str(item_id).strip():
        problems.append(f"{where}: field item_id: missing")
    value = str(row.get("label", "")).strip()
    if value not in ("0", "1", "0.0", "1.0", "True", "False", "true", "false"):
        problems.append(f"{where}: field label: must be 1 or 0, got {row.get('label')!r}")
    has_rule, has_metric = not _is_missing(rule), not _is_missing(metric)
    if has_rule == has_metric:
        problems.append(f"{where}: give either rule or metric and component, not {'both' if has_rule else 'neither'}")
    elif has_rule and str(rule).strip().upper() not in rules:
        problems.append(f"{where}: field rule: unknown rule {rule!r}; known: {', '.join(sorted(rules))}")
    elif has_metric:
        if str(metric).strip().lower() not in metrics:
            problems.append(f"{where}: field metric: unknown metric {metric!r}; known: {', '.join(sorted(metrics))}")
        try:
            index = int(str(component).strip())
            if index < 0 or str(index) != str(component).strip():
                raise ValueError
        except ValueError:
            problems.append(f"{where}: field component: must be the component's index (0, 1, ...), got {component!r}")
    if problems:
        return None, problems
    note = row.get("note")
    return Label(item_id=str(item_id).strip(), label=int(value in ("1", "1.0", "True", "true")),
                 rule=str(rule).strip().upper() if has_rule else None,
                 metric=str(metric).strip().lower() if has_metric else None,
                 component_idx=int(str(component).strip()) if has_metric else None,
                 note="" if _is_missing(note) else str(note), author=author, origin="import"), []


PAIR_SIDES = ("better", "worse")


def load_pairs(path: str | Path, metrics: set[str]) -> list[tuple[str, Item, Item]]:
    """Read a .jsonl file of validation pairs: per line `metric` (or `metrics`, a list), and `better`
    and `worse` objects with an item's fields; fields given at the top (say `query` and `sources`)
    are shared by both sides. `id` names the pair (default: `pairN` from its line).

    Returns (metrics joined by ',', better item, worse item) per pair, the sides' ids `ID:better` and
    `ID:worse` with metadata {pair, side, metrics}, so a run of them can be tallied again later.
    Raises InputError listing every problem as FILE:LINE.
    """
    name = str(path)
    rows, problems = _file_rows(Path(path), (".jsonl",))
    pairs: list[tuple[str, Item, Item]] = []
    seen: dict[str, str] = {}
    for line, where, row in rows:
        if not isinstance(row, dict):
            problems.append((line, f"{where}: expected a JSON object, got {_type(row)}"))
            continue
        wanted = row.get("metrics", row.get("metric"))
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if not isinstance(wanted, list) or not wanted or not all(isinstance(m, str) for m in wanted):
            problems.append((line, f"{where}: field metric: missing (the metric the better side should win on)"))
            continue
        unknown = [m for m in wanted if m.strip().lower() not in metrics]
        if unknown:
            problems.append((line, f"{where}: field metric: unknown metric {unknown[0]!r}; known: "
                                   f"{', '.join(sorted(metrics))}"))
            continue
        if isinstance(row.get("id"), str) and _invisible(row["id"]):
            problems.append((line, f"{where}: field id: empty; leave the field out for an id from the line number"))
            continue
        pair_id = str(row.get("id") or f"pair{line}")
        if pair_id in seen:
            problems.append((line, f"{where}: field id: duplicate pair id {pair_id!r}, first at {seen[pair_id]}"))
            continue
        seen[pair_id] = where
        shared = {k: v for k, v in row.items() if k in _NAMES and k not in ("id", "metadata")}
        joined = ",".join(m.strip().lower() for m in wanted)
        sides: list[Item] = []
        for side in PAIR_SIDES:
            given = row.get(side)
            if not isinstance(given, dict):
                problems.append((line, f"{where}: field {side}: missing (an object with the item's fields)"))
                continue
            item, side_problems = _normalise({**shared, **given, "id": f"{pair_id}:{side}",
                                              "metadata": {"pair": pair_id, "side": side, "metrics": joined}},
                                             f"{where}: {side}", json_cells=False)
            problems += [(line, p) for p in side_problems]
            if item is not None:
                sides.append(item)
        if len(sides) == 2:
            pairs.append((joined, sides[0], sides[1]))
    _raise_problems(problems, empty=None if rows else f"{name}: no pairs (the file is empty)")
    return pairs


def items_from_frame(df: pd.DataFrame, origin: str = "<dataframe>") -> list[Item]:
    """Turn a DataFrame (one row per item, same columns as the files) into Items.

    Problems are located as `ORIGIN:row N`, N counting from 1. Raises InputError.
    """
    records = df.to_dict("records")
    rows = [(n, f"{origin}:row {n}", record) for n, record in enumerate(records, start=1)]
    return _build(rows, [], origin, json_cells=True)


def _build(rows: list[_Row], problems: list[_Problem], origin: str,
           json_cells: bool) -> list[Item]:
    """Normalise every row, check ids are unique, and raise with all problems in line order."""
    items: list[Item] = []
    first_seen: dict[str, str] = {}
    for line, where, row in rows:
        item, row_problems = _normalise(row, where, json_cells)
        problems.extend((line, problem) for problem in row_problems)
        if item is None:
            continue
        if item.id in first_seen:
            hashed = item.id == Item.content_id(item.query, item.sources, item.response)
            why = " (a content hash: same query, sources and response)" if hashed else ""
            problems.append((line, f"{where}: field id: duplicate id {item.id!r}{why}, "
                                   f"first at {first_seen[item.id]}"))
        else:
            first_seen[item.id] = where
            items.append(item)
    _raise_problems(problems, empty=None if rows else f"{origin}: no items (the input is empty)")
    return items


def _normalise(row: Any, where: str, json_cells: bool) -> tuple[Item | None, list[str]]:
    """Check one row and build its Item; the Item is None when the row has any problem.

    `json_cells` says that `sources` and `metadata` may come as JSON text (CSV, Parquet, frames).
    """
    if not isinstance(row, dict):
        return None, [f"{where}: expected a JSON object, got {_type(row)}"]
    problems: list[str] = []

    # Find each field under our name or one alias; giving two names for one field is ambiguous.
    given: dict[str, tuple[str, Any]] = {}
    for field, aliases in _NAMES.items():
        names = [n for n in (field, *aliases) if n in row and not _is_missing(row[n])]
        if len(names) > 1:
            problems.append(f"{where}: field {field}: given under more than one name: "
                            + " and ".join(repr(n) for n in names))
        if names:  # check the first anyway, so a conflict is not also reported as missing
            given[field] = (names[0], row[names[0]])

    texts: dict[str, str | None] = {}
    for field in ("query", "response", "reference"):
        if field not in given:
            if field != "reference":
                also = f" (also accepted as {', '.join(_NAMES[field])})"
                problems.append(f"{where}: field {field}: missing{also}")
            texts[field] = None
            continue
        name, value = given[field]
        if field == "reference" and isinstance(value, str) and not value.strip():
            texts[field] = None  # an empty optional text is an absent one
            continue
        error = _text_problem(value)
        if error:
            problems.append(f"{where}: field {name}: {error}")
        texts[field] = value

    sources: list[str] = []
    if "sources" not in given:
        also = f" (also accepted as {', '.join(_NAMES['sources'])})"
        problems.append(f"{where}: field sources: missing{also}")
    else:
        name, value = given["sources"]
        sources, errors = _check_sources(value, json_cells)
        problems.extend(f"{where}: field {name}: {error}" for error in errors)

    metadata: dict[str, Any] = {}
    if "metadata" in given:
        value, error = given["metadata"][1], None
        if json_cells and isinstance(value, str):
            value, error = _parse_json(value)
        if error:
            problems.append(f"{where}: field metadata: expected a JSON object, "
                            f"got text that is not JSON ({error})")
        elif not isinstance(value, dict):
            problems.append(f"{where}: field metadata: expected an object, got {_type(value)}")
        elif (bad := _non_finite(value, "metadata")) is not None:
            problems.append(f"{where}: field {bad}: NaN and Infinity are not JSON numbers")
        else:
            # The store keeps metadata as JSON text: make it plain JSON now (Parquet structs bring
            # numpy arrays) rather than fail later on a value JSON cannot hold.
            try:
                text = json.dumps(value, default=_plain, ensure_ascii=False, sort_keys=True)
                metadata = json.loads(text.encode("utf-8"))
            except (TypeError, ValueError) as exc:
                problems.append(f"{where}: field metadata: cannot be kept as JSON ({exc})")

    if not _is_missing(row.get("expect")):
        # A regression suite's expectations (evaluators/suite.py) travel with the item in its metadata.
        expect, error = row["expect"], None
        if json_cells and isinstance(expect, str):
            expect, error = _parse_json(expect)
        if error:
            problems.append(f"{where}: field expect: expected a JSON object, got text that is not JSON ({error})")
        elif not isinstance(expect, dict):
            problems.append(f"{where}: field expect: expected an object, got {_type(expect)}")
        elif (bad := _non_finite(expect, "expect")) is not None:
            problems.append(f"{where}: field {bad}: NaN and Infinity are not JSON numbers")
        else:
            metadata = {**metadata, "expect": json.loads(json.dumps(expect, default=_plain))}

    item_id: str | None = None
    if "id" in given:
        value = given["id"][1]
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
            problems.append(f"{where}: field id: expected a string or an integer, got {_type(value)}")
        else:
            # A blank id is a mistake, not a request for a content hash: leave the field out for that.
            item_id = str(value)
            error = _text_problem(item_id)
            if error:
                problems.append(f"{where}: field id: {error}; leave the field out for an id hashed from the content")

    if problems:
        return None, problems
    query, response = texts["query"], texts["response"]
    assert query is not None and response is not None  # guaranteed by the checks above
    return Item(
        id=item_id or Item.content_id(query, sources, response),
        query=query,
        sources=tuple(sources),
        response=response,
        reference=texts["reference"],
        metadata=metadata,
    ), []


def _check_sources(value: Any, json_cells: bool) -> tuple[list[str], list[str]]:
    """Return (sources, problems) for a `sources` value; sources are numbered from 1 in messages."""
    if json_cells and isinstance(value, str):
        value, error = _parse_json(value)
        if error:
            return [], [f"expected a JSON list of strings, got text that is not JSON ({error})"]
    if isinstance(value, (tuple, np.ndarray)):  # Parquet list columns arrive as arrays
        value = list(value)
    if not isinstance(value, list):
        return [], [f"expected a list of strings, got {_type(value)}"]
    if not value:
        return [], ["empty list: at least one source is needed"]
    errors = []
    for n, source in enumerate(value, start=1):
        error = _text_problem(source)
        if error:
            errors.append(f"source {n} of {len(value)}: {error}")
    return value, errors


def _text_problem(value: Any) -> str | None:
    """Why `value` is not an acceptable text field, or None when it is."""
    if not isinstance(value, str):
        return f"expected a string, got {_type(value)}"
    if _invisible(value):
        return "empty" if not value.strip() else "empty (only invisible characters)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:  # JSON can smuggle lone surrogates in as \ud800 escapes
        return f"not valid Unicode (lone surrogate at character {exc.start})"
    if size > MAX_TEXT_BYTES:
        return f"too long: {size:,} bytes, the limit is {MAX_TEXT_BYTES:,} bytes"
    return None


def _decode(raw: bytes, name: str) -> tuple[str, list[_Problem]]:
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
            problems.append((number, f"{name}:{number}: not UTF-8: byte 0x{line[exc.start]:02x} "
                             f"at byte offset {start + exc.start} of the file "
                             f"(byte {exc.start} of the line)"))
            lines.append(line.decode("utf-8", errors="replace"))
        start += len(line) + 1
    return "\n".join(lines), problems


def _jsonl_rows(text: str, name: str) -> tuple[list[_Row], list[_Problem]]:
    """Parse one JSON value per non-blank line; return (located rows, problems)."""
    rows, problems = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value, error = _parse_json(line)
        if error:
            problems.append((number, f"{name}:{number}: malformed JSON: {error}"))
        else:
            rows.append((number, f"{name}:{number}", value))
    return rows, problems


def _csv_rows(text: str, name: str) -> tuple[list[_Row], list[_Problem]]:
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
                problems.append((first_line, f"{name}:{first_line}: {len(cells)} cells, "
                                             f"but the header has {len(header)} columns"))
                continue
            row = {column: cell or None for column, cell in zip(header, cells)}
            rows.append((first_line, f"{name}:{first_line}", row))
    except csv.Error as exc:
        problems.append((reader.line_num, f"{name}:{reader.line_num}: malformed CSV: {exc}"))
    return rows, problems


def _parse_json(text: str) -> tuple[Any, str | None]:
    """Parse JSON text; return (value, None), or (None, why it is not JSON)."""
    try:
        return json.loads(text, parse_constant=_NotFinite), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at character {exc.pos + 1}"
    except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, or absurd nesting
        return None, f"{type(exc).__name__}: {exc}"


def _plain(value: Any) -> Any:
    """json.dumps fallback: numpy arrays and scalars become lists and numbers."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"{_type(value)} is not JSON")


def _is_missing(value: Any) -> bool:
    """None, NaN and pd.NA all mean "no value" (frames fill absent cells with them)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _type(value: Any) -> str:
    """A short type name for messages (a NaN or Infinity literal is named as itself)."""
    return value.literal if isinstance(value, _NotFinite) else type(value).__name__


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN or Infinity inside a metadata value, or None when it has none."""
    if isinstance(value, _NotFinite) or (isinstance(value, float) and not math.isfinite(value)):
        return path
    children = (value.items() if isinstance(value, dict)
                else enumerate(value) if isinstance(value, (list, tuple, np.ndarray)) else ())
    for key, child in children:
        found = _non_finite(child, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def _invisible(text: str) -> bool:
    """True when no character of `text` would show: spaces, controls, zero-width and format marks."""
    return all(unicodedata.category(ch)[0] in "ZC" for ch in text)
