"""The embedded engine: a crawl root's tables in this process, DuckDB over delta-rs, no JVM.

Reads: a table is a delta-rs scan (crawllib.store.deltars.DeltaScan: one version, deletion
vectors applied, its partitions pruned by the ``where`` predicate) that DuckDB reads as Arrow
batches. Queries: the rules' Spark SQL translated to DuckDB's (crawllib.store.dialect), over
views of the input relations. Writes: delta-rs appends, replaces (an overwrite with a
predicate, as Spark's replaceWhere) and MERGEs, cast to the tables' schemas first. A MERGE's
clauses are Spark SQL as well: DuckDB computes every touched row's new value from the source
and the target rows it matches (the clauses applied in order, as Delta applies them), and
delta-rs replaces those rows and inserts the new ones; a MERGE that only inserts is an append.
A write with a transaction id that the table has already recorded at that version is skipped,
as Spark's ``txnAppId``/``txnVersion`` write is.

The same Delta tables as Spark's, the same schemas and properties (deletion vectors on
crawldb: delta-rs applies those Spark wrote, and writes none), so a crawl may move between the
engines at any generation.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from crawllib.config import Config
from crawllib.core.errors import LeaseLost
from crawllib.core.roots import normalize_root
from crawllib.store import dialect, lease, workers
from crawllib.store.arrow import arrow_schema, arrow_type
from crawllib.store.db import (
    DEPTH_PROPERTY,
    DEPTH_SHORTEST,
    LEDGER,
    TABLE_PROPERTIES,
    TOTALS_COMPLETE,
    TOTALS_PROPERTY,
    Clause,
    Db,
    PartitionTask,
    Rel,
    commit_note,
    table_path,
)
from crawllib.store.deltars import DeltaScan, table_location
from crawllib.store.filestore import folder_at
from crawllib.store.schemas import TABLES, Struct, select_list
from crawllib.store.udfs import UDFS

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

log = logging.getLogger(__name__)

BATCH_ROWS = 8192
# A table read whose files hold at most this many bytes is read once and kept in memory for
# the rest of the read's life (crawllib.store.deltars.DeltaScan).
CACHE_BYTES = 256 << 20
_COMMIT_FILE = re.compile(r"^\d{20}\.json$")
# The operation metrics of a commit that count the data files it added (delta-rs's, Spark's).
_ADDED_FILES = ("num_added_files", "num_target_files_added", "numFiles", "numTargetFilesAdded")


def connect(cfg: Config) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for the crawl's rules: UTC, nulls sorted as Spark sorts them, the
    Spark functions it lacks (dialect.MACROS) and the crawl's Python functions (udfs.UDFS)."""
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
    con.execute("SET preserve_insertion_order = false")
    for macro in dialect.MACROS:
        con.execute(macro)
    for udf in UDFS:
        con.create_function(  # type: ignore[call-overload]
            udf.name,
            udf.function,
            [duckdb.sqltype(t) for t in udf.duckdb_args],
            duckdb.sqltype(udf.duckdb_result),
            null_handling="special",
            side_effects=False,
        )
    return con


class EmbeddedDb(Db):
    """The tables of the crawl at ``root`` in this process (module docstring)."""

    engine = "embedded"

    def __init__(self, root: str, cfg: Config) -> None:
        self.root = normalize_root(root)
        self.cfg = cfg
        self.location, self.options = table_location(self.root, cfg)
        self.con = connect(cfg)
        self._ids = itertools.count()
        self._pool: workers.Pool | None = None
        # worker processes at once (fetch tasks, extraction): the cores
        self.workers = os.cpu_count() or 1

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        with contextlib.suppress(Exception):
            self.con.close()

    def _name(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    def _uri(self, name: str) -> str:
        table_path(self.root, name)  # a known table
        return f"{self.location}/{name}"

    def _delta(self, name: str, version: int | None = None) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self._uri(name), version=version, storage_options=self.options or None)

    # -- the tables --------------------------------------------------------------------------

    def table(
        self,
        name: str,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        version: int | None = None,
        stream: bool = False,
    ) -> Rel:
        wanted = frozenset(c.lower() for c in columns) if columns else None
        cache = 0 if stream else CACHE_BYTES
        scan = DeltaScan(self._uri(name), self.options, wanted, where, version, cache_bytes=cache)
        scan.__arrow_c_schema__()  # opened now: every use reads this version
        view = self._name(f"t_{name}")
        self.con.register(view, scan)
        return self.con.view(view)

    def exists(self, name: str) -> bool:
        uri = self._uri(name)
        if not uri.startswith("s3://"):
            return os.path.isdir(os.path.join(uri, "_delta_log"))
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(uri, self.options or None))

    def version_of(self, name: str) -> int:
        if not self.exists(name):
            return -1
        uri = self._uri(name)
        if not uri.startswith("s3://"):
            # A local table's latest commit is its highest numbered log file: a listing, where
            # opening the table would read its log (each stage reads every table's version).
            log_dir = os.path.join(uri, "_delta_log")
            versions = [int(n[:20]) for n in os.listdir(log_dir) if _COMMIT_FILE.match(n)]
            if versions:
                return max(versions)
        return int(self._delta(name).version())

    def property_of(self, name: str, key: str) -> str | None:
        value = self._delta(name).metadata().configuration.get(key)
        return value or None  # unset by this engine: empty

    def set_property(self, name: str, key: str, value: str | None) -> None:
        from deltalake import CommitProperties

        table = self._delta(name)
        with self._committing():
            table.alter.set_table_properties(
                {key: value or ""},
                raise_if_not_exists=False,
                commit_properties=CommitProperties(custom_metadata={"userMetadata": commit_note()}),
            )

    def txn_version(self, name: str, app_id: str) -> int | None:
        version = self._delta(name).transaction_version(app_id)
        return None if version is None else int(version)

    def commits(self, name: str, after: int) -> dict[int, tuple[str, str | None]]:
        table = self._delta(name)
        newest = int(table.version())
        if newest <= after:
            return {}
        out: dict[int, tuple[str, str | None]] = {}
        for commit in table.history(newest - after):
            version = int(commit.get("version", -1))
            if version > after:
                out[version] = (str(commit.get("operation")), commit.get("userMetadata"))
        return out

    def files_added(self, name: str, after: int, upto: int) -> int:
        if upto <= after:
            return 0
        added = 0
        for commit in self._delta(name).history(upto - after + 1):
            if after < int(commit.get("version", -1)) <= upto:
                metrics = commit.get("operationMetrics") or {}
                added += sum(int(metrics.get(k) or 0) for k in _ADDED_FILES)
        return added

    def init_tables(self, upgrade: bool = False) -> list[str]:
        from deltalake import CommitProperties, DeltaTable

        with self._committing():
            fresh = not self.exists("crawldb")
            made = []
            for name, (schema, partitions) in TABLES.items():
                if self.exists(name):
                    self._add_missing_columns(name, schema)
                    if upgrade:
                        for key, value in TABLE_PROPERTIES.get(name, {}).items():
                            if self.property_of(name, key) != value:
                                log.warning("setting %s = %s on table %s", key, value, name)
                                self.set_property(name, key, value)
                    continue
                config = dict(TABLE_PROPERTIES.get(name, {}))
                if name == "hosts" and fresh:
                    config[TOTALS_PROPERTY] = TOTALS_COMPLETE
                if name == "crawldb":  # a new crawl: every depth recorded is a shortest path
                    config[DEPTH_PROPERTY] = DEPTH_SHORTEST
                DeltaTable.create(
                    self._uri(name),
                    schema=arrow_schema(schema),
                    partition_by=partitions or None,
                    configuration=config or None,
                    storage_options=self.options or None,
                    commit_properties=CommitProperties(
                        custom_metadata={"userMetadata": commit_note()}
                    ),
                    raise_if_key_not_exists=False,
                )
                made.append(name)
            return made

    def _add_missing_columns(self, name: str, schema: Struct) -> None:
        """Columns a newer crawllib added to a table are added to an existing one."""
        import pyarrow as pa
        from deltalake import Schema

        table = self._delta(name)
        existing = {f.name for f in table.schema().fields}
        missing = [f for f in schema.fields if f.name not in existing]
        if missing:
            log.warning("adding columns to %s: %s", name, ", ".join(f.name for f in missing))
            arrow = pa.schema([pa.field(f.name, arrow_type(f.type)) for f in missing])
            table.alter.add_columns(
                list(Schema.from_arrow(arrow).fields), commit_properties=self._props(None)
            )

    # -- relations ---------------------------------------------------------------------------

    def sql(self, query: str, **inputs: Rel) -> Rel:
        names = {}
        for key, rel in inputs.items():
            view = self._name(f"q_{key}")
            rel.create_view(view, replace=True)
            names[key] = view
        return self.con.sql(dialect.bind(dialect.to_duckdb(query), names))

    def rows(self, rows: Iterable[Mapping[str, Any]], schema: Struct) -> Rel:
        import pyarrow as pa

        listed = list(rows)
        columns = {f.name: [r.get(f.name) for r in listed] for f in schema.fields}
        table = pa.Table.from_pydict(columns, schema=arrow_schema(schema))
        name = self._name("rows")
        self.con.register(name, table)
        return self.con.view(name)

    def arrow(self, data: Any) -> Rel:
        """An Arrow table or stream (the Arrow PyCapsule protocol) as a relation."""
        name = self._name("arrow")
        self.con.register(name, data)
        return self.con.view(name)

    def keep(self, rel: Rel, through_losses: bool = False) -> Rel:
        name = self._name("kept")  # one process: nothing is lost but with it
        rel.create(name)
        return self.con.table(name)

    def drop(self, rel: Rel) -> None:
        name = getattr(rel, "alias", "")
        if name.startswith("kept_"):
            self.con.execute(f'DROP TABLE IF EXISTS "{name}"')

    def collect(self, rel: Rel, limit: int | None = None) -> list[dict[str, Any]]:
        if limit is not None:
            rel = rel.limit(limit)
        names = rel.columns
        return [dict(zip(names, map(_plain, row), strict=True)) for row in rel.fetchall()]

    def columns(self, rel: Rel) -> list[str]:
        return list(rel.columns)

    def map_partitions(
        self, rel: Rel, task: PartitionTask, schema: Struct, partitions: int, by: str | None = None
    ) -> Rel:
        groups: dict[int, list[dict[str, Any]]] = {p: [] for p in range(max(1, partitions))}
        for i, row in enumerate(self.collect(rel)):
            part = row.pop(by) if by is not None else i % len(groups)
            groups[int(part) % len(groups)].append(row)
        if self._pool is None:
            self._pool = workers.Pool(self.workers)
        with tempfile.TemporaryDirectory(prefix="crawllib-tasks-") as folder:
            files = self._pool.run(task, groups, schema, folder)
            kept = self.keep(self.arrow(_read_arrow(files, arrow_schema(schema))))
        return kept

    def parallelism(self) -> int:
        return self.workers

    def one_machine(self) -> bool:
        return True

    def read_file(self, uri: str) -> bytes:
        if not _is_uri(uri):
            with open(_local(uri), "rb") as fh:
                return fh.read()
        folder, _, name = uri.rstrip("/").rpartition("/")
        data = folder_at(folder, self.cfg).read(name)
        if data is None:
            raise FileNotFoundError(uri)
        return data

    def is_file(self, uri: str) -> bool:
        if not _is_uri(uri):
            return os.path.isfile(_local(uri))
        try:
            self.read_file(uri)
        except FileNotFoundError:
            return False
        return True

    # -- writes ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _committing(self) -> Iterator[None]:
        """The writer lease must be held and writable before a write, and still after it (a
        lease lost meanwhile stops the stage: LeaseLost). While the lease is unwritable the
        renewal thread interrupts the write's DuckDB query, so that delta-rs, reading its rows,
        fails before it commits (as Spark's jobs are cancelled)."""
        held = lease.check_writable(self.root)
        unwatch = held.watch(self.con.interrupt)
        try:
            yield
        except Exception as exc:
            reason = held.unwritable()
            if reason:  # the interruption, or a failure meanwhile: either way, stop here
                raise LeaseLost(reason) from exc
            raise
        finally:
            unwatch()
        reason = held.unwritable()
        if reason:
            raise LeaseLost(reason)

    def _conformed(self, rel: Rel, schema: Struct) -> Any:
        """``rel`` as Arrow batches of the table's schema (columns in order, cast)."""
        cast = self.sql(f"SELECT {select_list(schema)} FROM {{rel}}", rel=rel)
        reader = cast.to_arrow_reader(BATCH_ROWS)
        return reader.cast(arrow_schema(schema))

    def _props(self, note: str | None, txn: tuple[str, int] | None = None) -> Any:
        from deltalake import CommitProperties, Transaction

        return CommitProperties(
            custom_metadata={"userMetadata": commit_note(note)},
            app_transactions=[Transaction(txn[0], txn[1])] if txn else None,
        )

    def append(
        self,
        rel: Rel,
        name: str,
        txn: tuple[str, int] | None = None,
        note: str | None = None,
    ) -> None:
        lease.check_writable(self.root)  # a write needs the lease, skipped or not (as Spark's)
        if txn is not None:
            done = self.txn_version(name, txn[0])
            if done is not None and done >= txn[1]:
                log.info("%s: the append of %s %d is committed already", name, *txn)
                return
        self._write(rel, name, "append", None, self._props(note, txn))

    def replace_where(self, rel: Rel, name: str, where: str) -> None:
        self._write(rel, name, "overwrite", where, self._props(None))

    def _write(self, rel: Rel, name: str, mode: str, predicate: str | None, props: Any) -> None:
        from deltalake import write_deltalake

        schema, partitions = TABLES[name]
        common: dict[str, Any] = {
            "partition_by": partitions or None,
            "storage_options": self.options or None,
            "commit_properties": props,
        }
        with self._committing():
            data = self._conformed(rel, schema)  # DuckDB computes the rows as delta-rs reads
            if mode == "overwrite":
                write_deltalake(
                    self._uri(name), data, mode="overwrite", predicate=predicate, **common
                )
            else:
                write_deltalake(self._uri(name), data, mode="append", **common)
        if name == LEDGER:
            lease.record_ledger(self.root, self.version_of(LEDGER))

    def merge(
        self,
        rel: Rel,
        name: str,
        keys: Sequence[str],
        update: Mapping[str, str] | None = None,
        insert: bool = True,
        update_condition: str | None = None,
        also: Sequence[Clause] = (),
        insert_condition: str | None = None,
        broadcast: bool = False,
    ) -> None:
        schema, _ = TABLES[name]
        clauses: list[Clause] = [(update_condition or "true", update)] if update else []
        clauses += list(also)
        # the lease, for a MERGE of nothing too; its queries are stopped if the lease is lost
        with self._committing():
            rows = self.keep(
                self.sql(
                    merged_rows_sql(schema, list(keys), clauses, insert, insert_condition),
                    source=rel,
                    target=self.table(name),
                )
            )
            try:
                counts = self.one_row(
                    self.sql(
                        "SELECT count_if(_matched) AS matched, count(*) AS n FROM {rows}", rows=rows
                    )
                )
                if not counts["n"]:
                    return
                if not counts["matched"]:
                    self._write(rows, name, "append", None, self._props(None))
                    return
                data = self._conformed(rows, schema)
                on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
                self._delta(name).merge(
                    data,
                    on,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=self._props(None),
                ).when_matched_update_all().when_not_matched_insert_all().execute()
            finally:
                self.drop(rows)


def merged_rows_sql(
    schema: Struct,
    keys: list[str],
    clauses: list[Clause],
    insert: bool,
    insert_condition: str | None,
) -> str:
    """Spark SQL of the rows a MERGE writes into a table of ``schema``: each target row a
    source row matches on ``keys`` and a clause's condition holds for, with the first such
    clause's updates (the other columns kept), and, with ``insert``, each source row no target
    row matches (meeting ``insert_condition``) as it is; ``_matched`` tells the two apart.
    Inputs: ``{source}`` (deduplicated on the keys here) and ``{target}``."""
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    by = ", ".join(f"`{k}`" for k in keys)
    conditions = [f"({condition})" for condition, _ in clauses]

    def column(field: str) -> str:
        arms = " ".join(
            f"WHEN {cond} THEN {changes.get(field, f't.`{field}`')}"
            for cond, (_, changes) in zip(conditions, clauses, strict=True)
        )
        return f"CASE {arms} ELSE t.`{field}` END AS `{field}`" if arms else f"t.`{field}`"

    source = (
        f"(SELECT * FROM (SELECT {select_list(schema)}, row_number() OVER (PARTITION BY {by} "
        f"ORDER BY {by}) AS _n FROM {{source}}) WHERE _n = 1)"
    )
    parts = []
    if clauses:
        updated = ", ".join(column(f.name) for f in schema.fields)
        parts.append(
            f"SELECT {updated}, true AS _matched FROM {source} s JOIN {{target}} t ON {on} "
            f"WHERE {' OR '.join(conditions)}"
        )
    if insert:
        plain = ", ".join(f"s.`{f.name}`" for f in schema.fields)
        condition = f" WHERE {insert_condition}" if insert_condition else ""
        parts.append(
            f"SELECT {plain}, false AS _matched FROM {source} s LEFT ANTI JOIN {{target}} t "
            f"ON {on}{condition}"
        )
    if not parts:
        return f"SELECT {select_list(schema)}, false AS _matched FROM {{source}} WHERE false"
    return " UNION ALL ".join(parts)


def _read_arrow(files: list[str], schema: pa.Schema) -> pa.Table:
    """The rows of the Arrow files the workers wrote, one table (of ``schema``)."""
    import pyarrow as pa

    tables = []
    for path in files:
        with pa.memory_map(path) as source:
            tables.append(pa.ipc.open_file(source).read_all())
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file:")


def _local(path: str) -> str:
    """A local path, given as such or as a ``file:`` URI."""
    return re.sub(r"^file:(//)?", "", path)


def _plain(value: Any) -> Any:
    """A DuckDB value as Spark's collect gives it: timestamps naive, in UTC."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
