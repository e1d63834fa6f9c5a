"""Node facts from files under one root: interfaces, addresses, routes, RDMA ports, NICs, GPUs, modules.

Everything is read through ``FsReader``, which resolves symlinks itself (a root may be an extracted
snapshot with relative links) and remembers every file, link and directory it touched, so
``snapshot.py`` can capture exactly what the probe read. Sysfs is never walked recursively: it has
cycles; only the specific links needed are resolved.

IPv4 addresses are not in sysfs: they come from the ``/32 host LOCAL`` leaves of ``/proc/net/fib_trie``,
attributed to an interface through its connected route in ``/proc/net/route``. An interface that is
administratively down has no routes, so its IPv4 addresses are invisible here (and to NCCL's peers).
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------------------------------------------
# Reading files under a root, recording what was read
# ---------------------------------------------------------------------------------------------------

_MAX_LINKS = 40


class FsReader:
    """Read files as if ``root`` were ``/``: absolute link targets are re-rooted, nothing escapes root.

    ``files`` (canonical path -> text), ``links`` (canonical path -> target) and ``dirs`` (canonical
    paths) record what was touched; paths are absolute strings relative to the root ("/sys/...").
    """

    def __init__(self, root: Path | str = "/"):
        self.root = Path(root)
        self.files: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.dirs: set[str] = set()
        self._dir_cache: dict[str, str | None] = {"/": "/"}

    # -- path resolution --------------------------------------------------------------------------
    def _host(self, canon: str) -> str:
        return os.path.join(str(self.root), canon.lstrip("/"))

    def _resolve_dir(self, canon_dir: str, parts: list[str], depth: int = 0) -> str | None:
        cur = canon_dir
        for part in parts:
            if part in ("", "."):
                continue
            if part == "..":
                cur = os.path.dirname(cur) or "/"
                continue
            nxt = os.path.join(cur, part)
            try:
                st = os.lstat(self._host(nxt))
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                if depth >= _MAX_LINKS:
                    return None
                target = os.readlink(self._host(nxt))
                self.links[nxt] = target
                base = "/" if target.startswith("/") else cur
                res = self._resolve_dir(base, target.split("/"), depth + 1)
                if res is None:
                    return None
                cur = res
            else:
                cur = nxt
        return cur

    def canonical(self, path: str) -> str | None:
        """The link-free path of ``path`` under the root, or None when it does not exist."""
        path = "/" + path.strip("/")
        parent, name = os.path.split(path)
        if parent not in self._dir_cache:
            self._dir_cache[parent] = self._resolve_dir("/", parent.split("/"))
        pdir = self._dir_cache[parent]
        if pdir is None:
            return None
        if not name:
            return pdir
        return self._resolve_dir(pdir, [name])

    # -- reads ------------------------------------------------------------------------------------
    def read(self, path: str) -> str | None:
        """File text with the trailing newline stripped; None if missing or unreadable (EINVAL...).
        Line ends are kept as they are (no CRLF translation): NCCL reads nccl.conf byte for byte."""
        canon = self.canonical(path)
        if canon is None:
            return None
        if canon in self.files:
            return self.files[canon].rstrip("\n")
        try:
            with open(self._host(canon), encoding="utf-8", errors="replace", newline="") as fh:
                text = fh.read()
        except OSError:
            return None
        self.files[canon] = text
        return text.rstrip("\n")

    def read_int(self, path: str, base: int = 10) -> int | None:
        text = self.read(path)
        try:
            return int(text.strip(), base) if text is not None else None
        except ValueError:
            return None

    def readlink(self, path: str) -> str | None:
        """Target of the link at ``path`` (its parents resolved); None when it is not a link."""
        path = "/" + path.strip("/")
        parent, name = os.path.split(path)
        pdir = self.canonical(parent)
        if pdir is None:
            return None
        at = os.path.join(pdir, name)
        try:
            target = os.readlink(self._host(at))
        except OSError:
            return None
        self.links[at] = target
        return target

    def link_name(self, path: str) -> str | None:
        """Basename of what a link points to (``device/driver`` -> ``mlx5_core``)."""
        target = self.readlink(path)
        return os.path.basename(target.rstrip("/")) if target else None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries; links and directories among them are recorded (not followed)."""
        canon = self.canonical(path)
        if canon is None:
            return []
        try:
            names = sorted(os.listdir(self._host(canon)))
        except OSError:
            return []
        self.dirs.add(canon)
        for name in names:
            at = os.path.join(canon, name)
            try:
                st = os.lstat(self._host(at))
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                self.links[at] = os.readlink(self._host(at))
            elif stat.S_ISDIR(st.st_mode):
                self.dirs.add(at)
        return names

    def is_dir(self, path: str) -> bool:
        canon = self.canonical(path)
        if canon is None or not os.path.isdir(self._host(canon)):
            return False
        self.dirs.add(canon)
        return True


# ---------------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------------


@dataclass
class Address:
    family: str  # "inet" | "inet6"
    address: str
    prefixlen: int | None
    scope: str = "global"  # "global" | "link" | "host"

    def __str__(self) -> str:
        return f"{self.address}/{self.prefixlen}" if self.prefixlen is not None else self.address


@dataclass
class PciInfo:
    address: str  # 0000:1a:00.0
    vendor: str | None
    device: str | None
    pci_class: str | None
    numa_node: int | None
    driver: str | None
    path: str  # canonical sysfs path, for PCIe-distance comparisons


@dataclass
class Gid:
    index: int
    gid: str
    type: str | None  # "RoCE v2" | "IB/RoCE v1"
    ndev: str | None


@dataclass
class RdmaPort:
    device: str
    port: int
    state: str  # "ACTIVE", "DOWN", ...
    phys_state: str  # "LinkUp", "Disabled", ...
    rate: str | None  # as the kernel writes it: "400 Gb/sec (4X NDR)"
    rate_gbps: float | None
    link_layer: str  # "InfiniBand" | "Ethernet" | "Unknown"
    netdevs: list[str] = field(default_factory=list)
    gids: list[Gid] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.state in ("ACTIVE", "ACTIVE_DEFER")


@dataclass
class RdmaDevice:
    name: str
    driver: str | None
    pci: PciInfo | None
    ports: list[RdmaPort]
    netdevs: list[str]  # netdevs on the same PCI function

    @property
    def is_efa(self) -> bool:
        return self.driver == "efa" or (self.pci is not None and self.pci.vendor == "0x1d0f")


@dataclass
class BondInfo:
    mode: str | None
    slaves: list[str]
    down_slaves: list[str]


@dataclass
class Interface:
    name: str
    ifindex: int | None
    iflink: int | None
    arphrd: int | None
    kind: str = "ethernet"  # loopback|infiniband|roce|efa|bond|ethernet|management|virtual
    role: str = "data"  # data|management|virtual|loopback: what the interface is for on this node
    operstate: str = "unknown"
    up: bool = False  # IFF_UP
    running: bool = False  # IFF_RUNNING: up and operstate up/unknown (psutil's "isup")
    carrier: bool | None = None
    mtu: int | None = None
    speed_mbps: int | None = None
    mac: str | None = None
    addresses: list[Address] = field(default_factory=list)
    virtual: bool = False  # lives under /sys/devices/virtual
    virtual_kind: str | None = None  # veth|bridge|tun|bond|vlan|other
    driver: str | None = None
    pci: PciInfo | None = None
    master: str | None = None
    bond: BondInfo | None = None
    rdma: list[dict] = field(default_factory=list)  # [{device, port, state, rate, link_layer}]
    default_route: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def numa_node(self) -> int | None:
        return self.pci.numa_node if self.pci else None

    def ipv4(self) -> list[Address]:
        return [a for a in self.addresses if a.family == "inet"]


@dataclass
class Gpu:
    pci: PciInfo
    nearest_nic: str | None = None  # RDMA device (or netdev) with the closest PCI path
    nearest_nic_numa: int | None = None
    pcie_distance: str | None = None  # PIX | PXB | PHB | SYS (approximation from sysfs paths)


@dataclass
class GdrInfo:
    peermem_module: str | None  # nvidia_peermem | nv_peer_mem
    nvidia_loaded: bool
    open_kernel_module: bool | None
    driver_version: str | None
    kernel: str | None
    dmabuf_possible: bool


@dataclass
class NodeFacts:
    host: str
    interfaces: list[Interface]
    rdma_devices: list[RdmaDevice]
    gpus: list[Gpu]
    gdr: GdrInfo
    default_route_ifaces: list[str]
    default_route6_ifaces: list[str]
    unattributed_addresses: list[str]
    etc_hosts: str | None

    def iface(self, name: str) -> Interface | None:
        return next((i for i in self.interfaces if i.name == name), None)

    @property
    def loopback(self) -> str | None:
        """The loopback interface's name (``lo``); None if the node has none."""
        return loopback_name(self.interfaces)


def loopback_name(ifaces: Iterable[Interface]) -> str | None:
    return next((i.name for i in ifaces if i.kind == "loopback"), None)


# ---------------------------------------------------------------------------------------------------
# Parsers for procfs files (pure functions of text)
# ---------------------------------------------------------------------------------------------------

RTF_UP, RTF_GATEWAY, RTF_REJECT = 0x1, 0x2, 0x200


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
        if len(cols) < 8:
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
    found: list[str] = []
    leaf = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|--"):
            leaf = s[3:].strip()
        elif leaf and s.startswith("/32 host LOCAL"):
            if leaf not in found:
                found.append(leaf)
    return found


def attribute_ipv4(addrs: list[str], routes: list[Route4], loopback: str | None) -> tuple[dict[str, list[Address]], list[str]]:
    """Match each local address to the interface(s) whose connected route holds it (longest prefix)."""
    connected = [r for r in routes if not r.flags & RTF_GATEWAY and r.network.prefixlen > 0]
    by_iface: dict[str, list[Address]] = {}
    orphans: list[str] = []
    for a in addrs:
        ip = ipaddress.IPv4Address(a)
        hits = [r for r in connected if ip in r.network]
        if hits:
            best = max(r.network.prefixlen for r in hits)
            for iface in dict.fromkeys(r.iface for r in hits if r.network.prefixlen == best):
                by_iface.setdefault(iface, []).append(Address("inet", a, best))
        elif ip.is_loopback and loopback:
            by_iface.setdefault(loopback, []).append(Address("inet", a, 8, "host"))
        else:
            orphans.append(a)
    return by_iface, orphans


_SCOPES6 = {0x00: "global", 0x20: "link", 0x10: "host", 0x40: "site"}


def parse_if_inet6(text: str) -> dict[str, list[Address]]:
    """``/proc/net/if_inet6``: ``addr ifindex prefixlen scope flags name`` in hex."""
    out: dict[str, list[Address]] = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != 6:
            continue
        try:
            addr = str(ipaddress.IPv6Address(bytes.fromhex(cols[0])))
            plen, scope = int(cols[2], 16), int(cols[3], 16)
        except ValueError:
            continue
        out.setdefault(cols[5], []).append(Address("inet6", addr, plen, _SCOPES6.get(scope, "global")))
    return out


def parse_ipv6_default(text: str) -> list[str]:
    """Interfaces with an IPv6 default route in ``/proc/net/ipv6_route`` (reject routes skipped)."""
    out = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != 10:
            continue
        try:
            flags = int(cols[8], 16)
        except ValueError:
            continue
        if int(cols[0], 16) == 0 and cols[1] == "00" and flags & RTF_UP and not flags & RTF_REJECT:
            out.append(cols[9])
    return list(dict.fromkeys(out))


_RATE = re.compile(r"^\s*([\d.]+)\s*Gb/sec")


def parse_rate(text: str | None) -> float | None:
    """``400 Gb/sec (4X NDR)`` -> 400.0."""
    m = _RATE.match(text or "")
    return float(m.group(1)) if m else None


def parse_state(text: str | None) -> str:
    """``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``."""
    if not text:
        return "UNKNOWN"
    return text.split(":", 1)[1].strip() if ":" in text else text.strip()


# ---------------------------------------------------------------------------------------------------
# Readers (FsReader -> dataclasses)
# ---------------------------------------------------------------------------------------------------

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
IFF_UP, IFF_LOOPBACK = 0x1, 0x8


def read_pci(fs: FsReader, dev_path: str) -> PciInfo | None:
    """The PCI function at or above ``dev_path`` (a virtio or auxiliary device sits below its PCI parent)."""
    canon = fs.canonical(dev_path)
    while canon and canon != "/" and not _BDF.match(os.path.basename(canon)):
        canon = os.path.dirname(canon)
    if not canon or canon == "/":
        return None
    numa = fs.read_int(f"{canon}/numa_node")
    return PciInfo(
        address=os.path.basename(canon),
        vendor=(fs.read(f"{canon}/vendor") or "").strip() or None,
        device=(fs.read(f"{canon}/device") or "").strip() or None,
        pci_class=(fs.read(f"{canon}/class") or "").strip() or None,
        numa_node=numa if numa is not None and numa >= 0 else None,
        driver=fs.link_name(f"{canon}/driver"),
        path=canon,
    )


def _read_bond(fs: FsReader, base: str) -> BondInfo:
    slaves = (fs.read(f"{base}/bonding/slaves") or "").split()
    down = []
    for s in slaves:
        state = (fs.read(f"/sys/class/net/{s}/operstate") or "").strip()
        mii = (fs.read(f"/sys/class/net/{s}/bonding_slave/mii_status") or "").strip()
        if state not in ("up", "unknown") or mii == "down":
            down.append(s)
    mode = (fs.read(f"{base}/bonding/mode") or "").strip() or None
    return BondInfo(mode=mode, slaves=slaves, down_slaves=down)


def read_interface(fs: FsReader, name: str) -> Interface:
    base = f"/sys/class/net/{name}"
    flags = fs.read_int(f"{base}/flags", 16) or 0
    operstate = (fs.read(f"{base}/operstate") or "unknown").strip()
    speed = fs.read_int(f"{base}/speed")
    carrier = fs.read_int(f"{base}/carrier")
    up = bool(flags & IFF_UP)
    iface = Interface(
        name=name,
        ifindex=fs.read_int(f"{base}/ifindex"),
        iflink=fs.read_int(f"{base}/iflink"),
        arphrd=fs.read_int(f"{base}/type"),
        operstate=operstate,
        up=up,
        running=up and operstate in ("up", "unknown"),
        carrier=None if carrier is None else bool(carrier),
        mtu=fs.read_int(f"{base}/mtu"),
        speed_mbps=speed if speed is not None and speed > 0 else None,
        mac=(fs.read(f"{base}/address") or "").strip() or None,
    )
    canon = fs.canonical(base) or ""
    iface.virtual = "/devices/virtual/" in canon
    if flags & IFF_LOOPBACK:  # the kernel's own word: known before classification, which keeps it
        iface.virtual_kind = iface.kind = "loopback"
    if fs.readlink(f"{base}/device"):
        iface.pci = read_pci(fs, f"{base}/device")
        iface.driver = fs.link_name(f"{base}/device/driver")
    master = fs.readlink(f"{base}/master")
    iface.master = os.path.basename(master) if master else None
    if fs.is_dir(f"{base}/bonding"):
        iface.bond = _read_bond(fs, base)
        iface.virtual_kind = "bond"
    elif fs.is_dir(f"{base}/bridge"):
        iface.virtual_kind = "bridge"
    elif fs.read(f"{base}/tun_flags") is not None:
        iface.virtual_kind = "tun"
    elif iface.virtual and iface.virtual_kind is None:
        iface.virtual_kind = _virtual_kind(fs, base, iface)
    return iface


def _virtual_kind(fs: FsReader, base: str, iface: Interface) -> str:
    """vlan/vxlan/wireguard... from uevent DEVTYPE; a veth has none but usually a peer (iflink != ifindex).
    A veth whose peer has the same ifindex in another namespace is only "virtual-ethernet"."""
    uevent = fs.read(f"{base}/uevent") or ""
    devtype = next((l.split("=", 1)[1] for l in uevent.splitlines() if l.startswith("DEVTYPE=")), None)
    if devtype:
        return devtype
    linked = iface.iflink is not None and iface.ifindex is not None and iface.iflink != iface.ifindex
    if iface.arphrd == 1:
        return "veth" if linked or iface.name.startswith("veth") else "virtual-ethernet"
    return "other"


def read_rdma_device(fs: FsReader, name: str) -> RdmaDevice:
    base = f"/sys/class/infiniband/{name}"
    pci = read_pci(fs, f"{base}/device") if fs.readlink(f"{base}/device") else None
    driver = fs.link_name(f"{base}/device/driver")
    netdevs = fs.listdir(f"{base}/device/net")
    ports = []
    for p in fs.listdir(f"{base}/ports"):
        if not p.isdigit():
            continue
        pb = f"{base}/ports/{p}"
        rate = (fs.read(f"{pb}/rate") or "").strip() or None
        port = RdmaPort(
            device=name,
            port=int(p),
            state=parse_state(fs.read(f"{pb}/state")),
            phys_state=parse_state(fs.read(f"{pb}/phys_state")),
            rate=rate,
            rate_gbps=parse_rate(rate),
            link_layer=(fs.read(f"{pb}/link_layer") or "Unknown").strip(),
        )
        if port.link_layer == "Ethernet":
            port.gids = _read_gids(fs, pb)
            port.netdevs = list(dict.fromkeys(g.ndev for g in port.gids if g.ndev))
        ports.append(port)
    if netdevs:
        for port in ports:
            if not port.netdevs:
                port.netdevs = _netdevs_for_port(fs, netdevs, port.port, len(ports))
    return RdmaDevice(name=name, driver=driver, pci=pci, ports=sorted(ports, key=lambda p: p.port),
                      netdevs=netdevs)


def _netdevs_for_port(fs: FsReader, netdevs: list[str], port: int, nports: int) -> list[str]:
    """Netdevs of one port: ``dev_port`` is 0-based (older drivers use ``dev_id``)."""
    if nports == 1:
        return list(netdevs)
    out = []
    for nd in netdevs:
        dp = fs.read_int(f"/sys/class/net/{nd}/dev_port")
        if dp is None:
            dp = fs.read_int(f"/sys/class/net/{nd}/dev_id", 16)
        if dp == port - 1:
            out.append(nd)
    return out


_ZERO_GID = re.compile(r"^[0:]+$")


def _read_gids(fs: FsReader, port_base: str) -> list[Gid]:
    gids = []
    for i in fs.listdir(f"{port_base}/gids"):
        if not i.isdigit():
            continue
        g = (fs.read(f"{port_base}/gids/{i}") or "").strip()
        if not g or _ZERO_GID.match(g):
            continue
        gids.append(Gid(
            index=int(i),
            gid=g,
            type=(fs.read(f"{port_base}/gid_attrs/types/{i}") or "").strip() or None,
            ndev=(fs.read(f"{port_base}/gid_attrs/ndevs/{i}") or "").strip() or None,
        ))
    return sorted(gids, key=lambda g: g.index)


def read_gpus(fs: FsReader) -> list[Gpu]:
    """NVIDIA display/3D controllers (vendor 0x10de, class 0x03xxxx) on the PCI bus."""
    gpus = []
    for bdf in fs.listdir("/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{bdf}"
        if (fs.read(f"{base}/vendor") or "").strip() != "0x10de":
            continue
        if not (fs.read(f"{base}/class") or "").strip().startswith(("0x0300", "0x0302")):
            continue
        pci = read_pci(fs, base)
        if pci:
            gpus.append(Gpu(pci=pci))
    return gpus


def read_gdr(fs: FsReader, have_gpus: bool) -> GdrInfo:
    """GPUDirect RDMA prerequisites: a peer-memory module, or DMA-BUF (open kernel module, kernel >= 5.12)."""
    peermem = next((m for m in ("nvidia_peermem", "nv_peer_mem") if fs.is_dir(f"/sys/module/{m}")), None)
    kernel = (fs.read("/proc/sys/kernel/osrelease") or "").strip() or None
    if not have_gpus:
        return GdrInfo(peermem, False, None, None, kernel, False)
    nvidia = fs.is_dir("/sys/module/nvidia")
    banner = fs.read("/proc/driver/nvidia/version") or ""
    open_km = ("Open Kernel Module" in banner) if banner else None
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+)\.", banner)
    version = m.group(1) if m else None
    km = re.match(r"(\d+)\.(\d+)", kernel or "")
    new_kernel = bool(km and (int(km.group(1)), int(km.group(2))) >= (5, 12))
    dmabuf = bool(open_km and new_kernel and version and int(version) >= 515)
    return GdrInfo(peermem, nvidia, open_km, version, kernel, dmabuf)


def read_node(fs: FsReader) -> NodeFacts:
    """Every fact the probe needs, from the files under ``fs.root``."""
    names = [n for n in fs.listdir("/sys/class/net") if fs.readlink(f"/sys/class/net/{n}") or fs.is_dir(f"/sys/class/net/{n}")]
    ifaces = [read_interface(fs, n) for n in names]
    ifaces.sort(key=lambda i: (i.ifindex if i.ifindex is not None else 1 << 30, i.name))
    loopback = loopback_name(ifaces)

    routes = parse_route(fs.read("/proc/net/route") or "")
    v4, orphans = attribute_ipv4(parse_fib_trie_local(fs.read("/proc/net/fib_trie") or ""), routes, loopback)
    v6 = parse_if_inet6(fs.read("/proc/net/if_inet6") or "")
    defaults = default_route_ifaces(routes)
    defaults6 = parse_ipv6_default(fs.read("/proc/net/ipv6_route") or "")
    for i in ifaces:
        i.addresses = v4.get(i.name, []) + v6.get(i.name, [])
        i.default_route = i.name in defaults or i.name in defaults6

    rdma = [read_rdma_device(fs, n) for n in fs.listdir("/sys/class/infiniband")]
    gpus = read_gpus(fs)
    host = (fs.read("/proc/sys/kernel/hostname") or "").strip() or "unknown"
    return NodeFacts(
        host=host,
        interfaces=ifaces,
        rdma_devices=rdma,
        gpus=gpus,
        gdr=read_gdr(fs, bool(gpus)),
        default_route_ifaces=defaults,
        default_route6_ifaces=defaults6,
        unattributed_addresses=orphans,
        etc_hosts=fs.read("/etc/hosts"),
    )


# ---------------------------------------------------------------------------------------------------
# Classification (sysfs facts first; the name only corroborates)
# ---------------------------------------------------------------------------------------------------

MGMT_MAX_MBPS = 25_000
_IB_NAME = re.compile(r"^ib(\d|p\d|s\d)")


def link_rdma(facts: NodeFacts) -> None:
    """Attach each RDMA port to the netdevs that back it (``Interface.rdma``)."""
    by_name = {i.name: i for i in facts.interfaces}
    for dev in facts.rdma_devices:
        for port in dev.ports:
            for nd in port.netdevs:
                if nd in by_name:
                    by_name[nd].rdma.append({
                        "device": dev.name, "port": port.port, "state": port.state,
                        "rate": port.rate, "rate_gbps": port.rate_gbps, "link_layer": port.link_layer,
                    })


def _kind(i: Interface, efa_buses: set[str]) -> str:
    if i.kind == "loopback" or i.arphrd == 772:
        return "loopback"
    if i.arphrd == 32:
        return "infiniband"
    if i.bond is not None:
        return "bond"
    if any(r["link_layer"] == "Ethernet" for r in i.rdma):
        return "roce"
    if any(r["link_layer"] not in ("InfiniBand", "Ethernet") for r in i.rdma):
        return "efa"
    if i.pci and i.pci.address.rsplit(":", 1)[0] in efa_buses and i.driver == "ena":
        return "efa"
    if i.virtual:
        return "virtual"
    return "ethernet"


def link_mbps(i: Interface) -> int:
    """What the interface carries: its fastest RDMA port's rate, else its Ethernet speed (0 unknown)."""
    rates = [r["rate_gbps"] for r in i.rdma if r.get("rate_gbps")]
    return int(max(rates) * 1000) if rates else (i.speed_mbps or 0)


def classify(facts: NodeFacts) -> None:
    """Set ``kind`` and ``role`` on every interface; note names that lie about the kind."""
    link_rdma(facts)
    by_name = {i.name: i for i in facts.interfaces}
    efa_buses = {d.pci.address.rsplit(":", 1)[0] for d in facts.rdma_devices if d.is_efa and d.pci}
    for i in facts.interfaces:
        i.kind = _kind(i, efa_buses)
        if i.kind == "bond" and i.bond and not i.rdma:
            for s in i.bond.slaves:
                if s in by_name:
                    i.rdma.extend(by_name[s].rdma)
        i.role = {"loopback": "loopback", "virtual": "virtual"}.get(i.kind, "data")
        if _IB_NAME.match(i.name) and i.kind != "infiniband":
            what = f"a {i.virtual_kind}" if i.virtual_kind and i.kind == "virtual" else f"{i.kind}"
            i.notes.append(f"named like InfiniBand but is {what} (ARPHRD {i.arphrd}, not 32: not IPoIB)")
    for i in facts.interfaces:  # members of a RoCE bond (mlx5 LAG) carry RoCE too
        if i.kind == "bond" and i.bond and any(r["link_layer"] == "Ethernet" for r in i.rdma):
            for s in i.bond.slaves:
                if s in by_name and by_name[s].kind == "ethernet":
                    by_name[s].kind = "roce"
    _container_uplinks(facts)
    fabric = [i for i in facts.interfaces if i.role == "data" and i.rdma]
    for i in facts.interfaces:
        if i.kind not in ("ethernet", "bond") or i.rdma:
            continue
        others = [o for o in facts.interfaces if o is not i and o.role == "data" and o.name not in _slaves(i)]
        faster = [o for o in others if (o.rdma and o in fabric) or link_mbps(o) > link_mbps(i)]
        slow = i.speed_mbps is None or i.speed_mbps <= MGMT_MAX_MBPS
        if faster and (i.default_route or slow):
            i.role = "management"
            if i.kind == "ethernet":
                i.kind = "management"
    for i in facts.interfaces:  # bond members share the bond's role
        if i.master and i.master in by_name and by_name[i.master].kind == "bond" and i.kind == "ethernet":
            if by_name[i.master].role == "management":
                i.kind, i.role = "management", "management"


def _container_uplinks(facts: NodeFacts) -> None:
    """Inside a container or network namespace the node's own uplink is a veth (a pod's ``eth0``).
    With no physical data interface, the veths that carry the default route (or, with no default route,
    every veth with a global address outside a bridge) are that uplink: role ``data``, kind still
    ``virtual``. Bridges (docker0, cni0) and bridge ports stay virtual."""
    if any(i.role == "data" for i in facts.interfaces):
        return
    veths = [i for i in facts.interfaces if i.virtual_kind in ("veth", "virtual-ethernet") and not i.master
             and i.running and any(a.scope == "global" for a in i.addresses)]
    routed = [i for i in veths if i.default_route]
    for i in routed or veths:
        i.role = "data"


def _slaves(i: Interface) -> list[str]:
    return i.bond.slaves if i.bond else []
