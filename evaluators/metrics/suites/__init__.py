"""The other frameworks' metric suites on THELMA's engine: RAGAS (seed 004), Nvidia (seed 001) and
DeepEval-style (seed 002), one module each, with their shared steps in `common`.

Same judge layer, cache, statuses and stored intermediates as THELMA: every statement, generated
question, extracted sentence, rating and evaluation step is a Component or a Verdict, and every
aggregate is a pure function of verdicts. A failed judge step is a visible status, never a 0.

Each module exports its metrics as plain names, which evaluators/metrics/registry.py lists by id; the
replies' parsers and the offline judge's answers to their prompts are in evaluators/judges/peers/, listed
in evaluators/judges/registry.py. The suites keep their own call structure
(one verification call per list, as the originals do): `per_component` changes THELMA's calls only.
"""
