"""Parse rules, as SQL: extracted pages -> texts and links rows, duplicates, the next
generation's frontier.

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

from crawllib.config import Config
from crawllib.core.vocab import STATED_DUPLICATES, DuplicateKind, FrontierReason
from crawllib.store.schemas import FRONTIER, LINK, LINKS, TEXTS, select_list
from crawllib.transforms.depth import unknown_or_shallower
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.sqltext import is_in, lit

# What identifies a page in its extracted rows (domain and surt: the pages row's, carried to
# its texts row): crawllib.engine.partition.PAGE_KEYS. An extracted page: those and the
# EXTRACTED fields (links: array<LINK>), crawllib.engine.partition.EXTRACTED_PAGE.


def texts_of(extracted: str = "{extracted}") -> str:
    """Extracted pages -> rows of the texts table, not yet marked as duplicates."""
    blank = {"duplicate_of": "NULL", "duplicate_kind": "NULL", "cluster": "url_key"}
    return f"SELECT {select_list(TEXTS, **blank)} FROM {extracted}"


# What duplicate marking reads of a text (never the text itself): marking a generation's texts
# on these columns keeps its joins and caches narrow, whatever the pages' size.
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


def _marked(columns: tuple[str, ...], first: str, kind: str) -> str:
    """A select list of ``columns`` with duplicate_of / duplicate_kind set from ``first``
    (struct gen, url_key) where empty and it names another URL."""
    is_dup = f"(duplicate_of IS NULL AND {first} IS NOT NULL AND {first}.url_key != url_key)"
    changed = {
        "duplicate_of": f"CASE WHEN {is_dup} THEN {first}.url_key ELSE duplicate_of END",
        "duplicate_kind": f"CASE WHEN {is_dup} THEN {lit(kind)} ELSE duplicate_kind END",
    }
    return ", ".join(f"{changed[c]} AS `{c}`" if c in changed else f"`{c}`" for c in columns)


def _not_stated_duplicate() -> str:
    """A page that names another URL its canonical, or a soft 404, is no first copy of
    anything (else two pages could each be the other's duplicate)."""
    return f"coalesce(NOT {is_in('duplicate_kind', STATED_DUPLICATES)}, TRUE)"


def _has_text(texts: str) -> str:
    return (
        f"SELECT * FROM {texts} WHERE error IS NULL AND text_chars > 0 AND content_hash IS NOT "
        f"NULL AND {_not_stated_duplicate()}"
    )


def mark_soft_404(
    k: int, columns: tuple[str, ...], texts: str = "{texts}", probes: str = "{probes}"
) -> str:
    """Mark soft 404s: pages whose text is their host's answer to a URL no page links to (its
    latest soft-404 probe answered 2xx with a text: crawllib.engine.engine), the same text
    (content_hash) or within SimHash distance ``k``; duplicate_of = the probe URL's url_key,
    duplicate_kind "soft_404". Rows already marked keep their mark.

    In: texts ``columns`` (url_key, host, content_hash, simhash, text_chars, error,
    duplicate_of, duplicate_kind among them); probes rows (host, url, fetched_at, http_status,
    text_chars, content_hash, simhash). Out: the same columns."""
    answered = (
        f"SELECT * FROM {probes} WHERE http_status BETWEEN 200 AND 299 AND simhash IS NOT NULL "
        "AND text_chars > 0"
    )
    latest = (
        "SELECT host, max_by(struct(url, content_hash, simhash), fetched_at) AS _probe FROM "
        f"({rows_of(f'({answered})', texts, 'host')}) GROUP BY host"
    )
    soft = (
        "(_probe IS NOT NULL AND duplicate_of IS NULL AND error IS NULL AND text_chars > 0 AND "
        "(content_hash = _probe.content_hash OR "
        f"bit_count(simhash ^ _probe.simhash) <= {k}))"
    )
    changed = {
        "duplicate_of": f"CASE WHEN {soft} THEN crawl_url_key(_probe.url) ELSE duplicate_of END",
        "duplicate_kind": (
            f"CASE WHEN {soft} THEN {lit(DuplicateKind.SOFT_404)} ELSE duplicate_kind END"
        ),
    }
    select = ", ".join(f"{changed[c]} AS `{c}`" if c in changed else f"t.`{c}`" for c in columns)
    return f"SELECT {select} FROM {texts} t LEFT JOIN ({latest}) p ON t.host = p.host"


def mark_canonical(columns: tuple[str, ...], texts: str = "{texts}") -> str:
    """Mark the pages that name another URL their canonical (``canonical_url``, set by the
    extraction only when it is another URL) duplicates of it: duplicate_of = its url_key,
    duplicate_kind "canonical", before any exact or near mark (the site's own word wins).
    In/out: texts ``columns`` (canonical_url, duplicate_of, duplicate_kind among them)."""
    named = "(canonical_url IS NOT NULL AND duplicate_of IS NULL)"
    changed = {
        "duplicate_of": f"CASE WHEN {named} THEN crawl_url_key(canonical_url) ELSE duplicate_of END",
        "duplicate_kind": (
            f"CASE WHEN {named} THEN {lit(DuplicateKind.CANONICAL)} ELSE duplicate_kind END"
        ),
    }
    select = ", ".join(f"{changed[c]} AS `{c}`" if c in changed else f"`{c}`" for c in columns)
    return f"SELECT {select} FROM {texts}"


def mark_exact_duplicates(
    columns: tuple[str, ...], texts_new: str = "{texts_new}", texts_prior: str = "{texts_prior}"
) -> str:
    """Mark texts whose extracted text an earlier page already has, exactly.

    In: texts_new (``columns``, MARK_COLUMNS at least; one generation) and texts_prior (gen,
    url_key, content_hash, text_chars, error, duplicate_kind of earlier generations). Out:
    texts_new's columns, with duplicate_of = url_key of the first copy and duplicate_kind =
    "exact" (rows already marked are kept). Errors and empty texts are never duplicates."""
    new = f"SELECT content_hash, gen, url_key FROM ({_has_text(texts_new)})"
    # Only earlier texts with one of the generation's hashes can be a first copy: the rest of
    # the crawl's history is scanned (three narrow columns) but not shuffled or aggregated.
    prior = rows_of(
        f"(SELECT content_hash, gen, url_key FROM ({_has_text(texts_prior)}))",
        f"({new})",
        "content_hash",
    )
    firsts = (
        "SELECT content_hash AS _hash, min(struct(gen, url_key)) AS _first FROM "
        f"({new} UNION ALL {prior}) GROUP BY content_hash"
    )
    joined = f"SELECT * FROM {texts_new} n LEFT JOIN ({firsts}) f ON n.content_hash = f._hash"
    return f"SELECT {_marked(columns, '_first', DuplicateKind.EXACT)} FROM ({joined})"


def lsh_bands(k: int, simhash: str = "simhash") -> list[tuple[int, str]]:
    """(band, SQL value) of each band of a 64-bit SimHash: crawllib.content.hashing.lsh_bands
    in built-ins. k + 1 contiguous bands from the low bits, the first ``64 % (k + 1)`` one bit
    wider; a single band (k = 0) is the signed hash itself."""
    if not 0 <= k <= 63:
        raise ValueError(f"distance must be in 0..63, got {k}")
    count = k + 1
    if count == 1:
        return [(0, simhash)]
    width, extra = divmod(64, count)
    bands, shift = [], 0
    for index in range(count):
        band_width = width + (1 if index < extra else 0)
        mask = (1 << band_width) - 1
        # an arithmetic shift: the mask drops the sign's copies (shift + width <= 64)
        value = f"CAST((shiftright({simhash}, {shift}) & {mask}) AS bigint)"
        bands.append((index, value))
        shift += band_width
    return bands


def _with_bands(query: str, k: int, columns: str) -> str:
    """Every row of ``query`` once per LSH band: ``columns``, band, value. One read of
    ``query`` (an explode of the row's bands), not one per band: on Spark each read of a Delta
    table is a job of its own that lists the table's files."""
    bands = ", ".join(
        f"named_struct('band', {band}, 'value', {value})" for band, value in lsh_bands(k)
    )
    return (
        f"SELECT {columns}, _b.band AS band, _b.value AS value FROM "
        f"(SELECT *, explode(array({bands})) AS _b FROM ({query}))"
    )


def mark_near_duplicates(
    columns: tuple[str, ...],
    k: int,
    min_text_chars: int = 0,
    texts_new: str = "{texts_new}",
    texts_prior: str = "{texts_prior}",
) -> str:
    """Mark texts within SimHash Hamming distance k of an earlier page's text.

    In: texts_new (``columns``, MARK_COLUMNS at least), texts_prior (gen, url_key, simhash,
    text_chars, error, duplicate_kind of earlier generations), k and the shortest text that
    takes part (shorter ones, errors and rows without text are left out on both sides). Out:
    texts_new's columns; rows not yet marked get duplicate_of = url_key of the first (lowest
    (gen, url_key)) text within distance k, duplicate_kind = "near".

    Work stays far from all pairs: every distinct SimHash is represented by its first text
    (so a thousand exact copies cost one probe), and pairs are only those sharing a band."""

    def eligible(texts: str) -> str:
        return (
            f"SELECT gen, url_key, simhash FROM {texts} WHERE error IS NULL AND simhash IS NOT "
            f"NULL AND text_chars >= {max(min_text_chars, 1)} AND {_not_stated_duplicate()}"
        )

    new = eligible(f"(SELECT * FROM {texts_new} WHERE duplicate_of IS NULL)")
    probes = f"SELECT DISTINCT simhash FROM ({new})"
    a = _with_bands(probes, k, "simhash")
    # Only earlier texts sharing a band with a probe can be its neighbours (and every text of
    # such a SimHash does): the rest of the history is scanned, not shuffled or aggregated.
    prior_banded = _with_bands(eligible(texts_prior), k, "gen, url_key, simhash")
    prior = f"SELECT DISTINCT gen, url_key, simhash FROM ({rows_of(f'({prior_banded})', f'({a})', ['band', 'value'])})"
    firsts = (
        "SELECT simhash, min(struct(gen, url_key)) AS first_copy FROM "
        f"({eligible(texts_new)} UNION ALL {prior}) GROUP BY simhash"
    )
    b = _with_bands(firsts, k, "simhash, first_copy")
    neighbours = (
        "SELECT a.simhash, b.first_copy, bit_count(a.simhash ^ b.simhash) AS distance "
        f"FROM ({a}) a JOIN ({b}) b ON a.band = b.band AND a.value = b.value"
    )
    best = (
        "SELECT n.url_key AS _key, min(x.first_copy) AS _first FROM "
        f"({new}) n JOIN ({neighbours}) x ON n.simhash = x.simhash WHERE x.distance <= {k} "
        "AND x.first_copy < struct(n.gen, n.url_key) GROUP BY n.url_key"
    )
    joined = f"SELECT * FROM {texts_new} t LEFT JOIN ({best}) b ON t.url_key = b._key"
    return f"SELECT {_marked(columns, '_first', DuplicateKind.NEAR)} FROM ({joined})"


CLUSTER_PASSES = 3  # copies of copies within one generation followed this deep


def cluster_steps(
    marks: str = "{marks}", texts_prior: str = "{texts_prior}", texts_gen: str = "{texts_gen}"
) -> str:
    """A generation's duplicate marks -> the same with ``cluster``, one step along the chain
    of copies: the cluster of the copy each ``duplicate_of`` names, looked up in gen first (a
    row of gen is what that page is now: unmarked, a first copy, its own cluster; marked, a
    copy itself, which :func:`cluster_chains` follows), else in its latest earlier row, else
    it is the cluster itself (a canonical URL not fetched yet).

    In: marks (url_key, duplicate_of, duplicate_kind of gen's duplicates); texts_prior (gen,
    url_key, duplicate_of, cluster of earlier generations; cluster is null in rows written
    before the column: their cluster is their duplicate_of, else themselves); texts_gen
    (url_key of gen's texts). Out: url_key, duplicate_of, duplicate_kind, cluster."""
    earlier = (
        "SELECT url_key AS _key, max_by(coalesce(cluster, duplicate_of, url_key), gen) AS _root "
        f"FROM ({rows_of(texts_prior, marks, key='duplicate_of')}) GROUP BY url_key"
    )
    current = f"SELECT DISTINCT url_key AS _key FROM {texts_gen}"
    return (
        "SELECT m.url_key, m.duplicate_of, m.duplicate_kind, CASE WHEN c._key IS NOT NULL "
        "THEN m.duplicate_of ELSE coalesce(e._root, m.duplicate_of) END AS cluster "
        f"FROM {marks} m LEFT JOIN ({current}) c ON c._key = m.duplicate_of "
        f"LEFT JOIN ({earlier}) e ON e._key = m.duplicate_of"
    )


def cluster_chains(passes: int = CLUSTER_PASSES, steps: str = "{steps}") -> str:
    """:func:`cluster_steps`'s rows -> the same with each cluster followed through the
    generation's own copies ``passes`` deep: the ``cluster`` of every copy, across generations
    and hosts, is the url_key of the first copy at the end of its chain (a near copy of a near
    copy, an exact copy of a page naming its canonical ...). Deeper chains within one
    generation end at the copy reached. The first copy of a cluster is its own cluster
    (:func:`with_duplicate_marks`). In and out: url_key, duplicate_of, duplicate_kind,
    cluster."""
    cluster = "s.cluster"
    joins = []
    for n in range(1, passes):
        joins.append(f"LEFT JOIN {steps} s{n} ON s{n}.url_key = {cluster}")
        cluster = f"coalesce(s{n}.cluster, {cluster})"
    return (
        f"SELECT s.url_key, s.duplicate_of, s.duplicate_kind, {cluster} AS cluster "
        f"FROM {steps} s {' '.join(joins)}"
    )


def with_duplicate_marks(texts: str = "{texts}", marks: str = "{marks}") -> str:
    """Texts rows (one generation, not marked) -> the same rows with their duplicate marks and
    cluster (a first copy is its own). In: texts columns; marks (url_key, duplicate_of,
    duplicate_kind, cluster: :func:`cluster_chains`) of the rows that are duplicates. Out:
    texts columns."""
    given = {
        **{n: f"t.`{n}`" for n in TEXTS.names},
        "duplicate_of": "m.duplicate_of",
        "duplicate_kind": "m.duplicate_kind",
        "cluster": "coalesce(m.cluster, t.url_key)",
    }
    return (
        f"SELECT {select_list(TEXTS, **given)} FROM {texts} t LEFT JOIN {marks} m "
        "ON t.url_key = m.url_key"
    )


def links_table(extracted: str = "{extracted}") -> str:
    """Extracted pages -> rows of the links table: a page's links are one per target already
    (crawllib.content.extract.extract_record), so this is a narrow explode, no shuffle.
    In: gen, slice, url_key, url, links. Out: links columns."""
    fields = {f.name: f"_l.{f.name}" for f in LINK.fields}
    given = {"src_key": "url_key", "src_url": "url", **fields}
    return (
        f"SELECT {select_list(LINKS, **given)} FROM (SELECT gen, slice, url_key, url, "
        f"explode(links) AS _l FROM {extracted})"
    )


def followed_links(
    cfg: Config,
    depths: bool = True,
    links: str = "{links}",
    marks: str = "{marks}",
    depth_rel: str = "{depths}",
) -> str:
    """The links whose targets are queued and passed cash: not those of soft 404s, nor (unless
    parse.follow_duplicate_links) those of exact duplicates (the page they copy has the same
    links, and is fetched), unless the duplicate is fewer links from a seed than its first
    copy: its links are then the shortest path to their targets (depth is the shortest path).

    In: links rows; marks (url_key, duplicate_of, duplicate_kind) of the generation's pages;
    with ``depths``, ``depth_rel`` (url_key, depth) of the generation's pages and of their
    first copies (without it every exact duplicate's links are dropped). Out: links rows."""
    dropped = [f"SELECT url_key FROM {marks} WHERE duplicate_kind = {lit(DuplicateKind.SOFT_404)}"]
    if not cfg.parse.follow_duplicate_links:
        exact = f"SELECT url_key, duplicate_of FROM {marks} WHERE duplicate_kind = {lit(DuplicateKind.EXACT)}"
        if depths:
            least = f"SELECT url_key, min(depth) AS depth FROM {depth_rel} GROUP BY url_key"
            exact = (
                f"SELECT e.url_key FROM ({exact}) e LEFT JOIN ({least}) o ON e.url_key = o.url_key "
                f"LEFT JOIN ({least}) c ON e.duplicate_of = c.url_key "
                "WHERE NOT coalesce(o.depth < c.depth, FALSE)"
            )
        else:
            exact = f"SELECT url_key FROM ({exact})"
        dropped.append(exact)
    copies = " UNION ALL ".join(dropped)
    return f"SELECT l.* FROM {links} l LEFT ANTI JOIN ({copies}) d ON l.src_key = d.url_key"


def key_collisions(targets: str = "{targets}", known: str = "{known}") -> str:
    """Target URLs whose url_key a known URL has under another URL: a collision of the 64-bit
    key (about 3 pairs expected in 10^10 URLs, docs/scale.md). The frontier's anti-joins are on
    the key, so such a URL is taken as known and never crawled (no state is shared: only
    fetched URLs reach crawldb's MERGE); update counts and logs them, so the loss is not
    silent.

    In: targets (dst_key, dst_url: link targets, sitemap entries); known (url_key, url:
    crawldb's URLs and the generation's fetched ones). Out: dst_key, dst_url, known_url, one
    row per colliding pair."""
    wanted = f"(SELECT DISTINCT dst_key, dst_url FROM {targets})"
    held = rows_of(f"(SELECT url_key, url FROM {known})", wanted, "url_key", key="dst_key")
    return (
        f"SELECT DISTINCT w.dst_key, w.dst_url, h.url AS known_url FROM {wanted} w JOIN "
        f"({held}) h ON w.dst_key = h.url_key WHERE w.dst_url != h.url"
    )


def next_frontier(
    gen: int,
    cash: bool = False,
    links: str = "{links}",
    pages: str = "{pages}",
    known: str = "{known}",
    cash_rel: str = "{cash}",
) -> str:
    """Link targets -> frontier rows of generation gen + 1 (reason "link"): the targets not
    known, and the known ones these links reach in fewer links than their recorded depth
    (an offer: plan lowers their depth, crawllib.transforms.depth).

    In: links (src_key, src_url, dst_key, dst_url, dst_host), pages of gen (url_key, depth),
    known URLs (url_key, depth: crawldb's, and the URLs fetched in gen: those the fetch
    followed are not in crawldb before update); with ``cash``, ``cash_rel`` (dst_key, cash:
    crawllib.transforms.priority.link_cash). Out: frontier columns; one row per dst_key;
    depth = the shallowest source page's depth + 1; source_url = the smallest src_url among
    those shallowest sources; score = its cash (null without ``cash``)."""
    targets = (
        "SELECT l.dst_key, min(named_struct('src_depth', p.depth, 'src_url', l.src_url)) AS source, "
        f"min(l.dst_url) AS dst_url, min(l.dst_host) AS dst_host FROM {links} l JOIN "
        f"(SELECT url_key, depth FROM {pages}) p ON l.src_key = p.url_key GROUP BY l.dst_key"
    )
    new = unknown_or_shallower(f"({targets})", known, "dst_key", "_x.source.src_depth + 1")
    if cash:
        new = f"SELECT n.*, c.cash FROM ({new}) n LEFT JOIN {cash_rel} c ON n.dst_key = c.dst_key"
    else:
        new = f"SELECT *, CAST(NULL AS double) AS cash FROM ({new})"
    given = {
        "gen": lit(gen + 1),
        "url": "dst_url",
        "url_key": "dst_key",
        "host": "dst_host",
        "domain": "crawl_domain(dst_host)",
        "depth": "source.src_depth + 1",
        "source_url": "source.src_url",
        "reason": lit(FrontierReason.LINK),
        "discovered_at": "current_timestamp()",
        "score": "cash",
        "redirects": "NULL",
    }
    return f"SELECT {select_list(FRONTIER, **given)} FROM ({new})"


def sitemap_frontier(
    gen: int, link_weight: float = 1.0, sitemaps: str = "{sitemaps}", known: str = "{known}"
) -> str:
    """URLs the sitemaps of gen list that are not known -> frontier rows of gen + 1 (reason
    "sitemap", depth 1: one step from the site's root, like a link of its home page), and
    the known ones at a greater depth (an offer, as :func:`next_frontier`'s).

    In: sitemaps rows of gen (url, fetched_at, entries); known (url_key, depth: as for
    :func:`next_frontier`, plus the link targets already in the next frontier). Out: frontier
    columns, one row per url_key: source_url = the smallest sitemap URL listing it,
    discovered_at = that sitemap's fetch time (a rerun writes the same rows), score = its
    highest sitemap ``priority`` (0.5 when none says) times ``link_weight`` (update passes
    generate.internal_link_weight: a listing is the site's own link to the URL)."""
    entries = (
        "SELECT e.url_key AS url_key, e.url AS url, e.host AS host, e.priority AS priority, "
        "source_url, discovered_at FROM (SELECT url AS source_url, fetched_at AS "
        f"discovered_at, explode(entries) AS e FROM {sitemaps})"
    )
    listed = (
        "SELECT url_key, min(struct(source_url, discovered_at, url, host)) AS first, "
        f"max(priority) AS priority FROM ({entries}) GROUP BY url_key"
    )
    new = unknown_or_shallower(f"({listed})", known, "url_key", "1")
    given = {
        "gen": lit(gen + 1),
        "url": "first.url",
        "host": "first.host",
        "domain": "crawl_domain(first.host)",
        "depth": "1",
        "source_url": "first.source_url",
        "reason": lit(FrontierReason.SITEMAP),
        "discovered_at": "first.discovered_at",
        "score": f"coalesce(priority, 0.5) * {lit(float(link_weight))}",
        "redirects": "NULL",
    }
    return f"SELECT {select_list(FRONTIER, **given)} FROM ({new})"
