"""What a run says, written as CSV: `export` (scores), `diagnose` (Table 2), `trust` (the judge against
people's labels) and `ledger` (the source ledger)."""

from __future__ import annotations

import argparse
import sys

import evaluators.cli.arguments as options
from evaluators.cli.common import add_band, cell, check_run, share, write_csv
from evaluators.metrics import diagnosis, ledger, registry
from evaluators.metrics.registry import THELMA
from evaluators.storage import ownership, queries, store, writes

# ---------------------------------------------------------------- export


def add_export(sub: argparse._SubParsersAction) -> None:
    """Register `export`."""
    ex = sub.add_parser("export", help="one CSV row per item with every metric of a run")
    ex.add_argument("--db", required=True, type=options.database)
    ex.add_argument("--run", required=True)
    ex.add_argument("--out", required=True, type=options.output_file)
    add_band(ex)
    ex.add_argument(
        "--corrected",
        action="store_true",
        help="scores with people's verdict corrections in place of the judge's verdicts",
    )
    ex.add_argument(
        "--labels-out",
        type=options.output_file,
        help="also write the run's labels of the judge (a CSV that `trust --labels` reads back)",
    )
    ex.set_defaults(handler=export)


def _run_metrics(db: str, run: str) -> list[str]:
    """The run's metrics in registry order (THELMA first)."""
    order = list(registry.METRICS)
    return sorted(queries.runs.run_metric_ids(db, run), key=lambda m: order.index(m) if m in order else len(order))


def export(args: argparse.Namespace) -> int:
    """export: one row per item, THELMA's metrics then the others the run scored, then n_failed."""
    check_run(args.db, args.run)
    metrics = [*THELMA, *(m for m in _run_metrics(args.db, args.run) if m not in THELMA)]
    if args.corrected or args.labels_out:
        store.migrate(args.db)  # a database written before labels existed has none, and gets the table
    wide = queries.runs.run_scores_wide(args.db, args.run, metrics, queries.sql.scores_sql(args.band, args.corrected))
    header = ["item_id", *metrics, "n_failed"]
    write_csv(args.out, header, [[cell(v) for v in row] for row in queries.sql.rows(wide[header])])
    print(f"wrote {len(wide)} items to {args.out}")
    if args.labels_out:
        labels = queries.trust.run_labels(args.db, args.run)
        labels.to_csv(args.labels_out, index=False)
        print(f"wrote {len(labels)} labels to {args.labels_out}")
    return 0


# ---------------------------------------------------------------- diagnose


def add_diagnose(sub: argparse._SubParsersAction) -> None:
    """Register `diagnose`."""
    dg = sub.add_parser("diagnose", help="one CSV row per item and fired Table-2 rule")
    dg.add_argument("--db", required=True, type=options.database)
    dg.add_argument("--run", required=True)
    dg.add_argument("--out", required=True, type=options.output_file)
    dg.add_argument(
        "--thresholds",
        type=options.thresholds,
        default="",
        help="per-metric thresholds, e.g. sqc=0.75,gr=0.9 (defaults: "
        + ",".join(f"{k}={v}" for k, v in diagnosis.DEFAULT_THRESHOLDS.items())
        + ")",
    )
    add_band(dg)
    dg.set_defaults(handler=diagnose)


def diagnose(args: argparse.Namespace) -> int:
    """diagnose: the Table-2 rules each item fires, with the component to fix and where the rule comes from."""
    check_run(args.db, args.run)
    wide = queries.runs.run_scores_wide(args.db, args.run, list(THELMA), queries.sql.scores_sql(args.band))
    rows: list[list[object]] = []
    for record in wide.to_dict("records"):
        scores = {m: queries.diagnosis.wide_score(record, m) for m in THELMA}  # with counts: the quiet diagnosis
        rows += [
            [record["item_id"], rule.id, rule.components, rule.origin]
            for rule in diagnosis.diagnose(scores, args.thresholds)
        ]
    write_csv(args.out, ["item_id", "rule", "components", "origin"], rows)
    print(f"wrote {len(rows)} fired rules for {len(wide)} items to {args.out}")
    return 0


# ---------------------------------------------------------------- trust


def add_trust(sub: argparse._SubParsersAction) -> None:
    """Register `trust`."""
    tr = sub.add_parser("trust", help="how far the judge agrees with people's labels: one CSV row per metric and rule")
    tr.add_argument("--db", required=True, type=options.database, help="DuckDB file")
    tr.add_argument("--run", required=True, help="run name")
    tr.add_argument(
        "--labels",
        type=options.input_file,
        help="JSONL or CSV of labels to import into the run first: item_id,rule,label or "
        "item_id,metric,component,label (label 1 or 0; optional note)",
    )
    tr.add_argument("--author", default="", help="who the imported labels are from (default: the OS user)")
    tr.add_argument(
        "--thresholds",
        type=options.thresholds,
        default="",
        help="Table 2 thresholds a rule fires at, e.g. sqc=0.75,gr=0.9 (default: Table 2's)",
    )
    add_band(tr)
    tr.add_argument("--out", required=True, type=options.output_file, help="CSV file to write")
    tr.set_defaults(handler=trust)


def trust(args: argparse.Namespace) -> int:
    """trust: import --labels into the run first, then write the trust report and print suggestions."""
    from evaluators.metrics import trust as trust_math
    from evaluators.runs import labelling
    from evaluators.runs.labelling import load_labels
    from evaluators.runs.readers import InputError

    check_run(args.db, args.run)
    store.migrate(args.db)  # a database written before labels existed gets the table
    if args.labels:
        items, components = queries.trust.label_targets(args.db, args.run)
        try:
            labels = load_labels(
                args.labels,
                set(diagnosis.RULES),
                set(THELMA),
                items,
                components,
                author=args.author or ownership.os_user(),
            )
        except InputError as exc:
            print(exc, file=sys.stderr)  # one located line per bad row; nothing was written
            return 2
        writes.add_labels(args.db, args.run, labels)
        print(f"imported {len(labels)} labels into run {args.run}")
    result = labelling.report(args.db, args.run, args.thresholds, args.band)
    write_csv(args.out, trust_math.CSV_COLUMNS, [[cell(v) for v in t.row().values()] for t in result.rows])
    labelled = [t for t in result.rows if t.n_labelled]
    print(
        f"wrote {len(result.rows)} targets to {args.out}: {len(labelled)} with labels, "
        f"{len(result.disagreements)} disagreements"
    )
    for u in result.unsure:  # neither agreement nor disagreement: the judge made no call there
        print(f"labels on unsure verdicts of {u.target}: {u.n_labelled}, of which people said 1: {u.said_one}")
    for suggestion in result.suggestions:
        if suggestion.best is not None:
            print(f"suggested threshold: {suggestion.metric}={suggestion.best:g} ({suggestion.why})")
    return 0


# ---------------------------------------------------------------- ledger


def add_ledger(sub: argparse._SubParsersAction) -> None:
    """Register `ledger`."""
    ld = sub.add_parser(
        "ledger",
        help="one CSV row per retrieved source: how often retrieved, essential, "
        "supporting claims, beside unsupported claims",
    )
    ld.add_argument("--db", required=True, type=options.database)
    ld.add_argument("--run", required=True, action="append", help="run name; repeat for several runs")
    ld.add_argument("--out", required=True, type=options.output_file)
    add_band(ld)
    ld.add_argument(
        "--min-retrieved",
        type=options.count,
        default=ledger.DEFAULT_THRESHOLDS.min_retrieved,
        help="retrievals a source needs to be listed as dead weight or stale (default %(default)s)",
    )
    ld.add_argument(
        "--dead-max-essential",
        type=share,
        default=ledger.DEFAULT_THRESHOLDS.dead_max_essential,
        help="dead weight: SP1 essential share at most this (default %(default)s)",
    )
    ld.add_argument(
        "--stale-min-unsupported",
        type=share,
        default=ledger.DEFAULT_THRESHOLDS.stale_min_unsupported,
        help="possibly stale: share of retrievals beside an unsupported claim at least this (default %(default)s)",
    )
    ld.set_defaults(handler=write_ledger)


def write_ledger(args: argparse.Namespace) -> int:
    """ledger: every source of the runs, with the two lists' flags, as CSV."""
    runs = list(dict.fromkeys(args.run))
    for run in runs:
        check_run(args.db, run)
    th = ledger.Thresholds(args.min_retrieved, args.dead_max_essential, args.stale_min_unsupported)
    frame = queries.ledger.source_ledger(args.db, runs, th, args.band, limit=None)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        f.write(ledger.to_csv(frame))
    print(
        f"wrote {len(frame)} sources of {len(runs)} run{'s' if len(runs) > 1 else ''} to {args.out}: "
        f"{int(frame['dead_weight'].sum())} dead weight, {int(frame['stale'].sum())} possibly stale"
    )
    return 0
