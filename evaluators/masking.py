"""Mask API keys and bearer tokens in error text before it is stored or printed.

Some endpoints quote the request back in their error messages, credentials included; those
messages end up in `runs.error`, `judge_calls.error` and on the terminal. `mask_secrets` removes
the judge's own key, every credential-looking environment value, and the usual key shapes.
"""
from __future__ import annotations

import os
import re
from typing import Callable

MASK = "***"
# Values shorter than this are not searched for literally: masking a placeholder key such as "x"
# would mangle every word containing it, and real keys are far longer.
_MIN_LITERAL = 8
# Environment variables whose values are credentials: OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY...
_CREDENTIAL_NAME = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
_PATTERNS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # Authorization / Proxy-Authorization headers, with or without a scheme, quoted or not.
    (re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?[^\s\"',;}]+"),
     lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer " + MASK),
    # api_key=..., api-key: ..., "x-api-key": "...", apikey=...
    (re.compile(r"(?i)\b((?:x-)?api[_-]?key[\"']?\s*[=:]\s*[\"']?)[^\s\"',;&}]+"), r"\1" + MASK),
    # Keys in a URL's query string (?key=..., &access_token=...).
    (re.compile(r"(?i)([?&](?:key|api_key|token|access_token)=)[^&\s\"']+"), r"\1" + MASK),
    # Provider key shapes: OpenAI / Anthropic sk-..., Groq gsk_..., xAI xai-..., Hugging Face hf_..., Google AIza...
    (re.compile(r"\b(?:sk|gsk|xai|hf)[-_][A-Za-z0-9_-]{8,}"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), MASK),
]


def environment_secrets() -> list[str]:
    """Values of the environment variables that hold credentials (long enough to search for)."""
    return [value for name, value in os.environ.items()
            if _CREDENTIAL_NAME.search(name) and len(value.strip()) >= _MIN_LITERAL]


def mask_secrets(text: str, *known: str | None) -> str:
    """`text` with the `known` secret values, credential environment values and key patterns masked."""
    literals = {k.strip() for k in (*known, *environment_secrets()) if k and len(k.strip()) >= _MIN_LITERAL}
    for value in sorted(literals, key=len, reverse=True):  # longest first: a key containing another
        text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
