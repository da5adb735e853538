"""A table write needs this process to hold the crawl root's writer lease, and it must be
writable (issue 37): a write without one is refused, a writer that could not renew for 2/3 of
the lease stops before its next commit, and a write in flight when the lease stops being
writable is cancelled before it commits. Real Delta tables, a real lease file whose renewals
fail (crawllib.testweb.stores). Each test on both engines."""

from __future__ import annotations

import time

import pytest

from crawllib.config import replace
from crawllib.core.errors import LeaseLost, LeaseNotHeld
from crawllib.store import lease
from crawllib.store.schemas import FRONTIER
from crawllib.testweb.stores import Breakable
from tests.conftest import open_db


@pytest.fixture
def db(request, engine, unheld_root, spark_cfg):
    """The tables of a fresh root whose lease nobody holds, on ``engine`` (its lease set to 3 s
    for the tests that hold it)."""
    cfg = replace(spark_cfg, storage__lease_seconds=3.0)
    opened = open_db(request, engine, unheld_root, cfg)
    yield opened
    opened.close()


def endless(db):
    """Rows of the frontier's columns that take for ever to compute, and are none."""
    nulls = ", ".join(f"CAST(NULL AS STRING) AS {c}" for c in FRONTIER.names)
    if db.engine == "spark":
        source = db.spark.range(10**13)
    else:
        source = db.con.sql(f"SELECT range AS id FROM range({10**13})")
    # never, slowly
    return db.sql(
        f"SELECT {nulls} FROM {{ids}} WHERE sha2(CAST(id AS STRING), 256) = 'no such hash'",
        ids=source,
    )


def test_a_write_needs_a_held_lease(db):
    frontier = db.table("frontier")
    before = db.version_of("frontier")
    with pytest.raises(LeaseNotHeld, match="holds no writer lease"):
        db.append(frontier, "frontier")
    with pytest.raises(LeaseNotHeld):
        db.replace_where(frontier, "frontier", "gen = 0")
    with pytest.raises(LeaseNotHeld):
        db.merge(frontier, "frontier", ["gen", "url_key"])
    with pytest.raises(LeaseNotHeld):
        db.set_property("frontier", "x", "1")
    assert db.version_of("frontier") == before
    assert db.property_of("frontier", "x") is None


def test_a_writer_that_cannot_renew_stops_before_its_next_commit(db):
    store = Breakable(lease.store_for(db.root, db.cfg))
    frontier = db.rows([{"gen": 0, "url": "http://a.test/", "url_key": 1}], FRONTIER)
    with lease.hold(db.root, "pytest", db.cfg, store=store):
        db.append(frontier, "frontier")
        before = db.version_of("frontier")
        assert before > 0
        store.broken = True  # renewals fail from now on
        time.sleep(2.2)  # 2/3 of the lease
        with pytest.raises(LeaseLost, match="could not renew its writer lease"):
            db.append(frontier, "frontier")
        with pytest.raises(LeaseLost, match="could not renew its writer lease"):
            db.set_property("frontier", "x", "1")
        assert db.version_of("frontier") == before


def test_a_write_in_flight_when_the_lease_stops_being_writable_does_not_commit(db):
    """issue 37: the lease was checked when a write started, so a long MERGE begun before a
    takeover still committed after it. Its Spark jobs (its DuckDB query) are cancelled now."""
    store = Breakable(lease.store_for(db.root, db.cfg))
    before = db.version_of("frontier")
    with lease.hold(db.root, "pytest", db.cfg, store=store):
        store.broken = True
        with pytest.raises(LeaseLost, match="could not renew its writer lease"):
            db.append(endless(db), "frontier")
    assert db.version_of("frontier") == before
