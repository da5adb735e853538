"""crawllib.runs.status names each stage's throughput count without importing the stages (Spark):
the names the stages' results declare."""

from __future__ import annotations

from crawllib.runs import runner, status


def test_status_throughput_is_the_stages():
    assert status.THROUGHPUT == {s: r.THROUGHPUT for s, r in runner.RESULTS.items()}
