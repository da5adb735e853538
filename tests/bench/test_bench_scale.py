"""The scale benchmark (benchmarks.scale) at its quick mode's smallest size: the built
root holds what its spec asks for, in the crawler's own keys and shapes, and the measured
generation runs every stage on it and reports its figures, on Spark (the scale benchmark's
engine) and, the same generation again on a fresh copy, on the embedded engine."""

from __future__ import annotations

import random
import string

import pytest
from pyspark.sql import functions as F

from benchmarks.scale import (
    FOLLOW,
    NEW_HOSTS,
    QUICK_ROWS,
    QUICK_URLS,
    measure,
    render,
    scale_config,
)
from benchmarks.scale_build import cached_root
from benchmarks.scale_data import STORED, ScaleSpec
from benchmarks.scale_keys import with_url_key, wrapping
from crawllib.core.urls import normalize_url, registered_domain, url_key
from crawllib.core.vocab import STAGES, Status
from crawllib.store import tables


def test_url_keys_in_built_ins_are_the_crawlers(spark):
    rnd = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "/:.?=&%-_~"
    texts = ["".join(rnd.choice(alphabet) for _ in range(n)) for n in range(0, 70)]
    with wrapping(spark):
        df = spark.createDataFrame([(t,) for t in texts], "u string")
        rows = with_url_key(df, "u", "k", 70).collect()
    assert {r["u"]: r["k"] for r in rows} == {t: url_key(t) for t in texts}


@pytest.mark.e2e
def test_scale_root_and_generation(spark, tmp_path):
    spec = ScaleSpec(rows=int(QUICK_ROWS.split(",")[0]), urls=QUICK_URLS)
    work = str(tmp_path)
    root = cached_root(spark, spec, work)
    crawldb = tables.read(spark, root, "crawldb")

    by_status = {r["status"]: r["count"] for r in crawldb.groupBy("status").count().collect()}
    assert by_status == spec.counts and sum(by_status.values()) == spec.rows
    assert crawldb.select("url_key").distinct().count() == spec.rows
    # The crawler's own URLs, keys and domains.
    for r in crawldb.orderBy(F.rand(1)).limit(200).collect():
        assert normalize_url(r["url"]) == r["url"]
        assert url_key(r["url"]) == r["url_key"]
        assert registered_domain(r["host"]) == r["domain"]
    # Hosts: about rows / 100 of them, Zipf-like (a few big ones, a long tail).
    sizes = sorted((r["count"] for r in crawldb.groupBy("host").count().collect()), reverse=True)
    assert 0.9 * spec.host_count <= len(sizes) <= spec.host_count
    assert sizes[0] > 10 * sizes[len(sizes) // 2]
    assert sum(sizes[: len(sizes) // 10]) > 0.3 * spec.rows
    # History in proportion: a page and a text per stored URL, ~links_per_text links each.
    stored = sum(spec.counts[s] for s in STORED)
    assert tables.read(spark, root, "pages").count() == stored
    assert tables.read(spark, root, "texts").count() == stored
    links = tables.read(spark, root, "links").count()
    assert 0.8 * spec.links_per_text * stored < links <= spec.links_per_text * stored
    attempted = crawldb.where(F.col("last_gen").isNotNull()).count()
    assert tables.read(spark, root, "fetches").count() == attempted
    assert {
        r["gen"] for r in tables.read(spark, root, "texts").select("gen").distinct().collect()
    } == set(range(spec.gen))

    result = measure(spark, spec, work, scale_config(spec), keep=True)

    for stage in STAGES:
        figures = result["stages"][stage]
        assert figures["wall_s"] > 0 and sum(figures["cpu_s"].values()) > 0, stage
    plan = result["stages"]["plan"]["counts"]
    assert plan["planned"] == spec.urls == plan["candidates"]
    # The keys plan wrote into the fetchlist are crawldb's, as the fetch read them before.
    carried, read = (result["stages"][name]["counts"] for name in FOLLOW)
    assert carried == read and carried["slots"] == plan["follow_slots"] > 0
    assert carried["keys"] > plan["planned"]  # the hosts' earlier URLs too
    assert plan["revisits"] == spec.due[Status.FETCHED]
    # following to new hosts: a task is told every slot crawldb knows (about rows / 100 hosts)
    new_hosts = result["stages"][NEW_HOSTS]["counts"]
    assert 0.9 * spec.host_count <= new_hosts["known_slots"] <= spec.host_count
    assert new_hosts["partitions"] == 1  # a local master
    update = result["stages"]["update"]["counts"]
    assert update["urls"] == spec.urls and update["new"] > 0 and update["revisited"] > 0
    assert update["exact_duplicates"] > 0  # parse's work, in update
    run = str(tmp_path / "runs" / spec.name)
    gen = spec.gen
    for name in ("fetchlist", "fetches", "pages", "texts", "links"):
        assert tables.read(spark, run, name).where(F.col("gen") == gen).count() > 0, name
    assert tables.read(spark, run, "frontier").where(F.col("gen") == gen + 1).count() > 0
    assert tables.read(spark, run, "crawldb").count() == spec.rows + spec.due["new"]
    for name in ("crawldb", "fetches", "texts", "frontier"):
        (files0, bytes0), (files1, bytes1) = result["before"][name], result["after"][name]
        assert files1 > files0 and bytes1 > bytes0, name
    assert "| update |" in render([result])

    # The same generation on a fresh copy, plan and update on the embedded engine: the same
    # choices and counts (the synthetic fetch is Spark's in both).
    embedded = measure(spark, spec, work, scale_config(spec), engine="embedded")
    assert embedded["engine"] == "embedded"
    for stage in STAGES:
        figures = embedded["stages"][stage]
        assert figures["wall_s"] > 0 and sum(figures["cpu_s"].values()) > 0, stage
        assert figures["counts"] == result["stages"][stage]["counts"], stage
    for name in (*FOLLOW, NEW_HOSTS):
        assert embedded["stages"][name]["counts"] == result["stages"][name]["counts"], name
    assert "plan and update on embedded" in render([embedded])
