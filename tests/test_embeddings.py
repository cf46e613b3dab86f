"""Sentence embeddings: MiniLM loads quietly from its wheel and gives unit-length vectors."""
from __future__ import annotations

import asyncio

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


def test_the_encoder_process_batches_items_and_gives_the_same_sd_verdicts() -> None:
    # Several items' sentences, asked at once, reach the worker in few batches; each text's vector
    # (and so each SD verdict) matches the in-process encoding up to float rounding.
    from evaluators import metrics

    responses = [["The tower was completed in 1896.", "It was completed in 1896.", "Vadodara has gardens."],
                 ["Chimnabai I was a queen of Baroda State.", "The tower was named after her."],
                 ["Trams stopped at the tower.", "The tower was a stop for horse drawn trams.", "It is tall."]]
    embeddings._EMBED_CACHE.clear()

    async def from_the_worker() -> tuple[list[np.ndarray], int]:
        with embeddings.Encoder() as encoder:
            vectors = await asyncio.gather(*(encoder.embed(r) for r in responses))
            batches = next(encoder._ids)
        return vectors, batches

    batched, batches = asyncio.run(from_the_worker())
    assert batches <= 2  # the first item's texts alone, then the others together
    embeddings._EMBED_CACHE.clear()
    for sentences, vectors in zip(responses, batched):
        alone = embeddings.embed(sentences)
        assert np.allclose(vectors, alone, atol=1e-5)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-2)
        ours = metrics.sd_verdicts("x", metrics.Cosines(vectors))
        theirs = metrics.sd_verdicts("x", metrics.Cosines(alone))
        assert [(v.value, v.target) for v in ours] == [(v.value, v.target) for v in theirs]
        assert np.allclose([v.evidence for v in ours], [v.evidence for v in theirs], atol=1e-5)


def test_the_encoder_answers_cached_texts_itself_and_fails_visibly_without_its_worker() -> None:
    embeddings._EMBED_CACHE.clear()

    async def run() -> None:
        with embeddings.Encoder() as encoder:
            first = await encoder.embed(["The tower was completed in 1896.", "It is tall."])
            encoder._worker.kill()
            encoder._worker.join()
            again = await encoder.embed(["It is tall.", "The tower was completed in 1896."])  # cached: no worker needed
            assert np.array_equal(again, first[::-1])
            with pytest.raises(RuntimeError, match="sentence encoder"):
                await asyncio.wait_for(encoder.embed(["A text nobody encoded yet."]), 30)

    asyncio.run(run())
