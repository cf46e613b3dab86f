"""An LLM's reply read: the reply data of a chat completion (choices, message, first-token logprobs,
usage, cost) as plain data, P(1) from the logprobs of a one-token answer, and errors and endpoints as
one line fit to store and show. No litellm here: the response object is read by its attributes."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from evaluators.core.masking import mask_url
from evaluators.core.records import LOGPROB, Answer, Confidence, JudgeCall, Status

# How the local judge begins a reply for the model. Measured on WikiEval row 0: asked for its statements
# without it, the local model left out the tags and repeated its two statements to 341 tokens; begun with
# "<output>" alone, it closed a tag after every verdict line; begun with "<output>\n", both came back whole.
PREFILL = "<output>\n"

_REASK = (
    "Your reply could not be read ({error}). Answer again in exactly the format asked for, "
    "inside <output> </output> tags, with no explanation."
)


def continued(begun: str, reply: str) -> str:
    """The whole reply to a prefilled request: llama.cpp's server sends the prefill back with what follows
    it, another server only what follows."""
    return reply if not begun or re.match(r"\s*<output", reply) else begun + reply


def reask(messages: list[dict[str, str]], begun: str, reply: str, error: Exception) -> list[dict[str, str]]:
    """The messages that ask again after an unreadable `reply`: the exchange so far, the reason, and the
    same prefill (`begun`) as the first ask."""
    asked = messages[: len(messages) - bool(begun)]
    return [
        *asked,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": _REASK.format(error=error)},
        *messages[len(asked) :],
    ]


class BadReply(Exception):
    """A 200 reply with no message to read: a failed call, retried like a server error, never a verdict."""


class Failure(Exception):
    """One attempt failed. kind: refused (this request only), fatal (every request), rate, timeout, server,
    resting (no deployment was free to take it).

    Plain data, so a ClientPool's worker process can send it back; `message` is not masked yet.
    """

    def __init__(self, kind: str, message: str, retry_after: float = 0.0, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.retry_after = kind, message, retry_after
        self.endpoint = endpoint  # the api base tried last, where known


def reply_data(response: Any, logprobs: bool) -> dict[str, Any]:
    """A chat completion as {"reply", "prompt_tokens", "completion_tokens", "cost"}; with `logprobs`, the
    reply is JSON of the sampled token and its top alternatives. BadReply when there is no message."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise BadReply("the reply has no choices")
    choice = choices[0]
    reply = getattr(getattr(choice, "message", None), "content", None)
    if reply is None:
        raise BadReply("the reply has no message content")
    if logprobs:
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
    return {
        "reply": reply,
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "cost": float(cost) if cost is not None else None,
    }


def shown(endpoint: str | None) -> str | None:
    """An endpoint as it is stored and shown: with the credentials its URL carries masked."""
    return None if endpoint is None else mask_url(endpoint)


def one_line(text: str) -> str:
    """An error as one line of at most 300 characters, without the traceback litellm may append."""
    # litellm appends its own traceback to some messages (a reply without `message`): not ours to show.
    text = text.split("Traceback (most recent call last)", 1)[0]
    # Callers mask first: cutting first could leave half a key that no pattern recognises.
    return " ".join(text.split())[:300]


def logprob_answer(call: JudgeCall, tier: str, words: tuple[str, str] = ("1", "0")) -> Answer:
    """P(1) / (P(0) + P(1)) from the stored top logprobs of the single answer token, where 1 and 0 are
    `words`: a token counts for the word it begins (case aside) when it does not begin the other."""
    top = json.loads(call.reply or "{}").get("top_logprobs", {})
    one, zero = (w.lower() for w in words)
    p0 = p1 = 0.0
    for token, logprob in top.items():
        t = token.lower()
        if not t or one.startswith(t) == zero.startswith(t):
            continue  # no word, or both ("E" begins Essential and Extraneous)
        if one.startswith(t):
            p1 += math.exp(logprob)
        else:
            p0 += math.exp(logprob)
    if p0 + p1 == 0.0:
        return Answer(
            None, Status.UNPARSED, call.key, call.reply, detail=f"neither {words[1]} nor {words[0]} among top tokens"
        )
    prob = p1 / (p0 + p1)
    return Answer(
        int(prob >= 0.5), Status.OK, call.key, call.reply, prob=prob, confidence=Confidence(prob, LOGPROB, tier)
    )


# How litellm's debug line of an exception names the api base it went to.
API_BASE = re.compile(r"API Base: `([^`]+)`")


def deployment(response: Any, config: dict[str, Any], priced: frozenset[str]) -> dict[str, Any]:
    """Which deployment answered, from the Router's hidden params: its api base (None for a provider's
    own endpoint), its model name, and the retries and fallbacks it took."""
    hidden = getattr(response, "_hidden_params", None) or {}
    headers = hidden.get("additional_headers") or {}
    bases = {d["litellm_params"].get("api_base") for d in config["model_list"]}
    retries = int(headers.get("x-litellm-attempted-retries") or 0) + int(
        headers.get("x-litellm-attempted-fallbacks") or 0
    )
    model = hidden.get("litellm_model_name")
    return {
        # The Router prices a model it has no price for at 0.0: that is an unknown cost, not a free call.
        **({"cost": None} if model not in priced else {}),
        "api_base": hidden.get("api_base") if hidden.get("api_base") in bases else None,
        "model_name": headers.get("x-litellm-model-group"),
        "retries": retries,
    }


def tried_base(exc: BaseException) -> str | None:
    """The api base a failed attempt went to last, where litellm's debug line says."""
    found = API_BASE.search(str(getattr(exc, "litellm_debug_info", None) or ""))
    return found.group(1) if found else None
