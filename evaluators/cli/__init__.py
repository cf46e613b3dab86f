"""The command line: evaluate, export, diagnose, trust, agreement, gate, export-suite, ledger, runs, delete-run, serve.
A stable contract others rely on.

Every path and number option is checked before any work (evaluators/options.py): a bad one is
one line naming the option, and nothing is written.

Exit codes: 0 done, every judge step scored; 1 `gate`: a metric regressed, `evaluate --expect`: an expectation
broke; 2 bad input or options (one line per problem, no
traceback), the run was evaluated on other content, or a litellm judge lacks its key or endpoint;
3 the judge refused the requests (400/401), stayed rate limited past --rate-limit-patience, or the
run could not finish; 4 the database is busy; 5 the run finished with failed judge steps; 6 another
process is evaluating the run; 130 interrupted. Printed errors never show API keys or bearer tokens.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from typing import NoReturn, Sequence

from evaluators.cli import arguments as options
from evaluators.cli import grammar as grammar_cli
from evaluators.core import confidence
from evaluators.core.masking import mask_secrets
from evaluators.dashboard import serve
from evaluators.metrics import diagnosis, ledger, registry
from evaluators.metrics.registry import REFERENCE, THELMA
from evaluators.metrics.thelma import SD_THRESHOLD
from evaluators.runs import dryrun, runner, traces
from evaluators.storage import queries, store


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, like every other error of the CLI: exit 2, no usage block."""

    def error(self, message: str) -> NoReturn:
        # argparse says "argument --x: must be ..."; the CLI says "--x must be ..." and "--x: PATH: ...".
        name, sep, problem = message.partition(": ")
        if sep and name.startswith("argument "):
            name = name.removeprefix("argument ")
            message = f"{name} {problem}" if problem.startswith("must ") else f"{name}: {problem}"
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def _band(text: str) -> confidence.Band:
    """--band LO,HI: the uncertainty band to read the run's verdicts with."""
    try:
        return confidence.parse_band(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("band ")) from None


# From this many calls in flight, on a run this large, the judge's calls go out from two worker processes by
# default: one event loop's litellm CPU (4-5 ms a call), not the endpoint, then limits the calls in flight
# (benchmarks/endpoint.py: 0.48-0.52 -> 0.59-0.62 of the bound at 32, 0.26-0.35 -> 0.47-0.49 at 64, on 2 cores).
# Below that the workers' start-up (a litellm import each) costs more than it saves.
POOL_CONCURRENCY, POOL_ITEMS = 32, 100


def client_processes(asked: int | None, concurrency: int, items: int) -> int:
    """The judge's client processes: as asked, else 2 from POOL_CONCURRENCY calls in flight and POOL_ITEMS
    items on a machine with 2 cores or more, else 1 (the run's own process)."""
    if asked is not None:
        return asked
    return 2 if concurrency >= POOL_CONCURRENCY and items >= POOL_ITEMS and (os.cpu_count() or 1) >= 2 else 1


_BAND_HELP = ("read the verdicts with this uncertainty band: a verdict with LO < p < HI is unsure and left "
              "out of its score (default: each judge kind's band, "
              + ", ".join(f"{k} {confidence.format_band(b)}" for k, b in confidence.DEFAULT_BANDS.items()) + ")")


def _parser() -> argparse.ArgumentParser:
    # Every path and number option has a type from evaluators.cli.arguments: checked before any work.
    p = _Parser(prog="python -m evaluators", description="RAG Triage evaluation engine")
    sub = p.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="evaluate a file of (query, sources, response) triplets into a run")
    ev.add_argument("input", type=options.input_file,
                    help="JSONL, CSV or Parquet file of items, or another tool's export (see --format)")
    ev.add_argument("--format", default=None, choices=traces.FORMATS,
                    help="the input's format (default: detected from its suffix and shape): items, openinference "
                         "(Phoenix span export, JSONL or Parquet), langfuse (trace export, JSON or JSONL), ragas "
                         "(dataset or result file: its scores are kept as imported peer scores), deepeval (test "
                         "run JSON)")
    ev.add_argument("--db", required=True, type=options.new_database, help="DuckDB file (created if missing)")
    ev.add_argument("--run", required=True, type=options.run_name,
                    help="run name (every character visible); an unfinished run of this name is resumed")
    ev.add_argument("--judge", default=runner.OFFLINE, type=options.judge,
                    help="offline (default, embedded), local (optional Qwen 1.5B), any litellm model string, or "
                         "a cascade of them, weakest first, e.g. offline>openai/gpt-4o-mini: each tier decides "
                         "the verdicts it is sure of and passes the rest on; the last decides what reaches it")
    ev.add_argument("--decompose-with", default=None, metavar="TIER",
                    help="the tier of a --judge cascade that splits texts into claims and sub-questions "
                         "(default: the last)")
    options.add_endpoint(ev, replicas=True)
    ev.add_argument("--client-processes", type=options.count, default=None, metavar="N",
                    help="send the judge calls from N worker processes (default: 2 from --concurrency "
                         f"{POOL_CONCURRENCY} and {POOL_ITEMS} items on a machine with 2 cores or more, else 1: this "
                         "one); litellm's CPU per call, not the endpoint, limits a large --concurrency on one process")
    ev.add_argument("--metrics", default=None,
                    help=f"comma-separated metric ids (default {','.join(THELMA)}, and {','.join(REFERENCE)} "
                         f"when some item carries a reference); also: {','.join(registry.SUITE_METRICS)}")
    ev.add_argument("--concurrency", type=options.concurrency, default=8,
                    help=f"max judge calls in flight, 1 to {options.MAX_CONCURRENCY} (adapts down on 429)")
    ev.add_argument("--timeout", type=options.duration, default=60.0, help="seconds per judge call")
    ev.add_argument("--rate-limit-patience", type=options.duration, default=10.0, metavar="MINUTES",
                    help="minutes a rate-limited judge may go without an answer before the run stops "
                         "(default 10; finished items are kept)")
    ev.add_argument("--per-component", action="store_true",
                    help="one judge call per component, as in the paper (default: batched)")
    ev.add_argument("--sd-threshold", type=options.cosine, default=SD_THRESHOLD,
                    help="cosine (within [-1, 1]) at which two response sentences repeat each other")
    ev.add_argument("--update", action="store_true",
                    help="the input changed since the run evaluated it: re-evaluate exactly the changed and "
                         "added items, delete the removed ones")
    ev.add_argument("--retry-failed", action="store_true",
                    help="ask the judge steps that failed (error, timeout, unparsed) again; answered calls "
                         "come from the cache")
    ev.add_argument("--dry-run", action="store_true",
                    help="print the calls, tokens and cost; call nothing (a cascade: what its offline tier "
                         "escalates, and the cost against its last tier alone)")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.add_argument("--expect", action="store_true",
                    help="the input is a regression suite (export-suite): after evaluating, check every item's "
                         "expectations and print each broken one; exit 1 if any broke")

    ex = sub.add_parser("export", help="one CSV row per item with every metric of a run")
    ex.add_argument("--db", required=True, type=options.database)
    ex.add_argument("--run", required=True)
    ex.add_argument("--out", required=True, type=options.output_file)
    ex.add_argument("--band", type=_band, default=None, metavar="LO,HI", help=_BAND_HELP)
    ex.add_argument("--corrected", action="store_true",
                    help="scores with people's verdict corrections in place of the judge's verdicts")
    ex.add_argument("--labels-out", type=options.output_file,
                    help="also write the run's labels of the judge (a CSV that `trust --labels` reads back)")

    dg = sub.add_parser("diagnose", help="one CSV row per item and fired Table-2 rule")
    dg.add_argument("--db", required=True, type=options.database)
    dg.add_argument("--run", required=True)
    dg.add_argument("--out", required=True, type=options.output_file)
    dg.add_argument("--thresholds", type=options.thresholds, default="",
                    help="per-metric thresholds, e.g. sqc=0.75,gr=0.9 (defaults: "
                         + ",".join(f"{k}={v}" for k, v in diagnosis.DEFAULT_THRESHOLDS.items()) + ")")
    dg.add_argument("--band", type=_band, default=None, metavar="LO,HI", help=_BAND_HELP)

    tr = sub.add_parser("trust", help="how far the judge agrees with people's labels: one CSV row per metric and rule")
    tr.add_argument("--db", required=True, type=options.database, help="DuckDB file")
    tr.add_argument("--run", required=True, help="run name")
    tr.add_argument("--labels", type=options.input_file,
                    help="JSONL or CSV of labels to import into the run first: item_id,rule,label or "
                         "item_id,metric,component,label (label 1 or 0; optional note)")
    tr.add_argument("--author", default="", help="who the imported labels are from (default: the OS user)")
    tr.add_argument("--thresholds", type=options.thresholds, default="",
                    help="Table 2 thresholds a rule fires at, e.g. sqc=0.75,gr=0.9 (default: Table 2's)")
    tr.add_argument("--band", type=_band, default=None, metavar="LO,HI", help=_BAND_HELP)
    tr.add_argument("--out", required=True, type=options.output_file, help="CSV file to write")

    ag = sub.add_parser("agreement", help="pairwise validation: how often the judge scores the better variant higher")
    ag.add_argument("--pairs", required=True, type=options.input_file,
                    help="JSONL: per line metric, and better and worse objects with an item's fields")
    ag.add_argument("--db", required=True, type=options.new_database, help="DuckDB file (created if missing)")
    ag.add_argument("--run", required=True, type=options.run_name,
                    help="run to evaluate the pairs' sides into (resumed if unfinished)")
    ag.add_argument("--judge", default=runner.OFFLINE, help="as for evaluate")
    options.add_endpoint(ag)
    ag.add_argument("--concurrency", type=options.concurrency, default=8, help="max judge calls in flight")
    ag.add_argument("--out", type=options.output_file, help="CSV file to write (default: print only)")

    gt = sub.add_parser("gate", help="CI gate: exit 1 when the candidate run regresses on the baseline run")
    gt.add_argument("--db", required=True, type=options.database)
    gt.add_argument("--baseline", required=True, help="the run to compare against (e.g. the main branch's)")
    gt.add_argument("--candidate", required=True, help="the run under test (e.g. the pull request's)")
    gt.add_argument("--max-drop", default="", metavar="METRIC=DROP,...",
                    help="per-metric drop allowed before it counts, e.g. gr=0.02,rp=0.05 (default 0): a metric "
                         "regresses when the upper end of the paired bootstrap 95%% interval of "
                         "(candidate - baseline) lies below -DROP")
    gt.add_argument("--metrics", default=None, help="comma-separated metric ids (default: every metric both runs scored)")
    gt.add_argument("--max-unscored-rise", type=_share, default=None, metavar="SHARE",
                    help="share of the shared items the candidate may leave unscored (failed or unsure) beyond the "
                         "baseline before a metric fails (default 0.05)")
    gt.add_argument("--thresholds", type=options.thresholds, default="",
                    help="thresholds for the items that crossed one, e.g. gr=0.9 (default: Table 2's)")
    gt.add_argument("--band", type=_band, default=None, metavar="LO,HI", help=_BAND_HELP)
    gt.add_argument("--markdown", type=options.output_file, metavar="FILE",
                    help="also write a pull-request comment (links into the dashboard when RAG_TRIAGE_URL is set)")

    su = sub.add_parser("export-suite", help="write a run's items with their expectations as a regression suite (JSONL)")
    su.add_argument("--db", required=True, type=options.database)
    su.add_argument("--run", required=True)
    pick = su.add_mutually_exclusive_group()
    pick.add_argument("--items", help="comma-separated item ids")
    pick.add_argument("--triaged", action="store_true", help="the items with a triage note or a label")
    pick.add_argument("--rule", help="the items a Table-2 rule fires on, e.g. T2.5, or our X1")
    pick.add_argument("--filter", metavar="METRIC<VALUE,...",
                      help="the items whose scores meet every condition, e.g. gr<0.8,sqc<0.75 (<, <=, >, >=)")
    su.add_argument("--out", required=True, type=options.output_file, help="JSONL file to write")

    rs = sub.add_parser("runs", help="list the runs in a database")
    rs.add_argument("--db", required=True, type=options.database)

    dr = sub.add_parser("delete-run", help="delete a run with its items, scores and triage notes (one transaction)")
    dr.add_argument("--db", required=True, type=options.database)
    dr.add_argument("--run", required=True)
    ld = sub.add_parser("ledger", help="one CSV row per retrieved source: how often retrieved, essential, "
                                       "supporting claims, beside unsupported claims")
    ld.add_argument("--db", required=True, type=options.database)
    ld.add_argument("--run", required=True, action="append", help="run name; repeat for several runs")
    ld.add_argument("--out", required=True, type=options.output_file)
    ld.add_argument("--band", type=_band, default=None, metavar="LO,HI", help=_BAND_HELP)
    ld.add_argument("--min-retrieved", type=options.count, default=ledger.DEFAULT_THRESHOLDS.min_retrieved,
                    help="retrievals a source needs to be listed as dead weight or stale (default %(default)s)")
    ld.add_argument("--dead-max-essential", type=_share, default=ledger.DEFAULT_THRESHOLDS.dead_max_essential,
                    help="dead weight: SP1 essential share at most this (default %(default)s)")
    ld.add_argument("--stale-min-unsupported", type=_share, default=ledger.DEFAULT_THRESHOLDS.stale_min_unsupported,
                    help="possibly stale: share of retrievals beside an unsupported claim at least this "
                         "(default %(default)s)")
    grammar_cli.add_commands(sub)  # grammar-generate, grammar-run, grammar-eval, grammar-demo
    serve.add_command(sub)  # the dashboard
    return p


def _share(text: str) -> float:
    """A share within [0, 1] (the ledger's list thresholds, the gate's unscored rise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must lie within [0, 1], got {text!r}")
    return value


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {mask_secrets(message)}", file=sys.stderr)  # judge errors may quote a key
    return code


def _evaluate(args: argparse.Namespace) -> int:
    from evaluators.runs.ingest import InputError, load_items

    try:
        named = runner.check_metrics(args.metrics.split(",")) if args.metrics is not None else None
        runner.check_chain(args.judge, args.decompose_with)
        items = load_items(args.input, args.format)
        metrics = named or runner.default_metrics(items)
    except InputError as exc:
        print(exc, file=sys.stderr)  # one line per problem, capped for huge files
        return 2
    except ValueError as exc:
        return _fail(str(exc))
    if args.expect and not any(isinstance(i.metadata.get("expect"), dict) for i in items):
        return _fail(f"--expect: {args.input} has no item with an expect field (write one with export-suite)")
    if args.dry_run:
        plan = dryrun.plan(items, args.db, args.run, args.judge, metrics, args.per_component, args.sd_threshold,
                           args.decompose_with)
        print(plan.text(args.judge))
        return 0
    from evaluators.judges.llm import JudgeFatal

    try:
        summary = runner.evaluate(
            items, args.db, args.run, args.judge, api_base=args.api_base, key_env=args.key_env, metrics=metrics,
            concurrency=args.concurrency, per_component=args.per_component, timeout=args.timeout,
            sd_threshold=args.sd_threshold, rate_limit_patience=args.rate_limit_patience * 60,
            update=args.update, retry_failed=args.retry_failed, decompose_with=args.decompose_with,
            client_processes=client_processes(args.client_processes, args.concurrency, len(items)),
            on_progress=None if args.quiet else runner.print_progress)
    except JudgeFatal as exc:
        return _fail(f"{exc}; finished items are saved, rerun the same command to continue", 3)
    except store.RunConflict as exc:
        return _fail(f"{exc}; resume it with the same options and prompt files, or choose another --run name")
    except store.InputChanged as exc:
        return _fail(f"{exc}; rerun with --update to re-evaluate exactly those, or choose another --run name")
    except store.RunBusy as exc:
        return _fail(str(exc), 6)
    except ValueError as exc:
        return _fail(str(exc))
    print(summary.text())
    if args.expect:
        from evaluators.runs import suite

        broken = suite.check(args.db, args.run, items, suite.item_lines(args.input, items))
        for line in broken:
            print(line)
        n = sum(len(v) for i in items for k, v in (i.metadata.get("expect") or {}).items() if isinstance(v, list))
        print(f"expectations: {n - len(broken)} of {n} hold, {len(broken)} broke")
        if broken:
            return 1
    if summary.failed_items:
        return _fail(f"run {args.run} {summary.status}; rerun the same command with --retry-failed "
                     "to ask the failed steps again", 5)
    return 0


def _run_metrics(db: str, run: str) -> list[str]:
    """The run's metrics in registry order (THELMA first)."""
    order = list(registry.METRICS)
    return sorted(queries.runs.run_metric_ids(db, run), key=lambda m: order.index(m) if m in order else len(order))


def _check_run(db: str, run: str) -> None:
    if not queries.runs.run_exists(db, run):
        raise ValueError(f"{db}: no run named {run!r} (see: python -m evaluators runs --db {db})")


def _write_csv(path: str, header: Sequence[str], rows: list[list[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _cell(value: object) -> object:
    return "" if value is None or value != value else value  # None/NaN: not scored


def _export(args: argparse.Namespace) -> int:
    _check_run(args.db, args.run)
    metrics = [*THELMA, *(m for m in _run_metrics(args.db, args.run) if m not in THELMA)]
    if args.corrected or args.labels_out:
        store.migrate(args.db)  # a database written before labels existed has none, and gets the table
    wide = queries.runs.run_scores_wide(args.db, args.run, metrics, queries.sql.scores_sql(args.band, args.corrected))
    header = ["item_id", *metrics, "n_failed"]
    _write_csv(args.out, header, [[_cell(v) for v in row] for row in wide[header].itertuples(index=False)])
    print(f"wrote {len(wide)} items to {args.out}")
    if args.labels_out:
        labels = queries.trust.run_labels(args.db, args.run)
        labels.to_csv(args.labels_out, index=False)
        print(f"wrote {len(labels)} labels to {args.labels_out}")
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    _check_run(args.db, args.run)
    wide = queries.runs.run_scores_wide(args.db, args.run, list(THELMA), queries.sql.scores_sql(args.band))
    rows: list[list[object]] = []
    for record in wide.to_dict("records"):
        scores = {m: queries.diagnosis.wide_score(record, m) for m in THELMA}  # with counts: the quiet diagnosis
        rows += [[record["item_id"], rule.id, rule.components, rule.origin]
                 for rule in diagnosis.diagnose(scores, args.thresholds)]
    _write_csv(args.out, ["item_id", "rule", "components", "origin"], rows)
    print(f"wrote {len(rows)} fired rules for {len(wide)} items to {args.out}")
    return 0


def _trust(args: argparse.Namespace) -> int:
    from evaluators.metrics import trust
    from evaluators.runs import labelling
    from evaluators.runs.ingest import InputError, load_labels

    _check_run(args.db, args.run)
    store.migrate(args.db)  # a database written before labels existed gets the table
    if args.labels:
        items, components = queries.trust.label_targets(args.db, args.run)
        try:
            labels = load_labels(args.labels, set(diagnosis.RULES), set(THELMA), items, components,
                                 author=args.author or store.os_user())
        except InputError as exc:
            print(exc, file=sys.stderr)  # one located line per bad row; nothing was written
            return 2
        store.add_labels(args.db, args.run, labels)
        print(f"imported {len(labels)} labels into run {args.run}")
    result = labelling.report(args.db, args.run, args.thresholds, args.band)
    _write_csv(args.out, trust.CSV_COLUMNS, [[_cell(v) for v in t.row().values()] for t in result.rows])
    labelled = [t for t in result.rows if t.n_labelled]
    print(f"wrote {len(result.rows)} targets to {args.out}: {len(labelled)} with labels, "
          f"{len(result.disagreements)} disagreements")
    for suggestion in result.suggestions:
        if suggestion.best is not None:
            print(f"suggested threshold: {suggestion.metric}={suggestion.best:g} ({suggestion.why})")
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from evaluators.judges.llm import JudgeFatal
    from evaluators.runs import pairs
    from evaluators.runs.ingest import InputError, load_pairs

    try:
        loaded = load_pairs(args.pairs, set(registry.METRICS))
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    metrics = sorted({m for joined, _, _ in loaded for m in joined.split(",")}, key=list(registry.METRICS).index)
    items = [side for _, better, worse in loaded for side in (better, worse)]
    try:
        runner.evaluate(items, args.db, args.run, args.judge, api_base=args.api_base, key_env=args.key_env,
                        metrics=metrics, concurrency=args.concurrency, on_progress=None)
    except JudgeFatal as exc:
        return _fail(f"{exc}; finished items are saved, rerun the same command to continue", 3)
    except (store.RunConflict, store.InputChanged) as exc:
        return _fail(f"{exc}; choose another --run name")
    except store.RunBusy as exc:
        return _fail(str(exc), 6)
    outcomes = queries.compare.pair_scores(args.db, args.run)
    tallies = pairs.tally([(r.metric, None if r.better != r.better else r.better,
                            None if r.worse != r.worse else r.worse) for r in outcomes.itertuples(index=False)])
    rows = [tallies[m].row(m) for m in metrics if m in tallies]
    for metric, n, agree, ties, disagree, failed, rate in rows:
        shown = "–" if rate is None else f"{rate:.2f}"
        print(f"{metric:<24} agreement {shown} ({agree} of {n - failed} scored pairs; {ties} ties, "
              f"{disagree} reversed, {failed} failed)")
    if args.out:
        _write_csv(args.out, pairs.CSV_COLUMNS, [[_cell(v) for v in row] for row in rows])
    return 0


def _gate(args: argparse.Namespace) -> int:
    import os

    from evaluators.runs import gate

    try:
        gate.check_runs(args.db, args.baseline, args.candidate)
        metrics = gate.gated_metrics(args.db, args.baseline, args.candidate, args.metrics)
        result = gate.run_gate(args.db, args.baseline, args.candidate, metrics,
                               gate.parse_max_drop(args.max_drop, metrics), args.band, args.thresholds,
                               gate.MAX_UNSCORED_RISE if args.max_unscored_rise is None else args.max_unscored_rise)
    except gate.GateInput as exc:
        return _fail(str(exc))
    print(gate.table(result))
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(gate.markdown(result, os.environ.get("RAG_TRIAGE_URL") or None))
        print(f"wrote {args.markdown}")
    return result.exit_code


def _export_suite(args: argparse.Namespace) -> int:
    from evaluators.runs import suite

    _check_run(args.db, args.run)
    store.migrate(args.db)  # a database written before labels existed gets the table: corrections are read
    conditions = suite.parse_filter(args.filter) if args.filter is not None else ()
    wide = queries.runs.run_scores_wide(args.db, args.run, list(THELMA))
    ids = suite.select_items(args.db, args.run, wide, ids=args.items, triaged=args.triaged, rule=args.rule,
                             conditions=conditions)
    n_items, n_expect = suite.export(args.db, args.run, args.out, ids, wide)
    print(f"wrote {n_items} items with {n_expect} expectations to {args.out}")
    return 0


def _ledger(args: argparse.Namespace) -> int:
    runs = list(dict.fromkeys(args.run))
    for run in runs:
        _check_run(args.db, run)
    th = ledger.Thresholds(args.min_retrieved, args.dead_max_essential, args.stale_min_unsupported)
    frame = queries.ledger.source_ledger(args.db, runs, th, args.band, limit=None)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        f.write(ledger.to_csv(frame))
    print(f"wrote {len(frame)} sources of {len(runs)} run{'s' if len(runs) > 1 else ''} to {args.out}: "
          f"{int(frame['dead_weight'].sum())} dead weight, {int(frame['stale'].sum())} possibly stale")
    return 0


def _runs(args: argparse.Namespace) -> int:
    frame = queries.runs.runs(args.db)
    if frame.empty:
        print("no runs")
        return 0
    for row in frame.itertuples(index=False):
        print(f"{row.run_id}\t{row.judge}\t{row.status}\t{row.n_done}/{row.n_items} items\t{row.created_at:%Y-%m-%d %H:%M}")
    return 0


def _delete_run(args: argparse.Namespace) -> int:
    try:
        counts = store.delete_run(args.db, args.run)
    except KeyError:
        return _fail(f"{args.db}: no run named {args.run!r} (see: python -m evaluators runs --db {args.db})")
    rows = ", ".join(f"{n} {table}" for table, n in counts.items() if table != "runs")
    print(f"deleted run {args.run}: {rows}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    handlers = {"evaluate": _evaluate, "export": _export, "diagnose": _diagnose, "trust": _trust, "agreement": _agreement,
                "gate": _gate, "export-suite": _export_suite, "ledger": _ledger, "runs": _runs,
                "delete-run": _delete_run}
    try:
        args = _parser().parse_args(argv)  # opens --db read-only to check it: it may be busy
        return handlers.get(args.command, getattr(args, "handler", None))(args)
    except SystemExit as exc:  # argparse: --help (0), or a bad option already printed on one line (2)
        return int(exc.code or 0)
    except (store.StoreMissing, ValueError) as exc:
        return _fail(str(exc))
    except store.StoreBusy as exc:
        return _fail(str(exc), 4)
    except KeyboardInterrupt:
        return _fail("interrupted; finished items are saved, rerun the same command to continue", 130)
