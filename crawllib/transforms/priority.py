"""URL priority: the cash a generation's pages pass to the URLs they link (after OPIC).

Every URL has a ``score`` (crawldb, and the frontier row that first finds it): a seed starts
with generate.seed_score, a URL found by links with the cash those links passed it, and each
later generation whose pages link to it adds theirs. Plan fills each host's quota, and the
generation's generate.top_n, highest score first (generate.order = score).

What a fetched page passes (Abiteboul et al., OPIC; Nutch's OPICScoringFilter is the model): its
cash ``(1 + score) * quality`` split evenly over its outlinks; quality is 1, or
generate.duplicate_link_weight for a page marked a duplicate (its links are another page's). A
link to the page's own host passes generate.internal_link_weight of its share; links from
another host pass all of it, but one linking host counts once per target and generation (its
largest share): in-links from many hosts count, a host linking to itself from every page
does not buy itself a high score. Unlike OPIC a page keeps its score when it passes cash (the
score is a history of what it received, as Nutch keeps it): the order of URLs is what
matters, not the scale.

The cash of generation N is computed by update from its links: it goes to the frontier rows of
the URLs it queues (new) and into crawldb's rows of the known ones (guarded by score_gen, so a
rerun adds nothing twice).
"""

from __future__ import annotations

from crawllib.config import Config
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.sqltext import lit


def link_cash(cfg: Config, links: str = "{links}", sources: str = "{sources}") -> str:
    """The cash the pages of one generation pass to each URL they link.

    In: links rows (src_key, dst_key, dst_host); sources, one row per page that may be a
    link's source (url_key, host, score: its crawldb score before this generation, null for
    none; duplicate_of). Out: dst_key, cash (double, > 0), one row per linked URL."""
    g = cfg.generate
    quality = f"CASE WHEN duplicate_of IS NOT NULL THEN {lit(float(g.duplicate_link_weight))} ELSE CAST(1.0 AS double) END"
    pages = (
        f"SELECT url_key AS src_key, host AS _src_host, (CAST(1.0 AS double) + coalesce(score, CAST(0.0 AS double))) * "
        f"{quality} AS _cash FROM {sources}"
    )
    out = f"SELECT src_key, count(*) AS _out FROM {links} GROUP BY src_key"
    shares = (
        f"SELECT l.dst_key, p._src_host, l.dst_host = p._src_host AS _internal, "
        f"p._cash / o._out AS _share FROM {links} l JOIN ({pages}) p ON l.src_key = p.src_key "
        f"JOIN ({out}) o ON l.src_key = o.src_key"
    )
    per_host = (
        "SELECT dst_key, _internal, sum(_share) AS _sum, max(_share) AS _max FROM "
        f"({shares}) GROUP BY dst_key, _src_host, _internal"
    )
    passed = f"CASE WHEN _internal THEN _sum * {lit(float(g.internal_link_weight))} ELSE _max END"
    return (
        f"SELECT dst_key, cash FROM (SELECT dst_key, sum({passed}) AS cash FROM ({per_host}) "
        "GROUP BY dst_key) WHERE cash > 0"
    )


def sources_of(texts: str = "{texts}", crawldb: str = "{crawldb}") -> str:
    """The link sources of a generation for :func:`link_cash`: its texts rows (url_key, host,
    duplicate_of) with their crawldb score (null for a URL crawldb does not hold)."""
    scores = rows_of(f"(SELECT url_key, score FROM {crawldb})", texts)
    return (
        f"SELECT t.url_key, t.host, t.duplicate_of, s.score FROM {texts} t LEFT JOIN "
        f"(SELECT url_key, max(score) AS score FROM ({scores}) GROUP BY url_key) s "
        "ON t.url_key = s.url_key"
    )


def score_order(cfg: Config) -> str:
    """The order new URLs of a host take its quota in (generate.order), an SQL ORDER BY list:
    highest score first, then shallowest, then url_key (a total order: a rerun decides the
    same); or breadth first (depth, url_key)."""
    depth_first = "depth ASC, url_key ASC"
    if cfg.generate.order == "depth":
        return depth_first
    return f"coalesce(score, CAST(0.0 AS double)) DESC, {depth_first}"
