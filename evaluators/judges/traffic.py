"""How an LLM judge's calls are paced and spread: the adaptive concurrency limit (AIMD), the replicas
of one model, backoff and Retry-After, the request cache's key, and the call statistics the progress
bar shows. No litellm here: llm.py sends the calls."""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import itertools
import json
import math
import random
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timezone
from typing import Any, Iterator, Sequence

# Seconds a replica that failed is passed over while another one is live (then it is tried again).
REPLICA_REST_S = 10.0


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


class Replicas:
    """The endpoints of one judge, and which of them are live.

    `pick` spreads the calls (fewest in flight first) and passes over a replica that failed in the
    last REPLICA_REST_S seconds while another is live; when all rest, the one whose rest ends first
    is tried. With one endpoint (or none: the provider's own) it always picks that one.
    """

    def __init__(self, endpoints: Sequence[str | None]) -> None:
        if not endpoints:
            raise ValueError("a judge needs at least one endpoint")
        self.endpoints = list(dict.fromkeys(endpoints))  # the same URL twice is one replica
        self.several = len(self.endpoints) > 1
        self.in_flight: Counter[str | None] = Counter()
        self.resting_until: dict[str | None, float] = {}
        self._turn = itertools.count()  # breaks ties in turn, so idle replicas share the first calls

    def pick(self, tried: set[str | None]) -> str | None:
        """The replica for the next attempt, among those not in `tried` (all, when every one is)."""
        if not self.several:
            return self.endpoints[0]
        now, turn = time.monotonic(), next(self._turn)
        left = [e for e in self.endpoints if e not in tried] or self.endpoints
        n = len(self.endpoints)
        return min(
            left,
            key=lambda e: (
                max(now, self.resting_until.get(e, 0.0)),
                self.in_flight[e],
                (self.endpoints.index(e) - turn) % n,
            ),
        )

    @contextmanager
    def busy(self, endpoint: str | None) -> Iterator[None]:
        """Count one call in flight on `endpoint` for the context's duration."""
        self.in_flight[endpoint] += 1
        try:
            yield
        finally:
            self.in_flight[endpoint] -= 1

    def failed(self, endpoint: str | None, retry_after: float = 0.0) -> None:
        """Rest `endpoint`: REPLICA_REST_S, or the Retry-After it sent if longer."""
        self.resting_until[endpoint] = time.monotonic() + max(REPLICA_REST_S, retry_after)

    def all_tried(self, tried: set[str | None]) -> bool:
        """Whether this round of a call has failed on every replica."""
        return all(e in tried for e in self.endpoints)


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
