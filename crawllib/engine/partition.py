"""One fetch task's work, whatever runs it: rows of the fetch stage's input in, result rows out.

The fetch stage builds its input with SQL (crawllib.transforms.fetch_inputs: a slice's URLs,
their hosts' cached robots.txt, what their slots need to follow links, their slots' stored
politeness), groups it into tasks (one slot in exactly one task) and hands each task's rows to
:class:`FetchTask`: a Spark ``mapPartitions`` on the cluster engine, a worker process on the
embedded one (crawllib.store.db.Db.map_partitions). The task runs the engine
(crawllib.engine.task.task_records) and yields one :data:`RESULT_SCHEMA` tuple per record.

Pure Python but for the engine, which it imports when a task runs (on an executor, or in the
worker process), so the stages never load aiohttp.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

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
from crawllib.core.vocab import Record, RobotsOutcome
from crawllib.store.journal import JournalSpec
from crawllib.store.schemas import (
    BIN,
    DNS,
    EXTRACTED,
    FETCHES,
    HOSTS,
    PAGES,
    QUALITY,
    ROBOTS,
    SITEMAPS,
    TEXTS,
    Array,
    B,
    D,
    DataType,
    I,
    L,
    Prim,
    S,
    Struct,
    T,
    struct_of,
)


def engine_type(dtype: DataType) -> DataType:
    """A table column's type in the engine's rows and records: timestamps are epoch seconds."""
    return D if dtype == T else dtype


# The type of a record key that is no table's column, by its values' Python type.
_TYPES: dict[object, DataType] = {str: S, float: D, bool: B, bytes: BIN, Extracted: EXTRACTED}

# Result columns of robots record keys whose name a fetch record key has, with another type:
# a robots.txt body is text, a page body binary.
ROBOTS_RENAMED = {"body": "robots_body"}


def _result_columns(
    declaration: type, tables: tuple[Struct, ...], renamed: Mapping[str, str]
) -> list[tuple[str, DataType]]:
    """(result column, type) of each key of a record declaration: the type of the first table
    column of that name (timestamps in epoch seconds), else that of the key's Python type."""
    out = []
    for key, annotation in fields(declaration).items():
        column = next((t[key] for t in tables if key in t), None)
        dtype = engine_type(column.type) if column is not None else _TYPES[value_type(annotation)]
        out.append((renamed.get(key, key), dtype))
    return out


def _merged(*columns: list[tuple[str, DataType]]) -> Struct:
    """One struct of the columns of several records; a name the records share is one column."""
    merged: dict[str, DataType] = {}
    for name, dtype in itertools.chain(*columns):
        if merged.setdefault(name, dtype) != dtype:
            raise TypeError(f"result column {name!r} is {merged[name]} and {dtype}")
    return struct_of(*merged.items())


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

_CONVERT = {"double": float, "int": int, "bigint": int, "boolean": bool}
_RESULT_CONVERTERS = tuple(
    (f.name, _CONVERT.get(f.type.name) if isinstance(f.type, Prim) else None)
    for f in RESULT_SCHEMA.fields
)

# The fetchlist columns the engine takes per URL, in order.
ENGINE_INPUT = tuple(fields(FetchInput))
# A robots row as the engine takes it (its ``robots_rows``): timestamps in epoch seconds.
ENGINE_ROBOTS = struct_of(*[(f.name, engine_type(f.type)) for f in ROBOTS.fields])
# A hosts row as the engine takes it (its ``host_rows``): the HostState keys, epoch seconds.
ENGINE_HOSTS = struct_of(*[(k, engine_type(HOSTS[k].type)) for k in fields(HostState)])
# What a slot's task needs to follow links (crawllib.engine.follow): its room under the
# per-generation cap, the url_keys known for it and its hosts' trapped URL patterns.
FOLLOW = struct_of(("room", I), ("known", Array(L)), ("trapped", Array(S)))
# The stage's input rows: ENGINE_INPUT columns, and one of the structs (the others null), or
# known_slot: a slot key crawldb knows that the task's partition function gives to the task
# (crawllib.engine.follow.Owner).
INPUT_COLUMNS = (*ENGINE_INPUT, "robots", "follow", "host_state", "known_slot")


def extracted_struct(extracted: Extracted) -> tuple:
    """An extraction (crawllib.content.extract.extract_record) as a value of EXTRACTED."""
    links = [(k["dst_url"], k["dst_key"], k["dst_host"], k["anchor"]) for k in extracted["links"]]
    signals = extracted.get("quality")
    quality = None if signals is None else tuple(signals[n] for n in QUALITY.names)  # type: ignore[literal-required]
    values = {**extracted, "quality": quality, "links": links}
    return tuple(values[name] for name in EXTRACTED.names)


def result_row(record: Mapping[str, Any]) -> tuple:
    """One engine record (crawllib.core.records) as a RESULT_SCHEMA tuple; numbers are coerced
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


@dataclasses.dataclass(frozen=True)
class FetchTask:
    """A slice's fetch task, picklable: the config, the slice's journal (None: none), how many
    tasks the slice has, what is left of fetch.deadline_seconds (None: all of it) and, per
    task, how many URLs it may fetch from new slots (empty: new slots are not followed)."""

    cfg: Config
    journal: JournalSpec | None = None
    partitions: int = 1
    deadline_seconds: float | None = None
    new_slot_budgets: tuple[int, ...] = ()

    def __call__(
        self, rows: Iterable[Mapping[str, Any]], partition: int, attempt: int, in_task: bool
    ) -> Iterator[tuple]:
        """RESULT_SCHEMA tuples of the records the engine yields for a task's input ``rows``
        (dicts of INPUT_COLUMNS), as they come (the engine bounds its own queue), so a task's
        bodies are never held in one list. ``in_task``: run by an engine's task (a watcher
        ends the process once its parent is gone, and the journal is kept)."""
        from crawllib.engine.follow import Owner
        from crawllib.engine.task import task_records  # aiohttp is imported in tasks only

        urls: list[dict[str, Any]] = []
        robots: list[dict[str, Any]] = []
        follow: list[dict[str, Any]] = []
        hosts: list[Any] = []
        known_slots: set[str] = set()
        for row in rows:
            if row.get("known_slot") is not None:
                known_slots.add(row["known_slot"])
            elif row["url"] is not None:
                urls.append({c: row[c] for c in ENGINE_INPUT})
            elif row["robots"] is not None:
                robots.append(dict(row["robots"]))
            elif row["follow"] is not None:
                follow.append({"slot": row["slot"], **row["follow"]})
            elif row["host_state"] is not None:
                hosts.append(HostState(**row["host_state"]))  # type: ignore[typeddict-item]
        if not urls:
            return
        stored = {r["host"] for r in robots}
        owner = None
        if partition < len(self.new_slot_budgets):
            budget = self.new_slot_budgets[partition]
            owner = Owner(partition, self.partitions, frozenset(known_slots), budget)
        records = task_records(
            urls,
            self.cfg,
            robots,
            follow,
            hosts,
            attempt=attempt,
            journal=self.journal if in_task else None,
            partitions=self.partitions,
            partition=partition,
            watch=in_task,
            deadline_seconds=self.deadline_seconds,
            owner=owner,
        )
        for record in records:
            if record["record"] == Record.ROBOTS:
                new = RobotsOutcome.REFRESHED if record["host"] in stored else RobotsOutcome.NEW
                yield result_row({**record, "outcome": new})
            else:
                yield result_row(record)


# What a resolve task yields per host name (crawllib.engine.addresses): the dns table's
# columns, times in epoch seconds.
RESOLVED = struct_of(*[(f.name, engine_type(f.type)) for f in DNS.fields])


@dataclasses.dataclass(frozen=True)
class ResolveTask:
    """Resolve the host names of a partition's rows (column ``host``) as of epoch ``now``:
    RESOLVED tuples (politeness.key = ip: the slots are addresses)."""

    cfg: Config
    now: float

    def __call__(
        self, rows: Iterable[Mapping[str, Any]], partition: int, attempt: int, in_task: bool
    ) -> Iterator[tuple]:
        import asyncio

        from crawllib.engine.addresses import resolve_hosts  # aiodns in tasks only

        names = [row["host"] for row in rows]
        if not names:
            return
        for r in asyncio.run(resolve_hosts(names, self.cfg, self.now)):
            yield tuple(r.get(n) for n in RESOLVED.names)


# An extracted page: PAGE_KEYS and the EXTRACTED fields (crawllib.transforms.parse).
PAGE_KEYS = ("gen", "slice", "url_key", "url", "host", "domain", "surt", "depth")
EXTRACTED_PAGE = struct_of(
    *[(n, PAGES[n].type) for n in PAGE_KEYS], *[(f.name, f.type) for f in EXTRACTED.fields]
)


@dataclasses.dataclass(frozen=True)
class ExtractTask:
    """Extract a partition's pages (rows of the pages table: PAGE_KEYS, charset, headers,
    body), each within extract.max_seconds (crawllib.content.extract_worker: past it, error
    extract_timeout): EXTRACTED_PAGE tuples. The pages the fetch did not extract
    (fetch.extract off), or every page again (``crawl parse --force``)."""

    cfg: Config

    def __call__(
        self, rows: Iterable[Mapping[str, Any]], partition: int, attempt: int, in_task: bool
    ) -> Iterator[tuple]:
        from crawllib.content.extract_worker import shared_extractor

        extractor = shared_extractor(self.cfg)
        for row in rows:
            extracted = extractor.extract(row["body"], row["url"], row["charset"], row["headers"])
            yield (*(row[k] for k in PAGE_KEYS), *extracted_struct(extracted))
