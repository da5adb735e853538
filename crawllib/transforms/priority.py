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

The cash of generation N is computed twice from the same inputs: by parse, for the URLs it
puts in the frontier of N + 1 (new), and by update, which adds it to the crawldb rows of the
known ones (guarded by score_gen, so a rerun adds nothing twice).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.transforms.lookup import rows_of


def link_cash(links: DataFrame, sources: DataFrame, cfg: Config) -> DataFrame:
    """The cash the pages of one generation pass to each URL they link.

    In: links rows (src_key, dst_key, dst_host); sources, one row per page that may be a
    link's source (url_key, host, score: its crawldb score before this generation, null for
    none; duplicate_of). Out: dst_key, cash (double, > 0), one row per linked URL.
    """
    g = cfg.generate
    out = links.groupBy("src_key").agg(F.count("*").alias("_out"))
    quality = F.when(F.col("duplicate_of").isNotNull(), F.lit(g.duplicate_link_weight)).otherwise(
        F.lit(1.0)
    )
    pages = sources.select(
        F.col("url_key").alias("src_key"),
        F.col("host").alias("_src_host"),
        ((F.lit(1.0) + F.coalesce(F.col("score"), F.lit(0.0))) * quality).alias("_cash"),
    )
    internal = F.col("dst_host") == F.col("_src_host")
    share = (F.col("_cash") / F.col("_out")).alias("_share")
    per_host = (
        links.select("src_key", "dst_key", "dst_host")
        .join(pages, on="src_key", how="inner")
        .join(out, on="src_key", how="inner")
        .select("dst_key", "_src_host", internal.alias("_internal"), share)
        .groupBy("dst_key", "_src_host", "_internal")
        .agg(F.sum("_share").alias("_sum"), F.max("_share").alias("_max"))
    )
    passed = F.when(F.col("_internal"), F.col("_sum") * g.internal_link_weight).otherwise(
        F.col("_max")
    )
    return per_host.groupBy("dst_key").agg(F.sum(passed).alias("cash")).where(F.col("cash") > 0)


def sources_of(texts: DataFrame, crawldb: DataFrame) -> DataFrame:
    """The link sources of a generation for :func:`link_cash`: its texts rows (url_key, host,
    duplicate_of) with their crawldb score (null for a URL crawldb does not hold)."""
    scores = rows_of(crawldb, texts).select("url_key", "score")
    return texts.select("url_key", "host", "duplicate_of").join(scores, "url_key", "left")


def score_order(cfg: Config) -> list[Column]:
    """The order new URLs of a host take its quota in (generate.order): highest score first,
    then shallowest, then url_key (a total order: a rerun decides the same); or breadth first
    (depth, url_key)."""
    depth_first = [F.col("depth").asc(), F.col("url_key").asc()]
    if cfg.generate.order == "depth":
        return depth_first
    return [F.coalesce(F.col("score"), F.lit(0.0)).desc(), *depth_first]
