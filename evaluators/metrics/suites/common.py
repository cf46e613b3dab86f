"""What the suites' match steps share: a list-valued step turned into components, and "N: word" verdicts.

The verdict words, the replies' parsers and the offline judge's answers to the suites' prompts are the
judges' side, in evaluators/judges/peers/.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from evaluators.core.records import Answer, Component, Status, Verdict
from evaluators.core.steering import without_steering
from evaluators.metrics.thelma import BATCH, ItemWork, left_out, read_elements, split_elements

# ---------------------------------------------------------------- shared judge steps


def unsteered(variables: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A whole-text rating's variables with the sentences of their texts addressed to the judge left out
    (core/steering.py), and what a verdict says of them ("" when none was)."""
    dropped: list[str] = []

    def clean(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        kept, gone = without_steering(text)
        dropped.extend(gone)
        return kept

    cleaned = {k: [clean(t) for t in v] if isinstance(v, list) else clean(v) for k, v in variables.items()}
    if not dropped:
        return variables, ""
    first = dropped[0] if len(dropped[0]) <= 80 else dropped[0][:79] + "…"
    return cleaned, f"; left out {len(dropped)} sentence{'s' * (len(dropped) > 1)} addressed to the judge: {first!r}"


async def decompose(work: ItemWork, name: str, kind: str, prompt: str, **variables: Any) -> list[Component] | Answer:
    """A list-valued judge step turned into components, once per item; the failed answer otherwise."""

    async def make() -> list[Component] | Answer:
        return work.decomposed(await work.judge.ask(prompt, **variables), kind)

    return await work.once(f"suites:{name}", make)


def _line_verdict(
    work: ItemWork, metric: str, kind: str, idx: int, target: str, answer: Answer, values: dict[str, float]
) -> Verdict:
    """The verdict for one element's answer, a (word, reason) pair when OK."""
    if answer.status is not Status.OK:
        return work.verdict(metric, kind, idx, target, answer)
    word, reason = answer.value
    # The offline judge's evidence score, when it answered; the verdict word and reason otherwise.
    return work.verdict(
        metric,
        kind,
        idx,
        target,
        answer,
        value=values[word],
        prob=answer.prob,
        detail=f"{word}: {reason}" if reason else word,
    )


async def judge_lines(
    work: ItemWork,
    metric: str,
    kind: str,
    components: Sequence[Component],
    target: str,
    prompt: str,
    list_var: str,
    values: dict[str, float],
    **fixed: Any,
) -> list[Verdict]:
    """One verdict per component from "N: word" answers, BATCH components a call.

    A component the reply leaves out is asked once more by itself (the same prompt, one element).
    """
    texts = [c.text for c in components]

    async def ask(chunk: Sequence[str]) -> Answer:
        return await work.judge.ask(prompt, **fixed, **{list_var: list(chunk)})

    async def alone(text: str) -> Answer:
        answer = await ask([text])
        return split_elements(answer, [1])[1] or left_out(answer, 1)

    async def read(chunk: Sequence[str]) -> list[Answer]:
        numbers = list(range(1, len(chunk) + 1))
        got = await read_elements(await ask(chunk), numbers, numbers, lambda n: alone(chunk[n - 1]))
        return [got[n] for n in numbers]

    chunks = [texts[k : k + BATCH] for k in range(0, len(texts), BATCH)]
    answers = [a for part in await asyncio.gather(*(read(chunk) for chunk in chunks)) for a in part]
    return [_line_verdict(work, metric, kind, c.idx, target, a, values) for c, a in zip(components, answers)]
