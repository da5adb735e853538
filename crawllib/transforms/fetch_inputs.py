"""Fetch-stage steps: a fetchlist slice -> engine input -> engine results -> table rows.

The network work happens in :func:`fetch_results`, lazily, inside ``mapPartitions``: each
task calls the fetch engine (``crawllib.engine.fetch_rows``, imported on the executor so that
this module never imports aiohttp) on the slots of its partition and streams the records it
yields as rows of :data:`RESULT_SCHEMA`. Everything else here is plain DataFrame -> DataFrame.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StructType,
    TimestampType,
)

from crawllib.config import Config
from crawllib.core.records import (
    Extracted,
    FetchInput,
    FetchRecord,
    HostRecord,
    HostState,
    ProbeRecord,
    RobotsRecord,
    SitemapRecord,
    fields,
    value_type,
)
from crawllib.core.vocab import Outcome, Record, RobotsOutcome
from crawllib.store.journal import JournalSpec
from crawllib.store.schemas import (
    DNS,
    EXTRACTED,
    FETCHES,
    FETCHLIST,
    HOSTS,
    PAGES,
    ROBOTS,
    SITEMAPS,
    TEXTS,
    B,
    D,
    I,
    L,
    S,
    columns_of,
    struct_of,
)
from crawllib.transforms.parse import PAGE_KEYS, extracted_struct, registered_domain_udf


def engine_type(dtype: DataType) -> DataType:
    """A table column's type in the engine's rows and records: timestamps are epoch seconds."""
    return D if isinstance(dtype, TimestampType) else dtype


# The Spark type of a record key that is no table's column, by its values' Python type.
_SPARK_TYPES: dict[object, DataType] = {
    str: S,
    float: D,
    bool: B,
    bytes: BinaryType(),
    Extracted: EXTRACTED,
}

# Result columns of robots record keys whose name a fetch record key has, with another type:
# a robots.txt body is text, a page body binary.
ROBOTS_RENAMED = {"body": "robots_body"}


def _result_columns(
    declaration: type, tables: tuple[StructType, ...], renamed: Mapping[str, str]
) -> list[tuple[str, DataType]]:
    """(result column, type) of each key of a record declaration: the type of the first table
    column of that name (timestamps in epoch seconds), else that of the key's Python type."""
    out = []
    for key, annotation in fields(declaration).items():
        column = next((t[key] for t in tables if key in t.fieldNames()), None)
        dtype = (
            engine_type(column.dataType)
            if column is not None
            else _SPARK_TYPES[value_type(annotation)]
        )
        out.append((renamed.get(key, key), dtype))
    return out


def _merged(*columns: list[tuple[str, DataType]]) -> StructType:
    """One struct of the columns of several records; a name the records share is one column."""
    merged: dict[str, DataType] = {}
    for name, dtype in itertools.chain(*columns):
        if merged.setdefault(name, dtype) != dtype:
            raise TypeError(f"result column {name!r} is {merged[name]} and {dtype}")
    return struct_of(*merged.items())


# The fetchlist columns the engine takes per URL, in order.
ENGINE_INPUT = tuple(fields(FetchInput))

# A robots row as the engine takes it (its ``robots_rows``): timestamps in epoch seconds.
ENGINE_ROBOTS = struct_of(*[(f.name, engine_type(f.dataType)) for f in ROBOTS.fields])

# A hosts row as the engine takes it (its ``host_rows``): the HostState keys, epoch seconds.
ENGINE_HOSTS = struct_of(*[(k, engine_type(HOSTS[k].dataType)) for k in fields(HostState)])

# One engine record, "fetch", "robots", "host", "sitemap" or "probe" (column ``record``): the
# keys of the five declarations in crawllib.core.records, typed as their table columns (FETCHES,
# then PAGES; ROBOTS; HOSTS; SITEMAPS; FETCHES, then TEXTS). The keys they share (record, host,
# url, fetched_at, http_status, error_kind, crawl_delay, ...) are one column each; a robots
# record's ``body`` is ``robots_body`` (ROBOTS_RENAMED). A robots record's ``outcome`` is set
# here, not by the engine: "new" (the host has no robots row yet) or "refreshed" (its row had
# expired). text_chars, content_hash and simhash are a probe's only (a page's are in
# ``extracted``).
RESULT_SCHEMA = _merged(
    _result_columns(FetchRecord, (FETCHES, PAGES), {}),
    _result_columns(RobotsRecord, (ROBOTS,), ROBOTS_RENAMED),
    _result_columns(HostRecord, (HOSTS,), {}),
    _result_columns(SitemapRecord, (SITEMAPS,), {}),
    _result_columns(ProbeRecord, (FETCHES, TEXTS), {}),
)

_CONVERT: dict[type, Callable[[Any], Any]] = {
    DoubleType: float,
    IntegerType: int,
    LongType: int,
    BooleanType: bool,
}
_RESULT_CONVERTERS = tuple((f.name, _CONVERT.get(type(f.dataType))) for f in RESULT_SCHEMA.fields)


def _epoch(col: str) -> Column:
    return F.unix_micros(F.col(col)) / 1_000_000


def engine_robots(robots: DataFrame) -> DataFrame:
    """Every robots row in the engine's format; an expired one without its body.

    In: the robots table. Out: ENGINE_ROBOTS columns (timestamps as epoch seconds). The engine
    uses only rows not yet expired (`crawllib.engine.robots_fetch.fresh_rows`); an expired row
    still travels, small, so that the fetch can tell a host whose stored row its new
    robots.txt replaces (outcome "refreshed") from a host with none (outcome "new").
    """
    fresh = F.col("expires_at") > F.current_timestamp()
    times = {f.name: _epoch(f.name) for f in ROBOTS.fields if isinstance(f.dataType, TimestampType)}
    return robots.select(*columns_of(ENGINE_ROBOTS, body=F.when(fresh, F.col("body")), **times))


def engine_hosts(hosts: DataFrame) -> DataFrame:
    """Hosts rows in the engine's format (ENGINE_HOSTS: timestamps as epoch seconds)."""
    times = {
        k: _epoch(k)
        for k in ENGINE_HOSTS.fieldNames()
        if isinstance(HOSTS[k].dataType, TimestampType)
    }
    return hosts.select(*columns_of(ENGINE_HOSTS, **times))


# What a slot's task needs to follow links (crawllib.engine.follow): its room under the
# per-generation cap, and the url_keys known for it.
FOLLOW = struct_of(("room", I), ("known", ArrayType(L)), ("trapped", ArrayType(S)))


def fetch_inputs(
    slice_rows: DataFrame,
    robots: DataFrame,
    follow: DataFrame | None = None,
    hosts: DataFrame | None = None,
) -> DataFrame:
    """The engine's input for one slice: its URLs, plus the cached robots.txt of their hosts,
    what their slots need to follow links and their slots' stored politeness.

    In: fetchlist rows (ENGINE_INPUT: slot, url, url_key, host, depth); robots rows as
    :func:`engine_robots` gives them; follow rows as :func:`follow_inputs` gives them (slot,
    room, known); hosts rows as :func:`engine_hosts` gives them. Out: ENGINE_INPUT, robots
    (struct ENGINE_ROBOTS), follow (struct FOLLOW), host_state (struct ENGINE_HOSTS): one row
    per URL, one per host of the slice that has a robots row (only slot and host set), one per
    slot of the slice with room to follow links and one per slot or host of the slice with a
    hosts row (only slot set: the slot whose task takes it; the struct's slot is the row's
    own, a host's name under politeness.key = ip). A robots row travels once per host rather
    than once per URL (it can be 500 KiB), known keys and politeness once per slot and host.
    """

    def empty_but(*kept: str) -> list[Column]:
        return [
            F.col(c) if c in kept else F.lit(None).cast(FETCHLIST[c].dataType).alias(c)
            for c in ENGINE_INPUT
        ]

    nothing = {
        "robots": F.lit(None).cast(ENGINE_ROBOTS).alias("robots"),
        "follow": F.lit(None).cast(FOLLOW).alias("follow"),
        "host_state": F.lit(None).cast(ENGINE_HOSTS).alias("host_state"),
    }

    def extra(column: str, value: Column) -> list[Column]:
        return [value.alias(c) if c == column else nothing[c] for c in nothing]

    urls = slice_rows.select(*ENGINE_INPUT, *nothing.values())
    hosts_of_slice = slice_rows.select("host", "slot").distinct()
    cached = robots.join(hosts_of_slice, on="host", how="inner").select(
        *empty_but("slot", "host"), *extra("robots", F.struct(*ENGINE_ROBOTS.fieldNames()))
    )
    inputs = urls.unionByName(cached)
    slots = slice_rows.select("slot").distinct()
    if follow is not None:
        rooms = follow.join(slots, on="slot", how="inner").select(
            *empty_but("slot"), *extra("follow", F.struct(*FOLLOW.fieldNames()))
        )
        inputs = inputs.unionByName(rooms)
    if hosts is not None:
        # a slot's row, and with politeness.key = ip each of its hosts' rows (key: the row's)
        keys = (
            slice_rows.select(F.col("slot").alias("_key"), "slot")
            .unionByName(slice_rows.select(F.col("host").alias("_key"), "slot"))
            .distinct()
        )
        state = F.struct(
            *[
                F.col("_key").alias(c) if c == "slot" else F.col(c)
                for c in ENGINE_HOSTS.fieldNames()
            ]
        )
        states = (
            hosts.withColumnRenamed("slot", "_key")
            .join(keys, on="_key", how="inner")
            .select(*empty_but("slot"), *extra("host_state", state))
        )
        inputs = inputs.unionByName(states)
    return inputs


def with_known_keys(
    fetchlist: DataFrame, crawldb: DataFrame, new_keys: DataFrame, cfg: Config
) -> DataFrame:
    """The fetchlist with the url_keys known for each slot that has room to follow links, so
    that the fetch reads them with the fetchlist instead of reading crawldb (whose size is the
    crawl's, not the generation's).

    In: the generation's fetchlist rows (FETCHLIST columns but known), crawldb as plan read it
    (url_key, host, domain) and the new URLs plan writes into crawldb (url_key, host, slot).
    A slot has room when it planned fewer than generate.max_per_host URLs; its known keys are
    crawldb's keys of its slot (with politeness.key = ip: of the slot's hosts in the
    fetchlist) and the new ones, that is crawldb's keys of the slot once plan's writes commit.
    Out: FETCHLIST columns; ``known`` is set on one row of each slot with room (an array,
    maybe empty) and null on every other row.
    """
    planned = fetchlist.groupBy("slot").agg(F.count("*").alias("_planned"))
    rooms = planned.where(F.col("_planned") < cfg.generate.max_per_host).select("slot")
    # Only the keys of slots with room are grouped: a broadcast semi-join on the slot (a
    # generation's slots) narrows crawldb's scan before any shuffle.
    keys = (
        _with_slot(crawldb.select("url_key", "host", "domain"), cfg, fetchlist)
        .join(F.broadcast(rooms), on="slot", how="left_semi")
        .unionByName(new_keys.select("url_key", "slot").join(rooms, on="slot", how="left_semi"))
    )
    known = (
        rooms.join(keys, on="slot", how="left")
        .groupBy("slot")
        .agg(F.collect_set("url_key").alias("_known"))  # nulls are not collected: [] if none
    )
    first = Window.partitionBy("slot").orderBy("slice", "url_key")
    return (
        fetchlist.withColumn("_row", F.row_number().over(first))
        .join(known, on="slot", how="left")
        .select(*columns_of(FETCHLIST, known=F.when(F.col("_row") == 1, F.col("_known"))))
    )


def follow_inputs(
    fetchlist: DataFrame,
    fetches: DataFrame,
    crawldb: DataFrame | None,
    cfg: Config,
    trapped: DataFrame | None = None,
) -> DataFrame:
    """Per slot of a generation, its room to follow links, the url_keys known for it and its
    hosts' URL patterns judged traps.

    In: the generation's fetchlist (slot, known), its fetches so far (url_key, host,
    source_url), crawldb (url_key, host, domain), or None when plan wrote the known keys into
    the fetchlist (:func:`with_known_keys`), and the trapped patterns (host, pattern:
    crawllib.stages.traps.trapped_patterns). room = generate.max_per_host - planned - followed so
    far; known: the slot's url_keys in crawldb (or the fetchlist's) and in the generation's
    fetches, for slots with room only (a slot plan already filled gets none; with known keys
    from the fetchlist, neither does a slot plan gave none); trapped: "host pattern" strings.
    Out: slot, room, known (array of url_key), trapped (array of string).
    """
    fetched = _with_slot(fetches.select("url_key", "source_url", "host"), cfg, fetchlist)
    planned = fetchlist.groupBy("slot").agg(F.count("*").alias("planned"))
    followed = (
        fetched.where(F.col("source_url").isNotNull())
        .groupBy("slot")
        .agg(F.count("*").alias("followed"))
    )
    rooms = (
        planned.join(followed, on="slot", how="left")
        .select(
            "slot",
            (
                F.lit(cfg.generate.max_per_host)
                - F.col("planned")
                - F.coalesce(F.col("followed"), F.lit(0))
            )
            .cast("int")
            .alias("room"),
        )
        .where(F.col("room") > 0)
    )
    if crawldb is None:
        carried = fetchlist.where(F.col("known").isNotNull()).select("slot", "known")
        rooms = rooms.join(carried.select("slot"), on="slot", how="left_semi")
        keys = carried.select("slot", F.explode("known").alias("url_key"))
    else:
        keys = _with_slot(crawldb.select("url_key", "host", "domain"), cfg, fetchlist)
    known = (
        keys.unionByName(fetched.select("url_key", "slot"))
        .join(rooms.select("slot"), on="slot", how="inner")
        .groupBy("slot")
        .agg(F.collect_set("url_key").alias("known"))
    )
    out = rooms.join(known, on="slot", how="left")
    if trapped is None:
        out = out.withColumn("trapped", F.array().cast(ArrayType(S)))
    else:
        patterns = (
            _with_slot(
                trapped.select("host", "pattern", F.col("host").alias("_host")), cfg, fetchlist
            )
            .join(rooms.select("slot"), on="slot", how="inner")
            .groupBy("slot")
            .agg(F.collect_set(F.concat_ws(" ", "_host", "pattern")).alias("trapped"))
        )
        out = out.join(patterns, on="slot", how="left")
    return out.select(
        "slot",
        "room",
        F.coalesce(F.col("known"), F.array().cast(ArrayType(L))).alias("known"),
        F.coalesce(F.col("trapped"), F.array().cast(ArrayType(S))).alias("trapped"),
    )


def _with_slot(df: DataFrame, cfg: Config, fetchlist: DataFrame) -> DataFrame:
    """Rows (url_key, host, ...) -> (url_key, ..., slot): the politeness slot from the host.
    With politeness.key = ip, the slot the generation's fetchlist gives the host (rows of
    hosts it does not hold are dropped: the engine follows links to its slot's hosts only)."""
    key = cfg.politeness.key
    if key == "ip":
        slots = fetchlist.select("host", "slot").distinct()
        return df.join(slots, on="host", how="inner").drop("host", "domain")
    slot = F.col("host")
    if key == "domain":  # crawldb has it; fetches rows do not
        slot = F.col("domain") if "domain" in df.columns else registered_domain_udf(slot)
    return df.withColumn("slot", slot).drop("host", "domain")


def result_row(record: Mapping[str, Any]) -> tuple:
    """One engine record (``crawllib.core.records``) as a RESULT_SCHEMA tuple; numbers are coerced
    to the column types."""
    values = dict(record)
    if values.get("record") == Record.ROBOTS:
        for key, column in ROBOTS_RENAMED.items():
            values[column] = values.pop(key, None)
    elif values.get("extracted") is not None:
        values["extracted"] = extracted_struct(values["extracted"])
    out = []
    for name, convert in _RESULT_CONVERTERS:
        value = values.get(name)
        out.append(value if value is None or convert is None else convert(value))
    return tuple(out)


def partition_fetcher(
    cfg: Config,
    journal: JournalSpec | None = None,
    partitions: int = 1,
    deadline_seconds: float | None = None,
) -> Callable[[Iterable[Row]], Iterator[tuple]]:
    """The ``mapPartitions`` function: fetch_inputs rows of some slots -> RESULT_SCHEMA tuples.

    ``cfg`` and ``journal`` travel in the closure, by value. Records are yielded as the engine
    produces them (the engine bounds its own queue), so a partition's bodies are never held in
    one list. In a Spark task, a watcher ends the task's process once its JVM is gone
    (crawllib.engine.watch), and with ``journal`` (the slice's, of ``partitions`` tasks) the task
    keeps one (crawllib.store.journal): it waits while another attempt of it fetches, yields what
    earlier attempts fetched and fetches only the rest. ``deadline_seconds``: what is left of the
    generation's fetch.deadline_seconds (None: all of it).
    """

    def fetch_partition(rows: Iterable[Row]) -> Iterator[tuple]:
        from pyspark import TaskContext

        from crawllib.engine.task import task_records  # aiohttp is imported on executors only

        urls: list[dict[str, Any]] = []
        robots: list[dict[str, Any]] = []
        follow: list[dict[str, Any]] = []
        hosts: list[Any] = []
        for row in rows:
            if row["url"] is not None:
                urls.append({c: row[c] for c in ENGINE_INPUT})
            elif row["robots"] is not None:
                robots.append(row["robots"].asDict())
            elif row["follow"] is not None:
                follow.append({"slot": row["slot"], **row["follow"].asDict()})
            else:
                hosts.append(row["host_state"].asDict())
        if not urls:
            return
        stored = {r["host"] for r in robots}
        task = TaskContext.get()
        records = task_records(
            urls,
            cfg,
            robots,
            follow,
            hosts,
            attempt=task.attemptNumber() if task is not None else 0,
            journal=journal if task is not None else None,
            partitions=partitions,
            partition=task.partitionId() if task is not None else 0,
            watch=task is not None,
            deadline_seconds=deadline_seconds,
        )
        for record in records:
            if record["record"] == Record.ROBOTS:
                new = RobotsOutcome.REFRESHED if record["host"] in stored else RobotsOutcome.NEW
                yield result_row({**record, "outcome": new})
            else:
                yield result_row(record)

    return fetch_partition


def with_task(inputs: DataFrame, hosts: DataFrame | None, cfg: Config) -> DataFrame:
    """Add ``task``: what :func:`fetch_results` partitions by, so that one task holds it.

    With politeness.key = ip, the slot (an address already). With host or domain, the server
    address the slot's hosts row says its requests last reached, when that address's URLs in
    the slice are at most politeness.max_address_task_urls: every slot of one address then
    sits in one task, whose engine caps the address (max_hosts_per_address) for the whole job.
    Else the slot: a slot not yet asked has no known address, and a larger address is spread
    over tasks (each caps it on its own), lest one task take a whole shared-hosting giant.
    In: fetch_inputs rows (slot, url); hosts table rows (slot, address), or None. Out: + task.
    """
    limit = cfg.politeness.max_address_task_urls
    if cfg.politeness.key == "ip" or hosts is None or limit <= 0:
        return inputs.withColumn("task", F.col("slot"))
    known = hosts.where(F.col("address").isNotNull()).select(
        F.col("slot").alias("_slot"), F.col("address").alias("_address")
    )
    slotted = inputs.join(known, F.col("slot") == F.col("_slot"), "left")
    urls = F.count("url").over(Window.partitionBy("_address"))
    grouped = F.col("_address").isNotNull() & (urls <= limit)
    task = F.when(grouped, F.concat(F.lit("address "), F.col("_address"))).otherwise(F.col("slot"))
    return slotted.withColumn("task", task).select(*inputs.columns, "task")


def fetch_results(
    inputs: DataFrame,
    cfg: Config,
    partitions: int,
    journal: JournalSpec | None = None,
    deadline_seconds: float | None = None,
) -> DataFrame:
    """Fetch (lazily: when an action runs) every URL of :func:`fetch_inputs` rows.

    ``repartition(partitions, "task")`` (:func:`with_task`; without it, by ``slot``) puts all
    rows of one slot (a host, a registered domain or an address), and of the slots grouped by
    address, into one task, so one engine enforces their politeness. Out: RESULT_SCHEMA rows.
    Persist the result before using it twice: every evaluation goes to the network, for what
    the tasks' ``journal`` (crawllib.store.journal) does not hold.
    """
    partitions = max(1, partitions)
    by = "task" if "task" in inputs.columns else "slot"
    grouped = inputs.repartition(partitions, by).drop("task")
    fetcher = partition_fetcher(cfg, journal, partitions, deadline_seconds)
    rdd = grouped.rdd.mapPartitions(fetcher)
    return inputs.sparkSession.createDataFrame(rdd, RESULT_SCHEMA, verifySchema=False)


def resolved_hosts(hosts: DataFrame, cfg: Config, now: float) -> DataFrame:
    """Resolve (lazily, in the tasks: ``crawllib.engine.addresses``) the names of ``hosts``
    (column host, distinct), as of epoch ``now``. Out: DNS rows. Persist before using twice:
    every evaluation asks DNS again."""

    def resolve_partition(rows: Iterable[Row]) -> Iterator[tuple]:
        import asyncio

        from crawllib.engine.addresses import resolve_hosts  # aiodns on executors only

        names = [row["host"] for row in rows]
        if not names:
            return
        for r in asyncio.run(resolve_hosts(names, cfg, now)):
            yield (
                r["host"],
                r["address"],
                r["addresses"],
                r["error_kind"],
                _timestamp(r["resolved_at"]),
                _timestamp(r["expires_at"]),
            )

    spark = hosts.sparkSession
    parts = max(1, spark.sparkContext.defaultParallelism)
    rdd = hosts.select("host").repartition(parts).rdd.mapPartitions(resolve_partition)
    return spark.createDataFrame(rdd, DNS)


def _timestamp(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC)


def _table_columns(
    table: StructType, renamed: Mapping[str, str] | None = None, **given: Column
) -> list[Column]:
    """Select list of `table`'s columns from RESULT_SCHEMA rows (``schemas.columns_of``): the
    expression given for a column, else the result column of its name (or of
    ``renamed[name]``), a timestamp converted from epoch seconds."""
    for f in table.fields:
        source = (renamed or {}).get(f.name, f.name)
        if f.name in given:
            continue
        if isinstance(f.dataType, TimestampType):
            given[f.name] = F.timestamp_seconds(F.col(source))
        elif source != f.name:
            given[f.name] = F.col(source)
    return columns_of(table, **given)


def _fetch_records(results: DataFrame) -> DataFrame:
    return results.filter(F.col("record") == Record.FETCH)


def pages_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """Successful HTML fetches -> pages rows (content_hash: hex SHA-256 of the body)."""
    return (
        _fetch_records(results)
        .filter((F.col("outcome") == Outcome.OK) & F.col("body").isNotNull())
        .select(
            *_table_columns(
                PAGES,
                gen=F.lit(gen),
                slice=F.lit(slice_),
                content_hash=F.sha2(F.col("body"), 256),
            )
        )
    )


def extracted_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """The pages the engine extracted -> extracted pages (``transforms.parse.extract_pages``'
    output: PAGE_KEYS and the EXTRACTED fields), for texts rows (``texts_of``) and links rows
    (``links_table``)."""
    return (
        _fetch_records(results)
        .filter(F.col("extracted").isNotNull())
        .select(
            F.lit(gen).alias("gen"),
            F.lit(slice_).alias("slice"),
            *[c for c in PAGE_KEYS if c not in ("gen", "slice")],
            "extracted.*",
        )
    )


def fetches_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """Every fetch record (failures and deferrals included) -> fetches rows."""
    return _fetch_records(results).select(
        *_table_columns(FETCHES, gen=F.lit(gen), slice=F.lit(slice_))
    )


def hosts_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """Host records -> hosts rows of this slice: totals = the slice's share (the MERGE into
    the table adds them to the stored ones), first and last generation = gen."""
    return results.filter(F.col("record") == Record.HOST).select(
        *_table_columns(
            HOSTS,
            urls_attempted=F.col("slice_urls"),
            pages=F.col("slice_pages"),
            bytes=F.col("slice_bytes"),
            urls_tried=F.col("slice_urls_tried"),
            first_gen=F.lit(gen),
            last_gen=F.lit(gen),
            gen=F.lit(gen),
            slice=F.lit(slice_),
            updated_at=F.current_timestamp(),
        )
    )


# hosts MERGE: a stored row takes the slice's state; its totals add the slice's share, or
# replace it when the same slice is written again (a rerun of a slice whose commit crashed).
_SAME_SLICE = "t.gen = s.gen AND t.slice = s.slice"
HOSTS_UPDATE: dict[str, str] = {
    **{f.name: f"s.{f.name}" for f in HOSTS.fields},
    **{
        # (coalesce: a row of an older crawllib, or one plan's backfill made, lacks some)
        total: f"coalesce(t.{total}, 0)"
        f" - CASE WHEN {_SAME_SLICE} THEN coalesce(t.{share}, 0) ELSE 0 END + s.{share}"
        for total, share in (
            ("urls_attempted", "slice_urls"),
            ("pages", "slice_pages"),
            ("bytes", "slice_bytes"),
            ("urls_tried", "slice_urls_tried"),
        )
    },
    "domain": "coalesce(s.domain, t.domain)",
    "address": "coalesce(s.address, t.address)",
    "last_request_at": "coalesce(s.last_request_at, t.last_request_at)",
    "crawl_delay": "coalesce(s.crawl_delay, t.crawl_delay)",
    "robots_state": "coalesce(s.robots_state, t.robots_state)",
    "addresses": "slice(array_distinct(concat(s.addresses, t.addresses)), 1, 16)",
    "first_gen": "least(t.first_gen, s.first_gen)",
}


def sitemaps_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """Sitemap records -> sitemaps rows of this slice."""
    return results.filter(F.col("record") == Record.SITEMAP).select(
        *_table_columns(SITEMAPS, gen=F.lit(gen), slice=F.lit(slice_))
    )


# The columns of a probe row, in ProbeRecord's order without ``record``: fetched_at a timestamp,
# the others of RESULT_SCHEMA's types.
PROBE_COLUMNS = tuple(k for k in fields(ProbeRecord) if k != "record")


def probes_from_results(
    results: DataFrame, gen: int | None = None, slice_: int | None = None
) -> DataFrame:
    """Probe records -> one row per soft-404 probe made: PROBE_COLUMNS (host, url, fetched_at
    as a timestamp, http_status, error_kind, redirect_to, content_type, text_chars,
    content_hash, simhash), led by gen and slice when they are given."""
    lead = []
    if gen is not None:
        lead.append(F.lit(gen).alias("gen"))
    if slice_ is not None:
        lead.append(F.lit(slice_).alias("slice"))
    return results.filter(F.col("record") == Record.PROBE).select(
        *lead,
        *[
            F.timestamp_seconds(F.col(c)).alias(c) if c == "fetched_at" else F.col(c)
            for c in PROBE_COLUMNS
        ],
    )


def robots_from_results(results: DataFrame) -> DataFrame:
    """robots.txt records -> robots rows (one per host fetched)."""
    return results.filter(F.col("record") == Record.ROBOTS).select(
        *_table_columns(ROBOTS, renamed=ROBOTS_RENAMED)
    )
