"""A small, realistic, seeded test database for the dashboard tests.

Three runs of the same six queries, written through writes.write_batch like the engine does:
- "weak-retriever"   offline judge: every Table-2 rule fires on some item;
- "better-retriever" offline judge, same prompts: q01 and q02 fixed, q01's claims rewritten;
- "llm-judge"        an LLM judge with other prompt hashes, judge_calls rows, and failures
                     (unparsed, error, timeout) plus an empty response (status empty).
q05's response carries an HTML/script injection that must render as text.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evaluators.core.records import Component, Item, JudgeCall, Run, Score, Status, Verdict
from evaluators.storage import ownership, store, wide, writes

INJECTION = '<script>alert("pwned")</script><b>bold</b>'
RUNS = ("weak-retriever", "better-retriever", "llm-judge")
OFFLINE_PROMPTS = {"claims": "c1a2b3c4d5e6", "essential": "e1a2b3c4d5e6", "groundedness": "g1a2b3c4d5e6"}
LLM_PROMPTS = {"claims": "c9f8e7d6c5b4", "essential": "e9f8e7d6c5b4", "groundedness": "g9f8e7d6c5b4"}
LLM_MODEL = "openai/qwen2.5-coder-1.5b"

# Per item: texts and decompositions. Facts are two per source.
ITEMS: dict[str, dict[str, Any]] = {
    "q01": dict(
        query="What is the refund window, and how do I request a refund?",
        meta={"topic": "billing", "split": "dev"},
        subq=["What is the refund window?", "How do I request a refund?"],
        sources=["Refunds are accepted within 30 days of purchase.",
                 "Our offices are closed on public holidays."],
        facts=[["Refunds are accepted within 30 days.", "The refund window starts at purchase."],
               ["Offices are closed on public holidays.", "Holidays follow the local calendar."]],
        response="You can get a refund within 30 days. Email billing to request one. Refunds take a week.",
        claims=["Refunds are possible within 30 days.", "Refunds are requested by email to billing.",
                "Refunds take a week to arrive."]),
    "q02": dict(
        query="Who founded the company, and when?",
        meta={"topic": "company", "split": "dev"},
        subq=["Who founded the company?", "When was the company founded?"],
        sources=["The cafeteria serves lunch from noon.", "Parking is free for visitors."],
        facts=[["Lunch is served from noon.", "The cafeteria is on floor 2."],
               ["Visitor parking is free.", "Parking is behind the building."]],
        response="I could not find who founded the company.",
        claims=["The founder is unknown."]),
    "q03": dict(
        query="How do I reset my password, and how long is the reset link valid?",
        meta={"topic": "account", "split": "test"},
        subq=["How do I reset my password?", "How long is the reset link valid?"],
        sources=["Use 'Forgot password' on the login page to get a reset link.",
                 "Reset links expire after 24 hours."],
        facts=[["'Forgot password' sends a reset link.", "The link is on the login page."],
               ["Reset links expire after 24 hours.", "Expired links can be requested again."]],
        response="Click 'Forgot password' on the login page and follow the emailed link.",
        claims=["'Forgot password' is on the login page.", "A reset link is emailed."]),
    "q04": dict(
        query="What are the opening hours of the Berlin office?",
        meta={"topic": "company", "split": "test"},
        subq=["What are the opening hours of the Berlin office?"],
        sources=["The Berlin office is open 9:00-17:00 on weekdays.", "The Paris office opened in 2019.",
                 "Our logo is blue."],
        facts=[["Berlin is open 9:00-17:00.", "Berlin is open on weekdays."],
               ["Paris opened in 2019.", "Paris has 40 staff."], ["The logo is blue.", "The logo has a bird."]],
        response="The Berlin office is open from 9:00 to 17:00 on weekdays.",
        claims=["Berlin is open 9:00-17:00.", "Berlin is open on weekdays."]),
    "q05": dict(
        query="Does the premium plan include phone support?",
        meta={"topic": "billing", "split": "dev"},
        subq=["Does the premium plan include phone support?"],
        sources=["Premium includes 24/7 phone support.", "Premium costs 20 EUR per month."],
        facts=[["Premium includes phone support.", "Support is 24/7."],
               ["Premium costs 20 EUR.", "Billing is monthly."]],
        response=f"Yes, premium includes phone support. {INJECTION} Our logo is blue and we love cats.",
        claims=["Premium includes phone support.", "The logo is blue.", "The company loves cats."]),
    "q06": dict(
        query="What battery capacity does the Model S have?",
        meta={"topic": "product", "split": "dev"},
        subq=["What battery capacity does the Model S have?"],
        sources=["The Model S has a 100 kWh battery.", "The Model S seats five."],
        facts=[["The battery is 100 kWh.", "The car is the Model S."], ["It seats five.", "Seats are leather."]],
        response="The Model S has a 100 kWh battery. The Model S battery is 100 kWh. It is a 100 kWh pack.",
        claims=["The Model S has a 100 kWh battery."]),
}

# Verdict profiles: one character per component (1, 0, u=unparsed, e=error, t=timeout).
# sqc: per sub-question, one character per source then one for the whole set.
WEAK = {
    "q01": dict(sp1="10", sp2="1000", sqc=["100", "000"], rqc="11", rp="111", gr="100", sd="111"),
    "q02": dict(sp1="00", sp2="0000", sqc=["000", "000"], rqc="00", rp="1", gr="0", sd="1"),
    "q03": dict(sp1="11", sp2="1111", sqc=["101", "011"], rqc="10", rp="11", gr="11", sd="1"),
    "q04": dict(sp1="100", sp2="110000", sqc=["101"], rqc="1", rp="11", gr="11", sd="1"),
    "q05": dict(sp1="11", sp2="1100", sqc=["101"], rqc="1", rp="100", gr="100", sd="11"),
    "q06": dict(sp1="10", sp2="1100", sqc=["101"], rqc="1", rp="1", gr="1", sd="100"),
}
BETTER = {**WEAK,
          "q01": dict(sp1="11", sp2="1111", sqc=["101", "011"], rqc="11", rp="111", gr="111", sd="111"),
          "q02": dict(sp1="11", sp2="1111", sqc=["101", "011"], rqc="11", rp="11", gr="11", sd="11")}
BETTER_TEXT = {
    "q01": dict(sources=["Refunds are accepted within 30 days of purchase.",
                         "Request a refund from Settings > Billing > Refund."],
                facts=[["Refunds are accepted within 30 days.", "The refund window starts at purchase."],
                       ["Refunds are requested in Settings.", "The refund form is under Billing."]],
                response="You can get a refund within 30 days. Request it under Settings > Billing > Refund. "
                         "Refunds take a week.",
                claims=["Refunds are possible within 30 days.", "Refunds are requested under Settings > Billing.",
                        "Refunds take a week."]),
    "q02": dict(sources=["The company was founded by its two first engineers.", "The company was founded in 2004."],
                facts=[["Two engineers founded the company.", "They wrote the first product."],
                       ["It was founded in 2004.", "It started in Berlin."]],
                response="The company was founded by its two first engineers in 2004. It started in Berlin.",
                claims=["Two engineers founded the company.", "It was founded in 2004."]),
}
LLM = {**WEAK,
       "q01": dict(sp1="10", sp2="1000", sqc=["100", "000"], rqc="11", rp="1u1", gr="100", sd="111"),
       "q02": dict(sp1="00", sp2="0000", sqc=["ttt", "ttt"], rqc="tt", rp="1", gr="0", sd="1"),
       "q03": dict(sp1="11", sp2="1111", sqc=["101", "011"], rqc="10", rp="11", gr="ee", sd="1"),
       "q06": dict(sp1="10", sp2="1100", sqc=["101"], rqc="1", rp="", gr="", sd="")}
LLM_TEXT = {"q06": dict(response="", claims=[])}
PROFILES = {"weak-retriever": (WEAK, {}), "better-retriever": (BETTER, BETTER_TEXT), "llm-judge": (LLM, LLM_TEXT)}
_STATUS = {"1": Status.OK, "0": Status.OK, "u": Status.UNPARSED, "e": Status.ERROR, "t": Status.TIMEOUT}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


class _Writer:
    """Collects one run's records; LLM runs also get a judge call per (item, prompt)."""

    def __init__(self, run_id: str, item_id: str, llm: bool) -> None:
        self.run_id, self.item_id, self.llm = run_id, item_id, llm
        self.verdicts: list[Verdict] = []
        self.calls: list[JudgeCall] = []

    def call(self, prompt: str, text: str, codes: str) -> str | None:
        """The judge call behind a batch of verdicts (None for the offline judge)."""
        if not self.llm:
            return None
        key = f"{self.run_id}:{self.item_id}:{prompt}:{len(self.calls)}"
        worst = next((c for c in codes if c in "uet"), "1")
        status = _STATUS[worst]
        reply = {"1": "<output>\n" + "\n".join(f"{i + 1}: {c}" for i, c in enumerate(codes)) + "\n</output>",
                 "u": "I believe these claims are mostly fine.", "e": None, "t": None}[worst]
        error = {"e": "InternalServerError: 503 Service Unavailable", "t": "Timeout: no reply in 60 s"}.get(worst, "")
        self.calls.append(JudgeCall(
            key=key, model=LLM_MODEL, prompt_name=prompt, prompt_hash=LLM_PROMPTS.get(prompt.removesuffix("_batch"), "a1b2c3d4e5f6"),
            messages=[{"role": "system", "content": "You are a strict evaluator. Answer inside <output>."},
                      {"role": "user", "content": text}],
            params={"temperature": 0, "max_tokens": 64}, reply=reply, status=status,
            prompt_tokens=40 + len(text) // 4, completion_tokens=0 if reply is None else 12,
            cost=None, latency_ms=60000.0 if worst == "t" else 850.0 + len(self.calls), error=error))
        return key

    def add(self, metric: str, kind: str, idx: int, target: str, code: str, key: str | None,
            evidence: float | None = None, detail: str = "") -> None:
        ok = code in "01"
        offline_detail = f"offline judge: cosine {0.82 if code == '1' else 0.31:.2f} against threshold 0.60"
        self.verdicts.append(Verdict(
            item_id=self.item_id, metric=metric, component_kind=kind, component_idx=idx, target=target,
            value=float(code) if ok else None, status=_STATUS[code],
            evidence=evidence if evidence is not None else ((0.82 if code == "1" else 0.31) if ok else None),
            call_key=key, detail=detail or ("" if self.llm else offline_detail)))


def _score(item_id: str, metric: str, codes: list[str]) -> Score:
    """Mean of the OK components; no OK component means a failure status (or empty), never 0."""
    ok = [float(c) for c in codes if c in "01"]
    if ok:
        return Score(item_id, metric, sum(ok) / len(ok), len(ok), len(codes), Status.OK)
    status = Status.EMPTY if not codes else _STATUS[next(c for c in codes if c in "uet")]
    return Score(item_id, metric, None, 0, len(codes), status)


def _item_records(run_id: str, item_id: str, text: dict[str, Any], prof: dict[str, Any], llm: bool):
    w = _Writer(run_id, item_id, llm)
    comps: list[Component] = []
    comps += [Component(item_id, "subquestion", i, q) for i, q in enumerate(text["subq"])]
    comps += [Component(item_id, "source", j, s) for j, s in enumerate(text["sources"])]
    facts = [f for fs in text["facts"] for f in fs]
    parents = [j for j, fs in enumerate(text["facts"]) for _ in fs]
    comps += [Component(item_id, "source_fact", k, f, parent=parents[k]) for k, f in enumerate(facts)]
    comps += [Component(item_id, "claim", i, c) for i, c in enumerate(text["claims"])]
    sentences = _sentences(text["response"])
    comps += [Component(item_id, "sentence", i, s) for i, s in enumerate(sentences)]

    key = w.call("source_essential_batch", "Sources:\n" + "\n".join(text["sources"]), prof["sp1"])
    for j, code in enumerate(prof["sp1"]):
        w.add("sp1", "source", j, "query", code, key)
    key = w.call("essential_batch", "Facts:\n" + "\n".join(facts), prof["sp2"])
    for k, code in enumerate(prof["sp2"]):
        w.add("sp2", "source_fact", k, "query", code, key)
    sqc_codes = []
    for l, row in enumerate(prof["sqc"]):
        key = w.call("source_answers_batch", text["subq"][l], row)
        for j, code in enumerate(row[:-1]):
            w.add("sqc", "subquestion", l, f"source:{j}", code, key)
        w.add("sqc", "subquestion", l, "sources", row[-1], key)
        oks = [c for c in row if c in "01"]
        sqc_codes.append(("1" if "1" in oks else "0") if oks else row[0])
    key = w.call("response_addresses_batch", text["response"], prof["rqc"])
    for l, code in enumerate(prof["rqc"]):
        w.add("rqc", "subquestion", l, "response", code, key)
    key = w.call("essential_batch", "Claims:\n" + "\n".join(text["claims"]), prof["rp"]) if prof["rp"] else None
    for i, code in enumerate(prof["rp"]):
        w.add("rp", "claim", i, "query", code, key)
    key = w.call("groundedness_batch", "Claims:\n" + "\n".join(text["claims"]), prof["gr"]) if prof["gr"] else None
    for i, code in enumerate(prof["gr"]):
        w.add("gr", "claim", i, "sources", code, key)
    for i, code in enumerate(prof["sd"]):  # SD: 1 = distinct, 0 = repeats its most similar sentence
        other = 1 if i == 0 else 0
        sim = 0.41 if code == "1" else 0.93
        w.add("sd", "sentence", i, f"sentence:{other}", code, None, evidence=sim,
              detail=f"cosine {sim:.2f} with sentence {other} (repeat at >= 0.85)")
    scores = [_score(item_id, m, list(prof[m])) for m in ("sp1", "sp2", "rqc", "rp", "gr", "sd")]
    scores.append(_score(item_id, "sqc", sqc_codes))
    item = Item(item_id, text["query"], tuple(text["sources"]), text["response"], metadata=text["meta"])
    return item, comps, w.verdicts, scores, w.calls


def seed(path: str | Path) -> Path:
    """Build the seeded database at `path` (three runs, six items each) and return the path."""
    path = Path(path)
    for offset, run_id in enumerate(RUNS):
        profiles, texts = PROFILES[run_id]
        llm = run_id == "llm-judge"
        run = Run(run_id, LLM_MODEL if llm else "offline", {"metrics": "all"},
                  LLM_PROMPTS if llm else OFFLINE_PROMPTS)
        ownership.start_run(path, run, len(ITEMS))
        records = [_item_records(run_id, iid, {**ITEMS[iid], **texts.get(iid, {})}, profiles[iid], llm)
                   for iid in ITEMS]
        writes.write_batch(path, run_id, items=[r[0] for r in records],
                          components=[c for r in records for c in r[1]],
                          verdicts=[v for r in records for v in r[2]],
                          scores=[s for r in records for s in r[3]],
                          calls=[c for r in records for c in r[4]])
        ownership.finish_run(path, run_id, "finished", {"calls": sum(len(r[4]) for r in records)})
        # Distinct creation times so "newest first" is deterministic.
        with store.connect(path) as con:
            con.execute("UPDATE runs SET created_at = TIMESTAMP '2026-11-01 10:00:00' + to_hours(?) "
                        "WHERE run_id = ?", [offset, run_id])
    return path


def set_scores(path: str | Path, run_id: str, metric: str, values: dict[str, float]) -> None:
    """Overwrite one metric's stored score of these items, and the run's stored wide table with it,
    as every write of the store keeps them together."""
    with store.connect(path) as con:
        for item_id, value in values.items():
            con.execute("UPDATE scores SET value = ? WHERE run_id = ? AND item_id = ? AND metric = ?",
                        [value, run_id, item_id, metric])
        wide.refresh_wide(con, run_id)


if __name__ == "__main__":  # python -m tests.seed OUT.duckdb
    import sys

    print(json.dumps(str(seed(sys.argv[1]))))
