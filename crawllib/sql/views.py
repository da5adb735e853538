"""What `crawl sql` offers over a crawl root, whichever engine runs it: the tables by name, the
views over them, and the words it refuses with. Pure Python, no Spark: the DuckDB engine
(crawllib.sql.duckdb_engine) runs without it.

The views are SQL that Spark and DuckDB both read alike; the DuckDB engine defines the two Spark
functions they call (``unix_micros``, ``current_timestamp()``) as macros.
"""

from __future__ import annotations

import re

from crawllib.config import Config
from crawllib.core.vocab import TABLE_NAMES, ErrorKind
from crawllib.policy.revisit import freshness_query
from crawllib.store.filestore import archive_prefix

# Views over the versions pages and texts keep (one row per visit that stored a page): the
# latest of each URL, and the history of a URL's text. A revisit answered 304 stores none, so
# its latest version is the one stored before.
_LATEST = (
    "SELECT * EXCEPT (_newest) FROM (SELECT *, row_number() OVER "
    "(PARTITION BY url_key ORDER BY gen DESC, slice DESC) AS _newest FROM {table}) "
    "WHERE _newest = 1"
)
# Common Crawl's columnar URL index as a view (cc-index-table's cc-index-schema-flat.json):
# every column of theirs, in their order, with their meaning, or null where the crawl does not
# know it (docs/tables.md, "A capture index like Common Crawl's", says which and why). URL
# parts are cut from the normalised URL with functions both engines read alike (split_part;
# regular expressions with no backslash: Spark's string literals unescape them, DuckDB's do
# not). Host name parts and the reversed host are null for an IP address, as theirs. subset is
# theirs too: a 2xx answer is ``warc``, every other answer ``crawldiagnostics``.
# warc_filename is relative to the archive's root (``warc.archive_root``), warc_location the
# file's full location.
_CRAWL = "__crawl_root_name__"
_ARCHIVE = "__warc_archive_prefix__"
_SCHEME = "[a-zA-Z][a-zA-Z0-9+.-]*"
# The reversed host is joined from this many labels at most (a longer name's is null): the
# engines share no function that reverses a list.
HOST_LABELS = 16
_IPV4 = "^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$"


def _label(i: int) -> str:
    """The host name's i-th label from the end (1: the top-level domain), null past its first."""
    return f"nullif(split_part(c.host_name, '.', -{i}), '')"


_LABELS = "(length(c.host_name) - length(replace(c.host_name, '.', '')) + 1)"
_REVERSED = (
    f"CASE WHEN {_LABELS} <= {HOST_LABELS} THEN "
    f"concat_ws('.', {', '.join(_label(i) for i in range(1, HOST_LABELS + 1))}) END"
)
# The columns of fetches the view reads
_FETCH = (
    "gen, slice, url_key, url, host, domain, surt, fetched_at, http_status, redirect_to, "
    "content_type, is_truncated, error_kind, mime_detected, private_domain"
)
_NTH = {2: "2nd", 3: "3rd", 4: "4th", 5: "5th"}
# content_truncated: why the payload is cut short, as WARC-Truncated says (the WARC writer
# writes ``length`` for a body cut at fetch.max_body_bytes).
_TOO_LARGE, _TIMEOUT, _GONE = (
    ErrorKind.DECOMPRESSED_TOO_LARGE,
    ErrorKind.TIMEOUT,
    ErrorKind.DISCONNECTED,
)
_TRUNCATED = (
    f"CASE WHEN c.is_truncated OR c.error_kind = '{_TOO_LARGE}' THEN 'length' "
    f"WHEN c.error_kind = '{_TIMEOUT}' THEN 'time' "
    f"WHEN c.error_kind = '{_GONE}' THEN 'disconnect' END"
)
_CCINDEX = (
    "SELECT c.surt AS url_surtkey, c.url AS url, c.host AS url_host_name, "
    f"{_label(1)} AS url_host_tld, "
    + "".join(f"{_label(i)} AS url_host_{n}_last_part, " for i, n in _NTH.items())
    + "nullif(regexp_extract(c.reg_domain, '^[^.]+[.](.+)$', 1), '') "
    "AS url_host_registry_suffix, "
    "c.reg_domain AS url_host_registered_domain, "
    "nullif(regexp_extract(c.priv_domain, '^[^.]+[.](.+)$', 1), '') "
    "AS url_host_private_suffix, "
    "c.priv_domain AS url_host_private_domain, "
    f"{_REVERSED} AS url_host_name_reversed, "
    f"regexp_extract(c.url, '^({_SCHEME}):', 1) AS url_protocol, "
    f"CAST(nullif(regexp_extract(c.url, '^{_SCHEME}://[^/?#]*:([0-9]+)', 1), '') AS INT) "
    "AS url_port, "
    f"regexp_extract(c.url, '^{_SCHEME}://[^/?#]*([^?#]*)', 1) AS url_path, "
    "nullif(regexp_extract(c.url, '[?]([^#]*)', 1), '') AS url_query, "
    "c.fetched_at AS fetch_time, c.http_status AS fetch_status, c.redirect_to AS fetch_redirect, "
    "nullif(regexp_replace(w.payload_digest, '^sha1:', ''), '') AS content_digest, "
    "nullif(lower(trim(regexp_extract(c.content_type, '^([^;]*)', 1))), '') "
    "AS content_mime_type, "
    "c.mime_detected AS content_mime_detected, p.charset AS content_charset, "
    "t.language_detected AS content_languages, "
    f"{_TRUNCATED} AS content_truncated, "
    "w.warc_record_id AS warc_record_id, "
    f"CASE WHEN left(w.warc_filename, length({_ARCHIVE})) = {_ARCHIVE} "
    f"THEN substr(w.warc_filename, length({_ARCHIVE}) + 1) ELSE w.warc_filename END "
    "AS warc_filename, "
    "w.warc_record_offset AS warc_record_offset, w.warc_record_length AS warc_record_length, "
    "CAST(w.gen AS STRING) AS warc_segment, "
    f"'{_CRAWL}' AS crawl, "
    "CASE WHEN c.http_status BETWEEN 200 AND 299 THEN 'warc' ELSE 'crawldiagnostics' END "
    "AS subset, "
    "c.gen AS gen, c.url_key AS url_key, w.warc_filename AS warc_location "
    f"FROM (SELECT {_FETCH}, CASE WHEN host_is_ip THEN NULL ELSE host END AS host_name, "
    "CASE WHEN host_is_ip THEN NULL ELSE domain END AS reg_domain, "
    "CASE WHEN host_is_ip THEN NULL ELSE private_domain END AS priv_domain "
    f"FROM (SELECT {_FETCH}, (host LIKE '[%' OR regexp_extract(host, "
    f"'{_IPV4}', 0) <> '') AS host_is_ip FROM fetches WHERE http_status IS NOT NULL) h) c "
    "LEFT JOIN pages p ON p.gen = c.gen AND p.slice = c.slice AND p.url_key = c.url_key "
    "LEFT JOIN texts t ON t.gen = c.gen AND t.url_key = c.url_key "
    "LEFT JOIN warc_index w ON w.gen = c.gen AND w.url_key = c.url_key"
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
# Later columns a view reads (view -> ((table, column), ...)): on a root whose table lacks one
# (an older crawllib's, until a crawl command that writes adds it) it is not defined.
VIEW_COLUMNS = {
    "fineweb_passing": (("texts", "quality"),),
    "ccindex": (("warc_index", "warc_record_id"), ("fetches", "private_domain")),
}


def view_sql(name: str, root: str, cfg: Config) -> str:
    """The SQL of view ``name`` over the crawl at ``root`` (its ``crawl`` column names it;
    ``warc_filename`` is relative to the archive's root, ``warc.archive_root``)."""
    prefix = sql_string(archive_prefix(root, cfg))
    return VIEWS[name].replace(_CRAWL, crawl_name(root)).replace(_ARCHIVE, prefix)


def sql_string(text: str) -> str:
    """``text`` as an SQL expression both engines read alike: a quoted literal, with a quote
    or backslash as chr() (their literals escape those differently)."""
    if "'" not in text and "\\" not in text:
        return f"'{text}'"
    pieces = re.split(r"(['\\])", text)
    return (
        "concat("
        + ", ".join(f"chr({ord(p)})" if p in ("'", "\\") else f"'{p}'" for p in pieces if p)
        + ")"
    )


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
