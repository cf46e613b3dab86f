"""Where the local judge is right when the offline judge is unsure: its logprob uncertainty band.

In the cascade `--judge offline>local`, the local judge gets the matches the offline judge is unsure
of, and its own verdicts are unsure when P("1") lies inside the logprob band. This asks the local
judge the labelled matches of benchmarks/calibration.py that the offline judge is unsure of (at its
default band): a seeded sample of up to N per match type, and prints, for candidate logprob bands,
the share of the local verdicts inside the band (unsure) and the accuracy of those outside it.

Measured 2026-11-25 (--per-type 60, load ~3; essentiality included since it is read from one token):
142 matches (60 support, 33 essential, 49 covers; no SP1 source the offline judge was unsure of), 68%
right at p >= 0.5. Accuracy outside the band rises slowly as the band widens: 0.74 at (0.4, 0.6) with
25% unsure, 0.79 at (0.3, 0.7) with 45%, 0.82 at the default (0.2, 0.8) with 73%. No band makes the
local judge both decisive and right on the matches the offline judge cannot settle, so the default
stays the cautious one.

TUNING RULE: development split only (WikiEval rows 0-19, ExpertQA rand_val, the ARES few-shot sets,
our demo); the held-out examples are never built here.

    python -m benchmarks.logprob_band [--per-type 12] [--answers FILE]

`--answers` keeps the local judge's p per match in a JSON file, so a rerun asks only new matches.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import calibration as cal  # noqa: E402
from benchmarks.agreement import DEV, WIKIEVAL, load_wikieval  # noqa: E402
from evaluators.core.confidence import CALIBRATED, DEFAULT_BANDS, LOGPROB, is_unsure  # noqa: E402
from evaluators.core.records import Status  # noqa: E402
from evaluators.judges import registry  # noqa: E402

SEED = 7
# The match types the cascade can escalate and the local judge scores by logprob (essentiality from the
# first token of its label, registry.LABEL_PROMPTS); SD is decided by the encoder in every judge.
ESCALATED = (cal.SUPPORT, cal.ESSENTIAL, cal.SOURCE_ESSENTIAL, cal.COVERS)
SCORED = registry.BINARY_PROMPTS | set(registry.LABEL_PROMPTS)


def dev_examples() -> list[cal.Example]:
    """The development labelled matches of benchmarks/calibration.py (no held-out example is built)."""
    return (cal.wikieval_examples(load_wikieval(WIKIEVAL), DEV, cal.DEV_SPLIT) + cal.expertqa_examples("val")
            + cal.ares_examples() + cal.demo_examples())


def offline_unsure(examples: Sequence[cal.Example], per_type: int) -> list[cal.Example]:
    """Up to `per_type` matches per escalated type that the offline judge is unsure of, seeded."""
    rng = random.Random(SEED)
    chosen: list[cal.Example] = []
    for match_type in ESCALATED:
        pool = [e for e in examples if e.match_type == match_type and e.prompt in SCORED]
        unsure = [e for e in pool if (j := cal.judge(e)) is not None and is_unsure(cal._p(j), CALIBRATED)]
        chosen += rng.sample(unsure, min(per_type, len(unsure)))
    return chosen


def key(example: cal.Example) -> str:
    """A stable id of a match: its prompt and variables."""
    return hashlib.sha256(json.dumps([example.prompt, example.variables], sort_keys=True).encode()).hexdigest()[:16]


async def ask_local(examples: Sequence[cal.Example], known: dict[str, float | None],
                    save: Callable[[dict[str, float | None]], None]) -> dict[str, float | None]:
    """P("1") of the local judge per match (None when it failed), asking only matches not in `known`."""
    from evaluators.judges import local_llm

    todo = [e for e in examples if key(e) not in known]
    if not todo:
        return known
    with local_llm.LocalServer() as server:
        judge = local_llm.judge(server, timeout=600.0)
        for n, e in enumerate(todo, 1):
            answer = await judge.ask(e.prompt, **e.variables)
            ok = answer.status is Status.OK and answer.confidence is not None
            known[key(e)] = answer.confidence.p if ok else None
            save(known)
            print(f"{n}/{len(todo)} {e.match_type} label {e.label} p {known[key(e)]}", file=sys.stderr, flush=True)
    return known


def band_table(rows: Sequence[tuple[str, int, float]]) -> list[str]:
    """Per candidate band: the local verdicts inside it (unsure) and the accuracy of those outside."""
    lines = ["| logprob band | unsure | accuracy outside | decided outside |", "|---|---:|---:|---:|"]
    for lo, hi in cal.CANDIDATE_BANDS:
        outside = [(y, p) for _, y, p in rows if not lo < p < hi]
        acc = sum(int(p >= 0.5) == y for y, p in outside) / len(outside) if outside else float("nan")
        mark = " (default)" if (lo, hi) == DEFAULT_BANDS[LOGPROB] else ""
        lines.append(f"| ({lo:.2f}, {hi:.2f}){mark} | {1 - len(outside) / len(rows):.0%} | {acc:.2f} "
                     f"| {len(outside)}/{len(rows)} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-type", type=int, default=12, help="matches per match type (default 12)")
    p.add_argument("--answers", type=Path, default=None, help="JSON file keeping the local judge's p per match")
    args = p.parse_args(argv)
    examples = offline_unsure(dev_examples(), args.per_type)
    known: dict[str, float | None] = (json.loads(args.answers.read_text()) if args.answers and args.answers.exists()
                                      else {})

    def save(answers: dict[str, float | None]) -> None:
        if args.answers:
            args.answers.write_text(json.dumps(answers), encoding="utf-8")

    got = asyncio.run(ask_local(examples, known, save))
    rows = [(e.match_type, e.label, got[key(e)]) for e in examples if got.get(key(e)) is not None]
    failed = len(examples) - len(rows)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# Local judge on development matches the offline judge is unsure of (at {DEFAULT_BANDS[CALIBRATED]})\n")
    print(f"{len(rows)} answered of {len(examples)} ({failed} failed); load average {load}\n")
    for name in (*ESCALATED, "all"):
        part = [r for r in rows if name in ("all", r[0])]
        if part:
            ones = sum(y for _, y, _ in part)
            print(f"## {name}: {len(part)} matches, {ones} labelled 1\n")
            print("\n".join(band_table(part)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
