"""The GRAMMAR commands: grammar-generate, grammar-run, grammar-eval and grammar-demo.

Handlers return the CLI's exit codes (evaluators/cli/__init__.py): 0 done, 2 bad input, 3 the judge refused.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import evaluators.cli.arguments as options
from evaluators.cli.common import fail
from evaluators.core.records import JudgeCall
from evaluators.grammar import CLUSTER_BY, COMPANY_SQL, CORPUS, TEMPLATES, generate, pipeline, robustness, runs
from evaluators.judges.factory import JudgeConfig
from evaluators.judges.llm import JudgeFatal
from evaluators.runs import runner
from evaluators.storage import ownership, queries


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register grammar-generate, grammar-run, grammar-eval and grammar-demo; each sets `handler`.

    Path and number options are typed by evaluators.cli.arguments, so they are checked before any work.
    """
    add_generate(subparsers)
    add_run(subparsers)
    add_eval(subparsers)
    add_demo(subparsers)


def add_generate(subparsers: argparse._SubParsersAction) -> None:
    """Register grammar-generate."""
    g = subparsers.add_parser("grammar-generate", help="GRAMMAR: generate a test set with SQL ground truth")
    g.add_argument(
        "--source",
        type=options.duckdb_source,
        default=str(COMPANY_SQL),
        help="DuckDB file or .sql script with the domain data",
    )
    g.add_argument(
        "--templates",
        type=options.input_file,
        default=None,
        help=f"templates JSON (default {TEMPLATES} for the demo source; none with --from-schema)",
    )
    g.add_argument(
        "--out",
        required=True,
        type=options.output_file,
        help="test set to write (JSONL: id, query, reference, metadata)",
    )
    g.add_argument("--from-schema", action="store_true", help="ask --judge for SQL templates from the schema")
    g.add_argument("--requirements", default="", help="extra requirements for generated SQL templates")
    g.add_argument(
        "--text-variants",
        type=options.count,
        default=3,
        help="text templates to ask for per SQL template that has none (default 3)",
    )
    g.add_argument("--criteria", default="", help="linguistic criteria for generated text templates")
    g.add_argument("--judge", default=None, help="litellm model (or 'local') that writes missing templates")
    options.add_endpoint(g)
    g.add_argument(
        "--save-templates",
        type=options.output_file,
        default=None,
        help="write the templates used (with generated ones) here",
    )
    g.add_argument(
        "--per-group",
        type=options.count,
        default=None,
        help="stratified sampling: exactly this many text variants per semantic group",
    )
    g.add_argument("--max-groups", type=options.count, default=None, help="at most this many groups per SQL template")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(handler=cli_generate)


def add_run(subparsers: argparse._SubParsersAction) -> None:
    """Register grammar-run."""
    r = subparsers.add_parser("grammar-run", help="GRAMMAR: answer a test set with the reference RAG pipeline")
    r.add_argument("testset", type=options.input_file, help="JSONL from grammar-generate")
    r.add_argument("--db", required=True, type=options.new_database)
    r.add_argument("--run", required=True, type=options.run_name)
    r.add_argument("--corpus", type=options.input_file, default=str(CORPUS), help="documents JSONL (id, title, text)")
    r.add_argument("--retriever", choices=("bm25", "dense"), default="bm25")
    r.add_argument("--top-k", type=options.count, default=1)
    r.add_argument("--generator", default="offline", help="offline (extractive) or a litellm model")
    r.add_argument(
        "--judge",
        default="offline",
        help="judge for the THELMA metrics, or a chain like evaluate's: 'offline>openai/gpt-4o-mini'",
    )
    r.add_argument(
        "--decompose-with", default=None, help="the tier of a --judge chain that decomposes (default: the last)"
    )
    r.add_argument("--correctness-judge", default="offline", help="judge for correctness (Table 6 prompt)")
    options.add_endpoint(r)
    r.add_argument("--metrics", default=None, help="THELMA metric ids (default all)")
    r.add_argument("--concurrency", type=options.concurrency, default=8)
    r.set_defaults(handler=cli_run)


def add_eval(subparsers: argparse._SubParsersAction) -> None:
    """Register grammar-eval."""
    e = subparsers.add_parser("grammar-eval", help="GRAMMAR: correctness, robustness groups, R and Acc of a run")
    e.add_argument("--db", required=True, type=options.database)
    e.add_argument("--run", required=True)
    e.add_argument(
        "--judge",
        default="offline",
        help="offline (normalised match), local, a litellm model, or a chain 'offline>openai/gpt-4o-mini' "
        "(the offline match gives a label only, so a chain's next tier decides every item)",
    )
    options.add_endpoint(e)
    e.add_argument("--cluster-by", choices=CLUSTER_BY, default="sql_template")
    e.add_argument("--no-judge", action="store_true", help="report from the stored correctness only")
    e.add_argument("--concurrency", type=options.concurrency, default=8)
    e.set_defaults(handler=cli_eval)


def add_demo(subparsers: argparse._SubParsersAction) -> None:
    """Register grammar-demo."""
    d = subparsers.add_parser("grammar-demo", help="GRAMMAR: build the offline demo runs into a database")
    d.add_argument("--db", required=True, type=options.new_database)
    d.add_argument("--retrievers", default="bm25,dense")
    d.add_argument("--max-groups", type=options.count, default=None, help="at most this many groups per SQL template")
    d.add_argument("--metrics", default=None, help="THELMA metric ids (default all)")
    d.set_defaults(handler=cli_demo)


def cli_eval(args: argparse.Namespace) -> int:
    """grammar-eval: judge correctness (unless --no-judge) and print the robustness report."""
    try:
        if not args.no_judge:
            print(
                runs.evaluate_correctness(
                    args.db, args.run, args.judge, args.api_base, args.concurrency, key_env=args.key_env
                ).text()
            )
        elif args.run not in queries.grammar.grammar_runs(args.db):
            return fail(f"run {args.run!r} has no stored GRAMMAR correctness; run grammar-eval without --no-judge")
        print(robustness.report_text(robustness.report(args.db, args.run, args.cluster_by)))
    except JudgeFatal as exc:
        return fail(str(exc), 3)
    except runs.NoGrammarItems as exc:
        return fail(f"{exc}; create them with grammar-run or from a grammar-generate test set")
    except ValueError as exc:
        return fail(str(exc))
    return 0


def cli_generate(args: argparse.Namespace) -> int:
    """grammar-generate: templates (given or generated) -> test set JSONL, with M x N x Q counts."""
    source = Path(args.source)
    templates_path = args.templates or (
        str(TEMPLATES) if source.resolve() == COMPANY_SQL.resolve() and not args.from_schema else None
    )
    try:
        templates = generate.load_templates(templates_path) if templates_path else None
        if templates is None and not args.from_schema:
            return fail("give --templates, or --from-schema with --judge")
        needs_judge = args.from_schema or any(not t.texts for t in templates or [])
        if needs_judge and not args.judge:
            return fail("--judge is needed to write missing SQL or text templates")
        if needs_judge and args.judge == "offline":
            return fail(
                "the offline judge cannot write SQL or text templates: give --templates "
                "with text variants, or --judge with an LLM (local or a litellm model)"
            )
        with generate.open_source(source) as con:
            if needs_judge:

                async def ask() -> tuple[list[generate.SqlTemplate], list[str]]:
                    calls: list[JudgeCall] = []
                    async with AsyncExitStack() as stack:
                        config = JudgeConfig(args.judge, args.api_base, args.key_env)
                        judge = await runs.open_judge(stack, config, None, calls)
                        return await generate.complete_templates(
                            judge,
                            con,
                            templates,
                            args.from_schema,
                            args.text_variants,
                            args.criteria,
                            args.requirements,
                        )

                templates, notes = asyncio.run(ask())
                for note in notes:
                    print(note, file=sys.stderr)
            assert templates is not None  # given, or written by the judge from the schema
            if args.save_templates:
                generate.save_templates(templates, args.save_templates)
            testset = generate.generate(con, templates, args.per_group, args.max_groups, args.seed)
    except JudgeFatal as exc:
        return fail(str(exc), 3)
    except (ValueError, OSError) as exc:  # TemplateError is a ValueError
        return fail(" ".join(str(exc).split()))
    if not testset.cases:
        return fail("no test case: every combination was dropped (see the counts above)")
    generate.write_testset(testset.cases, args.out)
    print(testset.summary())
    print(f"wrote {len(testset.cases)} test cases to {args.out}")
    return 0


# ---------------------------------------------------------------- grammar-run and grammar-demo


def _metrics(text: str | None) -> list[str] | None:
    return [m for m in text.split(",") if m.strip()] if text else None


def cli_run(args: argparse.Namespace) -> int:
    """grammar-run: answer a test set with the reference pipeline, store it, judge it, report."""
    try:
        cases = generate.read_testset(args.testset)
        docs = pipeline.load_corpus(args.corpus)
        result = runs.run_pipeline(
            cases,
            docs,
            args.db,
            args.run,
            args.retriever,
            args.top_k,
            args.generator,
            args.judge,
            args.correctness_judge,
            args.api_base,
            _metrics(args.metrics),
            args.concurrency,
            args.decompose_with,
            runner.print_progress,
            args.key_env,
        )
    except JudgeFatal as exc:
        return fail(f"{exc}; finished items are saved, rerun the same command to continue", 3)
    except ownership.RunConflict as exc:
        return fail(f"{exc}; rerun with the same options, or choose another --run name")
    except (ValueError, OSError) as exc:
        return fail(" ".join(str(exc).split()))
    print(result.thelma.text())
    print(result.correctness.text())
    print(robustness.report_text(robustness.report(args.db, args.run)))
    return 0


def cli_demo(args: argparse.Namespace) -> int:
    """grammar-demo: build the offline demo runs (one per retriever) into --db."""
    retrievers = [r.strip() for r in args.retrievers.split(",") if r.strip()]
    unknown = [r for r in retrievers if r not in pipeline.RETRIEVERS]
    if unknown or not retrievers:
        return fail(f"unknown retrievers {unknown or retrievers}; known: {', '.join(pipeline.RETRIEVERS)}")
    try:
        results = runs.build_demo(args.db, retrievers, args.max_groups, _metrics(args.metrics), runner.print_progress)
    except ValueError as exc:
        return fail(" ".join(str(exc).split()))
    for result in results:
        print(result.correctness.text())
        print(robustness.report_text(robustness.report(args.db, result.run)))
    return 0
