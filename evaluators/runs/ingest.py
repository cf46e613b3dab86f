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
among them) are detected by `detect_format` and mapped onto these fields by traces.py (and results.py),
then checked by the same rules; a JSON document's problems are located by JSON path (`FILE:$[2]`).

Bad input raises InputError with every problem found, one line each, located as
`FILE:LINE` (JSONL: physical line; CSV: the line a data row starts on, header = line 1) or
`FILE:row N` (Parquet and DataFrame, 1-based); readers.py reads the files into located rows. This
module only reads.
"""

from __future__ import annotations

import csv
import json
import numbers
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluators.core.records import Item
from evaluators.runs import traces
from evaluators.runs.readers import (
    InputError,
    Problem,
    Row,
    csv_rows,
    decode,
    export_rows,
    file_rows,
    invisible,
    is_missing,
    jsonl_rows,
    non_finite,
    parse_json,
    plain_json,
    raise_problems,
    type_name,
)

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
        file_problems.append(
            f"{name}: unknown file type {suffix or '(no suffix)'!r}; expected one of {', '.join(_SUFFIXES)}"
        )
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
    text, decode_problems = decode(raw, name)
    rows, parse_problems = (jsonl_rows if suffix == ".jsonl" else csv_rows)(text, name)
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
            return traces.detect(suffix, export_rows(path)[0])
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
                first, _ = parse_json(text)
            else:
                first = dict.fromkeys(c.strip() for c in next(csv.reader([text]), []))
    except (OSError, ValueError, InputError):
        return traces.ITEMS
    return traces.detect(suffix, [(1, str(path), first)] if first is not None else [])


def _load_export(path: Path, fmt: str | None) -> list[Item]:
    """Items from another tool's export (traces.FORMATS), detected when `fmt` is None."""
    name = str(path)
    if not path.exists():
        raise InputError([f"{name}: no such file"])
    rows, problems = export_rows(path)
    fmt = fmt or traces.detect(path.suffix.lower(), rows)
    if fmt == traces.ITEMS:  # only a .json file comes here as items
        raise InputError(
            [
                f"{name}: neither a Langfuse trace export (traces with observations) nor a DeepEval "
                "test run (testCases); items go in .jsonl, .csv or .parquet"
            ]
        )
    converted, convert_problems = traces.convert(fmt, rows, name)
    return _build(converted, problems + convert_problems, name, json_cells=False)


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
    rows, problems = file_rows(Path(path), (".jsonl",))
    pairs: list[tuple[str, Item, Item]] = []
    seen: dict[str, str] = {}
    for line, where, row in rows:
        wanted, problem = _pair_metrics(row, where, metrics)
        if problem:
            problems.append((line, problem))
            continue
        if isinstance(row.get("id"), str) and invisible(row["id"]):
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
            item, side_problems = _normalise(
                {
                    **shared,
                    **given,
                    "id": f"{pair_id}:{side}",
                    "metadata": {"pair": pair_id, "side": side, "metrics": joined},
                },
                f"{where}: {side}",
                json_cells=False,
            )
            problems += [(line, p) for p in side_problems]
            if item is not None:
                sides.append(item)
        if len(sides) == 2:
            pairs.append((joined, sides[0], sides[1]))
    raise_problems(problems, empty=None if rows else f"{name}: no pairs (the file is empty)")
    return pairs


def _pair_metrics(row: Any, where: str, metrics: set[str]) -> tuple[list[str], str | None]:
    """The metrics a pairs line names (`metric`, or `metrics`, a list), or why it names none we know."""
    if not isinstance(row, dict):
        return [], f"{where}: expected a JSON object, got {type_name(row)}"
    wanted = row.get("metrics", row.get("metric"))
    wanted = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(wanted, list) or not wanted or not all(isinstance(m, str) for m in wanted):
        return [], f"{where}: field metric: missing (the metric the better side should win on)"
    unknown = [m for m in wanted if m.strip().lower() not in metrics]
    if unknown:
        return [], f"{where}: field metric: unknown metric {unknown[0]!r}; known: {', '.join(sorted(metrics))}"
    return wanted, None


def items_from_frame(df: pd.DataFrame, origin: str = "<dataframe>") -> list[Item]:
    """Turn a DataFrame (one row per item, same columns as the files) into Items.

    Problems are located as `ORIGIN:row N`, N counting from 1. Raises InputError.
    """
    records = df.to_dict("records")
    rows = [(n, f"{origin}:row {n}", record) for n, record in enumerate(records, start=1)]
    return _build(rows, [], origin, json_cells=True)


def _build(rows: list[Row], problems: list[Problem], origin: str, json_cells: bool) -> list[Item]:
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
            problems.append((line, f"{where}: field id: duplicate id {item.id!r}{why}, first at {first_seen[item.id]}"))
        else:
            first_seen[item.id] = where
            items.append(item)
    raise_problems(problems, empty=None if rows else f"{origin}: no items (the input is empty)")
    return items


def _normalise(row: Any, where: str, json_cells: bool) -> tuple[Item | None, list[str]]:
    """Check one row and build its Item; the Item is None when the row has any problem.

    `json_cells` says that `sources` and `metadata` may come as JSON text (CSV, Parquet, frames).
    """
    if not isinstance(row, dict):
        return None, [f"{where}: expected a JSON object, got {type_name(row)}"]
    problems: list[str] = []
    given = _given(row, where, problems)
    texts = _texts(given, where, problems)
    sources: list[str] = []
    if "sources" not in given:
        also = f" (also accepted as {', '.join(_NAMES['sources'])})"
        problems.append(f"{where}: field sources: missing{also}")
    else:
        name, value = given["sources"]
        sources, errors = _check_sources(value, json_cells)
        problems.extend(f"{where}: field {name}: {error}" for error in errors)
    metadata = _metadata(row, given, where, json_cells, problems)
    item_id = _item_id(given, where, problems)
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


def _given(row: dict[str, Any], where: str, problems: list[str]) -> dict[str, tuple[str, Any]]:
    """Each field found under our name or one alias, as (the name it came under, its value); giving two
    names for one field is ambiguous."""
    given: dict[str, tuple[str, Any]] = {}
    for field, aliases in _NAMES.items():
        names = [n for n in (field, *aliases) if n in row and not is_missing(row[n])]
        if len(names) > 1:
            problems.append(
                f"{where}: field {field}: given under more than one name: " + " and ".join(repr(n) for n in names)
            )
        if names:  # check the first anyway, so a conflict is not also reported as missing
            given[field] = (names[0], row[names[0]])
    return given


def _texts(given: dict[str, tuple[str, Any]], where: str, problems: list[str]) -> dict[str, str | None]:
    """The query, the response and the optional reference, each checked as a text."""
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
    return texts


def _json_object(value: Any, field: str, where: str, json_cells: bool, problems: list[str]) -> dict[str, Any] | None:
    """An object field (metadata, expect), from JSON text where cells hold text; None with a problem."""
    error = None
    if json_cells and isinstance(value, str):
        value, error = parse_json(value)
    if error:
        problems.append(f"{where}: field {field}: expected a JSON object, got text that is not JSON ({error})")
    elif not isinstance(value, dict):
        problems.append(f"{where}: field {field}: expected an object, got {type_name(value)}")
    elif (bad := non_finite(value, field)) is not None:
        problems.append(f"{where}: field {bad}: NaN and Infinity are not JSON numbers")
    else:
        return value
    return None


def _metadata(
    row: dict[str, Any], given: dict[str, tuple[str, Any]], where: str, json_cells: bool, problems: list[str]
) -> dict[str, Any]:
    """The item's metadata as plain JSON, with a regression suite's expectations under `expect`."""
    metadata: dict[str, Any] = {}
    if (
        "metadata" in given
        and (value := _json_object(given["metadata"][1], "metadata", where, json_cells, problems)) is not None
    ):
        # The store keeps metadata as JSON text: make it plain JSON now (Parquet structs bring
        # numpy arrays) rather than fail later on a value JSON cannot hold.
        try:
            text = json.dumps(value, default=plain_json, ensure_ascii=False, sort_keys=True)
            metadata = json.loads(text.encode("utf-8"))
        except (TypeError, ValueError) as exc:
            problems.append(f"{where}: field metadata: cannot be kept as JSON ({exc})")
    # A regression suite's expectations (evaluators/runs/suite.py) travel with the item in its metadata.
    if (
        not is_missing(row.get("expect"))
        and (expect := _json_object(row["expect"], "expect", where, json_cells, problems)) is not None
    ):
        metadata = {**metadata, "expect": json.loads(json.dumps(expect, default=plain_json))}
    return metadata


def _item_id(given: dict[str, tuple[str, Any]], where: str, problems: list[str]) -> str | None:
    """The id given, as text; None when none was (the content's hash then names the item)."""
    if "id" not in given:
        return None
    value = given["id"][1]
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
        problems.append(f"{where}: field id: expected a string or an integer, got {type_name(value)}")
        return None
    # A blank id is a mistake, not a request for a content hash: leave the field out for that.
    item_id = str(value)
    error = _text_problem(item_id)
    if error:
        problems.append(f"{where}: field id: {error}; leave the field out for an id hashed from the content")
    return item_id


def _check_sources(value: Any, json_cells: bool) -> tuple[list[str], list[str]]:
    """Return (sources, problems) for a `sources` value; sources are numbered from 1 in messages."""
    if json_cells and isinstance(value, str):
        value, error = parse_json(value)
        if error:
            return [], [f"expected a JSON list of strings, got text that is not JSON ({error})"]
    if isinstance(value, (tuple, np.ndarray)):  # Parquet list columns arrive as arrays
        value = list(value)
    if not isinstance(value, list):
        return [], [f"expected a list of strings, got {type_name(value)}"]
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
        return f"expected a string, got {type_name(value)}"
    if invisible(value):
        return "empty" if not value.strip() else "empty (only invisible characters)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:  # JSON can smuggle lone surrogates in as \ud800 escapes
        return f"not valid Unicode (lone surrogate at character {exc.start})"
    if size > MAX_TEXT_BYTES:
        return f"too long: {size:,} bytes, the limit is {MAX_TEXT_BYTES:,} bytes"
    return None
