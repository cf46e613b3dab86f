"""Judge trust on the demo: kappa per Table-2 rule against labels written by hand for 40 demo items.

The labels (data/demo/labels/*.jsonl) say, for 20 items of weak_retriever and 20 of
verbose_generator, which rules' meaning is true of the item, read from its sources, its answer and
the better retriever's answer; the note on each says why. They were written without looking at the
judge's verdicts. The benchmark builds the demo database with the offline judge, which imports them
(or reads a copy of --db, importing them when it lacks them), and prints the trust report and the
threshold suggestions.

    python benchmarks/trust_demo.py [--db data/demo.duckdb]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data import build_demo  # noqa: E402
from evaluators.metrics import diagnosis  # noqa: E402
from evaluators.runs import labelling  # noqa: E402
from evaluators.storage import queries  # noqa: E402

LABELS = build_demo.LABELS


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a built demo database (default: build one in a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.duckdb"
        if args.db:
            shutil.copy(args.db, db)  # labels go into a copy: the demo database stays as it was
        else:
            subprocess.run([sys.executable, "-m", "data.build_demo", "--db", str(db)], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
        build_demo.add_labels(db, emit=lambda _: None)
        for file in sorted(LABELS.glob("*.jsonl")):
            run = file.stem
            report = labelling.report(db, run, {})
            print(f"\n## {run}: {len({l[0] for l in queries.trust.rule_labels(db, run).itertuples(index=False)})} "
                  f"labelled items, offline judge, Table 2's default thresholds")
            print("| rule | labelled | people say right | fired | agreement | kappa [95% CI] | precision |")
            print("|---|---|---|---|---|---|---|")
            for t in report.rows:
                if t.target not in diagnosis.RULES:
                    continue
                c = t.confusion
                ci = "" if t.kappa_lo is None else f" [{t.kappa_lo:.2f}, {t.kappa_hi:.2f}]"
                print(f"| {t.target} | {t.n_labelled} | {c.tp + c.fn} | {c.tp + c.fp} | {_fmt(t.agreement)} | "
                      f"{_fmt(t.kappa)}{ci} | {_fmt(t.precision)} |")
            print("\nThreshold suggestions:")
            for s in report.suggestions:
                shown = f"{s.best:g} (kappa {_fmt(s.kappa_best)} vs {_fmt(s.kappa_now)} at {s.current:g})" \
                    if s.best is not None else s.why
                print(f"- {s.metric}: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
