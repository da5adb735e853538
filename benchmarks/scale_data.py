"""What the scale benchmark's synthetic crawl looks like: its parameters (:class:`ScaleSpec`)
and the column expressions that make its rows, in Spark built-ins (no Python per row).

URL number ``i`` is everything about a URL: crawldb holds ``0 .. rows - 1``, the measured
generation's frontier adds new numbers from ``rows`` on.

- **Hosts**: ``rows / 100`` of them by default, named ``site<h>.com`` (its own registered
  domain); URL i's host is ``floor(hosts * u**3)`` for a uniform u drawn from i, so the
  URLs per host fall off as rank ** (-2/3), Zipf-like: a few big sites, a long tail.
- **Status**: a permutation of the numbers (``i * A + B mod rows``) is cut into ranges, one
  per status, of STATUS_MIX's shares: the counts are exact and the statuses spread over hosts
  and generations. The first URLs of the queued, failed and fetched ranges are the ones due
  in the measured generation (ScaleSpec.due), the others wait for later generations.
- **History**: URL i was found in generation ``floor(i * generations / rows)`` at that depth
  and, if attempted, last visited in a generation between then and the last one, on day
  ``gen`` after T0.
- **Texts** are a few hundred characters (above parse.min_text_chars, so near-duplicate
  detection sees them) and pages' HTML a few dozen bytes. A page's text is made from its
  url_key; the ``duplicate`` pages of a host all copy one text of that host.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

from pyspark.sql import Column
from pyspark.sql import functions as F

from crawllib.core.vocab import Outcome, Status

# Bump when the data made from a spec changes: cached roots of older versions are not reused.
VERSION = 1
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # generation g ran on day g after T0
T0_SECONDS = int(T0.timestamp())
DAY = 86_400
ZIPF_POWER = 3.0  # host = floor(hosts * u ** 3): URLs per host ~ rank ** (-2 / 3)


@dataclasses.dataclass(frozen=True)
class StatusMix:
    """A crawldb status, its share of the URLs and what its last attempt was (its fetches
    row: outcome, HTTP status, error kind; no outcome: never attempted), and its reason."""

    status: str
    share: float
    outcome: str | None = None
    http_status: int | None = None
    error_kind: str | None = None
    reason: str | None = None


STATUS_MIX = (
    StatusMix(Status.FETCHED, 0.62, Outcome.OK, 200),
    StatusMix(Status.DUPLICATE, 0.05, Outcome.OK, 200),
    StatusMix(Status.NOINDEX, 0.01, Outcome.OK, 200),
    StatusMix(Status.QUEUED, 0.12),
    StatusMix(Status.FAILED, 0.03, Outcome.HTTP_ERROR, 503),
    StatusMix(Status.DEAD, 0.01, Outcome.ERROR, None, "dns", "dns"),
    StatusMix(Status.GONE, 0.06, Outcome.HTTP_ERROR, 404, None, "http_404"),
    StatusMix(Status.REDIRECTED, 0.04, Outcome.REDIRECT, 301),
    StatusMix(Status.ROBOTS_DENIED, 0.02, Outcome.ROBOTS_DENIED),
    StatusMix(Status.BLOCKED, 0.005, Outcome.BLOCKED, None, "private_address", "private_address"),
    StatusMix(Status.FILTERED, 0.035, reason="budget"),
)
# Statuses whose URLs have a stored page and text (pages and texts rows).
STORED = (Status.FETCHED, Status.DUPLICATE, Status.NOINDEX)

# The measured generation's candidates, as shares of ScaleSpec.urls: new URLs of its frontier,
# queued and failed URLs due, fetched pages due again; and known URLs its frontier holds too
# (links to URLs known by now: plan's anti-join drops them).
DUE_SHARES = {"new": 0.6, Status.QUEUED: 0.2, Status.FAILED: 0.05, Status.FETCHED: 0.15}
KNOWN_IN_FRONTIER = 0.1


@dataclasses.dataclass(frozen=True)
class ScaleSpec:
    """rows: crawldb URLs; urls: URLs the measured generation plans; hosts (0: rows / 100);
    generations before the measured one; links per stored page."""

    rows: int
    urls: int
    hosts: int = 0
    generations: int = 10
    links_per_text: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.generations < 30:  # revisit intervals are 30 days and more
            raise ValueError(f"generations must be 1 to 29, got {self.generations}")
        short = {s: n for s, n in self.due.items() if s != "new" and n > self.counts[s]}
        if self.urls < 1 or short:
            raise ValueError(f"{self.rows} rows hold too few URLs due for {self.urls}: {short}")

    @property
    def host_count(self) -> int:
        return self.hosts or max(1, self.rows // 100)

    @property
    def gen(self) -> int:
        """The measured generation."""
        return self.generations

    @property
    def name(self) -> str:
        """What a cached root built from this spec is called."""
        return (
            f"rows{self.rows}-urls{self.urls}-hosts{self.host_count}-gens{self.generations}"
            f"-links{self.links_per_text}-v{VERSION}"
        )

    @property
    def counts(self) -> dict[str, int]:
        """crawldb URLs per status (the rounding's remainder goes to fetched)."""
        out = {m.status: int(m.share * self.rows) for m in STATUS_MIX}
        out[Status.FETCHED] += self.rows - sum(out.values())
        return out

    @property
    def due(self) -> dict[str, int]:
        """The measured generation's candidates by kind ("new" or a crawldb status)."""
        out = {kind: int(share * self.urls) for kind, share in DUE_SHARES.items()}
        out["new"] += self.urls - sum(out.values())
        return out

    @property
    def max_url_bytes(self) -> int:
        """A bound on the length of every URL the benchmark makes (benchmarks.scale_keys)."""
        digits = len(str(self.rows + 100 * self.urls))
        return len("http://site.com") + len(str(self.host_count)) + len("/c/9/p.html") + 24 + digits

    def permutation(self) -> tuple[int, int]:
        """(A, B) of the status permutation i -> (i * A + B) mod rows."""
        a = max(1, int(self.rows * 0.6180339887)) | 1
        while math.gcd(a, self.rows) != 1:
            a += 2 if self.rows > 2 else 1
        return a % max(self.rows, 1), self.rows // 3


def day_seconds(gen: Column | int) -> Column:
    """Epoch seconds of generation ``gen``'s day."""
    return F.lit(T0_SECONDS) + F.lit(gen) * DAY


def at_day(gen: Column | int, seconds: Column | int = 0) -> Column:
    """The timestamp of generation ``gen``'s day plus ``seconds``."""
    return F.timestamp_seconds(day_seconds(gen) + seconds)


def uniform(i: Column, salt: str) -> Column:
    """A number in [0, 1) drawn from ``i`` (a different draw per salt)."""
    return F.xxhash64(F.lit(salt), i).bitwiseAND(F.lit((1 << 53) - 1)) / float(1 << 53)


def bucket(i: Column, salt: str, n: int) -> Column:
    """An int in [0, n) drawn from ``i``."""
    return F.pmod(F.xxhash64(F.lit(salt), i), F.lit(n)).cast("int")


def host_of(i: Column, hosts: int) -> Column:
    """The host name of URL i: Zipf-like over ``hosts`` hosts."""
    h = F.least(F.floor(F.pow(uniform(i, "host"), ZIPF_POWER) * hosts), F.lit(hosts - 1))
    return F.format_string("site%d.com", h.cast("long"))


def url_of(i: Column, host: Column) -> Column:
    """URL i on ``host``, normalised (crawllib.core.urls.normalize_url leaves it as it is), in
    one of four URL patterns."""
    kind = F.pmod(i, F.lit(4))
    return (
        F.when(kind == 0, F.format_string("http://%s/article/%d.html", host, i))
        .when(kind == 1, F.format_string("http://%s/news/%d/%d", host, F.pmod(i, F.lit(97)), i))
        .when(kind == 2, F.format_string("http://%s/item?id=%d", host, i))
        .otherwise(F.format_string("http://%s/c/%d/p%d.html", host, F.pmod(i, F.lit(7)), i))
    )


def text_of(seed: Column) -> Column:
    """A page text made from ``seed`` (a string): about 400 characters."""
    words = F.concat(F.lit("words of page "), seed, F.lit(" and its topic; "))
    return F.concat(F.lit("Page "), seed, F.lit(". "), F.repeat(words, 12))


def html_of(url_key: Column) -> Column:
    """A page's raw HTML: a few dozen bytes."""
    return F.encode(F.format_string("<html><title>%d</title><p>text</p></html>", url_key), "UTF-8")


def etag_of(url_key: Column, gen: Column | int) -> Column:
    return F.format_string('"%x-%d"', url_key, F.lit(gen))


def by_status(values: dict[str, Column], default: Column | None = None) -> Column:
    """values[status] for a row of that status (column ``status``), else ``default`` (null)."""
    out: Column | None = None
    for status, value in values.items():
        hit = F.col("status") == status
        out = F.when(hit, value) if out is None else out.when(hit, value)
    if out is None:
        return default if default is not None else F.lit(None)
    return out.otherwise(default) if default is not None else out
