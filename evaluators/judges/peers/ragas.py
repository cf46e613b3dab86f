"""RAGAS's prompts (seed 004): the replies' parsers and the offline judge's answers."""

from __future__ import annotations

import re

from evaluators.core.records import Answer, Status
from evaluators.core.text import has_content, split_claims, split_sentences
from evaluators.judges import prompts
from evaluators.judges.evidence import essential, support
from evaluators.judges.peers.common import YES_NO, knowledge, lines, verdict_parser, yes_no

N_QUESTIONS = 3  # answer relevance: questions generated per answer (the paper's n)
EXTRACTED_CAP = 40  # context relevance: sentences extracted at most, as the prompt states


# ---------------------------------------------------------------- parsers

parse_faithfulness = verdict_parser(YES_NO)


def parse_extracted(reply: str) -> list[str]:
    """Extracted sentences; "Insufficient Information" is the empty extraction."""
    found = prompts.ListParser(EXTRACTED_CAP)(reply)
    if len(found) == 1 and " ".join(re.findall(r"[a-z]+", found[0].lower())) == "insufficient information":
        return []
    return found


# ---------------------------------------------------------------- offline answers


def offline_statements(query: str, response: str) -> Answer:
    """Statements of the answer: the offline claim split."""
    return Answer(split_claims(response), Status.OK, detail="offline: claim split")


def offline_faithfulness(sources: list[str], claims: list[str]) -> Answer:
    """Each statement supported by the context (evidence.support) or not."""
    return lines({i: yes_no(support(c, knowledge(sources))) for i, c in enumerate(claims, 1)})


def offline_questions(response: str) -> Answer:
    """The answer's first statements, as questions."""
    questions = [re.sub(r"[.!?]+$", "", c) + "?" for c in split_claims(response)[:N_QUESTIONS]]
    return Answer(questions, Status.OK, detail="offline: the answer's first statements, as questions")


def offline_context_sentences(query: str, sources: list[str]) -> Answer:
    """The context sentences evidence.essential accepts."""
    keep = [s for source in sources for s in split_sentences(source) if has_content(s) and essential(s, query)[0]]
    return Answer(keep, Status.OK, detail="offline: the context sentences evidence.essential accepts")
