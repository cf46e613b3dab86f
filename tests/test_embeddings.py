"""Sentence embeddings: MiniLM loads quietly from its wheel and gives unit-length vectors."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from evaluators import embeddings


def test_model_loads_without_a_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    embeddings._load_model.cache_clear()
    embeddings.embed(["load the model again"])
    assert "Loading weights" not in capfd.readouterr().err


def test_embeddings_are_unit_length_one_row_per_text_and_empty_for_nothing() -> None:
    vectors = embeddings.embed(["The tower was completed in 1896.", "It is tall.", "The tower was completed in 1896."])
    assert vectors.shape == (3, embeddings.DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-2)  # bfloat16 on AMX CPUs
    assert np.array_equal(vectors[0], vectors[2])  # one encoding per distinct text
    assert embeddings.embed([]).shape == (0, embeddings.DIMENSIONS)


def test_batches_group_texts_of_like_length_within_the_padding_bound() -> None:
    lengths = [5, 120, 6, 30, 7, 31, 118, 5, 29] + [10] * 40
    groups = embeddings._batches(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # every text once
    for g in groups:
        real = sum(lengths[i] for i in g)
        assert len(g) <= embeddings.BATCH
        assert max(lengths[i] for i in g) * len(g) <= (1 + embeddings.PADDING) * real
    assert {frozenset(g) for g in groups} >= {frozenset({1, 6})}  # the two long texts share a batch
    assert len(groups) < len(lengths) / 4  # few passes: each one costs milliseconds before its first token


def test_batched_vectors_equal_one_text_at_a_time() -> None:
    texts = ["Short one.", "A much longer sentence about the clock tower, its builders and the year 1896, "
             "with enough words to be padded against the short ones.", "Mid-length text on the tower.", "Tall."]
    embeddings._EMBED_CACHE.clear()
    together = embeddings.embed(texts)
    alone = np.stack([embeddings._encode(embeddings._model(), [t])[0] for t in texts])
    # each text's own vector (another text's is far off); bfloat16 on AMX CPUs moves them a little with the batch
    assert np.allclose(together, alone, atol=5e-3)


def test_threads_encoding_at_once_never_trip_over_the_tokenizer() -> None:
    """Threads encode side by side (the runner's prompts run in a pool): counting one prompt's tokens
    must not change the padding of another's batch in flight."""
    def work(k: int) -> None:
        for j in range(60):  # texts of near lengths: one batch, padded, per call
            texts = [f"Text {k} {j} {n}: " + "tower " * (8 + n) for n in range(4)]
            assert embeddings.embed(texts).shape == (4, embeddings.DIMENSIONS)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(work, range(6)))
