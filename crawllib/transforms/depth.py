"""Depth is the shortest path: a URL's depth is the fewest links from a seed over every way it
was found (links, redirects, sitemaps, seeds), in this generation and in every earlier one.

A way to a URL is found where the page that carries it is read (the fetch, update), while the
URL's depth lives in crawldb. So every place that finds a way *offers* a depth: a frontier row,
for a new URL and for a known URL that the way reaches in fewer links than crawldb says. Plan
lowers crawldb's depths to the offers (:func:`below`), and a page whose depth drops passes its
new depth on to the URLs it links to (depth + 1) and redirects to (the same depth),
:func:`outlink_offers`, a wave at a time, each wave one link deeper, until no depth within
``crawl.max_depth`` drops (``crawllib.stages.depths``). A URL filtered for depth that comes
within the cap is queued again (crawllib.transforms.plan.with_lowered_depths); a URL already
fetched keeps its status, and its depth drops. SQL, like every rule (crawllib.transforms).
"""

from __future__ import annotations

from crawllib.config import Config
from crawllib.core.vocab import DuplicateKind, Outcome, Status
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.sqltext import is_in, lit

# A known URL without a depth (rows written by hand) is never lowered: nothing compares.
_NO_DEPTH = -1


def shallowest(offers: str = "{offers}") -> str:
    """One row per url_key, its smallest offered depth. In/out: url_key, depth."""
    return f"SELECT url_key, min(depth) AS depth FROM {offers} GROUP BY url_key"


def below(offers: str = "{offers}", depths: str = "{depths}") -> str:
    """The offers that lower a URL's depth: per url_key of ``depths`` (url_key, depth: what is
    recorded), its smallest offer (url_key, depth) when that is less. Offers to URLs
    ``depths`` does not hold are dropped. Out: url_key, depth."""
    return (
        f"SELECT d.url_key, o.depth FROM {depths} d JOIN ({shallowest(offers)}) o "
        f"ON d.url_key = o.url_key WHERE o.depth < coalesce(d.depth, {_NO_DEPTH})"
    )


def least(a: str, b: str) -> str:
    """Two sets of (url_key, depth) as one, the smaller depth of a key in both."""
    return shallowest(f"(SELECT url_key, depth FROM {a} UNION ALL SELECT url_key, depth FROM {b})")


def unknown_or_shallower(targets: str, known: str, key: str, depth: str) -> str:
    """The rows of ``targets`` (one per ``key``) whose URL ``known`` (url_key, depth) does not
    hold, or holds at a depth greater than ``depth`` (an SQL expression over the targets'
    columns: a shorter path, an offer). ``known`` is looked up by the targets' keys
    (crawllib.transforms.lookup.rows_of). Out: targets' columns."""
    held = rows_of(f"(SELECT url_key AS `{key}`, depth FROM {known})", targets, key)
    return (
        f"SELECT _x.* EXCEPT (_known_depth) FROM (SELECT _g.*, _h._known_depth FROM {targets} _g "
        f"LEFT JOIN (SELECT `{key}`, min(coalesce(depth, {_NO_DEPTH})) AS _known_depth FROM "
        f"({held}) GROUP BY `{key}`) _h ON _g.`{key}` = _h.`{key}`) _x "
        f"WHERE _x._known_depth IS NULL OR {depth} < _x._known_depth"
    )


def expands(cfg: Config, prefix: str = "") -> str:
    """crawldb rows whose outlinks the next frontier took (update's followed links): pages
    fetched (noindex ones included: noindex is not nofollow), and duplicates but exact ones
    unless parse.follow_duplicate_links (a soft 404 is ``gone``, never expanded); and
    redirects, whose target is one step of no link. ``prefix``: the rows' alias and dot."""
    status, reason = f"{prefix}status", f"{prefix}reason"
    copies = f"{status} = {lit(Status.DUPLICATE)}"
    if not cfg.parse.follow_duplicate_links:
        copies = f"({copies} AND NOT ({reason} <=> {lit(DuplicateKind.EXACT)}))"
    kept = is_in(status, (Status.FETCHED, Status.NOINDEX, Status.REDIRECTED))
    return f"({kept} OR {copies})"


def outlink_offers(
    sources: str = "{sources}", links: str = "{links}", redirects: str = "{redirects}"
) -> str:
    """What pages whose depth dropped offer the URLs they lead to: each link target its
    source's depth + 1, each redirect target its source's depth.

    In: sources (url_key, depth); links (src_key, dst_key); redirects (url_key, target_key).
    Out: url_key, depth, the smallest offer per url_key."""
    linked = (
        f"SELECT l.dst_key AS url_key, s.depth + 1 AS depth FROM {links} l JOIN {sources} s "
        "ON l.src_key = s.url_key"
    )
    redirected = (
        f"SELECT r.target_key AS url_key, s.depth FROM {redirects} r JOIN {sources} s "
        "ON r.url_key = s.url_key"
    )
    return shallowest(f"({linked} UNION ALL {redirected})")


def redirect_edges(fetches: str = "{fetches}") -> str:
    """Redirects as edges: url_key, target_key (the key of the normalised redirect_to, null
    for a target that is no URL: left out). In: fetches rows."""
    return (
        "SELECT url_key, target_key FROM (SELECT url_key, crawl_redirect_target(redirect_to)"
        f".url_key AS target_key FROM {fetches} WHERE outcome = {lit(Outcome.REDIRECT)} AND "
        "redirect_to IS NOT NULL) WHERE target_key IS NOT NULL"
    )
