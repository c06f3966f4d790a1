"""Which addresses discovery may connect to (SSRF guard).

Every address a host name resolves to is classified; one refused address refuses the
host (a name that also points inward is not used). Always refused: cloud metadata
addresses, link-local (169.254.0.0/16, fe80::/10), unspecified, multicast and reserved
addresses. Loopback and private / non-global addresses (RFC 1918, fc00::/7, CGNAT
100.64.0.0/10, documentation ranges…) are refused unless the policy allows them — tests
and a single-machine ``agentloom serve`` talking to a local server do. IPv4 addresses
embedded in IPv6 (``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``) are judged as IPv4.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .errors import AddressNotAllowed, ProviderUnreachable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack… instance metadata
    "169.254.170.2",  # ECS task metadata and credentials
    "fd00:ec2::254",  # AWS instance metadata over IPv6
    "100.100.100.200",  # Alibaba Cloud metadata
))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class AddressPolicy:
    allow_loopback: bool = False
    allow_private: bool = False


def _as_ipv4(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def classify(address: IPAddress) -> str:
    """``metadata``, ``link_local``, ``unspecified``, ``multicast``, ``reserved``,
    ``loopback``, ``private`` or ``public``."""
    address = _as_ipv4(address)
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address.is_link_local:
        return "link_local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if address.is_loopback:
        return "loopback"
    if address.is_reserved:
        return "reserved"
    if address.is_private or not address.is_global:
        return "private"
    return "public"


def allowed(kind: str, policy: AddressPolicy) -> bool:
    return kind == "public" or (kind == "loopback" and policy.allow_loopback) \
        or (kind == "private" and policy.allow_private)


_WHAT = {"metadata": "a cloud metadata address", "link_local": "a link-local address",
         "unspecified": "an unspecified address", "multicast": "a multicast address",
         "reserved": "a reserved address", "loopback": "a loopback address",
         "private": "a private or internal address"}


def check_addresses(addresses: Sequence[str], policy: AddressPolicy) -> list[str]:
    """The addresses in order, once each, when every one is allowed; else
    ``AddressNotAllowed`` naming the kind (never the address: a resolved internal
    address is not the admin's to learn)."""
    checked: list[str] = []
    for text in addresses:
        try:
            address = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            raise AddressNotAllowed("the base URL's host resolved to an unusable address",
                                    details={"reason": "unusable"}) from None
        kind = classify(address)
        if not allowed(kind, policy):
            raise AddressNotAllowed(
                f"the base URL's host is {_WHAT[kind]}, which model discovery does not "
                "connect to", details={"reason": kind})
        if str(address) not in checked:
            checked.append(str(address))
    if not checked:
        raise ProviderUnreachable("the base URL's host name did not resolve",
                                  details={"reason": "dns"})
    return checked


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system resolver (an IP literal resolves to itself)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]
