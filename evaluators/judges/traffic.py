"""How an LLM judge's calls are paced: the adaptive concurrency limit (AIMD), backoff and Retry-After,
the request cache's key, and the call statistics the progress bar shows. No litellm here: llm.py sends
the calls, through a litellm Router that spreads them over a model's deployments."""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from datetime import timezone
from typing import Any

from evaluators.core.records import JudgeCall


@dataclass
class CallStats:
    """Running totals shown by the progress bar and stored on the run."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    retries: int = 0
    failures: int = 0
    # Answers read from a bare reply, without the format asked for (a bare rating digit: prompts.Bare).
    bare_replies: int = 0
    # Calls answered per endpoint (api base), for a judge given one or more.
    endpoints: dict[str, int] = field(default_factory=dict)
    # time.monotonic() before which the judge sends nothing (a 429, or a Retry-After): 0 when not waiting.
    waiting_until: float = 0.0

    def answered(self, call: JudgeCall, retries: int) -> None:
        """Count a call the model answered, after `retries` retries."""
        self.calls += 1
        self.retries += retries
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.cost += call.cost or 0.0
        if call.endpoint is not None:
            self.endpoints[call.endpoint] = self.endpoints.get(call.endpoint, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        """The totals stored on the run (the live rate-limit wait is not a total)."""
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items() if k != "waiting_until"}


def call_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """The cache key: sha256 over model, messages and sampling params."""
    blob = json.dumps([model, messages, params], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AdaptiveLimit:
    """Concurrency that halves on a 429 and climbs back by one per window of successes (AIMD)."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.in_flight = 0
        self._last_cut = float("-inf")
        self._cond = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_flight < max(1, int(self.limit)))
            self.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._cond:
            self.in_flight -= 1
            # Wake only as many waiters as there are free slots: notify_all costs O(waiters) per exit.
            self._cond.notify(max(1, int(self.limit) - self.in_flight))

    def throttled(self) -> None:
        # One halving per burst: the 429s of requests already in flight report the same overload.
        now = time.monotonic()
        if now - self._last_cut >= 1.0:
            self.limit = max(1.0, self.limit / 2)
            self._last_cut = now

    def succeeded(self) -> None:
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter, capped at 10 s."""
    return min(10.0, 0.25 * 2 ** min(attempt, 6)) * (0.5 + random.random())


def retry_after_s(exc: BaseException) -> float:
    """Seconds the server asked to wait (Retry-After in seconds or as an HTTP date, or retry-after-ms); 0 if none."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return 0.0
    waits = [0.0]
    try:
        waits.append(float(headers.get("retry-after-ms") or 0) / 1000)
    except ValueError:
        pass
    value = (headers.get("retry-after") or "").strip()
    try:
        waits.append(float(value or 0))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            waits.append((when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp() - time.time())
    return max(w for w in waits if math.isfinite(w))
