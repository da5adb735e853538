"""The fetch benchmark runs end to end on a tiny web and reports its figures."""

from __future__ import annotations

from benchmarks import fetch as fetch_bench


def test_bench_reports_efficiency_and_throughput():
    lines: list[str] = []
    figures = fetch_bench.bench(hosts=3, pages=2, delay=0.1, server="thread", out=lines.append)
    assert lines[-1].startswith("efficiency=") and " pages_per_s=" in lines[-1]
    assert figures["ideal_s"] == (2 + 1) * 0.1  # "/" and 2 pages, plus robots.txt
    assert 0.2 < figures["efficiency"] <= 1.0 and figures["pages_per_s"] > 0
