"""Same-slot following: the links of a fetched page that the task fetching its slot fetches in
this generation, instead of leaving them to the next.

A link is followed when it stays in the page's politeness slot (same host; same registered
domain with ``politeness.key = domain``), is within ``crawl.max_depth`` (the page's depth + 1),
passes plan's URL rules (``crawl.skip_extensions``, ``crawl.max_url_length``, the operator's
exclusions, repeated path segments and the host's URL patterns judged traps), is not known,
and the slot has room left under its per-generation cap and time budget. "Known" is exact: the url_keys crawldb
and this generation's fetches already hold for the slot (shipped with the slot's input, see
``crawllib.transforms.fetch_inputs.follow_inputs``), plus every key the task has queued itself. What
is not followed stays a link, and the next frontier takes it.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from crawllib.config import Config
from crawllib.core.records import FetchRecord
from crawllib.core.urls import registered_domain, url_extension
from crawllib.policy import exclusions
from crawllib.policy.traps import repeated_segments, url_pattern


class Queued(Protocol):
    """URLs a slot has queued (crawllib.engine.slots.RowQueue, or an address's hosts')."""

    def lower(self, key: int, depth: int, source_url: str | None = None) -> bool: ...


class Known:
    """A set of url_keys: the shipped ones sorted in a compact array (a host can have millions),
    the ones added here in a set."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self._sorted = array("q", sorted(set(keys)))
        self._added: set[int] = set()

    def __contains__(self, key: int) -> bool:
        if key in self._added:
            return True
        at = bisect.bisect_left(self._sorted, key)
        return at < len(self._sorted) and self._sorted[at] == key

    def add(self, key: int) -> None:
        self._added.add(key)


class Follower:
    """What to follow, per slot: room left under the cap, and the keys known."""

    def __init__(self, cfg: Config, inputs: Iterable[Mapping[str, Any]]) -> None:
        self.by_domain = cfg.politeness.key == "domain"
        # politeness.key = ip: the slot of each host of the call (the engine fills it from its
        # rows); a link to any other host is not followed here
        self.host_slots: dict[str, str] | None = {} if cfg.politeness.key == "ip" else None
        self.max_depth = cfg.crawl.max_depth
        self.max_length = cfg.crawl.max_url_length
        self.skip = frozenset(e.lower() for e in cfg.crawl.skip_extensions)
        # the fetch stage reads crawl.exclude_file on the driver (exclusions.inlined)
        self.excluded = exclusions.load(cfg)
        self.max_repeats = cfg.traps.max_segment_repeats
        self.room: dict[str, int] = {}
        self.known: dict[str, Known] = {}
        self.trapped: dict[str, frozenset[str]] = {}  # "host pattern" (crawllib.stages.traps)
        for row in inputs:
            row = row.asDict() if hasattr(row, "asDict") else row
            if row["room"] > 0:
                self.room[row["slot"]] = int(row["room"])
                self.known[row["slot"]] = Known(row["known"] or ())
                self.trapped[row["slot"]] = frozenset(row.get("trapped") or ())

    def slot_of(self, host: str) -> str | None:
        if self.host_slots is not None:
            return self.host_slots.get(host)
        return registered_domain(host) if self.by_domain else host

    def links(
        self,
        slot: str,
        page: FetchRecord,
        limit: int | None = None,
        queued: Queued | None = None,
    ) -> list[dict[str, Any]]:
        """The rows to fetch now for the links of ``page`` (fetched from ``slot``): url,
        url_key, host, depth, slot and source_url; each takes one unit of the slot's room.
        ``limit``: at most this many (the slot's time budget: Engine). A link to a URL the
        slot has ``queued`` deeper moves it up to this depth (no room taken)."""
        extracted = page["extracted"]
        depth = (page["depth"] or 0) + 1
        if extracted is None or depth > self.max_depth or slot not in self.known:
            return []
        room = self.room.get(slot, 0)
        if limit is not None:
            room = min(room, limit)
        known = self.known[slot]
        rows = []
        for link in extracted["links"]:
            url, key, host = link["dst_url"], link["dst_key"], link["dst_host"]
            if key in known:
                if queued is not None:
                    queued.lower(key, depth, page["url"])
                continue
            if room <= 0 or self.slot_of(host) != slot or not self._allowed(url, host, slot):
                continue
            known.add(key)
            room -= 1
            self.room[slot] -= 1
            rows.append(
                {
                    "url": url,
                    "url_key": key,
                    "host": host,
                    "depth": depth,
                    "slot": slot,
                    "source_url": page["url"],
                }
            )
        return rows

    def _allowed(self, url: str, host: str, slot: str) -> bool:
        """plan's URL rules (crawllib.transforms.plan.with_filter_reason, filter_trapped),
        depth aside."""
        if len(url) > self.max_length or url_extension(url) in self.skip:
            return False
        if repeated_segments(url) > self.max_repeats:
            return False
        trapped = self.trapped.get(slot)
        if trapped and f"{host} {url_pattern(url)}" in trapped:
            return False
        rules = self.excluded
        return not rules or not rules.matches(url, host, registered_domain(host))
