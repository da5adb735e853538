"""crawllib.transforms.lookup.rows_of: a generation's keys looked up in a crawl-sized table."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from crawllib.transforms.lookup import rows_of


@pytest.fixture
def crawl_sized(spark, tmp_path):
    """A Delta table of 1000 rows (url_key, host, score), as crawldb is read."""
    path = str(tmp_path / "big")
    rows = [(k, f"h{k % 7}.com", float(k)) for k in range(1000)]
    spark.createDataFrame(rows, "url_key long, host string, score double").write.format(
        "delta"
    ).save(path)
    return spark.read.format("delta").load(path)


def test_rows_of_keeps_the_rows_whose_key_the_generation_has(spark, crawl_sized):
    keys = spark.createDataFrame([(3,), (3,), (999,), (5000,), (None,)], "url_key long")
    got = rows_of(crawl_sized, keys)
    expected = spark.createDataFrame(
        [(3, "h3.com", 3.0), (999, "h5.com", 999.0)], "url_key long, host string, score double"
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_rows_of_a_key_named_otherwise_and_several_columns(spark, crawl_sized):
    links = spark.createDataFrame([(1, 10), (2, 11)], "src_key long, dst_key long")
    got = rows_of(crawl_sized.select("url_key"), links, "url_key", key="dst_key")
    assert sorted(r.url_key for r in got.collect()) == [10, 11]

    pairs = spark.createDataFrame([("h3.com", 3.0), ("h3.com", 4.0)], "host string, score double")
    got = rows_of(crawl_sized, pairs, ["host", "score"])
    assert [r.url_key for r in got.collect()] == [3]

    with pytest.raises(ValueError):
        rows_of(crawl_sized, pairs, ["host", "score"], key="x")


def test_rows_of_never_shuffles_the_large_side(spark, crawl_sized):
    """The generation's keys are broadcast whatever Spark estimates (here it would broadcast
    nothing): the plan is a broadcast semi-join, and no exchange repartitions the table's rows
    (the scan feeds the join directly)."""
    keys = spark.createDataFrame([(k,) for k in range(0, 1000, 10)], "url_key long")
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        plan = rows_of(crawl_sized, keys)._jdf.queryExecution().executedPlan().toString()
        plain = crawl_sized.join(keys, "url_key", "left_semi")
        plain_plan = plain._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    assert "SortMergeJoin" in plain_plan  # what a join without the lookup does
    assert "BroadcastHashJoin" in plan and "LeftSemi" in plan
    assert "SortMergeJoin" not in plan
    assert "hashpartitioning(url_key" not in plan.split("BroadcastExchange")[0]
