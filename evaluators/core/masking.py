"""Mask API keys, bearer tokens and credentials in URLs before they are stored, printed or shown.

Some endpoints quote the request back in their error messages, credentials included; those
messages end up in `runs.error`, `judge_calls.error` and on the terminal. `mask_secrets` removes
the judge's own key, every credential-looking environment value, and the usual key shapes.
An endpoint URL may carry a credential itself (`http://user:password@host/v1`,
`...?api-key=...`): `mask_url` is the form of it that is stored and shown; the call uses the real one.
"""

from __future__ import annotations

import os
import re
from typing import Callable
from urllib.parse import parse_qsl, urlsplit

MASK = "***"
# Values shorter than this are not searched for literally: masking a placeholder key such as "x"
# would mangle every word containing it, and real keys are far longer.
_MIN_LITERAL = 8
# Environment variables whose values are credentials: OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY...
_CREDENTIAL_NAME = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
# Query parameter names that carry a credential: key, api-key, x-api-key, subscription-key, token,
# access_token, secret, client_secret, password, sig, signature, code (an OAuth code), auth ... Masking a
# harmless parameter that ends the same way costs nothing.
_KEY_PARAM = r"[a-z0-9._-]*(?:key|token|secret|password|passwd|pwd|sig|signature|code|auth|credentials?)"
_URL_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Credentials in a URL: user:password@ and key-like query parameters (?api-key=..., &sig=...).
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#\"']+@"), r"\1" + MASK + "@"),
    (re.compile(rf"(?i)([?&;]{_KEY_PARAM}=)[^&;#\s\"']+"), r"\1" + MASK),
]
_PATTERNS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # Authorization / Proxy-Authorization headers, with or without a scheme, quoted or not.
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?[^\s\"',;}]+"),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer " + MASK),
    # api_key=..., api-key: ..., "x-api-key": "...", apikey=...
    (re.compile(r"(?i)\b((?:x-)?api[_-]?key[\"']?\s*[=:]\s*[\"']?)[^\s\"',;&}]+"), r"\1" + MASK),
    *_URL_PATTERNS,
    # Provider key shapes: OpenAI / Anthropic sk-..., Groq gsk_..., xAI xai-..., Hugging Face hf_..., Google AIza...
    (re.compile(r"\b(?:sk|gsk|xai|hf)[-_][A-Za-z0-9_-]{8,}"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), MASK),
]


def environment_secrets() -> list[str]:
    """Values of the environment variables that hold credentials (long enough to search for)."""
    return [
        value
        for name, value in os.environ.items()
        if _CREDENTIAL_NAME.search(name) and len(value.strip()) >= _MIN_LITERAL
    ]


def mask_secrets(text: str, *known: str | None) -> str:
    """`text` with the `known` secret values, credential environment values and key patterns masked."""
    literals = {k.strip() for k in (*known, *environment_secrets()) if k and len(k.strip()) >= _MIN_LITERAL}
    for value in sorted(literals, key=len, reverse=True):  # longest first: a key containing another
        text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def mask_url(url: str) -> str:
    """The URL with its user:password@ and its key-like query parameters' values masked."""
    for pattern, replacement in _URL_PATTERNS:
        url = pattern.sub(replacement, url)
    return url


def url_secrets(url: str) -> list[str]:
    """The credential values a URL carries (its password, its key-like parameters' values), so that an
    error quoting them on their own is masked too."""
    try:
        parts = urlsplit(url)
        found = [parts.password or "", *(v for k, v in parse_qsl(parts.query) if re.fullmatch(_KEY_PARAM, k, re.I))]
    except ValueError:  # not a URL at all: nothing to take from it
        return []
    return [v for v in found if v]
