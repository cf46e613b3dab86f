"""How well the offline judge's p is calibrated: reliability, ECE and uncertainty bands, development and held out.

Every labelled match (benchmarks/labelled.py) is put to the offline judge's registered answer for its
prompt (the same decision functions the engine calls), which gives its value, its raw score and the
calibrated p (evaluators/judges/calibration.json, fitted by `python -m benchmarks.train_judge` on licensed
development data). This prints, per match type and split, a reliability table (bins of p: count, mean
p, observed rate of label 1), the expected calibration error (ECE, 10 equal-width bins), the share of
verdicts inside the default band (unsure) and the accuracy of the rest, and the same for a few
candidate bands; then per label source (a data set and construction). Held-out data is measured here
and nowhere fitted or tuned on; it is reported by data set, never item by item.

    python -m benchmarks.calibration [--split dev|held-out|both] [--out benchmarks/out/calibration.md]
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.agreement import OUT  # noqa: E402
from benchmarks.labelled import DEV_SPLIT, HELD_OUT_SPLIT, Example, examples, sd_cosines  # noqa: E402
from evaluators.core.confidence import DEFAULT_BANDS  # noqa: E402
from evaluators.core.records import CALIBRATED, Status  # noqa: E402
from evaluators.judges import calibration, registry  # noqa: E402
from evaluators.judges.calibration import MATCH_TYPES, SD  # noqa: E402
from evaluators.metrics.thelma import SD_THRESHOLD  # noqa: E402

BINS = 10  # equal-width bins of p for the reliability table and the ECE
CANDIDATE_BANDS = ((0.5, 0.5), (0.45, 0.55), (0.4, 0.6), (0.35, 0.65), (0.3, 0.7), (0.25, 0.75))


@dataclass(frozen=True)
class Judged:
    """A labelled match with the offline judge's value and raw score."""

    example: Example
    value: int
    score: float


def judge(example: Example) -> Judged | None:
    """The offline judge's value and raw score for one match; None when it did not decide."""
    if example.match_type == SD:
        cosine = sd_cosines(example.variables["sentences"])[example.variables["index"]]
        return Judged(example, int(cosine < SD_THRESHOLD), cosine)
    answer = registry.OFFLINE_ANSWERS[example.prompt](**example.variables)
    if answer.status is not Status.OK or answer.prob is None:
        return None
    return Judged(example, int(answer.value), float(answer.prob))


# ---------------------------------------------------------------- report

def _p(j: Judged) -> float:
    return calibration.probability(j.example.match_type, j.value, j.score)


def ece(ps: Sequence[float], labels: Sequence[int]) -> float | None:
    """Expected calibration error over BINS equal-width bins of p."""
    if not ps:
        return None
    bins: dict[int, list[tuple[float, int]]] = {}
    for p, y in zip(ps, labels):
        bins.setdefault(min(BINS - 1, int(p * BINS)), []).append((p, y))
    return sum(abs(sum(p for p, _ in b) - sum(y for _, y in b)) for b in bins.values()) / len(ps)


def reliability(ps: Sequence[float], labels: Sequence[int]) -> list[str]:
    """Markdown rows: bin of p, count, mean p, observed rate of label 1."""
    lines = ["| p bin | n | mean p | observed |", "|---|---:|---:|---:|"]
    for k in range(BINS):
        got = [(p, y) for p, y in zip(ps, labels) if min(BINS - 1, int(p * BINS)) == k]
        if got:
            lines.append(f"| {k / BINS:.1f}-{(k + 1) / BINS:.1f} | {len(got)} "
                         f"| {sum(p for p, _ in got) / len(got):.2f} | {sum(y for _, y in got) / len(got):.2f} |")
    return lines


def _unsure(j: Judged, band: tuple[float, float]) -> bool:
    lo, hi = band
    return lo < _p(j) < hi


def band_rows(scored: Sequence[tuple[int, int, float]]) -> list[str]:
    """Per candidate band, over (label, value, p) verdicts: the share inside it (unsure) and the accuracy of
    those outside it."""
    lines = ["| band | unsure | accuracy outside | accuracy of all |", "|---|---:|---:|---:|"]
    everything = sum(value == label for label, value, _ in scored) / len(scored)
    for lo, hi in CANDIDATE_BANDS:
        outside = [(label, value) for label, value, p in scored if not lo < p < hi]
        acc = sum(value == label for label, value in outside) / len(outside) if outside else float("nan")
        lines.append(f"| ({lo:.2f}, {hi:.2f}) | {1 - len(outside) / len(scored):.0%} | {acc:.2f} "
                     f"| {everything:.2f} |")
    return lines


def _source_rows(group: Sequence[Judged]) -> list[str]:
    """Per label source: matches, mean p, observed rate of label 1, ECE, unsure share at the default band,
    judge accuracy of all and of the sure ones."""
    band = DEFAULT_BANDS[CALIBRATED]
    lines = ["| label source | n | mean p | observed | ECE | unsure | accuracy | accuracy of the sure |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for source in sorted({j.example.source for j in group}):
        part = [j for j in group if j.example.source == source]
        sure = [j for j in part if not _unsure(j, band)]
        lines.append(f"| {source} | {len(part)} | {sum(map(_p, part)) / len(part):.2f} "
                     f"| {sum(j.example.label for j in part) / len(part):.2f} "
                     f"| {ece([_p(j) for j in part], [j.example.label for j in part]):.3f} "
                     f"| {1 - len(sure) / len(part):.0%} "
                     f"| {sum(j.value == j.example.label for j in part) / len(part):.2f} "
                     f"| {sum(j.value == j.example.label for j in sure) / len(sure) if sure else float('nan'):.2f} |")
    return lines


def lean_rows(judged: Sequence[Judged]) -> list[str]:
    """Per match type and split, where the unsure verdicts (p inside the default band) fall: their share among the
    matches labelled 1 and labelled 0, and among the verdicts the judge decided 1 ("yes") and 0 ("no"). A band that
    holds a yes back longer than a no shows a larger share on the yes side at the same evidence."""
    band = DEFAULT_BANDS[CALIBRATED]
    lines = ["| match type | split | unsure of label 1 | unsure of label 0 | unsure of the judge's yes "
             "| unsure of the judge's no | unsure verdicts leaning yes |", "|---|---|---:|---:|---:|---:|---:|"]

    def share(group: Sequence[Judged]) -> str:
        return f"{sum(_unsure(j, band) for j in group) / len(group):.0%} ({len(group)})" if group else "–"

    for match_type in MATCH_TYPES:
        for split in (DEV_SPLIT, HELD_OUT_SPLIT):
            group = [j for j in judged if j.example.match_type == match_type and j.example.split == split]
            if not group:
                continue
            unsure = [j for j in group if _unsure(j, band)]
            lines.append(f"| {match_type} | {split} | {share([j for j in group if j.example.label == 1])} "
                         f"| {share([j for j in group if j.example.label == 0])} "
                         f"| {share([j for j in group if j.value == 1])} | {share([j for j in group if j.value == 0])} "
                         f"| {sum(j.value == 1 for j in unsure) / len(unsure) if unsure else 0:.0%} of {len(unsure)} |")
    return lines


def report(judged: Sequence[Judged]) -> str:
    """The reliability tables, ECEs and band figures per match type and split, then per label source."""
    band = DEFAULT_BANDS[CALIBRATED]
    sections = ["# Offline judge calibration\n",
                "Generated by `python -m benchmarks.calibration`. p from evaluators/judges/calibration.json (fitted by "
                "`python -m benchmarks.train_judge` on licensed development data); ECE over 10 equal-width bins of p; "
                f"unsure: p strictly inside the default band {band}.\n",
                "| match type | split | matches | label-1 share | judge accuracy | ECE | unsure |",
                "|---|---|---:|---:|---:|---:|---:|"]
    sections += ["\nWhere the unsure verdicts fall (a yes decided as readily as a no leaves both sides alike):\n",
                 *lean_rows(judged), ""]
    details: list[str] = []
    for match_type in (*MATCH_TYPES, "all"):
        for split in (DEV_SPLIT, HELD_OUT_SPLIT):
            group = [j for j in judged if match_type in ("all", j.example.match_type) and j.example.split == split]
            if not group:
                continue
            labels = [j.example.label for j in group]
            ps = [_p(j) for j in group]
            acc = sum(j.value == j.example.label for j in group) / len(group)
            unsure = sum(_unsure(j, band) for j in group) / len(group)
            sections.append(f"| {match_type} | {split} | {len(group)} | {sum(labels) / len(group):.2f} | {acc:.2f} "
                            f"| {ece(ps, labels):.3f} | {unsure:.0%} |")
            details += [f"\n## {match_type}, {split} ({len(group)} matches)\n", *reliability(ps, labels), "",
                        *band_rows([(j.example.label, j.value, _p(j)) for j in group])]
            if match_type != "all":
                details += ["", *_source_rows(group)]
    return "\n".join(sections + details) + "\n"


# ---------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=(DEV_SPLIT, HELD_OUT_SPLIT, "both"), default="both")
    p.add_argument("--out", type=Path, default=OUT / "calibration.md", help="where the report is written as well")
    p.add_argument("--sets", default=None, help="only these data sets, by label source prefix (e.g. demo,wice,ares)")
    args = p.parse_args(argv)
    started = time.monotonic()
    splits = (DEV_SPLIT, HELD_OUT_SPLIT) if args.split == "both" else (args.split,)
    sets = None if args.sets is None else {s.strip() for s in args.sets.split(",")}
    wanted = [e for split in splits for e in examples(split) if sets is None or e.source.split(":")[0] in sets]
    judged = [j for j in map(judge, wanted) if j is not None]
    print(f"{len(judged)} of {len(wanted)} matches judged in {time.monotonic() - started:.0f} s", file=sys.stderr)
    text = report(judged)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
