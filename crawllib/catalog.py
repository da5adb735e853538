"""What `crawl sql` offers over a crawl root, whichever engine runs it: the tables by name, the
views over them, and the words it refuses with. Pure Python, no Spark: the DuckDB engine
(crawllib.duckdb_sql) runs without it.

The views are SQL that Spark and DuckDB both read alike; the DuckDB engine defines the two Spark
functions they call (``unix_micros``, ``current_timestamp()``) as macros.
"""

from __future__ import annotations

from crawllib.schedule import freshness_query

# Every table of a crawl root, in crawllib.schemas.TABLES order (a test keeps the two equal).
TABLE_NAMES = (
    "frontier",
    "crawldb",
    "fetchlist",
    "fetches",
    "pages",
    "texts",
    "links",
    "robots",
    "hosts",
    "dns",
    "sitemaps",
    "traps",
    "aliases",
    "probes",
    "generations",
    "warc_index",
)

# Tables a crawl root made by an older crawllib may lack: the first command that writes
# creates them (`tables.require`), readers skip them until then.
LATER_TABLES = frozenset({"hosts", "dns", "sitemaps", "traps", "probes", "warc_index"})

# Views over the versions pages and texts keep (one row per visit that stored a page): the
# latest of each URL, and the history of a URL's text. A revisit answered 304 stores none, so
# its latest version is the one stored before.
_LATEST = (
    "SELECT * EXCEPT (_newest) FROM (SELECT *, row_number() OVER "
    "(PARTITION BY url_key ORDER BY gen DESC, slice DESC) AS _newest FROM {table}) "
    "WHERE _newest = 1"
)
VIEWS = {
    "latest_texts": _LATEST.format(table="texts"),
    "latest_pages": _LATEST.format(table="pages"),
    "text_history": (
        "SELECT t.url_key, t.url, t.gen, p.fetched_at, t.content_hash, t.text_chars, "
        "CASE WHEN lag(t.content_hash) OVER w IS NULL THEN NULL "
        "ELSE lag(t.content_hash) OVER w IS DISTINCT FROM t.content_hash END AS changed "
        "FROM texts t LEFT JOIN pages p ON p.gen = t.gen AND p.url_key = t.url_key "
        "WINDOW w AS (PARTITION BY t.url_key ORDER BY t.gen)"
    ),
    # pages with a stored version, how many are due, and the estimated share still current
    "freshness": freshness_query(),
}

ONLY_QUERIES = (
    "only queries run here (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN over the crawl's tables)"
)


def not_a_table(name: str, spark: bool) -> str:
    """The refusal of a relation that is not one of the crawl's tables or views."""
    also = " (or delta.`ROOT/<table>`)" if spark else ""
    return (
        f"{name} is not a table of this crawl; the tables are: {', '.join(TABLE_NAMES)}, "
        f"the views {', '.join(VIEWS)}{also}"
    )
