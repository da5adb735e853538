"""Update's rules, as SQL: a generation's fetches -> new crawldb rows and redirect frontier
rows.

Status of a fetched URL, from its fetch outcome:

=================================  ==========================================================
ok                                 ``gone`` (reason ``soft_404``) for a soft 404 (its text is
                                   its host's answer to a missing page), else ``noindex`` if
                                   the page asks it (texts.directives), else
                                   ``duplicate`` if texts.duplicate_of is set, else ``fetched``
redirect                           ``redirected`` (the target goes to the next frontier;
                                   reason ``bad_location`` for a target that is no http(s)
                                   URL, ``too_many_redirects`` past fetch.max_redirects hops)
http_error 4xx except 429, others  ``gone`` (reason ``http_<status>``)
http_error 429 / 5xx, error        ``failed``: attempts + 1, due again at not_before =
                                   the visit + retry_backoff_seconds * 2**(attempts - 1) (the
                                   first generation after it); ``dead`` once
                                   attempts >= max_attempts
error "decompressed_too_large"     ``dead`` at once: a decompression bomb is not retried
robots_denied                      ``robots_denied``
blocked                            ``blocked``
not_modified                       status kept (``fetched`` or ``duplicate``): the stored
                                   version stays current
deferred                           ``queued`` for gen N + 1 (a revisit keeps its status);
                                   attempts and last_gen unchanged
=================================  ==========================================================

``attempts`` counts the attempts of the current visit: a revisit (the URL was ``fetched`` or
``duplicate``) starts again from 0, so a page fetched a hundred times is not dead after one
failure. A visit that reaches the page (ok, not_modified) sets the revisit schedule
(:mod:`crawllib.policy.revisit`): fetched_at (the fetch's time, or ``crawl.now``),
fetch_interval, next_fetch_at, the validators, and counts the visit changed or unchanged (its
text hash against the stored version's; a 304 is unchanged).

A robots.txt that answered 5xx or could not be read denies the host for now, not for ever
(RFC 9309 §2.3.1.4): the engine defers those URLs (robots.txt is asked again with backoff).
Fetches written before it did ("robots_denied" with "robots_unavailable") count as failures.
"""

from __future__ import annotations

from typing import Any

from crawllib.config import Config, parse_now
from crawllib.content.sitemaps import changefreq_seconds
from crawllib.core.vocab import (
    PERMANENT_ERRORS,
    REVISITED_STATUSES,
    VISITED_OUTCOMES,
    Directive,
    DuplicateKind,
    ErrorKind,
    FrontierReason,
    IntervalSource,
    Outcome,
    Status,
    sql_list,
    words,
)
from crawllib.policy.revisit import HOUR, next_interval, revisits
from crawllib.store.schemas import CRAWLDB, FRONTIER, select_list
from crawllib.transforms.depth import unknown_or_shallower
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.sqltext import is_in, lit, steps, timestamp_of


class Sql(str):
    """An SQL expression that the revisit rule (crawllib.policy.revisit) computes with:
    arithmetic builds the expression."""

    def __mul__(self, other: object) -> Sql:
        return Sql(f"({self} * {_operand(other)})")

    __rmul__ = __mul__


def _operand(value: object) -> str:
    """An expression as it is, any other value (a number, a word) as a literal."""
    return value if isinstance(value, Sql) else lit(value)


class SqlOps:
    """:class:`crawllib.policy.revisit.Ops` on SQL expressions."""

    def where(self, condition: Any, yes: Any, no: Any) -> Sql:
        return Sql(f"(CASE WHEN {condition} THEN {_operand(yes)} ELSE {_operand(no)} END)")

    def clamp(self, value: Any, low: float, high: float) -> Sql:
        return Sql(f"least(greatest({_operand(value)}, {lit(float(low))}), {lit(float(high))})")


SQL = SqlOps()

# Outcomes worth another attempt: errors, 429 and 5xx answers, a robots.txt that could not be
# read, and any outcome this code does not know.
_RETRYABLE = (
    f"(outcome = {lit(Outcome.ERROR)} OR (outcome = {lit(Outcome.HTTP_ERROR)} AND "
    f"(http_status = 429 OR http_status >= 500)) OR (outcome = {lit(Outcome.ROBOTS_DENIED)} "
    f"AND error_kind = {lit(ErrorKind.ROBOTS_UNAVAILABLE)}) OR NOT "
    f"{is_in('outcome', [o for o in words(Outcome) if o != Outcome.ERROR])})"
)
# The page's text is its host's answer to a missing page (texts.duplicate_kind).
_SOFT_404 = f"(duplicate_kind <=> {lit(DuplicateKind.SOFT_404)})"
_OK = f"(outcome = {lit(Outcome.OK)})"
_DEFERRED = f"(outcome = {lit(Outcome.DEFERRED)})"
_NOT_MODIFIED = f"(outcome = {lit(Outcome.NOT_MODIFIED)})"
_VISITED = f"({is_in('outcome', VISITED_OUTCOMES)})"
_HAD_VERSION = f"({is_in('old_status', REVISITED_STATUSES)})"
# crawldb's columns a fetched URL's row keeps from before the fetch (as old_<name>)
_KEPT = tuple(n for n in CRAWLDB.names if n not in ("url_key", "url", "host"))


def _visits(cash: bool, fetches: str, texts: str, crawldb: str, cash_rel: str) -> str:
    """One row per fetched URL: the fetch (``visited_at``, ``new_etag``, ...), its text
    (``text_hash``, ``_noindex``, duplicate marks), crawldb's row before it (``old_x``) and the
    cash it receives (``_cash``, null when none)."""
    fetched = (
        "SELECT * EXCEPT (_n) FROM (SELECT url_key, url, host, depth, outcome, http_status, "
        "error_kind, fetched_at AS visited_at, etag AS new_etag, last_modified AS "
        "new_last_modified, row_number() OVER (PARTITION BY url_key ORDER BY fetched_at DESC, "
        f"outcome) AS _n FROM {fetches}) WHERE _n = 1"
    )
    text = (
        "SELECT * EXCEPT (_n) FROM (SELECT url_key, duplicate_of, duplicate_kind, content_hash "
        f"AS text_hash, array_contains(directives, {lit(Directive.NOINDEX)}) AS _noindex, "
        "row_number() OVER (PARTITION BY url_key ORDER BY slice DESC) AS _n "
        f"FROM {texts}) WHERE _n = 1"
    )
    old = ", ".join(f"`{c}` AS `old_{c}`" for c in _KEPT)
    before = f"SELECT url_key, {old} FROM ({rows_of(crawldb, fetches)})"
    joined = (
        f"SELECT f.*, x.duplicate_of, x.duplicate_kind, x.text_hash, x._noindex, "
        f"{', '.join(f'o.`old_{c}`' for c in _KEPT)}, "
        f"{'c.cash' if cash else 'CAST(NULL AS double)'} AS _cash "
        f"FROM ({fetched}) f LEFT JOIN ({text}) x ON f.url_key = x.url_key "
        f"LEFT JOIN ({before}) o ON f.url_key = o.url_key"
    )
    if cash:
        joined += f" LEFT JOIN {cash_rel} c ON f.url_key = c.dst_key"
    return joined


def _status(cfg: Config) -> str:
    """crawldb's status after the fetch (module docstring). Reads ``attempts`` (new)."""
    return (
        f"CASE WHEN {_OK} AND {_SOFT_404} THEN {lit(Status.GONE)} "
        f"WHEN {_OK} AND _noindex THEN {lit(Status.NOINDEX)} "
        f"WHEN {_OK} AND duplicate_of IS NOT NULL THEN {lit(Status.DUPLICATE)} "
        f"WHEN {_OK} THEN {lit(Status.FETCHED)} "
        f"WHEN {_NOT_MODIFIED} AND {_HAD_VERSION} THEN old_status "
        f"WHEN {_NOT_MODIFIED} THEN {lit(Status.FETCHED)} "
        f"WHEN outcome = {lit(Outcome.REDIRECT)} THEN {lit(Status.REDIRECTED)} "
        f"WHEN {_DEFERRED} AND {_HAD_VERSION} THEN old_status "
        f"WHEN {_DEFERRED} THEN {lit(Status.QUEUED)} "
        f"WHEN {is_in('error_kind', PERMANENT_ERRORS)} THEN {lit(Status.DEAD)} "
        f"WHEN {_RETRYABLE} THEN CASE WHEN attempts >= {cfg.fetch.max_attempts} "
        f"THEN {lit(Status.DEAD)} ELSE {lit(Status.FAILED)} END "
        f"WHEN outcome = {lit(Outcome.HTTP_ERROR)} THEN {lit(Status.GONE)} "
        f"WHEN outcome = {lit(Outcome.ROBOTS_DENIED)} THEN {lit(Status.ROBOTS_DENIED)} "
        f"WHEN outcome = {lit(Outcome.BLOCKED)} THEN {lit(Status.BLOCKED)} END"
    )


def _reason(cfg: Config) -> str:
    """Why a URL has its status: none when fetched, the duplicate kind, the redirect's
    trouble, the soft 404, else the error kind, ``http_<status>`` or the outcome. Reads the
    new ``status``."""
    return (
        f"CASE WHEN {is_in('status', (Status.FETCHED, Status.NOINDEX))} THEN NULL "
        f"WHEN {_NOT_MODIFIED} OR ({_DEFERRED} AND {_HAD_VERSION}) THEN old_reason "
        f"WHEN status = {lit(Status.DUPLICATE)} THEN coalesce(duplicate_kind, "
        f"{lit(Status.DUPLICATE)}) "
        f"WHEN status = {lit(Status.REDIRECTED)} THEN coalesce(error_kind, CASE WHEN "
        f"coalesce(old_redirects, 0) >= {cfg.fetch.max_redirects} THEN "
        f"{lit(ErrorKind.TOO_MANY_REDIRECTS)} END) "
        f"WHEN {_OK} AND {_SOFT_404} THEN {lit(DuplicateKind.SOFT_404)} "
        "ELSE coalesce(error_kind, concat('http_', CAST(http_status AS string)), outcome) END"
    )


def crawldb_updates(
    cfg: Config,
    gen: int,
    cash: bool = False,
    updated_at: str | None = None,
    fetches: str = "{fetches}",
    texts: str = "{texts}",
    crawldb: str = "{crawldb}",
    cash_rel: str = "{cash}",
) -> str:
    """The crawldb row of every URL fetched in generation ``gen``, after the fetch.

    In: fetches rows of gen (url_key, url, host, depth, outcome, http_status, error_kind,
    fetched_at, etag, last_modified); texts rows of gen (url_key, slice, duplicate_of,
    duplicate_kind, content_hash, directives); crawldb (the state before the fetch: CRAWLDB
    columns); with ``cash``, the cash of gen's links (dst_key, cash:
    crawllib.transforms.priority.link_cash), added to the score of the URLs it names
    (score_gen = gen). A URL missing from crawldb gets a fresh row (first_gen = gen, domain from
    its host). Retries follow fetch.max_attempts and fetch.retry_backoff_seconds, the schedule
    recrawl and crawl.now. ``updated_at``: an SQL timestamp (default: now). Out: CRAWLDB
    columns, one row per fetched url_key."""
    clock = parse_now(cfg.crawl.now)
    at = "visited_at" if clock is None else timestamp_of(clock)
    attempts_before = "coalesce(old_attempts, 0)"
    # a revisit is a new visit: its attempts count from 0
    previous = f"CASE WHEN {_HAD_VERSION} THEN 0 ELSE {attempts_before} END"
    attempts = f"CASE WHEN {_DEFERRED} THEN {attempts_before} ELSE {previous} + 1 END"
    revisit = "(old_fetched_at IS NOT NULL)"
    same_text = f"({_NOT_MODIFIED} OR (text_hash <=> old_content_hash))"
    changed = f"({revisit} AND NOT {same_text})"
    unchanged = f"({revisit} AND {same_text})"
    default = lit(cfg.recrawl.default_interval_hours * HOUR)
    interval = next_interval(
        cfg.recrawl, SQL, Sql(f"coalesce(old_fetch_interval, {default})"), revisit, changed
    )

    def on_visit(value: str, otherwise: str) -> str:
        return f"CASE WHEN {_VISITED} THEN {value} ELSE {otherwise} END"

    def count(flag: str, column: str) -> str:
        return f"coalesce({column}, 0) + CASE WHEN {_VISITED} AND {flag} THEN 1 ELSE 0 END"

    due = (
        f"timestamp_seconds(unix_micros({at}) / 1000000 + fetch_interval)"
        if revisits(cfg.recrawl)
        else "NULL"
    )
    retry_in = f"{lit(float(cfg.fetch.retry_backoff_seconds))} * pow(2, attempts - 1)"
    failed = f"(status = {lit(Status.FAILED)})"
    given = {
        "domain": "coalesce(old_domain, crawl_domain(host))",
        "status": "status",
        "reason": _reason(cfg),
        "attempts": "attempts",
        # the shortest way found: a URL followed in its task may be known deeper
        "depth": "least(old_depth, depth)",
        "first_gen": f"coalesce(old_first_gen, {gen})",
        "last_gen": f"CASE WHEN {_DEFERRED} THEN old_last_gen ELSE {gen} END",
        # a failed URL is due again by time, in the first generation after not_before
        "next_gen": f"CASE WHEN {failed} OR {_DEFERRED} THEN {gen + 1} END",
        "not_before": (
            f"CASE WHEN {failed} THEN timestamp_seconds(unix_micros({at}) / 1000000 + "
            f"{retry_in}) END"
        ),
        "updated_at": updated_at or "current_timestamp()",
        "fetch_interval": "fetch_interval",
        "fetched_at": on_visit(at, "old_fetched_at"),
        "next_fetch_at": on_visit(due, "old_next_fetch_at"),
        "interval_source": on_visit(_operand(interval.source), "old_interval_source"),
        "changed_at": on_visit(
            f"CASE WHEN NOT {unchanged} THEN {at} ELSE old_changed_at END", "old_changed_at"
        ),
        "visits_changed": count(changed, "old_visits_changed"),
        "visits_unchanged": count(unchanged, "old_visits_unchanged"),
        # what the next request sends and compares (a 304 may omit the validators)
        "http_status": (
            f"CASE WHEN {_DEFERRED} OR {_NOT_MODIFIED} THEN old_http_status ELSE http_status END"
        ),
        "content_hash": f"CASE WHEN {_OK} THEN text_hash ELSE old_content_hash END",
        "etag": (
            f"CASE WHEN {_OK} THEN new_etag WHEN {_NOT_MODIFIED} THEN coalesce(new_etag, "
            "old_etag) ELSE old_etag END"
        ),
        "last_modified": (
            f"CASE WHEN {_OK} THEN new_last_modified WHEN {_NOT_MODIFIED} THEN "
            "coalesce(new_last_modified, old_last_modified) ELSE old_last_modified END"
        ),
        # the cash the URL's inlinks passed it this generation, added to its score
        "score": (
            "CASE WHEN _cash IS NOT NULL THEN coalesce(old_score, 0.0) + _cash ELSE old_score END"
        ),
        "score_gen": f"CASE WHEN _cash IS NOT NULL THEN {gen} ELSE old_score_gen END",
        "redirects": "old_redirects",
    }
    return steps(
        ("_visits", _visits(cash, fetches, texts, crawldb, cash_rel)),
        ("_attempted", f"SELECT *, {attempts} AS attempts FROM _visits"),
        (
            "_stated",
            f"SELECT *, {_status(cfg)} AS status, "
            f"{on_visit(_operand(interval.seconds), 'old_fetch_interval')} AS fetch_interval "
            "FROM _attempted",
        ),
        final=f"SELECT {select_list(CRAWLDB, **given)} FROM _stated",
    )


def score_updates(gen: int, cash: str = "{cash}", fetches: str = "{fetches}") -> str:
    """Rows that add a generation's cash to known URLs it did not fetch: url_key, score = the
    cash, score_gen = gen, every other column null (status null tells them from
    :func:`crawldb_updates` rows in the MERGE: :func:`crawldb_merge_clauses`).
    In: cash (dst_key, cash); fetches (url_key of the URLs fetched in gen). Out: CRAWLDB
    columns."""
    blank = {f.name: "NULL" for f in CRAWLDB.fields if f.name not in ("url_key", "score")}
    given = {**blank, "url_key": "c.dst_key", "score": "c.cash", "score_gen": lit(gen)}
    return (
        f"SELECT {select_list(CRAWLDB, **given)} FROM {cash} c LEFT ANTI JOIN "
        f"(SELECT url_key FROM {fetches}) f ON c.dst_key = f.url_key"
    )


def crawldb_merge_clauses(gen: int) -> dict[str, Any]:
    """The MERGE of :func:`crawldb_updates` and :func:`score_updates` rows (``s``) into
    crawldb (``t``), as keyword arguments of crawllib.store.db.Db.merge: a fetched URL's row
    replaces crawldb's (:func:`crawldb_update_guard`) and is inserted when new; a score row
    adds its cash to a known URL whose score has not had gen's yet (score_gen), and is never
    inserted (a URL crawldb does not know is in the next frontier, with its cash)."""
    fetched = "s.status IS NOT NULL"
    adds = (
        f"s.status IS NULL AND (t.score_gen IS NULL OR t.score_gen < {gen})",
        {
            "score": "coalesce(t.score, 0) + s.score",
            "score_gen": "s.score_gen",
            "updated_at": "current_timestamp()",
        },
    )
    return {
        "update": {f.name: f"s.{f.name}" for f in CRAWLDB.fields if f.name != "url_key"},
        "update_condition": f"{fetched} AND {crawldb_update_guard(gen)}",
        "also": [adds],
        "insert_condition": fetched,
    }


VISIT_COUNTS = ("new", "revisited", "changed", "unchanged", "not_modified")


def visit_counts(gen: int) -> str:
    """Aggregates (an SQL select list) named VISIT_COUNTS: the visits of generation ``gen``
    that reached their page, told from crawldb after update's MERGE (so a rerun counts the
    same). Over crawldb rows of the URLs fetched in gen, with ``_visited`` (their fetch reached
    the page: ok or not_modified) and ``_not_modified`` (it was a 304)."""
    visited = f"(last_gen = {gen} AND _visited)"
    revisit = "((visits_changed + visits_unchanged) > 0)"
    this_visit_changed = "(changed_at = fetched_at)"
    return (
        f"count_if({visited} AND NOT {revisit}) AS new, "
        f"count_if({visited} AND {revisit}) AS revisited, "
        f"count_if({visited} AND {revisit} AND {this_visit_changed}) AS changed, "
        f"count_if({visited} AND {revisit} AND NOT {this_visit_changed}) AS unchanged, "
        f"count_if({visited} AND _not_modified) AS not_modified"
    )


def crawldb_update_guard(gen: int) -> str:
    """MERGE condition (``t`` crawldb, ``s`` :func:`crawldb_updates`) under which a crawldb
    row takes the update: not yet updated by gen or later, and for a deferral (the one update
    that leaves last_gen before gen), not already put off to a later generation (a rerun of
    the stage then changes no row)."""
    return (
        f"(t.last_gen IS NULL OR t.last_gen < {gen}) AND NOT "
        f"(coalesce(s.last_gen, -1) < {gen} AND t.next_gen > {gen})"
    )


def redirect_frontier(
    gen: int, max_redirects: int = 5, fetches: str = "{fetches}", crawldb: str = "{crawldb}"
) -> str:
    """Frontier rows of gen + 1 for redirect targets not yet in crawldb, and for known ones at
    a greater depth than the redirecting URL's (an offer: crawllib.transforms.depth).

    In: fetches rows of gen (url_key, url, depth, outcome, redirect_to, fetched_at); crawldb
    (url_key, score, depth, redirects). Out: FRONTIER columns, reason "redirect", depth of the
    redirecting URL, one row per target (the shallowest source, then the smallest source URL),
    score the highest of its sources' (a redirect passes all of a URL's priority), redirects =
    the source's + 1 (targets past ``max_redirects``, fetch.max_redirects, are not queued: the
    chain ends there, and update records why); discovered_at is the fetch time, so a rerun
    writes the same rows."""
    redirects = (
        f"SELECT * FROM {fetches} WHERE outcome = {lit(Outcome.REDIRECT)} AND redirect_to IS "
        "NOT NULL"
    )
    scores = (
        "SELECT url_key, max(score) AS _score, max(coalesce(redirects, 0) + 1) AS _hops "
        f"FROM ({rows_of(crawldb, f'({redirects})')}) GROUP BY url_key"
    )
    targets = (
        "SELECT target.url AS url, target.url_key AS url_key, target.host AS host, "
        "target.domain AS domain, source_url, depth, discovered_at, _score, _hops FROM ("
        "SELECT crawl_redirect_target(r.redirect_to) AS target, r.url AS source_url, r.depth, "
        "r.fetched_at AS discovered_at, s._score, coalesce(s._hops, 1) AS _hops "
        f"FROM ({redirects}) r LEFT JOIN ({scores}) s ON r.url_key = s.url_key) "
        f"WHERE target IS NOT NULL AND _hops <= {max_redirects}"
    )
    new = unknown_or_shallower(f"({targets})", crawldb, "url_key", "_x.depth")
    first = "min(struct(depth, source_url, discovered_at, url, host, domain))"
    grouped = (
        f"SELECT url_key, {first} AS first, max(_score) AS score, min(_hops) AS redirects "
        f"FROM ({new}) GROUP BY url_key"
    )
    given = {
        "gen": lit(gen + 1),
        "url": "first.url",
        "host": "first.host",
        "domain": "first.domain",
        "depth": "first.depth",
        "source_url": "first.source_url",
        "reason": lit(FrontierReason.REDIRECT),
        "discovered_at": "first.discovered_at",
    }
    return f"SELECT {select_list(FRONTIER, **given)} FROM ({grouped})"


def followed_frontier(gen: int, fetches: str = "{fetches}", frontier: str = "{frontier}") -> str:
    """Frontier rows of ``gen`` for the URLs the fetch followed in its task, as if plan had
    taken them from the frontier: reason "link", the page that linked them as source_url, its
    depth + 1, discovered_at = fetch time; only those the frontier of gen does not hold yet, so
    appending them again changes nothing.

    In: fetches rows of gen (url_key, url, host, depth, fetched_at, source_url); frontier rows
    (gen, url_key). Out: FRONTIER columns, score null (update adds the cash of their links to
    their crawldb rows)."""
    followed = (
        "SELECT * EXCEPT (_n) FROM (SELECT *, row_number() OVER (PARTITION BY url_key ORDER BY "
        f"fetched_at, source_url) AS _n FROM {fetches} WHERE source_url IS NOT NULL) "
        "WHERE _n = 1"
    )
    given = {
        "gen": lit(gen),
        "domain": "crawl_domain(f.host)",
        "reason": lit(FrontierReason.LINK),
        "discovered_at": "f.fetched_at",
        "score": "NULL",
        "redirects": "NULL",
        **{n: f"f.`{n}`" for n in ("url", "url_key", "host", "depth", "source_url")},
    }
    return (
        f"SELECT {select_list(FRONTIER, **given)} FROM ({followed}) f LEFT ANTI JOIN "
        f"(SELECT url_key FROM {frontier} WHERE gen = {gen}) h ON f.url_key = h.url_key"
    )


def sitemap_hints(cfg: Config, sitemaps: str = "{sitemaps}") -> str:
    """What the sitemaps of a generation say of each URL they list, as crawldb-shaped rows for
    :data:`SITEMAP_HINTS_UPDATE`: next_fetch_at = its ``lastmod`` (the latest, if several list
    it), fetch_interval = its ``changefreq`` as seconds (crawllib.content.sitemaps.
    changefreq_seconds, within the recrawl bounds; the shortest), the other columns null.
    In: sitemaps rows (entries). Out: CRAWLDB columns, one row per url_key with a hint."""
    freqs = ("always", "hourly", "daily", "weekly", "monthly", "yearly")
    low, high = cfg.recrawl.min_interval_hours * HOUR, cfg.recrawl.max_interval_hours * HOUR
    arms = " ".join(
        f"WHEN lower(e.changefreq) = {lit(word)} THEN "
        f"{lit(float(min(max(changefreq_seconds(word) or high, low), high)))}"
        for word in freqs
    )
    hints = (
        "SELECT e.url_key AS url_key, timestamp_seconds(e.lastmod) AS lastmod, "
        f"CAST(CASE {arms} END AS double) AS interval FROM (SELECT explode(entries) AS e "
        f"FROM {sitemaps})"
    )
    grouped = (
        "SELECT url_key, max(lastmod) AS lastmod, min(interval) AS interval FROM "
        f"({hints}) WHERE lastmod IS NOT NULL OR interval IS NOT NULL GROUP BY url_key"
    )
    blank = {f.name: "NULL" for f in CRAWLDB.fields if f.name != "url_key"}
    given = {**blank, "next_fetch_at": "lastmod", "fetch_interval": "interval"}
    return f"SELECT {select_list(CRAWLDB, **given)} FROM ({grouped})"


# MERGE of :func:`sitemap_hints` (``s``) into crawldb (``t``), for pages with a stored version:
# a changefreq replaces the default interval of a page not yet adapted (interval_source
# "sitemap", next_fetch_at = its visit + that interval); a lastmod after the visit makes the
# page due at once (next_fetch_at = lastmod, already past, if earlier). Replacing only a
# default interval and taking the earlier time, a rerun changes nothing.
_CHANGED_SINCE = "s.next_fetch_at > t.fetched_at"
_HINTED = f"s.fetch_interval IS NOT NULL AND t.interval_source = '{IntervalSource.DEFAULT}'"
SITEMAP_HINTS_GUARD = (
    f"t.status IN ({sql_list(REVISITED_STATUSES)}) AND t.fetched_at IS NOT NULL AND ("
    f"({_CHANGED_SINCE} AND (t.next_fetch_at IS NULL OR s.next_fetch_at < t.next_fetch_at))"
    f" OR ({_HINTED}))"
)
SITEMAP_HINTS_UPDATE = {
    "next_fetch_at": (
        f"least(CASE WHEN {_HINTED} THEN timestamp_seconds(unix_micros(t.fetched_at) / 1000000 "
        "+ s.fetch_interval) ELSE t.next_fetch_at END, "
        f"CASE WHEN {_CHANGED_SINCE} THEN s.next_fetch_at END)"
    ),
    "fetch_interval": f"CASE WHEN {_HINTED} THEN s.fetch_interval ELSE t.fetch_interval END",
    "interval_source": (
        f"CASE WHEN {_HINTED} THEN '{IntervalSource.SITEMAP}' ELSE t.interval_source END"
    ),
    "updated_at": "current_timestamp()",
}
