"""Dry runs: the judge calls, tokens and cost a run would need, counted before anything is called.

Every request a run would send is rendered and counted by a judge that answers with a plausible
shape. A cascade's offline tier is free, so it judges for real and the plan counts exactly what it
escalates; the plan also counts the cascade's last tier alone, to show what the cascade saves.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from evaluators.core.records import Answer, Item, Judge, JudgeCall, Status
from evaluators.core.text import split_sentences
from evaluators.judges import cascade, registry
from evaluators.judges.factory import LOCAL, OFFLINE, check_chain, judge_name
from evaluators.judges.llm import LLMJudge, count_tokens, price_per_token
from evaluators.judges.traffic import call_key
from evaluators.metrics import registry as metric_registry
from evaluators.metrics import thelma as metrics_mod
from evaluators.runs.runner import RunOptions, check_metrics
from evaluators.storage import queries


@dataclass
class Plan:
    """What a run would cost before anything is called.

    For a cascade: the totals over its tiers that call a model, each tier's own plan, how many
    matches each tier decides and passes on, and the plan of its last (strongest) tier alone.
    """

    items: int
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_prompt: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    tiers: dict[str, Plan] = field(default_factory=dict)
    decided: dict[str, int] = field(default_factory=dict)
    escalated: dict[str, int] = field(default_factory=dict)
    alone: Plan | None = None

    def text(self, judge: str) -> str:
        lines = [f"dry run with judge {judge}: {self.items} items to evaluate", *self._lines("  ")]
        if self.tiers or self.decided:
            for tier, plan in self.tiers.items() if len(self.tiers) > 1 else ():  # one paid tier: the totals
                lines += [f"  tier {tier}:", *plan._lines("    ")]
            lines.append(
                "  matches by tier: "
                + ", ".join(
                    f"{tier} decides {self.decided.get(tier, 0)}"
                    + (
                        f", escalates {self.escalated[tier]} ({self.escalated[tier] / self._reached(tier):.0%})"
                        if self.escalated.get(tier)
                        else ""
                    )
                    for tier in judge.split(cascade.SEPARATOR)
                )
            )
        if self.alone is not None:
            last = judge.split(cascade.SEPARATOR)[-1]
            lines += [f"  {last} alone:", *self.alone._lines("    ")]
            if self.alone.calls:
                saved = self.alone.calls - self.tiers[last].calls
                lines.append(
                    f"  the cascade sends {last} {self.tiers[last].calls} calls instead of "
                    f"{self.alone.calls} ({saved / self.alone.calls:.0%} fewer)"
                )
        return "\n".join(lines)

    def _reached(self, tier: str) -> int:
        return self.decided.get(tier, 0) + self.escalated.get(tier, 0)

    def _lines(self, indent: str) -> list[str]:
        cost = "unknown (no price known for this model)" if self.cost is None else f"${self.cost:.4f}"
        per = ", ".join(f"{k} {v}" for k, v in sorted(self.by_prompt.items()))
        return [
            f"{indent}judge calls {self.calls} ({self.cached} more answered from the cache): {per or 'none'}",
            f"{indent}tokens ~{self.prompt_tokens:,} in + ~{self.completion_tokens:,} out",
            f"{indent}estimated cost {cost}",
        ]

    def priced(self, model: str) -> Plan:
        """This plan with its cost, where litellm knows the model's price."""
        price = price_per_token(model)
        if price is not None:
            self.cost = self.prompt_tokens * price[0] + self.completion_tokens * price[1]
        return self


class _PlanJudge(LLMJudge):
    """Renders every request a run would send and counts it, answering with a plausible shape.

    Decompositions are guessed by sentence splitting unless the real one is cached, so counts
    are exact in batched mode and estimates per component.
    """

    def __init__(self, model: str, cache: dict[str, JudgeCall], logprob_binary: bool, plan: Plan) -> None:
        super().__init__(model, cache=cache, logprob_binary=logprob_binary, prefill_output=logprob_binary)
        self.plan = plan
        self.seen: set[str] = set()

    async def ask(self, prompt: str, **v: Any) -> Answer:
        spec, messages, params = self.request(prompt, **v)
        key = call_key(self.model, messages, params)
        if key in self.cache:
            self.plan.cached += 1
            return await super().ask(prompt, **v)
        value = _guess(prompt, v)
        if key in self.seen:  # an identical request is sent once and shared
            return Answer(value, Status.OK)
        self.seen.add(key)
        self.plan.calls += 1
        self.plan.by_prompt[prompt] = self.plan.by_prompt.get(prompt, 0) + 1
        self.plan.prompt_tokens += count_tokens(self.model, "\n".join(m["content"] for m in messages))
        out_chars = sum(len(x) for x in value) if prompt in ("claims", "subquestions") else 8 * _size(value)
        self.plan.completion_tokens += 1 if params.get("logprobs") else max(3, out_chars // 4)
        return Answer(value, Status.OK)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (dict, list)) else 1


def _guess(prompt: str, v: dict[str, Any]) -> Any:
    if prompt in metric_registry.SUITE_PROMPTS:
        return registry.OFFLINE_ANSWERS[prompt](**v).value  # the parsed shape each suite metric reads
    if prompt == "claims":
        return split_sentences(v["input"])
    if prompt == "subquestions":
        return [q.strip() + "?" for q in v["input"].split("?") if q.strip()] or [v["input"]]
    if prompt == "claims_batch":
        return {i: split_sentences(t) for i, t in enumerate(v["texts"], 1)}
    if prompt == "source_answers_batch":
        return {(l, t): 1 for l in range(1, len(v["questions"]) + 1) for t in [*range(1, len(v["sources"]) + 1), "all"]}
    lists = [x for x in v.values() if isinstance(x, list)]
    if lists:
        return {i: 1 for i in range(1, len(lists[0]) + 1)}
    return 1


def plan(items: Sequence[Item], db: str | Path, run: str, options: RunOptions) -> Plan:
    """Count the judge calls, tokens and cost a run would need, calling nothing.

    For a cascade the offline tier, being free, judges for real, so the plan counts exactly what it
    would escalate; a tier that calls a model answers a plausible shape without a confidence, so a
    non-last one is counted as escalating everything it is asked (an upper bound). The plan also
    counts the last tier alone, to show what the cascade saves.
    """
    metrics = check_metrics(options.metrics)
    tiers, decomposer = check_chain(options.judge.spec, options.judge.decompose_with)
    exists = Path(db).exists()
    done = queries.runs.done_item_ids(db, run) if exists else set()
    todo = [i for i in items if i.id not in done]
    chosen = {m: metric_registry.METRICS[m] for m in metrics if m != "sd"}  # SD calls no judge
    per_component = options.per_component or LOCAL in tiers

    def planner(tier: str, into: Plan) -> _PlanJudge:
        model = judge_name(tier)
        return _PlanJudge(model, queries.runs.load_cache(db, model) if exists else {}, tier == LOCAL, into)

    def walk(asked: Judge) -> None:
        async def every() -> None:
            for item in todo:
                await metrics_mod.evaluate_item(item, chosen, asked, per_component, options.sd_threshold)

        asyncio.run(every())

    if tiers == [OFFLINE]:
        return Plan(items=len(todo))
    if len(tiers) == 1:
        result = Plan(items=len(todo))
        walk(planner(tiers[0], result))
        return result.priced(judge_name(tiers[0]))

    from evaluators.judges.offline import OfflineJudge

    plans = {tier: Plan(items=len(todo)) for tier in tiers if tier != OFFLINE}
    chain = cascade.CascadeJudge(
        [(t, OfflineJudge() if t == OFFLINE else planner(t, plans[t])) for t in tiers], decomposer
    )
    walk(chain)
    alone = None
    if tiers[-1] != OFFLINE:
        alone = Plan(items=len(todo))
        walk(planner(tiers[-1], alone))
        alone.priced(judge_name(tiers[-1]))
    for tier, part in plans.items():
        part.priced(judge_name(tier))
    return _chain_plan(len(todo), plans, chain, alone)


def _chain_plan(n_items: int, plans: dict[str, Plan], chain: cascade.CascadeJudge, alone: Plan | None) -> Plan:
    """A cascade's plan: its tiers' plans summed, with what each tier decided and escalated."""
    costs = [p.cost for p in plans.values() if p.calls]
    return Plan(
        items=n_items,
        calls=sum(p.calls for p in plans.values()),
        cached=sum(p.cached for p in plans.values()),
        prompt_tokens=sum(p.prompt_tokens for p in plans.values()),
        completion_tokens=sum(p.completion_tokens for p in plans.values()),
        by_prompt=dict(sum((Counter(p.by_prompt) for p in plans.values()), Counter())),
        cost=None if None in costs else sum(c or 0.0 for c in costs),
        tiers=plans,
        decided=dict(chain.decided),
        escalated=dict(chain.escalated),
        alone=alone,
    )
