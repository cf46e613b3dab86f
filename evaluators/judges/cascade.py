"""A judge cascade: each tier decides the verdicts it is sure of, the rest go on to the next tier.

`--judge offline>openai/gpt-4o-mini` asks the free offline judge first; a verdict whose p falls
inside that tier's uncertainty band (confidence.is_unsure for the way p was obtained) goes to the
next tier, and the last tier decides whatever reaches it. Batched prompts pass on only their unsure
elements, as a smaller batch of the same prompt numbered from 1, and the merged answer says which
tier decided each element (Answer.confidences), so every verdict records its tier.

A non-last tier's answer escalates whole when it failed (error, unparsed, not applicable, ...) or
carries no confidence at all (a label-only answer: nobody knows how sure it is). Decompositions
(claims, sub-questions, statements: any prompt whose answer is a list of texts) are not verdicts:
they come from the one tier the user names, by default the last.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace
from typing import Any, Sequence

from evaluators.core.confidence import Band, is_unsure
from evaluators.core.records import Answer, Confidence, Elements, Judge, Status
from evaluators.judges import prompts, registry
from evaluators.judges.traffic import CallStats

SEPARATOR = ">"
# Prompts whose parsed answer is a list of texts: a decomposition, never a match to escalate.
_DECOMPOSITION_PARSERS = (prompts.parse_list, prompts.parse_claims_batch)


def parse_chain(text: str) -> list[str]:
    """The tiers of a judge chain 'offline>local>openai/gpt-4o-mini', weakest first.

    Raises ValueError, with a one-line reason, on an empty tier, a tier with spaces inside, or a
    tier named twice. A single judge is a chain of one.
    """
    tiers = [t.strip() for t in text.split(SEPARATOR)]
    for n, tier in enumerate(tiers, 1):
        if not tier:
            raise ValueError(
                f"{text!r}: tier {n} of the chain is empty; a chain is TIER>TIER>..., each "
                "offline, local or a litellm model string"
            )
        if any(ch.isspace() for ch in tier):
            raise ValueError(
                f"{text!r}: tier {n} ({tier!r}) has a space inside; a tier is offline, local or a litellm model string"
            )
    twice = sorted({t for t in tiers if tiers.count(t) > 1})
    if twice:
        raise ValueError(f"{text!r}: {', '.join(twice)} appears twice in the chain; each tier is asked once")
    return tiers


def decomposer(tiers: Sequence[str], decompose_with: str | None) -> str:
    """The tier that decomposes (default: the last); ValueError when `decompose_with` is not a tier."""
    if decompose_with is None:
        return tiers[-1]
    if decompose_with.strip() not in tiers:
        raise ValueError(
            f"--decompose-with {decompose_with} is not a tier of the judge chain "
            f"{SEPARATOR.join(tiers)}; name one of {', '.join(tiers)}"
        )
    return decompose_with.strip()


def decomposes(prompt: str) -> bool:
    """Whether a prompt decomposes a text (its answer is a list of texts) rather than matching."""
    parser = registry.PARSERS[prompt]
    return isinstance(parser, prompts.ListParser) or parser in _DECOMPOSITION_PARSERS


def asked_keys(prompt: str, variables: dict[str, Any]) -> list[Any]:
    """The element keys a batched prompt asks for, in the numbering its parser gives them."""
    listed = variables[registry.BATCH_ELEMENTS[prompt]]
    if prompt == "source_answers_batch":  # (question number, source number or "all")
        targets = [*range(1, len(variables["sources"]) + 1), "all"]
        return [(n, t) for n in range(1, len(listed) + 1) for t in targets]
    return list(range(1, len(listed) + 1))


def narrowed(prompt: str, variables: dict[str, Any], unsure: Sequence[Any]) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The same batched prompt for the unsure elements only, renumbered from 1, and the way back.

    Returns the smaller batch's variables and {its key: the original key} for the elements wanted.
    source_answers_batch re-asks each question with an unsure element (against every source, as the
    prompt always does) and takes only the unsure elements of its answer.
    """
    name = registry.BATCH_ELEMENTS[prompt]
    if prompt == "source_answers_batch":
        questions = sorted({n for n, _ in unsure})
        wanted = set(unsure)
        sub = {**variables, name: [variables[name][n - 1] for n in questions]}
        targets = [*range(1, len(variables["sources"]) + 1), "all"]
        back = {(m, t): (n, t) for m, n in enumerate(questions, 1) for t in targets if (n, t) in wanted}
        return sub, back
    return {**variables, name: [variables[name][n - 1] for n in unsure]}, {m: n for m, n in enumerate(unsure, 1)}


_STAT_FIELDS = frozenset(f.name for f in fields(CallStats))


class _TotalStats:
    """The call totals of every tier that calls a model, summed when read (the progress bar reads it live)."""

    def __init__(self, judges: Sequence[Judge]) -> None:
        self._parts = [stats for j in judges if isinstance(stats := getattr(j, "stats", None), CallStats)]

    def __getattr__(self, name: str) -> Any:
        if name == "waiting_until":  # the progress bar shows the longest rate-limit wait of any tier
            return max((p.waiting_until for p in self._parts), default=0.0)
        if name == "endpoints":  # calls answered per endpoint, over every tier
            return dict(sum((Counter(p.endpoints) for p in self._parts), Counter()))
        if name in _STAT_FIELDS:
            return sum(getattr(p, name) for p in self._parts)
        raise AttributeError(name)

    def as_dict(self) -> dict[str, Any]:
        """The totals stored on the run."""
        return {k: getattr(self, k) for k in CallStats().as_dict()}


class CascadeJudge:
    """Asks its tiers in order; each decides what it is sure of, the last decides the rest.

    `name` is the last tier's label: an answer the cascade returns without a confidence can only
    come from the last tier (every other tier's final answers carry one), and ItemWork.verdict
    records such a label-only verdict under the judge's name. `chain` is the whole chain.
    """

    def __init__(
        self, tiers: Sequence[tuple[str, Judge]], decompose_with: str | None = None, band: Band | None = None
    ) -> None:
        if not tiers:
            raise ValueError("a cascade needs at least one tier")
        self.labels = [label for label, _ in tiers]
        self.judges = [judge for _, judge in tiers]
        self.chain = SEPARATOR.join(self.labels)
        self.name = self.labels[-1]
        self.decompose_with = decomposer(self.labels, decompose_with)
        self.band = band  # None: each kind of p has its default band
        self.stats = _TotalStats(self.judges)
        self.decided: Counter[str] = Counter()  # tier label -> matches (elements) it decided
        self.escalated: Counter[str] = Counter()  # tier label -> matches it passed on to the next tier

    async def ask(self, prompt: str, **variables: Any) -> Answer:
        """Answer `prompt`: a decomposition from the decomposing tier, a match through the tiers."""
        if decomposes(prompt):
            return await self.judges[self.labels.index(self.decompose_with)].ask(prompt, **variables)
        if prompt in registry.BATCH_ELEMENTS:
            return await self._batch(0, prompt, variables)
        return await self._single(0, prompt, variables)

    # ------------------------------------------------------------ internals
    def _sure(self, confidence: Confidence | None) -> bool:
        return confidence is not None and not is_unsure(confidence.p, confidence.kind, self.band)

    def _stamped(self, confidence: Confidence | None, k: int) -> Confidence | None:
        return self._stamp(confidence, k) if confidence is not None else None

    def _stamp(self, confidence: Confidence, k: int) -> Confidence:
        # The tier is recorded by its label in the chain ("local"), not by the model string it calls.
        return confidence._replace(tier=self.labels[k])

    async def _single(self, k: int, prompt: str, variables: dict[str, Any]) -> Answer:
        answer = await self.judges[k].ask(prompt, **variables)
        last = k == len(self.judges) - 1
        if last or (answer.status is Status.OK and self._sure(answer.confidence)):
            self.decided[self.labels[k]] += 1
            return replace(answer, confidence=self._stamped(answer.confidence, k))
        self.escalated[self.labels[k]] += 1
        return await self._single(k + 1, prompt, variables)

    async def _batch(self, k: int, prompt: str, variables: dict[str, Any]) -> Answer:
        answer = await self.judges[k].ask(prompt, **variables)
        asked = asked_keys(prompt, variables)
        label = self.labels[k]
        if k == len(self.judges) - 1:
            self.decided[label] += len(asked)
            return replace(
                answer,
                confidence=self._stamped(answer.confidence, k),
                confidences={key: self._stamp(c, k) for key, c in answer.confidences.items()},
            )
        if answer.status is not Status.OK:
            self.escalated[label] += len(asked)
            return await self._batch(k + 1, prompt, variables)
        value = answer.value
        sure = [key for key in asked if key in value and self._sure(answer.confidences.get(key, answer.confidence))]
        unsure = [key for key in asked if key not in set(sure)]
        self.decided[label] += len(sure)
        self.escalated[label] += len(unsure)
        confidences = {
            key: self._stamp(c, k) for key in sure if (c := answer.confidences.get(key, answer.confidence)) is not None
        }
        evidence = {key: answer.evidence.get(key, (None, answer.detail)) for key in sure}
        decided = {key: value[key] for key in sure}
        call_keys = {key: answer.call_keys.get(key, answer.call_key) for key in sure}
        if not unsure:
            return replace(
                answer,
                value=Elements(decided),
                confidence=None,
                confidences=confidences,
                evidence=evidence,
                call_keys=call_keys,
            )
        sub, back = narrowed(prompt, variables, unsure)
        deeper = await self._batch(k + 1, prompt, sub)
        call_keys |= {original: deeper.call_keys.get(key, deeper.call_key) for key, original in back.items()}
        failed = _merge_deeper(deeper, set(asked_keys(prompt, sub)), back, unsure, decided, evidence, confidences)
        # Each element points at the call that decided it (call_keys); the answer's own key is the
        # escalated call's, where the paid reply of this batch is kept.
        return Answer(
            Elements(decided, failed),
            Status.OK,
            deeper.call_key or answer.call_key,
            deeper.raw if deeper.raw is not None else answer.raw,
            evidence=evidence,
            confidences=confidences,
            call_keys=call_keys,
        )


def _merge_deeper(
    deeper: Answer,
    sub_keys: set[Any],
    back: dict[Any, Any],
    unsure: list[Any],
    decided: dict[Any, Any],
    evidence: dict[Any, Any],
    confidences: dict[Any, Confidence],
) -> dict[Any, tuple[Status, str]]:
    """Take what the next tier decided of the unsure elements into `decided`, `evidence` and `confidences`
    (under their original keys, `back` maps them); the elements it failed, by original key."""
    if deeper.status is not Status.OK:
        return {key: (deeper.status, deeper.detail) for key in unsure}
    got = deeper.value
    stray = [key for key in [*got, *getattr(got, "failed", {})] if key not in sub_keys]
    if stray:  # a reply that numbers elements not asked cannot be trusted to number the others right
        why = f"the reply numbers elements that were not asked ({', '.join(map(str, stray[:5]))})"
        return {key: (Status.UNPARSED, why) for key in unsure}
    failed: dict[Any, tuple[Status, str]] = {}
    for key, original in back.items():
        if key in got:
            decided[original] = got[key]
            evidence[original] = deeper.evidence.get(key, (None, deeper.detail))
            if (c := deeper.confidences.get(key, deeper.confidence)) is not None:
                confidences[original] = c
        elif key in getattr(got, "failed", {}):
            failed[original] = got.failed[key]
    # An element the smaller batch left out stays absent: the metric asks it alone, as always.
    return failed
