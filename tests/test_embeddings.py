"""Sentence embeddings: MiniLM exported once from its wheel, run by ONNX Runtime, equal to
sentence-transformers' own vectors, unit length."""
from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from evaluators.judges import embeddings

TEXTS = ["Short one.", "A much longer sentence about the clock tower, its builders and the year 1896, "
         "with enough words to be padded against the short ones.", "Mid-length text on the tower.", "Tall.",
         "", "word " * 300]  # an empty text, and one cut at MAX_TOKENS


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty user cache, and the encoder loaded anew from it; the real one again afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    embeddings._encoder.cache_clear()
    embeddings._EMBED_CACHE.clear()
    yield embeddings.model_file()
    embeddings._encoder.cache_clear()
    embeddings._EMBED_CACHE.clear()


def test_the_first_use_exports_the_model_quietly_and_keeps_it(fresh_cache: Path,
                                                                capfd: pytest.CaptureFixture[str]) -> None:
    assert not fresh_cache.exists()
    embeddings.embed(["export the model"])
    assert fresh_cache.stat().st_size > 80_000_000  # MiniLM's 22M float32 weights
    assert "Loading weights" not in capfd.readouterr().err
    assert not list(fresh_cache.parent.glob("*.part"))  # written whole, then renamed


def test_a_damaged_model_file_is_exported_again(fresh_cache: Path) -> None:
    fresh_cache.parent.mkdir(parents=True)
    fresh_cache.write_bytes(b"half a model")
    assert embeddings.embed(["still encodes"]).shape == (1, embeddings.DIMENSIONS)
    assert fresh_cache.stat().st_size > 80_000_000


def test_a_cache_that_cannot_be_written_still_encodes(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    blocked = fresh_cache.parents[1] / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert embeddings.embed(["encodes all the same"]).shape == (1, embeddings.DIMENSIONS)
    assert "MiniLM's exported model not kept" in caplog.text
    assert not embeddings.model_file().exists()


def test_vectors_equal_sentence_transformers_own() -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(embeddings._weights()), device="cpu")
    reference.max_seq_length = embeddings.MAX_TOKENS
    embeddings._EMBED_CACHE.clear()
    assert np.abs(embeddings.embed(TEXTS) - reference.encode(TEXTS, normalize_embeddings=True)).max() < 1e-5


def test_embeddings_are_unit_length_one_row_per_text_and_empty_for_nothing() -> None:
    vectors = embeddings.embed(["The tower was completed in 1896.", "It is tall.", "The tower was completed in 1896."])
    assert vectors.shape == (3, embeddings.DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[2])  # one encoding per distinct text
    assert embeddings.embed([]).shape == (0, embeddings.DIMENSIONS)


def _tokens(lengths: list[int], groups: list[list[int]]) -> int:
    """What encoding `groups` costs in tokens: each pass's own cost, and each text padded to its group's longest."""
    return sum(embeddings.PASS_TOKENS + len(g) * max(lengths[i] for i in g) for g in groups)


def test_batches_group_texts_of_like_length_at_the_least_cost() -> None:
    lengths = [5, 120, 6, 30, 7, 31, 118, 5, 29] + [10] * 40
    groups = embeddings._batches(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # every text once
    assert all(len(g) <= embeddings.BATCH for g in groups)
    assert {frozenset(g) for g in groups} >= {frozenset({1, 6})}  # the two long texts share a batch
    # Short texts of different lengths share one pass: padding them costs less than a pass of their own.
    assert embeddings._batches([4, 8, 12, 16]) == [[0, 1, 2, 3]]


def test_batches_cost_no_more_than_any_other_split_by_length() -> None:
    lengths = [23, 5, 61, 9, 14, 40, 7, 12]
    by_length = sorted(range(len(lengths)), key=lengths.__getitem__)
    splits = [
        [by_length[a:b] for a, b in zip((0, *cuts), (*cuts, len(lengths)))]
        for k in range(len(lengths))
        for cuts in itertools.combinations(range(1, len(lengths)), k)
    ]
    assert _tokens(lengths, embeddings._batches(lengths)) == min(_tokens(lengths, s) for s in splits)


def test_batched_vectors_equal_one_text_at_a_time() -> None:
    together = embeddings._encode(TEXTS)
    alone = np.stack([embeddings._encode([t])[0] for t in TEXTS])
    assert np.abs(together - alone).max() < 1e-5  # padding changes nothing; another text's vector is far off


def test_threads_encoding_at_once_each_get_their_own_vectors() -> None:
    """Threads encode side by side (the runner's prompts run in a pool) through one session and tokenizer."""
    embeddings._EMBED_CACHE.clear()
    expected = {t: embeddings._encode([t])[0] for t in (f"Text {k}: " + "tower " * (8 + k) for k in range(6))}

    def work(k: int) -> None:
        for j in range(40):  # texts of near lengths: one batch, padded, per call
            mine = f"Text {k}: " + "tower " * (8 + k)
            texts = [f"Text {k} {j} {n}: " + "tower " * (8 + n) for n in range(4)] + [mine]
            vectors = embeddings.embed(texts)
            assert np.abs(vectors[-1] - expected[mine]).max() < 1e-5

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(work, range(6)))
