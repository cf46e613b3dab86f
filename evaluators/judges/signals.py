"""What the offline judge reads of a text: evidence windows, and each decision's signals as named numbers.

A source (or a response) is cut into windows, each sentence and each pair of adjacent sentences, with
their MiniLM vectors, content words, numbers and dates (`Passage`); a query into sub-questions with
their vectors, topic and focus words and answer types (`Query`). Both are built once per text and
reused by every prompt about it.

Each decision (evidence.py) reads a `Signals`: the named numbers a learned model weighs
(learned.py) and the window they came from, which the verdict's detail quotes. The numbers are plain
measurements (a cosine, a share of words, a count, a 0/1 check); none of them decides anything alone.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import AbstractSet, Sequence

import numpy as np

from evaluators.core.text import (
    answer_phrase,
    answer_type,
    answered_kind_words,
    asks_beyond_kind,
    content_pairs,
    content_stems,
    date_words,
    has_answer_type,
    names,
    negated,
    numbers,
    question_topic,
    refuses,
    resolved_sentences,
    share,
    split_questions,
    stem,
)
from evaluators.judges.embeddings import embed

# ---------------------------------------------------------------- evidence windows


@dataclass
class Passage:
    """A text cut into windows (each sentence and each pair of adjacent sentences) with their
    embeddings and words, built once per text and reused by every prompt about it."""

    windows: list[str]
    vectors: np.ndarray
    stems: Sequence[AbstractSet[str]]
    numbers: list[set[float]]
    dates: list[set[str]]
    all_stems: AbstractSet[str]
    all_names: set[str]
    all_numbers: set[float]
    all_pairs: AbstractSet[tuple[str, str]]


_PASSAGES: OrderedDict[str, Passage] = OrderedDict()
PAIR_REACH = 3  # a source's word pairs: up to this many content words apart (text.content_pairs)
PASSAGE_CACHE = 256  # passages kept: every prompt about one item reuses its sources' windows
_PASSAGE_LOCK = threading.Lock()


def passage(text: str) -> Passage:
    """The windows of a text, built once and kept for the other prompts about it."""
    with _PASSAGE_LOCK:
        cached = _PASSAGES.get(text)
        if cached is not None:
            _PASSAGES.move_to_end(text)
            return cached
    sentences = list(resolved_sentences(text))
    vectors = embed(sentences)
    lengths = np.array([len(s.split()) for s in sentences], dtype=np.float32)[:, None]
    # A pair's embedding is approximated by the length-weighted mean of its sentences' (mean
    # pooling makes this close: cosine 0.90-0.99 to the pair's own embedding) at no encoder cost.
    pairs = vectors[:-1] * lengths[:-1] + vectors[1:] * lengths[1:]
    pairs /= np.maximum(np.linalg.norm(pairs, axis=1, keepdims=True), 1e-9)
    windows = sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]
    stems = [content_stems(w) for w in sentences]
    nums = [numbers(w) for w in sentences]
    dates = [date_words(w) for w in sentences]
    n = len(sentences)
    built = Passage(
        windows,
        np.vstack([vectors, pairs]) if n > 1 else vectors,
        stems + [stems[i] | stems[i + 1] for i in range(n - 1)],
        nums + [nums[i] | nums[i + 1] for i in range(n - 1)],
        dates + [dates[i] | dates[i + 1] for i in range(n - 1)],
        set().union(*stems),
        names(text),
        set().union(*nums),
        frozenset().union(*(content_pairs(s, PAIR_REACH) for s in sentences)),
    )
    with _PASSAGE_LOCK:
        _PASSAGES[text] = built
        if len(_PASSAGES) > PASSAGE_CACHE:
            _PASSAGES.popitem(last=False)
    return built


@dataclass
class Query:
    """A query's sub-questions with their embeddings, topic words, focus words and answer types, and the
    embedding of what each asks about its topic (the sub-question without its topic phrase)."""

    questions: list[str]
    vectors: np.ndarray
    whole: np.ndarray
    topic: set[str]
    focus: Sequence[AbstractSet[str]]
    kinds: list[str | None]
    asked: np.ndarray


@lru_cache(maxsize=512)
def _query_parts(text: str) -> tuple[tuple[str, ...], tuple[str | None, ...], tuple[str, ...]]:
    """A query's sub-questions, their topic phrases and what each asks of its topic."""
    questions = split_questions(text)
    topics = [question_topic(q) for q in questions]
    # "Who was the Chimnabai Clock Tower named after?" asks "Who was named after?" of its topic: a
    # passage about the tower that never says whom it is named after is close to the first, not the second.
    # What is left must ask something beyond the kind of answer: "How long is" (of "How long is the Green
    # route crossing?") or "How long does take?" asks nothing MiniLM can read, so the whole question stands for it.
    asked = [
        " ".join(q.replace(t, " ").split()) if t and asks_beyond_kind(q.replace(t, " "), q) else q
        for q, t in zip(questions, topics)
    ]
    return tuple(questions), tuple(topics), tuple(asked)


def query_texts(text: str) -> tuple[str, ...]:
    """Every text `query` embeds: the sub-questions, the whole query and what each asks of its topic."""
    questions, _, asked = _query_parts(text)
    return questions + (text,) + asked


@lru_cache(maxsize=512)
def query(text: str) -> Query:
    """A query's sub-questions and what a decision reads of them, built once per query."""
    parts, topics, _ = _query_parts(text)
    questions = list(parts)
    vectors = embed(list(query_texts(text)))
    topic_words: set[str] = set()
    for found in topics:
        if found:
            topic_words |= content_stems(found)
    topic_words |= name_stems(text)
    # Each sub-question's focus is what it asks beyond its own subject and names: the ticket's "how much ...
    # cost", not less the words of another part's subject.
    focus = [
        content_stems(q) - (content_stems(t or "") | name_stems(q)) or content_stems(q)
        for q, t in zip(questions, topics)
    ]
    n = len(questions)
    return Query(
        questions, vectors[:n], vectors[n], topic_words, focus, [answer_type(q) for q in questions], vectors[n + 1 :]
    )


def name_in(name: str, known: AbstractSet[str], stems: AbstractSet[str]) -> bool:
    """A name occurs in the sources, allowing inflection (India/Indian, Pakistan/Pakistani) and accents
    written or not (Keflavík/Keflavik)."""
    if name in known or stem(name) in stems:
        return True
    name = _plain(name)
    return any(
        len(k) >= 4 and (name.startswith(k) or k.startswith(name)) and abs(len(k) - len(name)) <= 2 or k == name
        for k in map(_plain, known)
    )


@lru_cache(maxsize=16384)
def name_stems(text: str) -> frozenset[str]:
    """The stems of the names a text holds, built once per text (covers reads a window's for every question)."""
    return frozenset(stem(n) for n in names(text))


@lru_cache(maxsize=16384)
def _plain(word: str) -> str:
    """The word without its accents: "keflavík" is "keflavik"."""
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


# ---------------------------------------------------------------- signals


@dataclass(frozen=True)
class Signals:
    """A decision's measurements by name, the window of the text they were read from, and the checks
    that failed in plain words ("number 1856 not in the matching source sentences"), for the detail."""

    values: dict[str, float]
    window: str
    notes: tuple[str, ...] = ()
    about: str = ""  # the sub-question a source was read against (source_essential)


# Windows near the best one: a claim's numbers and dates must occur in one of the top few windows
# within this much cosine of the best (a number elsewhere in the sources belongs to another fact).
NEAR_WINDOWS = 3
NEAR_MARGIN = 0.1
NEGATION_WORDS = 0.7  # negation is compared when the best window holds at least this share of the claim's words

# Each decision's signals with the direction each argues in: +1 for a match, -1 against, 0 either way. A
# learned model's weight keeps its signal's sign (learned.py), so no fit can read a missing number as support.
SUPPORT = {
    "cosine": 1,
    "cosine_top": 1,
    "words_best": 1,
    "words_top": 1,
    "words_window": 1,
    "words_sources": 1,
    "missing_words": -1,
    "claim_words": 0,
    "pairs_sources": 1,
    "number_apart": -1,
    "number_absent": -1,
    "date_apart": -1,
    "names_missing": -1,
    "negation": -1,
}


def support(claim: str, sources: str) -> Signals:
    """How far the sources back a claim, from its best-matching windows and from the sources as a whole.

    - cosine, cosine_top: the best window's cosine to the claim, and the mean of the top NEAR_WINDOWS;
    - words_*: the share of the claim's content words in the best window, the top windows, any one
      window and the whole sources; missing_words: how many are nowhere (log 1+n); claim_words: log 1+n;
    - pairs_sources: the share of the claim's adjacent word pairs found in one source sentence or
      across the sources' sentences;
    - number_apart / date_apart: the claim's numbers (dates) are not together in a near window;
      number_absent: one is nowhere in the sources; names_missing: log 1+n names the sources never name;
    - negation: the claim and its best window differ in negation while sharing most words.
    """
    found = passage(sources)
    sims = found.vectors @ embed([claim])[0]
    top = [int(i) for i in np.argsort(-sims)[:NEAR_WINDOWS]]
    best = top[0]
    near = [i for i in top if sims[i] >= sims[best] - NEAR_MARGIN]
    words = content_stems(claim)
    top_words = set().union(*(found.stems[i] for i in top))
    pairs = content_pairs(claim)
    claim_numbers, claim_dates = numbers(claim), date_words(claim)
    words_best = share(words, found.stems[best]) if words else 1.0
    words_sources = share(words, found.all_stems) if words else 1.0
    number_apart = bool(claim_numbers) and not any(claim_numbers <= found.numbers[i] for i in near)
    date_apart = bool(claim_dates) and not any(claim_dates <= found.dates[i] for i in near)
    missing_names = sorted(n for n in names(claim) if not name_in(n, found.all_names, found.all_stems))
    negation = negated(claim) != negated(found.windows[best]) and words_best >= NEGATION_WORDS
    values = {
        "cosine": float(sims[best]),
        "cosine_top": float(np.mean(sims[top])),
        "words_best": words_best,
        "words_top": share(words, top_words) if words else 1.0,
        "words_window": max(share(words, s) for s in found.stems) if words else 1.0,
        "words_sources": words_sources,
        "missing_words": math.log1p(len(words) - round(words_sources * len(words))),
        "claim_words": math.log1p(len(words)),
        "pairs_sources": len(pairs & found.all_pairs) / len(pairs) if pairs else 1.0,
        "number_apart": float(number_apart),
        "number_absent": float(not claim_numbers <= found.all_numbers),
        "date_apart": float(date_apart),
        "names_missing": math.log1p(len(missing_names)),
        "negation": float(negation),
    }
    notes = []
    if number_apart:
        missing = sorted(claim_numbers - set().union(*(found.numbers[i] for i in near))) or sorted(claim_numbers)
        elsewhere = " (they occur elsewhere, not with this fact)" if claim_numbers <= found.all_numbers else ""
        notes.append(
            f"number {', '.join(_show_number(x) for x in missing)} not in the matching source sentences{elsewhere}"
        )
    if date_apart:
        notes.append(f"date {', '.join(sorted(claim_dates))} not in the matching source sentences")
    if missing_names:
        notes.append(f"{', '.join(missing_names)} never occurs in the sources")
    if negation:
        notes.append(f"{'the claim' if negated(claim) else 'the source'} negates the matching statement")
    return Signals(values, found.windows[best], tuple(notes))


def _show_number(x: float) -> str:
    return f"ordinal {-x:g}" if x < 0 else f"{x:g}"


# The window (or sub-question) a relevance decision reads is chosen by a fixed score, the same when
# fitting and when judging: cosine, plus FOCUS_WEIGHT times the share of the question's focus words
# present (and, for a window, as much again for the share of the names it asks about), minus one point for a window that refuses, lacks the kind of answer asked for, or only
# restates the question (any real answer wins over those), or minus TYPE_PENALTY for a component.
FOCUS_WEIGHT = 0.3
TYPE_PENALTY = 0.3
NAME_WORDS = 4  # a bare name: at most this many capitalized words
UNASKED_PENALTY = 0.5  # a response window of an untyped question that holds none of its focus words
REFUSED_FOCUS = 0.5  # a response's refusal is about a part when it holds at least this share of its focus words

ESSENTIAL = {
    "cosine": 1,
    "cosine_query": 1,
    "asked": 1,
    "focus": 1,
    "topic": 1,
    "typed": 1,
    "untyped": 0,
    "names": 1,
    "refuses": -1,
    "new_words": 0,
    "fact_words": 0,
}


def essential(fact: str, query_text: str) -> Signals:
    """How far a fact serves the query: its best sub-question's cosine, focus words and answer type, its
    cosine to the whole query and to what that sub-question asks of its topic, the share of the query's topic words and names it holds, whether it
    refuses, adds words of its own, and its length."""
    q = query(query_text)
    vector = embed([fact])[0]
    stems = content_stems(fact)
    sims = q.vectors @ vector
    best, l = -9.0, 0
    for k, question in enumerate(q.questions):
        score = (
            float(sims[k])
            + FOCUS_WEIGHT * share(q.focus[k], stems)
            - (0.0 if has_answer_type(fact, q.kinds[k], question) else TYPE_PENALTY)
        )
        if score > best:
            best, l = score, k
    asked = content_stems(q.questions[l])
    query_names = name_stems(query_text)
    values = {
        "cosine": float(sims[l]),
        "cosine_query": float(q.whole @ vector),
        "asked": float(q.asked[l] @ vector),
        "focus": share(q.focus[l], stems),
        "topic": share(q.topic, stems) if q.topic else 1.0,
        "typed": float(q.kinds[l] is not None and has_answer_type(fact, q.kinds[l], q.questions[l])),
        "untyped": float(q.kinds[l] is None),
        "names": share(query_names, stems | name_stems(fact)) if query_names else 1.0,
        "refuses": float(refuses(fact)),
        "new_words": share(stems - asked, stems) if stems else 0.0,
        "fact_words": math.log1p(len(stems)),
    }
    return Signals(values, q.questions[l])


# The window's plain cosine to the question is in its fixed score, not a signal of its own: fitted alone, it
# read any passage about the question's topic as an answer (on THELMA's A.1 and A.2, and WikiEval rows 0-19).
COVERS = {
    "score": 1,
    "asked": 1,
    "asked_any": 1,
    "focus": 1,
    "focus_text": 1,
    "names": 1,
    "typed": 1,
    "untyped": 0,
    "refuses": -1,
    "restates": -1,
    "answer_phrase": 1,
}
# A bare answer phrase ("Tomas Reed") shares little with its question: its closeness and the question's words
# and names in it argue either way.
PHRASE = {**COVERS, "score": 0, "asked": 0, "asked_any": 0, "focus": 0, "focus_text": 0, "names": 0}


def covers(text: str, question: str, response: bool = False) -> Signals:
    """How far a source (or a response) answers a sub-question, read from its best window (by the fixed score
    above): its cosine, focus words, the question's names, answer type, refusal, restating and the fixed score;
    the focus words anywhere in the text; the cosine of that window and of the best one to what the question asks
    of its topic; whether a response is a bare answer phrase of the right kind. The notes say why the best window
    answers nothing when it cannot."""
    q = query(question)
    found = passage(text)
    sims = found.vectors @ q.whole
    asked = content_stems(question)
    focus = asked - q.topic or asked
    kind = answer_type(question)
    phrase = response and answer_phrase(text)
    asked_names = name_stems(question)
    # A window holding an answer of the kind ("within 30 days", "costs 12 euros") holds the words that ask for it.
    typed = [has_answer_type(w, kind, question) for w in found.windows]
    answered = [answered_kind_words(question, w) if t else frozenset() for w, t in zip(found.windows, typed)]
    stems = [s | a for s, a in zip(found.stems, answered)]
    kinds = answered_kind_words(question)
    refused = _refused(found, focus) if response else []
    scored: list[tuple[float, int, str]] = []
    for i in refused or range(len(found.windows)):
        window = found.windows[i]
        score = float(sims[i]) + FOCUS_WEIGHT * share(focus, stems[i])
        # A response names the entity asked of in every part, so there it counts only beside something asked of
        # it: a focus word, or, where the question asks nothing else, an answer of the kind (a span, a date).
        if not response or focus <= kinds or share(focus, stems[i]) > 0:
            score += FOCUS_WEIGHT * _about(found.stems[i], window, asked_names, q.topic)
        why = ""
        if refuses(window):
            score, why = score - 1.0, "it says the answer is not available"
        elif not typed[i] and not (phrase and _bare_name(window, kind, question)):
            score, why = score - 1.0, f"no {kind} in it"
        elif not found.stems[i] - asked:
            score, why = score - 1.0, "it only restates the question"
        elif response and not phrase and kind is None and focus - kinds and not share(focus, stems[i]):
            # For a question of no kind ("How is it expected to enhance trade?") a response sentence about the subject
            # with none of its words answers another part (on sources it read WikiEval's SQC pairs 0.81 -> 0.72); a
            # bare phrase is the answer itself ("a client in the hospitality sector" to "Industry of X?").
            score, why = score - UNASKED_PENALTY, "none of what it asks in it"
        scored.append((score, i, why))
    score, i, why = max(scored, key=lambda c: c[0])  # the first best window, as Python's max keeps
    window = found.windows[i]
    asked_sims = found.vectors @ q.asked[0]
    values = {
        "score": score,
        "cosine": float(sims[i]),  # for the detail
        "asked": float(asked_sims[i]),
        "asked_any": float(np.max(asked_sims)),
        "focus": share(focus, stems[i]),
        "focus_text": share(focus, frozenset(found.all_stems).union(*answered)),
        "names": share(asked_names, found.stems[i] | name_stems(window)) if asked_names else 1.0,
        "typed": float(kind is None or typed[i] or bool(phrase and _bare_name(window, kind, question))),
        "untyped": float(kind is None),
        "refuses": float(refuses(window)),
        "restates": float(not found.stems[i] - asked),
        # A bare phrase ("Tomas Reed") with the kind asked for, new words and no refusal answers at any cosine.
        "answer_phrase": float(phrase and not why),
    }
    return Signals(values, window, (why,) if why else ())


def _refused(found: Passage, focus: frozenset[str]) -> list[int]:
    """The sentence windows of a response that say it cannot answer what a part asks ("However, I do not have
    information on when he resigned."): the part is answered by nothing else it says about the subject. Read in
    each sentence alone, as a pair of sentences holds the other one's answer too."""
    sentences = (len(found.windows) + 1) // 2
    return [
        i
        for i, w in enumerate(found.windows[:sentences])
        if refuses(w) and share(focus, found.stems[i]) >= REFUSED_FOCUS
    ]


def _about(stems: AbstractSet[str], window: str, asked_names: frozenset[str], topic: set[str]) -> float:
    """How far a window names the entity asked of: its names ("the Blue route", not a neighbour "the Red route"),
    or with none its topic ("electric scooters")."""
    if asked_names:
        return share(asked_names, stems | name_stems(window))
    return share(topic, stems) if topic else 0.0


def source_essential(source: str, query_text: str) -> Signals:
    """A source read against the sub-question of the query it serves best (by the fixed score of covers)."""
    found, question = max(
        ((covers(source, q), q) for q in query(query_text).questions), key=lambda pair: pair[0].values["score"]
    )
    return Signals(found.values, found.window, found.notes, question)


def _bare_name(phrase: str, kind: str | None, question: str) -> bool:
    """A bare name written as the answer to who/where ("Kestrel" for "Who manages the project?"):
    capitalized words only, none of them the question's."""
    words = phrase.strip(" .,;:").split()
    return (
        kind in ("person", "place")
        and 0 < len(words) <= NAME_WORDS
        and all(w[:1].isupper() for w in words)
        and not content_stems(phrase) & content_stems(question)
    )
