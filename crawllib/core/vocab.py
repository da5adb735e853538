"""The crawl's words: fetch outcomes, crawldb statuses, reasons, error kinds, stages and states.

Every word a table holds or a stage tests for is spelled here once, as a plain string constant
(plain ``str``, not an Enum: the values travel through pickled Spark rows and SQL text). Each
class lists one column's vocabulary; ``words(cls)`` gives all its values in declaration order.
Pure Python: the fetch engine and the Spark code both import it.
"""

from __future__ import annotations

import re
from typing import Final


def words(vocabulary: type) -> tuple[str, ...]:
    """The values of a vocabulary class, in declaration order."""
    return tuple(v for k, v in vars(vocabulary).items() if k.isupper() and isinstance(v, str))


def sql_list(values: tuple[str, ...] | list[str]) -> str:
    """``'a', 'b'``: words for an SQL ``IN (...)``; they are identifiers, never user text."""
    return ", ".join(f"'{v}'" for v in values)


class Outcome:
    """``fetches.outcome``: what became of one URL in a fetch (see crawllib.engine.engine)."""

    OK: Final = "ok"
    REDIRECT: Final = "redirect"
    HTTP_ERROR: Final = "http_error"
    ROBOTS_DENIED: Final = "robots_denied"
    BLOCKED: Final = "blocked"
    ERROR: Final = "error"
    DEFERRED: Final = "deferred"
    NOT_MODIFIED: Final = "not_modified"  # 304 to a conditional GET: the stored version stays


# Outcomes of a successful visit: the URL's stored version is current as of the fetch.
VISITED_OUTCOMES: Final = (Outcome.OK, Outcome.NOT_MODIFIED)


class Status:
    """``crawldb.status``: the state of a known URL (docs/tables.md)."""

    QUEUED: Final = "queued"
    FETCHED: Final = "fetched"
    DUPLICATE: Final = "duplicate"
    NOINDEX: Final = "noindex"  # fetched, but the page asks not to be indexed: no text kept
    REDIRECTED: Final = "redirected"
    GONE: Final = "gone"
    FAILED: Final = "failed"
    DEAD: Final = "dead"
    ROBOTS_DENIED: Final = "robots_denied"
    BLOCKED: Final = "blocked"
    FILTERED: Final = "filtered"


# Statuses of URLs still to fetch: plan takes them when due (next_gen).
PENDING_STATUSES: Final = (Status.QUEUED, Status.FAILED)
# Statuses of URLs that hold a stored version: plan takes them again once next_fetch_at is
# past (a revisit).
REVISITED_STATUSES: Final = (Status.FETCHED, Status.DUPLICATE, Status.NOINDEX)


class FilterReason:
    """``crawldb.reason`` of a ``filtered`` URL: which rule of plan dropped it."""

    DEPTH: Final = "depth"
    EXTENSION: Final = "extension"
    LENGTH: Final = "length"
    BUDGET: Final = "budget"
    EXCLUDED: Final = "excluded"  # an operator's exclusion rule (crawl.exclude, exclude_file)
    TRAP_PATTERN: Final = "trap_pattern"  # a URL-pattern trap (crawllib.stages.traps)
    ALIAS: Final = "alias"  # the host copies another host (crawllib.store.aliases)


class IntervalSource:
    """``crawldb.interval_source``: what set a URL's ``fetch_interval``."""

    DEFAULT: Final = "default"  # recrawl.default_interval_hours (a first visit, or policy fixed)
    ADAPTIVE: Final = "adaptive"  # adapted to whether its text changed between visits
    SITEMAP: Final = "sitemap"  # a sitemap's changefreq


class FrontierReason:
    """``frontier.reason``: how a URL was found."""

    SEED: Final = "seed"
    LINK: Final = "link"
    REDIRECT: Final = "redirect"
    SITEMAP: Final = "sitemap"


class DuplicateKind:
    """``texts.duplicate_kind``."""

    EXACT: Final = "exact"
    NEAR: Final = "near"
    CANONICAL: Final = "canonical"  # the page names another URL its canonical
    SOFT_404: Final = "soft_404"  # its text is its host's answer to a missing page (a probe)


class NonDocument:
    """``texts.non_document``: why a page is not a document (crawllib.content.nondocument)."""

    SOFT_404: Final = "soft_404"  # it says the page is missing (a 200 "page not found")
    PARKED: Final = "parked"  # a parked or for-sale domain
    PLACEHOLDER: Final = "placeholder"  # a server's default page, "under construction"


# Marks a page gets from what it or its host says, not from an earlier copy: such a page is
# never the first copy of another.
STATED_DUPLICATES: Final = (DuplicateKind.CANONICAL, DuplicateKind.SOFT_404)


class Directive:
    """Robots directives (``texts.directives``) the crawler acts on."""

    NOINDEX: Final = "noindex"
    NOFOLLOW: Final = "nofollow"
    NOAI: Final = "noai"  # reserves text-and-data mining (tdm_reserved); the text export skips it


class Record:
    """The kinds of record the fetch engine yields."""

    FETCH: Final = "fetch"
    ROBOTS: Final = "robots"
    HOST: Final = "host"  # a slot's politeness state at the end of the call (the hosts table)
    SITEMAP: Final = "sitemap"  # a sitemap document fetched and read (the sitemaps table)
    PROBE: Final = "probe"  # a host's answer to a URL no page links to (soft-404 detection)
    # every slot's state at a moment of the call, for the task's journal (in no table)
    CHECKPOINT: Final = "checkpoint"


# The soft-404 probe's path (crawllib.engine.engine): PROBE_PREFIX with the robots agent
# (robots.agent), then PROBE_HEX random hex digits and ".html". No page links to it: what the
# host answers is how it answers a missing page.
PROBE_PREFIX: Final = "/{agent}-probe-"
PROBE_HEX: Final = 16
_PROBE_PATH = re.compile(
    re.escape(PROBE_PREFIX).replace(re.escape("{agent}"), "[A-Za-z_-]+")
    + f"[0-9a-f]{{{PROBE_HEX}}}\\.html"
)


def probe_path(agent: str, token: str) -> str:
    """The probe's path for a robots agent and a token of PROBE_HEX hex digits."""
    return PROBE_PREFIX.format(agent=agent) + token + ".html"


def is_probe_path(path: str) -> bool:
    """Whether a request path (no query) is a soft-404 probe's, for any agent."""
    return _PROBE_PATH.fullmatch(path) is not None


class DelaySource:
    """``hosts.delay_source``: what sets a slot's delay between two requests."""

    DEFAULT: Final = "default"  # politeness.default_delay
    CRAWL_DELAY: Final = "crawl_delay"  # robots.txt Crawl-delay
    BACKOFF: Final = "backoff"  # doubled after consecutive 5xx/429 answers
    ADAPTIVE: Final = "adaptive"  # response_factor x the recent response time (politeness.adaptive)
    ADDRESS: Final = "address"  # an address row's rule: politeness.address_delay


class HostKind:
    """``hosts.kind``: what a hosts row paces. With politeness.key = ip a slot is an address
    and each of its hosts keeps its own row beside the address's."""

    HOST: Final = "host"
    DOMAIN: Final = "domain"  # politeness.key = domain: every host of a registered domain
    ADDRESS: Final = "address"  # politeness.key = ip: the server, whatever host was asked


class RobotsStatus:
    """``hosts.robots_state``: what the slot's robots.txt allowed in its last engine call."""

    OK: Final = "ok"  # its rules apply (a 4xx robots.txt: everything allowed)
    UNAVAILABLE: Final = "unavailable"  # 5xx or unreadable: nothing fetched, retried later
    UNREACHABLE: Final = "unreachable"  # DNS/connect failure: nothing fetched
    BLOCKED: Final = "blocked"  # network safety refused it


class WaitReason:
    """``hosts.not_before_reason``: why no request may start before ``not_before``."""

    RETRY_AFTER: Final = "retry_after"  # the server's Retry-After
    DOWN: Final = "down"  # consecutive DNS/connect failures: a cool-down
    ROBOTS: Final = "robots"  # robots.txt failed (5xx, timeout, unreachable): asked again then


class Waiting:
    """What URLs that are not due yet wait for (``crawl run``'s last line, ``plan.waits``)."""

    RETRY: Final = "retry"  # a failed URL's backoff (crawldb.not_before)
    RETRY_AFTER: Final = WaitReason.RETRY_AFTER  # its host's Retry-After
    DOWN: Final = WaitReason.DOWN  # its host's cool-down
    ROBOTS: Final = WaitReason.ROBOTS  # its host's robots.txt retry
    CRAWL_DELAY: Final = "crawl_delay"  # its host's Crawl-delay above the maximum honoured
    REVISIT: Final = "revisit"  # a fetched page's next visit (crawldb.next_fetch_at)


class RobotsOutcome:
    """``outcome`` of a robots record: the host had no robots row yet, or its row had expired."""

    NEW: Final = "new"
    REFRESHED: Final = "refreshed"


class ErrorKind:
    """``fetches.error_kind`` (and ``robots.error_kind``) words the code decides on.

    Network-safety kinds of ``blocked`` rows are :class:`BlockedKind`.
    """

    # error: the request failed
    DNS: Final = "dns"
    CONNECT: Final = "connect"
    CONNECT_TIMEOUT: Final = "connect_timeout"
    SSL: Final = "ssl"
    TIMEOUT: Final = "timeout"
    DISCONNECTED: Final = "disconnected"
    BAD_RESPONSE: Final = "bad_response"
    DECOMPRESSED_TOO_LARGE: Final = "decompressed_too_large"
    DECODE_ERROR: Final = "decode_error"
    UNSUPPORTED_ENCODING: Final = "unsupported_encoding"
    INVALID_URL: Final = "invalid_url"
    CLIENT_ERROR: Final = "client_error"
    INTERNAL: Final = "internal"
    # http_error / redirect without a usable target
    NO_LOCATION: Final = "no_location"
    BAD_LOCATION: Final = "bad_location"
    # robots_denied because robots.txt could not be read (retryable)
    ROBOTS_UNAVAILABLE: Final = "robots_unavailable"
    # blocked before any request
    SCHEME: Final = "scheme"
    RESOLVE_ONLY: Final = "resolve_only"
    # deferred: not attempted in this fetch
    DEADLINE: Final = "deadline"
    MAX_URLS_PER_HOST: Final = "max_urls_per_host"
    HOST_UNREACHABLE: Final = "host_unreachable"
    # deferred, no request: the slot's next allowed request lies past the slice's planned end
    # (or a Retry-After above fetch.retry_after_cap), or its Crawl-delay is above the maximum
    RETRY_AFTER: Final = "retry_after"
    BACKOFF: Final = "backoff"
    CRAWL_DELAY: Final = "crawl_delay"
    ADAPTIVE: Final = "adaptive"  # the delay that follows the server's response time
    CRAWL_DELAY_TOO_LONG: Final = "crawl_delay_too_long"
    # robots.txt fetch only
    TOO_MANY_REDIRECTS: Final = "too_many_redirects"
    BLOCKED_REDIRECT: Final = "blocked_redirect"
    # robots.txt fetch only: the host a redirect led to is down (a HOST_DOWN_KINDS kind there)
    REDIRECT_DNS: Final = "redirect_dns"
    REDIRECT_CONNECT: Final = "redirect_connect"
    REDIRECT_CONNECT_TIMEOUT: Final = "redirect_connect_timeout"
    REDIRECT_SSL: Final = "redirect_ssl"


class ExtractFailure:
    """The word a ``texts.error`` (and a fetch record's extraction error) starts with when the
    extraction of a page was stopped from outside (`crawllib.content.extract_worker`); other errors
    are ``ExceptionType: message``."""

    TIMEOUT: Final = "extract_timeout"  # past extract.max_seconds: its process was killed
    CRASHED: Final = "extract_crashed"  # its process died (a crash, out of memory)
    MEMORY: Final = "extract_memory"  # past extract.max_memory_mb: its process was killed


class BlockedKind:
    """``error_kind`` of a ``blocked`` row refused by network safety (crawllib.policy.netsafety):
    the address, or the literal host, is one the crawler must not contact."""

    METADATA_ADDRESS: Final = "metadata_address"
    LOOPBACK_ADDRESS: Final = "loopback_address"
    LINK_LOCAL_ADDRESS: Final = "link_local_address"
    MULTICAST_ADDRESS: Final = "multicast_address"
    UNSPECIFIED_ADDRESS: Final = "unspecified_address"
    PRIVATE_ADDRESS: Final = "private_address"
    RESERVED_ADDRESS: Final = "reserved_address"


BLOCKED_KINDS: Final = words(BlockedKind)


# Failures another attempt would only repeat: the URL is dead at once.
PERMANENT_ERRORS: Final = (ErrorKind.DECOMPRESSED_TOO_LARGE,)
# Connection-level failures: the host is down rather than the URL broken.
HOST_DOWN_KINDS: Final = frozenset(
    {ErrorKind.DNS, ErrorKind.CONNECT, ErrorKind.CONNECT_TIMEOUT, ErrorKind.SSL}
)
# Of those, the ones that say the server is down, whichever of its hosts was asked (a name that
# does not resolve, or a certificate, is one host's).
SERVER_DOWN_KINDS: Final = frozenset({ErrorKind.CONNECT, ErrorKind.CONNECT_TIMEOUT})


class Stage:
    """The stages of a generation, in order (``generations.stage``)."""

    PLAN: Final = "plan"
    FETCH: Final = "fetch"
    UPDATE: Final = "update"
    # A stage of its own before update took its work: rows of older crawl roots say it;
    # ``crawl parse`` now runs update, extracting again from the raw pages with --force.
    PARSE: Final = "parse"


STAGES: Final = (Stage.PLAN, Stage.FETCH, Stage.UPDATE)
# A generations row that is no stage: the operator accepted the tables' versions as they are.
ACCEPT_STATE: Final = "accept-state"


class StageState:
    """``generations.state`` of a stage run."""

    RUNNING: Final = "running"
    DONE: Final = "done"
    FAILED: Final = "failed"


# Every table of a crawl root, in crawllib.store.schemas.TABLES order (a test keeps the two equal).
TABLE_NAMES: Final = (
    "frontier",
    "crawldb",
    "fetchlist",
    "fetches",
    "pages",
    "texts",
    "links",
    "robots",
    "hosts",
    "dns",
    "sitemaps",
    "traps",
    "aliases",
    "probes",
    "generations",
    "warc_index",
)

# Tables a crawl root made by an older crawllib may lack: the first command that writes
# creates them (`crawllib.store.tables.require`), readers skip them until then.
LATER_TABLES: Final = frozenset({"hosts", "dns", "sitemaps", "traps", "probes", "warc_index"})
