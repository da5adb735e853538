"""Host names -> server addresses, for plan with ``politeness.key = ip``.

The same :class:`Resolver` as the fetch engine's connector: ``network.resolve`` first (its
port dropped: one machine, one slot), ``network.resolve_only``, then aiodns; every address is
checked by network safety, and a name with one bad address gives no address at all (its
error_kind says why, and fetch will record the refusal per URL as it always does).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import TypedDict

from crawllib.config import Config
from crawllib.engine.dns import ResolveError, Resolver

RESOLVING_AT_ONCE = 64  # lookups in flight per task


class Resolved(TypedDict):
    """One ``dns`` table row (times in epoch seconds)."""

    host: str
    address: str | None
    addresses: list[str]
    error_kind: str | None
    resolved_at: float
    expires_at: float


async def resolve_hosts(hosts: Iterable[str], cfg: Config, now: float) -> list[Resolved]:
    """Resolve every host name, RESOLVING_AT_ONCE at a time; one row per name, in order."""
    resolver = Resolver(cfg.network, timeout=cfg.fetch.connect_timeout)
    room = asyncio.Semaphore(RESOLVING_AT_ONCE)
    expires = now + cfg.politeness.address_ttl_seconds

    async def one(host: str) -> Resolved:
        addresses: list[str] = []
        kind = None
        async with room:
            try:
                addresses = [
                    r["host"] for r in await resolver.resolve(host, family=socket.AF_UNSPEC)
                ]
            except ResolveError as exc:
                kind = exc.kind
        return {
            "host": host,
            "address": addresses[0] if addresses else None,
            "addresses": addresses,
            "error_kind": kind,
            "resolved_at": now,
            "expires_at": expires,
        }

    try:
        return list(await asyncio.gather(*(one(h) for h in hosts)))
    finally:
        await resolver.close()
