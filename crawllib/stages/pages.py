"""The generation's pages, for update: what the fetch did not extract (all of them when
``fetch.extract`` is off, or to re-extract: ``crawl parse --force``) and the duplicate marks.

Raw pages are kept, so extraction can be rerun from them without refetching: the re-extracted
texts and links replace the generation's rows (links first: a texts row is what tells a
rerun that a page is extracted). Duplicates are judged against texts of generations before N
only, so rerunning N never sees its own earlier output; marking reads only MARK_COLUMNS and
is kept before the writes that use it.
"""

from __future__ import annotations

import logging

from crawllib.core.vocab import Directive, DuplicateKind
from crawllib.stages.base import StageRun
from crawllib.stages.traps import TRAPS_UPDATE
from crawllib.store.db import ONCE_PER_GEN, Rel
from crawllib.transforms.aliases import ALIASES_UPDATE, alias_counts, alias_hosts
from crawllib.transforms.parse import (
    MARK_COLUMNS,
    cluster_chains,
    cluster_steps,
    key_collisions,
    links_table,
    mark_canonical,
    mark_exact_duplicates,
    mark_near_duplicates,
    mark_soft_404,
    with_duplicate_marks,
)
from crawllib.transforms.sqltext import lit
from crawllib.transforms.traps import pattern_counts, trapped_patterns

log = logging.getLogger(__name__)


def write_links(run: StageRun, extracted: Rel, keep_stored: bool) -> None:
    """links of gen: those of the pages just extracted, and (keep_stored) those stored of the
    other pages (the fetch's)."""
    db = run.db
    links = db.sql(links_table(), extracted=extracted)
    if keep_stored:
        links = db.sql(
            "SELECT s.* FROM {stored} s LEFT ANTI JOIN {extracted} e ON s.src_key = e.url_key "
            "UNION ALL SELECT * FROM {links}",
            stored=db.table("links", f"gen = {run.gen}"),
            extracted=extracted,
            links=links,
        )
    db.replace_where(db.keep(links), "links", f"gen = {run.gen}")


def unmarked(texts: str = "{texts}") -> str:
    """Texts rows without their duplicate marks."""
    return (
        "SELECT * EXCEPT (duplicate_of, duplicate_kind), CAST(NULL AS bigint) AS duplicate_of, "
        f"CAST(NULL AS string) AS duplicate_kind FROM {texts}"
    )


def duplicate_marks(run: StageRun, texts: Rel) -> Rel:
    """The duplicate marks of gen's texts (url_key, duplicate_of, duplicate_kind and cluster of
    the duplicates), judged against earlier generations only, computed once and kept.

    Marked on MARK_COLUMNS only, then joined back to the rows: the text never goes through
    the duplicate joins or a cache of its own. Near-duplicate marking reads its input three
    times; the exact pass is kept so it runs once."""
    db, cfg = run.db, run.cfg
    columns = (*MARK_COLUMNS, "host", "canonical_url")
    prior = db.table(
        "texts",
        f"gen < {run.gen}",
        columns=[
            "gen",
            "url_key",
            "content_hash",
            "simhash",
            "text_chars",
            "error",
            "duplicate_kind",
            "duplicate_of",
            "cluster",
        ],
    )
    probes = db.table("probes", f"gen <= {run.gen}")
    # kept: the marks below read the generation's rows eight times, and on Spark each read of
    # the Delta table is a job of its own listing its files
    narrow = db.keep(
        db.sql(f"SELECT {', '.join(f'`{c}`' for c in columns)} FROM ({unmarked()})", texts=texts)
    )
    canonical = db.sql(mark_canonical(columns), texts=narrow)
    soft = db.sql(
        mark_soft_404(cfg.parse.near_dup_distance, columns), texts=canonical, probes=probes
    )
    exact = db.keep(db.sql(mark_exact_duplicates(MARK_COLUMNS), texts_new=soft, texts_prior=prior))
    marks = db.keep(
        db.sql(
            "SELECT url_key, duplicate_of, duplicate_kind FROM ("
            + mark_near_duplicates(
                MARK_COLUMNS, cfg.parse.near_dup_distance, cfg.parse.min_text_chars
            )
            + ") WHERE duplicate_of IS NOT NULL",
            texts_new=exact,
            texts_prior=prior,
        )
    )
    # each copy's cluster: kept, as the chains read it once per pass
    steps = db.keep(db.sql(cluster_steps(), marks=marks, texts_prior=prior, texts_gen=narrow))
    clustered = db.keep(db.sql(cluster_chains(), steps=steps))
    for rel in (steps, marks, exact, narrow):
        db.drop(rel)
    return clustered


def write_texts(
    run: StageRun,
    texts: Rel,
    marks: Rel,
    replace: bool,
    stored: Rel | None = None,
) -> dict[str, int]:
    """texts of gen (``texts``: unmarked, or marked by an earlier run) with ``marks``
    (:func:`duplicate_marks`); their counts. replace: the table may hold rows of gen (the
    fetch's, an earlier run's), else they are appended. stored: given when ``texts`` are
    exactly the stored rows of gen (nothing was extracted now): if nothing is marked now and
    none of them is marked, they are already what would be written, and are not rewritten."""
    db, gen = run.db, run.gen
    marked = db.keep(
        db.sql(with_duplicate_marks(), texts=db.sql(unmarked(), texts=texts), marks=marks)
    )
    kinds = {
        "exact_duplicates": DuplicateKind.EXACT,
        "near_duplicates": DuplicateKind.NEAR,
        "canonical_duplicates": DuplicateKind.CANONICAL,
        "soft_404": DuplicateKind.SOFT_404,
    }
    counted = ", ".join(
        [
            "count(*) AS pages",
            "count_if(text_chars > 0) AS texts",
            "count_if(error IS NOT NULL) AS extract_errors",
            *[f"count_if(duplicate_kind = {lit(k)}) AS {name}" for name, k in kinds.items()],
            *[
                f"count_if(array_contains(directives, {lit(d)})) AS {d}"
                for d in (Directive.NOINDEX, Directive.NOFOLLOW)
            ],
            "count_if(tdm_reserved) AS tdm_reserved",
        ]
    )
    row = db.one_row(db.sql(f"SELECT {counted} FROM {{m}}", m=marked))
    counts = {name: int(value or 0) for name, value in row.items()}
    duplicates = sum(counts[k] for k in kinds)
    as_stored = (
        stored is not None
        and not duplicates
        and db.is_empty(db.sql("SELECT 1 FROM {s} WHERE duplicate_of IS NOT NULL", s=stored))
    )
    if as_stored:
        log.info("parse gen %d: no duplicates; the fetch's texts rows stay as they are", gen)
    elif replace:
        db.replace_where(marked, "texts", f"gen = {gen}")
    else:
        db.append(marked, "texts")
    db.drop(marked)
    return counts


def count_patterns(run: StageRun, pages: Rel, marks: Rel, known: Rel) -> dict[str, int]:
    """Add gen's pages and duplicates per host and URL pattern to the traps table, and its
    exact duplicates per pair of hosts to the aliases table (once: a rerun adds nothing; the
    aliases MERGE only when there are any), from which plan judges patterns traps and hosts
    aliases; the counts of patterns judged traps and of hosts judged aliases now. In: pages of
    gen (url_key, url, host); marks; known (url_key, host: the crawldb rows of every URL a
    mark names)."""
    db, gen = run.db, run.gen
    owners = db.sql(
        "SELECT url_key, host FROM {pages} UNION ALL SELECT url_key, host FROM {known}",
        pages=pages,
        known=known,
    )
    db.merge(
        db.sql(pattern_counts(gen), pages=pages, marks=marks),
        "traps",
        keys=["host", "pattern"],
        update=TRAPS_UPDATE,
        update_condition=ONCE_PER_GEN,
    )
    copies = db.keep(db.sql(alias_counts(gen), marks=marks, hosts=owners))
    if not db.is_empty(copies):
        db.merge(
            copies,
            "aliases",
            keys=["host", "of_host"],
            update=ALIASES_UPDATE,
            update_condition=ONCE_PER_GEN,
        )
    db.drop(copies)
    # one query for both counts: one read of each table
    row = db.one_row(
        db.sql(
            f"SELECT * FROM (SELECT count(*) AS trap_patterns FROM ({trapped_patterns(run.cfg)})) "
            f"CROSS JOIN (SELECT count(*) AS alias_hosts FROM ({alias_hosts(run.cfg)}))",
            traps=db.table("traps"),
            aliases=db.table("aliases"),
        )
    )
    return {name: int(value or 0) for name, value in row.items()}


def count_collisions(run: StageRun, links: Rel, sitemaps: Rel, known: Rel) -> int:
    """The link targets and sitemap entries of gen whose url_key a known URL has under another
    URL (transforms.parse.key_collisions), logged with a few examples."""
    db = run.db
    targets = db.sql(
        "SELECT dst_key, dst_url FROM {links} UNION ALL SELECT e.url_key AS dst_key, e.url AS "
        "dst_url FROM (SELECT explode(entries) AS e FROM {sitemaps})",
        links=links,
        sitemaps=sitemaps,
    )
    collisions = db.keep(db.sql(key_collisions(), targets=targets, known=known))
    count = db.count(collisions)
    if count:
        examples = [f"{r['dst_url']} (known: {r['known_url']})" for r in db.collect(collisions, 5)]
        log.warning(
            "parse gen %d: %d URLs share their url_key with another URL and are not crawled: %s",
            run.gen,
            count,
            "; ".join(examples),
        )
    db.drop(collisions)
    return count
