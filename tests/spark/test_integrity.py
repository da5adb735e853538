"""What protects a crawl root's tables (issue 37), on real Delta tables: every commit crawllib
makes says so in its userMetadata; a table ahead of its record by a commit crawllib did not make
stops every writing command before it writes, seed included; a lost newest commit of the
generations table itself is detected. Each test runs on both engines (the ``db`` fixture, and
`--engine` for the commands); the changes outside the crawl are Spark SQL's."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from delta.tables import DeltaTable

from crawllib import cli
from crawllib.config import replace
from crawllib.core.errors import TableChanged
from crawllib.runs import runner
from crawllib.stages.seeding import seed
from crawllib.store import generations, integrity, lease, maintain, tables
from crawllib.store.db import written_by_crawllib
from crawllib.store.schemas import TABLES
from crawllib.store.spark_db import SparkDb
from tests.conftest import open_db


def history(spark, root, name) -> list[tuple[int, str, str | None]]:
    """(version, operation, userMetadata) of each commit, as Spark's Delta reads them."""
    rows = DeltaTable.forPath(spark, tables.table_path(root, name)).history().collect()
    return sorted((r["version"], r["operation"], r["userMetadata"]) for r in rows)


def record_done(db, gen=0, stage="plan") -> dict[str, int]:
    """A stage's done row with the versions of the tables now, as a stage records them."""
    versions = integrity.current_versions(db)
    at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(db, gen, stage, "done", at, {}, None, versions)
    return versions


def seeds_file(tmp_path, *urls: str) -> str:
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(urls or ("http://a.example/",)) + "\n")
    return str(path)


def lose_newest_commit(spark, db, name) -> int:
    """Delete table ``name``'s newest log file, with Delta's checksum of that version and the
    file system's checksum of the file; the version lost. This process then reads the logs
    afresh, as a new one would."""
    root = db.root
    version = db.version_of(name)
    folder = os.path.join(root, name, "_delta_log")
    for path in (f"{version:020d}.json", f"{version:020d}.crc", f".{version:020d}.json.crc"):
        if os.path.exists(os.path.join(folder, path)):
            os.remove(os.path.join(folder, path))
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return version


def frontier_rows(db) -> int:
    return db.count(db.table("frontier"))


def test_every_commit_crawllib_makes_says_so(spark, spark_cfg, db, tmp_path):
    """init (the template), appends with and without a note, MERGE, replaceWhere, a property,
    and crawl maintain's OPTIMIZE and VACUUM (on Spark, after the engine's writes); Spark reads
    every note the engine wrote."""
    seed(db, seeds_file(tmp_path, "http://a.example/", "http://b.example/"), spark_cfg, 0)
    record_done(db)
    db.set_property("hosts", "crawllib.test", "1")
    frontier = db.keep(db.table("frontier"))
    db.replace_where(frontier, "frontier", "gen = 0")
    db.merge(db.table("crawldb"), "crawldb", ["url_key"], update={"attempts": "s.attempts + 1"})
    for _ in range(5):  # files to compact
        db.append(frontier, "frontier")
    cfg = replace(spark_cfg, maintain__min_files=1)
    maintain.maintain(SparkDb(spark, db.root, cfg), cfg, names=["frontier"])
    operations = {
        op
        for name in ("frontier", "crawldb", "hosts")
        for _, op, _ in history(spark, db.root, name)
    }
    assert {"CREATE TABLE", "WRITE", "MERGE", "SET TBLPROPERTIES", "OPTIMIZE"} <= operations
    assert {"VACUUM START", "VACUUM END"} <= operations
    for name in TABLES:
        version = db.version_of(name)
        assert integrity.foreign_commits(db, name, -1, version) == [], name
        notes = [note for _, _, note in history(spark, db.root, name)]
        assert len(notes) == version + 1 and all(map(written_by_crawllib, notes)), (name, notes)
    notes = [note for _, _, note in history(spark, db.root, "generations")]
    assert "crawllib: gen 0 plan done" in notes
    assert db.property_of("hosts", "crawllib.test") == "1"
    integrity.check_root(db)  # all of it is crawllib's: nothing stops


def test_a_table_ahead_by_a_commit_not_of_crawllib_stops_the_next_stage(
    spark, spark_cfg, db, tmp_path
):
    new_root = db.root
    seed(db, seeds_file(tmp_path, "http://a.example/", "http://b.example/"), spark_cfg, 0)
    recorded = record_done(db)
    path = tables.table_path(new_root, "crawldb")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE url LIKE '%b.example%'")  # outside the crawl
    before = integrity.current_versions(db)
    ledger = generations.read_ledger(db)
    with pytest.raises(TableChanged) as stopped:
        runner.run_stage(db, spark_cfg, 0, "fetch", ledger=ledger)
    message = str(stopped.value)
    assert message.startswith(
        f"table crawldb has commits crawllib did not make after version {recorded['crawldb']}, "
        f"which gen 0 plan recorded: version {recorded['crawldb'] + 1} (DELETE)"
    )
    assert "Nothing was written" in message and "crawl accept-state" in message
    assert integrity.current_versions(db) == before
    assert generations.read_ledger(db).states == {(0, "plan"): "done"}
    # accepted: the change is the crawl's state now
    assert cli.main(["accept-state", new_root, "--engine", db.engine]) == 0
    assert generations.read_ledger(db).versions == integrity.current_versions(db)
    integrity.check_root(db)


def test_a_restore_outside_the_crawl_stops_it_too(spark, spark_cfg, db, tmp_path, capsys):
    seed(db, seeds_file(tmp_path), spark_cfg, 0)
    record_done(db)
    path = tables.table_path(db.root, "frontier")
    spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF 0")
    assert cli.main(["plan", db.root, "--gen", "0", "--force", "--engine", db.engine]) == 2
    err = capsys.readouterr().err
    assert "table frontier has commits crawllib did not make" in err and "(RESTORE)" in err


def test_with_nothing_recorded_every_commit_must_be_crawllibs(
    spark, spark_cfg, db, capsys, tmp_path
):
    seed(db, seeds_file(tmp_path, "http://a.example/"), spark_cfg, 0)
    path = tables.table_path(db.root, "crawldb")
    spark.sql(f"UPDATE delta.`{path}` SET depth = 3")
    more = seeds_file(tmp_path, "http://b.example/")
    assert cli.main(["seed", db.root, more, "--engine", db.engine]) == 2
    err = capsys.readouterr().err
    assert "table crawldb has commits crawllib did not make after its start" in err
    assert frontier_rows(db) == 1


def test_seed_and_run_check_before_they_write(spark, spark_cfg, db, tmp_path, capsys):
    """issue 37: `crawl seed` and `crawl run --seeds` wrote before any check."""
    seed(db, seeds_file(tmp_path, "http://a.example/"), spark_cfg, 0)
    record_done(db)
    path = tables.table_path(db.root, "frontier")
    spark.sql(f"UPDATE delta.`{path}` SET depth = 5")
    more = seeds_file(tmp_path, "http://b.example/", "http://c.example/")
    for argv in (["seed", db.root, more], ["run", db.root, "--seeds", more]):
        assert cli.main([*argv, "--engine", db.engine]) == 2
        assert "table frontier has commits crawllib did not make" in capsys.readouterr().err
        assert frontier_rows(db) == 1  # nothing seeded


def test_a_table_behind_stops_seed_too(spark, spark_cfg, db, tmp_path, capsys):
    seed(db, seeds_file(tmp_path), spark_cfg, 0)
    record_done(db)
    lose_newest_commit(spark, db, "crawldb")
    more = seeds_file(tmp_path, "http://z.example/")
    assert cli.main(["seed", db.root, more, "--engine", db.engine]) == 2
    assert "table crawldb is at version" in capsys.readouterr().err


def test_a_lost_newest_commit_of_the_generations_table_is_detected(
    request, engine, spark, spark_cfg, unheld_root, tmp_path, capsys
):
    """The ledger's own last commit, recorded in the writer lease and carried from holder to
    holder: without it, the stage it recorded would run again as a first run and append."""
    root = unheld_root
    db = open_db(request, engine, root, spark_cfg)
    with lease.hold(root, "pytest", spark_cfg):
        seed(db, seeds_file(tmp_path), spark_cfg, 0)
        record_done(db, 0, "plan")
        record_done(db, 0, "fetch")
    version = lose_newest_commit(spark, db, "generations")
    assert cli.main(["parse", root, "--gen", "0", "--engine", engine]) == 2
    err = capsys.readouterr().err
    assert (
        f"table generations is at version {version - 1}, but this crawl's last commit to it "
        f"made version {version}"
    ) in err
    assert db.version_of("generations") == version - 1  # nothing recorded
    # accepted, the ledger goes on from there
    assert cli.main(["accept-state", root, "--engine", engine]) == 0
    with lease.hold(root, "pytest", spark_cfg):
        integrity.check_root(db)
    db.close()
