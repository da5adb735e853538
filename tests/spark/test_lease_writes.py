"""A table write needs this process to hold the crawl root's writer lease, and it must be
writable (issue 37): a write without one is refused, a writer that could not renew for 2/3 of
the lease stops before its next commit, and a write in flight when the lease stops being
writable is cancelled before it commits. Real Delta tables, a real lease file whose renewals
fail (crawllib.testweb.stores)."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import functions as F

from crawllib.config import replace
from crawllib.core.errors import LeaseLost, LeaseNotHeld
from crawllib.store import lease, tables
from crawllib.store.spark_schemas import TABLES
from crawllib.testweb.stores import Breakable


def test_a_write_needs_a_held_lease(spark, unheld_root):
    frontier = tables.read(spark, unheld_root, "frontier")
    before = tables.version_of(spark, unheld_root, "frontier")
    with pytest.raises(LeaseNotHeld, match="holds no writer lease"):
        tables.append(frontier, unheld_root, "frontier")
    with pytest.raises(LeaseNotHeld):
        tables.set_property(spark, unheld_root, "frontier", "x", "1")
    assert tables.version_of(spark, unheld_root, "frontier") == before


def test_a_writer_that_cannot_renew_stops_before_its_next_commit(spark, spark_cfg, unheld_root):
    cfg = replace(spark_cfg, storage__lease_seconds=3.0)
    store = Breakable(lease.store_for(unheld_root, cfg))
    frontier = tables.read(spark, unheld_root, "frontier")
    with lease.hold(unheld_root, "pytest", cfg, store=store):
        tables.append(frontier, unheld_root, "frontier")
        before = tables.version_of(spark, unheld_root, "frontier")
        store.broken = True  # renewals fail from now on
        time.sleep(2.2)  # 2/3 of the lease
        with pytest.raises(LeaseLost, match="could not renew its writer lease"):
            tables.append(frontier, unheld_root, "frontier")
        assert tables.version_of(spark, unheld_root, "frontier") == before


def test_a_write_in_flight_when_the_lease_stops_being_writable_does_not_commit(
    spark, spark_cfg, unheld_root
):
    """issue 37: the lease was checked when a write started, so a long MERGE begun before a
    takeover still committed after it. Its Spark jobs are cancelled now."""
    cfg = replace(spark_cfg, storage__lease_seconds=3.0)
    store = Breakable(lease.store_for(unheld_root, cfg))
    columns = TABLES["frontier"][0].fieldNames()
    endless = (
        spark.range(10**13)
        .where(F.sha2(F.col("id").cast("string"), 256) == "no such hash")  # never, slowly
        .select(*[F.lit(None).alias(c) for c in columns])
    )
    before = tables.version_of(spark, unheld_root, "frontier")
    with lease.hold(unheld_root, "pytest", cfg, store=store):
        store.broken = True
        with pytest.raises(LeaseLost, match="could not renew its writer lease"):
            tables.append(endless, unheld_root, "frontier")
    assert tables.version_of(spark, unheld_root, "frontier") == before
