"""When a fetched page is due again: its revisit interval, adapted to how often its text changes.

After each visit that reaches the page (outcome ``ok`` or ``not_modified``) the page's interval
is set by ``recrawl.policy``:

- ``fixed``: ``recrawl.default_interval_hours``, always.
- ``adaptive`` (Nutch's AdaptiveFetchSchedule, without its sync step): a first visit gets the
  default interval; a revisit whose extracted text changed multiplies it by
  ``1 - recrawl.dec_rate``, one whose text did not (a 304 included) by ``1 + recrawl.inc_rate``;
  the result is kept within ``[min_interval_hours, max_interval_hours]``. Change is judged by
  the text's hash, so ads and timestamps in the boilerplate do not count as changes.
- ``never``: no revisit (``next_fetch_at`` stays empty).

The rates set where the interval settles: it holds steady when a share
p* = ln(1 + inc) / (ln(1 + inc) - ln(1 - dec)) of the visits find a change. Nutch's rates (0.4,
0.2) give p* = 0.60: an interval long enough that most visits find the page changed, so pages
are often stale; the defaults here (0.1, 0.3) give p* = 0.21, which on the two-week benchmark
(docs/benchmarks.md, measure 9) is fresher than a fixed schedule with the same budget while
fetching a third as many unchanged pages.

``next_fetch_at = fetched_at + interval``; plan takes the page again once that time has passed
by the crawl's clock (``crawl.now``, or the time plan first started the generation).

The rule is written once, over an :class:`Ops` of the few operations it needs, so the update
stage applies it as Spark column expressions (``SPARK`` in ``crawllib.transforms.update``) and
simulations (``benchmarks.recrawl``) apply the same rule to Python floats (``PYTHON``).
Pure Python: no Spark import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from crawllib.core.vocab import IntervalSource

if TYPE_CHECKING:
    from crawllib.config import RecrawlConfig

HOUR = 3600.0


class Ops(Protocol):
    """The operations the rule needs, on numbers and conditions (Python values, or Spark
    columns: hence ``Any``)."""

    def where(self, condition: Any, yes: Any, no: Any) -> Any: ...

    def clamp(self, value: Any, low: float, high: float) -> Any: ...


class PythonOps:
    """:class:`Ops` on Python floats and bools."""

    def where(self, condition: Any, yes: float, no: float) -> float:
        return yes if condition else no

    def clamp(self, value: float, low: float, high: float) -> float:
        return min(max(value, low), high)


PYTHON = PythonOps()


@dataclass(frozen=True)
class Interval:
    """A visit's new interval (seconds) and where it came from (an IntervalSource word), each
    a value of the ops used (a float and a str, or two Spark columns)."""

    seconds: Any
    source: Any


def next_interval(
    cfg: RecrawlConfig, ops: Ops, previous: Any, revisit: Any, changed: Any
) -> Interval:
    """The interval after a visit that reached the page.

    ``previous``: the interval before it (seconds; ignored on a first visit), ``revisit``: the
    page had a stored version (else this is its first visit), ``changed``: its text differs
    from the stored version's (a revisit only). Conditions and numbers are whatever ``ops``
    works on. With policy ``never`` the interval is the default (no revisit is planned)."""
    default = cfg.default_interval_hours * HOUR
    if cfg.policy != "adaptive":
        return Interval(ops.where(revisit, default, default), IntervalSource.DEFAULT)
    adapted = ops.clamp(
        ops.where(changed, previous * (1 - cfg.dec_rate), previous * (1 + cfg.inc_rate)),
        cfg.min_interval_hours * HOUR,
        cfg.max_interval_hours * HOUR,
    )
    return Interval(
        ops.where(revisit, adapted, default),
        ops.where(revisit, IntervalSource.ADAPTIVE, IntervalSource.DEFAULT),
    )


def freshness_query(now: str = "current_timestamp()") -> str:
    """SQL over crawldb: one row of pages (those with a stored version), due (past their
    next_fetch_at at ``now``, an SQL timestamp expression) and freshness, an estimate of the
    share of them whose stored version is still current at ``now``.

    The estimate assumes each page changes as a Poisson process: from its revisits, the chance
    it changed within one interval is taken as p = (changed + 0.5) / (revisits + 1) (a page not
    revisited yet: one half), its rate as -ln(1 - p) / fetch_interval, and the chance it is
    still unchanged after the time since its visit as exp(-rate * age). Its mean over the pages
    is the freshness."""
    changed = "coalesce(visits_changed, 0)"
    visits = f"({changed} + coalesce(visits_unchanged, 0))"
    age = f"greatest(0, (unix_micros({now}) - unix_micros(fetched_at)) / 1e6)"
    return (
        "SELECT count(*) AS pages, count_if(next_fetch_at <= "
        f"{now}) AS due, round(avg(exp(-rate * {age})), 4) AS freshness FROM ("
        f"SELECT *, -ln(1 - ({changed} + 0.5) / ({visits} + 1)) / fetch_interval AS rate "
        "FROM crawldb WHERE status IN ('fetched', 'duplicate') AND fetched_at IS NOT NULL "
        "AND fetch_interval > 0)"
    )


def revisits(cfg: RecrawlConfig) -> bool:
    """Whether fetched pages are ever due again."""
    return cfg.policy != "never"
