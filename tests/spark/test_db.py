"""The engines' shared contract for table writes (the ``check_*`` scenarios of
tests/unit/test_embedded_db.py) on Spark (SparkDb): an append with a transaction id Delta has
recorded is skipped, replace_where replaces exactly its rows, a MERGE applies its update
clauses in order (guarded, an insert condition, the source deduplicated), a MERGE of no
clause changes nothing, properties are set and unset, every commit says crawllib made it.

Then the two engines on one root: what one writes (appends with transaction ids, a MERGE, a
replace, a property) the other appends to, MERGEs into and reads back, and both see the same
rows, versions, commits and transaction ids."""

from __future__ import annotations

import glob
import json
import os

import pytest

from crawllib.store.db import written_by_crawllib
from crawllib.store.embedded import EmbeddedDb
from crawllib.store.spark_db import SparkDb
from tests.rows import by
from tests.unit.test_embedded_db import (
    check_guarded_merge,
    check_insert_only_merge,
    check_merge_clauses,
    check_properties,
    check_replace_where,
    check_txn_append,
    crawldb,
    crawldb_rows,
    frontier,
    log_notes,
)


@pytest.fixture
def engine() -> str:
    """The ``db`` fixture (tests/conftest.py) on Spark only: tests/unit runs the embedded."""
    return "spark"


# -- the scenarios on Spark ---------------------------------------------------------------------


def test_an_append_with_a_transaction_id_already_committed_is_skipped(db):
    check_txn_append(db)


def test_replace_where_replaces_exactly_the_rows_of_its_condition(db):
    check_replace_where(db)


def test_a_merge_applies_its_update_clauses_in_order_and_its_insert_condition(db):
    check_merge_clauses(db)
    version = db.version_of("crawldb")
    assert db.commits("crawldb", version - 1)[version][0] == "MERGE"
    assert db.count(db.table("crawldb")) == 5  # the updated rows replaced, not added


def test_a_guarded_merge_adds_a_generations_counts_once(db):
    check_guarded_merge(db)


def test_a_merge_that_only_inserts_inserts_the_new_keys_and_one_of_no_clause_changes_nothing(db):
    check_insert_only_merge(db)


def test_properties_are_set_and_unset(db):
    check_properties(db)


def test_every_commit_says_crawllib_made_it(db):
    """In the log files themselves, as Spark's Delta wrote them."""
    check_txn_append(db)
    check_replace_where(db)
    check_guarded_merge(db)
    check_properties(db)
    db.replace_where(
        crawldb(db, {"url_key": 1, "url": "http://h.test/1"}), "crawldb", "url_key > 0"
    )
    db.merge(
        crawldb(db, {"url_key": 1, "url": "http://h.test/1", "status": "fetched"}),
        "crawldb",
        ["url_key"],
        update={"status": "s.status"},
    )
    for name in ("crawldb", "frontier", "hosts"):
        notes = log_notes(db.root, name)
        assert len(notes) == db.version_of(name) + 1, name
        assert all(map(written_by_crawllib, notes.values())), (name, notes)


# -- one root, both engines ---------------------------------------------------------------------


@pytest.fixture
def engines(spark, new_root, spark_cfg):
    """The same fresh root (its lease held) on both engines."""
    embedded = EmbeddedDb(new_root, spark_cfg)
    yield {"embedded": embedded, "spark": SparkDb(spark, new_root, spark_cfg)}
    embedded.close()


def statuses(db) -> dict[int, tuple[str, int]]:
    return {k: (r["status"], r["attempts"]) for k, r in crawldb_rows(db).items()}


def frontier_keys(db) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in db.collect(db.table("frontier", columns=["gen", "url_key"])):
        out.setdefault(r["gen"], []).append(r["url_key"])
    return {gen: sorted(keys) for gen, keys in sorted(out.items())}


def deletion_vectors(root: str, name: str) -> int:
    """The files added with a deletion vector in table ``name``'s log (Spark's MERGEs)."""
    added = 0
    for path in glob.glob(os.path.join(root, name, "_delta_log", "*.json")):
        with open(path) as fh:
            actions = [json.loads(line) for line in fh if line.strip()]
        added += sum(1 for a in actions if (a.get("add") or {}).get("deletionVector"))
    return added


def assert_same_view(a, b) -> None:
    """Both engines read the same rows, versions, commits and transaction ids."""
    assert statuses(a) == statuses(b)
    assert frontier_keys(a) == frontier_keys(b)
    for name in ("crawldb", "frontier", "hosts"):
        assert a.version_of(name) == b.version_of(name), name
        assert a.commits(name, -1) == b.commits(name, -1), name
    for app_id in ("plan-0", "plan-1", "nobody"):
        assert a.txn_version("crawldb", app_id) == b.txn_version("crawldb", app_id), app_id
    assert a.property_of("hosts", "crawllib.test") == b.property_of("hosts", "crawllib.test")


@pytest.mark.parametrize(("first", "second"), [("embedded", "spark"), ("spark", "embedded")])
def test_what_one_engine_writes_the_other_appends_to_merges_into_and_reads(engines, first, second):
    a, b = engines[first], engines[second]
    start = a.version_of("crawldb")
    assert start == b.version_of("crawldb") == 0

    # a: crawldb's first rows under a transaction id, a frontier of two generations
    keys = [{"url_key": k, "url": f"http://h.test/{k}"} for k in (1, 2, 3, 4)]
    a.append(crawldb(a, *keys), "crawldb", txn=("plan-0", 0), note="gen 0 plan")
    a.append(frontier(a, 0, 1, 2), "frontier")
    a.append(frontier(a, 1, 3, 4), "frontier")
    a.set_property("hosts", "crawllib.test", "1")

    # b: a's transaction is recorded, so its rerun is skipped; a newer one is written
    assert b.txn_version("crawldb", "plan-0") == 0
    b.append(crawldb(b, *keys), "crawldb", txn=("plan-0", 0))
    assert b.version_of("crawldb") == start + 1
    b.append(crawldb(b, {"url_key": 5, "url": "http://h.test/5"}), "crawldb", txn=("plan-0", 1))
    # b MERGEs into a's rows (on Spark: deletion vectors in a's files), inserts one
    b.merge(
        crawldb(
            b,
            {"url_key": 1, "url": "http://h.test/1", "status": "fetched"},
            {"url_key": 2, "url": "http://h.test/2", "status": "fetched"},
            {"url_key": 6, "url": "http://h.test/6", "status": "queued"},
        ),
        "crawldb",
        ["url_key"],
        update={"status": "s.status", "attempts": "t.attempts + 1"},
        update_condition="t.status = 'queued'",
    )
    b.replace_where(frontier(b, 1, 7), "frontier", "gen = 1")
    assert b.property_of("hosts", "crawllib.test") == "1"
    b.set_property("hosts", "crawllib.test", None)

    # a reads what b wrote over its rows, and goes on writing over b's
    want = {
        1: ("fetched", 1),
        2: ("fetched", 1),
        3: ("queued", 0),
        4: ("queued", 0),
        5: ("queued", 0),
        6: ("queued", 0),
    }
    assert statuses(a) == want
    assert frontier_keys(a) == {0: [1, 2], 1: [7]}
    assert a.property_of("hosts", "crawllib.test") is None
    assert a.txn_version("crawldb", "plan-0") == 1
    a.append(crawldb(a, {"url_key": 5, "url": "http://h.test/5"}), "crawldb", txn=("plan-0", 1))
    a.append(crawldb(a, {"url_key": 7, "url": "http://h.test/7"}), "crawldb", txn=("plan-1", 0))
    a.merge(
        crawldb(
            a,
            {"url_key": 1, "url": "http://h.test/1", "status": "gone"},  # b's update
            {"url_key": 6, "url": "http://h.test/6", "status": "failed"},  # b's insert
        ),
        "crawldb",
        ["url_key"],
        update={"status": "s.status", "attempts": "t.attempts + 1"},
        insert=False,
    )
    want.update({1: ("gone", 2), 6: ("failed", 1), 7: ("queued", 0)})
    assert statuses(b) == statuses(a) == want
    # one row per key: the rows each MERGE replaced are gone for both readers
    for db in (a, b):
        assert by(db.collect(db.table("crawldb", columns=["url_key"]))).keys() == want.keys()

    assert_same_view(a, b)
    # Spark's MERGE (b's or a's) left deletion vectors, which the embedded engine applied
    assert deletion_vectors(a.root, "crawldb") > 0
    commits = a.commits("crawldb", start)
    assert [op for _, (op, _) in sorted(commits.items())] == [
        "WRITE",  # a: keys 1-4
        "WRITE",  # b: key 5
        "MERGE",  # b's updates and insert
        "WRITE",  # a: key 7
        "MERGE",  # a's updates
    ]
    assert commits[start + 1][1] == "crawllib: gen 0 plan"
    assert all(written_by_crawllib(note) for _, note in commits.values())
    assert a.txn_version("crawldb", "plan-0") == 1
    assert a.txn_version("crawldb", "plan-1") == 0


@pytest.mark.parametrize("through_losses", [False, True])
def test_a_kept_relations_count_and_emptiness_cost_no_spark_job(db, through_losses):
    """keep counts the rows in the job that computes them (an observation), so count and
    is_empty of what it returns read that figure; of any other relation they run a job."""
    rel = db.sql("SELECT id % 7 AS k, count(*) AS n FROM range(1000) GROUP BY id % 7")
    with db.job_group("kept") as group:
        kept = db.keep(rel, through_losses=through_losses)
        none = db.keep(db.sql("SELECT * FROM {r} WHERE k > 100", r=rel), through_losses)
    jobs_to_keep = db.jobs_of(group)[0]
    with db.job_group("counted") as group:
        assert db.count(kept) == 7
        assert not db.is_empty(kept)
        assert db.count(none) == 0
        assert db.is_empty(none)
    assert db.jobs_of(group)[0] == 0
    with db.job_group("unkept") as group:
        assert db.count(rel) == 7  # not kept: Spark counts it
    assert db.jobs_of(group)[0] >= 1
    assert jobs_to_keep >= 2
    db.drop(kept)
    db.drop(none)
