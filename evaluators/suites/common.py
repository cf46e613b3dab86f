"""What the suites share: verdict words, reply parsers, judge steps and offline-answer helpers.

The offline answers are simple, deterministic stand-ins so every suite runs with no key. They reuse
the offline judge's calibrated decisions: statements are its claim split, support is
evidence.support, relevance is evidence.essential, coverage is evidence.covers. Every answer says
in its detail how it was reached.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any, Callable, Iterable, Sequence

from evaluators import prompts
from evaluators.evidence import Decision, support
from evaluators.metrics import BATCH, ItemWork
from evaluators.records import Answer, Component, Status, Verdict

# Verdict words to values, per metric (DeepEval counts "idk" as relevant and as faithful).
YES_NO = {"yes": 1.0, "no": 0.0}  # supported, attributable, useful, relevant
NOT_CONTRADICTED = {"yes": 1.0, "idk": 1.0, "no": 0.0}
CONTRADICTS = {"yes": 0.0, "no": 1.0}  # hallucination: "no" = the output contradicts this context


# ---------------------------------------------------------------- parsers

_VERDICT_LINE = re.compile(r"^\s*(?:[a-z]+\s+)?(\d+)\s*[:.)\-]\s*(yes|no|idk)\b[\s:;,.|\-\u2013\u2014]*(.*?)\s*$", re.I)


def verdict_parser(words: Iterable[str]) -> Callable[[str], dict[int, tuple[str, str]]]:
    """A parser for lines "N: word - reason" inside <output>: {N: (word, reason)}."""
    allowed = frozenset(words)

    def parse(reply: str) -> dict[int, tuple[str, str]]:
        found: dict[int, tuple[str, str]] = {}
        for line in prompts.output_body(reply).splitlines():
            match = _VERDICT_LINE.match(line)
            if match and match.group(2).lower() in allowed:
                found[int(match.group(1))] = (match.group(2).lower(), match.group(3))
        if not found:
            raise prompts.ParseError(f"no 'N: {'|'.join(sorted(allowed))}' lines")
        return found
    return parse


def rating_parser(scale: Sequence[int]) -> Callable[[str], int]:
    """A parser for one integer of `scale` inside <output>."""
    def parse(reply: str) -> int:
        body = prompts.output_body(reply)
        if not re.fullmatch(r"\d+", body) or int(body) not in scale:
            raise prompts.ParseError(f"expected one of {list(scale)}, got {body[:40]!r}")
        return int(body)
    return parse


# ---------------------------------------------------------------- shared judge steps

async def decompose(work: ItemWork, name: str, kind: str, prompt: str, **variables: Any) -> list[Component] | Answer:
    """A list-valued judge step turned into components, once per item; the failed answer otherwise."""
    async def make() -> list[Component] | Answer:
        answer = await work.judge.ask(prompt, **variables)
        if answer.status is not Status.OK:
            return answer
        parts = [Component(work.item.id, kind, i, t, None, answer.call_key) for i, t in enumerate(answer.value)]
        work.components.extend(parts)
        return parts
    return await work.once(f"suites:{name}", make)


async def _ask_in_chunks(work: ItemWork, prompt: str, list_var: str, elements: Sequence[str],
                         **fixed: Any) -> list[tuple[Answer, int]]:
    """Ask about `elements` BATCH at a time: (answer, element number in that answer) per element."""
    chunks = [range(k, min(k + BATCH, len(elements))) for k in range(0, len(elements), BATCH)]
    answers = await asyncio.gather(*(work.judge.ask(prompt, **fixed, **{list_var: [elements[i] for i in chunk]})
                                     for chunk in chunks))
    return [(answer, n) for chunk, answer in zip(chunks, answers) for n in range(1, len(chunk) + 1)]


def _line_verdict(work: ItemWork, metric: str, kind: str, idx: int, target: str, answer: Answer, key: int,
                  values: dict[str, float]) -> Verdict:
    """The verdict for element `key` of a "N: word - reason" answer; a skipped element is unparsed."""
    if answer.status is Status.OK and key not in answer.value:
        answer = Answer(None, Status.UNPARSED, answer.call_key, answer.raw, detail=f"element {key} missing from reply")
    if answer.status is not Status.OK:
        return work.verdict(metric, kind, idx, target, answer)
    word, reason = answer.value[key]
    prob = answer.evidence.get(key, (None, ""))[0]  # the offline judge's cosine, when it answered
    return work.verdict(metric, kind, idx, target, answer, value=values[word], prob=prob,
                        detail=f"{word}: {reason}" if reason else word)


async def judge_lines(work: ItemWork, metric: str, kind: str, components: Sequence[Component], target: str,
                      prompt: str, list_var: str, values: dict[str, float], **fixed: Any) -> list[Verdict]:
    """One verdict per component from batched "N: word" answers."""
    pairs = await _ask_in_chunks(work, prompt, list_var, [c.text for c in components], **fixed)
    return [_line_verdict(work, metric, kind, c.idx, target, answer, key, values)
            for c, (answer, key) in zip(components, pairs)]


# ---------------------------------------------------------------- offline-answer helpers

def knowledge(sources: Sequence[str]) -> str:
    """The source set as one text, for support checks against all of it."""
    return "\n\n".join(sources)


def lines(decisions: dict[int, tuple[str, float, str]]) -> Answer:
    """A "N: word - reason" answer, each element's evidence score kept for its verdict."""
    return Answer({k: (w, why) for k, (w, _, why) in decisions.items()}, Status.OK,
                  evidence={k: (score, why) for k, (_, score, why) in decisions.items()})


def yes_no(decision: Decision) -> tuple[str, float, str]:
    """A decision as a yes/no line."""
    value, score, why = decision
    return ("yes" if value else "no"), score, f"offline: {why}"


def supported_share(claims: Sequence[str], sources: str) -> float:
    """Share of the claims that evidence.support accepts against `sources`."""
    return mean([float(support(c, sources)[0]) for c in claims])


def mean(values: Sequence[float]) -> float:
    """The mean, 0 for no values."""
    return sum(values) / len(values) if values else 0.0
