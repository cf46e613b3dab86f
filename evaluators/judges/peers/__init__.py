"""The peers' prompts as the judges see them: per prompt, the reply's parser and the offline judge's answer.

RAGAS, Nvidia and DeepEval (their metrics are in evaluators/metrics/suites/) and GRAMMAR (evaluators/grammar/).
evaluators/judges/registry.py lists each function under its prompt's name.
"""
