"""The tables' schemas (crawllib.store.schemas) as Arrow types, as delta-rs reads and writes
them: the embedded engine's writes are cast to them, its worker processes write them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawllib.store.schemas import Array, DataType, Map, Prim, Struct

if TYPE_CHECKING:
    import pyarrow as pa


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type delta-rs gives a schema type (Spark's timestamp: UTC microseconds)."""
    import pyarrow as pa

    if isinstance(t, Prim):
        return {
            "string": pa.string(),
            "bigint": pa.int64(),
            "int": pa.int32(),
            "timestamp": pa.timestamp("us", tz="UTC"),
            "double": pa.float64(),
            "boolean": pa.bool_(),
            "binary": pa.binary(),
        }[t.name]
    if isinstance(t, Array):
        return pa.list_(pa.field("element", arrow_type(t.element), nullable=True))
    if isinstance(t, Map):
        return pa.map_(arrow_type(t.key), arrow_type(t.value))
    return pa.struct([pa.field(f.name, arrow_type(f.type), nullable=True) for f in t.fields])


def arrow_schema(t: Struct) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(f.name, arrow_type(f.type), nullable=True) for f in t.fields])
