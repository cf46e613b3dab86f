"""benchmarks/load.py's figure beside the p95: the server's CPU per view and what a host serves at it."""
from __future__ import annotations

from benchmarks import load


def test_load_reports_the_server_cpu_per_view_and_what_the_cores_allow() -> None:
    # 80 views in 40 s that cost the server 8 CPU-seconds, on 2 cores.
    line = load.server_cost(server_cpu_s=8.0, views=80, took_s=40.0, cores=2)
    assert line.startswith("server CPU 0.100 s per view (8.0 s for 80 views)")
    assert "2.00 views/s served" in line and "busy on 0.20 of 2 cores" in line
    assert "CPU-bound at 10.0 views/s on one core, 20.0 on 2" in line
    assert load.server_cost(1.0, 0, 10.0, 2) == "server CPU per view: no view finished"
