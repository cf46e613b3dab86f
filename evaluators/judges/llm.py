"""LLM judges through litellm: the only module that imports litellm.

A judge answers `ask(prompt_name, **variables)` with an Answer. The LLM judge renders the prompt
file, checks the request cache, calls litellm under an adaptive concurrency limit with its own
bounded retries, and parses the reply with the prompt's parser from the registry. An unparseable
reply is re-asked once, then reported as `unparsed` with the raw reply kept: never a silent 0 or 1.
A reply without a message (empty `choices`, no `content`) is a failed call, retried like a server
error. Retry-After is honoured for the whole judge, and every error it records or raises has its
secrets masked.

A litellm Router of the judge's routes (routes.py) spreads its calls over the deployments, rests a
failing one, retries on another and falls back to another model; traffic.py paces the calls, and a
ClientPool (clients.py) may send them from worker processes, each with its own Router."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any, Callable, Protocol, Sequence

import evaluators  # noqa: F401  (sets the offline environment before litellm is imported)
from evaluators.core.masking import mask_secrets, url_secrets
from evaluators.core.records import Answer, JudgeCall, Status
from evaluators.judges import prompts, registry, replies, routes
from evaluators.judges.local_calibration import LocalCurves
from evaluators.judges.routes import NO_KEY, JudgeUnavailable
from evaluators.judges.traffic import AdaptiveLimit, CallStats, backoff, call_key, retry_after_s

# Seconds a judge may go without any answer while rate limited before the run stops.
RATE_LIMIT_PATIENCE = 600.0
REST_POLL_S = 1.0  # seconds between asks while every deployment rests: a rest ends unannounced
# Environment variable names litellm asks for that carry a credential, or an endpoint.
_KEY_NAMES = ("KEY", "TOKEN")
_ENDPOINT_NAMES = ("_BASE", "_BASE_URL", "_ENDPOINT")
# Providers whose SDK also finds credentials outside the environment (AWS profiles and instance
# roles, Google application-default credentials): a missing variable proves nothing there.
_AMBIENT_CREDENTIALS = ("bedrock", "sagemaker", "vertex_ai")


class JudgeFatal(RuntimeError):
    """The endpoint refused the request itself (400 or 401), or rate-limited past the patience: stop the run."""


class Sender(Protocol):
    """Where a judge's calls go out instead of this process's event loop (clients.ClientPool)."""

    async def send(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """As llm.send: one attempt, the reply as plain data, or raise replies.Failure."""
        ...


def _provider(model: str, api_base: str | None = None) -> str | None:
    """The litellm provider of `model` (at `api_base`), or None for a model litellm does not know."""
    import litellm

    try:
        return str(litellm.get_llm_provider(model, api_base=api_base)[1])
    except Exception:
        return None


def other_credentials(model: str, api_base: str | None) -> str:
    """What else than one key a call to `model` at `api_base` would need ("" for nothing): the variables
    litellm still misses with a key and the base given, or the ambient credentials of AWS and Google."""
    import litellm

    provider = _provider(model)
    if provider is None:
        return ""  # an unknown model: its first call fails as a refused request
    if provider.startswith(_AMBIENT_CREDENTIALS):
        return f"the {provider} SDK's own credentials"
    return ", ".join(litellm.validate_environment(model, api_key="given", api_base=api_base)["missing_keys"])


def _check_deployment(deployment: routes.Deployment, key: str | None) -> None:
    """LLMJudge.check_access for one deployment sent `key`."""
    import litellm

    model, base = deployment.model, deployment.api_base
    # A model litellm does not know is judged by its prefix alone.
    if base is not None and (problem := routes.api_base_problem(_provider(model, base) or model.split("/")[0])):
        raise JudgeUnavailable(f"judge {model} at an api_base: {problem}; nothing was judged")
    if deployment.key_env is not None:
        if needs := other_credentials(model, base):
            raise JudgeUnavailable(
                f"judge {model}: its key comes from {deployment.key_env} alone, but it would "
                f"also need {needs}; nothing was judged"
            )
        return
    provider = _provider(model)
    # given, or NO_KEY to an api_base; an unknown model's first call fails as a refused request
    if key is not None or provider is None or provider.startswith(_AMBIENT_CREDENTIALS):
        return
    # Only keys and endpoints: other names (API versions, projects) have defaults or fail at the call.
    missing = [
        m for m in litellm.validate_environment(model)["missing_keys"] if m.endswith(_KEY_NAMES + _ENDPOINT_NAMES)
    ]
    if missing:
        raise JudgeUnavailable(
            f"judge {model}: {', '.join(missing)} not set in the environment "
            "(or give an API base for a server of your own); nothing was judged"
        )


class LLMJudge:
    """Any model litellm can reach: `openai/NAME` with api_base, `anthropic/...`, `ollama/...`, or a
    model_name of a judges file (`routes`), with its deployments and fallbacks.

    Each deployment is sent its own key: `api_key`, else the value of the environment variable its
    `key_env` (or its file's `os.environ/NAME`) names, else, to an api_base, NO_KEY: a provider's key
    from the environment goes only to that provider's own endpoint, never to an address given with
    the judge.
    """

    def __init__(
        self,
        model: str,
        api_base: str | Sequence[str] | None = None,
        api_key: str | None = None,
        key_env: str | None = None,
        timeout: float = 60.0,
        concurrency: int = 8,
        max_attempts: int = 4,
        rate_limit_patience: float = RATE_LIMIT_PATIENCE,
        cache: dict[str, JudgeCall] | None = None,
        on_call: Callable[[JudgeCall], None] | None = None,
        logprob_binary: bool = False,
        prefill_output: bool = False,
        curves: LocalCurves | None = None,
        temperature: float = 0.0,
        alive: Callable[[], None] | None = None,
        pool: Sender | None = None,
        judges: routes.Routes | None = None,
    ) -> None:
        self.name = model
        self.model = model
        # Several api bases are deployments of one model: any of them answers any call.
        self.routes = judges.serving(model) if judges is not None else routes.from_flags(model, api_base, key_env)
        self.pool = pool  # worker processes that send the calls; None: this process's event loop
        self.keys = [routes.key(api_key, d.key_env, d.api_base) for d in self.routes.deployments]
        # Literal secrets to mask in errors: the keys, and what the endpoint URLs carry (user:password@, ?key=).
        bases = [d.api_base for d in self.routes.deployments if d.api_base]
        self._secrets = [*self.keys, *(v for e in bases for v in url_secrets(e))]
        self.timeout = timeout
        self.router = routes.router_config(self.routes, self.keys, timeout)
        self.max_attempts = max_attempts
        self.rate_limit_patience = rate_limit_patience
        self.cache = cache if cache is not None else {}
        self.on_call = on_call or (lambda call: None)
        # Binary prompts read P("1") from the first token after an "<output>" prefill; `curves` map it to p.
        self.logprob_binary, self.curves = logprob_binary, curves
        # Every other reply is begun for the model with PREFILL (a server that continues an assistant
        # message, as llama.cpp's does): a small model that leaves the tag out is not re-asked for it.
        self.prefill_output = prefill_output
        # Raises when the judge's own server process is gone (the local judge): stop, don't retry.
        self.alive = alive
        self.params: dict[str, Any] = {"temperature": temperature}
        self.limit = AdaptiveLimit(concurrency)
        self.stats = CallStats()
        self._inflight: dict[str, asyncio.Future[JudgeCall]] = {}
        self._limited_since: float | None = None  # first 429 since the last answer

    # ------------------------------------------------------------ public
    async def ask(self, prompt: str, **variables: Any) -> Answer:
        """Render `prompt`, ask the model (or the cache), parse; re-ask once if unparseable."""
        parser = registry.PARSERS[prompt]  # an unknown prompt fails here, before any call is paid for
        spec, messages, params = self.request(prompt, **variables)
        prefill = params.get("logprobs", False)
        call = await self._exchange(spec, messages, params)
        if call.status is not Status.OK:
            return Answer(None, call.status, call.key, call.reply, detail=call.error)
        if prefill and (prompt in registry.BINARY_PROMPTS or prompt in registry.LABEL_PROMPTS):
            answer = replies.logprob_answer(call, self.name, registry.LABEL_PROMPTS.get(prompt, ("1", "0")))
            return self.curves.answer(prompt, variables, answer) if self.curves else answer
        if prefill:  # a scale prompt: the first-token distribution is the answer
            top = json.loads(call.reply or "{}").get("top_logprobs", {})
            return Answer(top, Status.OK, call.key, call.reply)
        begun = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        reply = replies.continued(begun, call.reply or "")
        try:
            return self._parsed(parser(reply), call, reply)
        except prompts.ParseError as exc:
            second = await self._exchange(spec, replies.reask(messages, begun, reply, exc), params)
            if second.status is not Status.OK:
                return Answer(None, second.status, second.key, second.reply, detail=second.error)
            again = replies.continued(begun, second.reply or "")
            try:
                return self._parsed(parser(again), second, again)
            except prompts.ParseError as exc2:
                return Answer(None, Status.UNPARSED, second.key, again, detail=str(exc2))

    def check_access(self) -> None:
        """Raise JudgeUnavailable, before any call, when litellm lacks the key or endpoint a deployment
        needs, or when a deployment's named key would not be the only credential its call needs.

        An api_base stands in for a missing endpoint, and for a missing key: NO_KEY is sent, which a
        local server ignores and a provider that needs a key refuses with a 401 on the first call.
        """
        import litellm

        litellm.suppress_debug_info = True  # an unknown provider would print litellm's banner
        for d, key in zip(self.routes.deployments, self.keys):
            _check_deployment(d, key)

    def request(self, prompt: str, **variables: Any) -> tuple[prompts.Prompt, list[dict[str, str]], dict[str, Any]]:
        """The exact messages and params `ask` sends for this prompt (dry runs count these)."""
        spec = prompts.load(prompt)
        messages = [{"role": "user", "content": spec.render(**variables)}]
        params = {**self.params, "max_tokens": registry.reply_tokens(prompt, variables)}
        if self.logprob_binary and (
            prompt in registry.BINARY_PROMPTS
            or prompt in registry.LABEL_PROMPTS
            or prompt in registry.DISTRIBUTION_PROMPTS
        ):
            messages.append({"role": "assistant", "content": "<output>"})
            params.update(max_tokens=1, logprobs=True, top_logprobs=10)
        elif self.prefill_output and prompt not in registry.NUMBERED_BLOCKS:
            messages.append({"role": "assistant", "content": replies.PREFILL})
        return spec, messages, params

    # ------------------------------------------------------------ internals
    def _parsed(self, value: Any, call: JudgeCall, reply: str) -> Answer:
        """The answer of a parsed reply (`reply`: the call's, after its prefill); one read from a bare reply
        says so, and is counted."""
        if isinstance(value, prompts.Bare):
            self.stats.bare_replies += 1
            return Answer(value.value, Status.OK, call.key, reply, detail=prompts.BARE_REPLY)
        return Answer(value, Status.OK, call.key, reply)

    async def _exchange(
        self, spec: prompts.Prompt, messages: list[dict[str, str]], params: dict[str, Any]
    ) -> JudgeCall:
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

    async def _call(
        self, key: str, spec: prompts.Prompt, messages: list[dict[str, str]], params: dict[str, Any]
    ) -> JudgeCall:
        attempt, started = 0, time.monotonic()
        error, status, endpoint = "", Status.ERROR, None
        step = ""
        while True:
            attempt += step != "rest"  # a request no deployment was free to take is not an attempt
            await self._hold()
            try:
                async with self.limit:
                    t0 = time.monotonic()  # latency of the call itself, not of the wait for a slot
                    kwargs = dict(
                        router=self.router, model=self.model, messages=messages, timeout=self.timeout, **params
                    )
                    reply = await (self.pool.send(kwargs) if self.pool is not None else send(kwargs))
                self.limit.succeeded()
                self._limited_since = None
                return self._record(key, spec, messages, params, reply, (time.monotonic() - t0) * 1000)
            except replies.Failure as failure:
                endpoint = failure.endpoint or endpoint
                step, error, status = self._failed(failure, attempt)
            if step == "stop":
                break
            self.stats.retries += step != "rest"
            if step == "wait":
                await asyncio.sleep(backoff(attempt))
        self.stats.failures += 1
        return JudgeCall(
            key=key,
            model=self.model,
            prompt_name=spec.name,
            prompt_hash=spec.hash,
            messages=messages,
            params=params,
            reply=None,
            status=status,
            latency_ms=(time.monotonic() - started) * 1000,
            error=f"{error} (after {attempt} attempts)",
            endpoint=replies.shown(endpoint),
        )

    def _failed(self, failure: replies.Failure, attempt: int) -> tuple[str, str, Status]:
        """What a failed attempt (the Router's pass over the deployments and fallbacks) leads to: "stop"
        (the call failed), "again" (at once: the rate limit's hold), "rest" (every deployment rests: again
        after a short hold, not counted as an attempt) or "wait" (back off, then again);
        with the error and status it leaves. Raises JudgeFatal when the endpoint refuses every request
        or the rate limit outlasts the patience."""
        text = replies.one_line(mask_secrets(failure.message, *self._secrets))
        if failure.kind == "refused":
            # A 400 about this one request (too long, refused content): fail it, not the run.
            return "stop", text, Status.ERROR
        if failure.kind == "fatal":
            hint = (
                " (no key was sent to this API base; if it needs one, name the variable that holds it with --key-env)"
                if NO_KEY in self.keys
                else ""
            )
            raise JudgeFatal(f"judge {self.model} refused the request: {text}{hint}") from None
        if failure.kind == "resting":  # held like a 429, and as patiently: an rpm limit may last a minute
            self._rate_limited(failure.retry_after, attempt, text)
            return "rest", text, Status.ERROR
        if failure.kind == "rate":
            self.limit.throttled()
            error = f"429 rate limited: {text}"
            self._rate_limited(failure.retry_after, attempt, error)
            return "again", error, Status.ERROR  # _hold waits out the time the 429 set, for every call of this judge
        if failure.kind == "timeout":
            error, status = f"timeout after {self.timeout:g} s: {text}", Status.TIMEOUT
        else:
            error, status = text, Status.ERROR
        self._check_alive()
        if attempt >= self.max_attempts:
            return "stop", error, status
        # A 503 may say when to come back: that holds every call of this judge, not just this one.
        self._hold_until(time.monotonic() + failure.retry_after)
        return "wait", error, status

    async def _hold(self) -> None:
        """Send nothing before the time a rate limit or a Retry-After set (it may move while we sleep)."""
        while (delay := self.stats.waiting_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def _hold_until(self, when: float) -> None:
        self.stats.waiting_until = max(self.stats.waiting_until, when)

    def _rate_limited(self, retry_after: float, attempt: int, error: str) -> None:
        """Hold the judge for max(backoff, Retry-After); stop the run once no answer came for the patience.

        The patience runs for the judge, not per call: a permanent 429 stops the run after it once,
        instead of holding every remaining step for it in turn.
        """
        now = time.monotonic()
        if self._limited_since is None:
            self._limited_since = now
        resume = now + max(backoff(attempt), retry_after)
        if resume - self._limited_since > self.rate_limit_patience:
            raise JudgeFatal(
                f"judge {self.model} rate limited: no answer for {now - self._limited_since:.0f} s "
                f"and the next try would be in {resume - now:.0f} s, past the rate-limit "
                f"patience of {self.rate_limit_patience / 60:g} min ({error})"
            ) from None
        self._hold_until(resume)

    def _describe(self, exc: BaseException) -> str:
        """The exception as one line, with this judge's key and any other credential masked."""
        return replies.one_line(mask_secrets(str(exc), *self._secrets))

    def _check_alive(self) -> None:
        """A dead judge server fails the run at once instead of every call after its retries."""
        if self.alive is not None:
            try:
                self.alive()
            except Exception as exc:
                raise JudgeFatal(self._describe(exc)) from None

    def _record(
        self,
        key: str,
        spec: prompts.Prompt,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        reply: dict[str, Any],
        latency_ms: float,
    ) -> JudgeCall:
        call = JudgeCall(
            key=key,
            model=self.model,
            prompt_name=spec.name,
            prompt_hash=spec.hash,
            messages=messages,
            params=params,
            reply=reply["reply"],
            status=Status.OK,
            prompt_tokens=reply["prompt_tokens"],
            completion_tokens=reply["completion_tokens"],
            cost=reply["cost"],
            latency_ms=latency_ms,
            endpoint=routes.answered_at(reply, self.model),
        )
        self.stats.answered(call, reply["retries"])
        return call


def load_litellm() -> None:
    """Import litellm now, where a process will send calls soon (a ClientPool worker at its start)."""
    import litellm  # noqa: F401


# The Routers of this process by their config's id, the last used last. A Router hooks its failure tracking
# into litellm's global callback lists, which take 100 at most: past ROUTERS_KEPT the least used is discarded.
_ROUTERS: dict[str, tuple[Any, frozenset[str]]] = {}
ROUTERS_KEPT = 16


def _router(config: dict[str, Any]) -> tuple[Any, frozenset[str]]:
    """This process's Router for a judge's config, and the models of it whose price litellm knows."""
    import litellm

    found = _ROUTERS.pop(config["id"], None)
    if found is None:
        # Asked before the Router exists: it registers its models with a price of 0, known or not.
        priced = frozenset(m for d in config["model_list"] if _priced(m := d["litellm_params"]["model"]))
        found = (litellm.Router(model_list=config["model_list"], **config["settings"]), priced)
        if len(_ROUTERS) >= ROUTERS_KEPT:
            _ROUTERS.pop(next(iter(_ROUTERS)))[0].discard()
    _ROUTERS[config["id"]] = found
    return found


async def send(kwargs: dict[str, Any]) -> dict[str, Any]:
    """One attempt through the judge's Router (kwargs["router"], see router_config): the reply as plain
    data, or raise replies.Failure.

    The reply: {"reply", "prompt_tokens", "completion_tokens", "cost", "api_base", "model_name",
    "retries"}; with logprobs asked, `reply` is JSON of the sampled token and its top alternatives.
    Runs in the judge's process or in a ClientPool worker: what it returns or raises crosses a pipe.
    """
    import litellm  # imported lazily: pages that never judge don't pay its 2.5 s import

    litellm.suppress_debug_info = True
    config, kwargs = kwargs["router"], {k: v for k, v in kwargs.items() if k != "router"}
    try:
        router, priced = _router(config)
        response = await asyncio.wait_for(router.acompletion(**kwargs), timeout=config["timeout"])
        return {
            **replies.reply_data(response, bool(kwargs.get("logprobs"))),
            **replies.deployment(response, config, priced),
        }
    except (litellm.ContextWindowExceededError, litellm.ContentPolicyViolationError) as exc:
        raise replies.Failure("refused", str(exc)) from None
    except (
        litellm.BadRequestError,
        litellm.AuthenticationError,
        litellm.NotFoundError,
        litellm.PermissionDeniedError,
    ) as exc:
        raise replies.Failure("fatal", str(exc)) from None
    except litellm.RateLimitError as exc:
        raise replies.Failure("rate", str(exc), retry_after_s(exc), replies.tried_base(exc)) from None
    except (litellm.Timeout, asyncio.TimeoutError) as exc:
        raise replies.Failure("timeout", str(exc), 0.0, replies.tried_base(exc)) from None
    except (
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIError,
        replies.BadReply,
    ) as exc:
        raise replies.Failure("server", str(exc), retry_after_s(exc), replies.tried_base(exc)) from None
    except litellm.types.router.RouterRateLimitError as exc:
        # Every deployment rests (cooldown) or is at its rpm/tpm: nothing went out; wait and ask again.
        raise replies.Failure("resting", str(exc), min(REST_POLL_S, exc.cooldown_time)) from None


def count_tokens(model: str, text: str) -> int:
    """Token count for dry runs: litellm's tokenizer for the model, else ~4 characters a token."""
    import litellm

    try:
        return int(litellm.token_counter(model=model, text=text))
    except Exception:
        return max(1, len(text) // 4)


@functools.lru_cache(maxsize=64)
def _priced(model: str) -> bool:
    return price_per_token(model) is not None


def price_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token where litellm knows the model's price, else None."""
    import litellm

    try:
        p_in, p_out = litellm.cost_per_token(model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000)
        return p_in / 1_000_000, p_out / 1_000_000
    except Exception:
        return None
