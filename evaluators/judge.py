"""LLM judges through litellm: the only module that imports litellm.

A judge answers `ask(prompt_name, **variables)` with an Answer. The LLM judge renders the prompt
file, checks the request cache, calls litellm under an adaptive concurrency limit with its own
bounded retries, and parses the reply with the prompt's parser from the registry. An unparseable
reply is re-asked once, then reported as `unparsed` with the raw reply kept: never a silent 0 or 1.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import evaluators  # noqa: F401  (sets the offline environment before litellm is imported)
from evaluators import prompts, registry
from evaluators.records import Answer, JudgeCall, Status


class JudgeFatal(RuntimeError):
    """The endpoint refused the request itself (400 or 401): retrying cannot help, stop the run."""


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

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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


_REASK = ("Your reply could not be read ({error}). Answer again in exactly the format asked for, "
          "inside <output> </output> tags, with no explanation.")


class LLMJudge:
    """Any model litellm can reach: `openai/NAME` with api_base, `anthropic/...`, `ollama/...`."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        concurrency: int = 8,
        max_attempts: int = 4,
        rate_limit_patience: float = 600.0,
        cache: dict[str, JudgeCall] | None = None,
        on_call: Callable[[JudgeCall], None] | None = None,
        logprob_binary: bool = False,
        temperature: float = 0.0,
        alive: Callable[[], None] | None = None,
    ) -> None:
        self.name = model
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.rate_limit_patience = rate_limit_patience
        self.cache = cache if cache is not None else {}
        self.on_call = on_call or (lambda call: None)
        # Binary prompts read P("1") from the first token after an "<output>" prefill.
        self.logprob_binary = logprob_binary
        # Raises when the judge's own server process is gone (the local judge): stop, don't retry.
        self.alive = alive
        self.params: dict[str, Any] = {"temperature": temperature}
        self.limit = AdaptiveLimit(concurrency)
        self.stats = CallStats()
        self._inflight: dict[str, asyncio.Future[JudgeCall]] = {}

    # ------------------------------------------------------------ public
    async def ask(self, prompt: str, **variables: Any) -> Answer:
        """Render `prompt`, ask the model (or the cache), parse; re-ask once if unparseable."""
        parser = registry.PARSERS[prompt]  # an unknown prompt fails here, before any call is paid for
        spec, messages, params = self.request(prompt, **variables)
        prefill = params.get("logprobs", False)
        call = await self._exchange(spec, messages, params)
        if call.status is not Status.OK:
            return Answer(None, call.status, call.key, call.reply, detail=call.error)
        if prefill and prompt in registry.BINARY_PROMPTS:
            return self._from_logprobs(call)
        if prefill:  # a scale prompt: the first-token distribution is the answer
            top = json.loads(call.reply or "{}").get("top_logprobs", {})
            return Answer(top, Status.OK, call.key, call.reply)
        try:
            return Answer(parser(call.reply or ""), Status.OK, call.key, call.reply)
        except prompts.ParseError as exc:
            retry = messages + [{"role": "assistant", "content": call.reply or ""},
                                {"role": "user", "content": _REASK.format(error=exc)}]
            second = await self._exchange(spec, retry, params)
            if second.status is not Status.OK:
                return Answer(None, second.status, second.key, second.reply, detail=second.error)
            try:
                return Answer(parser(second.reply or ""), Status.OK, second.key, second.reply)
            except prompts.ParseError as exc2:
                return Answer(None, Status.UNPARSED, second.key, second.reply, detail=str(exc2))

    def request(self, prompt: str, **variables: Any) -> tuple[prompts.Prompt, list[dict[str, str]], dict[str, Any]]:
        """The exact messages and params `ask` sends for this prompt (dry runs count these)."""
        spec = prompts.load(prompt)
        messages = [{"role": "user", "content": spec.render(**variables)}]
        params = dict(self.params)
        if self.logprob_binary and (prompt in registry.BINARY_PROMPTS or prompt in registry.DISTRIBUTION_PROMPTS):
            messages.append({"role": "assistant", "content": "<output>"})
            params.update(max_tokens=1, logprobs=True, top_logprobs=10)
        return spec, messages, params

    # ------------------------------------------------------------ internals
    def _from_logprobs(self, call: JudgeCall) -> Answer:
        """P("1") / (P("0") + P("1")) from the stored top logprobs of the single answer token."""
        top = json.loads(call.reply or "{}").get("top_logprobs", {})
        p0, p1 = (math.exp(top[t]) if t in top else 0.0 for t in ("0", "1"))
        if p0 + p1 == 0.0:
            return Answer(None, Status.UNPARSED, call.key, call.reply, detail="neither 0 nor 1 among top tokens")
        prob = p1 / (p0 + p1)
        return Answer(int(prob >= 0.5), Status.OK, call.key, call.reply, prob=prob)

    async def _exchange(self, spec: prompts.Prompt, messages: list[dict[str, str]],
                        params: dict[str, Any]) -> JudgeCall:
        key = call_key(self.model, messages, params)
        cached = self.cache.get(key)
        if cached is not None:
            self.stats.cache_hits += 1
            return cached
        # Identical requests in flight at once (same prompt for two items) share one call.
        if key in self._inflight:
            return await asyncio.shield(self._inflight[key])
        future: asyncio.Future[JudgeCall] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            call = await self._call(key, spec, messages, params)
            if call.reply is not None:
                self.cache[key] = call
            self.on_call(call)
            future.set_result(call)
            return call
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._inflight[key]

    async def _call(self, key: str, spec: prompts.Prompt, messages: list[dict[str, str]],
                    params: dict[str, Any]) -> JudgeCall:
        import litellm  # imported lazily: pages that never judge don't pay its 2.5 s import

        litellm.suppress_debug_info = True
        attempt, started = 0, time.monotonic()
        error, status = "", Status.ERROR
        while True:
            attempt += 1
            try:
                async with self.limit:
                    t0 = time.monotonic()  # latency of the call itself, not of the wait for a slot
                    response = await asyncio.wait_for(
                        litellm.acompletion(
                            model=self.model, messages=messages, api_base=self.api_base,
                            api_key=self.api_key, timeout=self.timeout, max_retries=0, **params),
                        timeout=self.timeout + 5)
                self.limit.succeeded()
                return self._record(key, spec, messages, params, response, (time.monotonic() - t0) * 1000)
            except (litellm.ContextWindowExceededError, litellm.ContentPolicyViolationError) as exc:
                # A 400 about this one request (too long, refused content): fail it, not the run.
                error, status = _one_line(exc), Status.ERROR
                break
            except (litellm.BadRequestError, litellm.AuthenticationError, litellm.NotFoundError,
                    litellm.PermissionDeniedError) as exc:
                raise JudgeFatal(f"judge {self.model} refused the request: {_one_line(exc)}") from None
            except litellm.RateLimitError as exc:
                self.limit.throttled()
                error, status = f"429 rate limited: {_one_line(exc)}", Status.ERROR
                if time.monotonic() - started > self.rate_limit_patience:
                    break
            except (litellm.Timeout, asyncio.TimeoutError) as exc:
                error, status = f"timeout after {self.timeout:g} s: {_one_line(exc)}", Status.TIMEOUT
                self._check_alive()
                if attempt >= self.max_attempts:
                    break
            except (litellm.APIConnectionError, litellm.InternalServerError,
                    litellm.ServiceUnavailableError, litellm.APIError) as exc:
                error, status = _one_line(exc), Status.ERROR
                self._check_alive()
                if attempt >= self.max_attempts:
                    break
            self.stats.retries += 1
            await asyncio.sleep(min(10.0, 0.25 * 2 ** min(attempt, 6)) * (0.5 + random.random()))
        self.stats.failures += 1
        return JudgeCall(key=key, model=self.model, prompt_name=spec.name, prompt_hash=spec.hash,
                         messages=messages, params=params, reply=None, status=status,
                         latency_ms=(time.monotonic() - started) * 1000,
                         error=f"{error} (after {attempt} attempts)")

    def _check_alive(self) -> None:
        """A dead judge server fails the run at once instead of every call after its retries."""
        if self.alive is not None:
            try:
                self.alive()
            except Exception as exc:
                raise JudgeFatal(str(exc)) from None

    def _record(self, key: str, spec: prompts.Prompt, messages: list[dict[str, str]],
                params: dict[str, Any], response: Any, latency_ms: float) -> JudgeCall:
        import litellm

        choice = response.choices[0]
        reply = choice.message.content or ""
        if params.get("logprobs"):
            # Keep the alternatives, not just the sampled token: they are the verdict.
            content = getattr(getattr(choice, "logprobs", None), "content", None) or []
            top: dict[str, float] = {}
            for t in content[0].top_logprobs if content else []:
                # "1" and " 1" are one answer: add their probabilities, don't let the later one win.
                token = t.token.strip()
                top[token] = math.log(math.exp(top[token]) + math.exp(t.logprob)) if token in top else t.logprob
            reply = json.dumps({"token": reply, "top_logprobs": top})
        usage = getattr(response, "usage", None)
        # litellm already priced the call where it knows the model; None where it does not.
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        cost = float(cost) if cost is not None else None
        call = JudgeCall(
            key=key, model=self.model, prompt_name=spec.name, prompt_hash=spec.hash,
            messages=messages, params=params, reply=reply, status=Status.OK,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost=cost, latency_ms=latency_ms)
        self.stats.calls += 1
        self.stats.prompt_tokens += call.prompt_tokens
        self.stats.completion_tokens += call.completion_tokens
        self.stats.cost += cost or 0.0
        return call


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300]


def count_tokens(model: str, text: str) -> int:
    """Token count for dry runs: litellm's tokenizer for the model, else ~4 characters a token."""
    import litellm

    try:
        return int(litellm.token_counter(model=model, text=text))
    except Exception:
        return max(1, len(text) // 4)


def price_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token where litellm knows the model's price, else None."""
    import litellm

    try:
        p_in, p_out = litellm.cost_per_token(model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000)
        return p_in / 1_000_000, p_out / 1_000_000
    except Exception:
        return None
