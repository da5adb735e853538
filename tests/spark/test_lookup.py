"""crawllib.transforms.lookup.rows_of: a generation's keys looked up in a crawl-sized table, on
both engines."""

from __future__ import annotations

import pytest

from crawllib.store.schemas import CRAWLDB, D, L, S, struct_of
from crawllib.transforms.lookup import rows_of
from tests.rows import rel, run

KEYS = struct_of(("url_key", L))
LINK_KEYS = struct_of(("src_key", L), ("dst_key", L))
PAIRS = struct_of(("host", S), ("score", D))


@pytest.fixture
def crawl_sized(db):
    """crawldb holding 1000 rows (url_key, host, score), read as the stages read it: a Delta
    table, its columns url_key, host and score."""
    rows = [
        {
            "url_key": k,
            "url": f"http://h{k % 7}.com/{k}",
            "host": f"h{k % 7}.com",
            "score": float(k),
        }
        for k in range(1000)
    ]
    db.append(rel(db, CRAWLDB, rows), "crawldb")
    return db.table("crawldb", columns=["url_key", "host", "score"])


def test_rows_of_keeps_the_rows_whose_key_the_generation_has(db, crawl_sized):
    keys = rel(db, KEYS, [{"url_key": k} for k in (3, 3, 999, 5000, None)])
    got = run(db, rows_of("{table}", "{keys}"), table=crawl_sized, keys=keys)
    assert sorted((r["url_key"], r["host"], r["score"]) for r in got) == [
        (3, "h3.com", 3.0),
        (999, "h5.com", 999.0),
    ]
    assert set(got[0]) == {"url_key", "host", "score"}  # the table's columns only


def test_rows_of_a_key_named_otherwise_and_several_columns(db, crawl_sized):
    links = rel(db, LINK_KEYS, [{"src_key": 1, "dst_key": 10}, {"src_key": 2, "dst_key": 11}])
    keys_only = db.sql("SELECT url_key FROM {t}", t=crawl_sized)
    got = run(
        db, rows_of("{table}", "{links}", "url_key", key="dst_key"), table=keys_only, links=links
    )
    assert sorted(r["url_key"] for r in got) == [10, 11]

    pairs = rel(db, PAIRS, [{"host": "h3.com", "score": 3.0}, {"host": "h3.com", "score": 4.0}])
    got = run(db, rows_of("{table}", "{pairs}", ["host", "score"]), table=crawl_sized, pairs=pairs)
    assert [r["url_key"] for r in got] == [3]

    with pytest.raises(ValueError):
        rows_of("{table}", "{pairs}", ["host", "score"], key="x")


def test_rows_of_never_shuffles_the_large_side(spark, spark_cfg, new_root):
    """On Spark, the generation's keys are broadcast whatever Spark estimates (here it would
    broadcast nothing): the plan is a broadcast semi-join, and no exchange repartitions the
    table's rows (the scan feeds the join directly). Spark's physical plan: Spark only."""
    from crawllib.store.spark_db import SparkDb

    db = SparkDb(spark, new_root, spark_cfg)
    db.small_crawl_bytes = 0  # a crawldb of any size is large: it broadcasts as a cluster does
    rows = [
        {"url_key": k, "url": f"http://h{k % 7}.com/{k}", "host": f"h{k % 7}.com"}
        for k in range(1000)
    ]
    db.append(rel(db, CRAWLDB, rows), "crawldb")
    table = db.table("crawldb", columns=["url_key", "host", "score"])
    keys = rel(db, KEYS, [{"url_key": k} for k in range(0, 1000, 10)])
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        looked_up = db.sql(rows_of("{table}", "{keys}"), table=table, keys=keys)
        plan = looked_up._jdf.queryExecution().executedPlan().toString()
        plain = db.sql(
            "SELECT t.* FROM {table} t LEFT SEMI JOIN {keys} k ON t.url_key = k.url_key",
            table=table,
            keys=keys,
        )
        plain_plan = plain._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    assert "SortMergeJoin" in plain_plan  # what a join without the lookup does
    assert "BroadcastHashJoin" in plan and "LeftSemi" in plan
    assert "SortMergeJoin" not in plan
    assert "hashpartitioning(url_key" not in plan.split("BroadcastExchange")[0]
    assert len(db.collect(looked_up)) == 100


def test_on_one_machine_a_small_crawl_drops_the_broadcasts_and_a_large_one_keeps_them(
    spark, spark_cfg, new_root
):
    """A broadcast is a Spark job of its own: on a local master, while crawldb is under
    SparkDb.small_crawl_bytes, the rules' broadcast hints are dropped (a sort-merge join in
    the query's own job), judged afresh in each stage (job group); the rows are the same."""
    from crawllib.store.spark_db import SMALL_CRAWL_BYTES, SparkDb

    db = SparkDb(spark, new_root, spark_cfg)
    rows = [{"url_key": k, "url": f"http://h.com/{k}", "host": "h.com"} for k in range(100)]
    db.append(rel(db, CRAWLDB, rows), "crawldb")
    keys = rel(db, KEYS, [{"url_key": k} for k in range(0, 100, 10)])
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")

    def lookup() -> tuple[str, int]:
        with db.job_group("a stage"):
            looked_up = db.sql(rows_of("{t}", "{k}"), t=db.table("crawldb"), k=keys)
            return looked_up._jdf.queryExecution().executedPlan().toString(), db.count(looked_up)

    try:
        assert db.small_crawl_bytes == SMALL_CRAWL_BYTES
        small_plan, small_rows = lookup()
        db.small_crawl_bytes = 1  # crawldb now counts as large
        large_plan, large_rows = lookup()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    assert "Broadcast" not in small_plan and "SortMergeJoin" in small_plan
    assert "BroadcastHashJoin" in large_plan
    assert small_rows == large_rows == 10


def test_on_one_machine_a_small_crawl_evaluates_interpreted_and_a_large_one_compiles(
    spark, spark_cfg, new_root
):
    """Janino compiles a class for each projection, predicate and ordering of a query: on a
    local master, while crawldb is small, a stage's expressions are interpreted instead
    (spark.sql.codegen.factoryMode), compiled once it is large; an operator's own setting of
    it in spark.conf is left as it is."""
    from crawllib.config import replace
    from crawllib.store.spark_db import SparkDb

    mode = "spark.sql.codegen.factoryMode"
    own = dict(spark_cfg.spark.conf)
    assert own.pop(mode) == "NO_CODEGEN"  # the tests' own setting
    before = spark.conf.get(mode)
    db = SparkDb(spark, new_root, replace(spark_cfg, spark__conf=own))
    db.append(
        rel(db, CRAWLDB, [{"url_key": 1, "url": "http://h.com/", "host": "h.com"}]), "crawldb"
    )

    def stage_mode(db: SparkDb) -> tuple[str, int]:
        with db.job_group("a stage"):
            found = db.sql("SELECT url_key FROM {t} WHERE host = 'h.com'", t=db.table("crawldb"))
            return spark.conf.get(mode), db.count(found)

    try:
        spark.conf.set(mode, "FALLBACK")
        assert stage_mode(db) == ("NO_CODEGEN", 1)
        db.small_crawl_bytes = 1  # crawldb now counts as large
        assert stage_mode(db) == ("FALLBACK", 1)
        spark.conf.set(mode, "CODEGEN_ONLY")
        operators = SparkDb(spark, new_root, spark_cfg)  # spark.conf sets it: kept
        assert stage_mode(operators) == ("CODEGEN_ONLY", 1)
    finally:
        spark.conf.set(mode, before)
