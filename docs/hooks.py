"""MkDocs hooks (mkdocs.yml `hooks:`): the pages that are written from the code at build time, so they cannot drift.

A page holds a marker comment where generated text goes:

- `<!-- generated: cli -->`: every command of `rag-triage` (`python -m evaluators`), its `--help` as argparse
  prints it, from evaluators.cli's own parser;
- `<!-- generated: schema -->`: the database's tables and columns after every migration of
  evaluators/storage/schema.py, applied to an in-memory DuckDB, then the migrations themselves.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CLI_MARK, SCHEMA_MARK = "<!-- generated: cli -->", "<!-- generated: schema -->"
HELP_COLUMNS = "100"  # argparse wraps its help to $COLUMNS


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order --help lists them."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in action._choices_actions}
    return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]


def cli_reference() -> str:
    """Markdown for every command: a heading, its one-line help, and its --help text."""
    from evaluators import cli

    os.environ["COLUMNS"] = HELP_COLUMNS
    parser = cli.parser(prog="rag-triage")
    parts = ["## Commands", ""]
    commands = _subcommands(parser)
    parts += [f"- [`{name}`](#{name}): {help_}" for name, help_, _ in commands] + [""]
    for name, help_, sub in commands:
        parts += [
            f"### {name}",
            "",
            help_[:1].upper() + help_[1:] + ".",
            "",
            "```text",
            sub.format_help().rstrip(),
            "```",
            "",
        ]
    return "\n".join(parts)


def _comments(migrations: list[str]) -> dict[tuple[str, str], str]:
    """The `-- comment` written beside a column in the migrations, by (table, column)."""
    found: dict[tuple[str, str], str] = {}
    table = ""
    for sql in migrations:
        for line in sql.splitlines():
            if m := re.search(r"(?:CREATE TABLE|ALTER TABLE)\s+(?:IF NOT EXISTS\s+)?(\w+)", line, re.I):
                table = m.group(1)
            if m := re.match(
                r"\s*(?:ALTER TABLE \w+ ADD COLUMN (?:IF NOT EXISTS )?)?(\w+)\s+[A-Z][^-]*--\s*(.+)$", line
            ):
                found[(table, m.group(1))] = m.group(2).strip()
    return found


def schema_reference() -> str:
    """Markdown for the schema: each table's columns (type, null, what the migrations say of it), then the
    migrations as they are applied."""
    import duckdb

    from evaluators.storage.schema import MIGRATIONS

    con = duckdb.connect(":memory:")
    for sql in MIGRATIONS:
        con.execute(sql)
    rows = con.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall()
    con.close()
    comments = _comments(MIGRATIONS)
    parts = [f"The schema after all {len(MIGRATIONS)} migrations.", ""]
    tables: dict[str, list[Any]] = {}
    for table, column, kind, nullable in rows:
        tables.setdefault(table, []).append((column, kind, nullable))
    for table, columns in tables.items():
        parts += [f"### `{table}`", "", "| column | type | null | note |", "|---|---|---|---|"]
        parts += [
            f"| `{c}` | `{k}` | {'yes' if n == 'YES' else 'no'} | {comments.get((table, c), '').replace('|', '/')} |"
            for c, k, n in columns
        ]
        parts.append("")
    parts += ["## The migrations", "", "Applied in order by `store.migrate()`; appended, never edited.", ""]
    for n, sql in enumerate(MIGRATIONS, 1):
        parts += [f'??? note "Migration {n}"', "", "    ```sql"]
        parts += ["    " + line if line.strip() else "" for line in _dedent(sql).splitlines()]
        parts += ["    ```", ""]
    return "\n".join(parts)


def _dedent(sql: str) -> str:
    import textwrap

    return textwrap.dedent(sql).strip("\n")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: put the generated text where a page marks it."""
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if SCHEMA_MARK in markdown:
        markdown = markdown.replace(SCHEMA_MARK, schema_reference())
    return markdown
