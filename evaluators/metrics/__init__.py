"""The metrics: THELMA's and the suites', Table 2 (diagnosis), and the pure arithmetic over scores."""
