"""The plotly figures (evaluators/dashboard/charts.py): binning, threshold lines, the correlation grid and
quadrant counts placed in their quadrants."""
from __future__ import annotations

import pandas as pd

from evaluators.dashboard import charts


def test_histograms_bin_to_tenths_with_one_threshold_line_per_metric() -> None:
    dist = pd.DataFrame({"metric": ["sp1", "sp1", "sp1", "gr"], "value": [0.0, 0.04, 1.0, 0.5], "n": [2, 1, 3, 4]})
    fig = charts.histograms(dist, ["sp1", "gr"], {"sp1": 0.6})
    sp1, gr = fig.data
    assert list(sp1.x) == [0.05, 0.95] and list(sp1.y) == [3, 3]  # 1.0 falls in the last bin
    assert list(gr.x) == [0.55] and gr.xaxis == "x2"
    assert [(s.x0, s.xref) for s in fig.layout.shapes] == [(0.6, "x"), (0.5, "x2")]  # gr: no threshold given
    # the Runs table's inline bars: the same bins, ten of them, empty ones as 0
    assert charts.tenth_counts(dist, "sp1") == [3, 0, 0, 0, 0, 0, 0, 0, 0, 3]
    assert charts.tenth_counts(dist, "gr") == [0] * 5 + [4] + [0] * 4 and charts.tenth_counts(dist, "rp") == [0] * 10


def test_heatmap_is_symmetric_with_blanks_for_undefined_correlations() -> None:
    corr = pd.DataFrame({"a": ["sp1", "sp1"], "b": ["gr", "sd"], "r": [0.5, float("nan")], "n": [3, 1]})
    z = charts.heatmap(corr, ["sp1", "gr", "sd"]).data[0].z
    assert z[0][1] == z[1][0] == 0.5 and z[0][2] is None and z[2][0] is None
    assert [z[i][i] for i in range(3)] == [1.0, 1.0, 1.0] and z[1][2] is None


def test_quadrant_counts_sit_in_their_quadrants() -> None:
    points = pd.DataFrame({"item_id": ["a"], "sqc": [0.2], "rqc": [0.9]})
    counts = pd.DataFrame({"x_low": [True, False], "y_low": [False, True], "n": [5, 1]})
    fig = charts.quadrant(points, "sqc", "rqc", {"sqc": 0.4, "rqc": 0.8}, counts)
    notes = {(a.x, a.y): a.text for a in fig.layout.annotations}
    assert notes == {(0.2, 0.9): "5 items", (0.7, 0.4): "1 item"}
