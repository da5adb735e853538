"""The tables' schemas (crawllib.store.schemas) as Spark types, for the code that builds
DataFrames: the same names, each a pyspark StructType; ``columns_of`` builds a select list."""

from __future__ import annotations

import functools

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as st

from crawllib.store import schemas

_PRIMS: dict[str, st.DataType] = {
    "string": st.StringType(),
    "bigint": st.LongType(),
    "int": st.IntegerType(),
    "timestamp": st.TimestampType(),
    "double": st.DoubleType(),
    "boolean": st.BooleanType(),
    "binary": st.BinaryType(),
}


@functools.cache
def spark_type(t: schemas.DataType) -> st.DataType:
    """The Spark type of a schema type."""
    if isinstance(t, schemas.Prim):
        return _PRIMS[t.name]
    if isinstance(t, schemas.Array):
        return st.ArrayType(spark_type(t.element))
    if isinstance(t, schemas.Map):
        return st.MapType(spark_type(t.key), spark_type(t.value))
    return st.StructType([st.StructField(f.name, spark_type(f.type), True) for f in t.fields])


def spark_schema(t: schemas.Struct) -> st.StructType:
    out = spark_type(t)
    assert isinstance(out, st.StructType)
    return out


def columns_of(schema: st.StructType, **given: Column) -> list[Column]:
    """A select list for rows of a table: its columns in order, each the expression ``given``
    for it or else the input's column of that name, cast to the table's type."""
    return [given.get(f.name, F.col(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields]


def struct_of(*fields: tuple[str, st.DataType]) -> st.StructType:
    """A StructType of nullable fields from (name, type) pairs."""
    return st.StructType([st.StructField(name, dtype, True) for name, dtype in fields])


S, L, I, T, D, B = (  # noqa: E741
    st.StringType(),
    st.LongType(),
    st.IntegerType(),
    st.TimestampType(),
    st.DoubleType(),
    st.BooleanType(),
)

FRONTIER = spark_schema(schemas.FRONTIER)
CRAWLDB = spark_schema(schemas.CRAWLDB)
FETCHLIST = spark_schema(schemas.FETCHLIST)
FETCHES = spark_schema(schemas.FETCHES)
PAGES = spark_schema(schemas.PAGES)
LINK = spark_schema(schemas.LINK)
EXTRACTED = spark_schema(schemas.EXTRACTED)
TEXTS = spark_schema(schemas.TEXTS)
LINKS = spark_schema(schemas.LINKS)
ROBOTS = spark_schema(schemas.ROBOTS)
HOSTS = spark_schema(schemas.HOSTS)
GENERATIONS = spark_schema(schemas.GENERATIONS)
DNS = spark_schema(schemas.DNS)
SITEMAP_ENTRY = spark_schema(schemas.SITEMAP_ENTRY)
SITEMAPS = spark_schema(schemas.SITEMAPS)
PROBES = spark_schema(schemas.PROBES)
TRAPS = spark_schema(schemas.TRAPS)
ALIASES = spark_schema(schemas.ALIASES)
WARC_INDEX = spark_schema(schemas.WARC_INDEX)
TABLES: dict[str, tuple[st.StructType, list[str]]] = {
    name: (spark_schema(schema), parts) for name, (schema, parts) in schemas.TABLES.items()
}
EXTRACTED_TEXT = tuple(
    (f.name, spark_type(f.type)) for f in schemas.struct_of(*schemas.EXTRACTED_TEXT)
)
