"""The resolver behind the fetch engine's connector: override map, safety check, DNS cache.

Order for a host name:
1. ``network.resolve`` (host -> "IP" or "IP:port", like curl ``--resolve``): connect there and
   keep the URL's Host header. Trusted: no safety check.
2. ``network.resolve_only``: any other name fails as a DNS error, no query is sent.
3. aiodns lookup, answers reused for ``network.dns_cache_ttl`` seconds (failures for at most a
   minute), concurrent lookups of one name share one query.
4. Every resolved address is checked (:func:`netsafety.address_problem`); one bad address
   blocks the name. The connector then connects to exactly the addresses that were checked.

Before any of this, :meth:`Resolver.refuse` turns away URLs that no resolution can make safe
(scheme, IP literals, metadata names), since aiohttp connects to an IP literal without asking
the resolver.

Failures are raised as :class:`ResolveError` (an OSError, which aiohttp wraps in
``ClientConnectorDNSError``); its ``kind`` is the fetch row's error_kind.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from crawllib.config import NetworkConfig
from crawllib.core.vocab import ErrorKind, Outcome
from crawllib.policy.netsafety import address_problem, host_problem, legacy_ipv4, parse_ip

# lookup(host) -> list of IP address strings; raises OSError when the name does not resolve.
Lookup = Callable[[str], Awaitable[list[str]]]

NEGATIVE_TTL = 60.0
_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


class ResolveError(OSError):
    """A name that gives no usable address; ``kind`` is ErrorKind.DNS or a BlockedKind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(None, message)
        self.kind = kind

    @property
    def blocked(self) -> bool:
        return self.kind != ErrorKind.DNS


def parse_overrides(resolve: Mapping[str, str]) -> dict[str, tuple[str, int | None]]:
    """``network.resolve`` as host -> (ip, port or None); hosts lowercased, brackets dropped."""
    out: dict[str, tuple[str, int | None]] = {}
    for host, target in resolve.items():
        target = str(target).strip()
        ip, port = target, None
        if target.startswith("["):
            ip, _, rest = target[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else None
        elif target.count(":") == 1:
            ip, _, p = target.partition(":")
            port = int(p)
        out[host.lower().strip("[]").rstrip(".")] = (ip, port)
    return out


class Resolver(AbstractResolver):
    """aiohttp resolver for one fetch call; ``queries`` counts real DNS lookups."""

    def __init__(
        self,
        network: NetworkConfig,
        lookup: Lookup | None = None,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.overrides = parse_overrides(network.resolve)
        self.resolve_only = bool(network.resolve_only)
        self.allow_private = bool(network.allow_private)
        self.ttl = float(network.dns_cache_ttl)
        self.nameservers = list(network.nameservers)
        self.timeout = timeout
        self.clock = clock
        self.queries = 0
        self._lookup = lookup or self._aiodns_lookup
        self._aiodns: Any = None
        self._cache: dict[str, tuple[float, list[str] | ResolveError]] = {}
        self._pending: dict[str, asyncio.Future[list[str]]] = {}
        self._verdicts: dict[str, tuple[str, str] | None] = {}

    def is_trusted(self, host: str) -> bool:
        return host.lower().strip("[]").rstrip(".") in self.overrides

    def refuse(self, url: str) -> tuple[str, str] | None:
        """(outcome, error_kind) if `url` must not be requested whatever its host resolves to:
        unparseable, not http(s), an unsafe IP literal or metadata name, or an IP literal
        outside the map under resolve_only. None: go ahead (resolution checks the rest)."""
        origin = "/".join(url.split("/", 3)[:3])  # scheme://authority is all this reads
        if origin not in self._verdicts:
            self._verdicts[origin] = self._refuse(url)
        return self._verdicts[origin]

    def _refuse(self, url: str) -> tuple[str, str] | None:
        try:
            parsed = URL(url, encoded=True)
        except (ValueError, TypeError):
            return Outcome.ERROR, ErrorKind.INVALID_URL
        if parsed.scheme not in ("http", "https"):
            return Outcome.BLOCKED, ErrorKind.SCHEME
        host = (parsed.raw_host or "").lower().strip("[]").rstrip(".")
        if not host:
            return Outcome.ERROR, ErrorKind.INVALID_URL
        legacy = legacy_ipv4(host)  # "2130706433", "127.1": an address too
        literal = parse_ip(host) if legacy is None else parse_ip(legacy)
        if host in self.overrides:
            # aiohttp connects to an IP literal itself, so only an identity entry is true
            if literal is None or parse_ip(self.overrides[host][0]) == literal:
                return None
        problem = host_problem(host, self.allow_private)
        if problem:
            return Outcome.BLOCKED, problem
        if literal is not None and self.resolve_only:
            return Outcome.BLOCKED, ErrorKind.RESOLVE_ONLY
        return None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.lower().strip("[]").rstrip(".")
        if name in self.overrides:
            ip, override_port = self.overrides[name]
            return [_result(host, ip, override_port or port)]
        if self.resolve_only:
            raise ResolveError(ErrorKind.DNS, f"{name} is not in network.resolve (resolve_only)")
        addresses = await self.addresses(name)
        for address in addresses:
            problem = address_problem(address, self.allow_private)
            if problem:
                raise ResolveError(problem, f"{name} resolves to {address}")
        wanted = [a for a in addresses if family in (0, _family(a))] or addresses
        return [_result(host, a, port) for a in wanted]

    async def addresses(self, name: str) -> list[str]:
        """The cached or freshly looked-up addresses of `name`; raises ResolveError(DNS)."""
        hit = self._cache.get(name)
        if hit is not None and hit[0] > self.clock():
            if isinstance(hit[1], ResolveError):
                raise hit[1]
            return hit[1]
        pending = self._pending.get(name)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._pending[name] = pending
            try:
                self.queries += 1
                addresses = await self._lookup(name)
                if not addresses:
                    raise OSError(None, "no address")
            except (TimeoutError, OSError) as exc:
                error = ResolveError(ErrorKind.DNS, f"{name}: {exc}")
                self._remember(name, error, min(self.ttl, NEGATIVE_TTL))
                pending.set_exception(error)
                pending.exception()  # mark retrieved: nobody else may be waiting
                raise error from None
            except BaseException as exc:
                pending.set_exception(ResolveError(ErrorKind.DNS, f"{name}: {type(exc).__name__}"))
                pending.exception()
                raise
            finally:
                self._pending.pop(name, None)
            self._remember(name, addresses, self.ttl)
            pending.set_result(addresses)
            return addresses
        return await asyncio.shield(pending)

    def _remember(self, name: str, value: list[str] | ResolveError, ttl: float) -> None:
        if ttl > 0:
            self._cache[name] = (self.clock() + ttl, value)

    async def _aiodns_lookup(self, name: str) -> list[str]:
        import aiodns  # only when DNS is really used (never with resolve_only)

        if self._aiodns is None:
            self._aiodns = aiodns.DNSResolver(
                nameservers=self.nameservers or None, timeout=self.timeout, tries=2
            )
        try:
            answer = await self._aiodns.getaddrinfo(
                name, family=socket.AF_UNSPEC, port=0, type=socket.SOCK_STREAM
            )
        except aiodns.error.DNSError as exc:
            raise OSError(None, str(exc.args[-1] if exc.args else "lookup failed")) from None
        seen: dict[str, None] = {}
        for node in answer.nodes:
            seen[node.addr[0].decode("ascii")] = None
        return list(seen)

    async def close(self) -> None:
        if self._aiodns is not None:
            await self._aiodns.close()
            self._aiodns = None


def _family(address: str) -> socket.AddressFamily:
    ip = parse_ip(address)
    return socket.AF_INET6 if ip is not None and ip.version == 6 else socket.AF_INET


def _result(hostname: str, address: str, port: int) -> ResolveResult:
    return ResolveResult(
        hostname=hostname,
        host=address,
        port=port,
        family=_family(address),
        proto=0,
        flags=_FLAGS,
    )
