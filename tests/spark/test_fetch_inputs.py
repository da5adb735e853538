"""fetch_inputs: what each fetch task receives besides its URLs. With politeness.key = ip a slot
is an address: the task takes the address's hosts row and each of its hosts' own. With host or
domain, the slots of one known address share a task (with_task), so that the cap per address
holds for the whole job, here against a server on loopback; on both engines."""

from __future__ import annotations

import asyncio

from aiohttp import web

from crawllib.config import replace
from crawllib.engine.partition import ENGINE_INPUT, ENGINE_ROBOTS, RESULT_SCHEMA, FetchTask
from crawllib.store.schemas import FETCHLIST, HOSTS, S, struct_of
from crawllib.transforms.fetch_inputs import HOSTS_UPDATE, engine_hosts, fetch_inputs, with_task
from tests.rows import rel, run
from tests.unit.test_fetch_support import LocalWeb

INPUT = struct_of(*[(c, FETCHLIST[c].type) for c in ENGINE_INPUT])


def fetchlist(db, rows):
    """(slot, host) per URL; the engine's other input columns filled in."""
    return rel(
        db,
        INPUT,
        [
            {"slot": slot, "url": f"http://{host}/{i}", "url_key": i, "host": host}
            for i, (slot, host) in enumerate(rows)
        ],
        depth=0,
        attempts=0,
    )


def stored_hosts(db, slots, addresses=None):
    """Hosts table rows of ``slots`` (``addresses``: {slot: the address it last reached})."""
    at = addresses or {}
    return rel(db, HOSTS, [{"slot": s, "http_failures": 1, "address": at.get(s)} for s in slots])


def hosts(db, slots):
    return db.sql(engine_hosts(), hosts=stored_hosts(db, slots))


def no_robots(db):
    return rel(db, ENGINE_ROBOTS, [])


def states(db, inputs):
    """{the state's own slot: the slot whose task takes it}."""
    rows = run(db, "SELECT * FROM {i} WHERE host_state IS NOT NULL", i=inputs)
    return {r["host_state"]["slot"]: r["slot"] for r in rows}


def test_an_address_slot_takes_its_hosts_rows_and_its_own(db):
    rows = [("10.0.0.1", "a.test"), ("10.0.0.1", "a.test"), ("10.0.0.1", "b.test")]
    rows.append(("c.test", "c.test"))  # key = host (or a name plan could not resolve)
    stored = hosts(db, ["10.0.0.1", "a.test", "b.test", "c.test", "elsewhere.test"])
    inputs = db.sql(
        fetch_inputs(hosts=True),
        slice_rows=fetchlist(db, rows),
        robots=no_robots(db),
        hosts=stored,
    )
    assert states(db, inputs) == {
        "10.0.0.1": "10.0.0.1",
        "a.test": "10.0.0.1",
        "b.test": "10.0.0.1",
        "c.test": "c.test",  # once, though it is both the slot and the host
    }
    assert db.count(db.sql("SELECT * FROM {i} WHERE url IS NOT NULL", i=inputs)) == len(rows)


def test_with_key_host_the_slots_of_one_known_address_share_a_task(db, spark_cfg):
    on_shared = ("a.test", "b.test", "c.test")
    rows = [(h, h) for h in (*on_shared, "alone.test", "big.test") for _ in range(2)]
    addresses = {**dict.fromkeys(on_shared, "10.0.0.1"), "big.test": "10.0.0.2"}
    stored = stored_hosts(db, [*on_shared, "big.test"], addresses)
    cfg = replace(spark_cfg, politeness__key="host", politeness__max_address_task_urls=6)
    inputs = db.sql(
        fetch_inputs(hosts=True),
        slice_rows=fetchlist(db, rows),
        robots=no_robots(db),
        hosts=hosts(db, ["a.test"]),
    )

    def tasked(cfg):
        return run(db, with_task(cfg, True, 2), inputs=inputs, hosts=stored)

    tasks = {(r["slot"], r["task"]) for r in tasked(cfg)}
    assert tasks == {
        *((h, "address 10.0.0.1") for h in on_shared),  # its host_state row too
        ("alone.test", "alone.test"),  # never asked: no address known
        ("big.test", "address 10.0.0.2"),
    }
    small = replace(cfg, politeness__max_address_task_urls=5)  # 10.0.0.1 has 6 URLs
    assert {r["task"] for r in tasked(small)} == set((*on_shared, "alone.test", "address 10.0.0.2"))
    ip = replace(cfg, politeness__key="ip")
    rows_ip = tasked(ip)
    assert rows_ip and all(r["task"] == r["slot"] for r in rows_ip)
    # one task's rows share its number (the partition that runs it)
    parts: dict[str, set[int]] = {}
    for r in tasked(cfg):
        parts.setdefault(r["task"], set()).add(r["part"])
    assert parts and all(len(p) == 1 and p <= {0, 1} for p in parts.values())


def test_the_cap_per_address_holds_across_the_tasks_of_the_job(db, spark_cfg):
    with LocalWeb() as server:

        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(0.3)
            return web.Response(text="<p>x</p>", content_type="text/html")

        # two hosts whose slots two tasks would take apart (by their slots' partitions)
        names = rel(db, struct_of(("slot", S)), [{"slot": f"h{i}.test"} for i in range(40)])
        where = run(db, "SELECT slot, crawl_partition(slot, 2) AS task FROM {n}", n=names)
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
        stored = stored_hosts(db, [first, second], dict.fromkeys((first, second), "127.0.0.1"))
        inputs = db.sql(
            with_task(cfg, True, 2),
            inputs=db.sql(
                fetch_inputs(hosts=True),
                slice_rows=fetchlist(db, rows),
                robots=no_robots(db),
                hosts=db.sql(engine_hosts(), hosts=stored),
            ),
            hosts=stored,
        )
        tasks = db.sql("SELECT * EXCEPT (task) FROM {i}", i=inputs)
        results = db.collect(
            db.map_partitions(tasks, FetchTask(cfg, partitions=2), RESULT_SCHEMA, 2, by="part")
        )
        hits = sorted(server.hits, key=lambda h: h.start)
    assert sorted(r["outcome"] for r in results if r["record"] == "fetch") == ["ok"] * 6
    assert {h.host for h in hits} == {first, second}
    # one request in flight to 127.0.0.1 at a time, robots.txt included, whichever host
    overlaps = [(a, b) for a, b in zip(hits, hits[1:], strict=False) if b.start < a.end]
    assert overlaps == []


def test_a_slices_hosts_row_adds_its_share_and_its_new_addresses_first(db):
    """The hosts MERGE (HOSTS_UPDATE): totals add the slice's share, once (the same slice
    written again replaces it); addresses are the slice's, then the stored ones, each once,
    16 at most."""
    stored = [f"10.0.0.{i}" for i in range(16)]
    db.append(
        rel(
            db,
            HOSTS,
            [{"slot": "a.test", "gen": 1, "slice": 0, "urls_attempted": 10, "slice_urls": 4}],
            addresses=stored,
            first_gen=1,
        ),
        "hosts",
    )
    new = rel(
        db,
        HOSTS,
        [{"slot": "a.test", "gen": 2, "slice": 0, "urls_attempted": 3, "slice_urls": 3}],
        addresses=["10.0.1.1", "10.0.0.3", "10.0.1.1"],
        first_gen=2,
    )
    for _ in range(2):  # the same slice again: its share replaced, not added twice
        db.merge(new, "hosts", keys=["slot"], update=HOSTS_UPDATE)
        (row,) = db.collect(db.table("hosts"))
        assert (row["urls_attempted"], row["first_gen"], row["gen"]) == (13, 1, 2)
        assert (
            row["addresses"]
            == ["10.0.1.1", "10.0.0.3", *(a for a in stored if a != "10.0.0.3")][:16]
        )
