"""The engine's resolver and network-safety rules, and the small parsers of the client.

The resolver is exercised through its ``lookup`` hook (a stub coroutine): no DNS query is
sent and no connection is made by these tests.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from crawllib.config import load_config, replace
from crawllib.engine.client import parse_content_type, parse_retry_after
from crawllib.engine.dns import ResolveError, Resolver, parse_overrides
from crawllib.policy.netsafety import address_problem, host_problem


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class StubDNS:
    """A lookup coroutine answering from a table and counting queries."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.queries: list[str] = []

    async def __call__(self, name: str) -> list[str]:
        self.queries.append(name)
        await asyncio.sleep(0.01)
        if name not in self.table:
            raise OSError(None, "NXDOMAIN")
        return self.table[name]


def network(**changes):
    base = {"network__resolve_only": True}
    base.update({f"network__{k}": v for k, v in changes.items()})
    return replace(load_config(), **base).network


def resolve(resolver: Resolver, host: str, port: int = 80):
    return asyncio.run(resolver.resolve(host, port, socket.AF_UNSPEC))


def test_override_map_with_and_without_port():
    assert parse_overrides(
        {"A.test": "127.0.0.1:8080", "b.test": "10.0.0.2", "c.test": "[::1]:81"}
    ) == {
        "a.test": ("127.0.0.1", 8080),
        "b.test": ("10.0.0.2", None),
        "c.test": ("::1", 81),
    }
    stub = StubDNS({})
    resolver = Resolver(network(resolve={"a.test": "127.0.0.1:8080", "b.test": "10.0.0.2"}), stub)
    (a,) = resolve(resolver, "A.test.")
    assert (a["host"], a["port"], a["hostname"]) == ("127.0.0.1", 8080, "A.test.")
    (b,) = resolve(resolver, "b.test", 443)
    assert (b["host"], b["port"]) == ("10.0.0.2", 443)  # trusted: no safety check
    assert stub.queries == []


def test_resolve_only_refuses_other_names_without_a_query():
    stub = StubDNS({"example.com": ["93.184.216.34"]})
    resolver = Resolver(network(), stub)
    with pytest.raises(ResolveError) as err:
        resolve(resolver, "example.com")
    assert err.value.kind == "dns" and not err.value.blocked
    assert stub.queries == [] and resolver.queries == 0


def test_dns_answers_are_cached_and_checked():
    clock = Clock()
    stub = StubDNS({"pub.test": ["93.184.216.34"], "intranet.test": ["10.1.2.3"],
                    "mixed.test": ["93.184.216.34", "127.0.0.1"], "meta.test": ["169.254.169.254"]})  # fmt: skip
    resolver = Resolver(network(resolve_only=False, dns_cache_ttl=30.0), stub, clock=clock)

    async def scenario():
        out = await asyncio.gather(*(resolver.resolve("pub.test", 80) for _ in range(5)))
        assert stub.queries == ["pub.test"]  # concurrent lookups share one query
        assert out[0][0]["host"] == "93.184.216.34"
        clock.t = 29
        await resolver.resolve("pub.test", 80)
        assert stub.queries == ["pub.test"]
        clock.t = 31
        await resolver.resolve("pub.test", 80)
        assert stub.queries == ["pub.test", "pub.test"]
        kinds = {}
        for name in ("intranet.test", "mixed.test", "meta.test", "nx.test", "nx.test"):
            try:
                await resolver.resolve(name, 80)
            except ResolveError as exc:
                kinds[name] = exc.kind
        assert kinds == {"intranet.test": "private_address", "mixed.test": "loopback_address",
                         "meta.test": "metadata_address", "nx.test": "dns"}  # fmt: skip
        assert stub.queries.count("nx.test") == 1  # failures are cached too

    asyncio.run(scenario())


def test_allow_private_still_refuses_metadata():
    stub = StubDNS({"intranet.test": ["10.1.2.3"], "meta.test": ["fd00:ec2::254"]})
    resolver = Resolver(network(resolve_only=False, allow_private=True), stub)
    assert resolve(resolver, "intranet.test")[0]["host"] == "10.1.2.3"
    with pytest.raises(ResolveError, match="meta.test"):
        resolve(resolver, "meta.test")


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("10.0.0.1", "private_address"),
        ("172.16.5.4", "private_address"),
        ("192.168.0.1", "private_address"),
        ("fd12::1", "private_address"),
        ("127.0.0.1", "loopback_address"),
        ("::1", "loopback_address"),
        ("::ffff:127.0.0.1", "loopback_address"),
        ("169.254.1.1", "link_local_address"),
        ("fe80::1%eth0", "link_local_address"),
        ("224.0.0.1", "multicast_address"),
        ("0.0.0.0", "unspecified_address"),
        ("240.0.0.1", "private_address"),
        ("100.64.0.1", "reserved_address"),
        ("169.254.169.254", "metadata_address"),
        ("100.100.100.200", "metadata_address"),
        # IPv6 carrying IPv4 (issue 37): 6to4, Teredo (its client obfuscated), NAT64
        ("2002:7f00:1::", "loopback_address"),
        ("2002:7f00:0001:0:0:0:0:1", "loopback_address"),
        ("2002:a9fe:a9fe::1", "metadata_address"),
        ("2002:0a00:0001::1", "private_address"),
        ("2002:0808:0808::1", None),  # 8.8.8.8
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback_address"),  # client 127.0.0.1
        ("2001:0:a9fe:a9fe:8000:63bf:3fff:fdd2", "metadata_address"),  # server 169.254.169.254
        ("64:ff9b::7f00:1", "loopback_address"),
        ("64:ff9b::a9fe:a9fe", "metadata_address"),
    ],
)
def test_address_problems(address, kind):
    assert address_problem(address) == kind


def test_carried_ipv4_is_checked_with_allow_private_too_and_in_literals_and_answers():
    # the metadata address stays refused however it is wrapped
    for wrapped in (
        "2002:a9fe:a9fe::1",
        "2001:0:4136:e378:8000:63bf:5601:5601",
        "64:ff9b::a9fe:a9fe",
        # NAT64's local-use prefix (RFC 8215), in its /96 and /48 forms (issue 49)
        "64:ff9b:1::a9fe:a9fe",
        "64:ff9b:1:a9fe:a9:fe00::",
        # the EKS Pod Identity agent, on IPv4 and IPv6
        "169.254.170.23",
        "fd00:ec2::23",
    ):
        assert address_problem(wrapped, allow_private=True) == "metadata_address", wrapped
    # a public address under the local-use prefix is what it carries
    assert address_problem("64:ff9b:1::808:808", allow_private=True) is None
    assert host_problem("[2002:7f00:1::1]") == "loopback_address"
    stub = StubDNS(
        {"six.test": ["2002:7f00:1::1"], "teredo.test": ["2001:0:4136:e378:8000:63bf:80ff:fffe"]}
    )
    resolver = Resolver(network(resolve_only=False), stub)
    for name in ("six.test", "teredo.test"):
        with pytest.raises(ResolveError) as refused:
            resolve(resolver, name)
        assert refused.value.kind == "loopback_address", name


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("2130706433", "loopback_address"),
        ("127.1", "loopback_address"),
        ("0x7f.0.0.1", "loopback_address"),
        ("0177.0.0.1", "loopback_address"),
        ("10.1", "private_address"),
        ("2852039166", "metadata_address"),  # 169.254.169.254
    ],
)
def test_hosts_in_inet_atons_forms_are_the_addresses_they_name(host, kind):
    """Issue 49: only the URL normaliser stopped them; the guard checks them itself."""
    assert host_problem(host) == kind
    resolver = Resolver(network(resolve_only=False), StubDNS({}))
    assert resolver.refuse(f"http://{host}/") == ("blocked", kind)
    # under resolve_only an address outside the map is refused as such, never resolved
    public = Resolver(network(resolve_only=True), StubDNS({}))
    assert public.refuse("http://134744072/") == ("blocked", "resolve_only")
    assert host_problem("1e100.net") is None and host_problem("cafe.de") is None


def test_host_problems():
    assert host_problem("metadata.google.internal", allow_private=True) == "metadata_address"
    assert host_problem("localhost") == "loopback_address"
    assert host_problem("[::1]") == "loopback_address"
    assert host_problem("example.com") is None
    assert host_problem("10.0.0.1", allow_private=True) is None


def test_parse_content_type_and_retry_after():
    assert parse_content_type('Text/HTML; charset="UTF-8"') == ("text/html", "utf-8")
    assert parse_content_type("text/html; charset=nonsense") == ("text/html", None)
    assert parse_content_type(None) == (None, None)
    assert parse_retry_after("120", 0) == 120.0
    assert parse_retry_after("Thu, 01 Jan 1970 00:02:00 GMT", 60.0) == 60.0
    assert parse_retry_after("soon", 0) is None


def test_plan_resolution_gives_each_name_its_address_or_why_not():
    import asyncio

    from crawllib.config import load_config, replace
    from crawllib.engine.addresses import resolve_hosts

    cfg = replace(
        load_config(),
        network__resolve={"a.net": "127.0.0.2:8080", "b.net": "127.0.0.2"},
        network__resolve_only=True,
        politeness__address_ttl_seconds=60.0,
    )
    rows = asyncio.run(resolve_hosts(["a.net", "b.net", "c.net"], cfg, now=1000.0))
    assert [(r["host"], r["address"], r["addresses"], r["error_kind"]) for r in rows] == [
        ("a.net", "127.0.0.2", ["127.0.0.2"], None),  # the port is no part of the address
        ("b.net", "127.0.0.2", ["127.0.0.2"], None),
        ("c.net", None, [], "dns"),  # not in the map under resolve_only: no query sent
    ]
    assert {(r["resolved_at"], r["expires_at"]) for r in rows} == {(1000.0, 1060.0)}
