"""`crawl register`: the crawl's tables and views in the session's catalog, under one database.

Each table becomes an external Delta table (``CREATE TABLE db.t USING DELTA LOCATION
'ROOT/t'``): the catalog records only the name and the location, the data and its schema stay
in the crawl root, and dropping the catalog entry never deletes a file. The views of `crawl sql`
(`latest_texts`, ...) become views of the database over its tables. Engines that read the
catalog (Spark SQL, Athena and Trino through Glue, Hive) then see ``db.pages`` and friends.

Idempotent: an entry that already names the same location is left as it is, a view is
replaced by its current definition; an entry of the same name at another location is refused
(another crawl's table), unless ``replace``.

The catalog is the session's: a Hive metastore when ``spark.sql.catalogImplementation`` is
``hive`` (a local Derby one by default, a remote one with ``hive.metastore.uris``, AWS Glue on
EMR with its metastore client). With Spark's in-memory catalog the entries would vanish with
the session, so that is refused.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from crawllib import tables
from crawllib.catalog import LATER_TABLES, TABLE_NAMES, VIEWS
from crawllib.errors import BadRoot

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


def _location_of(spark: SparkSession, qualified: str) -> str | None:
    """The location the catalog gives an existing table, None when there is no such table."""
    if not spark.catalog.tableExists(qualified):
        return None
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    for row in rows:
        if row["col_name"] == "Location":
            return str(row["data_type"])
    return ""


def _same_place(a: str, b: str) -> bool:
    def strip(p: str) -> str:
        return re.sub(r"^file:(//)?", "", p).rstrip("/")

    return strip(a) == strip(b)


def register(spark: SparkSession, root: str, database: str, replace: bool = False) -> list[Entry]:
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
    done: list[Entry] = []
    for name in TABLE_NAMES:
        if name in LATER_TABLES and not tables.exists(spark, root, name):
            continue  # an older crawl root: the first command that writes creates it
        qualified = f"{database}.{name}"
        path = tables.table_path(root, name)
        found = _location_of(spark, qualified)
        if found is not None and _same_place(found, path):
            done.append(Entry(qualified, "table", "unchanged", path))
            continue
        if found is not None:
            if not replace:
                raise BadRoot(
                    f"{qualified} is already registered at {found}, not {path}: another "
                    "crawl's table; choose another --database, or --replace to point it here"
                )
            spark.sql(f"DROP TABLE {qualified}")  # external: the files stay where they are
        location = path.replace("'", "\\'")
        spark.sql(f"CREATE TABLE {qualified} USING DELTA LOCATION '{location}'")
        done.append(Entry(qualified, "table", "created" if found is None else "replaced", path))
    # The views name the tables unqualified: they resolve in the database current at creation.
    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase(database)
    try:
        for name, query in VIEWS.items():
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
