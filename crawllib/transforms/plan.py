"""Plan's rules, as SQL: frontier of a generation + crawldb -> decided candidates -> fetchlist
rows and crawldb changes. Each function returns the text of one query (crawllib.transforms.
sqltext); its inputs are relation names, ``{placeholders}`` by default, which the stage binds
(crawllib.stages.plan) and the tests bind to rows of their own, on either engine.

A *candidate* has the crawldb columns (new URLs are shaped as the crawldb rows they would
become) plus ``is_new`` (not yet in crawldb) and ``lowered`` (a shorter path lowered its
depth in this plan); a *revisit* is a candidate with a stored version (``fetched_at`` set:
due by its ``next_fetch_at``, or a failed revisit due for a retry). The decision steps add
``slot`` (the row's politeness key: :func:`with_slot`), ``filter_reason`` (excluded, depth,
extension, length, trap_pattern, alias, budget or null), ``deferred`` (over this generation's
per-host cap, held, over time or over top_n), ``held`` (its slot is held back by the hosts
table: :func:`holds`), ``over_time`` and ``over_top``. The name is ``filter_reason`` rather
than ``reason`` because crawldb already has a ``reason``.

Every ranking is a total order, so a rerun decides the same way: generate.order for new URLs
(highest score, then depth, then url_key: crawllib.transforms.priority.score_order), (the
most overdue next_fetch_at, then that order) for revisits.
"""

from __future__ import annotations

import dataclasses

from crawllib.config import Config
from crawllib.core.vocab import (
    PENDING_STATUSES,
    REVISITED_STATUSES,
    FilterReason,
    Status,
    Waiting,
    WaitReason,
    words,
)
from crawllib.policy.exclusions import Exclusions
from crawllib.policy.revisit import revisits
from crawllib.store.schemas import CRAWLDB, FETCHLIST, FRONTIER, HOSTS, select_list
from crawllib.transforms.depth import expands
from crawllib.transforms.exclusions import matches_sql
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.priority import score_order
from crawllib.transforms.sqltext import is_in, lit, names, steps, timestamp_of
from crawllib.transforms.traps import repeats_more_than, url_pattern

_CRAWLDB = CRAWLDB.names
# lowered: a known URL whose depth a shorter path lowered in this plan (crawllib.transforms.depth)
CANDIDATE_COLUMNS = (*_CRAWLDB, "is_new", "lowered")
DECIDED_COLUMNS = (
    *CANDIDATE_COLUMNS,
    "slot",
    "filter_reason",
    "deferred",
    "held",
    "over_time",
    "over_top",
)


def dedup_frontier(frontier: str = "{frontier}") -> str:
    """One row per url_key: the lowest depth, then the earliest discovered, then source_url.
    In: frontier rows. Out: frontier columns, url_key unique."""
    return (
        f"SELECT {names(FRONTIER)} FROM (SELECT *, row_number() OVER (PARTITION BY url_key "
        "ORDER BY depth ASC, discovered_at ASC NULLS LAST, source_url ASC NULLS LAST) AS _rank "
        f"FROM {frontier}) WHERE _rank = 1"
    )


def new_candidates(frontier: str = "{frontier}", crawldb: str = "{crawldb}") -> str:
    """Frontier rows whose url_key is not in crawldb. In/out: frontier columns."""
    known = rows_of(f"(SELECT url_key FROM {crawldb})", frontier)
    return (
        f"SELECT {names(FRONTIER, 'f')} FROM {frontier} f LEFT ANTI JOIN ({known}) k "
        "ON f.url_key = k.url_key"
    )


def queued_rows(gen: int, frontier: str = "{frontier}") -> str:
    """Frontier rows -> the crawldb rows their URLs get when first known: queued for ``gen``
    (first_gen = next_gen = gen), reason = the frontier reason, no attempt yet, no schedule.
    In: frontier columns. Out: crawldb columns."""
    given = {
        "status": lit(Status.QUEUED),
        "attempts": "0",
        "first_gen": lit(gen),
        "next_gen": lit(gen),
        "updated_at": "current_timestamp()",
    }
    unknown = {f.name: "NULL" for f in CRAWLDB.fields if f.name not in FRONTIER}
    return f"SELECT {select_list(CRAWLDB, **{**unknown, **given})} FROM {frontier}"


def frontier_as_crawldb_rows(gen: int, frontier: str = "{frontier}") -> str:
    """New URLs as the queued crawldb rows they become (:func:`queued_rows`).
    In: frontier columns. Out: CANDIDATE_COLUMNS with is_new true."""
    return f"SELECT *, TRUE AS is_new, FALSE AS lowered FROM ({queued_rows(gen, frontier)})"


def is_due(gen: int, as_of: float | None) -> str:
    """A queued or failed URL is due in ``gen`` at ``as_of`` (epoch seconds, the generation's
    clock; None: any time): its next_gen has come (null: at once), and its not_before (a
    failed URL's retry time) has passed. A failed URL an older crawllib put off to a later
    generation, without a not_before, is due at once: retries are due by time."""
    old_retry = f"(status = {lit(Status.FAILED)} AND not_before IS NULL)"
    reached = f"(coalesce(next_gen, {gen}) <= {gen} OR {old_retry})"
    if as_of is None:
        return reached
    return f"({reached} AND (not_before IS NULL OR not_before <= {timestamp_of(as_of)}))"


def pending_from_crawldb(gen: int, as_of: float | None = None, crawldb: str = "{crawldb}") -> str:
    """Known URLs due in ``gen`` (:func:`is_due`): status queued or failed.
    In: crawldb columns (and ``lowered``, when ``lowered`` is given). Out: CANDIDATE_COLUMNS
    with is_new false."""
    return _known(crawldb, f"{is_in('status', PENDING_STATUSES)} AND {is_due(gen, as_of)}")


def due_revisits(gen: int, as_of: float, crawldb: str = "{crawldb}") -> str:
    """Fetched pages due again in ``gen``: status fetched or duplicate, next_fetch_at at or
    before ``as_of`` (epoch seconds: the generation's clock), and not deferred to a later
    generation (next_gen). In: crawldb columns. Out: CANDIDATE_COLUMNS with is_new false."""
    due = f"next_fetch_at <= {timestamp_of(as_of)} AND coalesce(next_gen, {gen}) <= {gen}"
    return _known(crawldb, f"{is_in('status', REVISITED_STATUSES)} AND {due}")


def _known(crawldb: str, where: str, lowered: bool = False) -> str:
    mark = "lowered" if lowered else "FALSE AS lowered"
    return f"SELECT {names(_CRAWLDB)}, FALSE AS is_new, {mark} FROM {crawldb} WHERE {where}"


def is_revisit() -> str:
    """A candidate with a stored version (a revisit, or the retry of one)."""
    return "(fetched_at IS NOT NULL)"


def extension_of(url: str) -> str:
    """Lowercase extension of a normalised URL's last path segment, or ''.

    The SQL twin of ``crawllib.core.urls.url_extension`` (a test keeps them in step): the path
    ends at '?' (normalised URLs carry no fragment), the segment at ';', and a dot only counts
    after a non-empty stem."""
    path = f"regexp_extract({url}, '^[^:/?]+://[^/?#]*([^?#]*)', 1)"
    segment = f"regexp_extract({path}, '([^/;]*)(;[^/]*)?$', 1)"
    return f"lower(regexp_extract({segment}, '^.+\\\\.([^.]*)$', 1))"


def filter_reason(cfg: Config, excluded: Exclusions | None = None) -> str:
    """``filter_reason`` of a row: excluded (an operator's rule), depth (> crawl.max_depth),
    extension (in crawl.skip_extensions), length (> crawl.max_url_length), trap_pattern (a path
    segment repeated more than traps.max_segment_repeats times: crawllib.policy.traps), the
    first that holds, else null. Reads: url, host, domain, depth."""
    skip = sorted({e.lower() for e in cfg.crawl.skip_extensions})
    rules = excluded or Exclusions()
    return (
        f"CASE WHEN {matches_sql(rules, 'url', 'host', 'domain')} THEN {lit(FilterReason.EXCLUDED)} "
        f"WHEN depth > {cfg.crawl.max_depth} THEN {lit(FilterReason.DEPTH)} "
        f"WHEN {is_in(extension_of('url'), skip)} THEN {lit(FilterReason.EXTENSION)} "
        f"WHEN length(url) > {cfg.crawl.max_url_length} THEN {lit(FilterReason.LENGTH)} "
        f"WHEN {repeats_more_than('url', cfg.traps.max_segment_repeats)} "
        f"THEN {lit(FilterReason.TRAP_PATTERN)} END"
    )


def with_filter_reason(cfg: Config, excluded: Exclusions | None = None, df: str = "{df}") -> str:
    """Add ``filter_reason`` (:func:`filter_reason`). In: url, host, domain, depth."""
    return f"SELECT *, CAST({filter_reason(cfg, excluded)} AS string) AS filter_reason FROM {df}"


def _replace(df_columns: tuple[str, ...], **changed: str) -> str:
    """A select list of ``df_columns`` with some replaced by expressions."""
    return ", ".join(f"{changed[c]} AS `{c}`" if c in changed else f"`{c}`" for c in df_columns)


def filter_trapped(columns: tuple[str, ...], df: str = "{df}", trapped: str = "{trapped}") -> str:
    """Set filter_reason trap_pattern on rows without one whose (host, URL pattern) is in
    ``trapped`` (crawllib.transforms.traps.trapped_patterns: host, pattern).
    In: ``columns`` (url, host, filter_reason among them). Out: the same columns."""
    reason = (
        f"CASE WHEN d.filter_reason IS NULL AND p.host IS NOT NULL "
        f"THEN {lit(FilterReason.TRAP_PATTERN)} ELSE d.filter_reason END"
    )
    select = ", ".join(
        f"{reason} AS filter_reason" if c == "filter_reason" else f"d.`{c}`" for c in columns
    )
    return (
        f"SELECT {select} FROM (SELECT *, {url_pattern('url')} AS _pattern FROM {df}) d "
        f"LEFT JOIN (SELECT DISTINCT host, pattern FROM {trapped}) p "
        "ON d.host = p.host AND d._pattern = p.pattern"
    )


def filter_aliases(columns: tuple[str, ...], df: str = "{df}", aliased: str = "{aliased}") -> str:
    """Set filter_reason alias on rows without one whose host is an alias of another
    (crawllib.transforms.aliases.alias_hosts: host). In/out: ``columns`` (host, filter_reason
    among them)."""
    reason = (
        f"CASE WHEN d.filter_reason IS NULL AND a.host IS NOT NULL "
        f"THEN {lit(FilterReason.ALIAS)} ELSE d.filter_reason END"
    )
    select = ", ".join(
        f"{reason} AS filter_reason" if c == "filter_reason" else f"d.`{c}`" for c in columns
    )
    return (
        f"SELECT {select} FROM {df} d LEFT JOIN (SELECT DISTINCT host FROM {aliased}) a "
        "ON d.host = a.host"
    )


def attempted_in_crawldb(crawldb: str = "{crawldb}") -> tuple[str, str]:
    """Budget use counted in crawldb: its rows with last_gen set, per host (host, _host_used)
    and per domain (domain, _domain_used); an aggregation of the whole table."""
    tried = f"(SELECT host, domain FROM {crawldb} WHERE last_gen IS NOT NULL)"
    return (
        f"SELECT host, count(*) AS _host_used FROM {tried} GROUP BY host",
        f"SELECT domain, count(*) AS _domain_used FROM {tried} GROUP BY domain",
    )


def attempted_in_hosts(hosts: str = "{hosts}") -> tuple[str, str]:
    """Budget use from the hosts table's running totals (politeness.key = host: one row per
    host, urls_tried = its crawldb rows with last_gen set), per host and summed per domain."""
    tried = f"(SELECT slot, domain, urls_tried FROM {hosts} WHERE urls_tried > 0)"
    return (
        f"SELECT slot AS host, urls_tried AS _host_used FROM {tried}",
        f"SELECT domain, sum(urls_tried) AS _domain_used FROM {tried} GROUP BY domain",
    )


def host_totals_from_crawldb(crawldb: str = "{crawldb}") -> str:
    """Hosts rows that set the running totals budgets read (urls_tried, domain) to what
    crawldb says: the other columns null. In: crawldb. Out: HOSTS rows."""
    given = {"slot": "host", "urls_tried": "urls_tried", "domain": "domain"}
    blank = {f.name: "NULL" for f in HOSTS.fields if f.name not in given}
    return (
        f"SELECT {select_list(HOSTS, **blank, **given)} FROM (SELECT host, count(*) AS "
        f"urls_tried, first(domain) AS domain FROM {crawldb} WHERE last_gen IS NOT NULL "
        "GROUP BY host)"
    )


def apply_budgets(
    columns: tuple[str, ...],
    cfg: Config,
    df: str = "{df}",
    host_used: str = "{host_used}",
    domain_used: str = "{domain_used}",
) -> str:
    """Set filter_reason 'budget' on URLs past generate.host_budget or generate.domain_budget.

    A budget counts URLs, not attempts: URLs already attempted (``host_used``, ``domain_used``:
    :func:`attempted_in_crawldb` or :func:`attempted_in_hosts`) use it up and are never cut
    themselves (a retry is no new URL). Not-yet-attempted candidates without a filter_reason
    take the rest in generate.order, first per host, then per domain among those the host
    budget let through. In: ``columns`` (url_key, host, domain, depth, score, last_gen,
    filter_reason among them). Out: the same columns."""
    order = score_order(cfg)
    g = cfg.generate
    spends = "(filter_reason IS NULL AND last_gen IS NULL)"
    with_use = (
        f"SELECT d.*, {spends} AS _spends, coalesce(h._host_used, 0) AS _host_used, "
        f"coalesce(m._domain_used, 0) AS _domain_used FROM {df} d "
        f"LEFT JOIN {host_used} h ON d.host = h.host "
        f"LEFT JOIN {domain_used} m ON d.domain = m.domain"
    )
    over_host = (
        f"SELECT *, _spends AND _host_used + row_number() OVER (PARTITION BY _spends, host "
        f"ORDER BY {order}) > {g.host_budget} AS _over_host FROM ({with_use})"
    )
    over_domain = (
        f"SELECT *, _spends AND NOT _over_host AND _domain_used + row_number() OVER "
        f"(PARTITION BY _spends, _over_host, domain ORDER BY {order}) > {g.domain_budget} "
        f"AS _over_domain FROM ({over_host})"
    )
    reason = (
        f"CASE WHEN _over_host OR _over_domain THEN {lit(FilterReason.BUDGET)} "
        "ELSE filter_reason END"
    )
    return f"SELECT {_replace(columns, filter_reason=reason)} FROM ({over_domain})"


def cap_per_host(
    cfg: Config, order: str | None = None, df: str = "{df}", max_per_host: int | None = None
) -> str:
    """Add ``deferred``: true for rows past their host's share of generate.max_per_host.
    Revisits (:func:`is_revisit`) have ``floor(max_per_host * generate.revisit_share)``
    places, most overdue first (next_fetch_at, then ``order``); the other URLs the rest, in
    ``order`` (default depth, url_key; plan passes generate.order's); a kind with fewer URLs
    than its places leaves them to the other. Rows with a filter_reason are not ranked and
    never deferred. In: url_key, host, depth, fetched_at, next_fetch_at, filter_reason (and
    what ``order`` reads). Out: + deferred."""
    most = cfg.generate.max_per_host if max_per_host is None else max_per_host
    order = order or "depth ASC, url_key ASC"
    eligible, revisit = "(filter_reason IS NULL)", is_revisit()
    overdue = f"CASE WHEN {revisit} THEN unix_micros(next_fetch_at) END"
    kind = f"PARTITION BY {eligible}, host, {revisit}"
    revisit_places = int(most * cfg.generate.revisit_share)
    return (
        f"SELECT * EXCEPT (_rank, _mine, _all), {eligible} AND _rank > (CASE WHEN {revisit} "
        f"THEN {revisit_places} ELSE {most - revisit_places} END) + greatest(0, {most} - "
        f"(CASE WHEN {revisit} THEN {revisit_places} ELSE {most - revisit_places} END) - "
        f"(_all - _mine)) AS deferred FROM (SELECT *, row_number() OVER ({kind} ORDER BY "
        f"{overdue} ASC NULLS FIRST, {order}) AS _rank, count(*) OVER ({kind}) AS _mine, "
        f"count(*) OVER (PARTITION BY {eligible}, host) AS _all FROM {df})"
    )


def is_planned() -> str:
    return "(filter_reason IS NULL AND NOT deferred)"


def hold(by_host: bool, df: str = "{df}", held: str = "{held}") -> str:
    """Add ``held``: the row's slot, or with ``by_host`` (politeness.key = ip: each host of an
    address has a hosts row of its own) its host, is in ``held`` (slot: :func:`holds`); a held
    row without a filter_reason is ``deferred`` too. In: slot, host, filter_reason,
    deferred. Out: + held."""
    by = "(d.slot = h.slot OR d.host = h.slot)" if by_host else "d.slot = h.slot"
    marked = (
        f"SELECT d.*, EXISTS (SELECT 1 FROM (SELECT DISTINCT slot FROM {held}) h WHERE {by}) "
        f"AS _held FROM {df} d"
    )
    return (
        "SELECT * EXCEPT (deferred, _held), deferred OR (_held AND filter_reason IS NULL) "
        f"AS deferred, _held AS held FROM ({marked})"
    )


def no_hold(df: str = "{df}") -> str:
    return f"SELECT *, FALSE AS held FROM {df}"


def cap_by_time(cfg: Config, order: str, df: str = "{df}", delays: str = "{delays}") -> str:
    """Add ``over_time``: planned rows (no filter_reason, not deferred) past what their slot
    can fetch in generate.fetch_seconds (0: no limit) at its delay: 1 + fetch_seconds / delay
    URLs, the delay being the slot's in the hosts table (``delays``: slot, delay; its
    Crawl-delay, adaptive delay or backoff) and at least politeness.default_delay. With
    politeness.key = ip each host is capped so at its own row's delay, then the address at
    its row's (at least politeness.address_delay, else min_address_delay). Revisits first
    (most overdue), then ``order``; they are ``deferred`` too. In: slot, host, filter_reason,
    deferred, fetched_at, next_fetch_at and what ``order`` reads. Out: + over_time."""
    seconds = cfg.generate.fetch_seconds
    if seconds <= 0:
        return f"SELECT *, FALSE AS over_time FROM {df}"
    p = cfg.politeness
    overdue = f"CASE WHEN {is_revisit()} THEN unix_micros(next_fetch_at) END"

    def over(planned: str, key: str, least: float, delay: str) -> str:
        delay = f"greatest({lit(float(least))}, coalesce({delay}, {lit(float(least))}))"
        quota = f"CASE WHEN {delay} > 0 THEN floor({lit(float(seconds))} / {delay}) + 1 END"
        rank = (
            f"row_number() OVER (PARTITION BY {planned}, {key} ORDER BY {overdue} ASC NULLS "
            f"LAST, {order})"
        )
        return f"({planned} AND {quota} IS NOT NULL AND {rank} > {quota})"

    slot_delay = f"(SELECT d.*, s.delay AS _slot_delay FROM {df} d LEFT JOIN (SELECT slot, max(delay) AS delay FROM {delays} GROUP BY slot) s ON d.slot = s.slot)"
    if p.key != "ip":
        flagged = (
            f"SELECT *, {over(is_planned(), 'slot', p.default_delay, '_slot_delay')} AS _over "
            f"FROM {slot_delay}"
        )
        return (
            "SELECT * EXCEPT (deferred, _over, _slot_delay), deferred OR _over AS deferred, "
            f"_over AS over_time FROM ({flagged})"
        )
    host_delay = (
        f"(SELECT d.*, s.delay AS _host_delay FROM {slot_delay} d LEFT JOIN (SELECT slot, "
        f"max(delay) AS delay FROM {delays} GROUP BY slot) s ON d.host = s.slot)"
    )
    by_host = (
        f"SELECT *, {over(is_planned(), 'host', p.default_delay, '_host_delay')} AS _over_host "
        f"FROM {host_delay}"
    )
    least = p.address_delay or p.min_address_delay
    planned_left = f"({is_planned()} AND NOT _over_host)"
    by_address = (
        f"SELECT *, _over_host OR {over(planned_left, 'slot', least, '_slot_delay')} AS _over "
        f"FROM ({by_host})"
    )
    return (
        "SELECT * EXCEPT (deferred, _over, _over_host, _slot_delay, _host_delay), "
        f"deferred OR _over AS deferred, _over AS over_time FROM ({by_address})"
    )


def cap_generation(top_n: int, order: str, df: str = "{df}") -> str:
    """Add ``over_top``: planned rows (no filter_reason, not deferred) past the first
    ``top_n`` of the whole generation in ``order`` (generate.top_n; 0: no cap); they are
    ``deferred`` too. One ranking over all hosts: a generation's size allows it.
    In: filter_reason, deferred and what ``order`` reads. Out: + over_top."""
    if top_n <= 0:
        return f"SELECT *, FALSE AS over_top FROM {df}"
    over = f"({is_planned()} AND row_number() OVER (PARTITION BY {is_planned()} ORDER BY {order}) > {top_n})"
    flagged = f"SELECT *, {over} AS _over FROM {df}"
    return (
        "SELECT * EXCEPT (deferred, _over), deferred OR _over AS deferred, _over AS over_top "
        f"FROM ({flagged})"
    )


def holds(cfg: Config, now: float | None = None, hosts: str = "{hosts}") -> str:
    """Why and until when a slot's URLs wait, without an attempt, for a later generation: a
    Retry-After that ends more than fetch.slice_grace_seconds from now (hosts.not_before), a
    down host's cool-down or a robots.txt retry not over (crawllib.engine.slots), or a
    Crawl-delay above politeness.max_crawl_delay not honoured (no end). ``now``: the crawl's
    clock (epoch seconds; None: the real one). In: hosts rows. Out: slot, hold (a
    crawllib.core.vocab.Waiting word), until (null: no end)."""
    grace = cfg.fetch.slice_grace_seconds
    at = "current_timestamp()" if now is None else timestamp_of(now)
    later = f"not_before > timestamp_seconds(unix_micros({at}) / 1000000 + {lit(float(grace))})"
    # the engine defers a cooling-down host or one waiting for its robots.txt at once, grace
    # or not: planning it would only spend a generation
    waits = is_in("not_before_reason", (WaitReason.DOWN, WaitReason.ROBOTS))
    timed = f"({later} OR ({waits} AND not_before > {at}))"
    too_slow = (
        "FALSE"
        if cfg.politeness.honor_long_crawl_delay
        else f"coalesce(crawl_delay > {lit(float(cfg.politeness.max_crawl_delay))}, FALSE)"
    )
    return (
        f"SELECT slot, CASE WHEN {timed} THEN coalesce(not_before_reason, "
        f"{lit(Waiting.RETRY_AFTER)}) ELSE {lit(Waiting.CRAWL_DELAY)} END AS hold, "
        f"CASE WHEN {timed} THEN not_before END AS until FROM {hosts} "
        f"WHERE coalesce({timed}, FALSE) OR {too_slow}"
    )


def held_slots(cfg: Config, now: float | None = None, hosts: str = "{hosts}") -> str:
    """The slots whose URLs wait, without an attempt, for a later generation (:func:`holds`).
    In: hosts rows. Out: slot."""
    return f"SELECT DISTINCT slot FROM ({holds(cfg, now, hosts)})"


def with_hold(extra: tuple[str, ...], by_host: bool, df: str = "{df}", held: str = "{held}") -> str:
    """Add the columns ``extra`` of ``held`` (rows keyed by a hosts row's slot: :func:`holds`)
    of the row's slot, else, with ``by_host`` (politeness.key = ip), of its host; null where
    neither is held. In: slot (and host). Out: + ``extra``."""
    if not by_host:
        picked = ", ".join(f"s.`{c}` AS `{c}`" for c in extra)
        return f"SELECT d.*, {picked} FROM {df} d LEFT JOIN {held} s ON d.slot = s.slot"
    picked = ", ".join(
        f"CASE WHEN s.slot IS NOT NULL THEN s.`{c}` ELSE h.`{c}` END AS `{c}`" for c in extra
    )
    return (
        f"SELECT d.*, {picked} FROM {df} d LEFT JOIN {held} s ON d.slot = s.slot "
        f"LEFT JOIN {held} h ON d.host = h.slot"
    )


def with_slot(cfg: Config, df: str = "{df}", addresses: str | None = None) -> str:
    """Add ``slot``, the politeness key of a row (politeness.key): its host, its registered
    domain, or with ``ip`` its host's address in ``addresses`` (dns rows: host, address), the
    host itself when it has none (a failed lookup: fetch records the failure per URL).
    In: host, domain. Out: + slot."""
    key = cfg.politeness.key
    if key == "domain":
        return f"SELECT *, domain AS slot FROM {df}"
    if key != "ip" or addresses is None:
        return f"SELECT *, host AS slot FROM {df}"
    return (
        f"SELECT d.*, coalesce(a.address, d.host) AS slot FROM {df} d LEFT JOIN (SELECT host, "
        f"max(address) AS address FROM {addresses} WHERE address IS NOT NULL GROUP BY host) a "
        "ON d.host = a.host"
    )


def candidate_hosts(
    gen: int, as_of: float | None = None, frontier: str = "{frontier}", crawldb: str = "{crawldb}"
) -> str:
    """The distinct hosts plan_decisions may choose URLs of (new frontier URLs, due crawldb
    URLs, due revisits when ``as_of`` is given): the names to resolve for politeness.key = ip.
    Out: host."""
    new = new_candidates(f"({dedup_frontier(frontier)})", crawldb)
    parts = [
        f"SELECT host FROM ({new})",
        f"SELECT host FROM ({pending_from_crawldb(gen, as_of, crawldb)})",
    ]
    if as_of is not None:
        parts.append(f"SELECT host FROM ({due_revisits(gen, as_of, crawldb)})")
    return "SELECT DISTINCT host FROM (" + " UNION ALL ".join(parts) + ")"


def with_slice(slices: int, order: str | None = None, df: str = "{df}") -> str:
    """Add ``slice``: the slot's URLs in ``order`` (default depth, url_key; plan passes
    generate.order's, so a slot's best URLs come in its first slices) dealt round-robin over
    ``slices`` slices, the same on every run. Every slice holds every slot (that has URLs
    enough), so each slice keeps all hosts in flight at once and lasts about 1/slices of the
    politeness-bound time. In: slot, depth, url_key (and what ``order`` reads). Out: + slice."""
    order = order or "depth ASC, url_key ASC"
    return (
        f"SELECT *, CAST(pmod(row_number() OVER (PARTITION BY slot ORDER BY {order}) - 1, "
        f"{slices}) AS int) AS slice FROM {df}"
    )


@dataclasses.dataclass(frozen=True)
class PlanInputs:
    """Which optional inputs :func:`plan_decisions` reads (each a relation the stage binds
    under the same name; absent: that rule does not apply, or its default).

    ``held``: slots held back (:func:`held_slots`); ``addresses``: the dns table, the slots'
    addresses (:func:`with_slot`); ``used``: the budgets' use as ``host_used`` and
    ``domain_used`` (:func:`attempted_in_hosts`; absent: :func:`attempted_in_crawldb`);
    ``as_of``: the generation's clock, epoch seconds (revisits are due by it); ``excluded``:
    the operator's exclusions; ``trapped``: URL patterns judged traps; ``delays``: each
    slot's delay (:func:`cap_by_time`); ``aliased``: hosts judged aliases; ``lowered``: the
    depths shorter paths lower (url_key, depth: crawllib.stages.depths)."""

    held: bool = False
    addresses: bool = False
    used: bool = False
    as_of: float | None = None
    excluded: Exclusions | None = None
    trapped: bool = False
    delays: bool = False
    aliased: bool = False
    lowered: bool = False


def plan_decisions(cfg: Config, gen: int, inputs: PlanInputs = PlanInputs()) -> str:
    """Candidates of ``gen`` with every decision: new frontier URLs (deduped, not in crawldb),
    due crawldb URLs and, when ``as_of`` is given and recrawl.policy revisits, due revisits;
    given their slot, filtered (exclusions apply to revisits too; the other rules never to a
    revisit: it was fetched under the rules of its time; traps; aliases, whose revisits are
    filtered too), budgeted, capped per host (generate.revisit_share of each host's places
    kept for revisits), held, capped by time (generate.fetch_seconds) and per generation
    (generate.top_n), in generate.order. ``lowered``: the depths shorter paths lower, applied
    to new and known URLs before any decision (a URL filtered for depth that comes within
    crawl.max_depth is a candidate again). Inputs: ``{frontier}`` (rows of gen),
    ``{crawldb}`` and those ``inputs`` names. Out: DECIDED_COLUMNS."""
    order = score_order(cfg)
    crawldb = "{crawldb}"
    named: list[tuple[str, str]] = [
        ("_offers", dedup_frontier()),
        ("_fresh", new_candidates("_offers", crawldb)),
    ]
    if inputs.lowered:
        named.append(("_fresh_lowered", with_depths("_fresh")))
        named.append(("_crawldb", with_lowered_depths(cfg, gen, crawldb)))
        fresh, known_db, lowered = "_fresh_lowered", "_crawldb", True
    else:
        fresh, known_db, lowered = "_fresh", crawldb, False
    known = [
        _known(
            known_db,
            f"{is_in('status', PENDING_STATUSES)} AND {is_due(gen, inputs.as_of)}",
            lowered,
        )
    ]
    if inputs.as_of is not None and revisits(cfg.recrawl):
        due = (
            f"next_fetch_at <= {timestamp_of(inputs.as_of)} AND coalesce(next_gen, {gen}) <= {gen}"
        )
        known.append(_known(known_db, f"{is_in('status', REVISITED_STATUSES)} AND {due}", lowered))
    candidates = " UNION ALL ".join(
        [f"SELECT {names(CANDIDATE_COLUMNS)} FROM ({frontier_as_crawldb_rows(gen, fresh)})"]
        + [f"SELECT {names(CANDIDATE_COLUMNS)} FROM ({q})" for q in known]
    )
    named.append(("_candidates", candidates))
    named.append(
        ("_slotted", with_slot(cfg, "_candidates", "{addresses}" if inputs.addresses else None))
    )
    named.append(("_reasoned", with_filter_reason(cfg, inputs.excluded, "_slotted")))
    columns = (*CANDIDATE_COLUMNS, "slot", "filter_reason")
    last = "_reasoned"
    if inputs.trapped:
        named.append(("_trapped", filter_trapped(columns, last)))
        last = "_trapped"
    # the rules of a URL's first visit never apply to a revisit, but an operator's exclusion
    keep = f"CASE WHEN NOT {is_revisit()} OR filter_reason = {lit(FilterReason.EXCLUDED)} THEN filter_reason END"
    named.append(("_revisits_kept", f"SELECT {_replace(columns, filter_reason=keep)} FROM {last}"))
    last = "_revisits_kept"
    if inputs.aliased:
        named.append(("_aliased", filter_aliases(columns, last)))
        last = "_aliased"
    if inputs.used:
        host_used, domain_used = "{host_used}", "{domain_used}"
    else:
        host_q, domain_q = attempted_in_crawldb(crawldb)
        named += [("_host_used", host_q), ("_domain_used", domain_q)]
        host_used, domain_used = "_host_used", "_domain_used"
    named.append(("_budgeted", apply_budgets(columns, cfg, last, host_used, domain_used)))
    named.append(("_capped", cap_per_host(cfg, order, "_budgeted")))
    by_host = cfg.politeness.key == "ip"
    named.append(("_held", hold(by_host, "_capped") if inputs.held else no_hold("_capped")))
    delays = (
        "{delays}"
        if inputs.delays
        else "(SELECT CAST(NULL AS string) AS slot, CAST(NULL AS double) AS delay WHERE FALSE)"
    )
    named.append(("_timed", cap_by_time(cfg, order, "_held", delays)))
    named.append(("_topped", cap_generation(cfg.generate.top_n, order, "_timed")))
    return steps(*named, final=f"SELECT {names(DECIDED_COLUMNS)} FROM _topped")


def slice_count(planned: int, busiest_slot: int, cfg: Config) -> int:
    """Slices for a generation of ``planned`` URLs whose busiest slot has ``busiest_slot``:
    at most storage.fetch_slices, and few enough that each holds storage.min_slice_urls URLs
    and lasts storage.min_slice_seconds at politeness.default_delay (every slice holds every
    slot, so it lasts about busiest_slot * delay / slices)."""
    s = cfg.storage
    by_urls = -(-planned // s.min_slice_urls)
    seconds = busiest_slot * cfg.politeness.default_delay
    by_time = int(seconds // s.min_slice_seconds) if s.min_slice_seconds > 0 else s.fetch_slices
    return max(1, min(s.fetch_slices, by_urls, by_time))


def count_decisions(max_per_host: int, decided: str = "{decided}") -> str:
    """One row of counts: candidates, planned, filtered_<reason>, deferred_cap (per-host cap),
    deferred_held, deferred_time (generate.fetch_seconds), deferred_top_n (generate.top_n),
    hosts, revisits (planned URLs with a stored version); and of the slots: ``urls``, the
    planned URLs of the busiest slot (0 if none), ``roomy``, the slots that planned fewer than
    ``max_per_host`` URLs (room to follow links); and ``_changes`` / ``_known_changes``, the
    rows crawldb_changes keeps, of them known URLs. In: DECIDED_COLUMNS."""
    planned = is_planned()
    filtered = ", ".join(
        f"count_if(filter_reason = {lit(r)}) AS filtered_{r}" for r in words(FilterReason)
    )
    counts = (
        f"SELECT count(*) AS candidates, count_if({planned}) AS planned, {filtered}, "
        "count_if(deferred AND NOT held AND NOT over_time AND NOT over_top) AS deferred_cap, "
        "count_if(deferred AND held) AS deferred_held, count_if(over_time) AS deferred_time, "
        "count_if(over_top) AS deferred_top_n, "
        f"count(DISTINCT CASE WHEN {planned} THEN host END) AS hosts, "
        f"count_if({planned} AND {is_revisit()}) AS revisits, "
        f"count_if({is_changed()}) AS _changes, "
        f"count_if({is_changed()} AND NOT is_new) AS _known_changes FROM {decided}"
    )
    slots = (
        "SELECT coalesce(max(n), 0) AS urls, "
        f"count_if(n < {max_per_host}) AS roomy FROM (SELECT slot, count(*) AS n FROM "
        f"{decided} WHERE {planned} GROUP BY slot)"
    )
    return f"SELECT * FROM ({counts}) CROSS JOIN ({slots})"


def to_fetchlist(
    gen: int, slices: int, order: str | None = None, decided: str = "{decided}"
) -> str:
    """The chosen rows (no filter_reason, not deferred) as fetchlist rows of ``gen``, dealt
    over ``slices`` slices (:func:`slice_count`) in ``order`` (:func:`with_slice`).
    In: DECIDED_COLUMNS. Out: fetchlist columns (known null: crawllib.transforms.fetch_inputs.
    with_known_keys sets it)."""
    sliced = with_slice(slices, order, f"(SELECT * FROM {decided} WHERE {is_planned()})")
    return f"SELECT {select_list(FETCHLIST, gen=lit(gen), known='NULL')} FROM ({sliced})"


def is_changed() -> str:
    """The decided rows that crawldb_changes keeps: new, newly filtered, or with a depth a
    shorter path lowered."""
    return "(is_new OR filter_reason IS NOT NULL OR lowered)"


def crawldb_changes(decided: str = "{decided}") -> str:
    """Rows to MERGE into crawldb: every new URL (queued, or filtered with its reason), known
    URLs newly filtered (status filtered, reason), known URLs whose depth dropped. Filtered
    rows get next_gen null: they are never due again. A deferred URL is not written: it stays
    due, and the next plan ranks it again by the same total order; chosen known URLs do not
    change either (fetch and update will). In: DECIDED_COLUMNS. Out: crawldb columns."""
    filtered = "filter_reason IS NOT NULL"
    given = {
        "status": f"CASE WHEN {filtered} THEN {lit(Status.FILTERED)} ELSE status END",
        "reason": "coalesce(filter_reason, reason)",
        "next_gen": f"CASE WHEN {filtered} THEN NULL ELSE next_gen END",
        "updated_at": "current_timestamp()",
    }
    return f"SELECT {select_list(CRAWLDB, **given)} FROM {decided} WHERE {is_changed()}"


def reaches_closer(cfg: Config, frontier: str = "{frontier}", crawldb: str = "{crawldb}") -> str:
    """Frontier rows offering a known URL a depth that changes what plan does: a URL filtered
    for depth brought within crawl.max_depth, or a page (crawllib.transforms.depth.expands)
    brought close enough that its links are within it. In: frontier rows; crawldb.
    Out: url_key."""
    offers = f"(SELECT url_key, depth AS _offer FROM {frontier})"
    known = rows_of(crawldb, offers)
    max_depth = cfg.crawl.max_depth
    revives = f"(k.status = {lit(Status.FILTERED)} AND k.reason = {lit(FilterReason.DEPTH)})"
    return (
        f"SELECT DISTINCT o.url_key FROM ({known}) k JOIN {offers} o ON k.url_key = o.url_key "
        f"WHERE o._offer < k.depth AND (({revives} AND o._offer <= {max_depth}) OR "
        f"({expands(cfg, 'k.')} AND o._offer < {max_depth}))"
    )


def with_depths(df: str, lowered: str = "{lowered}") -> str:
    """Rows (url_key, depth, ...) with the smaller of their depth and ``lowered``'s
    (url_key, depth). Out: the same columns."""
    return (
        f"SELECT d.* EXCEPT (depth), least(d.depth, l.depth) AS depth FROM {df} d LEFT JOIN "
        f"{lowered} l ON d.url_key = l.url_key"
    )


def with_lowered_depths(
    cfg: Config, gen: int, crawldb: str = "{crawldb}", lowered: str = "{lowered}"
) -> str:
    """crawldb rows with the depths ``lowered`` (url_key, depth) gives: ``depth`` the smaller,
    ``lowered`` true where it dropped; a URL filtered for depth that is now within
    crawl.max_depth is queued for ``gen`` again (status queued, reason null, next_gen gen),
    as a new URL would be. In: crawldb columns. Out: the same columns + lowered."""
    dropped = "(l.depth IS NOT NULL AND l.depth < coalesce(c.depth, -1))"
    revived = (
        f"({dropped} AND c.status = {lit(Status.FILTERED)} AND c.reason = "
        f"{lit(FilterReason.DEPTH)} AND l.depth <= {cfg.crawl.max_depth})"
    )
    changed = {
        "status": f"CASE WHEN {revived} THEN {lit(Status.QUEUED)} ELSE c.status END",
        "reason": f"CASE WHEN {revived} THEN NULL ELSE c.reason END",
        "next_gen": f"CASE WHEN {revived} THEN {gen} ELSE c.next_gen END",
        "depth": f"CASE WHEN {dropped} THEN l.depth ELSE c.depth END",
    }
    select = ", ".join(f"{changed[n]} AS `{n}`" if n in changed else f"c.`{n}`" for n in _CRAWLDB)
    return (
        f"SELECT {select}, {dropped} AS lowered FROM {crawldb} c LEFT JOIN {lowered} l "
        "ON c.url_key = l.url_key"
    )


def lowered_rows(
    cfg: Config,
    gen: int,
    crawldb: str = "{crawldb}",
    lowered: str = "{lowered}",
    decided: str = "{decided}",
) -> str:
    """crawldb rows whose depth ``lowered`` lowers and that are no candidate of ``decided``
    (fetched pages, URLs filtered or gone...): their depth is all that changes (a URL filtered
    for depth stays filtered if still past crawl.max_depth). Out: crawldb columns."""
    rows = with_lowered_depths(cfg, gen, f"({rows_of(crawldb, lowered)})", lowered)
    return (
        f"SELECT {names(_CRAWLDB, 'r')} FROM ({rows}) r LEFT ANTI JOIN {decided} d "
        "ON r.url_key = d.url_key WHERE r.lowered"
    )
