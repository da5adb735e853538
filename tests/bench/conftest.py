"""The benchmarks' engines in tests: ``bench_engine`` is each engine in turn, as the
benchmarks' ``engine`` argument takes it; for Spark the test session's SparkSession is started
first, so the benchmark's ``open_db`` finds it running (and the test web's small Spark settings
apply)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["embedded", pytest.param("spark", marks=pytest.mark.spark)])
def bench_engine(request) -> str:
    if request.param == "spark":
        request.getfixturevalue("spark")
    return request.param
