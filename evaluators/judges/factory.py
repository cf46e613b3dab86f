"""The judge factory: a judge's configuration (JudgeConfig) made into the judge a run asks.

A spec is `offline`, `local`, a litellm model string, or a chain of them weakest first
("offline>openai/gpt-4o-mini", see cascade.py). The judges read what they know of each prompt from
evaluators/judges/registry.py; the factory only builds and opens them.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Callable, Sequence

from evaluators.core.records import Judge, JudgeCall
from evaluators.judges import cascade, routes
from evaluators.judges.clients import ClientPool
from evaluators.judges.llm import RATE_LIMIT_PATIENCE, LLMJudge

OFFLINE = "offline"
LOCAL = "local"


@dataclass(frozen=True)
class JudgeConfig:
    """A judge's configuration, as the CLI, the Evaluate page and evaluate() take it.

    spec: offline, local, a litellm model string or a chain of them. api_base: one endpoint, or several
    replicas of the judge model the calls are spread over (a failing one is routed around). key_env:
    the environment variable whose value is a litellm judge's key, and its only credential (without it
    an api_base gets no key at all). concurrency: calls in flight (adapts down on 429). timeout: seconds
    per call. rate_limit_patience: seconds a rate-limited judge may go without an answer before the run
    stops. client_processes above 1: a litellm judge's calls go out from that many worker processes.
    decompose_with: the chain's tier that decomposes (default: the last). judges: a judges file's
    routes (routes.py); its litellm tiers then name its model_names, and api_base and key_env are unused.
    """

    spec: str = OFFLINE
    api_base: str | Sequence[str] | None = None
    key_env: str | None = None
    concurrency: int = 8
    timeout: float = 60.0
    rate_limit_patience: float = RATE_LIMIT_PATIENCE
    client_processes: int = 1
    decompose_with: str | None = None
    judges: routes.Routes | None = None

    @property
    def items_in_flight(self) -> int:
        """Items a process evaluates at once with this judge: twice its calls in flight keeps it busy
        between an item's rounds of calls."""
        return max(2, self.concurrency * 2)


def check_chain(
    judge: str, decompose_with: str | None = None, judges: routes.Routes | None = None
) -> tuple[list[str], str]:
    """The tiers of a judge chain and the tier that decomposes; ValueError (one line) when either is bad,
    or when a litellm tier is no model_name of the judges file given."""
    tiers = cascade.parse_chain(judge)
    for tier in tiers:
        if judges is not None and tier not in (OFFLINE, LOCAL):
            judges.serving(tier)
    return tiers, cascade.decomposer(tiers, decompose_with)


def judge_name(judge: str) -> str:
    """The model string a judge's calls are recorded (and cached) under."""
    if judge == LOCAL:
        from evaluators.judges import local_llm

        return f"openai/{local_llm.MODEL}"  # the litellm model string LocalServer.model gives
    return judge


async def open_judge(
    stack: AsyncExitStack,
    tier: str,
    config: JudgeConfig,
    cache: dict[str, JudgeCall],
    on_call: Callable[[JudgeCall], None],
) -> tuple[Judge, bool]:
    """The judge for one tier, and whether it must judge one component per call.

    Raises JudgeUnavailable when a litellm judge lacks its key or endpoint, before any call.
    """
    if tier == OFFLINE:
        from evaluators.judges.offline import OfflineJudge

        return OfflineJudge(), False
    if tier == LOCAL:
        from evaluators.judges import local_llm  # optional extra: the local LLM server

        server = stack.enter_context(local_llm.LocalServer())
        # Logprob scoring reads one 0/1 token, so the local judge always asks one component per call.
        return local_llm.judge(server, config.timeout, cache, on_call), True
    llm = LLMJudge(
        tier,
        api_base=config.api_base,
        key_env=config.key_env,
        concurrency=config.concurrency,
        timeout=config.timeout,
        rate_limit_patience=config.rate_limit_patience,
        cache=cache,
        on_call=on_call,
        judges=config.judges,
    )
    llm.check_access()
    if config.client_processes > 1:
        llm.pool = stack.enter_context(ClientPool(config.client_processes))
    return llm, False


async def open_chain(
    stack: AsyncExitStack,
    config: JudgeConfig,
    caches: dict[str, dict[str, JudgeCall]],
    on_call: Callable[[JudgeCall], None],
) -> tuple[Judge, bool]:
    """The judge for a configuration's chain of tiers (a single judge for a chain of one), and whether
    it must judge one component per call: when any tier must (the local judge reads one 0/1 token), all do."""
    tiers, decomposer = check_chain(config.spec, config.decompose_with, config.judges)
    opened = [await open_judge(stack, tier, config, caches.get(tier, {}), on_call) for tier in tiers]
    if len(opened) == 1:
        return opened[0]
    judge = cascade.CascadeJudge([(tier, j) for tier, (j, _) in zip(tiers, opened)], decomposer)
    return judge, any(forced for _, forced in opened)
