"""A loopback server speaking the OpenAI chat-completions protocol, for judge tests and benchmarks.

Standard library only. It binds 127.0.0.1 on an ephemeral port and serves each connection in its
own thread, so many slow requests are in flight at once. It records every request body, answers
through a `responder(request) -> str | Reply` (or a queue of scripted replies), and injects faults
by request index or by predicate:

    429 (with Retry-After), 500, 503 (with Retry-After), 400, 401, "hang" (longer than any client
    timeout), "truncated" (a cut-off JSON body), "no_choices" (a body without `choices`),
    "empty_choices" (`"choices": []`), "no_message" (a choice without `message`), "null_content"
    (a message whose `content` is null), "garbage" (a well-formed reply whose content is nonsense),
    and "echo_key_500" / "echo_key_401" (an error whose text echoes the request's Authorization
    header, as some endpoints do).

`format_aware` answers every prompt in prompts/*.txt in the shape its parser expects, with
deterministic word-overlap rules (see its docstring), so a whole metrics pipeline can run against it.

Run it standalone (e.g. to point the CLI at it):
    python tests/openai_server.py [--latency 0.2] [--port 0] [--log FILE]

`log` (a path) appends one JSON line per answered request: its arrival and finish times (time.time()),
the status sent and a digest of its messages and sampling params, so a benchmark or a test with servers
in other processes can count calls, see how busy the endpoint was, and find a request answered twice.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

MODEL = "test-judge"
FAULTS = frozenset({"429", "500", "503", "400", "401", "hang", "truncated", "no_choices", "empty_choices",
                    "no_message", "null_content", "garbage", "echo_key_500", "echo_key_401"})
GARBAGE = "Purple monkey dishwasher; the answer is a banana."
PROMPT_DIR = Path(__file__).resolve().parent.parent / "prompts"


@dataclass(frozen=True)
class Reply:
    """A scripted reply. `top_logprobs` maps first-token candidates to probabilities (not logs)."""

    content: str
    top_logprobs: dict[str, float] | None = None


Responder = Callable[[dict[str, Any]], "str | Reply"]
Predicate = Callable[[int, dict[str, Any]], bool]


class OpenAIServer:
    """A started-on-demand loopback chat-completions server. Use as a context manager or start()/stop()."""

    def __init__(self, responder: Responder | None = None, latency: float = 0.0,
                 retry_after: float | str = 0.0, hang_seconds: float = 30.0, port: int = 0,
                 log: str | Path | None = None) -> None:
        self.responder: Responder = responder or format_aware
        self.latency = latency            # seconds slept before every reply (benchmarks)
        # The Retry-After header of a 429 or 503: seconds, or a string sent as is (an HTTP date).
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds  # a "hang" fault sleeps this long (or until stop())
        self.requests: list[dict[str, Any]] = []   # every request body, in arrival order
        self.received: list[float] = []            # time.time() of each request's arrival, same order
        self.headers: list[dict[str, str]] = []    # each request's headers (lower-case names), same order
        self.faults: dict[int, str] = {}           # request index -> fault
        self.rules: list[tuple[Predicate, str]] = []  # (predicate(index, body), fault), first match wins
        self.replies: deque[str | Reply] = deque()  # scripted replies, used before the responder
        self.errors: list[Exception] = []  # exceptions raised by the responder (answered with a 500)
        self.log = Path(log) if log is not None else None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._killed = threading.Event()
        # Replies being sent and logged; kill() waits for them, so the log holds every answer given before.
        self._answering = 0
        self._answered = threading.Condition()
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "OpenAIServer":
        """Bind and serve in a background thread."""
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", self._port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging handlers are released at once."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kill(self) -> None:
        """Die as a crashed replica does: requests in flight get no reply (their connection is cut),
        and new connections are refused. The log keeps only what was answered before."""
        with self._answered:
            self._killed.set()
            self._answered.wait_for(lambda: self._answering == 0, timeout=10)
        self.stop()

    @property
    def base_url(self) -> str:
        """The api_base for litellm: http://127.0.0.1:PORT/v1."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # ------------------------------------------------------------ scripting
    def fail_next(self, *faults: str | None) -> None:
        """The next len(faults) requests get these faults in order (None for a normal reply)."""
        with self._lock:
            start = len(self.requests)
            for offset, fault in enumerate(faults):
                if fault is not None:
                    self.faults[start + offset] = _checked(fault)

    def fail_when(self, predicate: Predicate, fault: str) -> None:
        """Every request for which predicate(index, body) is true gets `fault`."""
        self.rules.append((predicate, _checked(fault)))

    def reset(self) -> None:
        """Forget requests, faults, rules and scripted replies."""
        with self._lock:
            self.requests.clear()
            self.received.clear()
            self.headers.clear()
            self.faults.clear()
            self.rules.clear()
            self.replies.clear()
            self.errors.clear()

    # ------------------------------------------------------------ handling (called from handler threads)
    def _admit(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[str | None, str | Reply | None]:
        """Record the request; decide its fault and, if scripted, its reply."""
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.received.append(time.time())
            self.headers.append(headers)
            fault = self.faults.get(index)
            if fault is None:
                fault = next((f for pred, f in self.rules if pred(index, body)), None)
            scripted = self.replies.popleft() if fault is None and self.replies else None
        return fault, scripted


    def _write_log(self, arrived: float, body: dict[str, Any], fault: str | None) -> None:
        """Append the request's line to the log file (see the module docstring)."""
        params = {k: v for k, v in body.items() if k not in ("messages", "model", "stream")}
        blob = json.dumps([body.get("messages"), params], sort_keys=True, ensure_ascii=False)
        line = json.dumps({"arrived": arrived, "finished": time.time(), "status": fault or "200",
                           "digest": hashlib.sha256(blob.encode("utf-8")).hexdigest()})
        with self._lock, open(self.log, "a", encoding="utf-8") as out:  # type: ignore[arg-type]
            out.write(line + "\n")


def _checked(fault: str) -> str:
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; known: {sorted(FAULTS)}")
    return fault


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # 64+ clients connect at once in the benchmark; the default backlog is 5
    owner: OpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: the client reuses connections
    disable_nagle_algorithm = True  # header and body go out at once, no 40 ms delayed-ACK stalls
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (quiet tests)
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
        else:
            self._send(404, _error("not found", "invalid_request_error"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, _error("not found", "invalid_request_error"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, _error("request body is not JSON", "invalid_request_error"))
            return
        owner = self.server.owner
        if owner._killed.is_set():
            self.close_connection = True  # a dead server answers nothing
            return
        fault, scripted = owner._admit(body, {k.lower(): v for k, v in self.headers.items()})
        if fault == "hang":
            # Wait past any client timeout; stop() releases us. The client is gone by then.
            owner._stopping.wait(owner.hang_seconds)
            self.close_connection = True
            return
        arrived = time.time()
        if owner.latency:
            time.sleep(owner.latency)
        with owner._answered:
            if owner._killed.is_set():
                self.close_connection = True  # killed while this request was in flight: cut, unanswered
                return
            owner._answering += 1
        try:
            self._answer(owner, body, fault, scripted)
            if owner.log is not None:
                owner._write_log(arrived, body, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up first
        finally:
            with owner._answered:
                owner._answering -= 1
                owner._answered.notify_all()

    def _answer(self, owner: OpenAIServer, body: dict[str, Any], fault: str | None,
                scripted: str | Reply | None) -> None:
        retry_after = owner.retry_after if isinstance(owner.retry_after, str) else f"{owner.retry_after:g}"
        if fault == "429":
            self._send(429, _error("Rate limit reached for test-judge", "rate_limit_error", "rate_limit_exceeded"),
                       {"Retry-After": retry_after})
        elif fault == "503":
            self._send(503, _error("injected 503", "service_unavailable"), {"Retry-After": retry_after})
        elif fault in ("500", "400", "401"):
            kinds = {"500": "server_error", "400": "invalid_request_error", "401": "authentication_error"}
            self._send(int(fault), _error(f"injected {fault}", kinds[fault]))
        elif fault in ("echo_key_500", "echo_key_401"):
            # Some gateways quote the request back in their error text, credentials included.
            auth = self.headers.get("Authorization", "")
            status = int(fault[-3:])
            self._send(status, _error(f"upstream rejected request with Authorization: {auth} "
                                      f"(api_key={auth.removeprefix('Bearer ')})",
                                      "server_error" if status == 500 else "authentication_error"))
        elif fault == "truncated":
            text = json.dumps(completion(body, Reply("<output>1</output>")))
            self._send_raw(200, text[: len(text) // 2].encode())
        elif fault == "no_choices":
            payload = completion(body, Reply("<output>1</output>"))
            del payload["choices"]
            self._send(200, payload)
        elif fault == "empty_choices":
            self._send(200, {**completion(body, Reply("<output>1</output>")), "choices": []})
        elif fault == "no_message":
            payload = completion(body, Reply("<output>1</output>"))
            del payload["choices"][0]["message"]
            self._send(200, payload)
        elif fault == "null_content":
            payload = completion(body, Reply("<output>1</output>"))
            payload["choices"][0]["message"]["content"] = None
            self._send(200, payload)
        elif fault == "garbage":
            self._send(200, completion(body, Reply(GARBAGE)))
        else:
            try:
                reply = scripted or owner.responder(body)
            except Exception as exc:  # a broken responder is a test bug: make it loud, not a dropped socket
                owner.errors.append(exc)
                self._send(500, _error(f"responder failed: {exc!r}", "server_error"))
                return
            self._send(200, completion(body, reply))

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# ---------------------------------------------------------------- response bodies

def completion(request: dict[str, Any], reply: str | Reply) -> dict[str, Any]:
    """A chat.completion body for `reply`, with usage and, when asked, logprobs of the first token."""
    if isinstance(reply, str):
        reply = Reply(reply)
    content = reply.content
    if request.get("max_tokens") == 1:
        content = content[:1]  # what a real server does: one token, here one character
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                              "finish_reason": "length" if request.get("max_tokens") == 1 else "stop"}
    if request.get("logprobs"):
        choice["logprobs"] = {"content": [_token_logprobs(content, reply.top_logprobs,
                                                          int(request.get("top_logprobs") or 0))]}
    prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"chatcmpl-test-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [choice],
        "usage": {"prompt_tokens": max(1, prompt_chars // 4), "completion_tokens": completion_tokens,
                  "total_tokens": max(1, prompt_chars // 4) + completion_tokens},
    }


def _token_logprobs(content: str, top: dict[str, float] | None, k: int) -> dict[str, Any]:
    """The first token with its alternatives. Default: the sampled token 0.9, the other digit 0.08."""
    token = content[:1]
    if top is None:
        other = {"1": "0", "0": "1"}.get(token, "0")
        top = {token: 0.9, other: 0.08, " ": 0.02}
    ranked = sorted(top.items(), key=lambda kv: -kv[1])[: max(k, 1)]

    def entry(tok: str, p: float) -> dict[str, Any]:
        return {"token": tok, "logprob": math.log(p) if p > 0 else -9999.0, "bytes": list(tok.encode())}

    return {**entry(token, top.get(token, 1e-6)), "top_logprobs": [entry(t, p) for t, p in ranked]}


# ---------------------------------------------------------------- the format-aware responder

_VAR = re.compile(r"\{([a-z_]+)\}")
_ELEMENT = re.compile(r'<(\w+) id="(\d+)">\n(.*?)\n</\1>', re.S)
_STOP = frozenset(
    "the a an and or of to in on at for by with from is are was were be been being it its this that these "
    "those what which who whom whose when where why how does do did can could should would will may might "
    "has have had not no yes as than then there their they them he she his her we our you your i me my".split())


def _template_pattern(text: str) -> re.Pattern[str]:
    """A regex matching a rendered prompt, with one named group per variable.

    Rendered text escapes "<", so a value never contains "<": a plain value is `[^<]*`, and a
    list value is a run of `<tag id="N">` elements whose tag is the variable name without its
    plural "s" (sources -> source), so two adjacent list variables still split correctly.
    """
    parts, last, seen = [], 0, set()
    for match in _VAR.finditer(text):
        name = match.group(1)
        parts.append(re.escape(text[last:match.start()]))
        element = f'<{name[:-1]} id="\\d+">\n[^<]*\n</{name[:-1]}>'
        if name in seen:  # a variable used twice renders the same text twice
            parts.append(f"(?P={name})")
        elif name.endswith("s"):
            parts.append(f"(?P<{name}>[^<]*|{element}(?:\n{element})*)")
        else:
            parts.append(f"(?P<{name}>[^<]*)")
        seen.add(name)
        last = match.end()
    parts.append(re.escape(text[last:]))
    return re.compile("".join(parts), re.S)


_TEMPLATES: dict[str, re.Pattern[str]] | None = None


def identify(prompt: str) -> tuple[str, dict[str, str]] | None:
    """(prompt name, raw variable values) for a rendered prompt file, or None if it matches none."""
    global _TEMPLATES
    if _TEMPLATES is None:
        _TEMPLATES = {p.stem: _template_pattern(p.read_text(encoding="utf-8"))
                      for p in sorted(PROMPT_DIR.glob("*.txt"))}
    for name, pattern in _TEMPLATES.items():
        match = pattern.fullmatch(prompt)
        if match:
            return name, match.groupdict()
    return None


def elements(block: str) -> dict[int, str]:
    """The numbered elements of a rendered list variable: {1: text, 2: text, ...}."""
    return {int(m.group(2)): m.group(3) for m in _ELEMENT.finditer(block)}


def words(text: str) -> set[str]:
    """Content words: lower-case alphanumerics without stop words."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


def covered(text: str, context: str, share: float) -> bool:
    """True when at least `share` of the content words of `text` appear in `context`."""
    needed = words(text)
    return bool(needed) and len(needed & words(context)) >= share * len(needed)


def sentences(text: str) -> list[str]:
    """Sentences split on . ! ? followed by white space."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _decide(name: str, raw: dict[str, str]) -> str:
    """The answer body for one prompt: what goes inside <output>."""
    # List variables compare by their elements' text, not by the tags around them.
    v = {k: " ".join(elements(x).values()) or x for k, x in raw.items()}
    if name == "claims":
        return _bullets(sentences(v["input"]))
    if name == "subquestions":
        questions = [s for s in sentences(v["input"]) if s.endswith("?")]
        return _bullets(questions or sentences(v["input"]))
    if name == "essential":
        return "Essential" if covered(v["response"], v["query"], 1e-9) else "Extraneous"
    if name == "source_essential":
        return str(int(covered(v["query"], v["source"], 0.5)))
    if name == "groundedness":
        return str(int(covered(v["claim"], v["sources"], 0.75)))
    if name == "source_answers":
        return str(int(covered(v["question"], v["source"], 0.5)))
    if name == "response_addresses":
        return str(int(covered(v["question"], v["response"], 0.5)))
    if name == "essential_batch":
        return "\n".join(f"{i}: {'Essential' if covered(f, v['query'], 1e-9) else 'Extraneous'}"
                         for i, f in elements(raw["facts"]).items())
    if name == "source_essential_batch":
        return "\n".join(f"{i}: {int(covered(v['query'], s, 0.5))}" for i, s in elements(raw["sources"]).items())
    if name == "groundedness_batch":
        return "\n".join(f"{i}: {int(covered(c, v['sources'], 0.75))}" for i, c in elements(raw["claims"]).items())
    if name == "response_addresses_batch":
        return "\n".join(f"{i}: {int(covered(q, v['response'], 0.5))}"
                         for i, q in elements(raw["questions"]).items())
    if name == "source_answers_batch":
        srcs, lines = elements(raw["sources"]), []
        for qi, question in elements(raw["questions"]).items():
            lines += [f"Q{qi} S{si}: {int(covered(question, s, 0.5))}" for si, s in srcs.items()]
            lines.append(f"Q{qi} ALL: {int(covered(question, ' '.join(srcs.values()), 0.5))}")
        return "\n".join(lines)
    raise ValueError(f"no rule for prompt {name}")


def format_aware(request: dict[str, Any]) -> str:
    """Answer any prompts/*.txt prompt in its expected shape, deterministically.

    Rules (content words = lower-case words minus stop words):
    - claims: one bullet per sentence of the text; subquestions: its sentences ending in "?"
      (all sentences if none does); claims_batch: one <output id="N"> block per text.
    - essential: Essential when the fact shares a content word with the query.
    - source_essential / source_answers / response_addresses: 1 when at least half of the
      query's (question's) content words appear in the source (response).
    - groundedness: 1 when at least 75% of the claim's content words appear in the sources.
    - batch prompts: the same rule per numbered element ("N: 1", "Q1 S2: 0", "Q1 ALL: 1").
    With an assistant prefill "<output>" and logprobs asked the reply is the bare digit; any other prefill
    is sent back with the reply, as llama.cpp's server does.
    Unknown prompts get "<output>0</output>".
    """
    messages = request.get("messages", [])
    first_user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    found = identify(first_user)
    if found is None:
        return "<output>0</output>"
    name, values = found
    if name == "claims_batch":
        return "\n".join(f'<output id="{i}">\n{_bullets(sentences(t))}\n</output>'
                         for i, t in elements(values["texts"]).items())
    body = _decide(name, values)
    if request.get("logprobs") and messages and messages[-1].get("content") == "<output>":
        return body  # continue the prefill: the first character is the verdict digit
    # Any other prefill ("<output>\n", the local judge's) comes back whole, as llama.cpp's server sends it.
    return f"<output>\n{body}\n</output>"


def main() -> None:
    """Serve until interrupted, printing the base URL."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every reply")
    parser.add_argument("--log", default=None, help="append one JSON line per answered request to this file")
    args = parser.parse_args()
    with OpenAIServer(latency=args.latency, port=args.port, log=args.log) as server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    sys.exit(main())
