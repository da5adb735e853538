"""crawl init / seed / sql against real Delta tables under tmp_path (shared SparkSession): init
and seed on each engine in turn (`--engine`), Spark's Delta reading what they wrote."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from crawllib.cli import main
from crawllib.content.quality import quality_signals
from crawllib.store import lease, tables
from crawllib.store.schemas import QUALITY
from crawllib.store.spark_schemas import CRAWLDB, TABLES
from tests.conftest import open_db, test_config_overrides

SEEDS = (
    """\
# sample seeds, with cosmetic variants of one URL
http://Site1.COM:80/a/../b/?z=1&a=2#frag
http://site1.com/b/?a=2&z=1&utm_source=newsletter

https://www.site2.org
mailto:someone@site2.org
not a url
http://site3.net/photo.JPG
HTTP://blog.site3.net/2026/11/post.html?sessionid=abc123
http://169.254.169.254/latest/meta-data/
"""
    + "not a url either " * 20
    + "\n"
)


# the engine the commands that take --engine run on (the `root` fixture sets it per test)
ENGINE = {"name": "auto"}
ENGINE_COMMANDS = ("init", "seed")


def crawl(*argv: str) -> int:
    args = list(argv)
    if args[0] in ENGINE_COMMANDS:
        args += ["--engine", ENGINE["name"]]
    for override in test_config_overrides():
        args += ["--set", override]
    return main(args)


@pytest.fixture
def root(tmp_path, engine, spark, spark_cfg, monkeypatch):
    """A new crawl root, made by `crawl init` on ``engine`` (which the test's init and seed
    commands run on too), whose writer lease this process holds for the test (the commands
    it runs hold it again)."""
    monkeypatch.setitem(ENGINE, "name", engine)
    path = str(tmp_path / "crawl")
    with lease.hold(path, "pytest", spark_cfg):
        assert crawl("init", path) == 0
        yield path


def frontier_json(root, capsys) -> list[dict]:
    capsys.readouterr()
    assert (
        crawl("sql", root, "SELECT url, depth, gen FROM frontier ORDER BY url", "--format", "json")
        == 0
    )
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_init_creates_every_table_idempotently(spark, root, capsys):
    for name, (_, partitions) in TABLES.items():
        path = tables.table_path(root, name)
        assert DeltaTable.isDeltaTable(spark, path), name
        detail = DeltaTable.forPath(spark, path).detail().collect()[0]
        assert list(detail["partitionColumns"]) == partitions
        # deletion vectors where MERGEs rewrite rows of a large table: crawldb only (a scan of
        # a table with them costs a Spark job more)
        wanted = "true" if name == "crawldb" else None
        assert detail["properties"].get("delta.enableDeletionVectors") == wanted, name
        # a checkpoint every 50 commits, not Delta's 10: each one costs a commit seconds
        assert detail["properties"].get("delta.checkpointInterval") == "50", name
    capsys.readouterr()
    assert crawl("init", root) == 0
    assert "already initialised" in capsys.readouterr().out
    assert DeltaTable.forPath(spark, tables.table_path(root, "frontier")).history().count() == 1


def test_merge_marks_replaced_rows_with_deletion_vectors_and_init_upgrades_old_tables(spark, root):
    """update's MERGE into crawldb writes the changed rows and a deletion vector per file it
    touches, never rewrites those files whole; a table made without the property gets it
    from `crawl init`."""
    given = {"url_key": "id", "url": "concat('http://h.com/', id)", "host": "'h.com'"}
    rows = spark.range(2000).selectExpr(
        *[f"{given.get(f.name, 'NULL')} AS {f.name}" for f in CRAWLDB.fields]
    )
    rows = spark.createDataFrame(rows.rdd, CRAWLDB)
    tables.append(rows.repartition(4), root, "crawldb")
    changed = (
        tables.read(spark, root, "crawldb")
        .where("url_key % 500 = 0")
        .withColumn("status", F.lit("failed"))
    )
    tables.merge(
        spark,
        changed,
        root,
        "crawldb",
        keys=["url_key"],
        update={"status": "s.status"},
        insert=False,
    )
    crawldb = DeltaTable.forPath(spark, tables.table_path(root, "crawldb"))
    metrics = crawldb.history(1).first()["operationMetrics"]
    assert int(metrics["numTargetRowsUpdated"]) == 4
    assert int(metrics["numTargetDeletionVectorsAdded"]) >= 1
    assert int(metrics["numTargetFilesRemoved"]) == 0
    assert tables.read(spark, root, "crawldb").where("status = 'failed'").count() == 4

    tables.set_property(spark, root, "crawldb", "delta.enableDeletionVectors", "false")
    assert tables.property_of(spark, root, "crawldb", "delta.enableDeletionVectors") == "false"
    assert crawl("init", root) == 0
    assert tables.property_of(spark, root, "crawldb", "delta.enableDeletionVectors") == "true"


# Columns added to fetches, pages and texts after their first release (in the middle of the
# tables' schemas: an older table has them at its end).
ADDED = {
    "domain",
    "surt",
    "language_detected",
    "quality",
    "non_document",
    "cluster",
    "mime_detected",
    "private_domain",
}
# a texts row's quality signals, as a value of its struct column
QUALITY_VALUE = tuple(
    (quality_signals("A short text. It has two lines.\nAnd this is the second one.") or {})[n]
    for n in QUALITY.names
)


@pytest.mark.slow  # init_tables makes every table of a root
def test_tables_of_an_older_crawllib_get_the_new_columns_null_and_new_rows_fill_them(
    request, engine, spark, spark_cfg, tmp_path
):
    root = str(tmp_path / "old")
    db = open_db(request, engine, root, spark_cfg)
    try:
        with lease.hold(root, "pytest", spark_cfg):
            old_tables_get_new_columns(spark, db)
    finally:
        db.close()


def old_tables_get_new_columns(spark, db):
    """Tables of an older crawllib made by Spark, brought up to date by ``db``'s engine."""
    root = db.root
    for name in ("fetches", "pages", "texts"):
        schema, partitions = TABLES[name]
        old = StructType([f for f in schema.fields if f.name not in ADDED])
        DeltaTable.create(spark).location(tables.table_path(root, name)).addColumns(
            old
        ).partitionedBy(*partitions).execute()
        row = {"gen": 0, "url_key": 1, "url": "http://www.a.test/x", "host": "www.a.test"}
        spark.createDataFrame([tuple(row.get(f) for f in old.fieldNames())], old).write.format(
            "delta"
        ).mode("append").save(tables.table_path(root, name))
    db.init_tables(upgrade=True)
    for name in ("fetches", "pages", "texts"):
        schema, _ = TABLES[name]
        added = ADDED & set(schema.fieldNames())
        assert added <= set(tables.read(spark, root, name).columns), name
        new = {
            "gen": 1,
            "url_key": 2,
            "url": "http://www.a.test/y",
            "host": "www.a.test",
            "domain": "a.test",
            "surt": "test,a)/y",
            "language_detected": "en",
            "quality": QUALITY_VALUE,
            "non_document": "parked",
            "cluster": 2,
            "mime_detected": "text/html",
            "private_domain": "a.test",
        }
        tables.append(
            spark.createDataFrame([tuple(new.get(f) for f in schema.fieldNames())], schema),
            root,
            name,
        )
        got = {
            r["gen"]: r.asDict()
            for r in tables.read(spark, root, name).select("gen", *added).collect()
        }
        assert got[0] == {"gen": 0, **{c: None for c in added}}, name
        assert got[1] == {"gen": 1, **{c: new[c] for c in added}}, name


def test_in_parallel_runs_actions_at_once_and_raises_the_first_failure_after_all_end(spark):
    sc = spark.sparkContext
    sc.setLocalProperty("crawllib.test", "inherited")
    both_started = threading.Barrier(2, timeout=60)  # passes only if the two run at once

    def count(n):
        both_started.wait()
        return spark.range(n).count(), sc.getLocalProperty("crawllib.test")

    try:
        assert tables.in_parallel(spark, lambda: count(3), lambda: count(5)) == [
            (3, "inherited"),
            (5, "inherited"),
        ]
    finally:
        sc.setLocalProperty("crawllib.test", None)
    finished = []

    def slow():
        time.sleep(0.5)
        finished.append(spark.range(2).count())

    def bad():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        tables.in_parallel(spark, bad, slow)
    assert finished == [2]  # the failure waited for the other action


def test_seed_normalises_dedups_and_names_invalid_lines(root, tmp_path, capsys):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(SEEDS)
    assert crawl("seed", root, str(seeds)) == 0
    out, err = capsys.readouterr()
    assert f"{seeds}:6: invalid seed 'mailto:someone@site2.org': unsupported scheme 'mailto'" in err
    assert f"{seeds}:7: invalid seed 'not a url'" in err
    assert f"{seeds}:8:" in err and "skip_extensions" in err
    assert ":2:" not in err and ":9:" not in err
    assert f"{seeds}:10: invalid seed" in err and "fetch would block it (metadata_address" in err
    assert "... (339 chars)" in err  # a long rejected line is cut in its message
    assert "3 new" in out
    assert frontier_json(root, capsys) == [
        {"url": "http://blog.site3.net/2026/11/post.html", "depth": 0, "gen": 0},
        {"url": "http://site1.com/b/?a=2&z=1", "depth": 0, "gen": 0},
        {"url": "https://www.site2.org/", "depth": 0, "gen": 0},
    ]
    capsys.readouterr()
    assert crawl("seed", root, str(seeds)) == 0
    assert "0 new" in capsys.readouterr().out
    assert len(frontier_json(root, capsys)) == 3
    capsys.readouterr()
    assert (
        crawl(
            "sql",
            root,
            "SELECT status, count(*) AS n FROM crawldb GROUP BY status",
            "--format",
            "csv",
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines() == ["status,n", "queued,3"]


def test_seeding_appends_and_a_rerun_after_a_crash_between_its_writes_adds_no_double(
    spark, root, tmp_path, capsys
):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(SEEDS)
    assert crawl("seed", root, str(seeds)) == 0
    for name in ("frontier", "crawldb"):
        last = DeltaTable.forPath(spark, tables.table_path(root, name)).history(1).collect()[0]
        assert (last["operation"], last["operationParameters"]["mode"]) == ("WRITE", "Append")
    # A crash after the frontier write: crawldb's commit never happened (its log file is
    # gone: the data files it would have added stay unreferenced), the frontier holds them.
    log = os.path.join(root, "crawldb", "_delta_log")
    version = tables.version_of(spark, root, "crawldb")
    for name in (f"{version:020d}.json", f"{version:020d}.crc", f".{version:020d}.json.crc"):
        if os.path.exists(os.path.join(log, name)):
            os.remove(os.path.join(log, name))
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    capsys.readouterr()
    assert crawl("seed", root, str(seeds)) == 0
    assert "3 new" in capsys.readouterr().out
    assert [r["url"] for r in frontier_json(root, capsys)] == [
        "http://blog.site3.net/2026/11/post.html",
        "http://site1.com/b/?a=2&z=1",
        "https://www.site2.org/",
    ]
    crawldb = tables.read(spark, root, "crawldb").collect()
    assert sorted((r["url"], r["status"], r["next_gen"]) for r in crawldb) == [
        ("http://blog.site3.net/2026/11/post.html", "queued", 0),
        ("http://site1.com/b/?a=2&z=1", "queued", 0),
        ("https://www.site2.org/", "queued", 0),
    ]


def test_seed_from_a_text_file_at_a_uri(root, tmp_path, capsys):
    # a URI is read through Hadoop's file system: file: here, s3a:// in tests/e2e/test_s3.py
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(SEEDS)
    uri = seeds.as_uri()
    assert crawl("seed", root, uri) == 0
    out, err = capsys.readouterr()
    assert f"{uri}:6: invalid seed 'mailto:someone@site2.org'" in err
    assert "3 new" in out
    assert crawl("seed", root, f"{uri}.missing") == 2
    assert f"seed file {uri}.missing does not exist" in capsys.readouterr().err


def test_seed_from_csv_and_parquet(spark, root, tmp_path, capsys):
    csv = tmp_path / "seeds.csv"
    csv.write_text("url,label\nhttp://a.site4.com/x,ok\nftp://a.site4.com/,bad\n")
    assert crawl("seed", root, str(csv)) == 0
    out, err = capsys.readouterr()
    assert "seeds.csv row 2: invalid seed 'ftp://a.site4.com/': unsupported scheme 'ftp'" in err
    parquet = str(tmp_path / "seeds.parquet")
    spark.createDataFrame(
        [("http://b.site4.com/",), ("http://a.site4.com/x",)], "url string"
    ).write.parquet(parquet)
    assert crawl("seed", root, parquet) == 0
    out, err = capsys.readouterr()
    assert "1 new" in out
    urls = [r["url"] for r in frontier_json(root, capsys)]
    assert urls == ["http://a.site4.com/x", "http://b.site4.com/"]


def test_bad_inputs_exit_2_with_a_message(root, tmp_path, capsys):
    assert crawl("seed", root, str(tmp_path / "missing.txt")) == 2
    assert "does not exist" in capsys.readouterr().err
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.site4.com/\n")
    assert crawl("seed", str(tmp_path / "nowhere"), str(seeds)) == 2
    assert "crawl init" in capsys.readouterr().err
    assert crawl("init", root, "--set", "crawl.max_depth=deep") == 2
    assert "crawl.max_depth" in capsys.readouterr().err


def test_sql_sees_every_table_and_formats(root, capsys):
    for name in TABLES:
        capsys.readouterr()
        assert crawl("sql", root, f"SELECT count(*) AS n FROM {name}", "--format", "json") == 0
        assert capsys.readouterr().out.strip() == '{"n": 0}'
    assert crawl("sql", root, "SELECT 1 AS a, 'x' AS b") == 0
    out = capsys.readouterr().out
    assert "| a | b |" in out and "(1 row)" in out
