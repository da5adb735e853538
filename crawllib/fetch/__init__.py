"""The fetch engine: asyncio + aiohttp, no Spark.

``fetch_rows(rows, cfg, robots_rows, now)`` (an iterator, for ``mapPartitions``) and
``fetch_async(rows, cfg, robots_rows, emit)`` (the coroutine it runs) fetch a batch of URLs
politely and return one "fetch" record per URL plus one "robots" record per robots.txt fetched.
See :mod:`crawllib.fetch.engine` for the record keys and the outcome vocabulary.
"""

from crawllib.fetch.engine import FETCH_KEYS, ROBOTS_KEYS, fetch_async
from crawllib.fetch.stream import fetch_rows

__all__ = ["FETCH_KEYS", "ROBOTS_KEYS", "fetch_async", "fetch_rows"]
