"""Which of litellm's providers send a call to the api_base they are given, and to nowhere else.

Each provider is called once through litellm (`PROVIDER/probe-model`, a key, an api_base on a loopback
server that answers any request) while every host name this process looks up is recorded. A provider
honours the api_base when the request reached the loopback server and no other host was looked up;
one that looked up its own host (replicate/, huggingface/) would have sent the key there. Prints the
providers that honour it, those that do not with what happened, and how that list compares with
evaluators/judges/routes.py's HONOURS_API_BASE (exit 1 when a listed provider no longer honours it).

    python -m benchmarks.api_base_probe [PROVIDER ...]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import evaluators  # noqa: F401  (litellm's offline switches)
from evaluators.judges.routes import HONOURS_API_BASE

KEY = "sk-probe-0123456789"
_REPLY = json.dumps(
    {
        "id": "probe",
        "object": "chat.completion",
        "created": 1,
        "model": "probe-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "1"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


@dataclass(frozen=True)
class Probe:
    """What one provider did with an api_base: whether the call reached it, the other hosts it looked up,
    and the error litellm raised ("" for none)."""

    provider: str
    reached: bool
    elsewhere: tuple[str, ...]
    error: str

    @property
    def honours(self) -> bool:
        """The call reached the api_base, and no other host was looked up."""
        return self.reached and not self.elsewhere


class _AnyRequest(BaseHTTPRequestHandler):
    """Answers every request, whatever its path or method, with a chat completion, and records its path."""

    paths: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(_REPLY)))
        self.end_headers()
        self.wfile.write(_REPLY)

    do_GET = do_POST = do_PUT = _answer


def probe(providers: Sequence[str]) -> Iterator[Probe]:
    """Call each provider once with an api_base on a loopback server; yield what it did."""
    import litellm

    server = ThreadingHTTPServer(("127.0.0.1", 0), _AnyRequest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def recording(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in ("127.0.0.1", "localhost", None):
            looked_up.append(str(host))
        return real(host, *args, **kwargs)

    socket.getaddrinfo = recording  # type: ignore[assignment]
    try:
        for provider in providers:
            _AnyRequest.paths.clear()
            looked_up.clear()
            error = ""
            try:
                litellm.completion(
                    model=f"{provider}/probe-model",
                    api_base=base,
                    api_key=KEY,
                    messages=[{"role": "user", "content": "hi"}],
                    timeout=4,
                    max_retries=0,
                )
            except Exception as exc:  # a provider that refuses or fails: recorded, not raised
                error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:120]}"
            yield Probe(provider, bool(_AnyRequest.paths), tuple(sorted(set(looked_up))), error)
    finally:
        socket.getaddrinfo = real  # type: ignore[assignment]
        server.shutdown()


def all_providers() -> list[str]:
    """Every provider litellm lists."""
    import litellm

    return sorted({getattr(p, "value", p) for p in litellm.provider_list})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("providers", nargs="*", help="the providers to try (default: every one litellm lists)")
    args = parser.parse_args(argv)
    found = list(probe(args.providers or all_providers()))
    honours = sorted(p.provider for p in found if p.honours)
    print(f"{len(honours)} of {len(found)} providers send a call to the api_base given and to no other host:")
    print(" ".join(honours))
    print("\nthe others:")
    for p in found:
        if not p.honours:
            where = f"looked up {', '.join(p.elsewhere)}" if p.elsewhere else "did not reach the api_base"
            print(f"  {p.provider}: {where}{'; ' + p.error if p.error else ''}")
    tried = {p.provider for p in found}
    lost = sorted((HONOURS_API_BASE & tried) - set(honours))
    new = sorted(set(honours) - HONOURS_API_BASE)
    print(f"\nroutes.HONOURS_API_BASE: {len(HONOURS_API_BASE)} listed; no longer honour it: {lost or 'none'}; "
          f"honour it and are not listed: {new or 'none'}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
