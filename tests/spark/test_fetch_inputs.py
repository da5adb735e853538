"""fetch_inputs: what each fetch task receives besides its URLs. With politeness.key = ip a slot
is an address: the task takes the address's hosts row and each of its hosts' own. With host or
domain, the slots of one known address share a task (with_task), so that the cap per address
holds for the whole job, here against a server on loopback."""

from __future__ import annotations

import asyncio

from aiohttp import web
from pyspark.sql import functions as F

from crawllib.config import replace
from crawllib.store.spark_schemas import HOSTS
from crawllib.transforms.fetch_inputs import (
    ENGINE_ROBOTS,
    engine_hosts,
    fetch_inputs,
    fetch_results,
    with_task,
)
from tests.unit.test_fetch_support import LocalWeb


def fetchlist(spark, rows):
    """(slot, host) per URL; the engine's other input columns filled in."""
    return spark.createDataFrame(
        [
            (slot, f"http://{host}/{i}", i, host, 0, 0, None, None)
            for i, (slot, host) in enumerate(rows)
        ],
        "slot string, url string, url_key long, host string, depth int, attempts int,"
        " etag string, last_modified string",
    )


def stored_hosts(spark, slots, addresses=None):
    """Hosts table rows of ``slots`` (``addresses``: {slot: the address it last reached})."""
    base = {f.name: None for f in HOSTS.fields}
    at = addresses or {}
    rows = [{**base, "slot": s, "http_failures": 1, "address": at.get(s)} for s in slots]
    return spark.createDataFrame(rows, HOSTS)


def hosts(spark, slots):
    return engine_hosts(stored_hosts(spark, slots))


def states(inputs):
    """{the state's own slot: the slot whose task takes it}."""
    return {
        r["host_state"]["slot"]: r["slot"] for r in inputs.where("host_state IS NOT NULL").collect()
    }


def test_an_address_slot_takes_its_hosts_rows_and_its_own(spark):
    rows = [("10.0.0.1", "a.test"), ("10.0.0.1", "a.test"), ("10.0.0.1", "b.test")]
    rows.append(("c.test", "c.test"))  # key = host (or a name plan could not resolve)
    stored = hosts(spark, ["10.0.0.1", "a.test", "b.test", "c.test", "elsewhere.test"])
    no_robots = spark.createDataFrame([], ENGINE_ROBOTS)
    inputs = fetch_inputs(fetchlist(spark, rows), no_robots, None, stored)
    assert states(inputs) == {
        "10.0.0.1": "10.0.0.1",
        "a.test": "10.0.0.1",
        "b.test": "10.0.0.1",
        "c.test": "c.test",  # once, though it is both the slot and the host
    }
    assert inputs.where("url IS NOT NULL").count() == len(rows)


def test_with_key_host_the_slots_of_one_known_address_share_a_task(spark, spark_cfg):
    on_shared = ("a.test", "b.test", "c.test")
    rows = [(h, h) for h in (*on_shared, "alone.test", "big.test") for _ in range(2)]
    addresses = {**dict.fromkeys(on_shared, "10.0.0.1"), "big.test": "10.0.0.2"}
    stored = stored_hosts(spark, [*on_shared, "big.test"], addresses)
    no_robots = spark.createDataFrame([], ENGINE_ROBOTS)
    cfg = replace(spark_cfg, politeness__key="host", politeness__max_address_task_urls=6)
    inputs = fetch_inputs(fetchlist(spark, rows), no_robots, None, hosts(spark, ["a.test"]))
    tasks = {(r["slot"], r["task"]) for r in with_task(inputs, stored, cfg).collect()}
    assert tasks == {
        *((h, "address 10.0.0.1") for h in on_shared),  # its host_state row too
        ("alone.test", "alone.test"),  # never asked: no address known
        ("big.test", "address 10.0.0.2"),
    }
    small = replace(cfg, politeness__max_address_task_urls=5)  # 10.0.0.1 has 6 URLs
    assert {r["task"] for r in with_task(inputs, stored, small).collect()} == set(
        (*on_shared, "alone.test", "address 10.0.0.2")
    )
    ip = replace(cfg, politeness__key="ip")
    assert with_task(inputs, stored, ip).where("task != slot").count() == 0


def test_the_cap_per_address_holds_across_the_tasks_of_the_job(spark, spark_cfg):
    with LocalWeb() as server:

        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(0.3)
            return web.Response(text="<p>x</p>", content_type="text/html")

        # two hosts whose slots two tasks would take apart (spark.master local[2,2])
        names = [f"h{i}.test" for i in range(40)]
        where = (
            spark.createDataFrame([(n,) for n in names], "slot string")
            .repartition(2, "slot")
            .select("slot", F.spark_partition_id().alias("task"))
            .collect()
        )
        first = next(r["slot"] for r in where if r["task"] == 0)
        second = next(r["slot"] for r in where if r["task"] == 1)
        for host in (first, second):
            server.fallback(host, slow)
        cfg = replace(
            spark_cfg,
            network__resolve=server.resolve(first, second),
            network__resolve_only=True,
            sitemaps__enabled=False,
            fetch__soft404_probe=False,
            fetch__follow=False,
            politeness__key="host",
            politeness__default_delay=0.0,
            politeness__max_hosts_per_address=1,
        )
        rows = [(h, h) for h in (first, second) for _ in range(3)]
        urls = fetchlist(spark, rows)
        stored = stored_hosts(spark, [first, second], dict.fromkeys((first, second), "127.0.0.1"))
        no_robots = spark.createDataFrame([], ENGINE_ROBOTS)
        inputs = with_task(fetch_inputs(urls, no_robots, None, engine_hosts(stored)), stored, cfg)
        results = fetch_results(inputs, cfg, 2).collect()
        hits = sorted(server.hits, key=lambda h: h.start)
    assert sorted(r["outcome"] for r in results if r["record"] == "fetch") == ["ok"] * 6
    assert {h.host for h in hits} == {first, second}
    # one request in flight to 127.0.0.1 at a time, robots.txt included, whichever host
    overlaps = [(a, b) for a, b in zip(hits, hits[1:], strict=False) if b.start < a.end]
    assert overlaps == []
