"""The crawl's Python functions its SQL rules call, registered under the same names on both
engines (crawllib.store.spark_db, crawllib.store.embedded): one definition each, in
crawllib.core.urls. Null in, null out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import mmh3

from crawllib.core.urls import redirect_target, registered_domain, url_key


def task_partition(key: str | None, partitions: int | None) -> int | None:
    """The fetch task (0 .. partitions - 1) that holds a politeness slot (or the task key a
    slot's address gives it): MurmurHash3 of its name, so any process computes it alike."""
    if key is None or not partitions:
        return None
    return mmh3.hash(key.encode("utf-8"), signed=False) % partitions


@dataclasses.dataclass(frozen=True)
class Udf:
    """A function of the rules' SQL: its name, the Python function, its argument and result
    types for Spark (DDL) and DuckDB."""

    name: str
    function: Callable[..., Any]
    spark_result: str
    duckdb_args: tuple[str, ...]
    duckdb_result: str


def _null_safe(function: Callable[[str], Any]) -> Callable[[str | None], Any]:
    def call(value: str | None) -> Any:
        return None if value is None else function(value)

    call.__name__ = function.__name__
    return call


UDFS = (
    # the registered domain of a host (crawllib.core.urls.registered_domain)
    Udf("crawl_domain", _null_safe(registered_domain), "string", ("VARCHAR",), "VARCHAR"),
    # the fetch task of a slot or task key, of so many (task_partition)
    Udf("crawl_partition", task_partition, "int", ("VARCHAR", "INTEGER"), "INTEGER"),
    # the url_key of a normalised URL
    Udf("crawl_url_key", _null_safe(url_key), "bigint", ("VARCHAR",), "BIGINT"),
    # (url, url_key, host, domain) of a redirect target as the crawler normalises it, or null
    Udf(
        "crawl_redirect_target",
        redirect_target,
        "struct<url:string,url_key:bigint,host:string,domain:string>",
        ("VARCHAR",),
        "STRUCT(url VARCHAR, url_key BIGINT, host VARCHAR, domain VARCHAR)",
    ),
)
