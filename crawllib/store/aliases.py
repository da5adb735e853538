"""Alias hosts: a host whose pages are, mostly, exact copies of another host's pages (a mirror,
``www.`` and the bare name serving one site, an old name kept alive) is crawled once, not
twice.

Parse counts, in the ``aliases`` table, per pair of hosts (host, of_host), the pages of
``host`` marked exact duplicates whose first copy is on ``of_host`` (``copies``: a MERGE that
adds a generation once). A host is an **alias** of another once it has ``aliases.min_pages``
pages (the sum of its URL patterns' pages in the traps table: every page it has served), of
which at least ``aliases.duplicate_share`` are shared with that host (its copies of the other
plus the other's copies of it: when both are crawled at once, each page's first copy is on
either host), and it is the copy: it has more copies of the other than the other of it (ties:
the greater host name is the copy, so exactly one of two equal mirrors is the alias). Plan then
filters every URL of an alias, revisits included, with reason ``alias``; an operator keeps a
host crawled with ``aliases.allow``.

Only exact duplicates count: near duplicates are common between distinct sites of one
template, exact copies of most of a host's pages are not.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.vocab import DuplicateKind
from crawllib.store import tables


def alias_counts(marks: DataFrame, hosts: DataFrame, gen: int) -> DataFrame:
    """A generation's exact duplicates counted per pair of hosts: rows for the aliases table.

    In: marks (url_key, duplicate_of, duplicate_kind) of gen's duplicates; hosts (url_key,
    host) of every page a mark may name, the marked ones and their first copies (gen's pages
    and crawldb). Out: host, of_host, copies, first_gen = gen = ``gen``, updated_at; only pairs
    of two different hosts."""
    copies = marks.where(F.col("duplicate_kind") == DuplicateKind.EXACT).select(
        "url_key", "duplicate_of"
    )
    # Only the owners of the URLs the marks name (a generation's few keys, broadcast): hosts
    # holds all of crawldb, which a distinct over every row would shuffle each generation.
    named = copies.select("url_key").unionByName(
        copies.select(F.col("duplicate_of").alias("url_key"))
    )
    owners = (
        hosts.select("url_key", "host")
        .join(F.broadcast(named.distinct()), "url_key", "left_semi")
        .distinct()
    )
    pairs = copies.join(owners, "url_key").join(
        owners.select(F.col("url_key").alias("duplicate_of"), F.col("host").alias("of_host")),
        "duplicate_of",
    )
    return (
        pairs.where(F.col("host") != F.col("of_host"))
        .groupBy("host", "of_host")
        .agg(F.count("*").alias("copies"))
        .select(
            "host",
            "of_host",
            "copies",
            F.lit(gen).alias("first_gen"),
            F.lit(gen).alias("gen"),
            F.current_timestamp().alias("updated_at"),
        )
    )


# MERGE of alias_counts (s) into aliases (t) on (host, of_host), guarded by
# tables.ONCE_PER_GEN: a generation adds its counts once.
ALIASES_UPDATE = {
    "copies": "t.copies + s.copies",
    "gen": "s.gen",
    "updated_at": "s.updated_at",
}


def alias_hosts(aliases: DataFrame, traps: DataFrame, cfg: Config) -> DataFrame:
    """The hosts judged aliases (module docstring), not in aliases.allow, with the host each
    copies. In: aliases rows, traps rows (for each host's pages). Out: host, alias_of."""
    a = cfg.aliases
    pages = traps.groupBy("host").agg(F.sum("pages").alias("pages"))
    back = aliases.select(
        F.col("host").alias("of_host"),
        F.col("of_host").alias("host"),
        F.col("copies").alias("copied"),
    )
    pairs = (
        aliases.join(back, ["host", "of_host"], "left")
        .join(pages, "host")
        .withColumn("copied", F.coalesce("copied", F.lit(0)))
    )
    judged = pairs.where(
        (F.col("pages") >= a.min_pages)
        & (F.col("copies") + F.col("copied") >= F.col("pages") * a.duplicate_share)
        & (
            (F.col("copies") > F.col("copied"))
            | ((F.col("copies") == F.col("copied")) & (F.col("host") > F.col("of_host")))
        )
    )
    best = judged.groupBy("host").agg(F.max_by("of_host", "copies").alias("alias_of"))
    allowed = [h.lower() for h in a.allow]
    return best.where(~F.col("host").isin(*allowed)) if allowed else best


def read_aliased(spark: SparkSession, root: str, cfg: Config) -> DataFrame | None:
    """:func:`alias_hosts` of the crawl root's tables; None on a root without an aliases table
    yet."""
    if not tables.exists(spark, root, "aliases"):
        return None
    return alias_hosts(tables.read(spark, root, "aliases"), tables.read(spark, root, "traps"), cfg)
