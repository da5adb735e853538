"""Network safety: which hosts and addresses the crawler refuses to contact.

A crawler follows links written by strangers, so a page can point it at the machine's own
services (``http://127.0.0.1:8080/admin``), the private network or a cloud metadata endpoint
(``http://169.254.169.254/``). Every URL is checked twice: its literal host before anything
else, and the addresses its name resolves to (in :mod:`crawllib.engine.dns`, which hands the
connector exactly the addresses it checked, so there is no second lookup to rebind).

An IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, 6to4
``2002:AABB:CCDD::/48``, Teredo ``2001::/32``, NAT64 ``64:ff9b::/96`` and its local-use
prefix ``64:ff9b:1::/48``) reaches that IPv4
address through a relay, so the IPv4 address it carries is checked too (``2002:7f00:1::`` is
127.0.0.1).

The verdict is the ``error_kind`` of a "blocked" fetch row (a ``crawllib.core.vocab.BlockedKind``
word), or None when the address is fine.
"""

from __future__ import annotations

import ipaddress
import re
import socket

from crawllib.core.vocab import BlockedKind

# Cloud instance-metadata endpoints: never contacted, even with network.allow_private
# (they hand out credentials); only an explicit network.resolve entry reaches them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.170.23",  # AWS EKS Pod Identity agent
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS Pod Identity agent over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server (a public-range address)
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215's local-use prefix
METADATA_NAMES = frozenset(
    (
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
    )
)


def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address written in `text` ("10.0.0.1", "[::1]", "fe80::1%eth0"), or None for a name."""
    text = text.strip("[]").partition("%")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def address_problem(address: str, allow_private: bool = False) -> str | None:
    """Why `address` (an IP literal) must not be contacted, or None if it may be.

    With allow_private only metadata addresses are refused.
    """
    ip = parse_ip(address)
    if ip is None:
        return BlockedKind.RESERVED_ADDRESS  # not an address at all: refuse rather than guess
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for carried in carried_ipv4(ip):
        problem = address_problem(str(carried), allow_private)
        if problem is not None:
            return problem
    if ip in METADATA_ADDRESSES:
        return BlockedKind.METADATA_ADDRESS
    if allow_private:
        return None
    if ip.is_loopback:
        return BlockedKind.LOOPBACK_ADDRESS
    if ip.is_link_local:
        return BlockedKind.LINK_LOCAL_ADDRESS
    if ip.is_multicast:
        return BlockedKind.MULTICAST_ADDRESS
    if ip.is_unspecified:
        return BlockedKind.UNSPECIFIED_ADDRESS
    if ip.is_private:
        return BlockedKind.PRIVATE_ADDRESS
    if ip.is_reserved or not ip.is_global:  # e.g. 100.64.0.0/10 (carrier-grade NAT)
        return BlockedKind.RESERVED_ADDRESS
    return None


def carried_ipv4(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (module text): 6to4's, Teredo's server and
    (de-obfuscated) client, NAT64's; none for others."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    carried = []
    if ip.sixtofour is not None:
        carried.append(ip.sixtofour)
    if ip.teredo is not None:
        carried.extend(ip.teredo)
    if ip in NAT64 or ip in NAT64_LOCAL:  # the /96 form: the last 32 bits
        carried.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip in NAT64_LOCAL:  # the /48 form (RFC 6052 2.2): bits 48-63 and 72-87
        packed = ip.packed
        carried.append(ipaddress.IPv4Address(packed[6:8] + packed[9:11]))
    return carried


_LEGACY_IPV4 = re.compile(r"[0-9a-fx.]+")


def legacy_ipv4(host: str) -> str | None:
    """The IPv4 address a host written in inet_aton's forms names ("2130706433", "127.1",
    "0x7f.0.0.1", "0177.0.0.1": what a resolver library or a browser may take for an
    address), dotted; None for a name."""
    if not _LEGACY_IPV4.fullmatch(host) or not any(c.isdigit() for c in host):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def host_problem(host: str, allow_private: bool = False) -> str | None:
    """Why the literal host of a URL must not be contacted (before any DNS), or None.

    Catches IP literals and metadata host names; other names are checked after resolution.
    """
    host = host.lower().rstrip(".")
    if host in METADATA_NAMES:
        return BlockedKind.METADATA_ADDRESS
    if parse_ip(host) is not None:
        return address_problem(host, allow_private)
    legacy = legacy_ipv4(host)
    if legacy is not None:
        return address_problem(legacy, allow_private)
    if host == "localhost" or host.endswith(".localhost"):
        return None if allow_private else BlockedKind.LOOPBACK_ADDRESS
    return None
