"""``crawllib.core.urls.url_key`` in Spark built-ins, for the scale benchmark's synthetic URLs.

The crawler keys a URL with the first 64 bits of MurmurHash3 x64-128 (seed 0) of its UTF-8
bytes, in Python. Building millions of synthetic rows through a Python UDF costs minutes, so
the builder computes the same keys with built-in column expressions: the hash's 16-byte blocks
unrolled up to a bound on the URL's length, each byte read as ``ascii(substring(...))``.

Two conditions, both the builder's to keep (a test compares with ``url_key``):

- the strings are ASCII (a character is a byte) and at most ``max_bytes`` long;
- the expressions are analysed with ``spark.sql.ansi.enabled`` off (:func:`wrapping`): the
  hash multiplies and adds modulo 2**64, which ANSI mode turns into an overflow error.

Each step is its own projection, referring to the previous step's columns: written as one
expression, the blocks' references to both halves of the state would double its size per
block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_FMIX1 = 0xFF51AFD7ED558CCD
_FMIX2 = 0xC4CEB9FE1A85EC53
_BLOCK = 16


def _lit(value: int) -> Column:
    """A 64-bit constant as Spark's signed long."""
    value &= (1 << 64) - 1
    return F.lit(value - (1 << 64) if value >> 63 else value).cast("long")


def _rotl(x: Column, r: int) -> Column:
    return F.shiftleft(x, r).bitwiseOR(F.shiftrightunsigned(x, 64 - r))


def _lane(url: Column, start: int) -> Column:
    """The 8 bytes at 0-based ``start`` as a little-endian long (0 past the end): reversed,
    they read as one big-endian hex number, below 2**63 because ASCII bytes are below 0x80."""
    chars = F.reverse(F.substring(url, start + 1, 8))
    return F.coalesce(F.conv(F.hex(chars), 16, 10).cast("long"), F.lit(0).cast("long"))


def _mix_k1(k: Column) -> Column:
    return _rotl(k * _lit(_C1), 31) * _lit(_C2)


def _mix_k2(k: Column) -> Column:
    return _rotl(k * _lit(_C2), 33) * _lit(_C1)


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Run the block with these Spark SQL settings, then restore the previous values."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def wrapping(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Run the block with ``spark.sql.ansi.enabled`` off: long arithmetic wraps, as the hash
    needs. DataFrames built inside keep it when run later."""
    return session_conf(spark, {"spark.sql.ansi.enabled": "false"})


def with_url_key(df: DataFrame, url: str, out: str, max_bytes: int) -> DataFrame:
    """Add column ``out``: ``crawllib.core.urls.url_key`` of the ASCII string column ``url`` (at
    most ``max_bytes`` long). Call it inside :func:`wrapping`."""
    t = {name: f"_mmh_{name}" for name in ("len", "h1", "h2", "m1", "m2")}
    col = {name: F.col(alias) for name, alias in t.items()}
    df = df.withColumns(
        {t["len"]: F.length(url).cast("long"), t["h1"]: F.lit(0).cast("long")}
    ).withColumn(t["h2"], F.lit(0).cast("long"))
    h1, h2, length = col["h1"], col["h2"], col["len"]
    for block in range(-(-max_bytes // _BLOCK)):
        start = block * _BLOCK
        # A whole block mixes the state; the last, partial one (zero-padded: zero bytes add
        # nothing) only XORs its mixed lanes in; a block past the end mixes in zeros.
        full = length >= start + _BLOCK
        df = df.withColumns(
            {
                t["m1"]: _mix_k1(_lane(F.col(url), start)),
                t["m2"]: _mix_k2(_lane(F.col(url), start + 8)),
            }
        )
        a1 = h1.bitwiseXOR(col["m1"])
        df = df.withColumn(
            t["h1"], F.when(full, (_rotl(a1, 27) + h2) * 5 + _lit(0x52DCE729)).otherwise(a1)
        )
        a2 = h2.bitwiseXOR(col["m2"])
        df = df.withColumn(
            t["h2"], F.when(full, (_rotl(a2, 31) + h1) * 5 + _lit(0x38495AB5)).otherwise(a2)
        )
    df = df.withColumn(t["h1"], h1.bitwiseXOR(length)).withColumn(t["h2"], h2.bitwiseXOR(length))
    df = df.withColumn(t["h1"], h1 + h2).withColumn(t["h2"], h2 + h1)
    for name in ("h1", "h2"):
        x = col[name]
        df = (
            df.withColumn(t[name], x.bitwiseXOR(F.shiftrightunsigned(x, 33)) * _lit(_FMIX1))
            .withColumn(t[name], x.bitwiseXOR(F.shiftrightunsigned(x, 33)) * _lit(_FMIX2))
            .withColumn(t[name], x.bitwiseXOR(F.shiftrightunsigned(x, 33)))
        )
    return df.withColumn(out, h1 + h2).drop(*t.values())
