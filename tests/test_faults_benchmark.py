"""benchmarks/faults.py's row subsets, its fault for every rule (our X1 included) and its cost line (the
offline judge, into a real DuckDB file)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import faults
from evaluators.metrics.diagnosis import RULES


def test_rows_parse_ranges_and_refuse_anything_else() -> None:
    assert faults.parse_rows("0-2,20,31-32") == {0, 1, 2, 20, 31, 32}
    assert faults._ranges({0, 1, 2, 20, 31, 32}) == "0-2,20,31-32"
    for bad in ("", "a-3", "3-", "1,,2"):
        with pytest.raises(ValueError):
            faults.parse_rows(bad)


def test_a_row_subset_keeps_each_kept_row_s_items_as_the_whole_split_builds_them() -> None:
    whole = faults.splits()
    part = faults.splits({1, 22}, demo=2)
    demo = [r.name for r in faults.demo_rows()[:2]]
    assert {c.row for c in part["dev"]} == {"wikieval-1", *demo}
    assert {c.row for c in part["held-out"]} == {"wikieval-22"}
    for split, cases in part.items():
        # The same items as in the whole split: irrelevant sources still come from rows left out.
        rows = {c.row for c in cases}
        assert [c.item.id for c in cases] == [c.item.id for c in whole[split] if c.row in rows]
    assert not faults.splits({3}, demo=0)["held-out"]


def test_every_rule_has_a_fault_and_x1_s_invents_what_the_sources_lack() -> None:
    assert sorted(faults.FAULTS.values()) == sorted(RULES) and faults.FAULTS["invented"] == "X1"
    cases = faults.splits({0, 2}, demo=2)["dev"]
    for row in {c.row for c in cases}:
        clean, invented = (next(c for c in cases if c.row == row and c.fault == f) for f in ("clean", "invented"))
        assert invented.expected == "X1" and invented.item.sources == clean.item.sources  # retrieval unchanged
        assert invented.item.response.startswith(clean.item.response)
        added = re.split(r"(?<=\.) ", invented.item.response[len(clean.item.response):].strip())
        sources = "\n".join(clean.item.sources)
        assert len(added) >= 2, (row, added)
        for sentence in added:  # each made-up sentence: a number and a name that the sources lack
            assert re.search(r"\d+", sentence) and not any(n in sources for n in re.findall(r"\d+", sentence))
            assert any(name in sentence and name not in sources for name in faults.INVENTED_NAMES), sentence


def test_the_report_gives_verdicts_by_tier_and_seconds_per_triplet(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "f.duckdb"
    assert faults.main(["--split", "dev", "--rows", "0", "--demo", "0", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "WikiEval rows 0, demo queries 0" in out
    assert re.search(r"verdicts decided by tier: offline (\d+)/\1 = 100%", out)
    judged = re.search(r"[\d.]+ s per triplet \((\d+) judged in", out)
    assert judged and int(judged.group(1)) >= 5  # the clean item and its faults
    assert "(target >= 70%)" in out  # one judge; a cascade is held to 90%
    assert re.search(r"  invented\s+X1\s+\d+/1 ", out)  # ours, counted like Table 2's faults
    assert faults.named_target("offline>local") == 0.9
    # A rerun on more rows judges only the new row's items.
    assert faults.main(["--split", "dev", "--rows", "0-1", "--demo", "0", "--db", str(db)]) == 0
    again = re.search(r"\((\d+) judged in", capsys.readouterr().out)
    assert again and int(again.group(1)) == len([c for c in faults.splits({1}, 0)["dev"]])
