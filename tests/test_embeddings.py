"""Sentence embeddings: MiniLM loads quietly from its wheel and gives unit-length vectors."""
from __future__ import annotations

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
