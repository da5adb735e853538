"""The embedded engine's table I/O (crawllib.store.embedded: DuckDB over delta-rs, no JVM) on
real Delta tables on local disk: an append with a transaction id Delta has recorded is
skipped, replace_where replaces exactly its rows, a MERGE applies its update clauses in order
(guarded, an insert condition, the source deduplicated), a MERGE that only inserts is an
append, properties are set and unset, and every commit says crawllib made it.

The ``check_*`` scenarios are the engines' shared contract: tests/spark/test_db.py runs them
on Spark, and the tables each engine writes are read by the other there.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from crawllib.core.errors import LeaseNotHeld
from crawllib.store import integrity
from crawllib.store.db import ONCE_PER_GEN, written_by_crawllib
from crawllib.store.embedded import EmbeddedDb
from crawllib.store.schemas import CRAWLDB, FRONTIER, HOSTS, TABLES
from tests.rows import by, rel


@pytest.fixture
def engine() -> str:
    """The ``db`` fixture (tests/conftest.py) on the embedded engine only: no Spark here."""
    return "embedded"


def crawldb(db, *rows: dict) -> object:
    return rel(db, CRAWLDB, rows, status="queued", attempts=0, depth=0)


def crawldb_rows(db) -> dict:
    columns = ["url_key", "url", "status", "attempts", "score", "score_gen"]
    return by(db.collect(db.table("crawldb", columns=columns)))


def log_notes(root: str, name: str) -> dict[int, str | None]:
    """version -> the userMetadata of its commit, read from the table's log files as they are
    (no Delta reader in between)."""
    notes = {}
    for path in glob.glob(os.path.join(root, name, "_delta_log", "*.json")):
        with open(path) as fh:
            actions = [json.loads(line) for line in fh if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        notes[int(os.path.basename(path).split(".")[0])] = info.get("userMetadata")
    return notes


# -- the scenarios both engines must pass ------------------------------------------------------


def check_txn_append(db) -> None:
    rows = crawldb(
        db, {"url_key": 1, "url": "http://a.test/"}, {"url_key": 2, "url": "http://b.test/"}
    )
    start = db.version_of("crawldb")
    db.append(rows, "crawldb", txn=("plan-0", 3), note="gen 0 plan")
    assert db.version_of("crawldb") == start + 1
    assert db.txn_version("crawldb", "plan-0") == 3
    assert db.txn_version("crawldb", "plan-1") is None
    # the rerun of a write committed already, and an older one: skipped, nothing written
    db.append(rows, "crawldb", txn=("plan-0", 3))
    db.append(rows, "crawldb", txn=("plan-0", 2))
    assert db.version_of("crawldb") == start + 1
    assert db.count(db.table("crawldb")) == 2
    # a newer version of the same id, and another id: written
    db.append(rows, "crawldb", txn=("plan-0", 4))
    db.append(rows, "crawldb", txn=("plan-1", 0))
    assert db.version_of("crawldb") == start + 3
    assert db.count(db.table("crawldb")) == 6
    assert db.txn_version("crawldb", "plan-0") == 4
    commits = db.commits("crawldb", start)
    assert sorted(commits) == [start + 1, start + 2, start + 3]
    assert commits[start + 1] == ("WRITE", "crawllib: gen 0 plan")
    assert all(written_by_crawllib(note) for _, note in commits.values())


def frontier(db, gen: int, *keys: int) -> object:
    return rel(
        db, FRONTIER, [{"gen": gen, "url_key": k, "url": f"http://h.test/{k}"} for k in keys]
    )


def check_replace_where(db) -> None:
    db.append(frontier(db, 0, 1, 2), "frontier")
    db.append(frontier(db, 1, 3, 4), "frontier")
    db.append(frontier(db, 2, 5), "frontier")

    def keys() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for r in db.collect(db.table("frontier", columns=["gen", "url_key"])):
            out.setdefault(r["gen"], []).append(r["url_key"])
        return {gen: sorted(k) for gen, k in sorted(out.items())}

    db.replace_where(frontier(db, 1, 6, 7, 8), "frontier", "gen = 1")
    assert keys() == {0: [1, 2], 1: [6, 7, 8], 2: [5]}
    db.replace_where(frontier(db, 1, 6, 7, 8), "frontier", "gen = 1")  # a rerun: the same
    assert keys() == {0: [1, 2], 1: [6, 7, 8], 2: [5]}
    db.replace_where(frontier(db, 0), "frontier", "gen = 0")  # no rows: the gen's rows go
    assert keys() == {1: [6, 7, 8], 2: [5]}
    # a relation read from the table itself (kept first, as the stages do)
    kept = db.keep(db.table("frontier", where="gen = 2"))
    db.replace_where(kept, "frontier", "gen = 2")
    assert keys() == {1: [6, 7, 8], 2: [5]}


def check_merge_clauses(db) -> None:
    db.append(
        crawldb(
            db,
            {"url_key": 1, "url": "http://h.test/1", "attempts": 0},
            {"url_key": 2, "url": "http://h.test/2", "attempts": 5},
            {"url_key": 3, "url": "http://h.test/3", "status": "fetched", "attempts": 1},
            {"url_key": 4, "url": "http://h.test/4"},
        ),
        "crawldb",
    )
    source = crawldb(
        db,
        {"url_key": 1, "url": "http://h.test/1", "status": "fetched"},
        {"url_key": 1, "url": "http://h.test/1", "status": "fetched"},  # deduplicated
        {"url_key": 2, "url": "http://h.test/2", "status": "fetched"},
        {"url_key": 3, "url": "http://h.test/3", "status": "gone"},
        {"url_key": 5, "url": "http://h.test/5", "status": "queued"},
        {"url_key": 6, "url": "http://h.test/6", "status": "filtered"},
    )
    db.merge(
        source,
        "crawldb",
        ["url_key"],
        update={"status": "s.status", "attempts": "t.attempts + 1"},
        # 1 meets both conditions: the first clause applies; 2 the second only; 3 neither
        update_condition="t.status = 'queued' AND t.attempts < 3",
        also=[("t.status = 'queued'", {"status": "'failed'"})],
        insert_condition="s.status <> 'filtered'",
    )
    got = {k: (r["status"], r["attempts"]) for k, r in crawldb_rows(db).items()}
    assert got == {
        1: ("fetched", 1),
        2: ("failed", 5),
        3: ("fetched", 1),  # no clause held: kept as it was
        4: ("queued", 0),  # not in the source
        5: ("queued", 0),  # inserted; 6 did not meet the insert condition
    }


def check_guarded_merge(db) -> None:
    """A running total added once per generation (ONCE_PER_GEN): a rerun adds nothing."""
    db.append(rel(db, HOSTS, [{"slot": "a.test", "urls_tried": 10, "gen": 2}]), "hosts")

    def add(gen: int, tried: int) -> None:
        rows = [{"slot": "a.test", "urls_tried": tried, "gen": gen}]
        rows.append({"slot": "b.test", "urls_tried": tried, "gen": gen})
        db.merge(
            rel(db, HOSTS, rows),
            "hosts",
            ["slot"],
            update={"urls_tried": "t.urls_tried + s.urls_tried", "gen": "s.gen"},
            update_condition=ONCE_PER_GEN,
        )

    def totals() -> dict[str, tuple[int, int]]:
        rows = db.collect(db.table("hosts", columns=["slot", "urls_tried", "gen"]))
        return {r["slot"]: (r["urls_tried"], r["gen"]) for r in rows}

    add(3, 5)
    assert totals() == {"a.test": (15, 3), "b.test": (5, 3)}
    add(3, 5)  # generation 3 again
    assert totals() == {"a.test": (15, 3), "b.test": (5, 3)}
    add(4, 1)
    assert totals() == {"a.test": (16, 4), "b.test": (6, 4)}


def check_insert_only_merge(db) -> None:
    db.append(crawldb(db, {"url_key": 1, "url": "http://h.test/1", "status": "fetched"}), "crawldb")
    new = crawldb(
        db,
        {"url_key": 1, "url": "http://h.test/1"},  # known: neither inserted nor updated
        {"url_key": 2, "url": "http://h.test/2"},
    )
    db.merge(new, "crawldb", ["url_key"], insert=True)
    got = {k: r["status"] for k, r in crawldb_rows(db).items()}
    assert got == {1: "fetched", 2: "queued"}
    db.merge(new, "crawldb", ["url_key"], insert=False)  # neither update nor insert: no change
    assert {k: r["status"] for k, r in crawldb_rows(db).items()} == got


def check_properties(db) -> None:
    assert db.property_of("hosts", "crawllib.test") is None
    db.set_property("hosts", "crawllib.test", "1")
    assert db.property_of("hosts", "crawllib.test") == "1"
    db.set_property("hosts", "crawllib.test", None)
    assert db.property_of("hosts", "crawllib.test") is None
    # a new crawl's properties
    assert db.property_of("crawldb", "delta.enableDeletionVectors") == "true"
    assert db.property_of("frontier", "delta.enableDeletionVectors") is None
    for name in ("crawldb", "frontier", "pages", "generations"):  # Delta's 10 would cost time
        assert db.property_of(name, "delta.checkpointInterval") == "50", name
    assert db.property_of("crawldb", "crawllib.depth") == "shortest"
    assert db.property_of("hosts", "crawllib.urls_tried") == "complete"


# -- on the embedded engine ---------------------------------------------------------------------


def test_an_append_with_a_transaction_id_already_committed_is_skipped(db):
    check_txn_append(db)


def test_replace_where_replaces_exactly_the_rows_of_its_condition(db):
    check_replace_where(db)


def test_a_merge_applies_its_update_clauses_in_order_and_its_insert_condition(db):
    check_merge_clauses(db)


def test_a_guarded_merge_adds_a_generations_counts_once(db):
    check_guarded_merge(db)


def test_a_merge_that_only_inserts_is_an_append(db):
    check_insert_only_merge(db)
    operations = [op for op, _ in db.commits("crawldb", 0).values()]
    assert operations == ["WRITE", "WRITE"]  # the rows given, then the MERGE's new rows
    before = db.version_of("crawldb")
    db.merge(crawldb(db, {"url_key": 2, "url": "http://h.test/2"}), "crawldb", ["url_key"])
    assert db.version_of("crawldb") == before  # nothing to insert: no commit


def test_a_merge_that_updates_is_a_delta_merge_of_the_touched_rows(db):
    check_merge_clauses(db)
    version = db.version_of("crawldb")
    assert db.commits("crawldb", version - 1)[version][0] == "MERGE"
    assert db.count(db.table("crawldb")) == 5  # the updated rows replaced, not added


def test_properties_are_set_and_unset(db):
    check_properties(db)


def test_every_commit_says_crawllib_made_it(db, tmp_path):
    """In the log files themselves: create, appends with and without a note, replace, MERGE,
    an insert-only MERGE, a property set and unset, and the columns an upgrade adds."""
    check_txn_append(db)
    check_replace_where(db)
    check_guarded_merge(db)
    check_properties(db)
    # one row per key, as a crawl's crawldb has (the appends above wrote key 1 three times)
    db.replace_where(
        crawldb(db, {"url_key": 1, "url": "http://h.test/1"}), "crawldb", "url_key > 0"
    )
    db.merge(
        crawldb(db, {"url_key": 1, "url": "http://h.test/1", "status": "fetched"}),
        "crawldb",
        ["url_key"],
        update={"status": "s.status"},
    )
    # a table of an older crawllib, without the columns added since: init adds them
    schema, _ = TABLES["probes"]
    import shutil

    from deltalake import DeltaTable

    from crawllib.store.arrow import arrow_schema

    shutil.rmtree(os.path.join(db.root, "probes"))
    old = arrow_schema(schema)
    DeltaTable.create(
        os.path.join(db.root, "probes"),
        schema=old.remove(old.get_field_index(schema.names[-1])),
        partition_by=["gen"],
    )
    assert db.init_tables(upgrade=True) == []
    assert schema.names[-1] in db.columns(db.table("probes"))
    for name in TABLES:
        notes = log_notes(db.root, name)
        if name == "probes":
            notes.pop(0)  # made above, as another program would
        assert notes and all(map(written_by_crawllib, notes.values())), (name, notes)
        version = db.version_of(name)
        since = 0 if name == "probes" else -1
        assert integrity.foreign_commits(db, name, since, version) == [], name


def test_a_write_without_the_lease_is_refused(unheld_root, spark_cfg):
    db = EmbeddedDb(unheld_root, spark_cfg)
    try:
        rows = crawldb(db, {"url_key": 1, "url": "http://h.test/1"})
        for write in (
            lambda: db.append(rows, "crawldb"),
            lambda: db.append(rows, "crawldb", txn=("x", 0)),
            lambda: db.replace_where(rows, "crawldb", "url_key = 1"),
            lambda: db.merge(rows, "crawldb", ["url_key"]),
            lambda: db.merge(crawldb(db), "crawldb", ["url_key"]),  # of nothing
            lambda: db.set_property("crawldb", "x", "1"),
        ):
            with pytest.raises(LeaseNotHeld):
                write()
        assert db.version_of("crawldb") == 0
    finally:
        db.close()


def test_a_view_over_a_column_an_older_root_lacks_is_refused_until_a_write_adds_it(
    unheld_root, spark_cfg, capsys
):
    """ccindex reads warc_index.warc_record_id: on a root whose warc_index predates it, crawl
    sql on DuckDB says so in one line (not a binder error); once init adds it, the view runs."""
    import shutil

    from deltalake import DeltaTable

    from crawllib.cli import main
    from crawllib.store import lease
    from crawllib.store.arrow import arrow_schema

    schema, _ = TABLES["warc_index"]
    assert schema.names[-1] == "warc_record_id"
    path = os.path.join(unheld_root, "warc_index")
    shutil.rmtree(path)
    old = arrow_schema(schema)
    DeltaTable.create(
        path, schema=old.remove(old.get_field_index("warc_record_id")), partition_by=["gen"]
    )
    query = ["sql", unheld_root, "SELECT count(*) AS n FROM ccindex", "--engine", "duckdb"]
    assert main(query) == 2
    err = capsys.readouterr().err
    assert "warc_index table has no warc_record_id column yet" in err
    assert len(err.strip().splitlines()) == 1
    with lease.hold(unheld_root, "pytest", spark_cfg):
        db = EmbeddedDb(unheld_root, spark_cfg)
        db.init_tables(upgrade=True)
        db.close()
    assert main([*query, "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", "0"]
