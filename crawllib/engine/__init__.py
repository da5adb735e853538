"""The fetch engine: asyncio + aiohttp, no Spark.

``fetch_rows(rows, cfg, robots_rows, now)`` (an iterator, for ``mapPartitions``) and
``fetch_async(rows, cfg, robots_rows, emit)`` (the coroutine it runs) fetch a batch of URLs
politely and return one "fetch" record per URL plus one "robots" record per robots.txt fetched
(and "host", "sitemap" and "probe" records).
The records are declared in :mod:`crawllib.core.records`; :mod:`crawllib.engine.engine` says what
their outcomes mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawllib.engine.engine import fetch_async
    from crawllib.engine.stream import fetch_rows

__all__ = ["fetch_async", "fetch_rows"]


def __getattr__(name: str) -> Any:
    """The engine's entry points, imported when first asked for: the stages import the task
    code of this package (crawllib.engine.partition) and must not load aiohttp with it."""
    if name == "fetch_async":
        from crawllib.engine.engine import fetch_async

        return fetch_async
    if name == "fetch_rows":
        from crawllib.engine.stream import fetch_rows

        return fetch_rows
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
