"""What the probe knows about a node, as torch-free dataclasses: sysfs/procfs facts, the NCCL/Gloo
settings in force, and what NCCL and Gloo will pick from them (``NodeProbe`` holds all of it).

Kinds, roles and states that form closed sets are ``StrEnum``s: members equal their strings, so the
JSON (built with ``dataclasses.asdict``) shows the same values as plain strings would.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from nccl_doctor.enums import StrEnum

# ---------------------------------------------------------------------------------------------------
# Closed sets
# ---------------------------------------------------------------------------------------------------


class InterfaceKind(StrEnum):
    """What an interface is, from sysfs facts (the name only corroborates)."""

    LOOPBACK = "loopback"
    INFINIBAND = "infiniband"
    ROCE = "roce"
    EFA = "efa"
    BOND = "bond"
    ETHERNET = "ethernet"
    MANAGEMENT = "management"
    VIRTUAL = "virtual"


class Role(StrEnum):
    """What an interface is for on this node."""

    DATA = "data"
    MANAGEMENT = "management"
    VIRTUAL = "virtual"
    LOOPBACK = "loopback"


class VirtualKind(StrEnum):
    """The virtual kinds the reader names itself; others come verbatim from uevent's DEVTYPE (vlan, vxlan...),
    so ``Interface.virtual_kind`` stays a plain string."""

    LOOPBACK = "loopback"
    BOND = "bond"
    BRIDGE = "bridge"
    TUN = "tun"
    VLAN = "vlan"
    VETH = "veth"
    VIRTUAL_ETHERNET = "virtual-ethernet"  # a veth whose peer sysfs cannot tell apart
    OTHER = "other"


class PortState(StrEnum):
    """An RDMA port's logical state, as the kernel names it (``ib_port_state``; out of range: UNKNOWN)."""

    NOP = "NOP"
    DOWN = "DOWN"
    INIT = "INIT"
    ARMED = "ARMED"
    ACTIVE = "ACTIVE"
    ACTIVE_DEFER = "ACTIVE_DEFER"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def of(cls, name: str) -> PortState:
        """The member named ``name``; UNKNOWN for anything else (the kernel's own word for it)."""
        return cls(name) if name in cls._value2member_map_ else cls.UNKNOWN


class LinkLayer(StrEnum):
    """An RDMA port's ``link_layer`` file: IB, RoCE (Ethernet), or Unknown (EFA)."""

    INFINIBAND = "InfiniBand"
    ETHERNET = "Ethernet"
    UNKNOWN = "Unknown"

    @classmethod
    def of(cls, text: str) -> LinkLayer:
        return cls(text) if text in cls._value2member_map_ else cls.UNKNOWN


# Ports NCCL's IB transport opens: IB and RoCE (EFA's "Unknown" needs the aws-ofi-nccl plugin).
VERBS_LINK_LAYERS = (LinkLayer.INFINIBAND, LinkLayer.ETHERNET)


class GidType(StrEnum):
    """``gid_attrs/types/<i>`` as the kernel writes it."""

    ROCE_V2 = "RoCE v2"
    ROCE_V1 = "IB/RoCE v1"


# A RoCE GID that holds an IPv4 address (``::ffff:a.b.c.d``).
IPV4_MAPPED_GID = "0000:0000:0000:0000:0000:ffff:"


class Family(StrEnum):
    INET = "inet"
    INET6 = "inet6"


class Scope(StrEnum):
    GLOBAL = "global"
    LINK = "link"
    HOST = "host"
    SITE = "site"


class PathType(StrEnum):
    """NCCL-like PCIe path type between two functions, nearest first."""

    PIX = "PIX"  # one PCIe switch
    PXB = "PXB"  # several switches
    PHB = "PHB"  # through the host bridge
    SYS = "SYS"  # across the CPU interconnect (another NUMA node)

    @property
    def rank(self) -> int:
        return list(PathType).index(self)


# ---------------------------------------------------------------------------------------------------
# sysfs / procfs facts
# ---------------------------------------------------------------------------------------------------


@dataclass
class Address:
    family: Family
    address: str
    prefixlen: int | None
    scope: Scope = Scope.GLOBAL

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
    type: str | None  # a GidType as the kernel writes it
    ndev: str | None


@dataclass
class RdmaPort:
    device: str
    port: int
    state: PortState
    phys_state: str  # "LinkUp", "Disabled", "Polling"... (shown only)
    rate: str | None  # as the kernel writes it: "400 Gb/sec (4X NDR)"
    rate_gbps: float | None
    link_layer: LinkLayer
    netdevs: list[str] = field(default_factory=list)
    gids: list[Gid] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.state in (PortState.ACTIVE, PortState.ACTIVE_DEFER)


EFA_PCI_VENDOR = "0x1d0f"  # Amazon


@dataclass
class RdmaDevice:
    name: str
    driver: str | None
    pci: PciInfo | None
    ports: list[RdmaPort]
    netdevs: list[str]  # netdevs on the same PCI function

    @property
    def is_efa(self) -> bool:
        return self.driver == "efa" or (self.pci is not None and self.pci.vendor == EFA_PCI_VENDOR)


@dataclass(frozen=True)
class PortLink:
    """An RDMA port as seen from a netdev that carries it (``Interface.rdma``)."""

    device: str
    port: int
    state: PortState
    rate: str | None
    rate_gbps: float | None
    link_layer: LinkLayer


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
    kind: InterfaceKind = InterfaceKind.ETHERNET
    role: Role = Role.DATA
    operstate: str = "unknown"
    up: bool = False  # IFF_UP
    running: bool = False  # IFF_RUNNING: up and operstate up/unknown (psutil's "isup")
    carrier: bool | None = None
    mtu: int | None = None
    speed_mbps: int | None = None
    mac: str | None = None
    addresses: list[Address] = field(default_factory=list)
    virtual: bool = False  # lives under /sys/devices/virtual
    virtual_kind: str | None = None  # a VirtualKind, or uevent's DEVTYPE
    driver: str | None = None
    pci: PciInfo | None = None
    master: str | None = None
    bond: BondInfo | None = None
    rdma: list[PortLink] = field(default_factory=list)
    default_route: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def numa_node(self) -> int | None:
        return self.pci.numa_node if self.pci else None

    def ipv4(self) -> list[Address]:
        return [a for a in self.addresses if a.family == Family.INET]


@dataclass
class Gpu:
    pci: PciInfo
    nearest_nic: str | None = None  # RDMA device (or netdev) with the closest PCI path
    nearest_nic_numa: int | None = None
    pcie_distance: PathType | None = None  # an approximation from sysfs paths


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
    skipped_files: dict[str, str] = field(default_factory=dict)  # path -> why not read (``FsReader.skipped``)
    unread_address_files: list[str] = field(default_factory=list)  # /proc/net files a snapshot lacks

    @property
    def addresses_known(self) -> bool:
        """False when a file the addresses come from was not there to read (a snapshot or a container's
        tree can lack them): an interface without an address then proves nothing."""
        return not self.unread_address_files

    def iface(self, name: str) -> Interface | None:
        return next((i for i in self.interfaces if i.name == name), None)

    @property
    def loopback(self) -> str | None:
        """The loopback interface's name (``lo``); None if the node has none."""
        return loopback_name(self.interfaces)


def loopback_name(ifaces: Iterable[Interface]) -> str | None:
    return next((i.name for i in ifaces if i.kind == InterfaceKind.LOOPBACK), None)


# ---------------------------------------------------------------------------------------------------
# Settings (environment, then nccl.conf files) and what NCCL and Gloo pick from them
# ---------------------------------------------------------------------------------------------------

ENVIRONMENT = "environment"  # Setting.source for the process environment (else a conf file path)


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    source: str  # ENVIRONMENT or the conf file path
    line: int | None = None  # line number in that conf file


@dataclass
class Settings:
    values: dict[str, Setting] = field(default_factory=dict)
    conf_files: list[str] = field(default_factory=list)  # conf files that exist and were applied
    missing_conf_file: str | None = None  # NCCL_CONF_FILE names a file that cannot be read (NCCL ignores it)
    shadowed: dict[str, list[Setting]] = field(default_factory=dict)  # conf lines that lost to an earlier source

    def get(self, name: str) -> str | None:
        """NCCL treats an empty value as unset."""
        s = self.values.get(name)
        return s.value if s is not None and s.value != "" else None

    def source(self, name: str) -> str | None:
        s = self.values.get(name)
        return s.source if s else None


@dataclass
class SocketChoice:
    ifaces: list[str]  # in NCCL's order, max 16; the first is the bootstrap interface
    rule: str  # how they were chosen
    user_value: str | None  # NCCL_SOCKET_IFNAME as applied (None: unset or ignored)
    ignored_value: str | None = None  # set but ignored (one character)
    matched_not_running: list[str] = field(default_factory=list)  # matched, but NCCL 2.28+ skips them

    @property
    def bootstrap(self) -> str | None:
        return self.ifaces[0] if self.ifaces else None


@dataclass
class IbChoice:
    ports: list[str]  # "mlx5_0:1" in NCCL's device order, carrying inter-node data (internal IB or an RDMA plugin)
    usable: list[str]  # ACTIVE IB/Ethernet ports before NCCL_IB_HCA
    disabled_by: str | None  # "NCCL_IB_DISABLE=1" / "NCCL_NET=Socket" / both, joined with " and "
    hca_value: str | None
    disablers: tuple[str, ...] = ()  # the variables that turn IB off (NCCL_IB_DISABLE, NCCL_NET)
    selected: list[str] = field(default_factory=list)  # usable ports kept by NCCL_IB_HCA (whatever NCCL_NET says)
    plugin: str | None = None  # NCCL_NET naming a plugin network (IBext, UCX, Libfabric, unknown): it carries data


@dataclass
class GlooChoice:
    ifaces: list[str]  # interfaces Gloo binds (GLOO_SOCKET_IFNAME) or the one holding the hostname's address
    address: str | None
    rule: str
    missing: list[str] = field(default_factory=list)  # GLOO_SOCKET_IFNAME names with no address here
    down: list[str] = field(default_factory=list)


@dataclass
class NodeProbe:
    """Everything probe knows about one node; JSON-ready through ``view.node_dict``."""

    root: str
    facts: NodeFacts
    settings: Settings
    nccl_socket: SocketChoice
    nccl_ib: IbChoice
    gloo: GlooChoice

    @property
    def host(self) -> str:
        return self.facts.host
