"""Judge calls and tokens per sample for every metric: each other suite's metric alone, each suite, and THELMA.

Runs the real engine through litellm against the loopback OpenAI-protocol server (tests/openai_server.py)
with a format-aware responder that also answers the other suites' prompts. The sample is the realistic
triplet the tests use (3 sources, a 5-claim response, a 2-part query) plus a reference answer, in
N variants so that work a run shares across items (G-Eval's evaluation steps) is amortised as in a
real run. Token counts are the server's (about 4 characters a token); replies are terse, so
completion tokens are a lower bound for a real judge that explains itself.

    .venv/bin/python benchmarks/cost.py [--samples 10]
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("OPENAI_API_KEY", "x")

from openai_server import OpenAIServer, covered, elements, format_aware, identify, sentences, words  # noqa: E402
from test_runner import TRIPLET  # noqa: E402  (the realistic triplet the tests use)

from evaluators.core.records import Item, Status  # noqa: E402
from evaluators.judges.llm import LLMJudge  # noqa: E402
from evaluators.judges.peers import ragas as ragas_prompts  # noqa: E402
from evaluators.metrics import registry  # noqa: E402
from evaluators.metrics import thelma as metrics
from evaluators.metrics.registry import THELMA  # noqa: E402

REFERENCE = "The Chimnabai Clock Tower was completed in 1896. It was named in memory of Chimnabai I, a queen of Baroda State."
SUITES = {
    "RAGAS": [m for m in registry.SUITE_METRICS if m.startswith("ragas_")],
    "Nvidia": [m for m in registry.SUITE_METRICS if m.startswith("nv_")],
    "DeepEval": [m for m in registry.SUITE_METRICS if m.startswith("de_")],
    "THELMA": list(THELMA),
}


# ---------------------------------------------------------------- the format-aware responder

def _tagged(lines: Sequence[str]) -> str:
    return "<output>\n" + "\n".join(lines) + "\n</output>"


def _verdicts(items: dict[int, str], yes: Any, no: str = "no") -> list[str]:
    """Lines "N: word - reason"; `yes(text)` decides each element."""
    return [f"{i}: yes - its content words appear in the text given" if yes(t) else
            f"{i}: {no} - its content words are not in the text given" for i, t in items.items()]


def _rating(share: float, scale: Sequence[tuple[float, int]]) -> str:
    return _tagged([str(next((r for bound, r in scale if share >= bound), 0))])


def _share(text: str, context: str) -> float:
    needed = words(text)
    return len(needed & words(context)) / len(needed) if needed else 0.0


def suite_answer(name: str, raw: dict[str, str]) -> str:
    """Deterministic word-overlap answers to the other suites' prompts, in the shape each parser reads."""
    v = {k: " ".join(elements(x).values()) or x for k, x in raw.items()}
    claims = elements(raw.get("claims", ""))
    sources = elements(raw.get("sources", ""))
    if name in ("ragas_statements", "de_statements"):
        return _tagged([f"- {s}" for s in sentences(v.get("response") or v["input"])])
    if name == "ragas_questions":
        said = sentences(v["response"])
        return _tagged([f"- What about {said[k % len(said)].rstrip('.!?')}?" for k in range(ragas_prompts.N_QUESTIONS)])
    if name in ("ragas_faithfulness", "de_contextual_recall"):
        return _tagged(_verdicts(claims, lambda c: covered(c, v["sources"], 0.75)))
    if name == "de_faithfulness":
        return _tagged(_verdicts(claims, lambda c: covered(c, v["sources"], 0.75), no="idk"))
    if name == "de_answer_relevancy":
        return _tagged(_verdicts(claims, lambda c: covered(c, v["query"], 1e-9)))
    if name == "de_hallucination":
        return _tagged([f"{j}: yes - the output does not contradict this context" for j in sources])
    if name == "de_contextual_precision":
        return _tagged(_verdicts(sources, lambda s: covered(v["reference"], s, 0.3)))
    if name == "ragas_context_sentences":
        found = [f"- {s}" for s in sentences(v["sources"]) if covered(s, v["query"], 1e-9)]
        return _tagged(found or ["Insufficient Information"])
    if name == "de_contextual_relevancy":
        return _tagged([f"{'yes' if covered(s, v['query'], 1e-9) else 'no'}: {s}" for s in sentences(v["source"])])
    if name.startswith("nv_answer_accuracy"):
        return _rating(_share(v["response"], v["reference"]), ((0.75, 4), (0.3, 2)))
    if name.startswith("nv_context_relevance"):
        return _rating(_share(v["query"], v["sources"]), ((0.5, 2), (0.2, 1)))
    if name.startswith("nv_groundedness"):
        return _rating(_share(v["response"], v["sources"]), ((0.75, 2), (0.4, 1)))
    if name == "de_geval_steps":
        return _tagged(["- Check that the actual output answers every part of the input.",
                        "- Check each statement of the actual output against the retrieval context.",
                        "- Penalise irrelevant, contradicted or invented statements."])
    if name == "de_geval_score":
        return _tagged([str(1 + round(4 * _share(v["response"], v["sources"])))])
    raise ValueError(f"no rule for prompt {name}")


def responder(request: dict[str, Any]) -> str:
    """The other suites' prompts answered here; THELMA's by the server's own format-aware responder."""
    found = identify(next(m["content"] for m in request["messages"] if m["role"] == "user"))
    if found and found[0] in registry.SUITE_PROMPTS:
        return suite_answer(*found)
    return format_aware(request)


# ---------------------------------------------------------------- measuring

def samples(n: int) -> list[Item]:
    """n variants of the triplet, with a reference: distinct requests, so nothing is cached across them."""
    return [dataclasses.replace(TRIPLET, id=f"s{k}", query=f"{TRIPLET.query} (case {k})",
                                sources=tuple(f"{s} Record {k}." for s in TRIPLET.sources),
                                response=f"{TRIPLET.response} Case {k}.", reference=f"{REFERENCE} Record {k}.")
            for k in range(n)]


def measure(server: OpenAIServer, names: list[str], items: list[Item], per_component: bool = False) -> dict[str, Any]:
    """Calls and tokens per sample for `names` on a fresh judge (its cache spans the items, as in a run)."""
    server.reset()
    judge = LLMJudge("openai/test-judge", api_base=server.base_url, api_key="x", timeout=10.0, max_attempts=2)

    chosen = {m: registry.METRICS[m] for m in names}

    async def go() -> list[Any]:
        return [await metrics.evaluate_item(i, chosen, judge, per_component) for i in items]

    results = asyncio.run(go())
    scores = [s for r in results for s in r.scores]
    n = len(items)
    return {"calls": len(server.requests) / n, "prompt": judge.stats.prompt_tokens / n,
            "completion": judge.stats.completion_tokens / n,
            "scored": sum(s.status is Status.OK for s in scores), "total": len(scores)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    items = samples(args.samples)
    rows: list[tuple[str, dict[str, Any]]] = []
    with OpenAIServer(responder=responder) as server:
        for name in registry.SUITE_METRICS:
            rows.append((name, measure(server, [name], items)))
        for suite, names in SUITES.items():
            rows.append((f"{suite} suite ({len(names)} metrics)", measure(server, names, items)))
        for name in THELMA:
            rows.append((f"{name} (THELMA)", measure(server, [name], items)))
        rows.append(("THELMA suite, per component", measure(server, list(THELMA), items, True)))
    print(f"Per sample, mean over {len(items)} samples (3 sources, 5-claim response, 2-part query, a reference):\n")
    print("| metric | judge calls | prompt tokens | completion tokens | total tokens | scored |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in rows:
        total = m["prompt"] + m["completion"]
        print(f"| {name} | {m['calls']:.1f} | {m['prompt']:,.0f} | {m['completion']:,.0f} | {total:,.0f} | "
              f"{m['scored']}/{m['total']} |")


if __name__ == "__main__":
    main()
