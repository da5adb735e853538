"""What `crawl sql` offers over a crawl root, whichever engine runs it: the tables by name, the
views over them, and the words it refuses with. Pure Python, no Spark: the DuckDB engine
(crawllib.sql.duckdb_engine) runs without it.

The views are SQL that Spark and DuckDB both read alike; the DuckDB engine defines the two Spark
functions they call (``unix_micros``, ``current_timestamp()``) as macros.
"""

from __future__ import annotations

from crawllib.core.vocab import TABLE_NAMES
from crawllib.policy.revisit import freshness_query

# Views over the versions pages and texts keep (one row per visit that stored a page): the
# latest of each URL, and the history of a URL's text. A revisit answered 304 stores none, so
# its latest version is the one stored before.
_LATEST = (
    "SELECT * EXCEPT (_newest) FROM (SELECT *, row_number() OVER "
    "(PARTITION BY url_key ORDER BY gen DESC, slice DESC) AS _newest FROM {table}) "
    "WHERE _newest = 1"
)
# Common Crawl's columnar URL index as a view: its column names where a column means the same
# thing. URL parts are cut from the normalised URL with regular expressions both engines read
# alike (no backslash: Spark's string literals unescape them, DuckDB's do not). Differences
# from Common Crawl's: content_digest (SHA-1, base 32, of the payload) and warc_* are known
# once `crawl export-warc` wrote the capture, null until then; content_languages holds the
# detected language's ISO 639-1 code (``en``), not ISO 639-3 (``eng``); url_host_private_suffix
# and content_mime_detected are null (domains come from the ICANN part of the suffix list, and
# no content type is detected). subset: ``warc`` for a page stored, ``crawldiagnostics`` for
# the other answers (redirects, errors, 304s).
_CRAWL = "__crawl_root_name__"
_SCHEME = "[a-zA-Z][a-zA-Z0-9+.-]*"
_CCINDEX = (
    "SELECT f.surt AS url_surtkey, f.url AS url, f.host AS url_host_name, "
    "regexp_extract(f.host, '([^.]+)$', 1) AS url_host_tld, "
    "f.domain AS url_host_registered_domain, "
    "nullif(regexp_extract(f.domain, '^[^.]+[.](.+)$', 1), '') AS url_host_registry_suffix, "
    "CAST(NULL AS STRING) AS url_host_private_suffix, "
    f"regexp_extract(f.url, '^({_SCHEME}):', 1) AS url_protocol, "
    f"CAST(nullif(regexp_extract(f.url, '^{_SCHEME}://[^/?#]*:([0-9]+)', 1), '') AS INT) "
    "AS url_port, "
    f"regexp_extract(f.url, '^{_SCHEME}://[^/?#]*([^?#]*)', 1) AS url_path, "
    "nullif(regexp_extract(f.url, '[?]([^#]*)', 1), '') AS url_query, "
    "f.fetched_at AS fetch_time, f.http_status AS fetch_status, f.redirect_to AS fetch_redirect, "
    "nullif(regexp_replace(w.payload_digest, '^sha1:', ''), '') AS content_digest, "
    "nullif(lower(trim(regexp_extract(f.content_type, '^([^;]*)', 1))), '') "
    "AS content_mime_type, "
    "CAST(NULL AS STRING) AS content_mime_detected, p.charset AS content_charset, "
    "t.language_detected AS content_languages, "
    "w.warc_filename AS warc_filename, w.warc_record_offset AS warc_record_offset, "
    "w.warc_record_length AS warc_record_length, "
    f"'{_CRAWL}' AS crawl, "
    "CASE WHEN p.url_key IS NULL THEN 'crawldiagnostics' ELSE 'warc' END AS subset, "
    "f.gen AS gen, f.url_key AS url_key "
    "FROM fetches f "
    "LEFT JOIN pages p ON p.gen = f.gen AND p.slice = f.slice AND p.url_key = f.url_key "
    "LEFT JOIN texts t ON t.gen = f.gen AND t.url_key = f.url_key "
    "LEFT JOIN warc_index w ON w.gen = f.gen AND w.url_key = f.url_key "
    "WHERE f.http_status IS NOT NULL"
)
# The texts rows whose quality signals (crawllib.content.quality) pass the heuristic filters of
# FineWeb's pipeline at datatrove's defaults: Gopher repetition, Gopher quality, C4 without its
# terminal-punctuation rule, FineWeb quality (docs/tables.md has each threshold).
FINEWEB_THRESHOLDS: tuple[tuple[str, str, float], ...] = (
    ("gopher_dup_para_frac", "<=", 0.3),
    ("gopher_dup_para_char_frac", "<=", 0.2),
    ("gopher_dup_line_frac", "<=", 0.3),
    ("gopher_dup_line_char_frac", "<=", 0.2),
    ("gopher_top_2gram_char_frac", "<=", 0.2),
    ("gopher_top_3gram_char_frac", "<=", 0.18),
    ("gopher_top_4gram_char_frac", "<=", 0.16),
    ("gopher_dup_5gram_char_frac", "<=", 0.15),
    ("gopher_dup_6gram_char_frac", "<=", 0.14),
    ("gopher_dup_7gram_char_frac", "<=", 0.13),
    ("gopher_dup_8gram_char_frac", "<=", 0.12),
    ("gopher_dup_9gram_char_frac", "<=", 0.11),
    ("gopher_dup_10gram_char_frac", "<=", 0.10),
    ("gopher_words", ">=", 50),
    ("gopher_words", "<=", 100_000),
    ("gopher_mean_word_length", ">=", 3),
    ("gopher_mean_word_length", "<=", 10),
    ("gopher_hash_ratio", "<=", 0.1),
    ("gopher_ellipsis_ratio", "<=", 0.1),
    ("gopher_bullet_lines", "<=", 0.9),
    ("gopher_ellipsis_lines", "<=", 0.3),
    ("gopher_alpha_words", ">=", 0.8),
    ("gopher_stop_words", ">=", 2),
    ("fineweb_c4_sentences", ">=", 5),
    ("fineweb_line_punct_ratio", ">=", 0.12),
    ("fineweb_short_line_ratio", "<=", 0.67),
    ("fineweb_char_dup_ratio", "<=", 0.01),
    ("fineweb_list_ratio", "<=", 0.3),
)
FINEWEB_PASSING = " AND ".join(
    [
        "quality IS NOT NULL",
        *(f"quality.{name} {op} {limit!r}" for name, op, limit in FINEWEB_THRESHOLDS),
        "NOT quality.fineweb_c4_lorem_ipsum",
        "NOT quality.fineweb_c4_curly_bracket",
    ]
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
    # one row per capture (a fetch that got an HTTP answer), in Common Crawl's column names
    "ccindex": _CCINDEX,
    # the texts rows FineWeb's heuristic filters would keep
    "fineweb_passing": f"SELECT * FROM texts WHERE {FINEWEB_PASSING}",
}
# Later tables a view reads: on a root without them (an older crawllib's) it is not defined.
VIEW_NEEDS = {"ccindex": frozenset({"warc_index"})}
# Later columns a view reads (view -> (table, column)): on a root whose table lacks the column
# (an older crawllib's, until a crawl command that writes adds it) it is not defined.
VIEW_COLUMNS = {"fineweb_passing": ("texts", "quality")}


def view_sql(name: str, root: str) -> str:
    """The SQL of view ``name`` over the crawl at ``root`` (its ``crawl`` column names it)."""
    return VIEWS[name].replace(_CRAWL, crawl_name(root))


def crawl_name(root: str) -> str:
    """The crawl's name, as the ``crawl`` column of ``ccindex`` gives it: the root's last path
    element (``/data/news`` and ``s3a://bucket/news/`` are ``news``), quotes left out."""
    name = root.rstrip("/").rsplit("/", 1)[-1]
    return "".join(c for c in name if c not in "'\\")


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
