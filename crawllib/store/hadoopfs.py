"""Files at URIs Hadoop reads and writes (``s3a://``, ``hdfs://``, ``file:``), through the
driver's JVM: what the driver reads outside the tables (seed files). The WARC
export's tasks write without the JVM (`crawllib.store.filestore`).

Every call goes through the session's Hadoop FileSystem, so it sees the same settings as the
tables (``spark.hadoop.fs.s3a.*`` of ``spark.conf``). Java's FileNotFoundException becomes
Python's FileNotFoundError; other failures propagate as Py4JJavaError.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession


def is_uri(path: str) -> bool:
    """Whether path names a file by URI (``scheme://...`` or ``file:...``) rather than locally."""
    return "://" in path or path.startswith("file:")


def _fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """The Hadoop (FileSystem, Path) of uri."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


@contextlib.contextmanager
def _not_found_as_python(uri: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # py4j's Py4JJavaError carries the Java exception
        java = getattr(exc, "java_exception", None)
        if java is not None and java.getClass().getName() == "java.io.FileNotFoundException":
            raise FileNotFoundError(f"{uri} does not exist") from None
        raise


def exists(spark: SparkSession, uri: str) -> bool:
    fs, path = _fs(spark, uri)
    return bool(fs.exists(path))


def is_file(spark: SparkSession, uri: str) -> bool:
    """True for a file, False for a folder (on S3: a prefix) or nothing at uri."""
    fs, path = _fs(spark, uri)
    try:
        with _not_found_as_python(uri):
            return bool(fs.getFileStatus(path).isFile())
    except FileNotFoundError:
        return False


def read_bytes(spark: SparkSession, uri: str) -> bytes:
    """The whole file at uri (it passes through the driver's memory: small files only)."""
    fs, path = _fs(spark, uri)
    with _not_found_as_python(uri):
        stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()
