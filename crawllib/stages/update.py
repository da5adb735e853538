"""update(N): everything a generation's fetch leads to, from its rows read once each.

- texts of N: what the fetch did not extract is extracted from the raw pages
  (crawllib.stages.pages), duplicates are marked against earlier generations (exact, near,
  canonical, soft 404), the rows rewritten only when a mark changes them;
- frontier: rows of N + 1 for link targets, sitemap entries and redirect targets that crawldb
  does not hold, or holds deeper (offers: crawllib.transforms.depth), and rows of N for the
  URLs the fetch followed in its tasks;
- crawldb: one MERGE of every URL fetched in N (the status mapping of
  crawllib.transforms.update) and of the cash N's links passed known URLs (priority), then,
  in a generation that read sitemaps, their hints;
- traps and aliases: N's pages and duplicates per URL pattern and pair of hosts.

crawldb is looked up once, for every key these need (the fetched URLs, the link and
redirect targets, sitemap entries, the first copies duplicates name): the rows are
kept and every step joins those.

Idempotent: texts and the frontier rows of N + 1 are replaced on a rerun (a first run
appends; the followed rows of N are appended only where the frontier lacks them), the MERGEs
are guarded (:func:`crawllib.transforms.update.crawldb_update_guard`; traps and aliases
count a generation once), so a rerun writes the same rows and changes no crawldb row. Once
N + 1 is planned its frontier is kept as it is (StageRun.frontier_open).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

from crawllib.config import Config
from crawllib.core.vocab import (
    VISITED_OUTCOMES,
    ErrorKind,
    FrontierReason,
    Outcome,
    Stage,
    StageState,
    Status,
)
from crawllib.engine.partition import EXTRACTED_PAGE, ExtractTask
from crawllib.stages import pages as pages_mod
from crawllib.stages.base import StageResult, StageRun
from crawllib.stages.fetch import FetchResult
from crawllib.store import generations
from crawllib.store.db import Db, Rel
from crawllib.store.schemas import TEXTS
from crawllib.transforms.depth import redirect_edges
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.parse import (
    followed_links,
    next_frontier,
    sitemap_frontier,
    texts_of,
)
from crawllib.transforms.priority import link_cash, sources_of
from crawllib.transforms.sqltext import is_in, lit
from crawllib.transforms.update import (
    SITEMAP_HINTS_GUARD,
    SITEMAP_HINTS_UPDATE,
    VISIT_COUNTS,
    crawldb_merge_clauses,
    crawldb_updates,
    followed_frontier,
    redirect_frontier,
    score_updates,
    sitemap_hints,
    visit_counts,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class UpdateResult(StageResult):
    """urls: the URLs fetched in gen; fetched .. deferred: their crawldb status after the
    merge (so a rerun reports the same numbers; ``deferred``: queued again);
    redirects_queued: the frontier rows of gen + 1 for redirect targets. Visits that reached
    their page (ok, not_modified): ``new`` (a first visit), ``revisited`` (the page had a
    stored version), of them ``changed`` (its text differs) and ``unchanged`` (the same text,
    or ``not_modified``: a 304); too_many_redirects, bad_location: redirects of gen whose
    chain ended there (past fetch.max_redirects hops; a Location that is no http(s) URL).

    The generation's pages: pages (texts rows of gen), extracted (pages this run extracted:
    the rest the fetch did), texts (with non-empty text), extract_errors, exact_duplicates,
    near_duplicates, canonical_duplicates (pages naming another URL canonical), soft_404
    (pages whose text is their host's answer to a missing page: a probe's), nofollow (pages
    with that robots directive), tdm_reserved (pages reserving text and data mining rights);
    links: links rows of gen; new_frontier: frontier rows of gen + 1 (links, sitemaps,
    redirects); trap_patterns, alias_hosts: URL patterns judged traps and hosts judged aliases
    after this generation is counted; key_collisions: link targets and sitemap entries left
    out because a known URL has their url_key (transforms.parse.key_collisions)."""

    THROUGHPUT: ClassVar[str] = "urls"

    urls: int
    fetched: int
    duplicate: int
    noindex: int
    redirected: int
    gone: int
    failed: int
    dead: int
    robots_denied: int
    blocked: int
    deferred: int
    redirects_queued: int
    new: int
    revisited: int
    changed: int
    unchanged: int
    not_modified: int
    too_many_redirects: int
    bad_location: int
    pages: int = 0
    extracted: int = 0
    texts: int = 0
    extract_errors: int = 0
    exact_duplicates: int = 0
    near_duplicates: int = 0
    canonical_duplicates: int = 0
    soft_404: int = 0
    nofollow: int = 0
    tdm_reserved: int = 0
    links: int = 0
    new_frontier: int = 0
    trap_patterns: int = 0
    alias_hosts: int = 0
    key_collisions: int = 0


# The reasons a redirect chain ends with, counted (UpdateResult fields of the same names)
CHAIN_ENDS = (ErrorKind.TOO_MANY_REDIRECTS, ErrorKind.BAD_LOCATION)

# UpdateResult field -> the crawldb status it counts
_COUNTED_STATUS = {
    "fetched": Status.FETCHED,
    "duplicate": Status.DUPLICATE,
    "noindex": Status.NOINDEX,
    "redirected": Status.REDIRECTED,
    "gone": Status.GONE,
    "failed": Status.FAILED,
    "dead": Status.DEAD,
    "robots_denied": Status.ROBOTS_DENIED,
    "blocked": Status.BLOCKED,
    "deferred": Status.QUEUED,
}


def merge_sitemap_hints(db: Db, sitemaps: Rel, cfg: Config) -> None:
    """MERGE what ``sitemaps`` rows say (transforms.update.sitemap_hints) into crawldb's pages
    with a stored version, guarded so that a rerun changes nothing."""
    db.merge(
        db.sql(sitemap_hints(cfg), sitemaps=sitemaps),
        "crawldb",
        keys=["url_key"],
        update=SITEMAP_HINTS_UPDATE,
        insert=False,
        update_condition=SITEMAP_HINTS_GUARD,
        broadcast=True,
    )


def run(run: StageRun) -> UpdateResult:
    """Update crawldb, texts, the frontier, traps and aliases from generation ``run.gen``."""
    db, gen = run.db, run.gen
    fetches = db.keep(db.table("fetches", f"gen = {gen}"))
    sitemaps = db.keep(db.table("sitemaps", f"gen = {gen}"))
    kept = [fetches, sitemaps]
    try:
        if run.first and db.is_empty(fetches) and db.is_empty(sitemaps):
            return UpdateResult.nothing()  # nothing fetched: an idle generation
        texts, extracted, marks = _texts_and_marks(run)
        kept += [texts.narrow, marks]
        links = db.keep(db.table("links", f"gen = {gen}"))
        kept.append(links)
        known = db.keep(_known(run, fetches, links, sitemaps, marks))
        kept.append(known)
        crawled = db.sql(
            "SELECT url_key, url, depth FROM {known} UNION ALL SELECT url_key, url, depth "
            "FROM {fetches}",
            known=known,
            fetches=fetches,
        )
        outlinks = db.keep(
            db.sql(followed_links(run.cfg), links=links, marks=marks, depths=crawled)
        )
        kept.append(outlinks)
        sources = db.sql(sources_of(), texts=texts.narrow, crawldb=known)
        cash = db.keep(db.sql(link_cash(run.cfg), links=outlinks, sources=sources))
        kept.append(cash)
        pages = db.sql(
            f"SELECT url_key, url, host, depth FROM {{f}} WHERE outcome = {lit(Outcome.OK)}",
            f=fetches,
        )
        counts: dict[str, int] = {"extracted": extracted}
        for part in db.in_parallel(
            lambda: pages_mod.write_texts(run, texts.full, marks, texts.replace, texts.stored),
            lambda: _write_frontier(run, fetches, sitemaps, known, crawled, outlinks, cash),
            lambda: _merge_crawldb(run, fetches, sitemaps, texts.narrow, known, cash),
            lambda: pages_mod.count_patterns(run, pages, marks, known),
        ):
            counts.update(part)
        counts["links"] = db.count(links)
        counts["key_collisions"] = pages_mod.count_collisions(run, links, sitemaps, known)
        counts.update(_status_counts(run, fetches))
    finally:
        for rel in kept:
            db.drop(rel)
    fields = {f.name for f in dataclasses.fields(UpdateResult)}
    result = UpdateResult(**{k: v for k, v in counts.items() if k in fields})
    log.info("update gen %d: %s", gen, result)
    return result


@dataclasses.dataclass(frozen=True)
class _Texts:
    """The generation's texts rows: ``full`` (every column, for the write), ``narrow`` (what
    the MERGE and the cash need, with the marks; kept), whether the table may hold rows of gen
    (``replace``), and ``stored``: the stored rows, when nothing was extracted now
    (write_texts then rewrites them only when a mark changes)."""

    full: Rel
    narrow: Rel
    replace: bool
    stored: Rel | None


def _texts_and_marks(run: StageRun) -> tuple[_Texts, int, Rel]:
    """The generation's texts (extracting what the fetch did not: every page when forced to
    re-extract, ``crawl parse --force``), how many pages were extracted now, and the
    duplicate marks (kept)."""
    db, gen, cfg = run.db, run.gen, run.cfg
    stored = db.table("texts", f"gen = {gen}")
    fetched = run.previous if isinstance(run.previous, FetchResult) else None
    all_extracted = fetched is not None and fetched.extracted >= fetched.pages
    extracted_now = 0
    texts = stored
    replace = not run.first
    if run.reextract or not all_extracted:
        pages = db.table("pages", f"gen = {gen}")
        todo = (
            pages
            if run.reextract
            else db.sql(
                "SELECT p.* FROM {pages} p LEFT ANTI JOIN {stored} s ON p.url_key = s.url_key",
                pages=pages,
                stored=stored,
            )
        )
        extracted = db.map_partitions(todo, ExtractTask(cfg), EXTRACTED_PAGE, db.parallelism())
        extracted_now = db.count(extracted)
        if extracted_now:
            pages_mod.write_links(run, extracted, keep_stored=not run.reextract)
            texts = db.keep(
                db.sql(
                    f"SELECT {', '.join(f's.`{n}`' for n in TEXTS.names)} FROM {{stored}} s "
                    "LEFT ANTI JOIN {extracted} e ON s.url_key = e.url_key UNION ALL "
                    f"SELECT * FROM ({texts_of()})",
                    stored=stored,
                    extracted=extracted,
                )
            )
            replace = True  # the fetch's rows of gen, if any, are rewritten with the new ones
        db.drop(extracted)
    marks = pages_mod.duplicate_marks(run, texts)
    narrow = db.keep(
        db.sql(
            f"SELECT {', '.join(f't.`{n}`' for n in NARROW_TEXTS)}, m.duplicate_of, "
            "m.duplicate_kind FROM {texts} t LEFT JOIN {marks} m ON t.url_key = m.url_key",
            texts=texts,
            marks=marks,
        )
    )
    if not extracted_now:  # narrow holds stored's rows (kept: no second read of the table)
        replace = replace or not db.is_empty(narrow)
    return _Texts(texts, narrow, replace, None if extracted_now else stored), extracted_now, marks


# What the MERGE and the cash read of the generation's texts (no page text)
NARROW_TEXTS = ("url_key", "host", "slice", "content_hash", "directives")


def _known(run: StageRun, fetches: Rel, links: Rel, sitemaps: Rel, marks: Rel) -> Rel:
    """crawldb's rows of every URL the update needs (fetched, linked, listed, redirected to,
    named as a first copy), looked up once."""
    db = run.db
    keys = db.sql(
        "SELECT url_key FROM {fetches} UNION ALL SELECT dst_key AS url_key FROM {links} "
        "UNION ALL SELECT e.url_key AS url_key FROM (SELECT explode(entries) AS e FROM "
        "{sitemaps}) UNION ALL SELECT target_key AS url_key FROM ("
        + redirect_edges()
        + ") UNION ALL SELECT duplicate_of AS url_key FROM {marks}",
        fetches=fetches,
        links=links,
        sitemaps=sitemaps,
        marks=marks,
    )
    return db.sql(rows_of("{crawldb}", "{keys}"), crawldb=crawldb_as_fetched(run), keys=keys)


def crawldb_as_fetched(run: StageRun) -> Rel:
    """crawldb as the first run of this update read it. Nothing writes crawldb between fetch N
    and update N but update N itself, so a rerun reads the version fetch N's done row recorded:
    the scores and depths the first run's MERGE raised or lowered would otherwise change the
    cash and the frontier it writes again. The latest version on a first run, or when no
    version is recorded (an older root)."""
    if run.first:
        return run.db.table("crawldb")
    done = [
        r
        for r in generations.read_rows(run.db)
        if (r.gen, r.stage, r.state) == (run.gen, Stage.FETCH, StageState.DONE) and r.versions
    ]
    version = max(done, key=lambda r: r.at).versions.get("crawldb") if done else None
    if version is None:
        return run.db.table("crawldb")
    return run.db.table("crawldb", version=version)


def _write_frontier(
    run: StageRun,
    fetches: Rel,
    sitemaps: Rel,
    known: Rel,
    crawled: Rel,
    outlinks: Rel,
    cash: Rel,
) -> dict[str, int]:
    """Frontier rows of gen + 1 (links, sitemaps, redirects: new URLs and shorter paths) and
    of gen (the URLs the fetch followed, as if plan had taken them); one append on a first
    run. ``crawled``: the known and fetched URLs (url_key, url, depth); ``outlinks``: the
    links followed (parse.followed_links); ``cash``: what they pass. Counts: new_frontier
    (rows of gen + 1), redirects_queued."""
    db, gen, cfg = run.db, run.gen, run.cfg
    reasons = is_in(
        "reason", (FrontierReason.LINK, FrontierReason.SITEMAP, FrontierReason.REDIRECT)
    )
    where = f"gen = {gen + 1} AND {reasons}"
    held = db.table("frontier", f"gen = {gen}", columns=["gen", "url_key"])
    followed = db.sql(followed_frontier(gen), fetches=fetches, frontier=held)
    if not run.frontier_open:  # gen + 1 was planned from it: kept as it is
        nexts = db.table("frontier", where)
        db.append(followed, "frontier")
        return _frontier_counts(db, nexts)
    depths = db.sql(
        f"SELECT url_key, depth FROM {{f}} WHERE outcome = {lit(Outcome.OK)}", f=fetches
    )
    linked = db.keep(
        db.sql(
            next_frontier(gen, cash=True), links=outlinks, pages=depths, known=crawled, cash=cash
        )
    )
    also_known = db.sql(
        "SELECT url_key, depth FROM {crawled} UNION ALL SELECT url_key, depth FROM {linked}",
        crawled=crawled,
        linked=linked,
    )
    listed = db.sql(
        sitemap_frontier(gen, cfg.generate.internal_link_weight),
        sitemaps=sitemaps,
        known=also_known,
    )
    redirected = db.sql(
        redirect_frontier(gen, cfg.fetch.max_redirects), fetches=fetches, crawldb=known
    )
    nexts = db.keep(
        db.sql(
            "SELECT * FROM {a} UNION ALL SELECT * FROM {b} UNION ALL SELECT * FROM {c}",
            a=linked,
            b=listed,
            c=redirected,
        )
    )
    if run.first:
        db.append(
            db.sql("SELECT * FROM {a} UNION ALL SELECT * FROM {b}", a=nexts, b=followed),
            "frontier",
        )
    else:
        db.replace_where(nexts, "frontier", where)
        db.append(followed, "frontier")
    counts = _frontier_counts(db, nexts)
    db.drop(nexts)
    db.drop(linked)
    return counts


def _frontier_counts(db: Db, nexts: Rel) -> dict[str, int]:
    row = db.one_row(
        db.sql(
            "SELECT count(*) AS new_frontier, count_if(reason = "
            f"{lit(FrontierReason.REDIRECT)}) AS redirects_queued FROM {{n}}",
            n=nexts,
        )
    )
    return {
        "new_frontier": int(row["new_frontier"] or 0),
        "redirects_queued": int(row["redirects_queued"] or 0),
    }


def _merge_crawldb(
    run: StageRun,
    fetches: Rel,
    sitemaps: Rel,
    texts: Rel,
    known: Rel,
    cash: Rel,
) -> dict[str, int]:
    """The crawldb MERGE of the fetched URLs and of the cash gen's links passed known URLs
    (transforms.priority), then, in a generation whose sitemaps listed URLs, their hints."""
    db, cfg, gen = run.db, run.cfg, run.gen
    updates = db.sql(
        f"SELECT * FROM ({crawldb_updates(cfg, gen, cash=True)}) UNION ALL SELECT * FROM "
        f"({score_updates(gen)})",
        fetches=fetches,
        texts=texts,
        crawldb=known,
        cash=cash,
    )
    db.merge(updates, "crawldb", keys=["url_key"], broadcast=True, **crawldb_merge_clauses(gen))
    listing = db.sql("SELECT * FROM {s} WHERE size(entries) > 0", s=sitemaps)
    if not db.is_empty(listing):
        merge_sitemap_hints(db, listing, cfg)
    return {}


def _status_counts(run: StageRun, fetches: Rel) -> dict[str, int]:
    """The URLs fetched in gen by their crawldb status after the MERGE (a rerun reports the
    same), their visits' counts and the redirect chains that ended."""
    db, gen = run.db, run.gen
    fetched = (
        f"SELECT url_key, max({is_in('outcome', VISITED_OUTCOMES)}) AS _visited, "
        f"max(outcome = {lit(Outcome.NOT_MODIFIED)}) AS _not_modified FROM {{fetches}} "
        "GROUP BY url_key"
    )
    rows = rows_of("{crawldb}", "{fetches}")
    chains_ended = ", ".join(
        f"count_if(status = {lit(Status.REDIRECTED)} AND reason = {lit(kind)}) AS {kind}"
        for kind in CHAIN_ENDS
    )
    per_status = (
        f"SELECT status, count(*) AS _urls, {visit_counts(gen)}, {chains_ended} FROM "
        f"(SELECT c.*, f._visited, f._not_modified FROM ({rows}) c JOIN ({fetched}) f "
        "ON c.url_key = f.url_key) GROUP BY status"
    )
    by_status: dict[str, int] = {}
    visits: dict[str, int] = {}
    for r in db.collect(db.sql(per_status, crawldb=db.table("crawldb"), fetches=fetches)):
        by_status[r.pop("status")] = int(r.pop("_urls"))
        for name, n in r.items():
            visits[name] = visits.get(name, 0) + int(n or 0)
    return {
        "urls": sum(by_status.values()),
        **{field: by_status.get(status, 0) for field, status in _COUNTED_STATUS.items()},
        **{name: visits.get(name, 0) for name in (*VISIT_COUNTS, *CHAIN_ENDS)},
    }
