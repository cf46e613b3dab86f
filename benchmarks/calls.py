"""Judge calls and tokens per triplet for the THELMA suite, batched vs per component, and a rerun.

Runs the real engine through litellm against the loopback OpenAI-protocol server (tests/openai_server.py)
on a realistic triplet: 3 sources, a 5-claim response, a 2-part query.

    .venv/bin/python benchmarks/calls.py
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("OPENAI_API_KEY", "x")

from openai_server import OpenAIServer, identify  # noqa: E402
from test_runner import TRIPLET  # noqa: E402  (the realistic triplet the tests use)

from evaluators.runs import runner  # noqa: E402


def measure(server: OpenAIServer, db: Path, run: str, per_component: bool) -> tuple[int, int, dict[str, int]]:
    server.reset()
    summary = runner.evaluate([TRIPLET], db, run, "openai/test-judge", api_base=server.base_url,
                              per_component=per_component)
    by_prompt: dict[str, int] = {}
    for request in server.requests:
        name = (identify(request["messages"][0]["content"]) or ("?",))[0]
        by_prompt[name] = by_prompt.get(name, 0) + 1
    tokens = summary.stats["prompt_tokens"] + summary.stats["completion_tokens"]
    return len(server.requests), tokens, by_prompt


def main() -> None:
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        rows = []
        for mode, per in (("batched", False), ("per-component", True)):
            calls, tokens, by_prompt = measure(server, Path(tmp) / f"{mode}.duckdb", mode, per)
            rows.append((mode, calls, tokens, by_prompt))
        rerun_calls, _, _ = measure(server, Path(tmp) / "batched.duckdb", "batched", False)
        print("| mode | judge calls / triplet | tokens / triplet | calls by prompt |")
        print("|---|---|---|---|")
        for mode, calls, tokens, by_prompt in rows:
            detail = ", ".join(f"{k} {v}" for k, v in sorted(by_prompt.items()))
            print(f"| {mode} | {calls} | {tokens:,} | {detail} |")
        print(f"\nrerun of the finished batched run: {rerun_calls} judge calls (target 0)")
        print(f"batched target <= 8 calls per triplet: {'met' if rows[0][1] <= 8 else 'MISSED'}")


if __name__ == "__main__":
    main()
