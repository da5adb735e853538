"""fetch(N): fetchlist gen N -> pages, texts, links, fetches (gen N), robots and hosts, a slice
at a time.

The engine extracts each kept page (text, title, language, fingerprints, links) in the fetch
task while its slots wait on politeness (``fetch.extract``), so a slice's texts rows (not yet
marked as duplicates: parse does that) and links rows are written with its pages.

A slice (a group of slots, ``fetchlist.slice``) is committed once ``fetches`` holds its rows:
per slice the stage fetches, persists the results (so the network is hit once), then appends
pages, texts and links, writes robots (appended for hosts new to the table, MERGEd by host
when an expired row is refreshed) and MERGEs the slots' politeness into hosts, from parallel
driver threads, and last appends fetches: one commit each, so a slice is in fetches whole or
not at all. A rerun skips committed slices; a crash loses at most the slice in flight, and its
rerun reuses the robots.txt already written, starts its slots from the hosts rows the crashed
run may have written (its requests happened: they count) and replaces (replaceWhere
gen/slice) the pages, texts and links the crashed run left of that slice. Appends, not a
replaceWhere every time: a replaceWhere rebuilds the table's snapshot to find the files it
replaces, so it costs several appends.

Each slice's slots start from their hosts rows (last request, backoff, Retry-After, cool-down:
``crawllib.engine.slots``), so a host's first request of a slice or generation is spaced from its
last one of the previous by rule.

A slice's tasks keep a journal under the crawl root (``crawllib.store.journal``): a task Spark runs
again (its executor lost) waits while another attempt of it fetches, and fetches only what the
earlier attempts did not write there; the slice's journal is deleted once it is committed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from crawllib.config import Config
from crawllib.core import progress
from crawllib.core.output import plural
from crawllib.core.vocab import Outcome, Record, RobotsOutcome, Stage, StageState, words
from crawllib.engine.partition import RESULT_SCHEMA, FetchTask
from crawllib.stages.base import StageResult, StageRun
from crawllib.stages.plan import PlanResult
from crawllib.stages.traps import read_trapped
from crawllib.store import generations, journal
from crawllib.store.db import Db, Rel
from crawllib.store.schemas import ROBOTS
from crawllib.transforms import exclusions
from crawllib.transforms.fetch_inputs import (
    HOSTS_UPDATE,
    engine_hosts,
    engine_robots,
    extracted_from_results,
    fetch_inputs,
    fetches_from_results,
    follow_inputs,
    hosts_from_results,
    known_slots,
    new_slot_urls,
    owned_known_slots,
    pages_from_results,
    probes_from_results,
    result_tally,
    robots_from_results,
    sitemaps_from_results,
    with_task,
)
from crawllib.transforms.parse import links_table, texts_of

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FetchResult(StageResult):
    """urls, slices: the generation's fetchlist; slices_skipped: slices committed before this
    run; ok .. deferred (fetches rows by outcome, followed URLs included), pages, extracted
    (texts rows the fetch wrote), followed (URLs fetched from links, in the task),
    followed_planned_hosts (those on slots the task was given) and followed_new_hosts (those on
    hosts crawldb did not know): the generation's rows
    after this run (a rerun reports the same totals); robots_fetched,
    seconds_fetching and refetched_after_retry (URLs a task attempt requested again after an
    earlier attempt, lost with its executor, had requested them: crawllib.store.journal): this
    run's network work."""

    THROUGHPUT: ClassVar[str] = "urls"

    urls: int
    slices: int
    slices_skipped: int
    ok: int
    redirect: int
    http_error: int
    robots_denied: int
    blocked: int
    error: int
    deferred: int
    not_modified: int
    pages: int
    extracted: int
    followed: int
    followed_planned_hosts: int
    followed_new_hosts: int
    robots_fetched: int
    seconds_fetching: int
    refetched_after_retry: int = 0


@dataclasses.dataclass(frozen=True)
class Stored:
    """Fetches rows by outcome, pages rows, texts rows the fetch extracted, and fetches rows of
    URLs followed in the task: of a slice, or of a whole generation."""

    outcomes: Counter[str]
    pages: int
    extracted: int = 0
    followed: int = 0

    def __add__(self, other: Stored) -> Stored:
        return Stored(
            self.outcomes + other.outcomes,
            self.pages + other.pages,
            self.extracted + other.extracted,
            self.followed + other.followed,
        )


@dataclasses.dataclass(frozen=True)
class SliceDone:
    """A committed slice: its URLs, the robots.txt records fetched, the rows it stored, the
    seconds spent fetching (the persisted results' first evaluation), the URLs requested again
    after a lost task attempt."""

    urls: int
    robots: int
    stored: Stored
    seconds: float
    refetched: int = 0


def run(run: StageRun) -> FetchResult:
    """Fetch every slice of fetchlist gen ``run.gen`` not yet in fetches.

    A first run chained after plan (``run.previous``) lists the slices from plan's counts
    instead of querying the fetchlist.
    """
    db, root, gen = run.db, run.root, run.gen
    # crawl.exclude_file read once, here: the tasks' followers get its rules in the config
    cfg = exclusions.inlined(run.cfg, db.read_file)
    fetchlist = db.table("fetchlist", f"gen = {gen}")
    listing = (
        planned_slices(run.previous)
        if run.first and isinstance(run.previous, PlanResult)
        else stored_slices(db, gen, fetchlist, nothing_stored=run.first)
    )
    log.info(
        "fetch gen %d: %s in %s, %d already committed",
        gen,
        plural(listing.urls, "URL"),
        plural(listing.slices, "slice"),
        listing.slices - len(listing.todo),
    )
    robots_fetched = refetched = 0
    seconds = 0.0
    urls_done = 0
    stored = Stored(Counter(), 0)  # summed over this run's slices
    # fetch.deadline_seconds counts from the generation's first fetch start, over all slices
    # (and reruns): each slice gets what is left, a slice past it (0 left) defers its URLs
    # before any request, robots.txt included
    deadline = run.first_started(Stage.FETCH) + cfg.fetch.deadline_seconds
    carried = cfg.fetch.follow and cfg.fetch.extract and keys_carried(run)
    partitions = fetch_partitions(db, cfg)
    lanes = extract_processes(db, cfg, partitions)  # the tasks' config says it resolved
    cfg = dataclasses.replace(cfg, extract=dataclasses.replace(cfg.extract, processes=lanes))
    known = None
    if follows_new_hosts(cfg):  # crawldb's slots, read once: which hosts are new, every slice
        crawldb = db.table("crawldb", columns=["host", "domain"])
        # read by the fetch tasks: kept so that a lost executor's part is read again (the
        # fetch writes no crawldb row), not lost with it (tests/cluster: an executor killed)
        known = db.keep(db.sql(known_slots(cfg), crawldb=crawldb), through_losses=True)
    try:
        for i, r in enumerate(listing.todo, start=1):
            left = max(0.0, deadline - time.time())
            done = fetch_slice(
                db, cfg, gen, r.slice, fetchlist, r.dirty, carried, left, partitions, known
            )
            _log_slice(gen, i, len(listing.todo), r.slice, done)
            robots_fetched += done.robots
            refetched += done.refetched
            seconds += done.seconds
            urls_done += done.urls
            stored += done.stored
            ok = stored.outcomes[Outcome.OK]
            progress.report(
                f"fetch gen {gen}",
                urls_done,
                listing.urls_todo,
                pages=ok,
                pages_per_s=round(ok / seconds, 1) if seconds > 0 else 0.0,
                errors=stored.outcomes[Outcome.HTTP_ERROR] + stored.outcomes[Outcome.ERROR],
            )
        # This run wrote every slice: its own counts are the stored ones, no table to re-read.
        if len(listing.todo) != listing.slices:
            stored = generation_stored(db, gen)
        new_hosts = followed_to_new_hosts(db, cfg, gen, known) if known is not None else 0
    finally:
        if known is not None:
            db.drop(known)
    result = FetchResult(
        urls=listing.urls,
        slices=listing.slices,
        slices_skipped=listing.slices - len(listing.todo),
        **{outcome: stored.outcomes[outcome] for outcome in words(Outcome)},
        pages=stored.pages,
        extracted=stored.extracted,
        followed=stored.followed,
        followed_planned_hosts=stored.followed - new_hosts,
        followed_new_hosts=new_hosts,
        robots_fetched=robots_fetched,
        seconds_fetching=round(seconds),
        refetched_after_retry=refetched,
    )
    journal.clear(journal.generation_folder(root, gen), cfg)  # what crashed runs left
    log.info("fetch gen %d: %s", gen, result)
    return result


def _log_slice(gen: int, i: int, todo: int, slice_: int, done: SliceDone) -> None:
    ok = done.stored.outcomes[Outcome.OK]
    log.info(
        "fetch gen %d: slice %d/%d (slice %d): %d URLs, %d pages in %.1fs (%.1f pages/s), "
        "%d robots.txt",
        gen,
        i,
        todo,
        slice_,
        done.urls,
        ok,
        done.seconds,
        ok / done.seconds if done.seconds > 0 else 0.0,
        done.robots,
    )


def followed_to_new_hosts(db: Db, cfg: Config, gen: int, known: Rel) -> int:
    """The generation's fetches rows on slots crawldb (``known``: its slots) did not know:
    URLs followed to new hosts."""
    fetches = db.table("fetches", f"gen = {gen}", columns=["host"])
    rows = db.collect(db.sql(new_slot_urls(cfg, 1), known=known, fetches=fetches))
    return sum(int(r["urls"]) for r in rows)


# The tables a slice writes before its fetches rows commit it.
SLICE_TABLES = ("pages", "texts", "links", "sitemaps", "probes")


@dataclasses.dataclass(frozen=True)
class Slice:
    """A slice still to fetch: its number, its slots (an upper bound will do: it only caps
    the slice's tasks) and whether SLICE_TABLES hold rows of it (a crashed run's)."""

    slice: int
    slots: int
    dirty: bool = False


@dataclasses.dataclass(frozen=True)
class Slices:
    """A generation's fetchlist by slice: the slices not yet committed, in order, how many
    slices and URLs it holds, and how many URLs the uncommitted slices hold."""

    todo: list[Slice]
    slices: int
    urls: int
    urls_todo: int


def stored_slices(db: Db, gen: int, fetchlist: Rel, nothing_stored: bool = False) -> Slices:
    """Which slices the fetchlist holds and which are committed (fetches holds their rows),
    in one query. nothing_stored: no fetch run of gen has started before, so fetches and pages
    hold nothing of it and are not read."""
    slices = "SELECT slice, count(*) AS urls, count(DISTINCT slot) AS slots FROM {fetchlist} GROUP BY slice"
    inputs: dict[str, Rel] = {"fetchlist": fetchlist}
    if nothing_stored:
        query = f"SELECT *, NULL AS committed, NULL AS dirty FROM ({slices})"
    else:
        where = f"gen = {gen}"
        inputs["fetches"] = db.table("fetches", where, columns=["slice"])
        dirty = []
        for name in SLICE_TABLES:
            inputs[name] = db.table(name, where, columns=["slice"])
            dirty.append(f"SELECT slice FROM {{{name}}}")
        query = (
            f"SELECT s.*, c.slice IS NOT NULL AS committed, d.slice IS NOT NULL AS dirty FROM "
            f"({slices}) s LEFT JOIN (SELECT DISTINCT slice FROM {{fetches}}) c ON s.slice = c.slice "
            f"LEFT JOIN (SELECT DISTINCT slice FROM ({' UNION ALL '.join(dirty)})) d "
            "ON s.slice = d.slice"
        )
    rows = sorted(db.collect(db.sql(query, **inputs)), key=lambda r: r["slice"])
    todo = [r for r in rows if not r["committed"]]
    return Slices(
        todo=[Slice(r["slice"], r["slots"], bool(r["dirty"])) for r in todo],
        slices=len(rows),
        urls=sum(r["urls"] for r in rows),
        urls_todo=sum(r["urls"] for r in todo),
    )


def planned_slices(plan: PlanResult) -> Slices:
    """`stored_slices` of a fetchlist that no fetch has touched, from the counts of the plan
    run that wrote it, with no query: slices 0 .. slices - 1, none empty (plan deals the
    busiest slot's URLs over all of them), each with at most the planned hosts as slots."""
    return Slices(
        todo=[Slice(index, plan.hosts) for index in range(plan.slices)],
        slices=plan.slices,
        urls=plan.planned,
        urls_todo=plan.planned,
    )


def keys_carried(run: StageRun) -> bool:
    """Whether the plan of generation ``run.gen`` wrote its slots' known keys into the
    fetchlist (its counts hold ``follow_slots``): the chained plan's result says so, else its
    latest done row. A plan of an older crawllib did not: the fetch reads crawldb's keys."""
    if isinstance(run.previous, PlanResult):
        return True
    rows = [
        r
        for r in generations.read_rows(run.db)
        if r.gen == run.gen and r.stage == Stage.PLAN and r.state == StageState.DONE
    ]
    return bool(rows) and "follow_slots" in max(rows, key=lambda r: r.at).counts


def fetch_slice(
    db: Db,
    cfg: Config,
    gen: int,
    slice_: int,
    fetchlist: Rel,
    dirty: bool = False,
    carried: bool = False,
    seconds_left: float | None = None,
    partitions: int = 1,
    known: Rel | None = None,
) -> SliceDone:
    """Fetch and commit one slice: pages, and the texts and links rows of the pages the
    engine extracted, then fetches, which marks the slice committed.

    dirty: SLICE_TABLES already hold rows of this slice (a run that crashed before its
    fetches commit), which its writes replace. carried: the fetchlist carries its slots'
    known keys (:func:`keys_carried`), so crawldb is not read. seconds_left: what is left of
    fetch.deadline_seconds, counted from the generation's first fetch start (None: all of it).
    partitions: its tasks (:func:`fetch_partitions`). known: crawldb's slots
    (crawllib.transforms.fetch_inputs.known_slots) when tasks follow links to new hosts, else
    None. Three steps: the tasks' results (fetched once, kept), their tally, the writes."""
    kept = journal.for_slice(db.root, gen, slice_, cfg)
    started = time.monotonic()
    results = _slice_results(
        db, cfg, gen, slice_, fetchlist, carried, kept, seconds_left, partitions, known
    )
    try:
        tally = _Tally.of(db, results)
        done = tally.done(time.monotonic() - started)
        _write_slice(db, results, gen, slice_, tally, dirty)
    finally:
        db.drop(results)
    journal.clear(kept.folder if kept is not None else None, cfg)  # committed: not needed
    return done


def fetch_partitions(db: Db, cfg: Config) -> int:
    """How many tasks each slice's fetch runs: fetch.partitions, else one on one machine (the
    embedded engine, a local master: the task owns every host, so it follows every link of the
    generation, and extracts on every core: `extract_processes`), and on a cluster as many as
    the engine runs at once (its cores), each holding many hosts in asyncio. The same for every
    slice of a generation: a slot's task (crawl_partition of its key) is then the same in every
    slice, and so is the task that owns a new host."""
    if cfg.fetch.partitions:
        return cfg.fetch.partitions
    return 1 if db.one_machine() else max(1, db.parallelism())


def extract_processes(db: Db, cfg: Config, partitions: int) -> int:
    """Extraction processes per fetch task: extract.processes, else on one machine the cores
    each of ``partitions`` tasks has, and on a cluster one (a Spark task has one core)."""
    if cfg.extract.processes:
        return cfg.extract.processes
    return max(1, db.parallelism() // partitions) if db.one_machine() else 1


def follows_new_hosts(cfg: Config) -> bool:
    """Whether fetch tasks follow links to new hosts (crawllib.engine.follow.Owner): following
    on, a budget for them, and slots known before DNS (not politeness.key = ip)."""
    return (
        cfg.fetch.follow
        and cfg.fetch.extract
        and cfg.fetch.follow_other_hosts
        and cfg.fetch.new_host_urls > 0
        and cfg.politeness.key != "ip"
    )


def _slice_results(
    db: Db,
    cfg: Config,
    gen: int,
    slice_: int,
    fetchlist: Rel,
    carried: bool,
    kept: journal.JournalSpec | None,
    seconds_left: float | None,
    partitions: int,
    known: Rel | None,
) -> Rel:
    """The engine's results for the slice's URLs (RESULT_SCHEMA rows, kept: the network is
    gone to once, for what the tasks' journal ``kept`` does not hold)."""
    slice_rows = db.sql(f"SELECT * FROM {{f}} WHERE slice = {slice_}", f=fetchlist)
    robots = db.sql(engine_robots(), robots=db.table("robots"))
    stored_hosts = db.table("hosts")
    inputs: dict[str, Rel] = {
        "slice_rows": slice_rows,
        "robots": robots,
        "hosts": db.sql(engine_hosts(), hosts=stored_hosts),
    }
    follows = cfg.fetch.follow and cfg.fetch.extract
    if follows:
        # Room and known keys as of the slices committed so far (fetches rows of gen).
        follow = {
            "fetchlist": fetchlist,
            "fetches": db.table(
                "fetches", f"gen = {gen}", columns=["url_key", "host", "source_url"]
            ),
        }
        if not carried:
            follow["crawldb"] = db.table("crawldb", columns=["url_key", "host", "domain"])
        trapped = read_trapped(db, cfg)
        if trapped is not None:
            follow["trapped"] = trapped
        inputs["follow"] = db.sql(follow_inputs(cfg, carried, trapped is not None), **follow)
    rows = db.sql(
        with_task(cfg, True, partitions),
        inputs=db.sql(fetch_inputs(follows, True), **inputs),
        hosts=stored_hosts,
    )
    rows = db.sql("SELECT * EXCEPT (task) FROM {rows}", rows=rows)
    budgets: tuple[int, ...] = ()
    if known is not None:
        fetched = db.table("fetches", f"gen = {gen}", columns=["host"])
        owned = db.sql(owned_known_slots(cfg, partitions), known=known, fetches=fetched)
        rows = db.sql(
            "SELECT * FROM {rows} UNION ALL SELECT * FROM {owned}", rows=rows, owned=owned
        )
        budgets = new_slot_budgets(db, cfg, partitions, known, fetched)
    task = FetchTask(cfg, kept, partitions, seconds_left, budgets)
    return db.map_partitions(rows, task, RESULT_SCHEMA, partitions, by="part")


def new_slot_budgets(
    db: Db, cfg: Config, partitions: int, known: Rel, fetched: Rel
) -> tuple[int, ...]:
    """Per task, the URLs it may still fetch from new hosts in this generation: its share of
    fetch.new_host_urls less what earlier slices' tasks of its number fetched from them."""
    share = -(-cfg.fetch.new_host_urls // partitions)
    used = {
        int(r["part"]): int(r["urls"])
        for r in db.collect(db.sql(new_slot_urls(cfg, partitions), known=known, fetches=fetched))
    }
    return tuple(max(0, share - used.get(p, 0)) for p in range(partitions))


@dataclasses.dataclass
class _Tally:
    """A slice's results counted (one query): fetches rows by outcome, robots.txt records by
    outcome, and the other rows each table gets."""

    fetched: Counter[str] = dataclasses.field(default_factory=Counter)
    robots_by: Counter[str] = dataclasses.field(default_factory=Counter)
    pages: int = 0
    extracted: int = 0
    followed: int = 0
    sitemaps: int = 0
    probes: int = 0
    refetched: int = 0

    @classmethod
    def of(cls, db: Db, results: Rel) -> _Tally:
        tally = cls()
        for row in db.collect(db.sql(result_tally(), results=results)):
            tally.add(row)
        return tally

    def add(self, row: Any) -> None:
        count = row["count"]
        if row["record"] == Record.ROBOTS:
            self.robots_by[row["outcome"]] += count
        elif row["record"] == Record.SITEMAP:
            self.sitemaps += count
        elif row["record"] == Record.PROBE:
            self.probes += count
        elif row["record"] == Record.FETCH:  # else a slot's politeness (hosts rows)
            self.fetched[row["outcome"]] += count
            if row["outcome"] == Outcome.OK and row["page"]:  # the rows pages_from_results keeps
                self.pages += count
            self.extracted += count if row["extracted"] else 0
            self.followed += count if row["followed"] else 0
            self.refetched += count if row["refetched"] else 0

    def done(self, seconds: float) -> SliceDone:
        return SliceDone(
            urls=self.fetched.total() - self.followed,
            robots=self.robots_by.total(),
            stored=Stored(self.fetched, self.pages, self.extracted, self.followed),
            seconds=seconds,
            refetched=self.refetched,
        )


def _write_slice(
    db: Db,
    results: Rel,
    gen: int,
    slice_: int,
    tally: _Tally,
    dirty: bool,
) -> None:
    """Commit the slice's rows: pages, texts, links, sitemaps, probes, hosts and robots at
    once (their commits overlap where the engine can), then fetches, which marks the slice
    committed."""
    where = f"gen = {gen} AND slice = {slice_}"
    extracted = db.sql(extracted_from_results(gen, slice_), results=results)
    rows = {
        "pages": db.sql(pages_from_results(gen, slice_), results=results),
        "texts": db.sql(texts_of(), extracted=extracted),
        "links": db.sql(links_table(), extracted=extracted),
        "sitemaps": db.sql(sitemaps_from_results(gen, slice_), results=results),
        "probes": db.sql(probes_from_results(gen, slice_), results=results),
    }
    wrote = {
        "pages": True,
        "texts": bool(tally.extracted),
        "links": bool(tally.extracted),
        "sitemaps": bool(tally.sitemaps),
        "probes": bool(tally.probes),
    }

    def writer(name: str) -> Callable[[], None]:
        def write() -> None:
            if dirty:
                db.replace_where(rows[name], name, where)
            elif wrote[name]:
                db.append(rows[name], name)

        return write

    def write_robots() -> None:
        # Hosts whose robots.txt was cached fetched none. Rows of hosts new to the table
        # are appended (one record per host: a host lives in one task); only a refreshed
        # row, whose expired one it replaces, needs the MERGE, which costs several appends.
        robots = db.sql(robots_from_results(), results=results)
        if tally.robots_by[RobotsOutcome.REFRESHED]:
            db.merge(robots, "robots", keys=["host"], update={n: f"s.{n}" for n in ROBOTS.names})
        else:
            db.append(robots, "robots")

    def write_hosts() -> None:
        db.merge(
            db.sql(hosts_from_results(gen, slice_), results=results),
            "hosts",
            keys=["slot"],
            update=HOSTS_UPDATE,
        )

    writes = [writer(name) for name in SLICE_TABLES]
    robots_write = [write_robots] if tally.robots_by.total() else []
    db.in_parallel(*writes, write_hosts, *robots_write)
    # Last: fetches rows are what marks the slice as committed (none yet, or it would
    # have been skipped).
    db.append(db.sql(fetches_from_results(gen, slice_), results=results), "fetches")


def generation_stored(db: Db, gen: int) -> Stored:
    """Fetch outcomes and pages of generation ``gen`` as stored (committed slices only)."""
    where = f"gen = {gen}"
    fetches = db.table("fetches", where, columns=["outcome", "source_url"])
    by_outcome = Counter(
        {
            r["outcome"]: int(r["n"])
            for r in db.collect(
                db.sql("SELECT outcome, count(*) AS n FROM {f} GROUP BY outcome", f=fetches)
            )
        }
    )
    pages = db.count(db.table("pages", where, columns=["url_key"]))
    extracted = db.count(db.table("texts", where, columns=["url_key"]))
    followed = db.count(db.sql("SELECT 1 FROM {f} WHERE source_url IS NOT NULL", f=fetches))
    return Stored(by_outcome, pages, extracted, followed)
