"""Shared fixtures: one SparkSession per test session (it takes seconds to start)."""

from __future__ import annotations

import pytest

from crawllib.config import load_config


def test_config_overrides() -> list[str]:
    """Settings every test crawl uses: small Spark, no DNS ever leaves the machine."""
    return [
        "spark.master=local[2]",
        "spark.shuffle_partitions=2",
        "spark.ui=false",
        "spark.log_level=ERROR",
        "network.resolve_only=true",
        "storage.min_slice_urls=1",  # tiny test crawls still commit in several slices
        "storage.min_slice_seconds=0",
    ]


test_config_overrides.__test__ = False  # not a test


@pytest.fixture(scope="session")
def spark_cfg():
    return load_config(overrides=test_config_overrides())


@pytest.fixture(scope="session")
def spark(spark_cfg):
    from crawllib.session import get_spark

    session = get_spark(spark_cfg)
    yield session
    session.stop()
