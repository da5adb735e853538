"""The recrawl simulator: the crawler's revisit rules played on the test web's truth.

**The simulator** (:func:`simulate`) plays the crawler's rules on the truth of
:mod:`crawllib.testweb.changes`, one generation per ``step`` seconds:

- plan: a page is due when ``next_fetch_at <= now`` (kept in microseconds, as Spark stores
  it); per host, ``generate.max_per_host`` places, ``floor(max_per_host * revisit_share)`` of
  them for due revisits (most overdue first: next_fetch_at, url_key), the rest for URLs never
  visited ((depth, url_key)), a kind that needs fewer leaving its places to the other
  (:func:`plan_host`, plan's ``cap_per_host`` for one host);
- discovery: front pages are the seeds (depth 0, generation 0); the /c/ pages are the links of
  the front page (depth 1), known from generation 1 (parse of generation 0, fetch.follow off);
- update: every planned URL is visited at the generation's clock; its text changed when its
  text version differs from the stored one (so boilerplate-only changes do not count); it is a
  304 (``not_modified``) when recrawl.conditional_get is on, the page sends full validators and
  its page version is the stored one; the new interval is crawllib.policy.revisit's rule
  (``next_interval`` on Python floats) or any other :data:`Rule` under study.

It does not model politeness timing, failures, retries, robots.txt, deferrals by the fetch
stage, duplicates, budgets over the whole crawl, sitemaps (their URLs and schedule hints) or
links found inside a generation (fetch.follow): every planned URL is fetched at the
generation's instant and reaches its page.

Metrics: fetches (first visits, changed, unchanged and, of the unchanged, 304s) over the whole
run; freshness (share of pages whose stored text is the current one) and age (time since the
stored text stopped being current, 0 when fresh; a page never visited is stale since the
start) sampled ``samples`` times per generation from ``measure_from`` on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from crawllib.config import Config, RecrawlConfig
from crawllib.core.urls import host_of, normalize_url, url_key
from crawllib.policy.revisit import HOUR, PYTHON, next_interval, revisits
from crawllib.testweb import changes
from crawllib.testweb.site import WebSpec

DAY = 24 * HOUR
START = changes.ORIGIN + 7 * DAY  # a week after the random processes' origin
MICROS = 1_000_000


@dataclass
class Page:
    """One URL of the simulated crawl: the crawldb columns the rules read, and the truth of its
    stored copy (its text and page versions)."""

    url: str
    host: str
    key: int
    depth: int
    known_gen: int  # the first generation whose plan sees the URL
    fetched_at: float | None = None
    interval: float | None = None  # fetch_interval, seconds
    next_due: int | None = None  # next_fetch_at, microseconds
    changed_at: float | None = None
    visits_changed: int = 0
    visits_unchanged: int = 0
    text: int = 0
    page: int = 0
    stale_since: float | None = None  # cache: first text change after fetched_at


# A revisit rule: (the page before the visit, its text changed) -> seconds until it is due
# again, None for never. A first visit has page.fetched_at None.
Rule = Callable[[Page, bool], float | None]


def crawler_rule(recrawl: RecrawlConfig) -> Rule:
    """crawllib.policy.revisit's rule, as update applies it (a missing interval is the default)."""
    default = recrawl.default_interval_hours * HOUR

    def rule(page: Page, changed: bool) -> float | None:
        if not revisits(recrawl):
            return None
        previous = default if page.interval is None else page.interval
        seconds: float = next_interval(
            recrawl, PYTHON, previous, page.fetched_at is not None, changed
        ).seconds
        return seconds

    return rule


def web_pages(spec: WebSpec) -> list[Page]:
    """Every changing-host URL of ``spec``, unvisited: front pages are seeds (depth 0, known
    from generation 0), /c/ pages their links (depth 1, known from generation 1)."""
    out = []
    for url in map(normalize_url, changes.changing_urls(spec)):
        front = url.endswith("/")
        out.append(Page(url, host_of(url), url_key(url), 0 if front else 1, 0 if front else 1))
    return out


def plan_host(due: list[Page], new: list[Page], max_per_host: int, share: float) -> list[Page]:
    """The URLs of one host plan takes: due revisits most overdue first (next_fetch_at,
    url_key) in ``floor(max_per_host * share)`` places, new URLs by (depth, url_key) in the
    rest; either kind takes the places the other leaves."""
    due = sorted(due, key=lambda p: (p.next_due or 0, p.key))
    new = sorted(new, key=lambda p: (p.depth, p.key))
    revisit_places = int(max_per_host * share)
    new_places = max_per_host - revisit_places
    take_due = revisit_places + max(0, new_places - len(new))
    take_new = new_places + max(0, revisit_places - len(due))
    return due[:take_due] + new[:take_new]


def known_rate_rule(recrawl: RecrawlConfig, p: float) -> Rule:
    """Not the crawler's rule: the interval at which a visit finds a change with probability
    ``p`` were the page Poisson with its true mean interval (what a perfect change-rate
    estimate would give), within recrawl's bounds; never-changing pages get the longest."""
    low, high = recrawl.min_interval_hours * HOUR, recrawl.max_interval_hours * HOUR

    def rule(page: Page, changed: bool) -> float:
        return min(max(-math.log1p(-p) * changes.mean_interval(page.url), low), high)

    return rule


def settles_at(recrawl: RecrawlConfig) -> float | None:
    """The share of visits finding a change at which Nutch's rule holds an interval steady
    (its logarithm does not drift: p·ln(1 − dec) + (1 − p)·ln(1 + inc) = 0); None when
    neither rate moves it."""
    up, down = math.log1p(recrawl.inc_rate), -math.log1p(-recrawl.dec_rate)
    return up / (up + down) if up + down > 0 else None


@dataclass
class Counts:
    """One generation's counts, named as in the generations table: plan's planned and
    revisits, update's new, revisited, changed, unchanged and not_modified."""

    planned: int = 0
    revisits: int = 0
    new: int = 0
    revisited: int = 0
    changed: int = 0
    unchanged: int = 0
    not_modified: int = 0

    def add(self, other: Counts) -> Counts:
        return Counts(**{k: v + getattr(other, k) for k, v in asdict(self).items()})


@dataclass
class KindFigures:
    """One change kind's pages, their fetches and unchanged fetches over the run, and their
    fresh samples out of all samples."""

    pages: int = 0
    fetches: int = 0
    unchanged: int = 0
    fresh: int = 0
    samples: int = 0


@dataclass
class Simulated:
    """Per generation: its counts and the URLs it fetched. Over the measured samples:
    freshness and mean age (hours). Per change kind (``front`` for the front pages): its
    figures. ``busiest``: the most URLs one host had in one generation."""

    gens: list[Counts]
    fetched: list[set[str]]
    freshness: float
    age_hours: float
    kinds: dict[str, KindFigures]
    busiest: int

    @property
    def total(self) -> Counts:
        out = Counts()
        for c in self.gens:
            out = out.add(c)
        return out


def plan(pages: Iterable[Page], gen: int, now: float, cfg: Config) -> list[Page]:
    """The URLs generation ``gen`` fetches at ``now`` (plan's rule, per host)."""
    by_host: dict[str, tuple[list[Page], list[Page]]] = {}
    as_of = round(now * MICROS)
    for p in pages:
        due, new = by_host.setdefault(p.host, ([], []))
        if p.fetched_at is None and p.known_gen <= gen:
            new.append(p)
        elif p.next_due is not None and p.next_due <= as_of:
            due.append(p)
    g = cfg.generate
    return [
        p
        for host in sorted(by_host)
        for p in plan_host(*by_host[host], g.max_per_host, g.revisit_share)
    ]


def visit(p: Page, now: float, rule: Rule, conditional_get: bool) -> Counts:
    """Update ``p`` after fetching it at ``now``; the visit's counts."""
    revisit = p.fetched_at is not None
    text, page = changes.text_version(p.url, now), changes.page_version(p.url, now)
    changed = revisit and text != p.text
    not_modified = (
        revisit and conditional_get and changes.validators(p.url) == "full" and page == p.page
    )
    interval = rule(p, changed)
    p.interval = p.interval if interval is None else interval
    # update: next_fetch_at = timestamp_seconds(fetched_at seconds + interval), in microseconds
    p.next_due = None if interval is None else int((now + interval) * MICROS)
    if not revisit or changed:
        p.changed_at = now
    p.visits_changed += changed
    p.visits_unchanged += revisit and not changed
    p.fetched_at, p.text, p.page, p.stale_since = now, text, page, None
    return Counts(
        new=not revisit,
        revisited=revisit,
        changed=changed,
        unchanged=revisit and not changed,
        not_modified=not_modified,
    )


def staleness(p: Page, at: float, start: float) -> float:
    """Seconds since the stored text stopped being current at ``at``; 0 when it is current."""
    if p.fetched_at is None:
        return at - start
    if changes.text_version(p.url, at) == p.text:
        return 0.0
    if p.stale_since is None:
        lo, hi = int(p.fetched_at), int(at)  # the text changed in (lo, hi], at a whole second
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if changes.text_version(p.url, mid) != p.text else (mid, hi)
        p.stale_since = float(hi)
    return at - p.stale_since


def kind_of(p: Page) -> str:
    """The page's change kind; ``front`` for a front page, ``random <mean> h`` for random."""
    kind = "front" if p.depth == 0 else changes.change_kind(p.url)
    return f"random {changes.mean_interval(p.url) / HOUR:g} h" if kind == "random" else kind


def simulate(
    cfg: Config,
    spec: WebSpec,
    start: float = START,
    generations: int = 14 * 24,
    step: float = HOUR,
    rule: Rule | None = None,
    measure_from: int = 0,
    samples: int = 4,
) -> Simulated:
    """Run ``generations`` generations ``step`` seconds apart from ``start`` on the changing
    hosts of ``spec`` under ``cfg`` (generate.max_per_host, revisit_share, recrawl; ``rule``
    replaces recrawl's interval rule when given); freshness and age sampled ``samples`` times
    per generation (at the middles of equal parts of the time to the next) from
    ``measure_from`` on."""
    pages = web_pages(spec)
    rule = rule or crawler_rule(cfg.recrawl)
    kind = {p.url: kind_of(p) for p in pages}
    kinds: dict[str, KindFigures] = {}
    for p in pages:
        kinds.setdefault(kind[p.url], KindFigures()).pages += 1
    gens: list[Counts] = []
    fetched: list[set[str]] = []
    fresh, seen, stale_s, busiest = 0, 0, 0.0, 0
    for gen in range(generations):
        now = start + gen * step
        chosen = plan(pages, gen, now, cfg)
        counts = Counts(planned=len(chosen), revisits=sum(p.fetched_at is not None for p in chosen))
        per_host: dict[str, int] = {}
        for p in chosen:
            visited = visit(p, now, rule, cfg.recrawl.conditional_get)
            counts = counts.add(visited)
            figures = kinds[kind[p.url]]
            figures.fetches += 1
            figures.unchanged += visited.unchanged
            per_host[p.host] = per_host.get(p.host, 0) + 1
        busiest = max(busiest, *per_host.values(), 0)
        gens.append(counts)
        fetched.append({p.url for p in chosen})
        if gen < measure_from:
            continue
        for k in range(samples):
            at = now + (k + 0.5) * step / samples
            for p in pages:
                age = staleness(p, at, start)
                figures = kinds[kind[p.url]]
                figures.fresh += age == 0
                figures.samples += 1
                fresh, seen, stale_s = fresh + (age == 0), seen + 1, stale_s + age
    return Simulated(
        gens, fetched, fresh / max(1, seen), stale_s / max(1, seen) / HOUR, kinds, busiest
    )
