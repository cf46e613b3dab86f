"""`evaluate` (a file of items into a run, or a dry run) and `agreement` (pairs of better and worse variants)."""

from __future__ import annotations

import argparse
import os
import sys

import evaluators.cli.arguments as options
from evaluators.cli.common import cell, fail, write_csv
from evaluators.judges import routes
from evaluators.judges.factory import LOCAL, OFFLINE, JudgeConfig, check_chain
from evaluators.judges.llm import JudgeFatal
from evaluators.metrics import registry
from evaluators.metrics.registry import REFERENCE, THELMA
from evaluators.metrics.thelma import SD_THRESHOLD
from evaluators.runs import dryrun, runner, traces
from evaluators.runs.cluster import ClusterOptions
from evaluators.runs.runner import RunOptions
from evaluators.storage import ownership, queries

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


# ---------------------------------------------------------------- evaluate


def add_evaluate(sub: argparse._SubParsersAction) -> None:
    """Register `evaluate`."""
    ev = sub.add_parser("evaluate", help="evaluate a file of (query, sources, response) triplets into a run")
    ev.add_argument(
        "input",
        type=options.input_file,
        help="JSONL, CSV or Parquet file of items, or another tool's export (see --format)",
    )
    ev.add_argument(
        "--format",
        default=None,
        choices=traces.FORMATS,
        help="the input's format (default: detected from its suffix and shape): items, openinference "
        "(Phoenix span export, JSONL or Parquet), langfuse (trace export, JSON or JSONL), ragas "
        "(dataset or result file: its scores are kept as imported peer scores), deepeval (test "
        "run JSON)",
    )
    ev.add_argument("--db", required=True, type=options.new_database, help="DuckDB file (created if missing)")
    ev.add_argument(
        "--run",
        required=True,
        type=options.run_name,
        help="run name (every character visible); an unfinished run of this name is resumed",
    )
    _add_judge(ev)
    ev.add_argument(
        "--metrics",
        default=None,
        help=f"comma-separated metric ids (default {','.join(THELMA)}, and {','.join(REFERENCE)} "
        f"when some item carries a reference); also: {','.join(registry.SUITE_METRICS)}",
    )
    _add_calls(ev)
    _add_run(ev)
    _add_cluster(ev)
    ev.set_defaults(handler=evaluate)


def _add_cluster(ev: argparse.ArgumentParser) -> None:
    """Where the items are judged: this process, or Ray workers (runs/cluster.py)."""
    ev.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        type=options.ray_address,
        metavar="ADDRESS",
        help="judge the items on Ray workers (needs rag-triage[cluster]): without an ADDRESS on a local Ray "
        "instance started for the run; with auto, ray://HOST:PORT or HOST:PORT on a running cluster. This "
        "process keeps the cache and writes the database; the run resumes with or without --ray",
    )
    ev.add_argument(
        "--workers",
        type=options.count,
        default=None,
        metavar="N",
        help="with --ray: the Ray workers judging at once (default: one per CPU of the cluster); "
        "each sends its share of --concurrency",
    )


def cluster_problem(args: argparse.Namespace, tiers: list[str]) -> str | None:
    """Why the options cannot go with --ray (or --workers without it), or None."""
    if args.ray is None:
        return "--workers sets how many Ray workers judge: add --ray [ADDRESS]" if args.workers else None
    if args.dry_run:
        return "--dry-run calls nothing, so it needs no cluster: drop --ray"
    if args.client_processes is not None:
        return "--client-processes sends the calls from processes of this machine; with --ray the Ray workers send them: drop it"
    if LOCAL in tiers:
        return (
            "--judge local serves the model from this machine's llama.cpp server; with --ray judge with "
            "offline or a litellm model (a vLLM served to the cluster), or drop --ray"
        )
    return None


def _add_run(ev: argparse.ArgumentParser) -> None:
    """What the run computes beside its metrics, and how the command behaves."""
    ev.add_argument(
        "--per-component", action="store_true", help="one judge call per component, as in the paper (default: batched)"
    )
    ev.add_argument(
        "--sd-threshold",
        type=options.cosine,
        default=SD_THRESHOLD,
        help="cosine (within [-1, 1]) at which two response sentences repeat each other",
    )
    ev.add_argument(
        "--update",
        action="store_true",
        help="the input changed since the run evaluated it: re-evaluate exactly the changed and "
        "added items, delete the removed ones",
    )
    ev.add_argument(
        "--retry-failed",
        action="store_true",
        help="ask the judge steps that failed (error, timeout, unparsed) again; answered calls come from the cache",
    )
    ev.add_argument(
        "--dry-run",
        action="store_true",
        help="print the calls, tokens and cost; call nothing (a cascade: what its offline tier "
        "escalates, and the cost against its last tier alone)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.add_argument(
        "--expect",
        action="store_true",
        help="the input is a regression suite (export-suite): after evaluating, check every item's "
        "expectations and print each broken one; exit 1 if any broke",
    )


def _add_judge(ev: argparse.ArgumentParser) -> None:
    """The options of the judge's configuration (JudgeConfig)."""
    ev.add_argument(
        "--judge",
        default=OFFLINE,
        type=options.judge,
        help="offline (default, embedded), local (optional Qwen 1.5B), any litellm model string, or "
        "a cascade of them, weakest first, e.g. offline>openai/gpt-4o-mini: each tier decides "
        "the verdicts it is sure of and passes the rest on; the last decides what reaches it",
    )
    ev.add_argument(
        "--decompose-with",
        default=None,
        metavar="TIER",
        help="the tier of a --judge cascade that splits texts into claims and sub-questions (default: the last)",
    )
    options.add_endpoint(ev, replicas=True)
    ev.add_argument(
        "--judges",
        type=options.input_file,
        default=None,
        metavar="FILE",
        help="litellm's model_list YAML (the proxy's config): --judge then names its model_name; its "
        "deployments are replicas, router_settings sets fallbacks and cooldowns, and each api_key is "
        "os.environ/NAME, sent to its own deployment only",
    )
    ev.add_argument(
        "--client-processes",
        type=options.count,
        default=None,
        metavar="N",
        help="send the judge calls from N worker processes (default: 2 from --concurrency "
        f"{POOL_CONCURRENCY} and {POOL_ITEMS} items on a machine with 2 cores or more, else 1: this "
        "one); litellm's CPU per call, not the endpoint, limits a large --concurrency on one process",
    )


def _add_calls(ev: argparse.ArgumentParser) -> None:
    """How the judge's calls go: in flight at once, for how long, how patient under a rate limit."""
    ev.add_argument(
        "--concurrency",
        type=options.concurrency,
        default=8,
        help=f"max judge calls in flight, 1 to {options.MAX_CONCURRENCY} (adapts down on 429)",
    )
    ev.add_argument("--timeout", type=options.duration, default=60.0, help="seconds per judge call")
    ev.add_argument(
        "--rate-limit-patience",
        type=options.duration,
        default=10.0,
        metavar="MINUTES",
        help="minutes a rate-limited judge may go without an answer before the run stops "
        "(default 10; finished items are kept)",
    )


def judges_file(args: argparse.Namespace) -> routes.Routes | None:
    """The routes of --judges, checked with the --judge chain; ValueError (one line) when either is bad."""
    if args.judges is None:
        return None
    if args.api_base or args.key_env:
        raise ValueError("--judges FILE names every endpoint and key; drop --api-base and --key-env")
    judges = routes.load(args.judges)
    check_chain(args.judge, args.decompose_with, judges)
    return judges


def run_options(
    args: argparse.Namespace, metrics: list[str], n_items: int, judges: routes.Routes | None = None
) -> RunOptions:
    """The run's options (RunOptions) from evaluate's arguments, with the routes of --judges."""
    on_ray = getattr(args, "ray", None) is not None
    judge = JudgeConfig(
        args.judge,
        tuple(args.api_base) if args.api_base else None,
        args.key_env,
        args.concurrency,
        args.timeout,
        args.rate_limit_patience * 60,
        1 if on_ray else client_processes(args.client_processes, args.concurrency, n_items),
        args.decompose_with,
        judges,
    )
    return RunOptions(
        judge,
        tuple(metrics),
        args.per_component,
        args.sd_threshold,
        args.update,
        args.retry_failed,
        cluster=ClusterOptions(args.ray or None, args.workers) if on_ray else None,
    )


def evaluate(args: argparse.Namespace) -> int:
    """evaluate: check the input and options, then run (or plan) the evaluation and print its summary."""
    from evaluators.runs.ingest import InputError, load_items

    try:
        named = runner.check_metrics(args.metrics.split(",")) if args.metrics is not None else None
        tiers, _ = check_chain(args.judge, args.decompose_with)
        judges = judges_file(args)
        if problem := cluster_problem(args, tiers):
            raise ValueError(problem)
        items = load_items(args.input, args.format)
        metrics = named or runner.default_metrics(items)
    except InputError as exc:
        print(exc, file=sys.stderr)  # one line per problem, capped for huge files
        return 2
    except ValueError as exc:
        return fail(str(exc))
    if args.expect and not any(isinstance(i.metadata.get("expect"), dict) for i in items):
        return fail(f"--expect: {args.input} has no item with an expect field (write one with export-suite)")
    run = run_options(args, metrics, len(items), judges)
    if args.dry_run:
        print(dryrun.plan(items, args.db, args.run, run).text(args.judge))
        return 0
    try:
        summary = runner.evaluate(
            items, args.db, args.run, options=run, on_progress=None if args.quiet else runner.print_progress
        )
    except JudgeFatal as exc:
        return fail(f"{exc}; finished items are saved, rerun the same command to continue", 3)
    except ownership.RunConflict as exc:
        return fail(f"{exc}; resume it with the same options and prompt files, or choose another --run name")
    except ownership.InputChanged as exc:
        return fail(f"{exc}; rerun with --update to re-evaluate exactly those, or choose another --run name")
    except ownership.RunBusy as exc:
        return fail(str(exc), 6)
    except ValueError as exc:
        return fail(str(exc))
    print(summary.text())
    if args.expect and _expectations(args, items):
        return 1
    if summary.failed_items:
        return fail(
            f"run {args.run} {summary.status}; rerun the same command with --retry-failed "
            "to ask the failed steps again",
            5,
        )
    return 0


def _expectations(args: argparse.Namespace, items: list) -> bool:
    """Check a regression suite's expectations on the run just evaluated, printing each broken one;
    whether any broke."""
    from evaluators.runs import suite

    broken = suite.check(args.db, args.run, items, suite.item_lines(args.input, items))
    for line in broken:
        print(line)
    n = sum(len(v) for i in items for k, v in (i.metadata.get("expect") or {}).items() if isinstance(v, list))
    print(f"expectations: {n - len(broken)} of {n} hold, {len(broken)} broke")
    return bool(broken)


# ---------------------------------------------------------------- agreement


def add_agreement(sub: argparse._SubParsersAction) -> None:
    """Register `agreement`."""
    ag = sub.add_parser("agreement", help="pairwise validation: how often the judge scores the better variant higher")
    ag.add_argument(
        "--pairs",
        required=True,
        type=options.input_file,
        help="JSONL: per line metric, and better and worse objects with an item's fields",
    )
    ag.add_argument("--db", required=True, type=options.new_database, help="DuckDB file (created if missing)")
    ag.add_argument(
        "--run",
        required=True,
        type=options.run_name,
        help="run to evaluate the pairs' sides into (resumed if unfinished)",
    )
    ag.add_argument("--judge", default=OFFLINE, help="as for evaluate")
    options.add_endpoint(ag)
    ag.add_argument("--concurrency", type=options.concurrency, default=8, help="max judge calls in flight")
    ag.add_argument("--out", type=options.output_file, help="CSV file to write (default: print only)")
    ag.set_defaults(handler=agreement)


def agreement(args: argparse.Namespace) -> int:
    """agreement: evaluate both sides of every pair, then print (and write) the agreement per metric."""
    from evaluators.runs import pairs
    from evaluators.runs.ingest import InputError, load_pairs

    try:
        loaded = load_pairs(args.pairs, set(registry.METRICS))
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    metrics = sorted({m for joined, _, _ in loaded for m in joined.split(",")}, key=list(registry.METRICS).index)
    items = [side for _, better, worse in loaded for side in (better, worse)]
    run = RunOptions(JudgeConfig(args.judge, args.api_base, args.key_env, args.concurrency), tuple(metrics))
    try:
        runner.evaluate(items, args.db, args.run, options=run)
    except JudgeFatal as exc:
        return fail(f"{exc}; finished items are saved, rerun the same command to continue", 3)
    except (ownership.RunConflict, ownership.InputChanged) as exc:
        return fail(f"{exc}; choose another --run name")
    except ownership.RunBusy as exc:
        return fail(str(exc), 6)
    outcomes = queries.compare.pair_scores(args.db, args.run)
    tallies = pairs.tally(
        [
            (r.metric, None if r.better != r.better else r.better, None if r.worse != r.worse else r.worse)
            for r in queries.sql.rows(outcomes)
        ]
    )
    rows = [tallies[m].row(m) for m in metrics if m in tallies]
    for metric, n, agree, ties, disagree, failed, rate in rows:
        shown = "–" if rate is None else f"{rate:.2f}"
        print(
            f"{metric:<24} agreement {shown} ({agree} of {n - failed} scored pairs; {ties} ties, "
            f"{disagree} reversed, {failed} failed)"
        )
    if args.out:
        write_csv(args.out, pairs.CSV_COLUMNS, [[cell(v) for v in row] for row in rows])
    return 0
