"""What protects a crawl root's tables (issue 37), on real Delta tables: every commit crawllib
makes says so in its userMetadata; a table ahead of its record by a commit crawllib did not make
stops every writing command before it writes, seed included; a lost newest commit of the
generations table itself is detected."""

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
from crawllib.store.spark_schemas import TABLES


def history(spark, root, name) -> list[tuple[int, str, str | None]]:
    rows = DeltaTable.forPath(spark, tables.table_path(root, name)).history().collect()
    return sorted((r["version"], r["operation"], r["userMetadata"]) for r in rows)


def record_done(spark, root, gen=0, stage="plan") -> dict[str, int]:
    """A stage's done row with the versions of the tables now, as a stage records them."""
    versions = integrity.current_versions(spark, root)
    at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(spark, root, gen, stage, "done", at, {}, None, versions)
    return versions


def seeds_file(tmp_path, *urls: str) -> str:
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(urls or ("http://a.example/",)) + "\n")
    return str(path)


def lose_newest_commit(spark, root, name) -> int:
    """Delete table ``name``'s newest log file, with Delta's checksum of that version and the
    file system's checksum of the file; the version lost. This process then reads the logs
    afresh, as a new one would."""
    version = tables.version_of(spark, root, name)
    folder = os.path.join(root, name, "_delta_log")
    for path in (f"{version:020d}.json", f"{version:020d}.crc", f".{version:020d}.json.crc"):
        if os.path.exists(os.path.join(folder, path)):
            os.remove(os.path.join(folder, path))
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return version


def frontier_rows(spark, root) -> int:
    return tables.read(spark, root, "frontier").count()


def test_every_commit_crawllib_makes_says_so(spark, spark_cfg, new_root, tmp_path):
    """init (the template), appends with and without a note, MERGE, replaceWhere, a property,
    and crawl maintain's OPTIMIZE and VACUUM."""
    seed(spark, new_root, seeds_file(tmp_path, "http://a.example/", "http://b.example/"),
         spark_cfg, 0)  # fmt: skip
    record_done(spark, new_root)
    tables.set_property(spark, new_root, "hosts", "crawllib.test", "1")
    frontier = tables.read(spark, new_root, "frontier")
    tables.replace_where(frontier, new_root, "frontier", "gen = 0")
    tables.merge(spark, tables.read(spark, new_root, "crawldb"), new_root, "crawldb",
                 ["url_key"], update={"attempts": "s.attempts + 1"})  # fmt: skip
    for _ in range(5):  # files to compact
        tables.append(frontier, new_root, "frontier")
    cfg = replace(spark_cfg, maintain__min_files=1)
    maintain.maintain(spark, new_root, cfg, names=["frontier"])
    operations = {
        op
        for name in ("frontier", "crawldb", "hosts")
        for _, op, _ in history(spark, new_root, name)
    }
    assert {"CREATE TABLE", "WRITE", "MERGE", "SET TBLPROPERTIES", "OPTIMIZE"} <= operations
    assert {"VACUUM START", "VACUUM END"} <= operations
    for name in TABLES:
        version = tables.version_of(spark, new_root, name)
        assert integrity.foreign_commits(spark, new_root, name, -1, version) == [], name
    notes = [note for _, _, note in history(spark, new_root, "generations")]
    assert "crawllib: gen 0 plan done" in notes
    integrity.check_root(spark, new_root)  # all of it is crawllib's: nothing stops


def test_a_table_ahead_by_a_commit_not_of_crawllib_stops_the_next_stage(
    spark, spark_cfg, new_root, tmp_path
):
    seed(spark, new_root, seeds_file(tmp_path, "http://a.example/", "http://b.example/"),
         spark_cfg, 0)  # fmt: skip
    recorded = record_done(spark, new_root)
    path = tables.table_path(new_root, "crawldb")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE url LIKE '%b.example%'")  # outside the crawl
    before = integrity.current_versions(spark, new_root)
    ledger = generations.read_ledger(spark, new_root)
    with pytest.raises(TableChanged) as stopped:
        runner.run_stage(spark, new_root, spark_cfg, 0, "fetch", ledger=ledger)
    message = str(stopped.value)
    assert message.startswith(
        f"table crawldb has commits crawllib did not make after version {recorded['crawldb']}, "
        f"which gen 0 plan recorded: version {recorded['crawldb'] + 1} (DELETE)"
    )
    assert "Nothing was written" in message and "crawl accept-state" in message
    assert integrity.current_versions(spark, new_root) == before
    assert generations.read_ledger(spark, new_root).states == {(0, "plan"): "done"}
    # accepted: the change is the crawl's state now
    assert cli.main(["accept-state", new_root]) == 0
    integrity.check_root(spark, new_root)


def test_a_restore_outside_the_crawl_stops_it_too(spark, spark_cfg, new_root, tmp_path, capsys):
    seed(spark, new_root, seeds_file(tmp_path), spark_cfg, 0)
    record_done(spark, new_root)
    path = tables.table_path(new_root, "frontier")
    spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF 0")
    assert cli.main(["plan", new_root, "--gen", "0", "--force"]) == 2
    err = capsys.readouterr().err
    assert "table frontier has commits crawllib did not make" in err and "(RESTORE)" in err


def test_with_nothing_recorded_every_commit_must_be_crawllibs(
    spark, spark_cfg, new_root, capsys, tmp_path
):
    seed(spark, new_root, seeds_file(tmp_path, "http://a.example/"), spark_cfg, 0)
    path = tables.table_path(new_root, "crawldb")
    spark.sql(f"UPDATE delta.`{path}` SET depth = 3")
    assert cli.main(["seed", new_root, seeds_file(tmp_path, "http://b.example/")]) == 2
    err = capsys.readouterr().err
    assert "table crawldb has commits crawllib did not make after its start" in err
    assert frontier_rows(spark, new_root) == 1


def test_seed_and_run_check_before_they_write(spark, spark_cfg, new_root, tmp_path, capsys):
    """issue 37: `crawl seed` and `crawl run --seeds` wrote before any check."""
    seed(spark, new_root, seeds_file(tmp_path, "http://a.example/"), spark_cfg, 0)
    record_done(spark, new_root)
    path = tables.table_path(new_root, "frontier")
    spark.sql(f"UPDATE delta.`{path}` SET depth = 5")
    more = seeds_file(tmp_path, "http://b.example/", "http://c.example/")
    for argv in (["seed", new_root, more], ["run", new_root, "--seeds", more]):
        assert cli.main(argv) == 2
        assert "table frontier has commits crawllib did not make" in capsys.readouterr().err
        assert frontier_rows(spark, new_root) == 1  # nothing seeded


def test_a_table_behind_stops_seed_too(spark, spark_cfg, new_root, tmp_path, capsys):
    seed(spark, new_root, seeds_file(tmp_path), spark_cfg, 0)
    record_done(spark, new_root)
    lose_newest_commit(spark, new_root, "crawldb")
    assert cli.main(["seed", new_root, seeds_file(tmp_path, "http://z.example/")]) == 2
    assert "table crawldb is at version" in capsys.readouterr().err


def test_a_lost_newest_commit_of_the_generations_table_is_detected(
    spark, spark_cfg, unheld_root, tmp_path, capsys
):
    """The ledger's own last commit, recorded in the writer lease and carried from holder to
    holder: without it, the stage it recorded would run again as a first run and append."""
    root = unheld_root
    with lease.hold(root, "pytest", spark_cfg):
        seed(spark, root, seeds_file(tmp_path), spark_cfg, 0)
        record_done(spark, root, 0, "plan")
        record_done(spark, root, 0, "fetch")
    version = lose_newest_commit(spark, root, "generations")
    assert cli.main(["parse", root, "--gen", "0"]) == 2
    err = capsys.readouterr().err
    assert (
        f"table generations is at version {version - 1}, but this crawl's last commit to it "
        f"made version {version}"
    ) in err
    assert tables.version_of(spark, root, "generations") == version - 1  # nothing recorded
    # accepted, the ledger goes on from there
    assert cli.main(["accept-state", root]) == 0
    with lease.hold(root, "pytest", spark_cfg):
        integrity.check_root(spark, root)
