"""The CI side: `gate` (does a candidate run regress on a baseline run?) and `export-suite` (a run's items
with their expectations, as a regression suite that `evaluate --expect` checks)."""

from __future__ import annotations

import argparse
import os

import evaluators.cli.arguments as options
from evaluators.cli.common import add_band, check_run, fail, share
from evaluators.metrics.registry import THELMA
from evaluators.storage import queries, store


def add_gate(sub: argparse._SubParsersAction) -> None:
    """Register `gate`."""
    gt = sub.add_parser("gate", help="CI gate: exit 1 when the candidate run regresses on the baseline run")
    gt.add_argument("--db", required=True, type=options.database)
    gt.add_argument("--baseline", required=True, help="the run to compare against (e.g. the main branch's)")
    gt.add_argument("--candidate", required=True, help="the run under test (e.g. the pull request's)")
    gt.add_argument(
        "--max-drop",
        default="",
        metavar="METRIC=DROP,...",
        help="per-metric drop allowed before it counts, e.g. gr=0.02,rp=0.05 (default 0): a metric "
        "regresses when the upper end of the paired bootstrap 95%% interval of "
        "(candidate - baseline) lies below -DROP",
    )
    gt.add_argument(
        "--metrics", default=None, help="comma-separated metric ids (default: every metric both runs scored)"
    )
    gt.add_argument(
        "--max-unscored-rise",
        type=share,
        default=None,
        metavar="SHARE",
        help="share of the shared items the candidate may leave unscored (failed or unsure) beyond the "
        "baseline before a metric fails (default 0.05)",
    )
    gt.add_argument(
        "--thresholds",
        type=options.thresholds,
        default="",
        help="thresholds for the items that crossed one, e.g. gr=0.9 (default: Table 2's)",
    )
    add_band(gt)
    gt.add_argument(
        "--markdown",
        type=options.output_file,
        metavar="FILE",
        help="also write a pull-request comment (links into the dashboard when RAG_TRIAGE_URL is set)",
    )
    gt.set_defaults(handler=gate)


def gate(args: argparse.Namespace) -> int:
    """gate: the per-metric verdict table (and the pull-request markdown); exit 1 on a regression."""
    from evaluators.runs import gate as ci_gate

    try:
        ci_gate.check_runs(args.db, args.baseline, args.candidate)
        metrics = ci_gate.gated_metrics(args.db, args.baseline, args.candidate, args.metrics)
        rise = ci_gate.MAX_UNSCORED_RISE if args.max_unscored_rise is None else args.max_unscored_rise
        result = ci_gate.run_gate(
            args.db,
            args.baseline,
            args.candidate,
            metrics,
            ci_gate.parse_max_drop(args.max_drop, metrics),
            args.band,
            args.thresholds,
            rise,
        )
    except ci_gate.GateInput as exc:
        return fail(str(exc))
    print(ci_gate.table(result))
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(ci_gate.markdown(result, os.environ.get("RAG_TRIAGE_URL") or None))
        print(f"wrote {args.markdown}")
    return result.exit_code


def add_export_suite(sub: argparse._SubParsersAction) -> None:
    """Register `export-suite`."""
    su = sub.add_parser(
        "export-suite", help="write a run's items with their expectations as a regression suite (JSONL)"
    )
    su.add_argument("--db", required=True, type=options.database)
    su.add_argument("--run", required=True)
    pick = su.add_mutually_exclusive_group()
    pick.add_argument("--items", help="comma-separated item ids")
    pick.add_argument("--triaged", action="store_true", help="the items with a triage note or a label")
    pick.add_argument("--rule", help="the items a Table-2 rule fires on, e.g. T2.5, or our X1")
    pick.add_argument(
        "--filter",
        metavar="METRIC<VALUE,...",
        help="the items whose scores meet every condition, e.g. gr<0.8,sqc<0.75 (<, <=, >, >=)",
    )
    su.add_argument("--out", required=True, type=options.output_file, help="JSONL file to write")
    su.set_defaults(handler=export_suite)


def export_suite(args: argparse.Namespace) -> int:
    """export-suite: the chosen items of a run with what must keep holding, as an `evaluate` input."""
    from evaluators.runs import suite

    check_run(args.db, args.run)
    store.migrate(args.db)  # a database written before labels existed gets the table: corrections are read
    conditions = suite.parse_filter(args.filter) if args.filter is not None else ()
    wide = queries.runs.run_scores_wide(args.db, args.run, list(THELMA))
    ids = suite.select_items(
        args.db, args.run, wide, ids=args.items, triaged=args.triaged, rule=args.rule, conditions=conditions
    )
    n_items, n_expect = suite.export(args.db, args.run, args.out, ids, wide)
    print(f"wrote {n_items} items with {n_expect} expectations to {args.out}")
    return 0
