"""Where the local judge is right: its logprob P("1") and the band of it that is unsure.

The local judge (Qwen2.5-Coder-1.5B through llama.cpp) reads P("1") / (P("0") + P("1")) from its first
answer token, and its verdicts are unsure when that lies inside the logprob band. This asks it a seeded
sample of the licensed development matches of benchmarks/labelled.py (up to N per learned match type, as
many labelled 1 as 0 where there are, texts of at most MAX_CHARS so a call stays short) and prints, per
match type, the ECE of P("1") and, for candidate bands, the unsure share and the accuracy of the rest: on
all sampled matches and on those the offline judge is unsure of (what the cascade `offline>local` sends on).

TUNING RULE: development split only; the held-out examples are never built here.

    python -m benchmarks.logprob_band [--per-type 80] [--answers benchmarks/out/local_answers.json]

`--answers` keeps the local judge's P("1") per match in a JSON file, so a rerun asks only new matches.
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
from benchmarks.labelled import DEV_SPLIT, SEED, Example, examples  # noqa: E402
from evaluators.core.confidence import DEFAULT_BANDS, LOGPROB  # noqa: E402
from evaluators.core.records import CALIBRATED, Status  # noqa: E402
from evaluators.judges import registry  # noqa: E402
from evaluators.judges.calibration import LEARNED_TYPES  # noqa: E402

MAX_CHARS = 2500  # the longest text of a sampled match: a 1.5B model on 2 cores reads ~100 tokens a second
SCORED = registry.BINARY_PROMPTS | set(registry.LABEL_PROMPTS)  # prompts the local judge reads from one token


def sample(per_type: int, seed: int = SEED) -> list[Example]:
    """Up to `per_type` licensed development matches per learned match type, balanced by label, seeded."""
    rng = random.Random(seed)
    pool = [e for e in examples(DEV_SPLIT) if e.licensed and not e.perturbed and e.prompt in SCORED
            and max(len(str(v)) for v in e.variables.values()) <= MAX_CHARS]
    chosen: list[Example] = []
    for match_type in LEARNED_TYPES:
        for label in (0, 1):
            group = [e for e in pool if e.match_type == match_type and e.label == label]
            chosen += rng.sample(group, min(per_type // 2, len(group)))
    return chosen


def key(example: Example) -> str:
    """A stable id of a match: its prompt and variables."""
    return hashlib.sha256(json.dumps([example.prompt, example.variables], sort_keys=True).encode()).hexdigest()[:16]


async def ask_local(todo: Sequence[Example], known: dict[str, float | None],
                    save: Callable[[dict[str, float | None]], None]) -> dict[str, float | None]:
    """P("1") of the local judge per match (None when it failed), asking only matches not in `known`."""
    from evaluators.judges import local_llm

    missing = [e for e in todo if key(e) not in known]
    if not missing:
        return known
    with local_llm.LocalServer() as server:
        judge = local_llm.judge(server, timeout=600.0)
        for n, e in enumerate(missing, 1):
            answer = await judge.ask(e.prompt, **e.variables)
            ok = answer.status is Status.OK and answer.prob is not None
            known[key(e)] = answer.prob if ok else None
            save(known)
            print(f"{n}/{len(missing)} {e.match_type} label {e.label} p {known[key(e)]}", file=sys.stderr, flush=True)
    return known


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-type", type=int, default=80, help="matches per match type (default 80)")
    p.add_argument("--answers", type=Path, default=None, help="JSON file keeping the local judge's p per match")
    args = p.parse_args(argv)
    chosen = sample(args.per_type)
    known: dict[str, float | None] = (json.loads(args.answers.read_text()) if args.answers and args.answers.exists()
                                      else {})

    def save(answers: dict[str, float | None]) -> None:
        if args.answers:
            args.answers.parent.mkdir(parents=True, exist_ok=True)
            args.answers.write_text(json.dumps(answers), encoding="utf-8")

    got = asyncio.run(ask_local(chosen, known, save))
    rows = [(e, got[key(e)]) for e in chosen if got.get(key(e)) is not None]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# The local judge on {len(rows)} licensed development matches ({len(chosen) - len(rows)} failed; "
          f"load {load})\n\nECE over 10 bins; default logprob band {DEFAULT_BANDS[LOGPROB]}.\n")
    for name in (*LEARNED_TYPES, "all"):
        idx = [i for i, (e, _) in enumerate(rows) if name in ("all", e.match_type)]
        if not idx:
            continue
        labels = [rows[i][0].label for i in idx]
        raw = [rows[i][1] for i in idx]
        unsure_offline = [i for i in idx if (j := cal.judge(rows[i][0])) is not None
                          and cal._unsure(j, DEFAULT_BANDS[CALIBRATED])]
        print(f"## {name}: {len(idx)} matches, {sum(labels)} labelled 1; ECE {cal.ece(raw, labels):.3f}\n")
        print("\n".join(cal.band_rows([(y, int(p >= 0.5), p) for y, p in zip(labels, raw)])) + "\n")
        if unsure_offline:
            print(f"of them, the {len(unsure_offline)} the offline judge is unsure of:\n")
            print("\n".join(cal.band_rows([(rows[i][0].label, int(rows[i][1] >= 0.5), rows[i][1])
                                        for i in unsure_offline])) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
