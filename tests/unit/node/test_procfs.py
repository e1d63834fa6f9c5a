"""``/proc/net`` parsers on text as the kernel prints it."""

from nccl_doctor.node.procfs import (
    attribute_ipv4,
    default_route_ifaces,
    parse_fib_trie_local,
    parse_if_inet6,
    parse_ipv6_default,
    parse_route,
)

# Verbatim from a live kernel (6.18, this dev box).
FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
"""
ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""
IF_INET6 = """fe8000000000000000fc00fffe000001 04 40 20 80     eth0
fd000000000000000000000000000002 04 40 00 82     eth0
00000000000000000000000000000001 01 80 10 80       lo
"""
IPV6_ROUTE = """00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
"""


def test_procfs_parsers_on_real_text():
    routes = parse_route(ROUTE)
    assert default_route_ifaces(routes) == ["eth0"]
    local = parse_fib_trie_local(FIB_TRIE)
    assert local == ["127.0.0.1", "192.0.2.2"]  # not 127.0.0.0/8 host LOCAL, not broadcasts
    v4, orphans = attribute_ipv4(local, routes, "lo")
    assert [str(a) for a in v4["eth0"]] == ["192.0.2.2/24"] and [str(a) for a in v4["lo"]] == ["127.0.0.1/8"]
    assert orphans == []
    v6 = parse_if_inet6(IF_INET6)
    assert [(a.address, a.prefixlen, a.scope) for a in v6["eth0"]] == [("fe80::fc:ff:fe00:1", 64, "link"),
                                                                       ("fd00::2", 64, "global")]
    assert parse_ipv6_default(IPV6_ROUTE) == ["eth0"]  # the lo reject route is not a default route


def test_same_subnet_on_two_ifaces_is_attributed_to_both():
    routes = parse_route("h\nib0\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
                         "ib1\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n")
    v4, _ = attribute_ipv4(["10.1.0.5"], routes, "lo")
    assert set(v4) == {"ib0", "ib1"}
