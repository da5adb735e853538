"""`crawl register`: the crawl's tables and views in the session's catalog, under one database.

Each table becomes an external Delta table (``CREATE TABLE db.t USING DELTA LOCATION
'ROOT/t'``): the catalog records only the name and the location, the data and its schema stay
in the crawl root, and dropping the catalog entry never deletes a file. The views of `crawl sql`
(`latest_texts`, ...) become views of the database over its tables. Engines that read the
catalog (Spark SQL, Athena and Trino through Glue, Hive) then see ``db.pages`` and friends.

Idempotent: an entry that already names the same location is left as it is, a view is
replaced by its current definition; an entry of the same name at another location is refused
(another crawl's table), unless ``replace``, which replaces only an external Delta table's
entry (dropping it deletes no file): a managed table (whose data a drop deletes), a table of
another format, or a table where a view goes, is refused whatever the flag. Every entry is
checked before anything is registered.

The catalog is the session's: a Hive metastore when ``spark.sql.catalogImplementation`` is
``hive`` (a local Derby one by default, a remote one with ``hive.metastore.uris``, AWS Glue on
EMR with its metastore client). With Spark's in-memory catalog the entries would vanish with
the session, so that is refused.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from crawllib.config import Config
from crawllib.core.errors import BadRoot
from crawllib.core.vocab import LATER_TABLES, TABLE_NAMES
from crawllib.sql.views import VIEW_COLUMNS, VIEW_NEEDS, VIEWS, view_sql
from crawllib.store import tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ("name", "kind", "action", "location")
_DATABASE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str  # database.table
    kind: str  # table | view
    action: str  # created | unchanged | replaced
    location: str  # the table's folder; "" for a view


def check_database(name: str) -> str:
    """A database name every catalog takes (letters, digits, underscores), else BadRoot."""
    if not _DATABASE.fullmatch(name):
        raise BadRoot(
            f"database name {name!r}: use letters, digits and underscores, starting with a letter"
        )
    return name


@dataclasses.dataclass(frozen=True)
class Found:
    """An existing catalog entry: its location ("" for a view), type (MANAGED, EXTERNAL,
    VIEW) and provider (delta, parquet, ...), lower case."""

    location: str
    type: str
    provider: str


def _entry(spark: SparkSession, qualified: str) -> Found | None:
    """What the catalog holds under ``qualified``, None when nothing."""
    if not spark.catalog.tableExists(qualified):
        return None
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    info = {str(row["col_name"]): str(row["data_type"] or "") for row in rows}
    return Found(
        info.get("Location", ""), info.get("Type", "").lower(), info.get("Provider", "").lower()
    )


def _check_replace(qualified: str, found: Found, path: str, replace: bool) -> None:
    """BadRoot unless the table entry ``found`` may be pointed at ``path``."""
    if not replace:
        raise BadRoot(
            f"{qualified} is already registered at {found.location}, not {path}: another "
            "crawl's table; choose another --database, or --replace to point it here"
        )
    if found.type != "external" or found.provider != "delta":
        kind = " ".join(w for w in (found.type or "catalog", found.provider, "table") if w)
        article = "an" if kind[0] in "aeiou" else "a"
        raise BadRoot(
            f"{qualified} is {article} {kind}, not an external Delta table: --replace never drops it "
            "(dropping a managed table deletes its data); drop or rename it yourself, or "
            "choose another --database. Nothing was registered"
        )


def _same_place(a: str, b: str) -> bool:
    def strip(p: str) -> str:
        return re.sub(r"^file:(//)?", "", p).rstrip("/")

    return strip(a) == strip(b)


def register(
    spark: SparkSession, root: str, cfg: Config, database: str, replace: bool = False
) -> list[Entry]:
    """Register ROOT's tables and views as DATABASE.<name>; return what was done to each."""
    check_database(database)
    impl = spark.conf.get("spark.sql.catalogImplementation", "in-memory")
    if impl != "hive":
        raise BadRoot(
            "crawl register needs a catalog that outlives the session: set "
            '"spark.sql.catalogImplementation" = "hive" in [spark.conf] (a local Derby '
            "metastore, or hive.metastore.uris, or Glue on EMR); this session's is "
            f"{impl!r}"
        )
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    # every entry checked first: a refusal registers nothing
    planned: list[tuple[str, str, Found | None]] = []
    for name in TABLE_NAMES:
        if name in LATER_TABLES and not tables.exists(spark, root, name):
            continue  # an older crawl root: the first command that writes creates it
        qualified = f"{database}.{name}"
        path = tables.table_path(root, name)
        found = _entry(spark, qualified)
        if found is not None and not _same_place(found.location, path):
            _check_replace(qualified, found, path, replace)
        planned.append((qualified, path, found))
    for name in VIEWS:
        found = _entry(spark, f"{database}.{name}")
        if found is not None and found.type != "view":
            raise BadRoot(
                f"{database}.{name} is a table ({found.type}), not a view: crawl register makes "
                "the crawl's views there and never drops a table; drop or rename it yourself, "
                "or choose another --database. Nothing was registered"
            )
    done: list[Entry] = []
    for qualified, path, found in planned:
        if found is not None and _same_place(found.location, path):
            done.append(Entry(qualified, "table", "unchanged", path))
            continue
        if found is not None:  # an external Delta table's entry: its files stay
            spark.sql(f"DROP TABLE {qualified}")
        location = path.replace("'", "\\'")
        spark.sql(f"CREATE TABLE {qualified} USING DELTA LOCATION '{location}'")
        done.append(Entry(qualified, "table", "created" if found is None else "replaced", path))
    # The views name the tables unqualified: they resolve in the database current at creation.
    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase(database)
    try:
        for name in VIEWS:
            if not _view_readable(spark, root, name):
                continue  # an older crawl root: it has no table or column the view reads yet
            query = view_sql(name, root, cfg)
            qualified = f"{database}.{name}"
            existed = spark.catalog.tableExists(qualified)
            spark.sql(f"CREATE OR REPLACE VIEW {qualified} AS {query}")
            done.append(Entry(qualified, "view", "replaced" if existed else "created", ""))
    finally:
        spark.catalog.setCurrentDatabase(previous)
    return done


def summary(done: list[Entry]) -> str:
    counts = {a: sum(e.action == a for e in done) for a in ("created", "replaced", "unchanged")}
    return ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "nothing to register"


def register_views(spark: SparkSession, root: str, cfg: Config) -> None:
    """Make every table queryable in SQL by its name (SELECT count(*) FROM frontier), and the
    VIEWS over them."""
    for name in TABLE_NAMES:
        if name not in LATER_TABLES or tables.exists(spark, root, name):
            tables.read(spark, root, name).createOrReplaceTempView(name)
    for name in VIEWS:
        if _view_readable(spark, root, name):
            spark.sql(view_sql(name, root, cfg)).createOrReplaceTempView(name)


def _view_readable(spark: SparkSession, root: str, name: str) -> bool:
    """Whether the root has every table and column view ``name`` reads (an older crawl root
    may lack some: VIEW_NEEDS, VIEW_COLUMNS)."""
    if not all(tables.exists(spark, root, table) for table in VIEW_NEEDS.get(name, ())):
        return False
    return all(
        column in tables.read(spark, root, table).columns
        for table, column in VIEW_COLUMNS.get(name, ())
    )
