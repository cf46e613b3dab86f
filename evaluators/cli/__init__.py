"""The command line: evaluate, export, diagnose, trust, agreement, gate, export-suite, ledger, runs, delete-run, export-run, import-run, serve.
A stable contract others rely on.

Each command declares its arguments beside its handler, in the module of its kind: evaluate.py
(evaluate, agreement), reports.py (export, diagnose, trust, ledger), ci.py (gate, export-suite),
database.py (runs, delete-run), runfile.py (export-run, import-run), grammar.py (grammar-*), and the dashboard's serve. Every path and
number option is checked before any work (arguments.py): a bad one is one line naming the option,
and nothing is written.

Exit codes: 0 done, every judge step scored; 1 `gate`: a metric regressed, `evaluate --expect`: an expectation
broke; 2 bad input or options (one line per problem, no
traceback), the run was evaluated on other content, or a litellm judge lacks its key or endpoint;
3 the judge refused the requests (400/401), stayed rate limited past --rate-limit-patience, or the
run could not finish; 4 the database is busy; 5 the run finished with failed judge steps; 6 another
process is evaluating the run; 130 interrupted. Printed errors never show API keys or bearer tokens.
"""

from __future__ import annotations

import argparse
from typing import NoReturn, Sequence

from evaluators import __version__
from evaluators.cli import ci, database, evaluate, grammar, reports, runfile
from evaluators.cli.common import fail
from evaluators.dashboard import serve
from evaluators.storage import store

# The commands in the order --help lists them.
COMMANDS = (
    evaluate.add_evaluate,
    reports.add_export,
    reports.add_diagnose,
    reports.add_trust,
    evaluate.add_agreement,
    ci.add_gate,
    ci.add_export_suite,
    database.add_runs,
    runfile.add_commands,
    reports.add_ledger,
    grammar.add_commands,
    serve.add_command,
)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, like every other error of the CLI: exit 2, no usage block."""

    def error(self, message: str) -> NoReturn:
        # argparse says "argument --x: must be ..."; the CLI says "--x must be ..." and "--x: PATH: ...".
        name, sep, problem = message.partition(": ")
        if sep and name.startswith("argument "):
            name = name.removeprefix("argument ")
            message = f"{name} {problem}" if problem.startswith("must ") else f"{name}: {problem}"
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def parser(prog: str = "python -m evaluators") -> argparse.ArgumentParser:
    """The CLI's parser: every command registers its own arguments and its handler."""
    p = _Parser(prog=prog, description="RAG Triage evaluation engine")
    p.add_argument("--version", action="version", version=f"rag-triage {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m evaluators") -> int:
    """Entry point; returns the process exit code."""
    try:
        args = parser(prog).parse_args(argv)  # opens --db read-only to check it: it may be busy
        return int(args.handler(args))
    except SystemExit as exc:  # argparse: --help (0), or a bad option already printed on one line (2)
        return int(exc.code or 0)
    except (store.StoreMissing, ValueError) as exc:
        return fail(str(exc))
    except store.StoreBusy as exc:
        return fail(str(exc), 4)
    except KeyboardInterrupt:
        return fail("interrupted; finished items are saved, rerun the same command to continue", 130)


def console() -> int:
    """The installed `rag-triage` command (pyproject.toml's [project.scripts]): main under that name."""
    return main(prog="rag-triage")
