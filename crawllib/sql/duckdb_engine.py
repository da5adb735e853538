"""The DuckDB engine of `crawl sql`: the crawl's tables queried without a JVM.

delta-rs (the ``deltalake`` package) reads each Delta table a query names, at its current
version and with its deletion vectors applied, as a stream of Arrow batches; DuckDB runs the
query over those streams. Only the tables the query names are opened, and of each only the
columns the query can use are read (crawllib.sql.duckdb_tree), so a query costs what it reads.

Read-only by construction: DuckDB sees a table only as a stream it reads, its database lives in
memory, and file access (``read_csv('/etc/passwd')``, ``COPY ... TO``, ``ATTACH``, ``INSTALL``)
is switched off and the configuration locked before the query is parsed. Anything but one query
(SELECT, WITH, VALUES, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN) is refused first, as by the Spark
engine, with one line. A query is bounded: ``sql.max_memory`` (DuckDB's memory limit, nothing
spilled to disk) and ``sql.max_seconds`` (it is interrupted), each a one-line error.

DuckDB's memory limit covers its buffer manager only, and an interrupt is seen between chunks
of rows only: one value (``repeat('a', 1000000000)``, ``range(30000000)`` as a list) is built
outside the one and in spite of the other. So a watch thread also samples the process's
resident memory, and a caller that owns its process (the ``crawl`` command) gives it a ``stop``
that ends the process when the query grew past ``memory_bound`` or did not end within
``GRACE_SECONDS`` of its interruption.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from crawllib.config import Config
from crawllib.core.errors import EngineUnavailable, QueryRefused
from crawllib.core.vocab import LATER_TABLES, TABLE_NAMES
from crawllib.sql.duckdb_tree import columns_used, relations_read, syntax_tree
from crawllib.sql.views import ONLY_QUERIES, VIEW_COLUMNS, VIEWS, view_sql
from crawllib.store import dialect
from crawllib.store.deltars import DeltaScan, table_location

if TYPE_CHECKING:
    import duckdb

PACKAGES = ("duckdb", "deltalake")
MISSING = (
    "the duckdb engine needs the packages duckdb and deltalake (crawllib's sql extra: pip "
    "install 'dist/crawllib-<version>-py3-none-any.whl[sql]'), or use --engine spark"
)
# Spark functions the views call (the views are shared: crawllib.sql.views.VIEWS) and users'
# queries may (timestamp_seconds: sitemaps' lastmod), for DuckDB: the rules' macros, and one
# more.
MACROS = (
    *dialect.MACROS,
    "CREATE MACRO current_timestamp() AS get_current_timestamp()",
)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(ANALYZE\s+)?(\([^)]*\)\s*)?", re.IGNORECASE)
BATCH_ROWS = 1024
# How long an interrupted query has to end before ``stop`` ends the process, and how often the
# watch looks (reading /proc/self/statm costs microseconds).
GRACE_SECONDS = 1.0
TICK_SECONDS = 0.02
# The process may grow past its size at the start of the query by twice sql.max_memory (DuckDB's
# allocations outside its buffer manager, delta-rs's Arrow batches, the rows as Python values),
# and by at least this much.
MIN_GROWTH = 256 << 20
_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def available() -> bool:
    """Whether the engine's packages (the ``sql`` extra) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in PACKAGES)


def run_query(
    root: str,
    query: str,
    cfg: Config,
    limit: int | None = None,
    stop: Callable[[str], NoReturn] | None = None,
) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """The column names and rows (read lazily; at most ``limit``) of a read-only ``query`` over
    the crawl at ``root``. QueryRefused for anything but one query, a name that is not one of
    the crawl's tables or views, or a query DuckDB cannot run, ran past sql.max_seconds or grew
    the process past ``memory_bound``; FileNotFoundError when ``root`` is no crawl root;
    EngineUnavailable without the packages. ``stop``, given the reason in one line, ends the
    process when an interruption cannot (see the module's docstring)."""
    if not available():
        raise EngineUnavailable(MISSING)
    import duckdb

    location, options = table_location(root, cfg)
    con = connect(cfg.sql.max_memory)
    watch = _Watch(con, cfg.sql.max_seconds, cfg.sql.max_memory, stop)
    try:
        tree = syntax_tree(con, check_query(con, query))
        named, shows = relations_read(con, tree)
        names = _present(root, location, options, named, shows)
        columns = columns_used(con, tree, names)
        for name in names:
            if name in TABLE_NAMES:
                con.register(name, DeltaScan(f"{location}/{name}", options, columns))
        for name in names:
            if name in VIEW_COLUMNS:
                _has_view_columns(location, options, name)
        for name in names:
            if name in VIEWS:
                con.execute(f"CREATE TEMP VIEW {name} AS {view_sql(name, root, cfg)}")
        relation = con.sql(query)
    except duckdb.Error as exc:
        watch.stop()
        raise watch.refusal(exc) from None
    except BaseException:
        watch.stop()
        raise
    if relation is None:  # a statement with no result; check_query lets none through
        watch.stop()
        return [], iter(())
    if limit is not None:
        relation = relation.limit(limit)
    return list(relation.columns), _rows(relation, watch)


def memory_bytes(amount: str) -> int:
    """An amount of memory in DuckDB's units (``4GB``, ``512MiB``; config checks the form) in
    bytes."""
    number, unit = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", amount).groups()  # type: ignore[union-attr]
    return int(float(number) * _UNITS[unit.lower()])


def memory_bound(max_memory: str) -> int:
    """The bytes a query may grow the process by: twice ``max_memory``, at least MIN_GROWTH."""
    return max(2 * memory_bytes(max_memory), MIN_GROWTH)


def resident_bytes() -> int:
    """This process's resident memory now (Linux), else its peak so far."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Watch:
    """Interrupts a connection's queries once ``seconds`` have passed or the process grew past
    ``memory_bound(max_memory)`` (again and again, so a query started later stops too) until
    stopped; with ``stop``, ends the process at once past the memory bound, and when the
    interrupted query has not ended GRACE_SECONDS after the time limit."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        seconds: float,
        max_memory: str,
        stop: Callable[[str], NoReturn] | None = None,
    ) -> None:
        self.con, self.seconds, self.max_memory, self.stop_process = con, seconds, max_memory, stop
        self.bound = resident_bytes() + memory_bound(max_memory)
        self.reason: str | None = None
        self.fired = threading.Event()
        self.stopped = threading.Event()
        threading.Thread(target=self._run, name="crawl-sql-limits", daemon=True).start()

    def _run(self) -> None:
        deadline = time.monotonic() + self.seconds
        while not self.stopped.wait(TICK_SECONDS):
            if time.monotonic() >= deadline:
                self._fire(
                    f"the query ran longer than sql.max_seconds ({self.seconds:g} s) and was "
                    "stopped",
                    GRACE_SECONDS,
                )
                return
            if resident_bytes() > self.bound:
                self._fire(
                    f"the query needed more memory than sql.max_memory ({self.max_memory}) "
                    f"allows (one value or the rows outside DuckDB's memory limit: the process "
                    f"grew past {memory_bound(self.max_memory) >> 20} MiB) and was stopped",
                    0.0,
                )
                return

    def _fire(self, reason: str, grace: float) -> None:
        self.reason = reason
        self.fired.set()
        end = time.monotonic() + grace
        while not self.stopped.is_set():
            if self.stop_process is not None and time.monotonic() >= end:
                self.stop_process(reason)
            self.con.interrupt()
            self.stopped.wait(min(0.1, max(end - time.monotonic(), TICK_SECONDS)))

    def stop(self) -> None:
        self.stopped.set()

    def refusal(self, exc: BaseException, prefix: str = "") -> QueryRefused:
        if self.reason is not None:
            return QueryRefused(self.reason)
        return QueryRefused(prefix + first_line(exc))


def check_query(con: duckdb.DuckDBPyConnection, query: str) -> str:
    """The SELECT ``query`` runs: itself, or the one it EXPLAINs. QueryRefused unless
    ``query`` is one statement that only reads: a SELECT (WITH, VALUES, SHOW, DESCRIBE and
    SUMMARIZE are SELECTs to DuckDB) or an EXPLAIN of one."""
    import duckdb

    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryRefused(f"cannot parse the query: {first_line(exc)}") from None
    if len(statements) != 1:
        raise QueryRefused(f"cannot run {len(statements)} statements: one query at a time")
    kind = statements[0].type
    if kind == duckdb.StatementType.SELECT:
        return query
    if kind == duckdb.StatementType.EXPLAIN:
        explained = _EXPLAIN.sub("", query, count=1)
        try:
            inner = con.extract_statements(explained) if explained != query else []
        except duckdb.Error:
            inner = []
        if len(inner) == 1 and inner[0].type == duckdb.StatementType.SELECT:
            return explained
    raise QueryRefused(f"{ONLY_QUERIES}; refused: {kind.name}")


def connect(max_memory: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reads no file and no Python variable, in UTC and sorting nulls
    as the Spark session does, with the views' macros, within ``max_memory`` (DuckDB's units:
    4GB) if given, spilling nothing to disk; its configuration locked."""
    import duckdb

    con = duckdb.connect(
        ":memory:",
        config={
            "python_enable_replacements": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        },
    )
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")  # as Spark
    for macro in MACROS:
        con.execute(macro)
    if max_memory is not None:
        con.execute("SET memory_limit = ?", [max_memory])
    con.execute("SET temp_directory = ''")  # past the memory limit a query fails, no spill
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _rows(relation: duckdb.DuckDBPyRelation, watch: _Watch) -> Iterator[tuple[Any, ...]]:
    import duckdb

    try:
        for row in relation.iter_rows(BATCH_ROWS):
            if watch.fired.is_set():
                raise watch.refusal(RuntimeError())
            yield row
    except duckdb.Error as exc:
        raise watch.refusal(exc, "the query failed: ") from None
    finally:
        watch.stop()
        # closed now, not at interpreter exit, where tearing down the registered delta-rs
        # scans after the connection can abort the process
        with contextlib.suppress(duckdb.Error):
            watch.con.close()


def _present(
    root: str, location: str, options: dict[str, str], named: set[str], shows: bool
) -> list[str]:
    """The tables and views to define, in TABLE_NAMES then VIEWS order: those ``named``, or for
    SHOW TABLES every one the root has. FileNotFoundError when the root lacks a table every
    crawl root has (on local disk all are checked, as the Spark engine does; on S3 those the
    query reads: opening one costs requests), QueryRefused for a named table that a root made
    by an older crawllib lacks."""
    from deltalake import DeltaTable

    remote = location.startswith("s3://")

    def exists(name: str) -> bool:
        if remote:
            return bool(DeltaTable.is_deltatable(f"{location}/{name}", options))
        return os.path.isdir(os.path.join(location, name, "_delta_log"))

    checked = named & set(TABLE_NAMES) if remote and not shows else set(TABLE_NAMES)
    lacking = {n for n in checked if not exists(n)}
    missing = [n for n in TABLE_NAMES if n in lacking and n not in LATER_TABLES]
    if missing:
        raise FileNotFoundError(
            f"{location if location.startswith('/') else root} is not a crawl root (missing "
            f"tables: {', '.join(missing)}); run `crawl init {root}` first"
        )
    for name in TABLE_NAMES:
        if name in named and name in lacking:
            raise QueryRefused(
                f"this crawl root has no {name} table yet (made by an older crawllib: the next "
                "crawl command that writes adds it)"
            )
    if shows:
        return [*(n for n in TABLE_NAMES if n not in lacking), *VIEWS]
    return [n for n in (*TABLE_NAMES, *VIEWS) if n in named]


def _has_view_columns(location: str, options: dict[str, str], view: str) -> None:
    """QueryRefused when a root made by an older crawllib lacks a column view ``view`` reads
    (VIEW_COLUMNS), rather than DuckDB's binder error."""
    from deltalake import DeltaTable

    for table, column in VIEW_COLUMNS[view]:
        schema = DeltaTable(f"{location}/{table}", storage_options=options).schema()
        if column not in {f.name for f in schema.fields}:
            raise QueryRefused(
                f"this crawl root's {table} table has no {column} column yet, which the view "
                f"{view} reads (made by an older crawllib: the next crawl command that writes "
                "adds it)"
            )


def first_line(exc: BaseException) -> str:
    """DuckDB's message without its position marker and hints: 'Binder Error: ...'."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
