"""The embedded offline judge: no key, no network, CPU only.

It answers the same prompt names as the LLM judge, each through the registry's offline answer for
that prompt: THELMA's from MiniLM sentence embeddings plus deterministic checks (evidence.py), the
other suites' and GRAMMAR's from their own modules. Every answer explains its verdict in its detail
text, so the drill-down shows why.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from evaluators import registry
from evaluators.embeddings import embed
from evaluators.evidence import needed_texts
from evaluators.records import Answer


class OfflineJudge:
    """Answers every prompt with an offline answer in the registry, explaining each verdict."""

    name = "offline"

    async def ask(self, prompt: str, **variables: Any) -> Answer:
        """The registered offline answer to `prompt`; variables are the ones the prompt file takes."""
        answer = registry.OFFLINE_ANSWERS.get(prompt)
        if answer is None:
            raise KeyError(f"the offline judge has no answer for prompt {prompt!r}")
        # In a worker thread: the encoder releases the GIL, so prompts of concurrent items overlap.
        return await asyncio.to_thread(_run, answer, prompt, variables)


def _run(answer: Callable[..., Answer], prompt: str, variables: dict[str, Any]) -> Answer:
    # One encoder call for every text the prompts about these inputs will need: each call
    # costs about 15 ms of fixed overhead, a sentence about 2 ms more.
    embed(needed_texts(prompt, variables))
    return answer(**variables)
