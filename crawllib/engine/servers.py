"""With ``politeness.key = ip``: the slot of a server address, and the hosts it serves inside it.

A :class:`Server` is a slot (:class:`crawllib.engine.slots.Slot`) for the address: the time of
its last request start, its own backoff, cool-down and response times. Its ``members`` are one
slot per host, each with its own rows and rules (Retry-After, backoff, Crawl-delay, robots.txt
and its failures, DNS failures, the per-host caps). A host's turn waits for both its own delay
and the address's, and claims both, so every host is asked at most once per its own delay and
the address at most once per the address's:

- ``politeness.address_delay`` when set, else the rule ``default_delay / hosts queued`` (its
  hosts with URLs left in this call when the gap began, the one being fetched included), at
  least ``min_address_delay``: a site alone on its address is crawled at the per-host pace, a
  shared-hosting address of many sites no faster than one request per ``min_address_delay``;
- with ``politeness.adaptive``, at least ``response_factor`` times the moving average of the
  address's response times, whichever host answered, up to ``max_delay``.

A host held by its own Retry-After or Crawl-delay waits alone: the engine picks the next request
from a host that is free (:mod:`crawllib.engine.engine`). The address backs off only on evidence
about the server: connection failures (``down_after`` in a row, whichever hosts were asked:
then a cool-down for all of them), and 5xx or 429 answers while more than
``address_failure_share`` of its hosts (and at least 2) last answered so: each such answer
doubles its delay, as a host's own failures do, until fewer of its hosts fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from crawllib.config import PolitenessConfig
from crawllib.core.vocab import DelaySource, HostKind
from crawllib.engine.slots import MAX_BACKOFF_LEVEL, Clock, Slot


@dataclass
class Server(Slot):
    kind: str = HostKind.ADDRESS
    address_delay: float = 0.0  # seconds; 0: the rule
    min_address_delay: float = 0.0
    failure_share: float = 0.5
    members: dict[str, Slot] = field(default_factory=dict)  # host -> its slot
    failing: set[str] = field(default_factory=set)  # hosts whose last answer was 5xx/429
    answered: set[str] = field(default_factory=set)  # hosts that answered in this call
    _hosts_at_claim: int = 0  # hosts queued when its last request was claimed (0: none yet)

    @classmethod
    def from_config(
        cls,
        key: str,
        politeness: PolitenessConfig,
        seed: int | None = None,
        clock: Clock | None = None,
    ) -> Self:
        server = super().from_config(key, politeness, seed, clock)
        server.address_delay = float(politeness.address_delay)
        server.min_address_delay = float(politeness.min_address_delay)
        server.failure_share = float(politeness.address_failure_share)
        return server

    def member(self, host: str, politeness: PolitenessConfig, seed: int | None = None) -> Slot:
        """The slot of ``host`` on this address (made on first use)."""
        slot = self.members.get(host)
        if slot is None:
            slot = Slot.from_config(host, politeness, seed, self.clock)
            slot.server = self
            slot.woken = self.woken  # one worker serves the address: any extraction wakes it
            self.members[host] = slot
        return slot

    @property
    def queued(self) -> int:
        """Its hosts with URLs left in this call, the one being fetched included."""
        return sum(1 for m in self.members.values() if m.rows or m.busy)

    @property
    def rule_delay(self) -> float:
        """address_delay, or default_delay / the hosts queued when the gap began (its last
        request's claim; before any, now), at least min_address_delay."""
        if self.address_delay > 0:
            return self.address_delay
        hosts = self._hosts_at_claim or self.queued
        return max(self.min_address_delay, self.default_delay / max(1, hosts))

    @property
    def rule_source(self) -> str:
        return DelaySource.ADDRESS

    def claim(self) -> None:
        self._hosts_at_claim = max(1, self.queued)
        super().claim()

    def record_answer(self, host: str, failed: bool) -> None:
        """``host`` answered, a 5xx or 429 if ``failed``. Any answer ends a run of connection
        failures. The address backs off while its failing hosts are more than failure_share of
        those that answered (and at least 2): each failure then raises its backoff level, and
        it is reset once they are not."""
        self.down = 0
        self.down_until = None
        self.answered.add(host)
        if failed:
            self.failing.add(host)
        else:
            self.failing.discard(host)
        together = len(self.failing) >= 2 and len(self.failing) > self.failure_share * len(
            self.answered
        )
        if not together:
            self.failures = 0
        elif failed:
            self.failures = min(self.failures + 1, MAX_BACKOFF_LEVEL)

    def lower(self, key: int, depth: int, source_url: str | None = None) -> bool:
        """RowQueue.lower on the queue of whichever host holds URL ``key``."""
        return any(m.rows.lower(key, depth, source_url) for m in self.members.values())

    def state(self, wall_now: float) -> dict[str, Any]:
        return {**super().state(wall_now), "address": self.key, "crawl_delay": None}
