"""Pure parsers of ``/proc/net`` text: IPv4 routes, local IPv4 addresses, IPv6 addresses and default routes.

IPv4 addresses are not in sysfs: they come from the ``/32 host LOCAL`` leaves of ``/proc/net/fib_trie``,
attributed to an interface through its connected route in ``/proc/net/route``. An interface that is
administratively down has no routes, so its IPv4 addresses are invisible here (and to NCCL's peers).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from nccl_doctor.node.model import Address, Family, Scope

RTF_UP, RTF_GATEWAY, RTF_REJECT = 0x1, 0x2, 0x200

ROUTE_COLUMNS = 8  # Iface Destination Gateway Flags RefCnt Use Metric Mask (then MTU Window IRTT)
IF_INET6_COLUMNS = 6  # address ifindex prefixlen scope flags name
IPV6_ROUTE_COLUMNS = 10  # dest plen src plen nexthop metric refcnt use flags name
LOOPBACK_PREFIXLEN = 8  # 127.0.0.0/8
_LEAF = "|--"  # a fib_trie leaf: an address
_SCOPES6 = {0x00: Scope.GLOBAL, 0x20: Scope.LINK, 0x10: Scope.HOST, 0x40: Scope.SITE}


@dataclass(frozen=True)
class Route4:
    iface: str
    network: ipaddress.IPv4Network
    gateway: str
    flags: int
    metric: int


def _le_ip(hex8: str) -> str:
    return str(ipaddress.IPv4Address(bytes.fromhex(hex8)[::-1]))


def parse_route(text: str) -> list[Route4]:
    """``/proc/net/route``: hex little-endian addresses; header line skipped."""
    routes = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < ROUTE_COLUMNS:
            continue
        try:
            dest, gw, mask = _le_ip(cols[1]), _le_ip(cols[2]), _le_ip(cols[7])
            flags, metric = int(cols[3], 16), int(cols[6])
            net = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
        except ValueError:
            continue
        routes.append(Route4(cols[0], net, gw, flags, metric))
    return routes


def default_route_ifaces(routes: list[Route4]) -> list[str]:
    """Interfaces carrying an IPv4 default route, lowest metric first."""
    defaults = [r for r in routes if r.network.prefixlen == 0 and r.flags & RTF_UP and not r.flags & RTF_REJECT]
    return list(dict.fromkeys(r.iface for r in sorted(defaults, key=lambda r: r.metric)))


def parse_fib_trie_local(text: str) -> list[str]:
    """Local IPv4 addresses: leaves followed by ``/32 host LOCAL`` (any table section)."""
    found: dict[str, None] = {}  # ordered, and a look-up per leaf (a list scan was quadratic)
    leaf = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(_LEAF):
            leaf = s[len(_LEAF):].strip()
        elif leaf and s.startswith("/32 host LOCAL"):
            found.setdefault(leaf)
    return list(found)


def attribute_ipv4(addrs: list[str], routes: list[Route4],
                   loopback: str | None) -> tuple[dict[str, list[Address]], list[str]]:
    """Match each local address to the interface(s) whose connected route holds it (longest prefix): one
    dict look-up per distinct prefix length, not a scan of every route (linear in addresses)."""
    connected: dict[int, dict[ipaddress.IPv4Network, list[str]]] = {}  # prefixlen -> network -> ifaces
    for r in routes:
        if not r.flags & RTF_GATEWAY and r.network.prefixlen > 0:
            connected.setdefault(r.network.prefixlen, {}).setdefault(r.network, []).append(r.iface)
    lengths = sorted(connected, reverse=True)  # longest first: the first hit is the best
    by_iface: dict[str, list[Address]] = {}
    orphans: list[str] = []
    for a in addrs:
        ip = ipaddress.IPv4Address(a)
        best, ifaces = next(((n, connected[n][net]) for n in lengths
                             if (net := ipaddress.IPv4Network((ip, n), strict=False)) in connected[n]), (0, []))
        if ifaces:
            for iface in dict.fromkeys(ifaces):
                by_iface.setdefault(iface, []).append(Address(Family.INET, a, best))
        elif ip.is_loopback and loopback:
            by_iface.setdefault(loopback, []).append(Address(Family.INET, a, LOOPBACK_PREFIXLEN, Scope.HOST))
        else:
            orphans.append(a)
    return by_iface, orphans


def parse_if_inet6(text: str) -> dict[str, list[Address]]:
    """``/proc/net/if_inet6``: ``addr ifindex prefixlen scope flags name`` in hex."""
    out: dict[str, list[Address]] = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != IF_INET6_COLUMNS:
            continue
        try:
            addr = str(ipaddress.IPv6Address(bytes.fromhex(cols[0])))
            plen, scope = int(cols[2], 16), int(cols[3], 16)
        except ValueError:
            continue
        out.setdefault(cols[5], []).append(Address(Family.INET6, addr, plen, _SCOPES6.get(scope, Scope.GLOBAL)))
    return out


def parse_ipv6_default(text: str) -> list[str]:
    """Interfaces with an IPv6 default route in ``/proc/net/ipv6_route`` (reject routes skipped)."""
    out = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != IPV6_ROUTE_COLUMNS:
            continue
        try:
            flags = int(cols[8], 16)
        except ValueError:
            continue
        if int(cols[0], 16) == 0 and cols[1] == "00" and flags & RTF_UP and not flags & RTF_REJECT:
            out.append(cols[9])
    return list(dict.fromkeys(out))
