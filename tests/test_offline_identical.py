"""The offline judge's verdict check (benchmarks/offline_speed.py --check-against): it finds every
change, and it is reproducible, so a speed-up can be shown to leave the verdicts as they were."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import offline_speed

VERDICT = {"kind": "verdict", "run": "wikieval", "item_id": "0-answer", "metric": "gr", "component_kind": "claim",
           "component_idx": 0, "target": "sources", "value": 1.0, "status": "ok", "evidence": 0.8787172138690948,
           "detail": "supported: best source sentence 'x' (cosine 0.88, 100% of claim words)", "p": 0.93,
           "p_kind": "calibrated", "tier": None}
SCORE = {"kind": "score", "run": "wikieval", "item_id": "0-answer", "metric": "gr", "value": 1.0, "n_scored": 1,
         "n_total": 1, "n_unsure": 0, "status": "ok"}


def test_differences_ignore_float_noise_and_report_every_real_change() -> None:
    before = [VERDICT, SCORE]
    assert offline_speed.differences(before, [dict(VERDICT, evidence=VERDICT["evidence"] + 5e-7), SCORE]) == []
    moved = offline_speed.differences(before, [dict(VERDICT, evidence=VERDICT["evidence"] + 4e-4, p=0.94), SCORE])
    assert len(moved) == 2 and any("evidence" in m for m in moved) and any(" p:" in m for m in moved)
    assert offline_speed.differences(before, [dict(VERDICT, detail="unsupported: ..."), SCORE])[0].endswith(
        "-> 'unsupported: ...'")
    assert offline_speed.differences(before, [VERDICT, dict(SCORE, value=0.5)]) == [
        "('score', 'wikieval', '0-answer', 'gr') value: 1.0 -> 0.5"]
    assert offline_speed.differences(before, [VERDICT]) == ["missing: ('score', 'wikieval', '0-answer', 'gr')"]
    assert offline_speed.differences(before, [VERDICT, SCORE, dict(SCORE, metric="rp")]) == [
        "added: ('score', 'wikieval', '0-answer', 'rp')"]
    assert offline_speed.differences(before, [dict(VERDICT, value=None, status="error"), SCORE]) == [
        "('verdict', 'wikieval', '0-answer', 'gr', 'claim', 0, 'sources') status: 'ok' -> 'error'",
        "('verdict', 'wikieval', '0-answer', 'gr', 'claim', 0, 'sources') value: 1.0 -> None"]


@pytest.mark.skipif(not offline_speed.WIKIEVAL.exists(), reason=f"{offline_speed.WIKIEVAL} is absent (../shared)")
def test_the_check_set_evaluates_to_the_same_verdicts_every_time(tmp_path: Path) -> None:
    # Two WikiEval rows, three responses each: their items share a query and sources, which the
    # runner's concurrent items race to encode.
    items = offline_speed.check_set()["wikieval"][:6]
    offline_speed.clear_caches()
    (tmp_path / "a").mkdir()
    first = offline_speed.evaluate_check_set(tmp_path / "a", {"wikieval": items})
    offline_speed.clear_caches()
    (tmp_path / "b").mkdir()
    second = offline_speed.evaluate_check_set(tmp_path / "b", {"wikieval": items})
    verdicts = [r for r in first if r["kind"] == "verdict"]
    assert {r["metric"] for r in verdicts} == {"sp1", "sp2", "sqc", "rp", "rqc", "sd", "gr"}
    assert all(r["status"] == "ok" and r["p"] is not None for r in verdicts)
    assert json.dumps(first) == json.dumps(second)
    assert offline_speed.differences(first, second) == []
