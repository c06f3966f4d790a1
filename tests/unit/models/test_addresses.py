"""The SSRF guard's classification of addresses."""

from __future__ import annotations

import ipaddress

import pytest

from agentloom.models import AddressNotAllowed, AddressPolicy, ProviderUnreachable, classify
from agentloom.models._addresses import check_addresses

OPEN = AddressPolicy(allow_loopback=True, allow_private=True)


@pytest.mark.parametrize(("address", "kind"), [
    ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"),
    ("169.254.170.2", "metadata"), ("100.100.100.200", "metadata"),
    ("::ffff:169.254.169.254", "metadata"), ("64:ff9b::a9fe:a9fe", "metadata"),
    ("169.254.1.1", "link_local"), ("fe80::1", "link_local"), ("fe80::abcd:1", "link_local"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"), ("240.0.0.1", "reserved"),
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),
    ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"),
    ("fd12:3456::1", "private"), ("100.64.0.1", "private"), ("192.0.2.1", "private"),
    ("93.184.216.34", "public"), ("2606:4700::1111", "public"), ("8.8.8.8", "public"),
])
def test_classify(address, kind):
    assert classify(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "fe80::1",
                                     "169.254.0.1", "0.0.0.0", "224.0.0.1"])
def test_always_refused_even_when_loopback_and_private_are_allowed(address):
    with pytest.raises(AddressNotAllowed) as caught:
        check_addresses([address], OPEN)
    assert caught.value.code == "address_not_allowed"
    assert address not in caught.value.message  # the kind, never the address


@pytest.mark.parametrize(("address", "flag"), [
    ("127.0.0.1", "allow_loopback"), ("::1", "allow_loopback"),
    ("10.0.0.1", "allow_private"), ("192.168.0.10", "allow_private")])
def test_loopback_and_private_need_a_flag(address, flag):
    with pytest.raises(AddressNotAllowed):
        check_addresses([address], AddressPolicy())
    assert check_addresses([address], AddressPolicy(**{flag: True})) == [address]


def test_every_resolved_address_is_checked():
    with pytest.raises(AddressNotAllowed) as caught:
        check_addresses(["93.184.216.34", "10.0.0.7"], AddressPolicy())
    assert caught.value.details == {"reason": "private"}
    assert check_addresses(["93.184.216.34", "93.184.216.34", "fe80::1%eth0"][:2],
                           AddressPolicy()) == ["93.184.216.34"]
    with pytest.raises(AddressNotAllowed):
        check_addresses(["93.184.216.34", "fe80::1%eth0"], OPEN)


def test_nothing_resolved_is_unreachable():
    with pytest.raises(ProviderUnreachable) as caught:
        check_addresses([], AddressPolicy())
    assert caught.value.details == {"reason": "dns"}
