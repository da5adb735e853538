"""The fetch engine: asyncio + aiohttp, no Spark.

``fetch_rows(rows, cfg, robots_rows, now)`` (an iterator, for ``mapPartitions``) and
``fetch_async(rows, cfg, robots_rows, emit)`` (the coroutine it runs) fetch a batch of URLs
politely and return one "fetch" record per URL plus one "robots" record per robots.txt fetched
(and "host", "sitemap" and "probe" records).
The records are declared in :mod:`crawllib.core.records`; :mod:`crawllib.engine.engine` says what
their outcomes mean.
"""

from crawllib.engine.engine import fetch_async
from crawllib.engine.stream import fetch_rows

__all__ = ["fetch_async", "fetch_rows"]
