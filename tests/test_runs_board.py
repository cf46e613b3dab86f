"""The home page's runs side by side (AppTest) against a DuckDB built here: each THELMA metric as
"mean (scored/items, unsure)" read back from the database, coloured against its threshold, the top
rule with its evidence a click away, unsure verdicts apart from failed ones, and the compare link."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from evaluators.dashboard.views import runs as runs_view
from evaluators.metrics import registry
from evaluators.metrics.diagnosis import CONDITIONS, DEFAULT_THRESHOLDS
from evaluators.storage import queries, store
from tests.seed import RUNS
from tests.test_band_pages import RUN as UNSURE_RUN
from tests.test_band_pages import band_db  # noqa: F401  (a fixture)
from tests.test_pages import frame_with, open_page, shown

THELMA = registry.THELMA


def board(at) -> pd.DataFrame:
    """The runs tables as shown (scores, then details), one row per run id."""
    table = shown(at, "top rule").merge(shown(at, "judge"), on="run")
    return table.set_index("run", drop=False)


def expected_cell(db: Path, run: str, metric: str) -> str:
    """The cell from the run's summary (its scores grouped, another path than the stored run table)."""
    overview = queries.runs.run_summary(db, run)[0].set_index("metric")
    row = overview.loc[metric]
    mean = "–" if pd.isna(row["mean"]) else f"{row['mean']:.2f}"
    unsure = f", {int(row['n_unsure'])} unsure" if row["n_unsure"] else ""
    return f"{mean} ({int(row['n_scored'])}/{int(row['n_items'])}{unsure})"


def red_cells(at) -> set[tuple[int, str]]:
    """(row, column) of the runs table's cells coloured as failing."""
    element = next(d for d in at.dataframe if "top rule" in d.value.columns)
    columns = list(element.value.columns)
    rules = element.proto.arrow_data.styler.styles.splitlines()
    red = next((r for r in rules if runs_view.FAIL_COLOUR.split(": ")[1] in r), "")
    return {(int(r), columns[int(c)]) for r, c in re.findall(r"_row(\d+)_col(\d+)", red)}


def test_each_metric_reads_mean_scored_of_items_and_unsure_from_the_database(db: Path) -> None:
    table = board(open_page("app.py"))
    assert list(table.index) == list(reversed(RUNS))  # newest first
    for run in RUNS:
        for m in THELMA:
            assert table.loc[run, m.upper()] == expected_cell(db, run, m), (run, m)
    # the LLM judge's GR left an error and an empty response unscored: 4 of 6, never a 0
    assert table.loc["llm-judge", "GR"].endswith("(4/6)")
    assert table.loc["weak-retriever", "items"] == "6 of 6"
    assert not any(str(v) in ("None", "nan", "NaN") for v in table.to_numpy().ravel())


def test_a_mean_is_coloured_against_its_threshold_from_the_url(db: Path) -> None:
    at = open_page("app.py")
    table = frame_with(at, "judge")
    means = {
        (i, m.upper()): queries.runs.run_summary(db, run)[0].set_index("metric").loc[m, "mean"]
        for i, run in enumerate(table["run"])
        for m in THELMA
    }
    assert red_cells(at) == {k for k, v in means.items() if v < registry.threshold(k[1].lower())}
    assert (0, "GR") in red_cells(at)  # llm-judge's GR is below GR's threshold
    lowered = open_page("app.py", th_gr="0.3")
    assert (0, "GR") not in red_cells(lowered)
    # the top rule stays at the default thresholds: moving one rescans no run
    assert list(board(lowered)["top rule"]) == list(board(at)["top rule"])
    assert any("passes its threshold" in c.value for c in at.caption)  # the colours' legend


def test_the_top_rule_explains_the_most_items_no_other_rule_does_and_opens_its_evidence(db: Path) -> None:
    at = open_page("app.py")
    table = board(at)
    for run in RUNS:
        combos = queries.diagnosis.rule_counts(
            queries.diagnosis.profile(queries.runs.stored_table(db, run, THELMA)), DEFAULT_THRESHOLDS
        )
        fired = combos[list(CONDITIONS)]
        counts = {r: int(combos.loc[combos[r], "n"].sum()) for r in CONDITIONS}
        alone = {r: int(combos.loc[combos[r] & (fired.sum(axis=1) == 1), "n"].sum()) for r in CONDITIONS}
        top = max(CONDITIONS, key=lambda r: (alone[r], counts[r]))  # Table 2's order on a tie
        assert table.loc[run, "top rule"].startswith(f"{top}: {counts[top]} of 6 items ({alone[top]} only it explains)")
        first = queries.diagnosis.first_items(combos)[top]
        assert table.loc[run, "evidence"] == "🔎"  # a click on it opens the first item, on its evidence, here
        opened = open_page("app.py")
        opened.session_state["runs_table"] = {
            "selection": {"rows": [], "columns": [], "cells": [(list(table["run"]).index(run), "evidence")]}}
        opened.run()
        assert (opened.title[0].value, opened.query_params["run"], opened.query_params["item"],
                opened.query_params["rule"]) == ("Item", run, first, top)


def test_unsure_items_and_verdicts_are_counted_apart_from_failures(band_db: Path) -> None:  # noqa: F811
    at = open_page("app.py", run=UNSURE_RUN)
    # unscored, but the judge's p still says what it expects: the unsure item has an expected value
    ev = store.query(band_db, "SELECT expected FROM scores WHERE run_id = ? AND metric = 'rqc'", [UNSURE_RUN])
    rqc = f"– (0/1, 1 unsure) · ev {ev['expected'].iloc[0]:.2f} (1/1)"
    assert board(at).loc[UNSURE_RUN, "RQC"] == rqc
    assert board(at).loc[UNSURE_RUN, "SQC"] == "0.00 (1/1)"
    assert board(at).loc[UNSURE_RUN, "GR"] == ""  # the run has no GR: an empty cell
    assert board(at).loc[UNSURE_RUN, "top rule"] == board(at).loc[UNSURE_RUN, "evidence"] == ""  # none fires
    metrics = frame_with(at, "95% CI").set_index("metric")
    assert metrics.loc["RQC", "unsure verdicts"] == 1 and metrics.loc["RQC", "failed verdicts"] == "none"
    # the board reads the stored tables (each judge's default band); the run below follows the URL's band
    decided = open_page("app.py", run=UNSURE_RUN, band="0.5,0.5")
    assert board(decided).loc[UNSURE_RUN, "RQC"] == rqc
    assert frame_with(decided, "95% CI").set_index("metric").loc["RQC", "n scored"] == "1 of 1"


def test_two_selected_runs_open_compare_older_before_newer(db: Path) -> None:
    at = open_page("app.py")
    links = [(link.proto.page, link.proto.query_string) for link in at.get("page_link")]
    assert ("Compare", "run=better-retriever&other=llm-judge") in links  # no selection: the two newest
    at.session_state["runs_table"] = {"selection": {"rows": [2, 0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    links = [(link.proto.page, link.proto.query_string) for link in at.get("page_link")]
    assert ("Compare", "run=weak-retriever&other=llm-judge") in [(p, q.split("&th_")[0]) for p, q in links]
    assert any(p == "Trends" and "runs=llm-judge%2Cweak-retriever" in q for p, q in links)


def test_the_items_column_widens_for_six_digit_counts_and_the_board_keeps_its_width() -> None:
    from evaluators.dashboard import tables

    small, large = runs_view.board_px(["48 of 48"]), runs_view.board_px(["99999 of 100000", "100000 of 100000"])
    assert small == runs_view.BOARD_PX
    assert tables.text_px("100000 of 100000") + tables.CELL_PAD_PX <= large["items"]  # a number's cell does not wrap
    details = [c for c in runs_view.DETAIL_COLUMNS if c != "run"]
    assert sum(large[c] for c in details) == sum(small[c] for c in details)


def test_the_judge_column_is_as_wide_as_its_longest_name_so_no_name_is_broken() -> None:
    """A model's name is one word: the judge's column takes its width (up to JUDGE_MAX_PX) from the
    prompts' column, whose names wrap at their commas."""
    from evaluators.dashboard import tables

    name = "openai/qwen2.5-coder-1.5b"
    widths = runs_view.board_px(["100000 of 100000"], [name, "offline"])
    assert tables.text_px(name) + tables.CELL_PAD_PX <= widths["judge"] <= runs_view.JUDGE_MAX_PX
    details = [c for c in runs_view.DETAIL_COLUMNS if c != "run"]
    assert sum(widths[c] for c in details) == sum(runs_view.BOARD_PX[c] for c in details)



def test_the_run_column_is_as_wide_as_its_longest_name_so_no_name_is_broken() -> None:
    """A run's name is one word, now plain text a click opens: its column takes its width (up to RUN_MAX_PX, an
    upload's default name) from the top rule's above and the prompts' below, so each table keeps its width."""
    from evaluators.dashboard import tables

    names = ["verbose_generator", "upload-20261207-1930"]
    widths = runs_view.board_px(["48 of 48"], ["offline"], names)
    assert max(tables.text_px(n) + tables.CELL_PAD_PX for n in names) <= widths["run"] <= runs_view.RUN_MAX_PX
    for columns in (runs_view.SCORE_COLUMNS, runs_view.DETAIL_COLUMNS):
        assert sum(widths[c] for c in columns) == sum(runs_view.BOARD_PX[c] for c in columns)


def test_each_runs_table_is_as_tall_as_its_own_longest_text(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs whose prompts are many and long: the details' rows grow to hold their names, while the
    scores' rows still hold only their own longest cell (one table's text does not make the other's
    rows taller)."""
    from evaluators.dashboard import tables

    many = [f"a_prompt_with_a_long_name_{k}" for k in range(12)]
    monkeypatch.setattr(runs_view, "prompt_names", lambda hashes: ([many for _ in hashes], "every prompt"))
    at = open_page("app.py")
    heights = {}
    for column, names in (("top rule", runs_view.SCORE_COLUMNS), ("prompts", runs_view.DETAIL_COLUMNS)):
        element = next(d for d in at.dataframe if column in d.value.columns)
        texts = [(c, str(t)) for c in names if c not in ("run", "evidence", "created") for t in element.value[c]]
        widths = runs_view.board_px([], [t for c, t in texts if c == "judge"])  # the seeded counts fit 70 px
        lines = max(1, *(tables.text_lines(t, widths[c] - tables.WRAP_SLACK_PX) for c, t in texts))
        assert element.proto.row_height == tables.wrapped(len(element.value), lines=lines)["row_height"], column
        heights[column] = element.proto.row_height
    assert heights["top rule"] < heights["prompts"]
