"""Node facts from files under one root: interfaces, RDMA ports, NICs, GPUs, modules (reads only).

Everything is read through ``fsreader.FsReader``, which resolves symlinks itself (a root may be a
snapshot with relative links) and remembers every file, link and directory it touched, so
``snapshot.py`` can capture exactly what the probe read. Sysfs is never walked recursively: it has
cycles; only the specific links needed are resolved. Addresses and routes come from ``/proc/net``
(``procfs.py`` parses them); ``classify.py`` then says what each interface is.
"""

from __future__ import annotations

import os
import re

from nccl_doctor.cudavisible import visible_devices
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.gpus import needs_ids, read_gpu_ids, visible_bdfs
from nccl_doctor.node.model import (
    Address,
    BondInfo,
    GdrInfo,
    Gid,
    Gpu,
    Interface,
    InterfaceKind,
    LinkLayer,
    NodeFacts,
    PciInfo,
    PortState,
    RdmaDevice,
    RdmaPort,
    VirtualKind,
    loopback_name,
)
from nccl_doctor.node.procfs import (
    attribute_ipv4,
    default_route_ifaces,
    parse_fib_trie_local,
    parse_if_inet6,
    parse_ipv6_default,
    parse_route,
)

# ---------------------------------------------------------------------------------------------------
# sysfs text (pure)
# ---------------------------------------------------------------------------------------------------

_RATE = re.compile(r"^\s*([\d.]+)\s*Gb/sec")


def parse_rate(text: str | None) -> float | None:
    """``400 Gb/sec (4X NDR)`` -> 400.0."""
    m = _RATE.match(text or "")
    return float(m.group(1)) if m else None


def parse_state(text: str | None) -> str:
    """``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``."""
    if not text:
        return PortState.UNKNOWN
    return text.split(":", 1)[1].strip() if ":" in text else text.strip()


# ---------------------------------------------------------------------------------------------------
# Readers (FsReader -> dataclasses)
# ---------------------------------------------------------------------------------------------------

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
IFF_UP, IFF_LOOPBACK = 0x1, 0x8
ARPHRD_ETHER = 1
RUNNING_OPERSTATES = ("up", "unknown")  # with IFF_UP: what psutil calls "isup"
NVIDIA_PCI_VENDOR = "0x10de"
GPU_PCI_CLASSES = ("0x0300", "0x0302")  # VGA and 3D controllers
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
DMABUF_MIN_KERNEL = (5, 12)
DMABUF_MIN_DRIVER = 515  # the open kernel module exports DMA-BUF from this major version
_DRIVER_MAJOR = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+)\.")
_KERNEL_VERSION = re.compile(r"(\d+)\.(\d+)")
_NO_IFINDEX = 1 << 30  # sorts interfaces without an ifindex last


def _text(fs: FsReader, path: str) -> str | None:
    """A one-value sysfs file, stripped; None when missing or empty."""
    return (fs.read(path) or "").strip() or None


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
        vendor=_text(fs, f"{canon}/vendor"),
        device=_text(fs, f"{canon}/device"),
        pci_class=_text(fs, f"{canon}/class"),
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
        if state not in RUNNING_OPERSTATES or mii == "down":
            down.append(s)
    return BondInfo(mode=_text(fs, f"{base}/bonding/mode"), slaves=slaves, down_slaves=down)


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
        running=up and operstate in RUNNING_OPERSTATES,
        carrier=None if carrier is None else bool(carrier),
        mtu=fs.read_int(f"{base}/mtu"),
        speed_mbps=speed if speed is not None and speed > 0 else None,
        mac=_text(fs, f"{base}/address"),
    )
    canon = fs.canonical(base) or ""
    iface.virtual = "/devices/virtual/" in canon
    if flags & IFF_LOOPBACK:  # the kernel's own word: known before classification, which keeps it
        iface.kind, iface.virtual_kind = InterfaceKind.LOOPBACK, VirtualKind.LOOPBACK
    if fs.readlink(f"{base}/device"):
        iface.pci = read_pci(fs, f"{base}/device")
        iface.driver = fs.link_name(f"{base}/device/driver")
    master = fs.readlink(f"{base}/master")
    iface.master = os.path.basename(master) if master else None
    if fs.is_dir(f"{base}/bonding"):
        iface.bond = _read_bond(fs, base)
        iface.virtual_kind = VirtualKind.BOND
    elif fs.is_dir(f"{base}/bridge"):
        iface.virtual_kind = VirtualKind.BRIDGE
    elif fs.read(f"{base}/tun_flags") is not None:
        iface.virtual_kind = VirtualKind.TUN
    elif iface.virtual and iface.virtual_kind is None:
        iface.virtual_kind = _virtual_kind(fs, base, iface)
    return iface


def _virtual_kind(fs: FsReader, base: str, iface: Interface) -> str:
    """vlan/vxlan/wireguard... from uevent DEVTYPE; a veth has none but usually a peer (iflink != ifindex).
    A veth whose peer has the same ifindex in another namespace is only "virtual-ethernet"."""
    uevent = fs.read(f"{base}/uevent") or ""
    devtype = next((line.split("=", 1)[1] for line in uevent.splitlines() if line.startswith("DEVTYPE=")), None)
    if devtype:
        return devtype
    linked = iface.iflink is not None and iface.ifindex is not None and iface.iflink != iface.ifindex
    if iface.arphrd == ARPHRD_ETHER:
        return VirtualKind.VETH if linked or iface.name.startswith("veth") else VirtualKind.VIRTUAL_ETHERNET
    return VirtualKind.OTHER


def _read_port(fs: FsReader, device: str, base: str, port: int) -> RdmaPort:
    rate = _text(fs, f"{base}/rate")
    out = RdmaPort(
        device=device,
        port=port,
        state=PortState.of(parse_state(fs.read(f"{base}/state"))),
        phys_state=parse_state(fs.read(f"{base}/phys_state")),
        rate=rate,
        rate_gbps=parse_rate(rate),
        link_layer=LinkLayer.of((fs.read(f"{base}/link_layer") or LinkLayer.UNKNOWN).strip()),
    )
    if out.link_layer == LinkLayer.ETHERNET:
        out.gids = _read_gids(fs, base)
        out.netdevs = list(dict.fromkeys(g.ndev for g in out.gids if g.ndev))
    return out


def read_rdma_device(fs: FsReader, name: str) -> RdmaDevice:
    base = f"/sys/class/infiniband/{name}"
    pci = read_pci(fs, f"{base}/device") if fs.readlink(f"{base}/device") else None
    driver = fs.link_name(f"{base}/device/driver")
    netdevs = fs.listdir(f"{base}/device/net")
    ports = [_read_port(fs, name, f"{base}/ports/{p}", int(p)) for p in fs.listdir(f"{base}/ports") if p.isdigit()]
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
            type=_text(fs, f"{port_base}/gid_attrs/types/{i}"),
            ndev=_text(fs, f"{port_base}/gid_attrs/ndevs/{i}"),
        ))
    return sorted(gids, key=lambda g: g.index)


def read_gpus(fs: FsReader, cuda_visible: str | None = None) -> list[Gpu]:
    """NVIDIA display/3D controllers (vendor 0x10de, class 0x03xxxx) on the PCI bus that CUDA will show under
    ``cuda_visible`` (the ``CUDA_VISIBLE_DEVICES`` value; None: unset, every GPU), in CUDA's order (``gpus``)."""
    found = _bus_gpus(fs)
    visible = visible_devices(cuda_visible)
    ids = read_gpu_ids(fs, list(found)) if needs_ids(visible) else {}
    return [found[bdf] for bdf in visible_bdfs(list(found), visible, ids)]


def _bus_gpus(fs: FsReader) -> dict[str, Gpu]:
    gpus = {}
    for bdf in fs.listdir("/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{bdf}"
        if (fs.read(f"{base}/vendor") or "").strip() != NVIDIA_PCI_VENDOR:
            continue
        if not (fs.read(f"{base}/class") or "").strip().startswith(GPU_PCI_CLASSES):
            continue
        pci = read_pci(fs, base)
        if pci:
            gpus[bdf] = Gpu(pci=pci)
    return gpus


def read_gdr(fs: FsReader, have_gpus: bool) -> GdrInfo:
    """GPUDirect RDMA prerequisites: a peer-memory module, or DMA-BUF (open kernel module, kernel >= 5.12)."""
    peermem = next((m for m in PEERMEM_MODULES if fs.is_dir(f"/sys/module/{m}")), None)
    kernel = _text(fs, "/proc/sys/kernel/osrelease")
    if not have_gpus:
        return GdrInfo(peermem, False, None, None, kernel, False)
    nvidia = fs.is_dir("/sys/module/nvidia")
    banner = fs.read("/proc/driver/nvidia/version") or ""
    open_km = ("Open Kernel Module" in banner) if banner else None
    m = _DRIVER_MAJOR.search(banner)
    version = m.group(1) if m else None
    km = _KERNEL_VERSION.match(kernel or "")
    new_kernel = bool(km and (int(km.group(1)), int(km.group(2))) >= DMABUF_MIN_KERNEL)
    dmabuf = bool(open_km and new_kernel and version and int(version) >= DMABUF_MIN_DRIVER)
    return GdrInfo(peermem, nvidia, open_km, version, kernel, dmabuf)


# The files interface addresses come from: on a tree or snapshot that lacks one, addresses are unknown.
ADDRESS_FILES = ("/proc/net/route", "/proc/net/fib_trie", "/proc/net/if_inet6")


def unread_address_files(fs: FsReader) -> list[str]:
    """The address files that were not there to read under a tree or snapshot (after the probe read them).
    The live root's /proc always has them, unless the kernel has no IPv6: absence is then the fact, and a
    snapshot says so (``fs.absent``)."""
    if fs.live:
        return []
    return [p for p in ADDRESS_FILES if (fs.canonical(p) or p) not in fs.files and p not in fs.absent]


def _read_addresses(fs: FsReader, ifaces: list[Interface]) -> tuple[list[str], list[str], list[str]]:
    """Addresses and default routes onto ``ifaces`` from /proc/net; returns (IPv4 defaults, IPv6 defaults,
    local IPv4 addresses no interface's route holds)."""
    routes = parse_route(fs.read("/proc/net/route") or "")
    local = parse_fib_trie_local(fs.read("/proc/net/fib_trie") or "")
    v4, orphans = attribute_ipv4(local, routes, loopback_name(ifaces))
    v6 = parse_if_inet6(fs.read("/proc/net/if_inet6") or "")
    defaults = default_route_ifaces(routes)
    defaults6 = parse_ipv6_default(fs.read("/proc/net/ipv6_route") or "")
    for i in ifaces:
        addresses: list[Address] = v4.get(i.name, []) + v6.get(i.name, [])
        i.addresses = addresses
        i.default_route = i.name in defaults or i.name in defaults6
    return defaults, defaults6, orphans


def read_node(fs: FsReader, cuda_visible: str | None = None) -> NodeFacts:
    """Every fact the probe needs, from the files under ``fs.root``; the GPUs are those CUDA will show under
    ``cuda_visible`` (``CUDA_VISIBLE_DEVICES``; None: every GPU on the bus)."""
    names = [n for n in fs.listdir("/sys/class/net")
             if fs.readlink(f"/sys/class/net/{n}") or fs.is_dir(f"/sys/class/net/{n}")]
    ifaces = [read_interface(fs, n) for n in names]
    ifaces.sort(key=lambda i: (i.ifindex if i.ifindex is not None else _NO_IFINDEX, i.name))
    defaults, defaults6, orphans = _read_addresses(fs, ifaces)
    rdma = [read_rdma_device(fs, n) for n in fs.listdir("/sys/class/infiniband")]
    gpus = read_gpus(fs, cuda_visible)
    return NodeFacts(
        host=_text(fs, "/proc/sys/kernel/hostname") or "unknown",
        interfaces=ifaces,
        rdma_devices=rdma,
        gpus=gpus,
        gdr=read_gdr(fs, bool(gpus)),
        default_route_ifaces=defaults,
        default_route6_ifaces=defaults6,
        unattributed_addresses=orphans,
        etc_hosts=fs.read("/etc/hosts"),
        unread_address_files=unread_address_files(fs),
    )
