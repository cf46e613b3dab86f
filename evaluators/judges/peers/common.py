"""What the peers' prompts share: verdict words, reply parser builders and offline-answer helpers.

The offline answers are simple, deterministic stand-ins so every suite runs with no key. They reuse
the offline judge's calibrated decisions: statements are its claim split, support is
evidence.support, relevance is evidence.essential, coverage is evidence.covers. Every answer says
in its detail how it was reached.
"""

from __future__ import annotations

import html
import re
from typing import Callable, Iterable, Sequence

from evaluators.core.records import Answer, Elements, Status
from evaluators.core.text import has_content
from evaluators.judges import prompts
from evaluators.judges.evidence import Decision, support

# Verdict words to values, per metric (DeepEval counts "idk" as relevant and as faithful).
YES_NO = {"yes": 1.0, "no": 0.0}  # supported, attributable, useful, relevant
NOT_CONTRADICTED = {"yes": 1.0, "idk": 1.0, "no": 0.0}
CONTRADICTS = {"yes": 0.0, "no": 1.0}  # hallucination: "no" = the output contradicts this context


# ---------------------------------------------------------------- parsers

# "N: word - reason" as the prompts ask: the number, a colon, the word, then a dash and the reason (or nothing).
_VERDICT_LINE = re.compile(r"^\s*(\d+)\s*:\s*(yes|no|idk)\b\.?(?:\s*[-\u2013\u2014]\s*(.*?))?\s*$", re.I)


def verdict_parser(words: Iterable[str]) -> Callable[[str], Elements]:
    """A parser for lines "N: word - reason" inside <output>: {N: (word, reason)}."""
    allowed = frozenset(words)

    def parse(reply: str) -> Elements:
        found: dict[int, list[tuple[str, str]]] = {}
        for line in prompts.output_body(reply).splitlines():
            match = _VERDICT_LINE.match(line)
            if match and match.group(2).lower() in allowed:
                found.setdefault(int(match.group(1)), []).append(
                    (match.group(2).lower(), html.unescape(match.group(3) or ""))
                )
        if not found:
            raise prompts.ParseError(f"no 'N: {'|'.join(sorted(allowed))}' lines")
        # A statement judged twice is unparsed, whatever the two verdicts: never the last one wins.
        return prompts.elements({k: [w for w, _ in v] if len(v) > 1 else v for k, v in found.items()})

    return parse


def rating_parser(scale: Sequence[int]) -> Callable[[str], int | prompts.Bare]:
    """A parser for one integer of `scale` inside <output>, or for a reply that is nothing but one of
    them (prompts.Bare): a model that leaves out the tags has still said which rating it means."""

    def parse(reply: str) -> int | prompts.Bare:
        bare = reply.strip()
        if "<output" not in reply.lower() and re.fullmatch(r"\d+", bare) and int(bare) in scale:
            return prompts.Bare(int(bare))
        body = prompts.output_body(reply)
        if not re.fullmatch(r"\d+", body) or int(body) not in scale:
            raise prompts.ParseError(f"expected one of {list(scale)}, got {body[:40]!r}")
        return int(body)

    return parse


# ---------------------------------------------------------------- offline-answer helpers


def knowledge(sources: Sequence[str]) -> str:
    """The source set as one text, for support checks against all of it."""
    return "\n\n".join(sources)


def lines(decisions: dict[int, tuple[str, float, str]]) -> Answer:
    """A "N: word - reason" answer, each element's evidence score kept for its verdict."""
    return Answer(
        {k: (w, why) for k, (w, _, why) in decisions.items()},
        Status.OK,
        evidence={k: (score, why) for k, (_, score, why) in decisions.items()},
    )


def yes_no(decision: Decision) -> tuple[str, float, str]:
    """A decision as a yes/no line."""
    value, score, why = decision
    return ("yes" if value else "no"), score, f"offline: {why}"


def supported_share(claims: Sequence[str], sources: str) -> float | None:
    """Share of the claims that evidence.support accepts against `sources`; None for no claims."""
    return mean([float(support(c, sources)[0]) for c in claims if has_content(c)])


def mean(values: Sequence[float]) -> float | None:
    """The mean; None for no values (a mean of nothing is not 0)."""
    return sum(values) / len(values) if values else None
