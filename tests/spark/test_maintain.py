"""`crawl maintain` on a crawl root of many small files: the partitions above maintain.min_files
become one file each with the same rows, a second run changes nothing, VACUUM deletes the
replaced files once they are older than its retention, and the command keeps the writer lease,
the retention check, the integrity check and `--every`."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as dt
import io
import json
import os
import shutil
import time

import pytest

from crawllib import cli
from crawllib.config import replace
from crawllib.core.errors import TableBehind
from crawllib.store import generations, lease, maintain, tables
from crawllib.store.spark_db import SparkDb
from crawllib.store.spark_schemas import CRAWLDB, FRONTIER

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
MIN_FILES = 2  # fewer commits to make than with the default, 4
# frontier: generation -> one-file appends (above MIN_FILES: 0 and 2 are compacted)
APPENDS = {0: 4, 1: 2, 2: 3}
COMPACTED = {0: 1, 1: 2, 2: 1}
CRAWLDB_APPENDS = 3  # and a MERGE, which adds a fourth file and deletion vectors
TESTED = ("frontier", "crawldb")


@pytest.fixture(scope="module")
def cfg(spark_cfg):
    return replace(spark_cfg, maintain__min_files=MIN_FILES)


def frontier_rows(gen: int, batch: int) -> list[tuple]:
    return [
        (gen, f"http://h{batch}.test/{gen}/{i}", gen * 1000 + batch * 10 + i, f"h{batch}.test")
        + (f"h{batch}.test", 1, None, "link", T0, 1.0, None)
        for i in range(3)
    ]


def crawldb_rows(batch: int, status: str = "queued") -> list[tuple]:
    base = {f.name: None for f in CRAWLDB.fields}
    rows = []
    for i in range(3):
        key = batch * 10 + i
        row = {**base, "url_key": key, "url": f"http://h.test/{key}", "host": "h.test"}
        row.update(status=status, reason="seed", attempts=0, depth=0, first_gen=0, next_gen=0)
        rows.append(tuple(row[f.name] for f in CRAWLDB.fields))
    return rows


@pytest.fixture(scope="module")
def small_files(spark, spark_cfg, template_root, tmp_path_factory):
    """A root of small files, made once: frontier generations of APPENDS one-file appends;
    crawldb of CRAWLDB_APPENDS appends, then a MERGE updating one row of each (deletion
    vectors)."""
    root = str(tmp_path_factory.mktemp("small_files") / "crawl")
    shutil.copytree(template_root, root)
    with lease.hold(root, "pytest", spark_cfg):
        fill_small_files(spark, root)
    return root


def fill_small_files(spark, root):
    for gen, batches in APPENDS.items():
        for batch in range(batches):
            df = spark.createDataFrame(frontier_rows(gen, batch), FRONTIER).coalesce(1)
            tables.append(df, root, "frontier")
    for batch in range(CRAWLDB_APPENDS):
        df = spark.createDataFrame(crawldb_rows(batch), CRAWLDB).coalesce(1)
        tables.append(df, root, "crawldb")
    fetched = [r for b in range(CRAWLDB_APPENDS) for r in crawldb_rows(b, "fetched")[:1]]
    update = {"status": "s.status"}
    tables.merge(
        spark, spark.createDataFrame(fetched, CRAWLDB).coalesce(1), root, "crawldb",
        ["url_key"], update=update, insert=False,
    )  # fmt: skip


@pytest.fixture
def unheld(small_files, tmp_path):
    """A copy of the small-files root for this test (Delta logs hold relative paths)."""
    shutil.copytree(small_files, tmp_path / "crawl")
    return str(tmp_path / "crawl")


@pytest.fixture
def root(unheld, spark_cfg):
    """That copy, its writer lease held by this process for the test (`crawl maintain` run
    in this process holds it again)."""
    with lease.hold(unheld, "pytest", spark_cfg):
        yield unheld


def rows(spark, root, name):
    return sorted(tuple(r) for r in tables.read(spark, root, name).collect())


def frontier_files(spark, root) -> dict[int, int]:
    """generation -> files of the frontier's latest version."""
    counts = maintain.file_counts(spark, tables.table_path(root, "frontier"), ["gen"])
    return {int(gen): files for (gen,), (files, _) in counts.items()}


def files_on_disk(root, name) -> set[str]:
    """Data and deletion-vector files in the table's folder, as paths relative to it."""
    top = tables.table_path(root, name)
    return {
        os.path.relpath(os.path.join(folder, f), top)
        for folder, dirs, files in os.walk(top)
        if "_delta_log" not in folder
        for f in files
        if not f.startswith((".", "_"))
    }


def data_files(spark, root, name) -> set[str]:
    """The data files the table's latest version reads, relative to its folder."""
    top = "file:" + tables.table_path(root, name) + "/"
    return {path.removeprefix(top) for path in tables.read(spark, root, name).inputFiles()}


@contextlib.contextmanager
def jvm_console(spark):
    """What the JVM prints with Scala's println (to the process's stdout) during the block."""
    jvm = spark.sparkContext._jvm
    console = getattr(getattr(jvm.scala, "Console$"), "MODULE$")
    buffer = jvm.java.io.ByteArrayOutputStream()
    out = console.out()
    console.setOutDirect(jvm.java.io.PrintStream(buffer, True))
    try:
        yield lambda: buffer.toString()
    finally:
        console.setOutDirect(out)


def by_table(done):
    return {u.table: u for u in done}


def maintained(spark, root, cfg, names=TESTED):
    """crawllib.store.maintain.maintain of the tables ``names`` (Spark only)."""
    return maintain.maintain(SparkDb(spark, root, cfg), cfg, names=names)


def test_maintain_compacts_partitions_of_many_files_keeps_rows_and_is_idempotent(spark, cfg, root):
    frontier, crawldb = rows(spark, root, "frontier"), rows(spark, root, "crawldb")
    assert sum(r[4] == "fetched" for r in crawldb) == CRAWLDB_APPENDS  # the MERGE's updates
    assert frontier_files(spark, root) == APPENDS
    on_disk = files_on_disk(root, "frontier")

    with jvm_console(spark) as printed:
        done = by_table(maintained(spark, root, cfg))
    assert printed() == ""  # VACUUM's "Deleted 0 files ..." lines went to stderr, not stdout

    # partitions above min_files (2) are one file each; generation 1 (2 files) is left alone
    assert frontier_files(spark, root) == COMPACTED
    f = done["frontier"]
    assert (f.files_before, f.files_after) == (9, 4)
    assert (f.partitions_compacted, f.files_compacted) == (2, 7)
    assert f.bytes_after < f.bytes_before
    c = done["crawldb"]  # no partitions: the whole table, its deletion vectors applied
    assert (c.files_before, c.files_after, c.partitions_compacted) == (CRAWLDB_APPENDS + 1, 1, 1)
    # the same rows: the MERGE's updates kept, the rows they replaced not back
    assert rows(spark, root, "frontier") == frontier
    assert rows(spark, root, "crawldb") == crawldb
    # a week's retention: the replaced files stay on disk for readers of older versions
    assert f.files_vacuumed == c.files_vacuumed == 0
    assert on_disk < files_on_disk(root, "frontier")

    again = by_table(maintained(spark, root, cfg))
    for upkeep in again.values():
        assert (upkeep.partitions_compacted, upkeep.files_compacted) == (0, 0), upkeep
        assert upkeep.files_before == upkeep.files_after == done[upkeep.table].files_after
    assert frontier_files(spark, root) == COMPACTED


@pytest.fixture
def retention_check_off(spark):
    """The operator's word that no reader runs longer than maintain.vacuum_hours (test only)."""
    spark.conf.set(maintain.RETENTION_CHECK, "false")
    yield
    spark.conf.unset(maintain.RETENTION_CHECK)


def test_vacuum_deletes_replaced_files_older_than_its_retention_only_when_confirmed(
    spark, cfg, root, capsys, request
):
    maintained(spark, root, cfg)
    frontier, crawldb = rows(spark, root, "frontier"), rows(spark, root, "crawldb")
    kept = {name: files_on_disk(root, name) for name in TESTED}
    assert len(kept["frontier"]) == 9 + 2  # the 7 replaced files are still there

    # under a week, Delta's check refuses: one line, exit 2, nothing deleted
    capsys.readouterr()  # what maintain() above logged (to stderr, once a command set it up)
    assert cli.main(["maintain", root, "--set", "maintain.vacuum_hours=24"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crawl maintain: config key 'maintain.vacuum_hours': 24 is below")
    assert maintain.RETENTION_CHECK in err and "\n" not in err
    assert {name: files_on_disk(root, name) for name in TESTED} == kept

    request.getfixturevalue("retention_check_off")
    time.sleep(1.5)  # the replaced files are now older than a retention of one second
    one_second = replace(cfg, maintain__vacuum_hours=1 / 3600)
    done = by_table(maintained(spark, root, one_second))
    assert done["frontier"].files_vacuumed == 7
    assert done["crawldb"].files_vacuumed >= CRAWLDB_APPENDS + 1  # and its deletion vectors
    # exactly the files the latest version reads are left (crawldb's deletion vectors were
    # applied by the compaction: their files went too)
    for name in TESTED:
        assert files_on_disk(root, name) == data_files(spark, root, name), name
    assert len(files_on_disk(root, "frontier")) == 4
    assert rows(spark, root, "frontier") == frontier
    assert rows(spark, root, "crawldb") == crawldb


def record_done(spark, root, cfg, *gens):
    for gen in gens:
        generations.record(SparkDb(spark, root, cfg), gen, "update", "done", T0)


def test_every_k_maintains_after_a_multiple_of_k_and_prints_json(spark, cfg, root, capsys):
    record_done(spark, root, cfg, 0, 1, 2, 3)
    every = ["--every", "2", "--set", f"maintain.min_files={MIN_FILES}"]
    assert cli.main(["maintain", root, *every, "--format", "json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert [json.loads(line) for line in out] == [
        {"skipped": "the latest finished generation, 3, is not a multiple of 2", "every": 2}
    ]
    assert frontier_files(spark, root) == APPENDS  # nothing done

    record_done(spark, root, cfg, 4)
    assert cli.main(["maintain", root, *every, "--format", "json"]) == 0
    report = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["table"] for r in report] == list(tables.TABLES)
    assert all(list(r) == list(maintain.COLUMNS) for r in report)
    frontier = next(r for r in report if r["table"] == "frontier")
    assert (frontier["files_before"], frontier["files_after"]) == (9, 4)
    assert frontier["partitions_compacted"] == 2
    assert frontier_files(spark, root) == COMPACTED
    # the generations table (one file per record) was compacted too
    assert next(r for r in report if r["table"] == "generations")["files_after"] == 1


def test_maintain_prints_csv_as_the_other_commands(spark, cfg, root, capsys):
    record_done(spark, root, cfg, 0, 1, 2, 3)
    capsys.readouterr()
    assert cli.main(["maintain", root, "--every", "2", "--format", "csv"]) == 0
    assert list(csv.reader(io.StringIO(capsys.readouterr().out))) == [
        ["skipped", "every"],
        ["the latest finished generation, 3, is not a multiple of 2", "2"],
    ]
    assert cli.main(["maintain", root, "--dry-run", "--format", "csv"]) == 0
    header, *planned = csv.reader(io.StringIO(capsys.readouterr().out))
    assert tuple(header) == maintain.PLAN_COLUMNS
    assert [r[0] for r in planned] == list(tables.TABLES)


def test_a_second_writer_or_a_table_behind_its_record_stops_maintain(
    spark, spark_cfg, cfg, unheld, capsys
):
    root = unheld
    other = lease.acquire(lease.store_for(root, spark_cfg), "crawl generation --gen 3", 300.0)
    assert cli.main(["maintain", root]) == 2
    other.release()
    err = capsys.readouterr().err.strip()
    assert err.startswith("crawl maintain: the crawl root is being written by `crawl generation")
    assert "\n" not in err
    assert frontier_files(spark, root) == APPENDS

    # a stage recorded a frontier version the table no longer reaches: VACUUM would delete
    # the files a restore needs, so nothing is done
    versions = {"frontier": 999}
    with lease.hold(root, "pytest", spark_cfg):
        generations.record(SparkDb(spark, root, cfg), 0, "update", "done", T0, versions=versions)
        with pytest.raises(TableBehind, match="table frontier is at version"):
            maintained(spark, root, cfg)
    assert frontier_files(spark, root) == APPENDS


def test_the_summary_line_adds_up_the_tables():
    upkeep = maintain.TableUpkeep("frontier", 14, 1400, 2, 11, 0, 0, 5, 700, 1.5)
    line = maintain.summary([upkeep, dataclasses.replace(upkeep, table="texts")])
    assert line == (
        "28 files before, 10 after: 4 partitions compacted (22 files replaced), "
        "0 old files deleted (0 bytes), 3 s"
    )


def versions(root) -> dict[str, int]:
    """Each table's latest Delta version, from its log's file names."""
    return {
        name: max(
            int(f.split(".")[0])
            for f in os.listdir(os.path.join(tables.table_path(root, name), "_delta_log"))
            if f.endswith(".json")
        )
        for name in tables.TABLES
    }


def test_a_dry_run_lists_what_would_be_compacted_and_deleted_and_writes_nothing(
    spark, cfg, root, capsys, request
):
    maintained(spark, root, cfg)  # 7 frontier files replaced
    for gen, batches in APPENDS.items():  # and again many small files
        for batch in range(batches):
            df = spark.createDataFrame(frontier_rows(gen, batch), FRONTIER).coalesce(1)
            tables.append(df, root, "frontier")
    request.getfixturevalue("retention_check_off")
    time.sleep(1.5)  # the replaced files are older than a retention of one second
    before = versions(root), {name: files_on_disk(root, name) for name in TESTED}
    one_second = [
        "--set",
        f"maintain.min_files={MIN_FILES}",
        "--set",
        "maintain.vacuum_hours=0.0003",
    ]
    check_off = ["--set", f'spark.conf={{"{maintain.RETENTION_CHECK}" = "false"}}']
    # a dry run takes no lease: it runs while another command writes
    with lease.hold(root, "crawl generation --gen 3", cfg):
        argv = ["maintain", root, "--dry-run", "--format", "json", *one_second, *check_off]
        assert cli.main(argv) == 0
    planned = {r["table"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert list(planned) == list(tables.TABLES)
    frontier = planned["frontier"]
    # generations 0 and 1 hold 4 + 1 and 2 + 1 files, 2 holds 3 + 1: all above 2
    assert frontier["partitions_to_compact"] == ["gen=0", "gen=1", "gen=2"]
    assert frontier["files_to_compact"] == frontier["files"] == 4 + 9
    deletes = frontier["files_to_delete"]
    assert len(deletes) == 7 and all(p.endswith(".parquet") for p in deletes)
    assert all(os.path.isfile(p.removeprefix("file:")) for p in deletes)
    assert planned["crawldb"]["partitions_to_compact"] == []  # one file since the maintain
    assert before == (versions(root), {name: files_on_disk(root, name) for name in TESTED})

    assert cli.main(["maintain", root, "--dry-run", *one_second, *check_off]) == 0
    out = capsys.readouterr().out
    assert "| table " in out and "dry run, nothing written: would compact" in out
