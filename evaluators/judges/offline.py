"""The embedded offline judge: no key, no network, CPU only.

It answers the same prompt names as the LLM judge, each through the registry's offline answer for
that prompt: THELMA's from MiniLM sentence embeddings plus deterministic checks (evidence.py), the
other suites' and GRAMMAR's from their own modules. Every answer explains its verdict in its detail
text, so the drill-down shows why.

Every decision it bases on an evidence score (support, essentiality, coverage) carries a calibrated
p = P(match is 1) as its Confidence (evaluators/calibration.py); the raw evidence score stays in
Answer.prob / Answer.evidence, where verdicts keep it as their evidence.

Its rules and MiniLM read English only. A text they cannot read (another script, or clearly
another language) is answered `not_applicable` with the reason, never judged: a correct Arabic
answer would otherwise get 0. In a batched prompt only the unreadable elements are.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Callable

from evaluators.core.records import Answer, Confidence, Elements, Status
from evaluators.core.text import unreadable
from evaluators.judges import calibration, registry
from evaluators.judges.embeddings import embed
from evaluators.judges.evidence import needed_texts

ENGLISH_ONLY = "the offline judge reads English only"


class OfflineJudge:
    """Answers every prompt with an offline answer in the registry, explaining each verdict."""

    name = "offline"

    async def ask(self, prompt: str, **variables: Any) -> Answer:
        """The registered offline answer to `prompt`; variables are the ones the prompt file takes."""
        answer = registry.OFFLINE_ANSWERS.get(prompt)
        if answer is None:
            raise KeyError(f"the offline judge has no answer for prompt {prompt!r}")
        # In a worker thread: the encoder releases the GIL, so prompts of concurrent items overlap.
        result = await asyncio.to_thread(_run, answer, prompt, variables)
        return _calibrated(prompt, result, self.name, calibration.match_type(prompt, variables))


def _calibrated(prompt: str, result: Answer, tier: str, match_type: str | None) -> Answer:
    """The answer with a calibrated p for each decision it carries, from its evidence score.

    A prompt the calibration has no match type for, a failed answer, or an element without an
    evidence score keeps only its label.
    """
    if match_type is None or result.status is not Status.OK:
        return result
    if registry.BATCH_ELEMENTS.get(prompt) is None:
        value = _decided(result.value)
        if value is None or result.prob is None:
            return result
        return replace(result, confidence=calibration.confidence(match_type, value, result.prob, tier))
    confidences: dict[Any, Confidence] = {}
    for key, element in result.value.items():
        value, score = _decided(element), result.evidence.get(key, (None, ""))[0]
        if value is not None and score is not None:
            confidences[key] = calibration.confidence(match_type, value, score, tier)
    return replace(result, confidences=confidences)


def _decided(value: Any) -> int | None:
    """The judge's 0/1 decision in an answer value: 0/1 itself, or a peer prompt's (yes|no, reason) line."""
    word = value[0] if isinstance(value, tuple) else value
    return {"yes": 1, "no": 0, 1: 1, 0: 0}.get(word) if isinstance(word, (str, int)) else None


def _run(answer: Callable[..., Answer], prompt: str, variables: dict[str, Any]) -> Answer:
    keyed = registry.BATCH_ELEMENTS.get(prompt)
    per_element = {keyed, "sources"} if prompt == "source_answers_batch" else {keyed}
    whole = {
        name: value for name, value in variables.items() if name in registry.EVALUATED_TEXTS and name not in per_element
    }
    why = _unreadable_text(whole)
    if why:
        return Answer(None, Status.NOT_APPLICABLE, detail=f"{ENGLISH_ONLY}: {why}")
    # One encoder call for every text the prompts about these inputs will need: each call
    # costs about 15 ms of fixed overhead, a sentence about 2 ms more.
    embed(needed_texts(prompt, variables))
    result = answer(**variables)
    if keyed is None or result.status is not Status.OK:
        return result
    failed = {
        key: (Status.NOT_APPLICABLE, f"{ENGLISH_ONLY}: {why}")
        for key in result.value
        if (why := _unreadable_text(_element_texts(keyed, variables, key)))
    }
    if not failed:
        return result
    return replace(result, value=Elements({k: v for k, v in result.value.items() if k not in failed}, failed))


def _element_texts(keyed: str, variables: dict[str, Any], key: Any) -> dict[str, str]:
    """The texts one element of a batched answer was decided on, by name ("claim 2", "source 1")."""
    if isinstance(key, tuple):  # source_answers_batch: (question number, source number or "all")
        question, target = key
        sources = variables["sources"]
        chosen = enumerate(sources, 1) if target == "all" else [(target, sources[target - 1])]
        return {
            f"question {question}": variables["questions"][question - 1],
            **{f"source {j}": text for j, text in chosen},
        }
    return {f"{keyed.removesuffix('s')} {key}": variables[keyed][key - 1]}


def _unreadable_text(texts: dict[str, Any]) -> str | None:
    """ "the response is mostly Arabic script, not English" for the first text it cannot read, else None."""
    for name, value in texts.items():
        values = [value] if isinstance(value, str) else list(value)
        for n, text in enumerate(values, 1):
            why = unreadable(text)
            if why:
                label = name if isinstance(value, str) else f"{name.removesuffix('s')} {n}"
                return f"the {'text' if label == 'input' else label} is {why}"
    return None
