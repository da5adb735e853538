"""The only code that reads or writes the Delta tables under a crawl root.

A crawl root is a local folder or an ``s3a://``/``s3://`` URI; each table is the folder
``ROOT/<name>``. Writes: ``replaceWhere`` (replaces exactly the rows of a condition, safe to
retry), MERGE with a deduplicated source, and plain appends, which the callers make safe to
retry (an anti-join against what is stored, a txn id, or a rule that only a first run appends).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.util import inheritable_thread_target

from crawllib import lease
from crawllib.catalog import LATER_TABLES, VIEWS
from crawllib.schemas import TABLES

log = logging.getLogger(__name__)
T = TypeVar("T")


def normalize_root(root: str) -> str:
    """Local paths become absolute; URIs (s3a://, s3://, file:/, hdfs://) are kept as given."""
    if "://" in root or root.startswith("file:"):
        return root.rstrip("/")
    return os.path.abspath(os.path.expanduser(root))


def table_path(root: str, name: str) -> str:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; tables are: {', '.join(TABLES)}")
    return f"{normalize_root(root)}/{name}"


# Every table's Delta properties. Deletion vectors: a MERGE (update's into crawldb above all)
# marks the rows it replaces in a small file beside each data file it touches, instead of
# rewriting those files whole; a generation's updates touch rows spread over every crawldb
# file, so without them update's cost follows crawldb's size, not the generation's.
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true"}


def init_tables(spark: SparkSession, root: str, upgrade: bool = False) -> list[str]:
    """Create every table that does not exist yet, and add the columns an existing table of an
    older crawllib lacks (idempotent); return the names created. upgrade: also give existing
    tables the TABLE_PROPERTIES they lack (one commit each; reading them costs a moment per
    table, so `crawl init` and `crawl run` do it, not every stage).

    The tables are created from one thread each: every creation is a few small driver-side
    steps, which overlap.
    """
    lease.check_writable(root)
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
        for key, value in TABLE_PROPERTIES.items():
            builder = builder.property(key, value)
        if partitions:
            builder = builder.partitionedBy(*partitions)
        if name == "hosts" and fresh:
            builder = builder.property(TOTALS_PROPERTY, TOTALS_COMPLETE)
        builder.execute()
        return True

    made = in_parallel(spark, *[functools.partial(create, name) for name in TABLES])
    return [name for name, new in zip(TABLES, made, strict=True) if new]


# The hosts table's urls_tried totals cover the whole crawl, per host: set on a table made
# with crawldb, or by plan once it has filled them from crawldb; unset by a plan whose slots
# are not hosts. Plan's budgets read the totals only while it is set.
TOTALS_PROPERTY = "crawllib.urls_tried"
TOTALS_COMPLETE = "complete"


def property_of(spark: SparkSession, root: str, name: str, key: str) -> str | None:
    """A Delta table property of table ``name`` (None if unset)."""
    detail = DeltaTable.forPath(spark, table_path(root, name)).detail().first()
    return (detail["properties"] or {}).get(key) if detail is not None else None


def size_of(spark: SparkSession, root: str, name: str) -> tuple[int, int]:
    """(data files, bytes) of table ``name``'s current version, from its log."""
    detail = DeltaTable.forPath(spark, table_path(root, name)).detail().first()
    if detail is None:
        return 0, 0
    return int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)


def set_property(spark: SparkSession, root: str, name: str, key: str, value: str | None) -> None:
    """Set (or with None unset) a Delta table property of table ``name``: one commit."""
    lease.check_writable(root)
    path = table_path(root, name)
    if value is None:
        spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES IF EXISTS ('{key}')")
    else:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{key}' = '{value}')")


def exists(spark: SparkSession, root: str, name: str) -> bool:
    return bool(DeltaTable.isDeltaTable(spark, table_path(root, name)))


def require(spark: SparkSession, root: str, writes: bool = False) -> None:
    """FileNotFoundError unless root holds every table (but LATER_TABLES). writes: the caller
    will write, so tables of an older crawllib are brought up to date (`init_tables`): the
    columns they lack, the tables added since."""
    missing = [n for n in TABLES if n not in LATER_TABLES and not exists(spark, root, n)]
    if missing:
        raise FileNotFoundError(
            f"{normalize_root(root)} is not a crawl root (missing tables: {', '.join(missing)}); "
            f"run `crawl init {root}` first"
        )
    if writes:
        init_tables(spark, root)


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
    detail = DeltaTable.forPath(spark, table_path(root, name)).detail().first()
    have = (detail["properties"] or {}) if detail is not None else {}
    for key, value in TABLE_PROPERTIES.items():
        if have.get(key) != value:
            log.warning("setting %s = %s on table %s", key, value, name)
            set_property(spark, root, name, key, value)


def read(spark: SparkSession, root: str, name: str) -> DataFrame:
    return spark.read.format("delta").load(table_path(root, name))


def one_row(df: DataFrame) -> Row:
    """The row of a one-row result (an aggregate without grouping): one action."""
    row = df.first()
    if row is None:
        raise ValueError("expected one row, got none")
    return row


def register_views(spark: SparkSession, root: str) -> None:
    """Make every table queryable in SQL by its name (SELECT count(*) FROM frontier), and the
    VIEWS over them."""
    for name in TABLES:
        if name not in LATER_TABLES or exists(spark, root, name):
            read(spark, root, name).createOrReplaceTempView(name)
    for name, query in VIEWS.items():
        spark.sql(query).createOrReplaceTempView(name)


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
    note becomes the commit's userMetadata (shown by DESCRIBE HISTORY)."""
    lease.check_writable(root)
    writer = _conform(df, name).write.format("delta").mode("append")
    if txn:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    if note:
        writer = writer.option("userMetadata", note)
    writer.save(table_path(root, name))


def replace_where(df: DataFrame, root: str, name: str, condition: str) -> None:
    """Replace exactly the rows matching condition (e.g. "gen = 3") with df: rerun-safe.

    It rebuilds the table's snapshot to find the files it replaces, so it costs more than an
    append: a stage run that has nothing of its own to replace appends instead
    (`crawllib.stages.base.StageRun.replace_own`).
    """
    lease.check_writable(root)
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
        inherit = inheritable_thread_target(spark)
        futures = [pool.submit(inherit(action)) for action in actions]
        wait(futures)
        return [future.result() for future in futures]


# The update condition of a MERGE that adds a generation's counts to running totals (t.gen:
# the last generation added): a rerun of that generation finds t.gen = its gen, adds nothing.
ONCE_PER_GEN = "t.gen < s.gen"


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
    lease.check_writable(root)
    keys = list(keys)
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
    builder.execute()
