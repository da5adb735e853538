"""The engine's records (crawllib.core.records) and the tables (crawllib.store.schemas) stay in step.

The declarations are checked against the tables' schemas (pure Python, no engine), and a real
engine run against a loopback server is checked against the declarations: each record has
exactly the declared keys, with values of the declared types and words of the vocabulary.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import typing

from aiohttp import web
from test_fetch_support import LocalWeb, RawServer, config, row

from crawllib.core.records import (
    CheckpointRecord,
    EngineRecord,
    Extracted,
    FetchInput,
    FetchRecord,
    HostRecord,
    HostState,
    Link,
    ProbeRecord,
    RobotsRecord,
    SitemapRecord,
    fields,
    value_type,
)
from crawllib.core.vocab import BLOCKED_KINDS, HOST_DOWN_KINDS, ErrorKind, Outcome, Record, words
from crawllib.engine import fetch_rows
from crawllib.engine.client import Fetched
from crawllib.engine.partition import (
    ENGINE_INPUT,
    ENGINE_ROBOTS,
    RESULT_SCHEMA,
    ROBOTS_RENAMED,
    engine_type,
    result_row,
)
from crawllib.engine.robots_fetch import REDIRECT_DOWN_KINDS
from crawllib.store.schemas import (
    BIN,
    EXTRACTED,
    FETCHES,
    FETCHLIST,
    HOSTS,
    LINK,
    LINKS,
    PAGES,
    ROBOTS,
    TEXTS,
    Array,
    B,
    D,
    DataType,
    I,
    L,
    Map,
    Prim,
    S,
    Struct,
    T,
)
from crawllib.transforms.fetch_inputs import PROBE_COLUMNS

# Python type of a record value -> the column types that can hold it (a float time is epoch
# seconds, the tables' timestamp)
COLUMN_TYPES: dict[object, tuple[DataType, ...]] = {
    int: (I, L),
    float: (D, T),
    str: (S,),
    bool: (B,),
    bytes: (BIN,),
}
GENERIC_COLUMNS: dict[object, DataType] = {dict[str, str]: Map(S, S), list[str]: Array(S)}


def fits(annotation: object, dtype: DataType) -> bool:
    """Whether values of a record key's annotation can be a column of type ``dtype``."""
    python = value_type(annotation)
    if python in GENERIC_COLUMNS:
        return dtype == GENERIC_COLUMNS[python]
    if isinstance(dtype, Struct):  # a struct column: a TypedDict of fitting keys
        keys = fields(python)  # type: ignore[arg-type]
        return list(keys) == list(dtype.names) and all(
            fits(keys[f.name], f.type) for f in dtype.fields
        )
    return dtype in COLUMN_TYPES[python]


def assert_columns_are_keys(declaration: type, table: Struct, besides: set[str]) -> None:
    keys = fields(declaration)
    for f in table.fields:
        if f.name in besides:
            continue
        assert f.name in keys, f"{f.name} is not a {declaration.__name__} key"
        assert fits(keys[f.name], f.type), (f.name, keys[f.name], f.type)


def test_every_fetches_column_but_gen_and_slice_is_a_fetch_record_key():
    assert_columns_are_keys(FetchRecord, FETCHES, {"gen", "slice"})


def test_every_pages_column_but_gen_slice_and_content_hash_is_a_fetch_record_key():
    assert_columns_are_keys(FetchRecord, PAGES, {"gen", "slice", "content_hash"})


def test_a_robots_record_is_a_robots_row():
    assert list(fields(RobotsRecord)) == ["record", *ROBOTS.names]
    assert_columns_are_keys(RobotsRecord, ROBOTS, set())


def test_a_host_record_is_a_hosts_row_less_what_the_stage_adds():
    stage_adds = {"urls_attempted", "pages", "bytes", "urls_tried", "first_gen", "last_gen"}
    stage_adds |= {"gen", "slice"}
    assert_columns_are_keys(HostRecord, HOSTS, stage_adds | {"updated_at"})
    assert set(fields(HostRecord)) - set(HOSTS.names) == {"record"}
    # what a slot starts from is a part of its row
    assert set(fields(HostState)) <= set(HOSTS.names)
    for key, annotation in fields(HostState).items():
        assert fits(annotation, HOSTS[key].type), key


def test_fetch_record_keys_beyond_the_tables():
    assert set(fields(FetchRecord)) - {*FETCHES.names, *PAGES.names} == {
        "record",
        "error_detail",
        "extracted",  # becomes a texts row and links rows
        "refetched",  # counted by the fetch stage (refetched_after_retry)
    }


def test_an_extraction_is_a_texts_row_and_links_rows():
    assert list(EXTRACTED.names) == list(fields(Extracted))
    assert list(LINK.names) == list(fields(Link))
    for key, annotation in fields(Extracted).items():
        if key != "links":
            assert fits(annotation, TEXTS[key].type), key
    for key, annotation in fields(Link).items():
        assert fits(annotation, LINKS[key].type), key
    assert RESULT_SCHEMA["extracted"].type == EXTRACTED


def test_the_engine_input_is_fetchlist_columns():
    assert ENGINE_INPUT == tuple(fields(FetchInput))
    for key, annotation in fields(FetchInput).items():
        assert fits(annotation, FETCHLIST[key].type), key


def test_record_kinds_are_the_vocabulary():
    declarations = (
        FetchRecord, RobotsRecord, HostRecord, SitemapRecord, ProbeRecord, CheckpointRecord
    )  # fmt: skip
    kinds = [typing.get_args(fields(d)["record"]) for d in declarations]
    assert kinds == [(Record.FETCH,), (Record.ROBOTS,), (Record.HOST,), (Record.SITEMAP,),
                     (Record.PROBE,), (Record.CHECKPOINT,)]  # fmt: skip
    assert words(Record) == tuple(kind for (kind,) in kinds)
    assert set(typing.get_args(EngineRecord)) == set(declarations)


def test_a_probe_record_is_typed_as_a_fetches_row_and_a_texts_row():
    """Its answer's keys are fetches columns, its fingerprints texts columns, so that the rules
    compare them with the pages' texts rows as they are."""
    for key, annotation in fields(ProbeRecord).items():
        table = TEXTS if key in ("text_chars", "content_hash", "simhash") else FETCHES
        if key != "record":
            assert fits(annotation, table[key].type), key
            assert RESULT_SCHEMA[key].type == engine_type(table[key].type), key
    assert PROBE_COLUMNS == tuple(fields(ProbeRecord))[1:]


def test_a_request_result_is_a_fetch_record_without_the_row_identity():
    identity = {
        "record",
        "url_key",
        "url",
        "host",
        "domain",
        "private_domain",
        "surt",
        "depth",
        "fetched_at",
        "extracted",
        "source_url",
        "refetched",  # whether the engine asked for this URL before in the task
    }
    record = {k: v for k, v in fields(FetchRecord).items() if k not in identity}
    assert typing.get_type_hints(Fetched) == record


def test_result_schema_holds_every_table_column_in_engine_types():
    for table, besides, renamed in [
        (FETCHES, {"gen", "slice"}, {}),
        (PAGES, {"gen", "slice", "content_hash"}, {}),
        (ROBOTS, set(), ROBOTS_RENAMED),
    ]:
        for f in table.fields:
            if f.name not in besides:
                column = RESULT_SCHEMA[renamed.get(f.name, f.name)]
                assert column.type == engine_type(f.type), f.name
    assert list(ENGINE_ROBOTS.names) == list(fields(RobotsRecord))[1:]
    assert RESULT_SCHEMA["fetched_at"].type == ENGINE_ROBOTS["expires_at"].type


def test_redirect_down_kinds_cover_the_host_down_kinds():
    assert set(REDIRECT_DOWN_KINDS) == HOST_DOWN_KINDS
    assert set(REDIRECT_DOWN_KINDS.values()) <= set(words(ErrorKind))


def test_stage_side_modules_never_import_aiohttp():
    """The stages and the task code they hand to the engines load no network client: a fetch
    task imports it when it runs (on an executor, or in a worker process)."""
    code = (
        "import sys, crawllib.core.records, crawllib.engine.partition, "
        "crawllib.transforms.fetch_inputs, crawllib.stages.fetch, crawllib.store.workers\n"
        "assert 'aiohttp' not in sys.modules, 'aiohttp imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# A primitive column's values in a result row, by the type's name
PRIMITIVE_VALUES: dict[str, type] = {
    "int": int,
    "bigint": int,
    "double": float,
    "string": str,
    "boolean": bool,
    "binary": bytes,
}


def value_class(dtype: DataType) -> type:
    """The Python class of a result row's values in a column of ``dtype`` (a struct: a
    tuple of its fields)."""
    if isinstance(dtype, Prim):
        return PRIMITIVE_VALUES[dtype.name]
    return {Array: list, Map: dict, Struct: tuple}[type(dtype)]


def assert_record_is_declared(record: dict, declaration: type) -> None:
    declared = fields(declaration)
    assert set(record) == set(declared), set(record) ^ set(declared)
    for key, value in record.items():
        annotation = declared[key]
        if value is None:
            assert type(None) in typing.get_args(annotation), f"{key} is None"
            continue
        python = value_type(annotation)
        if typing.is_typeddict(python):
            assert set(value) == set(fields(python)), (key, value)
            continue
        origin = typing.get_origin(python) or python
        assert isinstance(value, origin), (key, value)
        (item, *_) = typing.get_args(python) or (None,)
        if origin is list and typing.is_typeddict(item):
            assert all(set(v) == set(fields(item)) for v in value), (key, value)
            continue
        if origin in (dict, list):
            items = value.items() if origin is dict else [value]
            assert all(isinstance(v, str) for kv in items for v in kv), (key, value)
    for value, column in zip(result_row(record), RESULT_SCHEMA.fields, strict=True):
        assert value is None or isinstance(value, value_class(column.type)), column


def test_a_real_run_emits_exactly_the_declared_records():
    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/ok"})

    async def same(request: web.Request) -> web.Response:
        return web.Response(status=304, headers={"ETag": request.headers["If-None-Match"]})

    with RawServer(lambda r, w: asyncio.sleep(0)) as raw:
        closed = raw.port  # nothing listens there once the server is gone
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", "User-agent: *\nDisallow: /no\nCrawl-delay: 0.05\n")
        server.text("a.test", "/missing", "gone", status=404)
        server.route("a.test", "/moved", moved)
        server.route("a.test", "/same", same)
        listed = "<urlset><url><loc>http://a.test/new</loc><lastmod>2026-01-02</lastmod></url>"
        server.text("a.test", "/sitemap.xml", listed + "</urlset>", content_type="text/xml")
        # one URL of a.test more than max_urls_per_host: the last is deferred
        a_test = ["http://a.test/ok", "http://a.test/missing", "http://a.test/moved",
                  "http://a.test/no/x", "ftp://a.test/x", "http://a.test/same",
                  "http://a.test/more"]  # fmt: skip
        urls = [*a_test, "http://down.test/"]
        cfg = config(
            {**server.resolve("a.test"), "down.test": f"127.0.0.1:{closed}"},
            fetch__max_urls_per_host=len(a_test) - 1,
            fetch__soft404_probe=True,
            sitemaps__enabled=True,
        )
        revisit = {"etag": '"v1"', "attempts": 1}
        rows = [row(u, **(revisit if u.endswith("/same") else {})) for u in urls]
        records = list(fetch_rows(rows, cfg))
    fetches = [r for r in records if r["record"] == Record.FETCH]
    robots = [r for r in records if r["record"] == Record.ROBOTS]
    hosts = [r for r in records if r["record"] == Record.HOST]
    sitemaps = [r for r in records if r["record"] == Record.SITEMAP]
    probes = [r for r in records if r["record"] == Record.PROBE]
    assert len(fetches) + len(robots) + len(hosts) + len(sitemaps) + len(probes) == len(records)
    # a.test's robots.txt lists none: its /sitemap.xml, read after its pages
    (sitemap,) = sitemaps
    assert_record_is_declared(sitemap, SitemapRecord)
    assert [(e["url"], e["lastmod"]) for e in sitemap["entries"]] == [
        ("http://a.test/new", 1767312000.0)
    ]
    assert sitemap["fetched_at"] > max(r["fetched_at"] for r in fetches)
    # a.test's probe (down.test's robots.txt failed: none), after its pages, before its sitemap;
    # the test server answers it 200 HTML: fingerprinted
    (probe,) = probes
    assert_record_is_declared(probe, ProbeRecord)
    assert probe["host"] == "a.test" and probe["simhash"] is not None
    assert max(r["fetched_at"] for r in fetches) < probe["fetched_at"] < sitemap["fetched_at"]
    assert sorted(r["slot"] for r in hosts) == ["a.test", "down.test"]  # one per slot
    for r in hosts:
        assert_record_is_declared(r, HostRecord)
    assert sorted(r["url"] for r in fetches) == sorted(urls)
    assert {r["host"] for r in robots} == {"a.test", "down.test"}
    assert {r["outcome"] for r in fetches} == set(words(Outcome))  # every outcome, once at least
    # the one page kept was extracted in the engine, its links with their keys
    (page,) = [r for r in fetches if r["body"] is not None]
    assert page["extracted"] is not None and page["extracted"]["error"] is None
    assert all(r["extracted"] is None for r in fetches if r["body"] is None)
    for r in fetches:
        assert_record_is_declared(r, FetchRecord)
        assert r["error_kind"] in {None, *words(ErrorKind), *BLOCKED_KINDS}
    for r in robots:
        assert_record_is_declared(r, RobotsRecord)
        assert r["error_kind"] in {None, *words(ErrorKind)}
