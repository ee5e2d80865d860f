"""The SSRF guard's rules, without a network: literals in every notation, address classes, the allow-list."""

import ipaddress

import pytest

from integrations.domain.ssrf import (
    AllowList,
    TargetRefused,
    parse_ip_literal,
    parse_ipv4_literal,
    refusal_reason,
    vet_target,
)


@pytest.mark.parametrize(
    ("spelling", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.000.000.001", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("2852039166", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("10.1", "10.0.0.1"),
        ("8.8.8.8.", "8.8.8.8"),
    ],
)
def test_ipv4_literals_are_read_as_c_resolvers_read_them(spelling, address):
    assert parse_ipv4_literal(spelling) == ipaddress.IPv4Address(address)


@pytest.mark.parametrize("spelling", ["256.0.0.1", "1.2.3.4.5", "0x1ffffffff", "4294967296", "08.0.0.1", "1.2.65536"])
def test_malformed_numeric_hosts_are_refused_not_resolved(spelling):
    with pytest.raises(TargetRefused, match="not a valid IP address"):
        parse_ipv4_literal(spelling)


@pytest.mark.parametrize("name", ["example.com", "hooks.example.com", "1.example", "a1b2", "xn--bcher-kva.example"])
def test_names_are_not_literals(name):
    assert parse_ip_literal(name) is None


def test_ipv6_literals_with_or_without_brackets():
    assert parse_ip_literal("[::1]") == ipaddress.IPv6Address("::1")
    assert parse_ip_literal("::ffff:7f00:1") == ipaddress.IPv6Address("::ffff:127.0.0.1")
    with pytest.raises(TargetRefused):
        parse_ip_literal("[::zz]")


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("100.64.0.1", "not a public"),
        ("192.88.99.1", "not a public"),  # the retired 6to4 relay anycast
        ("3fff::1", "not a public"),  # IPv6 documentation (RFC 9637), global to Python 3.13.0's ipaddress
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "broadcast"),
        ("192.0.2.10", "private"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd00:ec2::254", "cloud metadata"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback address (IPv4-mapped 127.0.0.1)"),
        ("::ffff:10.0.0.1", "private address (IPv4-mapped 10.0.0.1)"),
        ("::ffff:169.254.169.254", "cloud metadata address (IPv4-mapped"),
        ("::127.0.0.1", "loopback address (IPv4-compatible"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata address (NAT64"),
        ("2002:7f00:1::", "loopback address (6to4"),
        ("2002:a00:1::", "private address (6to4"),
        ("fe80::1%eth0", "scoped"),
    ],
)
def test_non_public_addresses_are_refused_with_the_reason(address, reason):
    found = refusal_reason(ipaddress.ip_address(address))
    assert found is not None
    assert reason in found


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450::1"])
def test_public_addresses_pass(address):
    assert refusal_reason(ipaddress.ip_address(address)) is None


def resolver(table):
    calls = []

    def resolve(host, port):
        calls.append(host)
        return table[host]

    resolve.calls = calls
    return resolve


def test_a_name_is_refused_when_any_of_its_addresses_is_bad():
    resolve = resolver({"mixed.example": ["93.184.216.34", "10.0.0.7"]})
    with pytest.raises(TargetRefused, match=r"mixed\.example resolves to 10\.0\.0\.7, which is a private address"):
        vet_target("mixed.example", 443, allow_list=AllowList(), resolve=resolve)


def test_a_public_name_is_pinned_to_a_checked_address_ipv4_first():
    resolve = resolver({"hooks.example": ["2606:4700::6810:84e5", "104.16.132.229"]})
    target = vet_target("Hooks.Example.", 443, allow_list=AllowList(), resolve=resolve)
    assert (target.host, target.port, target.address, target.allow_listed) == (
        "hooks.example",
        443,
        "104.16.132.229",
        False,
    )
    assert resolve.calls == ["hooks.example"]


def test_literals_are_not_sent_to_the_resolver():
    resolve = resolver({})
    with pytest.raises(TargetRefused, match="2130706433 is a loopback address"):
        vet_target("2130706433", 80, allow_list=AllowList(), resolve=resolve)
    assert resolve.calls == []


def test_a_name_without_addresses_is_refused():
    with pytest.raises(TargetRefused, match="did not resolve"):
        vet_target("nothing.example", 80, allow_list=AllowList(), resolve=resolver({"nothing.example": []}))


class TestAllowList:
    def test_parses_hosts_ports_and_ipv6(self):
        allow = AllowList.parse(["127.0.0.1", "Sink.Local:8080", "[::1]:9000", "[fd00::5]", "::2", " "])
        assert allow.entries == {
            ("127.0.0.1", None),
            ("sink.local", 8080),
            ("::1", 9000),
            ("fd00::5", None),
            ("::2", None),
        }

    def test_a_comma_separated_string_is_accepted(self):
        assert AllowList.parse("a.local:1, b.local").entries == {("a.local", 1), ("b.local", None)}

    @pytest.mark.parametrize("entry", ["host:0", "host:70000", "host:http", "[::1", "[::1]x", ":80"])
    def test_invalid_entries_name_the_entry(self, entry):
        with pytest.raises(ValueError, match="WEBHOOK_ALLOWED_HOSTS"):
            AllowList.parse([entry])

    def test_host_port_entry_lets_exactly_that_host_and_port_through(self):
        allow = AllowList.parse(["127.0.0.1:8080"])
        assert allow.allows("127.0.0.1", 8080)
        assert not allow.allows("127.0.0.1", 8081)
        assert not allow.allows("localhost", 8080)
        assert not allow.allows("2130706433", 8080)  # another spelling is another host
        assert not allow.allows("127.0.0.2", 8080)

    def test_host_entry_allows_any_port(self):
        allow = AllowList.parse(["127.0.0.1"])
        assert allow.allows("127.0.0.1", 1)
        assert allow.allows("127.0.0.1", 65535)
        assert not allow.allows("127.0.0.2", 80)

    def test_allow_listed_target_skips_the_address_check_but_is_still_pinned(self):
        allow = AllowList.parse(["sink.local:8080"])
        resolve = resolver({"sink.local": ["10.1.2.3"]})
        target = vet_target("sink.local", 8080, allow_list=allow, resolve=resolve)
        assert target.address == "10.1.2.3"
        assert target.allow_listed
        with pytest.raises(TargetRefused):
            vet_target("sink.local", 8081, allow_list=allow, resolve=resolve)
