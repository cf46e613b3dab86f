"""Where an LLM judge's calls may go: litellm's `model_list` file (the proxy's config), read and checked.

    model_list:
      - model_name: judge                  # what --judge names
        litellm_params: {model: openai/qwen, api_base: http://gpu-a:8000/v1, api_key: os.environ/GPU_KEY}
      - model_name: judge                  # a second deployment of the same name: a replica
        litellm_params: {model: openai/qwen, api_base: http://gpu-b:8000/v1, rpm: 600}
    router_settings: {fallbacks: [{judge: [backup]}], cooldown_time: 30, allowed_fails: 1, num_retries: 2}

A key is only ever named (`os.environ/NAME`), never written in the file, and NAME's value goes to that
deployment alone. Repeated --api-base flags make the same routes (`from_flags`). No litellm here: llm.py
builds the Router from these routes. PyYAML is read here only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

import yaml

from evaluators.core.masking import mask_url

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_PREFIX = "os.environ/"
# Seconds a failed deployment is passed over while another is live, unless the file says otherwise.
COOLDOWN_S = 10.0
PARAMS = ("model", "api_base", "api_key", "rpm", "tpm")
SETTINGS = ("fallbacks", "cooldown_time", "allowed_fails", "num_retries", "routing_strategy")
STRATEGIES = ("simple-shuffle", "least-busy", "latency-based-routing", "usage-based-routing-v2")
# A judges file is read whole and checked before use: a few deployments are a few hundred bytes, so
# these bounds refuse only what is no judges file (a 1 KB alias bomb expands to billions of nodes).
MAX_FILE_BYTES = 1 << 20
MAX_NODES = 20_000  # YAML nodes with every alias expanded
# The model names the CLI and the dashboard give to their built-in judges.
RESERVED_NAMES = ("offline", "local")
# litellm's providers that send a call to the api_base they are given, and to nowhere else: each was
# called with an api_base on 127.0.0.1 and reached it, looking up no other host
# (benchmarks/api_base_probe.py prints the list again). Others ignore the base and send the key to
# their own host (replicate/), or reach another host first (huggingface/): a deployment with an
# api_base must name one of these.
HONOURS_API_BASE = frozenset(
    """a2a ai21 ai21_chat aiml aiohttp_openai amazon_nova anthropic anthropic_text apertis assemblyai azure
    azure_ai azure_text baseten bedrock_mantle cerebras charity_engine chutes cloudflare codestral cognition cohere
    cohere_chat cometapi compactifai cortecs custom custom_openai darkbloom dashscope databricks datarobot deepinfra
    deepseek docker_model_runner edenai empower featherless_ai fireworks_ai friendliai galadriel gemini github groq
    helicone heroku hosted_vllm hyperbolic inception lambda_ai langflow langgraph lemonade libertai litellm_proxy
    llamafile lm_studio maritalk meta meta_llama minimax mistral modelscope moonshot morph nadir nano-gpt nebius
    neosantara nlp_cloud novita nscale nvidia_nim ollama ollama_chat oobabooga openai openrouter ovhcloud parasail
    perplexity pinstripes poe prism publicai qwen_ai_platform qwencloud reka sail sambanova scaleway scx-ai snowflake
    synthetic tencent tensormesh text-completion-inception text-completion-openai together_ai v0 vercel_ai_gateway
    volcengine wandb xai xiaomi_mimo xinference zai""".split()
)
# Sent to an api_base when no key is configured: litellm's OpenAI client refuses to send none,
# and a local server ignores it (one that needs a real key answers 401, which stops the run).
NO_KEY = "no-key"


class JudgeUnavailable(ValueError):
    """The judge cannot be called at all (no key, no endpoint): found before any item is judged."""


class RoutesError(ValueError):
    """A judges file that cannot be used: one line naming the file, the line and the field."""


@dataclass(frozen=True)
class Deployment:
    """One endpoint of a model name: a litellm model, its API base (None: the provider's own), the
    environment variable holding its key (None: no key to an api_base), and its rate limits."""

    model_name: str
    model: str
    api_base: str | None = None
    key_env: str | None = None
    rpm: int | None = None
    tpm: int | None = None


@dataclass(frozen=True)
class Routes:
    """The deployments a judge may call, the fallbacks between their names, and the Router's settings."""

    deployments: tuple[Deployment, ...]
    fallbacks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # the file read, for messages ("" for --api-base flags)

    @property
    def names(self) -> list[str]:
        """The model names, in file order."""
        return list(dict.fromkeys(d.model_name for d in self.deployments))

    def serving(self, name: str) -> Routes:
        """The routes a judge named `name` needs: its deployments and those of its fallbacks, transitively."""
        if name not in self.names:
            raise RoutesError(
                f"{self.source}: --judge: no model_name {name!r} in model_list (it has {', '.join(self.names)})"
            )
        wanted, todo = [name], [name]
        while todo:
            for other in self.fallbacks.get(todo.pop(), ()):
                if other not in wanted:
                    wanted.append(other)
                    todo.append(other)
        return replace(
            self,
            deployments=tuple(d for d in self.deployments if d.model_name in wanted),
            fallbacks={k: v for k, v in self.fallbacks.items() if k in wanted},
        )


def url_problem(text: str) -> str | None:
    """Why `text` cannot be a judge's API base ("must ..."), or None: an http(s) URL with a host. The URL
    is quoted masked: it may carry a key."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in text):
        return f"must be an http(s) URL with a host, such as http://127.0.0.1:8000/v1, got {mask_url(text)!r}"
    return None


def key(api_key: str | None, key_env: str | None, api_base: str | None) -> str | None:
    """The key a deployment is sent: the one given, else key_env's value, else NO_KEY to an api_base, else None
    (litellm then reads the provider's own variable, for the provider's own endpoint)."""
    if api_key is not None:
        return api_key
    if key_env is not None:
        value = os.environ.get(key_env, "").strip()
        if not value:
            raise JudgeUnavailable(f"the key variable {key_env} is not set in the environment; nothing was judged")
        return value
    return NO_KEY if api_base is not None else None


def from_flags(model: str, api_bases: str | Sequence[str] | None, key_env: str | None) -> Routes:
    """The routes of repeated --api-base flags: one deployment of `model` per base (the same URL twice is
    one), each with the key of `key_env`; no base: the provider's own endpoint."""
    bases = [api_bases] if api_bases is None or isinstance(api_bases, str) else list(dict.fromkeys(api_bases))
    if not bases:
        raise ValueError("a judge needs at least one endpoint")
    return Routes(tuple(Deployment(model, model, base, key_env) for base in bases))


def api_base_problem(provider: str) -> str | None:
    """Why a deployment of litellm provider `provider` cannot be given an api_base ("..."), or None."""
    if provider in HONOURS_API_BASE:
        return None
    return (
        f"litellm does not send {provider}/ calls to an api_base alone, so its key could reach another host: "
        "for a server of your own name an OpenAI-compatible model, such as openai/NAME or hosted_vllm/NAME"
    )


def load(path: str | Path) -> Routes:
    """Read a judges file; RoutesError (one line: file, line, field) when it is malformed, too big, or
    not a regular file."""
    text = _read(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        _check_size(node, str(path))
        data, lines = yaml.safe_load(text), _lines(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise RoutesError(f"{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    return _Reader(str(path), lines).routes(data)


def _read(path: str | Path) -> str:
    """The file's text, read only from a regular file of at most MAX_FILE_BYTES (a device such as
    /dev/zero or a pipe never ends)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise RoutesError(f"{path}: cannot read the judges file: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise RoutesError(
                f"{path}: cannot read the judges file: {info.st_size:,} bytes, over the limit of {MAX_FILE_BYTES:,}"
            )
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:  # grew since stat
            raise RoutesError(f"{path}: cannot read the judges file: over the limit of {MAX_FILE_BYTES:,} bytes")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RoutesError(f"{path}: cannot read the judges file: {exc.__class__.__name__}: {exc}") from None


def _check_size(root: yaml.Node | None, source: str) -> None:
    """Refuse a document whose nodes, each alias expanded, number over MAX_NODES (an alias bomb), or an
    alias inside itself; counted once per node, so the count costs what the file's length does."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, open_: set[int]) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_:
            raise RoutesError(f"{source}:{node.start_mark.line + 1}: an alias refers to a node that holds it")
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        open_.add(id(node))
        total = 1
        for child in children:
            total += size(child, open_)
            if total > MAX_NODES:
                raise RoutesError(
                    f"{source}:{node.start_mark.line + 1}: over {MAX_NODES:,} values once its aliases are expanded"
                )
        open_.discard(id(node))
        sizes[id(node)] = total
        return total

    if root is not None:
        size(root, set())


def _lines(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """The line (1-based) of every node, by its path of keys and indexes: where an error points."""
    if node is None:
        return {}
    found = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            found[(*path, key.value)] = key.start_mark.line + 1
            found.update({p: n for p, n in _lines(value, (*path, key.value)).items() if p != (*path, key.value)})
    elif isinstance(node, yaml.SequenceNode):
        for k, value in enumerate(node.value):
            found.update(_lines(value, (*path, k)))
    return found


class _Reader:
    """Checks a parsed judges file, naming the line and field of the first problem."""

    def __init__(self, source: str, lines: dict[tuple[Any, ...], int]) -> None:
        self.source, self.lines = source, lines

    def fail(self, path: tuple[Any, ...], problem: str) -> RoutesError:
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), 1)
        name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "the file"
        # "api_key must be ...", not "api_key: must be ...", which masking would read as a key.
        return RoutesError(f"{self.source}:{line}: {name} {problem}")

    def mapping(self, value: Any, path: tuple[Any, ...], known: Sequence[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping of {', '.join(known)}")
        unknown = [k for k in value if k not in known]
        if unknown:
            raise self.fail((*path, unknown[0]), f"is a field this file does not read; it reads {', '.join(known)}")
        return value

    def text(self, value: Any, path: tuple[Any, ...]) -> str:
        if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
            raise self.fail(path, "must be a name with no spaces")
        return value.strip()

    def number(self, value: Any, path: tuple[Any, ...], integer: bool) -> Any:
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < 0:
            raise self.fail(path, f"must be a {'whole ' if integer else ''}number of 0 or more, got {value!r}")
        return value

    def routes(self, data: Any) -> Routes:
        top = self.mapping(data, (), ("model_list", "router_settings"))
        entries = top.get("model_list")
        if not isinstance(entries, list) or not entries:
            raise self.fail(("model_list",), "must be a list of deployments (model_name, litellm_params)")
        deployments = tuple(self.deployment(e, ("model_list", k)) for k, e in enumerate(entries))
        routes = Routes(deployments, source=self.source)
        settings = dict(self.mapping(top.get("router_settings") or {}, ("router_settings",), SETTINGS))
        fallbacks = self.fallbacks(settings.pop("fallbacks", []) or [], routes.names)
        for name, value in settings.items():
            path = ("router_settings", name)
            if name == "routing_strategy" and value not in STRATEGIES:
                raise self.fail(path, f"must be one of {', '.join(STRATEGIES)}")
            if name != "routing_strategy":
                self.number(value, path, integer=name != "cooldown_time")
        return replace(routes, fallbacks=fallbacks, settings=settings)

    def deployment(self, entry: Any, path: tuple[Any, ...]) -> Deployment:
        entry = self.mapping(entry, path, ("model_name", "litellm_params"))
        name = self.text(entry.get("model_name"), (*path, "model_name"))
        if name in RESERVED_NAMES:
            raise self.fail((*path, "model_name"), f"must not be {name!r}, the name of a built-in judge")
        where = (*path, "litellm_params")
        params = self.mapping(entry.get("litellm_params"), where, PARAMS)
        model = self.text(params.get("model"), (*where, "model"))
        base = params.get("api_base")
        if base is not None and (not isinstance(base, str) or url_problem(base)):
            raise self.fail((*where, "api_base"), url_problem(str(base)) or "must be a URL")
        provider = model.split("/", 1)[0] if "/" in model else None  # a bare name: llm.py asks litellm
        if base is not None and provider is not None and (problem := api_base_problem(provider)):
            raise self.fail((*where, "model"), f"cannot be given an api_base: {problem}")
        key = params.get("api_key")
        key_env = None
        if key is not None:
            key_env = str(key)[len(ENV_PREFIX) :] if str(key).startswith(ENV_PREFIX) else ""
            if not ENV_NAME.fullmatch(key_env):
                raise self.fail(
                    (*where, "api_key"), "must be os.environ/NAME (the variable holding the key), never the key itself"
                )
        rpm, tpm = (params.get(k) for k in ("rpm", "tpm"))
        for k, v in (("rpm", rpm), ("tpm", tpm)):
            if v is not None and not self.number(v, (*where, k), integer=True):
                raise self.fail(
                    (*where, k), "must be 1 or more: a deployment with no requests a minute is never called"
                )
        return Deployment(name, model, base, key_env, rpm, tpm)

    def fallbacks(self, value: Any, names: list[str]) -> dict[str, tuple[str, ...]]:
        path = ("router_settings", "fallbacks")
        if not isinstance(value, list):
            raise self.fail(path, "must be a list of {model_name: [fallback model_name, ...]}")
        found: dict[str, tuple[str, ...]] = {}
        for k, rule in enumerate(value):
            if not isinstance(rule, dict) or len(rule) != 1:
                raise self.fail((*path, k), "must be one {model_name: [fallback model_name, ...]}")
            [(name, others)] = rule.items()
            others = [others] if isinstance(others, str) else others
            unknown = [n for n in [name, *(others if isinstance(others, list) else [None])] if n not in names]
            if unknown:
                raise self.fail((*path, k), f"names {unknown[0]!r}, which is no model_name of model_list")
            found[name] = tuple(others)
        return found


def router_config(judges: Routes, keys: Sequence[str | None], timeout: float) -> dict[str, Any]:
    """The Router of a judge's routes as plain data (a ClientPool worker builds its own from it): each
    deployment with its own key, the SDK's retries off (the Router and the judge retry), and each of
    the judge's own deployments tried once per attempt before its fallbacks. The file's router_settings
    come last: they override these."""
    model_list = []
    for d, key in zip(judges.deployments, keys):
        params: dict[str, Any] = {"model": d.model, "max_retries": 0}
        params.update(
            {
                k: v
                for k, v in (("api_base", d.api_base), ("api_key", key), ("rpm", d.rpm), ("tpm", d.tpm))
                if v is not None
            }
        )
        model_list.append({"model_name": d.model_name, "litellm_params": params})
    # A failed attempt is taken at once by another deployment of the name, not the one that failed
    # (litellm's weighted failover), each once, before the fallbacks; the judge then backs off.
    settings: dict[str, Any] = {"num_retries": 0, "retry_after": 0, "enable_weighted_failover": True}
    if len(model_list) > 1:
        # A deployment that failed once rests while another takes its calls (litellm's default waits
        # for a failure rate over a minute); a judge's only deployment never rests: the judge backs off.
        settings.update(cooldown_time=COOLDOWN_S, allowed_fails=0)
    else:
        settings["disable_cooldowns"] = True
    settings.update(judges.settings)
    if judges.fallbacks:
        settings["fallbacks"] = [{k: list(v)} for k, v in judges.fallbacks.items()]
    config = {"model_list": model_list, "settings": settings, "timeout": timeout * len(model_list) + 5}
    config["id"] = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    return config


def answered_at(reply: dict[str, Any], judge: str) -> str | None:
    """Where a call was answered, as stored: the api base (credentials masked), after the model name
    that answered when a fallback did ("backup at http://..."); None: the provider's own endpoint."""
    base = mask_url(reply["api_base"]) if reply["api_base"] else None
    if reply["model_name"] in (None, judge):
        return base
    return f"{reply['model_name']} at {base}" if base else reply["model_name"]
