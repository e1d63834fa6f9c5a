"""What each interface is and is for: kind and role from sysfs facts first (the name only corroborates),
and the NIC nearest each GPU from their PCI paths."""

from __future__ import annotations

import bisect
import re

from nccl_doctor.node.model import (
    Interface,
    InterfaceKind,
    LinkLayer,
    NodeFacts,
    PathType,
    PciInfo,
    PortLink,
    Role,
    Scope,
    VirtualKind,
)

MGMT_MAX_MBPS = 25_000  # an Ethernet link at or below this, next to faster data links, is management
MBPS_PER_GBPS = 1000
ARPHRD_INFINIBAND = 32  # IPoIB
ARPHRD_LOOPBACK = 772
_IB_NAME = re.compile(r"^ib(\d|p\d|s\d)")
_UPLINK_KINDS = (VirtualKind.VETH, VirtualKind.VIRTUAL_ETHERNET)  # a container's own uplink
_ROLE_OF_KIND = {InterfaceKind.LOOPBACK: Role.LOOPBACK, InterfaceKind.VIRTUAL: Role.VIRTUAL}

# Depth (in path components) of what two sysfs PCI paths share: /sys/devices/pciDDDD:BB/<root port>/...
ROOT_COMPLEX_DEPTH = 2  # sharing no more than /sys/devices: different root complexes
HOST_BRIDGE_DEPTH = 3  # the same host bridge, different root ports
SWITCH_DEPTH = 5  # deep enough that two hops below the shared part are one PCIe switch


def link_rdma(facts: NodeFacts) -> None:
    """Attach each RDMA port to the netdevs that back it (``Interface.rdma``)."""
    by_name = {i.name: i for i in facts.interfaces}
    for dev in facts.rdma_devices:
        for port in dev.ports:
            for nd in port.netdevs:
                if nd in by_name:
                    by_name[nd].rdma.append(PortLink(device=dev.name, port=port.port, state=port.state,
                                                     rate=port.rate, rate_gbps=port.rate_gbps,
                                                     link_layer=port.link_layer))


def _kind(i: Interface, efa_buses: set[str]) -> InterfaceKind:
    if i.kind == InterfaceKind.LOOPBACK or i.arphrd == ARPHRD_LOOPBACK:
        return InterfaceKind.LOOPBACK
    if i.arphrd == ARPHRD_INFINIBAND:
        return InterfaceKind.INFINIBAND
    if i.bond is not None:
        return InterfaceKind.BOND
    if any(r.link_layer == LinkLayer.ETHERNET for r in i.rdma):
        return InterfaceKind.ROCE
    if any(r.link_layer not in (LinkLayer.INFINIBAND, LinkLayer.ETHERNET) for r in i.rdma):
        return InterfaceKind.EFA
    if i.pci and _bus(i.pci) in efa_buses and i.driver == "ena":
        return InterfaceKind.EFA
    if i.virtual:
        return InterfaceKind.VIRTUAL
    return InterfaceKind.ETHERNET


def _bus(pci: PciInfo) -> str:
    """``0000:10:1b.0`` -> ``0000:10``."""
    return pci.address.rsplit(":", 1)[0]


def link_mbps(i: Interface) -> int:
    """What the interface carries: its fastest RDMA port's rate, else its Ethernet speed (0 unknown)."""
    rates = [r.rate_gbps for r in i.rdma if r.rate_gbps]
    return int(max(rates) * MBPS_PER_GBPS) if rates else (i.speed_mbps or 0)


def speed_text(i: Interface) -> str:
    """``400 Gb/s``, ``100 Mb/s`` or ``speed unknown``."""
    s = link_mbps(i)
    if not s:
        return "speed unknown"
    return f"{s // MBPS_PER_GBPS} Gb/s" if s >= MBPS_PER_GBPS else f"{s} Mb/s"


def classify(facts: NodeFacts) -> None:
    """Set ``kind`` and ``role`` on every interface; note names that lie about the kind."""
    link_rdma(facts)
    _kinds_and_roles(facts)
    _roce_bond_members(facts)
    _container_uplinks(facts)
    _management(facts)
    _bond_members_share_role(facts)


def _kinds_and_roles(facts: NodeFacts) -> None:
    """One pass in interface order: kind, a bond's RDMA ports (its slaves'), role, name notes."""
    by_name = {i.name: i for i in facts.interfaces}
    efa_buses = {_bus(d.pci) for d in facts.rdma_devices if d.is_efa and d.pci}
    for i in facts.interfaces:
        i.kind = _kind(i, efa_buses)
        if i.kind == InterfaceKind.BOND and i.bond and not i.rdma:
            for s in i.bond.slaves:
                if s in by_name:
                    i.rdma.extend(by_name[s].rdma)
        i.role = _ROLE_OF_KIND.get(i.kind, Role.DATA)
        if _IB_NAME.match(i.name) and i.kind != InterfaceKind.INFINIBAND:
            virtual = i.virtual_kind and i.kind == InterfaceKind.VIRTUAL
            what = f"a {i.virtual_kind}" if virtual else f"{i.kind}"
            i.notes.append(f"named like InfiniBand but is {what} (ARPHRD {i.arphrd}, not 32: not IPoIB)")


def _roce_bond_members(facts: NodeFacts) -> None:
    """Members of a RoCE bond (mlx5 LAG) carry RoCE too."""
    by_name = {i.name: i for i in facts.interfaces}
    for i in facts.interfaces:
        if i.kind != InterfaceKind.BOND or not i.bond or not any(r.link_layer == LinkLayer.ETHERNET for r in i.rdma):
            continue
        for s in i.bond.slaves:
            if s in by_name and by_name[s].kind == InterfaceKind.ETHERNET:
                by_name[s].kind = InterfaceKind.ROCE


def _container_uplinks(facts: NodeFacts) -> None:
    """Inside a container or network namespace the node's own uplink is a veth (a pod's ``eth0``).
    With no physical data interface, the veths that carry the default route (or, with no default route,
    every veth with a global address outside a bridge) are that uplink: role ``data``, kind still
    ``virtual``. Bridges (docker0, cni0) and bridge ports stay virtual."""
    if any(i.role == Role.DATA for i in facts.interfaces):
        return
    veths = [i for i in facts.interfaces if i.virtual_kind in _UPLINK_KINDS and not i.master
             and i.running and any(a.scope == Scope.GLOBAL for a in i.addresses)]
    routed = [i for i in veths if i.default_route]
    for i in routed or veths:
        i.role = Role.DATA


def _management(facts: NodeFacts) -> None:
    """An Ethernet interface or bond without RDMA is management when a faster data interface (or one on
    the RDMA fabric) exists and it carries the default route or runs at <= ``MGMT_MAX_MBPS``. Interfaces
    are judged in order, so one found to be management no longer counts as data for the next. Linear (but
    for a log factor): speeds computed once, "is any other data interface faster" counted, not scanned."""
    data = [i for i in facts.interfaces if i.role == Role.DATA]
    fabric = {id(i) for i in data if i.rdma}  # never re-judged here (they have RDMA): a fixed set
    mbps = {id(i): link_mbps(i) for i in facts.interfaces}  # once each: the loop below is linear
    faster_than = _FasterCount([mbps[id(i)] for i in data])
    by_name = {i.name: i for i in facts.interfaces}
    for i in facts.interfaces:
        if i.kind not in (InterfaceKind.ETHERNET, InterfaceKind.BOND) or i.rdma:
            continue
        slaves = [by_name[s] for s in dict.fromkeys(i.bond.slaves if i.bond else []) if s in by_name]
        slaves = [s for s in slaves if s is not i and s.role == Role.DATA]
        on_fabric = len(fabric) - sum(id(s) in fabric for s in slaves)
        quicker = faster_than(mbps[id(i)]) - sum(mbps[id(s)] > mbps[id(i)] for s in slaves)
        slow = i.speed_mbps is None or i.speed_mbps <= MGMT_MAX_MBPS
        if (on_fabric or quicker) and (i.default_route or slow):
            if i.role == Role.DATA:
                faster_than.remove(mbps[id(i)])
            i.role = Role.MANAGEMENT
            if i.kind == InterfaceKind.ETHERNET:
                i.kind = InterfaceKind.MANAGEMENT


class _FasterCount:
    """How many of a multiset of link speeds exceed a speed, with removals: a Fenwick tree over the
    distinct speeds, so ``_management`` weighs each interface against all others in O(log n)."""

    def __init__(self, speeds: list[int]):
        self._keys = sorted(set(speeds))
        self._tree = [0] * (len(self._keys) + 1)
        self._total = 0
        for s in speeds:
            self._add(s, 1)

    def _add(self, speed: int, delta: int) -> None:
        self._total += delta
        k = bisect.bisect_left(self._keys, speed) + 1
        while k < len(self._tree):
            self._tree[k] += delta
            k += k & -k

    def remove(self, speed: int) -> None:
        self._add(speed, -1)

    def __call__(self, speed: int) -> int:
        """Count of speeds strictly above ``speed``."""
        k, at_or_below = bisect.bisect_right(self._keys, speed), 0
        while k > 0:
            at_or_below += self._tree[k]
            k -= k & -k
        return self._total - at_or_below


def _bond_members_share_role(facts: NodeFacts) -> None:
    by_name = {i.name: i for i in facts.interfaces}
    for i in facts.interfaces:
        master = by_name.get(i.master) if i.master else None
        if master is None or master.kind != InterfaceKind.BOND or i.kind != InterfaceKind.ETHERNET:
            continue
        if master.role == Role.MANAGEMENT:
            i.kind, i.role = InterfaceKind.MANAGEMENT, Role.MANAGEMENT


# ---------------------------------------------------------------------------------------------------
# GPU to NIC affinity
# ---------------------------------------------------------------------------------------------------


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def pcie_distance(a: PciInfo, b: PciInfo) -> PathType:
    """NCCL-like path type between two PCI functions from their sysfs paths (PIX/PXB/PHB/SYS)."""
    pa, pb = _parts(a.path), _parts(b.path)
    common = 0
    while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
        common += 1
    if common <= ROOT_COMPLEX_DEPTH:  # different root complexes (/sys/devices/pciDDDD:BB)
        if a.numa_node is not None and b.numa_node is not None and a.numa_node != b.numa_node:
            return PathType.SYS
        return PathType.PHB
    if common == HOST_BRIDGE_DEPTH:
        return PathType.PHB
    below = max(len(pa), len(pb)) - common
    # a PCIe switch shows as an upstream bridge with downstream bridges: two hops under it is one switch
    return PathType.PIX if below <= 1 or (below <= 2 and common >= SWITCH_DEPTH) else PathType.PXB


def _shared_chars(a: str, b: str) -> int:
    """Length of the common leading characters of ``a`` and ``b``."""
    return next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def gpu_affinity(facts: NodeFacts) -> None:
    """Nearest data NIC for each GPU: RDMA devices with an active port, else physical data netdevs."""
    nics = [(d.name, d.pci) for d in facts.rdma_devices if d.pci is not None and any(p.active for p in d.ports)]
    if not nics:
        nics = [(i.name, i.pci) for i in facts.interfaces if i.pci is not None and i.role == Role.DATA]
    if not nics:
        return
    for gpu in facts.gpus:
        here = gpu.pci
        name, pci = min(nics, key=lambda n: (pcie_distance(here, n[1]).rank, -_shared_chars(here.path, n[1].path)))
        gpu.nearest_nic, gpu.nearest_nic_numa = name, pci.numa_node
        gpu.pcie_distance = pcie_distance(gpu.pci, pci)
