"""The only code that reads or writes the Delta tables under a crawl root.

A crawl root is a local folder or an ``s3a://``/``s3://`` URI; each table is the folder
``ROOT/<name>``. Writes: ``replaceWhere`` (replaces exactly the rows of a condition, safe to
retry), MERGE with a deduplicated source, and plain appends, which the callers make safe to
retry (an anti-join against what is stored, a txn id, or a rule that only a first run appends).

Every write (and `crawllib.store.maintain`'s OPTIMIZE and VACUUM) runs inside `committing`: it needs
the crawl root's writer lease, held and writable, and its Spark jobs are cancelled should the
lease stop being writable while they run; its Delta commit says in its ``userMetadata`` that
crawllib wrote it (COMMIT_TAG), which `crawllib.store.integrity` checks.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.util import inheritable_thread_target

from crawllib.core.errors import LeaseLost
from crawllib.core.roots import normalize_root
from crawllib.core.vocab import LATER_TABLES
from crawllib.store import lease
from crawllib.store.db import (  # noqa: F401 (the names the Spark code takes from here)
    COMMIT_TAG,
    DEPTH_PROPERTY,
    DEPTH_SHORTEST,
    LEDGER,
    ONCE_PER_GEN,
    TABLE_PROPERTIES,
    TOTALS_COMPLETE,
    TOTALS_PROPERTY,
    commit_note,
    table_path,
    written_by_crawllib,
)
from crawllib.store.spark_schemas import TABLES

log = logging.getLogger(__name__)
T = TypeVar("T")


USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_tagging = 0  # writes in flight that tag their commits through the session's configuration
_tagging_lock = threading.Lock()


@contextlib.contextmanager
def committing(spark: SparkSession, root: str) -> Iterator[None]:
    """The frame of every write to a table of ``root``: LeaseNotHeld or LeaseLost unless this
    process holds the root's writer lease and may write (`crawllib.store.lease.check_writable`);
    the write's Spark jobs are cancelled (and LeaseLost raised) if the lease stops being
    writable while they run; its commits carry userMetadata COMMIT_TAG (the session's
    ``spark.databricks.delta.commitInfo.userMetadata`` while crawllib writes, for MERGE, ALTER,
    OPTIMIZE and VACUUM; a DataFrame write's own option overrides it with a note)."""
    global _tagging
    held = lease.check_writable(root)
    sc = spark.sparkContext
    job_tag = f"crawllib-write-{uuid.uuid4().hex}"
    sc.addJobTag(job_tag)
    unwatch = held.watch(lambda: sc.cancelJobsWithTag(job_tag))
    with _tagging_lock:
        _tagging += 1
        if _tagging == 1:
            spark.conf.set(USER_METADATA, COMMIT_TAG)
    try:
        yield
    except Exception as exc:
        reason = held.unwritable()
        if reason:  # the cancellation, or a failure meanwhile: either way, stop here
            raise LeaseLost(reason) from exc
        raise
    finally:
        with _tagging_lock:
            _tagging -= 1
            if _tagging == 0:
                spark.conf.unset(USER_METADATA)
        unwatch()
        sc.removeJobTag(job_tag)


def version_of(spark: SparkSession, root: str, name: str) -> int:
    """Table ``name``'s latest Delta version, from its log (a listing, no Spark job); -1 when
    the table does not exist."""
    return int(snapshot_of(spark, root, name).version())


def init_tables(spark: SparkSession, root: str, upgrade: bool = False) -> list[str]:
    """Create every table that does not exist yet, and add the columns an existing table of an
    older crawllib lacks (idempotent); return the names created. upgrade: also give existing
    tables the TABLE_PROPERTIES they lack (one commit each; reading them costs a moment per
    table, so `crawl init` and `crawl run` do it, not every stage).

    The tables are created from one thread each: every creation is a few small driver-side
    steps, which overlap.
    """
    with committing(spark, root):
        return _init_tables(spark, root, upgrade)


def _init_tables(spark: SparkSession, root: str, upgrade: bool) -> list[str]:
    # A hosts table made with crawldb holds every first attempt of the crawl in its totals
    fresh = not DeltaTable.isDeltaTable(spark, table_path(root, "crawldb"))

    def create(name: str) -> bool:
        schema, partitions = TABLES[name]
        path = table_path(root, name)
        if DeltaTable.isDeltaTable(spark, path):
            _add_missing_columns(spark, path, schema)
            if upgrade:
                _add_missing_properties(spark, root, name)
            return False
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        for key, value in TABLE_PROPERTIES.get(name, {}).items():
            builder = builder.property(key, value)
        if partitions:
            builder = builder.partitionedBy(*partitions)
        if name == "hosts" and fresh:
            builder = builder.property(TOTALS_PROPERTY, TOTALS_COMPLETE)
        if name == "crawldb":  # a new crawl: every depth recorded is a shortest path
            builder = builder.property(DEPTH_PROPERTY, DEPTH_SHORTEST)
        builder.execute()
        return True

    made = in_parallel(spark, *[functools.partial(create, name) for name in TABLES])
    return [name for name, new in zip(TABLES, made, strict=True) if new]


def snapshot_of(spark: SparkSession, root: str, name: str):  # -> py4j Snapshot
    """Table ``name``'s latest Delta snapshot, from its log on the driver (no Spark job once
    the log is read): version, metadata, protocol."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
    return delta_log.forTableWithSnapshot(spark._jsparkSession, table_path(root, name))._2()


def property_of(spark: SparkSession, root: str, name: str, key: str) -> str | None:
    """A Delta table property of table ``name`` (None if unset), from its log."""
    value = snapshot_of(spark, root, name).metadata().configuration().get(key)
    return str(value.get()) if value.isDefined() else None


def txn_version(spark: SparkSession, root: str, name: str, app_id: str) -> int | None:
    """The last version table ``name`` recorded for the Delta transaction id ``app_id``
    (``append(txn=...)``), None if it has none: from its log."""
    version = snapshot_of(spark, root, name).transactions().get(app_id)
    return int(version.get()) if version.isDefined() else None


def size_of(spark: SparkSession, root: str, name: str) -> tuple[int, int]:
    """(data files, bytes) of table ``name``'s current version, from its log."""
    detail = DeltaTable.forPath(spark, table_path(root, name)).detail().first()
    if detail is None:
        return 0, 0
    return int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)


def set_property(spark: SparkSession, root: str, name: str, key: str, value: str | None) -> None:
    """Set (or with None unset) a Delta table property of table ``name``: one commit."""
    path = table_path(root, name)
    with committing(spark, root):
        if value is None:
            spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES IF EXISTS ('{key}')")
        else:
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{key}' = '{value}')")


def exists(spark: SparkSession, root: str, name: str) -> bool:
    return bool(DeltaTable.isDeltaTable(spark, table_path(root, name)))


def require(spark: SparkSession, root: str) -> None:
    """FileNotFoundError unless root holds every table (but LATER_TABLES). A caller that will
    write then brings the tables of an older crawllib up to date (`init_tables`): the columns
    they lack, the tables added since."""
    missing = [n for n in TABLES if n not in LATER_TABLES and not exists(spark, root, n)]
    if missing:
        raise FileNotFoundError(
            f"{normalize_root(root)} is not a crawl root (missing tables: {', '.join(missing)}); "
            f"run `crawl init {root}` first"
        )


def _add_missing_columns(spark: SparkSession, path: str, schema: StructType) -> None:
    """Columns a newer crawllib added to a table are added to an existing one (nullable:
    its old rows read them as null)."""
    existing = set(spark.read.format("delta").load(path).schema.fieldNames())
    missing = [f for f in schema.fields if f.name not in existing]
    if missing:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        log.warning("adding columns to %s: %s", path, columns)
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({columns})")


def _add_missing_properties(spark: SparkSession, root: str, name: str) -> None:
    """TABLE_PROPERTIES a table made by an older crawllib lacks are set on it."""
    wanted = TABLE_PROPERTIES.get(name, {})
    if not wanted:
        return
    for key, value in wanted.items():
        if property_of(spark, root, name, key) != value:
            log.warning("setting %s = %s on table %s", key, value, name)
            set_property(spark, root, name, key, value)


def read(spark: SparkSession, root: str, name: str) -> DataFrame:
    return spark.read.format("delta").load(table_path(root, name))


def read_version(spark: SparkSession, root: str, name: str, version: int) -> DataFrame:
    """Table ``name`` as it was at Delta version ``version`` (time travel)."""
    return spark.read.format("delta").option("versionAsOf", version).load(table_path(root, name))


def one_row(df: DataFrame) -> Row:
    """The row of a one-row result (an aggregate without grouping): one action."""
    row = df.first()
    if row is None:
        raise ValueError("expected one row, got none")
    return row


# One SQL expression per column: a single py4j call per write, where building Column objects
# takes three per column.
_CONFORM = {
    name: [f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`" for f in schema.fields]
    for name, (schema, _) in TABLES.items()
}


def _conform(df: DataFrame, name: str) -> DataFrame:
    """Select the table's columns in order, cast to its types (the write's output schema)."""
    return df.selectExpr(*_CONFORM[name])


def append(
    df: DataFrame,
    root: str,
    name: str,
    txn: tuple[str, int] | None = None,
    note: str | None = None,
) -> None:
    """Append rows. With txn=(app_id, version) Delta skips a write it has already committed;
    the commit's userMetadata (shown by DESCRIBE HISTORY) is `commit_note` of ``note``. A
    commit to LEDGER is recorded in the writer lease (its version)."""
    spark = df.sparkSession
    writer = _conform(df, name).write.format("delta").mode("append")
    if txn:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    writer = writer.option("userMetadata", commit_note(note))
    with committing(spark, root):
        writer.save(table_path(root, name))
    if name == LEDGER:
        lease.record_ledger(root, version_of(spark, root, name))


def replace_where(df: DataFrame, root: str, name: str, condition: str) -> None:
    """Replace exactly the rows matching condition (e.g. "gen = 3") with df: rerun-safe.

    It rebuilds the table's snapshot to find the files it replaces, so it costs more than an
    append: a stage run that has nothing of its own to replace appends instead
    (`crawllib.stages.base.StageRun.replace_own`).
    """
    with committing(df.sparkSession, root):
        (
            _conform(df, name)
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", condition)
            .save(table_path(root, name))
        )


def in_parallel(spark: SparkSession, *actions: Callable[[], T]) -> list[T]:
    """Run Spark actions (writes to different tables, say) from driver threads at once; their
    results in order. The first failure is raised once all have ended.

    Worth it for short jobs: most of a small write is commits and scheduling on the driver,
    which overlap. The threads inherit the caller's job group and properties.
    """
    with ThreadPoolExecutor(max_workers=len(actions)) as pool:
        # One copy of the properties per thread: a wrapper made once hands every thread the
        # same Properties object, whose SQL execution ids the threads then set and clear under
        # each other ("NumberFormatException: Cannot parse null string" in a CI run).
        futures = [pool.submit(inheritable_thread_target(spark)(action)) for action in actions]
        wait(futures)
        return [future.result() for future in futures]


def merge(
    spark: SparkSession,
    df: DataFrame,
    root: str,
    name: str,
    keys: Iterable[str],
    update: Mapping[str, str] | None = None,
    insert: bool = True,
    update_condition: str | None = None,
    also: Sequence[tuple[str, Mapping[str, str]]] = (),
    insert_condition: str | None = None,
    broadcast: bool = False,
) -> None:
    """MERGE df into a table on keys (source deduplicated on them first).

    update: column -> SQL expression over ``t`` (target) and ``s`` (source); None: no update;
    ``also``: more (condition, update) clauses for matched rows, tried after it in order (the
    first whose condition holds applies). insert: insert unmatched rows (those meeting
    ``insert_condition``, when given). broadcast: the source is a generation's rows and the
    table the size of the crawl (crawldb): the source is broadcast, so that neither Delta's
    search for matches nor its rewrite of the files it touches shuffles the table's rows (its
    size estimate of a computed source is unknown, so Spark would sort-merge join them).
    """
    keys = list(keys)
    if not (update or also or insert):
        # No clause: nothing to write (Delta refuses a MERGE without a WHEN clause); the
        # lease is needed all the same, as for the embedded engine's MERGE of nothing.
        with committing(spark, root):
            return
    source = _conform(df, name).dropDuplicates(keys)
    if broadcast:
        source = F.broadcast(source)
    target = DeltaTable.forPath(spark, table_path(root, name))
    condition = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    builder = target.alias("t").merge(source.alias("s"), condition)
    if update:
        builder = builder.whenMatchedUpdate(condition=update_condition, set=dict(update))
    for clause, changes in also:
        builder = builder.whenMatchedUpdate(condition=clause, set=dict(changes))
    if insert:
        builder = builder.whenNotMatchedInsertAll(condition=insert_condition)
    with committing(spark, root):
        builder.execute()
