"""DeepEval's prompts (seed 002): the replies' parsers and the offline judge's answers."""

from __future__ import annotations

import html
import re

from evaluators.core.records import Answer, Status
from evaluators.core.text import has_content, split_claims, split_questions, split_sentences
from evaluators.judges import prompts
from evaluators.judges.evidence import Decision, covers, essential, support
from evaluators.judges.peers.common import (
    CONTRADICTS,
    NOT_CONTRADICTED,
    YES_NO,
    knowledge,
    lines,
    mean,
    rating_parser,
    supported_share,
    verdict_parser,
    yes_no,
)

GEVAL_SCALE = (1, 2, 3, 4, 5)  # single-digit scores, so a first-token distribution covers them all


# ---------------------------------------------------------------- parsers

parse_yes_no = verdict_parser(YES_NO)
parse_not_contradicted = verdict_parser(NOT_CONTRADICTED)
parse_contradicts = verdict_parser(CONTRADICTS)
parse_geval_score = rating_parser(GEVAL_SCALE)
_LABELLED_LINE = re.compile(r"^\s*(yes|no)\s*:\s*(.+?)\s*$", re.I)  # "yes: statement", as the prompt asks


DE_RELEVANCY_CAP = 15  # statements of one source, as de_contextual_relevancy's prompt states


def parse_labelled(reply: str) -> list[tuple[str, str]]:
    """Lines "yes: statement" / "no: statement" inside a closed <output> block, in order, at most
    DE_RELEVANCY_CAP of them: a cut-off or runaway list is re-asked, not read."""
    if not re.search(r"</output>", reply, re.I):
        raise prompts.ParseError("the <output> block is not closed: the list was cut off")
    found = [
        (m.group(1).lower(), html.unescape(m.group(2)))
        for line in prompts.output_body(reply).splitlines()
        if (m := _LABELLED_LINE.match(line))
    ]
    if not found:
        raise prompts.ParseError("no 'yes|no: statement' lines")
    if len(found) > DE_RELEVANCY_CAP:
        raise prompts.ParseError(f"{len(found)} statements, more than the {DE_RELEVANCY_CAP} asked for")
    return found


# ---------------------------------------------------------------- offline answers


def _three_way(decision: Decision) -> tuple[str, float, str]:
    """DeepEval's yes/no/idk from a support decision: only a contradiction is a "no"."""
    value, score, why = decision
    word = "yes" if value else "no" if why.startswith("contradicted") else "idk"
    return word, score, f"offline: {why}"


def offline_statements(input: str) -> Answer:  # noqa: A002  (the prompt's variable name)
    """Statements: the offline claim split."""
    return Answer(split_claims(input), Status.OK, detail="offline: claim split")


def offline_answer_relevancy(query: str, claims: list[str]) -> Answer:
    """Each statement relevant to the query when evidence.essential accepts it."""
    return lines({i: yes_no(essential(c, query)) for i, c in enumerate(claims, 1)})


def offline_faithfulness(sources: list[str], claims: list[str]) -> Answer:
    """Each claim supported (yes), not backed (idk) or contradicted (no) by the sources."""
    return lines({i: _three_way(support(c, knowledge(sources))) for i, c in enumerate(claims, 1)})


def offline_contextual_recall(sources: list[str], claims: list[str]) -> Answer:
    """Each reference statement attributable to the sources when evidence.support accepts it."""
    return lines({i: yes_no(support(c, knowledge(sources))) for i, c in enumerate(claims, 1)})


def offline_hallucination(response: str, sources: list[str]) -> Answer:
    """Per source, "no" when some response claim contradicts it."""
    # Offline, a contradiction is what evidence.support calls one: a negated version of a source statement.
    decisions: dict[int, tuple[str, float, str]] = {}
    for j, source in enumerate(sources, 1):
        decisions[j] = ("yes", 0.0, "offline: no response claim contradicts this context")
        for claim in split_claims(response):
            value, score, why = support(claim, source)
            if why.startswith("contradicted"):
                decisions[j] = ("no", score, f"offline: {claim!r} {why}")
                break
    return lines(decisions)


def offline_contextual_precision(query: str, reference: str, sources: list[str]) -> Answer:
    """Per source, useful for arriving at the reference when the reference states one of its sentences."""
    decisions = {}
    for j, source in enumerate(sources, 1):
        backed = [s for s in split_sentences(source) if support(s, reference)[0]]
        decisions[j] = (
            ("yes", 1.0, f"offline: the reference states {backed[0]!r}")
            if backed
            else ("no", 0.0, "offline: the reference states none of this source's sentences")
        )
    return lines(decisions)


def offline_contextual_relevancy(query: str, source: str) -> Answer:
    """The source's claims, relevant when evidence.essential accepts them."""
    return Answer(
        [("yes" if essential(c, query)[0] else "no", c) for c in split_claims(source)],
        Status.OK,
        detail="offline: the source's claims, relevant when evidence.essential accepts them",
    )


def offline_geval_steps(criteria: str) -> Answer:
    """The criteria's sentences, as steps."""
    return Answer(split_sentences(criteria), Status.OK, detail="offline: the criteria's sentences, as steps")


def offline_geval_score(criteria: str, steps: str, query: str, sources: list[str], response: str) -> Answer:
    """The default criteria ask for an answer that addresses the input and stays grounded: average those two shares."""
    grounded = supported_share(split_claims(response), knowledge(sources))
    answered = mean([float(covers(response, q, response=True)[0]) for q in split_questions(query) if has_content(q)])
    parts = [x for x in (grounded, answered) if x is not None]
    if not parts:
        return Answer(None, Status.EMPTY, detail="offline: no claims to ground and no sub-questions to answer")
    signal = sum(parts) / len(parts)
    score = GEVAL_SCALE[0] + round(signal * (GEVAL_SCALE[-1] - GEVAL_SCALE[0]))
    shares = "; ".join(
        f"{x:.0%} of {what}" if x is not None else f"no {what.split()[0]}"
        for x, what in ((grounded, "claims grounded"), (answered, "sub-questions answered"))
    )
    return Answer(score, Status.OK, prob=signal, detail=f"offline: {shares}")
