"""Parse stage steps: pages -> extracted texts and links, duplicates, next generation's frontier.

Canonicals. A page whose ``<link rel=canonical>`` (or Link header) names another URL is a
duplicate of that URL (``duplicate_kind`` canonical), marked first; it is no first copy of
anything.

Duplicates. A text's *first copy* is the lowest ``(gen, url_key)`` among the texts (this
generation's and every earlier one's) that carry the same content; ``duplicate_of`` is that
page's ``url_key`` when it is another URL, else null (a URL fetched again with unchanged text
stays the original, and no page is ever its own duplicate). Exact duplicates share
``content_hash`` (of the extracted text, so boilerplate does not matter); near duplicates have
SimHashes within Hamming distance ``k``, found by LSH banding (join on equal bands, then
check the distance), never by comparing all pairs. Exact wins over near.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType

from crawllib.config import Config
from crawllib.content.extract_worker import shared_extractor
from crawllib.core.records import Extracted
from crawllib.core.urls import registered_domain, url_key
from crawllib.core.vocab import STATED_DUPLICATES, DuplicateKind, FrontierReason
from crawllib.store.schemas import EXTRACTED, FRONTIER, LINKS, TEXTS, columns_of
from crawllib.transforms.depth import unknown_or_shallower
from crawllib.transforms.lookup import rows_of

_TEXT_FIELDS = [f.name for f in EXTRACTED.fields if f.name != "links"]

registered_domain_udf = F.udf(registered_domain, StringType())


def extracted_struct(extracted: Extracted) -> tuple:
    """An extraction (`crawllib.content.extract.extract_record`) as a value of the EXTRACTED struct."""
    links = [(k["dst_url"], k["dst_key"], k["dst_host"], k["anchor"]) for k in extracted["links"]]
    return (*(extracted[name] for name in _TEXT_FIELDS), links)  # type: ignore[literal-required]


def _extract_udf(cfg: Config) -> Any:
    def extract(
        body: bytes | None, url: str, charset: str | None, headers: dict[str, str] | None
    ) -> tuple:
        # in this Python worker's extraction process, within extract.max_seconds
        return extracted_struct(shared_extractor(cfg).extract(body, url, charset, headers))

    return F.udf(extract, EXTRACTED)


def extract_pages(pages: DataFrame, cfg: Config) -> DataFrame:
    """Run `crawllib.content.extract.extract_page` on every page, each within extract.max_seconds
    (`crawllib.content.extract_worker`: past it, error extract_timeout).

    In: pages rows (PAGE_KEYS: gen, slice, url_key, url, host, domain, surt, depth; charset,
    headers, body). Out: PAGE_KEYS and the EXTRACTED fields: title, text, language,
    language_detected, text_chars, content_hash, simhash, error, directives, tdm_reserved,
    canonical_url, links (array<LINK>).

    A plain Python UDF returning a struct: it ships only body, url, charset and headers to Python (in
    pickled batches of 100 rows, so memory stays bounded however big the bodies), keeps the
    DataFrame API, and costs little next to trafilatura itself (docs/benchmarks.md, measure
    3). (pandas and Arrow UDFs would need pyarrow, which the project does not depend on.)
    """
    extract = _extract_udf(cfg)
    x = extract(F.col("body"), F.col("url"), F.col("charset"), F.col("headers"))
    return pages.select(*PAGE_KEYS, x.alias("x")).select(*PAGE_KEYS, "x.*")


# What identifies a page in its extracted rows (domain and surt: the pages row's, carried to
# its texts row).
PAGE_KEYS = ("gen", "slice", "url_key", "url", "host", "domain", "surt", "depth")


def texts_of(extracted: DataFrame) -> DataFrame:
    """Extracted pages -> rows of the texts table, not yet marked as duplicates."""
    return extracted.select(
        *[
            F.lit(None).cast(f.dataType).alias(f.name)
            if f.name in ("duplicate_of", "duplicate_kind")
            else F.col(f.name).cast(f.dataType)
            for f in TEXTS.fields
        ]
    )


# What duplicate marking reads of a text (never the text itself): marking a generation's texts
# on these columns keeps its shuffles and caches narrow, whatever the pages' size.
MARK_COLUMNS = (
    "gen",
    "url_key",
    "content_hash",
    "simhash",
    "text_chars",
    "error",
    "duplicate_of",
    "duplicate_kind",
)


def _first_copy_marks(joined: DataFrame, first: Column, kind: str, columns: list[str]) -> DataFrame:
    """Set duplicate_of / duplicate_kind from ``first`` (struct gen, url_key) where empty;
    keep ``columns`` (the marked DataFrame's own), in their order."""
    is_dup = (
        F.col("duplicate_of").isNull() & first.isNotNull() & (first["url_key"] != F.col("url_key"))
    )
    marked = {
        "duplicate_of": F.when(is_dup, first["url_key"]).otherwise(F.col("duplicate_of")),
        "duplicate_kind": F.when(is_dup, F.lit(kind)).otherwise(F.col("duplicate_kind")),
    }
    return joined.select(*[marked.get(name, F.col(name)).alias(name) for name in columns])


def _not_canonical_duplicate() -> Column:
    """A page that names another URL its canonical, or a soft 404, is no first copy of
    anything (else two pages could each be the other's duplicate)."""
    return F.coalesce(~F.col("duplicate_kind").isin(*STATED_DUPLICATES), F.lit(True))


def _has_text(texts: DataFrame) -> DataFrame:
    return texts.where(
        F.col("error").isNull()
        & (F.col("text_chars") > 0)
        & F.col("content_hash").isNotNull()
        & _not_canonical_duplicate()
    )


url_key_udf = F.udf(lambda url: None if url is None else url_key(url), LongType())


def mark_soft_404(texts: DataFrame, probes: DataFrame, k: int) -> DataFrame:
    """Mark soft 404s: pages whose text is their host's answer to a URL no page links to (its
    latest soft-404 probe answered 2xx with a text: crawllib.engine.engine), the same text
    (content_hash) or within SimHash distance ``k``; duplicate_of = the probe URL's url_key,
    duplicate_kind "soft_404". Rows already marked keep their mark.

    In: texts columns (or at least url_key, host, content_hash, simhash, text_chars, error,
    duplicate_of, duplicate_kind); probes rows (host, url, fetched_at, http_status,
    text_chars, content_hash, simhash). Out: texts' columns."""
    answered = probes.where(
        F.col("http_status").between(200, 299)
        & F.col("simhash").isNotNull()
        & (F.col("text_chars") > 0)
    )
    latest = (
        rows_of(answered, texts, "host")
        .groupBy("host")
        .agg(F.max_by(F.struct("url", "content_hash", "simhash"), "fetched_at").alias("_probe"))
    )
    joined = texts.join(latest, on="host", how="left")
    probe = F.col("_probe")
    soft = (
        probe.isNotNull()
        & F.col("duplicate_of").isNull()
        & F.col("error").isNull()
        & (F.col("text_chars") > 0)
        & (
            (F.col("content_hash") == probe["content_hash"])
            | (F.bit_count(F.col("simhash").bitwiseXOR(probe["simhash"])) <= k)
        )
    )
    marked = {
        "duplicate_of": F.when(soft, url_key_udf(probe["url"])).otherwise(F.col("duplicate_of")),
        "duplicate_kind": F.when(soft, F.lit(DuplicateKind.SOFT_404)).otherwise(
            F.col("duplicate_kind")
        ),
    }
    return joined.select(*[marked.get(c, F.col(c)).alias(c) for c in texts.columns])


def mark_canonical(texts: DataFrame) -> DataFrame:
    """Mark the pages that name another URL their canonical (``canonical_url``, set by the
    extraction only when it is another URL) duplicates of it: duplicate_of = its url_key,
    duplicate_kind "canonical", before any exact or near mark (the site's own word wins).

    In: texts columns (or at least canonical_url, duplicate_of, duplicate_kind). Out: the
    same columns."""
    named = F.col("canonical_url").isNotNull() & F.col("duplicate_of").isNull()
    return texts.withColumns(
        {
            "duplicate_of": F.when(named, url_key_udf(F.col("canonical_url"))).otherwise(
                F.col("duplicate_of")
            ),
            "duplicate_kind": F.when(named, F.lit(DuplicateKind.CANONICAL)).otherwise(
                F.col("duplicate_kind")
            ),
        }
    )


def mark_exact_duplicates(texts_new: DataFrame, texts_prior: DataFrame) -> DataFrame:
    """Mark texts whose extracted text an earlier page already has, exactly.

    In: texts_new (texts columns, or at least MARK_COLUMNS; one generation) and texts_prior
    (gen, url_key, content_hash, text_chars, error of earlier generations). Out: texts_new's
    columns, with duplicate_of = url_key of the first copy and duplicate_kind = "exact" (rows
    already marked are kept). Errors and empty texts are never duplicates.
    """
    new = _has_text(texts_new).select("content_hash", "gen", "url_key")
    # Only earlier texts with one of the generation's hashes can be a first copy: the rest of
    # the crawl's history is scanned (three narrow columns) but not shuffled or aggregated.
    prior = rows_of(
        _has_text(texts_prior).select("content_hash", "gen", "url_key"), new, "content_hash"
    )
    copies = new.unionByName(prior)
    firsts = copies.groupBy("content_hash").agg(
        F.min(F.struct("gen", "url_key")).alias("first_copy")
    )
    joined = texts_new.join(firsts, on="content_hash", how="left")
    return _first_copy_marks(joined, F.col("first_copy"), DuplicateKind.EXACT, texts_new.columns)


def lsh_band_columns(k: int, simhash: str = "simhash") -> Column:
    """array<struct<band int, value long>>: `crawllib.content.hashing.lsh_bands` in built-in functions.

    k + 1 contiguous bands from the low bits, the first ``64 % (k + 1)`` one bit wider; a single
    band (k = 0) is the signed hash itself.
    """
    if not 0 <= k <= 63:
        raise ValueError(f"distance must be in 0..63, got {k}")
    count = k + 1
    if count == 1:
        return F.array(F.struct(F.lit(0).alias("band"), F.col(simhash).alias("value")))
    width, extra = divmod(64, count)
    bands, shift = [], 0
    for index in range(count):
        band_width = width + (1 if index < extra else 0)
        value = F.shiftrightunsigned(F.col(simhash), shift).bitwiseAND(F.lit((1 << band_width) - 1))
        bands.append(F.struct(F.lit(index).alias("band"), value.cast("long").alias("value")))
        shift += band_width
    return F.array(*bands)


def _with_bands(df: DataFrame, k: int) -> DataFrame:
    return df.select("*", F.inline(lsh_band_columns(k)))


def mark_near_duplicates(
    texts_new: DataFrame, texts_prior: DataFrame, k: int, min_text_chars: int = 0
) -> DataFrame:
    """Mark texts within SimHash Hamming distance k of an earlier page's text.

    In: texts_new (texts columns, or at least MARK_COLUMNS), texts_prior (gen, url_key,
    simhash, text_chars, error of earlier generations), k and the shortest text that takes
    part (shorter ones, errors and rows without text are left out on both sides). Out:
    texts_new's columns; rows not yet marked get duplicate_of = url_key of the first (lowest
    (gen, url_key)) text within distance k, duplicate_kind = "near".

    Work stays far from all pairs: every distinct SimHash is represented by its first text
    (so a thousand exact copies cost one probe), and pairs are only those sharing a band.
    """

    def eligible(texts: DataFrame) -> DataFrame:
        return texts.where(
            F.col("error").isNull()
            & F.col("simhash").isNotNull()
            & (F.col("text_chars") >= max(min_text_chars, 1))
            & _not_canonical_duplicate()
        ).select("gen", "url_key", "simhash")

    new = eligible(texts_new.where(F.col("duplicate_of").isNull()))
    probes = new.select("simhash").distinct()
    a = _with_bands(probes, k).alias("a")
    # Only earlier texts sharing a band with a probe can be its neighbours (and every text of
    # such a SimHash does): the rest of the history is scanned, not shuffled or aggregated.
    prior = rows_of(_with_bands(eligible(texts_prior), k), a, ["band", "value"]).select(
        "gen", "url_key", "simhash"
    )
    firsts = (
        eligible(texts_new)
        .unionByName(prior)
        .groupBy("simhash")
        .agg(F.min(F.struct("gen", "url_key")).alias("first_copy"))
    )
    b = _with_bands(firsts, k).alias("b")
    neighbours = a.join(
        b,
        on=(F.col("a.band") == F.col("b.band")) & (F.col("a.value") == F.col("b.value")),
        how="inner",
    ).select(
        F.col("a.simhash").alias("simhash"),
        F.col("b.first_copy").alias("first_copy"),
        F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash"))).alias("distance"),
    )
    best = (
        new.join(neighbours.where(F.col("distance") <= k), on="simhash", how="inner")
        .where(F.col("first_copy") < F.struct("gen", "url_key"))
        .groupBy("url_key")
        .agg(F.min("first_copy").alias("first_copy"))
    )
    joined = texts_new.join(best, on="url_key", how="left")
    return _first_copy_marks(joined, F.col("first_copy"), DuplicateKind.NEAR, texts_new.columns)


def with_duplicate_marks(texts: DataFrame, marks: DataFrame) -> DataFrame:
    """Texts rows (one generation, not marked) -> the same rows with their duplicate marks.

    In: texts columns; marks (url_key, duplicate_of, duplicate_kind) of the rows that are
    duplicates. Out: texts columns.
    """
    unmarked = texts.drop("duplicate_of", "duplicate_kind")
    joined = unmarked.join(marks, on="url_key", how="left")
    return joined.select(*TEXTS.fieldNames())


def links_table(extracted: DataFrame) -> DataFrame:
    """Extracted pages -> rows of the links table: a page's links are one per target already
    (`crawllib.content.extract.extract_record`), so this is a narrow explode, no shuffle.

    In: gen, slice, url_key, url, links. Out: links columns.
    """
    return extracted.select(
        "gen",
        "slice",
        F.col("url_key").alias("src_key"),
        F.col("url").alias("src_url"),
        F.inline("links"),
    ).select(*columns_of(LINKS))


def followed_links(
    links: DataFrame, marks: DataFrame, cfg: Config, depths: DataFrame | None = None
) -> DataFrame:
    """The links whose targets are queued and passed cash: not those of soft 404s, nor (unless
    parse.follow_duplicate_links) those of exact duplicates (the page they copy has the same
    links, and is fetched), unless the duplicate is fewer links from a seed than its first
    copy: its links are then the shortest path to their targets (depth is the shortest path).

    In: links rows; marks (url_key, duplicate_of, duplicate_kind) of the generation's pages;
    depths (url_key, depth) of the generation's pages and of their first copies (without it
    every exact duplicate's links are dropped). Out: links rows."""
    kind = F.col("duplicate_kind")
    dropped = marks.where(kind == DuplicateKind.SOFT_404)  # a soft 404 is never expanded
    if not cfg.parse.follow_duplicate_links:
        exact = marks.where(kind == DuplicateKind.EXACT)
        if depths is not None:
            least = depths.groupBy("url_key").agg(F.min("depth").alias("depth"))
            own = least.select("url_key", F.col("depth").alias("_own"))
            copy = least.select(
                F.col("url_key").alias("duplicate_of"), F.col("depth").alias("_copy")
            )
            shallower = F.coalesce(F.col("_own") < F.col("_copy"), F.lit(False))
            exact = (exact.join(own, "url_key", "left").join(copy, "duplicate_of", "left")).where(
                ~shallower
            )
        dropped = dropped.select("url_key").unionByName(exact.select("url_key"))
    copies = dropped.select(F.col("url_key").alias("src_key"))
    return links.join(copies, "src_key", "left_anti")


def key_collisions(targets: DataFrame, known: DataFrame) -> DataFrame:
    """Target URLs whose url_key a known URL has under another URL: a collision of the 64-bit
    key (about 3 pairs expected in 10^10 URLs, docs/scale.md). The frontier's anti-joins are on
    the key, so such a URL is taken as known and never crawled (no state is shared: only
    fetched URLs reach crawldb's MERGE); parse counts and logs them, so the loss is not silent.

    In: targets (dst_key, dst_url: link targets, sitemap entries); known (url_key, url:
    crawldb's URLs and the generation's fetched ones). Out: dst_key, dst_url, known_url, one
    row per colliding pair."""
    wanted = targets.select("dst_key", "dst_url").distinct()
    held = rows_of(known.select("url_key", "url"), wanted, "url_key", key="dst_key")
    return (
        wanted.join(held.withColumnRenamed("url_key", "dst_key"), "dst_key")
        .where(F.col("dst_url") != F.col("url"))
        .select("dst_key", "dst_url", F.col("url").alias("known_url"))
        .distinct()
    )


def next_frontier(
    links: DataFrame,
    pages: DataFrame,
    known: DataFrame,
    gen: int,
    cash: DataFrame | None = None,
) -> DataFrame:
    """Link targets -> frontier rows of generation gen + 1 (reason "link"): the targets not
    known, and the known ones these links reach in fewer links than their recorded depth
    (an offer: plan lowers their depth, crawllib.transforms.depth).

    In: links (src_key, src_url, dst_key, dst_url, dst_host), pages of gen (url_key, depth),
    known URLs (url_key, depth: crawldb's, and the URLs fetched in gen: those the fetch
    followed are not in crawldb before update); cash (dst_key, cash:
    crawllib.transforms.priority.link_cash). Out: frontier columns; one row per dst_key;
    depth = the shallowest source page's depth + 1; source_url = the smallest src_url among
    those shallowest sources; score = its cash (null without ``cash``).
    """
    depths = pages.select(F.col("url_key").alias("src_key"), F.col("depth").alias("src_depth"))
    targets = (
        links.join(depths, on="src_key", how="inner")
        .groupBy("dst_key")
        .agg(
            F.min(F.struct("src_depth", "src_url")).alias("source"),
            F.min("dst_url").alias("dst_url"),
            F.min("dst_host").alias("dst_host"),
        )
    )
    new = unknown_or_shallower(targets, known, "dst_key", F.col("source.src_depth") + 1)
    if cash is None:
        new = new.withColumn("cash", F.lit(None).cast("double"))
    else:
        new = new.join(cash.select("dst_key", "cash"), "dst_key", "left")
    return new.select(
        *columns_of(
            FRONTIER,
            gen=F.lit(gen + 1),
            url=F.col("dst_url"),
            url_key=F.col("dst_key"),
            host=F.col("dst_host"),
            domain=registered_domain_udf(F.col("dst_host")),
            depth=F.col("source.src_depth") + 1,
            source_url=F.col("source.src_url"),
            reason=F.lit(FrontierReason.LINK),
            discovered_at=F.current_timestamp(),
            score=F.col("cash"),
            redirects=F.lit(None),
        )
    )


def sitemap_frontier(
    sitemaps: DataFrame, known: DataFrame, gen: int, link_weight: float = 1.0
) -> DataFrame:
    """URLs the sitemaps of gen list that are not known -> frontier rows of gen + 1 (reason
    "sitemap", depth 1: one step from the site's root, like a link of its home page), and
    the known ones at a greater depth (an offer, as :func:`next_frontier`'s).

    In: sitemaps rows of gen (url, fetched_at, entries); known (url_key, depth: as for
    :func:`next_frontier`, plus the link targets already in the next frontier). Out: frontier
    columns, one row per url_key: source_url = the smallest sitemap URL listing it,
    discovered_at = that sitemap's fetch time (a rerun writes the same rows), score = its
    highest sitemap ``priority`` (0.5 when none says) times ``link_weight`` (plan passes
    generate.internal_link_weight: a listing is the site's own link to the URL).
    """
    entries = sitemaps.select(
        F.col("url").alias("source_url"),
        F.col("fetched_at").alias("discovered_at"),
        F.explode("entries").alias("e"),
    ).select("e.url_key", "e.url", "e.host", "e.priority", "source_url", "discovered_at")
    first = F.min(F.struct("source_url", "discovered_at", "url", "host"))
    listed = (
        entries.groupBy("url_key")
        .agg(first.alias("first"), F.max("priority").alias("priority"))
        .select("url_key", "first.*", "priority")
    )
    new = unknown_or_shallower(listed, known, "url_key", F.lit(1))
    return new.select(
        *columns_of(
            FRONTIER,
            gen=F.lit(gen + 1),
            domain=registered_domain_udf(F.col("host")),
            depth=F.lit(1),
            reason=F.lit(FrontierReason.SITEMAP),
            score=F.coalesce(F.col("priority"), F.lit(0.5)) * F.lit(link_weight),
            redirects=F.lit(None),
        )
    )
