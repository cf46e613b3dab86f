"""What mapping other tools' exports onto our item fields needs, whatever the format: the formats' names,
located rows and problems, and helpers that read a located value (a number, a list of texts, a chat
message's text) or raise one located problem (Bad). traces.py and results.py map the formats.
"""

from __future__ import annotations

import ast
import json
import math
import numbers
from datetime import date, datetime
from typing import Any, Callable

import numpy as np

ITEMS, OPENINFERENCE, LANGFUSE, RAGAS, DEEPEVAL = "items", "openinference", "langfuse", "ragas", "deepeval"

Row = tuple[int, str, Any]  # (line or row number, "FILE:LINE" for messages, parsed value), as in ingest


Problem = tuple[int, str]


class Bad(Exception):
    """One problem found while mapping a record: (where, field or None, message)."""

    def __init__(self, where: str, field: str | None, message: str) -> None:
        super().__init__(f"{where}: field {field}: {message}" if field else f"{where}: {message}")


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def plain(value: Any) -> Any:
    """A parsed value as plain JSON data: Parquet's numpy arrays become lists, timestamps ISO text."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "isoformat"):  # pandas Timestamp
        return value.isoformat()
    return value


def number(value: Any) -> float | None | str:
    """A score as a float, None for no score (empty, NaN, null), or a string saying why it is not one."""
    if missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        return (
            f"expected a number, got {value!r}"
            if isinstance(value, bool)
            else f"expected a number, got {type(value).__name__}"
        )
    try:
        number = float(value)
    except ValueError:
        return f"expected a number, got {value!r}"
    if math.isnan(number):
        return None
    return number if math.isfinite(number) else f"expected a finite number, got {value!r}"


def text_list(value: Any, where: str, field: str) -> list[str]:
    """A list of texts: a list, a JSON list, or the Python list repr pandas writes into a CSV cell."""
    value = plain(value)
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, list):
                value = parsed
                break
        else:
            raise Bad(where, field, "expected a list of texts (JSON or a Python list), got text that is neither")
    if not isinstance(value, list):
        raise Bad(where, field, f"expected a list of texts, got {type(value).__name__}")
    for n, text in enumerate(value, start=1):
        if not isinstance(text, str):
            raise Bad(where, field, f"text {n} of {len(value)}: expected a string, got {type(text).__name__}")
    return value


def message_text(value: Any) -> str | None:
    """The text of an input or output in the shapes tracing SDKs record: a string, a chat message
    {role, content}, a list of messages (the last one's), an OpenAI reply {choices: [...]}, or an
    object whose query/question/input/output/answer/response/content/text field is a string."""
    value = plain(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return message_text(value[-1]) if value else None
    if isinstance(value, dict):
        if isinstance(value.get("choices"), list) and value["choices"]:
            first = value["choices"][0]
            return message_text(first.get("message", first) if isinstance(first, dict) else first)
        for key in (
            "content",
            "query",
            "question",
            "input",
            "user_input",
            "output",
            "answer",
            "response",
            "text",
            "message",
            "messages",
        ):
            if key in value:
                found = message_text(value[key])
                if found is not None:
                    return found
    return None


def collect(rows: list[Row], build: Callable[[str, Any], dict[str, Any]]) -> tuple[list[Row], list[Problem]]:
    """Map each located record with `build`; a record that fails becomes its problem."""
    out: list[Row] = []
    problems: list[Problem] = []
    for line, where, record in rows:
        try:
            out.append((line, where, build(where, record)))
        except Bad as bad:
            problems.append((line, str(bad)))
    return out, problems
