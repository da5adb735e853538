"""In-task following: the links of a fetched page that its task fetches in this generation,
instead of leaving them to the next.

A link is followed when its politeness slot (its host; its registered domain with
``politeness.key = domain``) is one the task may fetch from, it is within ``crawl.max_depth``
(the page's depth + 1), passes plan's URL rules (``crawl.skip_extensions``,
``crawl.max_url_length``, the operator's exclusions, repeated path segments and the host's URL
patterns judged traps), is not known, and its slot has room left under its per-generation cap
and time budget. The slots a task may fetch from:

- the slots it was given (planned in its slice), with room: a link from any of its pages,
  its own slot's or another's;
- new slots it owns (:class:`Owner`): a slot crawldb holds no URL of, whose key the task's
  partition function gives to this task. Such a slot is adopted on its first link, with
  generate.max_per_host as its room; the task fetches at most :attr:`Owner.budget` URLs from
  the slots it adopts. With ``politeness.key = ip`` no slot is new (an address is unknown
  before DNS) and links stay within their page's slot.

"Known" is exact: the url_keys crawldb and this generation's fetches already hold for a given
slot (shipped with the slot's input, see ``crawllib.transforms.fetch_inputs.follow_inputs``),
none for an adopted slot (crawldb has none of it), plus every key the task has queued itself.
A slot that crawldb knows but that is not this task's, and a new slot another task owns, are
not followed: the next frontier takes their links, as it takes whatever is not followed.
"""

from __future__ import annotations

import bisect
import dataclasses
from array import array
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from crawllib.config import Config
from crawllib.core.records import FetchRecord
from crawllib.core.urls import registered_domain, url_extension
from crawllib.policy import exclusions
from crawllib.policy.traps import repeated_segments, url_pattern
from crawllib.store.udfs import task_partition


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


@dataclasses.dataclass(frozen=True)
class Owner:
    """What a fetch task owns: it is task ``partition`` of ``partitions`` (a slot's task is
    ``task_partition(slot key, partitions)``, crawllib.store.udfs); ``known`` holds the slot
    keys crawldb and this generation's fetches know among those it owns (or more: a key of
    another task's slot is never asked); ``budget``: URLs it may still fetch from new slots."""

    partition: int
    partitions: int
    known: frozenset[str] = frozenset()
    budget: int = 0

    def owns_new(self, slot: str) -> bool:
        """Whether ``slot`` is a new slot of this task: none known, and this task's."""
        return slot not in self.known and task_partition(slot, self.partitions) == self.partition


class Follower:
    """What to follow, per slot: room left under the cap, and the keys known; and which new
    slots the task owns (``owner``; None: none)."""

    def __init__(
        self, cfg: Config, inputs: Iterable[Mapping[str, Any]], owner: Owner | None = None
    ) -> None:
        self.by_domain = cfg.politeness.key == "domain"
        # politeness.key = ip: the slot of each host of the call (the engine fills it from its
        # rows); a link to any other host is not followed here
        self.host_slots: dict[str, str] | None = {} if cfg.politeness.key == "ip" else None
        self.max_depth = cfg.crawl.max_depth
        self.max_length = cfg.crawl.max_url_length
        self.max_per_host = cfg.generate.max_per_host
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
        self.owner = owner if self.host_slots is None else None
        self.budget = self.owner.budget if self.owner is not None else 0
        self.adopted: set[str] = set()  # new slots this task took, in the order of their links

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
        elsewhere: Callable[[str], tuple[int | None, Queued | None]] | None = None,
    ) -> list[dict[str, Any]]:
        """The rows to fetch now for the links of ``page`` (fetched from ``slot``): url,
        url_key, host, depth, slot (the link's) and source_url; each takes one unit of its
        slot's room (and of the new-slot budget, on an adopted slot). ``limit``: at most this
        many on ``slot`` (its time budget: Engine). A link to a URL its slot has ``queued``
        deeper moves it up to this depth (no room taken). ``elsewhere``: the limit and queue
        of another slot of the task, by key; None: links stay in ``slot`` (replay of a
        journal, politeness.key = ip)."""
        extracted = page["extracted"]
        depth = (page["depth"] or 0) + 1
        if extracted is None or depth > self.max_depth:
            return []
        if self.host_slots is not None:
            elsewhere = None  # an address's links stay in it
        if slot not in self.known and elsewhere is None:
            return []
        limits: dict[str, int | None] = {slot: limit}
        queues: dict[str, Queued | None] = {slot: queued}
        rows = []
        for link in extracted["links"]:
            url, key, host = link["dst_url"], link["dst_key"], link["dst_host"]
            target = self.slot_of(host)
            if target is None or (target != slot and elsewhere is None):
                continue
            if target not in self.known and not self._adopts(target):
                continue
            if target not in limits:
                assert elsewhere is not None
                limits[target], queues[target] = elsewhere(target)
            known = self.known.get(target)
            if known is not None and key in known:
                into = queues[target]
                if into is not None:
                    into.lower(key, depth, page["url"])
                continue
            if not self._room(target, limits[target]) or not self._allowed(url, host, target):
                continue
            if target not in self.known:  # a new slot's first URL: the task takes the slot
                self.adopted.add(target)
                self.room[target] = self.max_per_host
                self.known[target] = Known()
                self.trapped[target] = frozenset()
            self.known[target].add(key)
            self.room[target] -= 1
            if target in self.adopted:
                self.budget -= 1
            current = limits[target]
            if current is not None:
                limits[target] = current - 1
            rows.append(
                {
                    "url": url,
                    "url_key": key,
                    "host": host,
                    "depth": depth,
                    "slot": target,
                    "source_url": page["url"],
                }
            )
        return rows

    def _adopts(self, slot: str) -> bool:
        """Whether ``slot``, not one the task holds, is a new slot it may take now."""
        return self.owner is not None and self.budget > 0 and self.owner.owns_new(slot)

    def _room(self, slot: str, limit: int | None) -> bool:
        """Whether ``slot`` may take one more URL: its room, its time ``limit`` and, for a
        new slot (adopted or not yet), the task's budget for new slots."""
        if limit is not None and limit <= 0:
            return False
        if slot not in self.known or slot in self.adopted:
            return self.budget > 0 and self.room.get(slot, self.max_per_host) > 0
        return self.room.get(slot, 0) > 0

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
