"""GRAMMAR's Algorithm 1 on DuckDB: SQL and text templates to a test set with SQL ground truth.

A SQL template is one query logic with `[table.column]` placeholders. Each placeholder takes the
`SELECT DISTINCT` values of its column; the Cartesian product of those gives the filled SQL
queries, and executing each gives its ground truth. One filled SQL query is one semantic group;
its text queries are the SQL template's text templates (linguistic variants) filled with the same
values. Combinations whose SQL returns no row ("context conflicts") or more than one row (the
paper's single-answer criterion) are dropped and counted. Counts follow M x N x Q.

Templates come from a JSON file, or from a judge: SQL templates from the schema (Table 3 prompt)
and text templates from each SQL template. Generated SQL only runs on read-only or in-memory data.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from evaluators import grammar
from evaluators.core.records import Judge, Status
from evaluators.storage import store

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
PLACEHOLDER = re.compile(rf"\[({_NAME})\.({_NAME})\]")
# A placeholder inside SQL, with its quotes when it has them: '[t.c]' or [t.c].
_SQL_SLOT = re.compile(rf"'\[({_NAME})\.({_NAME})\]'|\[({_NAME})\.({_NAME})\]")


class TemplateError(ValueError):
    """Templates that cannot be used, with every problem found."""


@dataclass(frozen=True)
class TextTemplate:
    """One linguistic variant of a query logic; `id` names its style (short, long, v1, ...)."""

    id: str
    text: str


@dataclass(frozen=True)
class SqlTemplate:
    """One query logic. `doc_sql` (same placeholders) returns the ids of the documents holding the answer."""

    id: str
    sql: str
    texts: tuple[TextTemplate, ...] = ()
    doc_sql: str | None = None

    @property
    def placeholders(self) -> list[str]:
        return placeholders(self.sql)


def placeholders(template: str) -> list[str]:
    """The distinct `table.column` placeholders of a template, in order of first appearance."""
    return list(dict.fromkeys(f"{t}.{c}" for t, c in PLACEHOLDER.findall(template)))


def template_problems(t: SqlTemplate) -> list[str]:
    """What is wrong with a template, without touching a database."""
    problems = []
    if not re.match(r"\s*select\b", t.sql, re.I):
        problems.append(f"{t.id}: the SQL template is not a SELECT")
    if ";" in t.sql.strip().rstrip(";"):
        problems.append(f"{t.id}: the SQL template holds more than one statement")
    names = set(t.placeholders)
    if not names:
        problems.append(f"{t.id}: the SQL template has no [table.column] placeholder")
    if t.doc_sql is not None and not set(placeholders(t.doc_sql)) <= names:
        problems.append(f"{t.id}: doc_sql uses placeholders the SQL template does not fill")
    for text in t.texts:
        if set(placeholders(text.text)) != names:
            problems.append(
                f"{t.id}/{text.id}: the text template must use exactly the placeholders "
                f"{sorted(names)}, it uses {sorted(placeholders(text.text))}"
            )
    return problems


def load_templates(path: str | Path) -> list[SqlTemplate]:
    """Read a templates JSON file: {"templates": [{id, sql, doc_sql?, texts: {style: text} | [text]}]}."""
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
        entries = spec["templates"] if isinstance(spec, dict) else spec
        templates = []
        for i, e in enumerate(entries, 1):
            texts = e.get("texts") or {}
            pairs = texts.items() if isinstance(texts, dict) else ((f"v{j}", x) for j, x in enumerate(texts, 1))
            templates.append(
                SqlTemplate(
                    str(e.get("id") or f"t{i:02d}"),
                    e["sql"].strip().rstrip(";"),
                    tuple(TextTemplate(str(k), str(v)) for k, v in pairs),
                    e.get("doc_sql"),
                )
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TemplateError(f"{path}: cannot read templates ({type(exc).__name__}: {exc})") from None
    problems = [p for t in templates for p in template_problems(t)]
    ids = [t.id for t in templates]
    problems += [f"template id {i!r} is used more than once" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if problems:
        raise TemplateError(f"{path}: " + "; ".join(problems))
    return templates


def save_templates(templates: Sequence[SqlTemplate], path: str | Path) -> None:
    """Write templates in the format `load_templates` reads (for review and reuse)."""
    entries = [
        {
            "id": t.id,
            "sql": t.sql,
            **({"doc_sql": t.doc_sql} if t.doc_sql else {}),
            "texts": {x.id: x.text for x in t.texts},
        }
        for t in templates
    ]
    Path(path).write_text(json.dumps({"templates": entries}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- the data source


@contextmanager
def open_source(path: str | Path) -> Iterator[Any]:
    """A connection to the domain data: a .sql script is loaded into memory, a DuckDB file opened read-only."""
    path = Path(path)
    if path.suffix.lower() == ".sql":
        script = path.read_text(encoding="utf-8")
        with store.connect(":memory:") as con:
            con.execute(script)
            yield con
    else:
        with store.connect(path, read_only=True) as con:
            yield con


def describe_schema(con: Any) -> str:
    """Tables, typed columns, primary and foreign keys, as text for the SQL template prompt."""
    cols = con.execute("""SELECT table_name, column_name, data_type FROM information_schema.columns
                          WHERE table_schema = 'main' ORDER BY table_name, ordinal_position""").fetchall()
    keys = con.execute("""SELECT table_name, constraint_type, constraint_column_names, referenced_table,
                                 referenced_column_names FROM duckdb_constraints()
                          WHERE constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY')""").fetchall()
    primary = {(t, c) for t, kind, cs, _, _ in keys if kind == "PRIMARY KEY" for c in cs}
    tables: dict[str, list[str]] = {}
    for t, c, kind in cols:
        tables.setdefault(t, []).append(f"{c} {kind}" + (" PRIMARY KEY" if (t, c) in primary else ""))
    lines = [f"Table {t} ({', '.join(cs)})" for t, cs in tables.items()]
    lines += [
        f"Foreign key: {t}.{c} -> {rt}.{rc}"
        for t, kind, cs, rt, rcs in keys
        if kind == "FOREIGN KEY"
        for c, rc in zip(cs, rcs)
    ]
    return "\n".join(lines)


def _column(con: Any, name: str) -> tuple[str, str]:
    """The exact (table, column) for a placeholder name, or TemplateError if the schema has none."""
    table, column = name.split(".")
    found = con.execute(
        """SELECT table_name, column_name FROM information_schema.columns
                           WHERE lower(table_name) = lower(?) AND lower(column_name) = lower(?)""",
        [table, column],
    ).fetchall()
    if not found:
        raise TemplateError(f"placeholder [{name}]: no such column in the database")
    return found[0]


def distinct_values(con: Any, name: str) -> list[Any]:
    """`SELECT DISTINCT column FROM table` for a placeholder `table.column`, NULLs left out, sorted."""
    table, column = _column(con, name)
    quoted = f'"{table}"', f'"{column}"'  # names come from information_schema, never from the template text
    return [
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT {quoted[1]} FROM {quoted[0]} WHERE {quoted[1]} IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]


# ---------------------------------------------------------------- filling placeholders


def as_text(value: Any) -> str:
    """A database value as answer text: ISO dates, decimals without trailing zeros."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def bind(sql: str, combo: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The template as a parameterised query (`?` per placeholder, quotes included) and its parameters."""
    params: list[Any] = []

    def slot(m: re.Match[str]) -> str:
        params.append(combo[f"{m.group(1) or m.group(3)}.{m.group(2) or m.group(4)}"])
        return "?"

    return _SQL_SLOT.sub(slot, sql), params


def fill_sql(sql: str, combo: Mapping[str, Any]) -> str:
    """The filled SQL query as text (the semantic group's identity), with SQL-quoted values."""

    def slot(m: re.Match[str]) -> str:
        value = combo[f"{m.group(1) or m.group(3)}.{m.group(2) or m.group(4)}"]
        if m.group(1) is None and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return as_text(value)
        return store.literal(as_text(value))

    return _SQL_SLOT.sub(slot, sql)


def fill_text(text: str, combo: Mapping[str, Any]) -> str:
    """A text template with each placeholder replaced by its value's text."""
    return PLACEHOLDER.sub(lambda m: as_text(combo[f"{m.group(1)}.{m.group(2)}"]), text)


def run_sql(con: Any, sql: str, combo: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Execute a template for one combination of values; distinct rows in result order."""
    query, params = bind(sql, combo)
    return list(dict.fromkeys(tuple(r) for r in con.execute(query, params).fetchall()))


# ---------------------------------------------------------------- generation (Algorithm 1)


@dataclass(frozen=True)
class Case:
    """One text query with its ground truth and semantic group."""

    id: str
    query: str
    answer: str
    group: str
    sql_template: str
    text_template: str
    sql: str
    true_doc_ids: tuple[str, ...] = ()

    def metadata(self) -> dict[str, Any]:
        return {
            grammar.META_GROUP: self.group,
            grammar.META_SQL_TEMPLATE: self.sql_template,
            grammar.META_TEXT_TEMPLATE: self.text_template,
            grammar.META_SQL: self.sql,
            grammar.META_TRUE_DOCS: list(self.true_doc_ids),
        }


@dataclass(frozen=True)
class TemplateCount:
    """Algorithm 1's counts for one SQL template: N text templates, Q combinations, what was kept."""

    template: str
    texts: int  # N
    combos: int  # Q: size of the Cartesian product of distinct values
    empty: int  # combinations whose SQL returns no row (context conflicts)
    multi: int  # combinations with more than one answer row (single-answer criterion)
    groups: int  # semantic groups kept (after --max-groups)
    queries: int  # text queries generated


@dataclass
class CaseSet:
    """Generated cases and per-template counts."""

    cases: list[Case]
    counts: list[TemplateCount] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"{len(self.counts)} SQL templates (M) -> {sum(c.groups for c in self.counts)} semantic groups "
            f"-> {len(self.cases)} text queries"
        ]
        for c in self.counts:
            dropped = f"; dropped {c.empty} without answer, {c.multi} with several" if c.empty or c.multi else ""
            lines.append(
                f"  {c.template:<28} N={c.texts} text templates x Q={c.combos} combinations{dropped}: "
                f"{c.groups} groups, {c.queries} queries"
            )
        return "\n".join(lines)


def generate(
    con: Any,
    templates: Sequence[SqlTemplate],
    per_group: int | None = None,
    max_groups: int | None = None,
    seed: int = 0,
) -> CaseSet:
    """Algorithm 1: fill every template from the database and execute it for the ground truth.

    `per_group` is the paper's stratified sampling: exactly that many text variants per semantic
    group (drawn with `seed`). `max_groups` keeps a seeded sample of groups per SQL template.
    Group ids are stable: a group keeps its id whatever is sampled.
    """
    problems = [p for t in templates for p in template_problems(t)]
    problems += [f"{t.id}: no text templates" for t in templates if not t.texts]
    if problems:
        raise TemplateError("; ".join(problems))
    if per_group is not None:
        short = [f"{t.id} has {len(t.texts)}" for t in templates if len(t.texts) < per_group]
        if short:
            raise TemplateError(
                f"{per_group} text variants per group need as many text templates per SQL template: " + ", ".join(short)
            )
    cases: list[Case] = []
    counts: list[TemplateCount] = []
    for t in templates:
        names = t.placeholders
        values = [distinct_values(con, n) for n in names]
        kept: list[tuple[str, dict[str, Any], str, tuple[str, ...]]] = []
        empty = multi = combos = 0
        for combo_values in itertools.product(*values):
            combos += 1
            combo = dict(zip(names, combo_values))
            rows = run_sql(con, t.sql, combo)
            if not rows:
                empty += 1
                continue
            if len(rows) > 1:
                multi += 1
                continue
            docs = tuple(as_text(r[0]) for r in run_sql(con, t.doc_sql, combo)) if t.doc_sql else ()
            kept.append((f"{t.id}-{len(kept) + 1:03d}", combo, ", ".join(as_text(v) for v in rows[0]), docs))
        rng = random.Random(f"{seed}:{t.id}")  # per template: sampling one template never shifts another
        if max_groups is not None and len(kept) > max_groups:
            keep = set(rng.sample(range(len(kept)), max_groups))
            kept = [g for i, g in enumerate(kept) if i in keep]
        n_before = len(cases)
        for group, combo, answer, docs in kept:
            texts = t.texts
            if per_group is not None:
                chosen = set(rng.sample(range(len(texts)), per_group))
                texts = tuple(x for i, x in enumerate(texts) if i in chosen)
            sql = fill_sql(t.sql, combo)
            cases += [
                Case(f"{group}-{x.id}", fill_text(x.text, combo), answer, group, t.id, x.id, sql, docs) for x in texts
            ]
        counts.append(TemplateCount(t.id, len(t.texts), combos, empty, multi, len(kept), len(cases) - n_before))
    return CaseSet(cases, counts)


def write_testset(cases: Sequence[Case], path: str | Path) -> None:
    """JSONL rows {id, query, reference, metadata}: add `sources` and `response` to evaluate a system."""
    with open(path, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(
                json.dumps(
                    {"id": c.id, "query": c.query, "reference": c.answer, "metadata": c.metadata()}, ensure_ascii=False
                )
                + "\n"
            )


def read_testset(path: str | Path) -> list[Case]:
    """Read a test set written by `write_testset`; ValueError names the first bad line."""
    cases = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                m = row["metadata"]
                cases.append(
                    Case(
                        row["id"],
                        row["query"],
                        row["reference"],
                        m[grammar.META_GROUP],
                        m[grammar.META_SQL_TEMPLATE],
                        m[grammar.META_TEXT_TEMPLATE],
                        m.get(grammar.META_SQL, ""),
                        tuple(m.get(grammar.META_TRUE_DOCS) or ()),
                    )
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: not a GRAMMAR test case ({type(exc).__name__}: {exc})") from None
    if not cases:
        raise ValueError(f"{path}: no test cases")
    return cases


# ---------------------------------------------------------------- templates from a judge


def sql_problem(con: Any, sql: str) -> str | None:
    """Why a generated SQL template cannot be used, or None: Table 3's checkable criteria, and it runs."""
    problems = template_problems(SqlTemplate("generated", sql))
    if problems:
        return problems[0].split(": ", 1)[1]
    if re.match(r"\s*select\s+(distinct\s+)?\*", sql, re.I):
        return "it selects * instead of specific columns"
    try:
        values = [distinct_values(con, n) for n in placeholders(sql)]
        if any(not v for v in values):
            return "a placeholder column has no values"
        run_sql(con, sql, dict(zip(placeholders(sql), (v[0] for v in values))))
    except TemplateError as exc:
        return str(exc)
    except Exception as exc:  # the database rejects it: report, don't crash
        return f"it does not run: {' '.join(str(exc).split())[:200]}"
    return None


async def generate_sql_templates(judge: Judge, con: Any, requirements: str = "") -> tuple[list[SqlTemplate], list[str]]:
    """SQL templates from the schema by a judge (Table 3 prompt); unusable ones dropped with a reason."""
    answer = await judge.ask(
        "grammar_sql_templates", schema=describe_schema(con), requirements=requirements.strip() or "None."
    )
    if answer.status is not Status.OK:
        raise TemplateError(f"the judge wrote no SQL templates ({answer.status.value}: {answer.detail})")
    kept: list[SqlTemplate] = []
    dropped: list[str] = []
    for line in answer.value:
        sql = line.strip().strip("`").strip().rstrip(";")
        if not sql or sql.lower() in ("sql", "```"):
            continue
        problem = sql_problem(con, sql)
        if problem:
            dropped.append(f"dropped {sql!r}: {problem}")
        elif sql not in (t.sql for t in kept):
            kept.append(SqlTemplate(f"sql{len(kept) + 1:02d}", sql))
    return kept, dropped


async def generate_text_templates(
    judge: Judge, template: SqlTemplate, n: int, criteria: str = ""
) -> tuple[SqlTemplate, list[str]]:
    """Up to `n` linguistic variants of a SQL template by a judge; ones that change placeholders are dropped."""
    answer = await judge.ask(
        "grammar_text_templates",
        sql_template=template.sql,
        n=n,
        criteria=criteria.strip() or "Vary wording, length and sentence structure.",
    )
    if answer.status is not Status.OK:
        raise TemplateError(
            f"{template.id}: the judge wrote no text templates ({answer.status.value}: {answer.detail})"
        )
    kept: list[str] = []
    dropped = []
    for line in answer.value:
        if set(placeholders(line)) != set(template.placeholders):
            dropped.append(f"{template.id}: dropped {line!r}: placeholders differ from the SQL template's")
        elif line not in kept and len(kept) < n:
            kept.append(line)
    if not kept:
        raise TemplateError(
            f"{template.id}: none of the judge's text templates kept the placeholders; " + "; ".join(dropped[:3])
        )
    texts = tuple(TextTemplate(f"v{i}", x) for i, x in enumerate(kept, 1))
    return SqlTemplate(template.id, template.sql, texts, template.doc_sql), dropped


async def complete_templates(
    judge: Judge,
    con: Any,
    templates: Sequence[SqlTemplate] | None,
    from_schema: bool,
    n_texts: int,
    criteria: str = "",
    requirements: str = "",
) -> tuple[list[SqlTemplate], list[str]]:
    """Templates ready for `generate`: SQL from the schema if asked, text variants where missing."""
    notes: list[str] = []
    todo = list(templates or [])
    if from_schema:
        todo, notes = await generate_sql_templates(judge, con, requirements)
        if not todo:
            raise TemplateError("the judge wrote no usable SQL template: " + "; ".join(notes[:3]))

    async def texts_for(t: SqlTemplate) -> tuple[SqlTemplate, list[str]]:
        return (t, []) if t.texts else await generate_text_templates(judge, t, n_texts, criteria)

    done = await asyncio.gather(*(texts_for(t) for t in todo))
    return [t for t, _ in done], notes + [d for _, ds in done for d in ds]
