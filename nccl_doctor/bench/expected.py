"""What a node's links should deliver, from the probe: the yardstick for bench's "% of expected".

``expected_bandwidth`` is a pure function of a ``NodeProbe`` (``probe_node``, ~30 ms) and the backend; a
rank's ``local_expected`` probes this node for it. No torch.
Inter-node: NCCL on its IB/RoCE ports (sum of their active rates), else the socket interfaces the
backend binds (sum of their sysfs speeds). Intra-node (GPUs and NCCL only): NCCL's effective NVLink or PCIe
figure for the GPU model, an estimate from a table (nccl-facts.md section E); Gloo (``--cpu``) moves host
memory over TCP and never touches NVLink, so it gets none. All in GB/s per direction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import BITS_PER_BYTE, link_gbps
from nccl_doctor.cluster.net import gloo_iface_to
from nccl_doctor.cluster.slurm import DEFAULT_PORT
from nccl_doctor.errors import InputError
from nccl_doctor.node import NodeProbe, probe_node

# Virtual kinds whose sysfs speed is a real line rate: a bond sums its slaves', a VLAN shows its parent's. Every
# other virtual interface (veth, bridge, macvlan, vxlan, tun...) has a made-up speed (veth: 10000), no line rate.
RATED_VIRTUAL_KINDS = ("bond", "vlan", "loopback")

NVLS_ALLREDUCE_GAIN = 1.3  # 8 x H100 all-reduce with NVLS ~480 GB/s busbw, other ops ~370 (sjeaugey, nccl-tests#212)
# GPUs that talk over PCIe and sit on different CPU sockets cross the CPUs' link: NCCL's bandwidth for it
# (graph/topo.h) is 6 (Broadwell QPI), 10 (Skylake UPI, SKL_QPI_BW), 16-32 (AMD Zen), 22-40 (Sapphire/Emerald
# Rapids); without the CPU model the probe takes Skylake's, the lowest current x86 figure
CROSS_SOCKET_GBPS = 10.0


@dataclass(frozen=True)
class GpuIntra:
    """A GPU model's intra-node busbw estimate: NVLink links x NCCL's per-link constant (graph/topo.h), or
    NCCL's effective PCIe x16 figure. Estimates, not measurements."""

    model: str
    gbps: float
    how: str
    nvls: bool = False  # NVSwitch with multicast (Hopper, Blackwell): NCCL's NVLS all-reduce reaches ~1.3x
    pcie: bool = False  # peers over PCIe: GPUs on two CPU sockets are judged on the CPUs' link instead


_NVL4 = "NVLink 4: 18 links x 20.6 GB/s"
_NVL5 = "NVLink 5: 18 links x 40.1 GB/s"
# beyond its NVLink bridge (H100 NVL: pairs, 600 GB/s bidirectional; H200 NVL: 2- or 4-way, 900 GB/s) an NVL
# card reaches its peers over PCIe, so a group larger than the bridge runs at PCIe speed: judged on that
_NVL_BRIDGE = "PCIe Gen5 x16 (NVLink bridges join only {}; a larger group runs at PCIe speed)"
# PCI device id -> the estimate. Device ids: NVIDIA's "Compatible GPUs" table of the open GPU kernel modules
# (README.md, driver 610.43.03, as carried by github.com/tinygrad/open-gpu-kernel-modules): H100 NVL 2321,
# H20 2329, H200 2335, H200 NVL 233B, GH200 2342, B200 2901, GB200 2941, GB300 31C2/31C3. Bandwidths:
# nccl-facts.md section E (NCCL's per-link constants); GH200 in 4-GPU nodes: "NVLink 4 GPU-to-GPU links,
# 300 GB/s between pairs of GPUs (150 GB/s per direction)" (JSC, JUPITER configuration page), i.e. 6 links a
# pair; H20: NVLink 4, 900 GB/s bidirectional like H100 SXM (NVIDIA's H20 product brief); GB200/GB300:
# NVLink 5, 1.8 TB/s bidirectional per GPU (NVIDIA's GB200/GB300 NVL72 pages), like B200.
GPU_INTRA = {
    "0x1db1": GpuIntra("V100 SXM2", 120.0, "NVLink 2: 6 links x 20 GB/s"),
    "0x1db5": GpuIntra("V100 SXM2", 120.0, "NVLink 2: 6 links x 20 GB/s"),
    "0x1db4": GpuIntra("V100 PCIe", 12.0, "PCIe Gen3 x16", pcie=True),
    "0x20b0": GpuIntra("A100 SXM4", 240.0, "NVLink 3: 12 links x 20 GB/s"),
    "0x20b2": GpuIntra("A100 SXM4", 240.0, "NVLink 3: 12 links x 20 GB/s"),
    "0x20f3": GpuIntra("A800 SXM4", 160.0, "NVLink 3 (A800: 8 links x 20 GB/s)"),
    "0x20f1": GpuIntra("A100 PCIe", 24.0, "PCIe Gen4 x16", pcie=True),
    "0x20b5": GpuIntra("A100 PCIe", 24.0, "PCIe Gen4 x16", pcie=True),
    "0x2330": GpuIntra("H100 SXM5", 370.0, _NVL4, nvls=True),
    "0x2324": GpuIntra("H800 SXM5", 165.0, "NVLink 4, export-limited (H800: 8 links x 20.6 GB/s)", nvls=True),
    "0x2329": GpuIntra("H20", 370.0, _NVL4, nvls=True),
    "0x2335": GpuIntra("H200 SXM", 370.0, _NVL4, nvls=True),
    "0x2331": GpuIntra("H100 PCIe", 48.0, "PCIe Gen5 x16", pcie=True),
    "0x2321": GpuIntra("H100 NVL", 48.0, _NVL_BRIDGE.format("pairs"), pcie=True),
    "0x233b": GpuIntra("H200 NVL", 48.0, _NVL_BRIDGE.format("2 or 4 GPUs"), pcie=True),
    "0x2342": GpuIntra("GH200", 123.6, "NVLink 4 between superchips: 6 links per GPU pair x 20.6 GB/s"),
    "0x2901": GpuIntra("B200", 722.0, _NVL5, nvls=True),
    "0x2941": GpuIntra("GB200", 722.0, _NVL5, nvls=True),
    "0x31c2": GpuIntra("GB300", 722.0, _NVL5, nvls=True),
    "0x31c3": GpuIntra("GB300", 722.0, _NVL5, nvls=True),
}


@dataclass(frozen=True, kw_only=True)
class Expected:
    """One node's yardsticks; None where nothing can be said (no link speed, no GPUs, unknown GPU)."""

    inter_gbps: float | None  # all the node's inter-node links the backend uses, together
    per_rank_gbps: float | None  # what one rank pair can reach (one NIC for NCCL/IB: GPU -> nearest NIC)
    inter_basis: str  # how: "8 x 400 Gb/s RDMA ports (NCCL IB: mlx5_0:1, ...)", "eth1 10000 Mb/s (Gloo)"
    ifaces: tuple[str, ...] = ()  # netdevs or RDMA ports behind inter_gbps
    iface: str | None = None  # the first netdev behind them, for `ethtool`/`tc` fixes
    intra_gbps: float | None = None
    intra_basis: str | None = None  # always an estimate: says so
    intra_allreduce_gbps: float | None = None  # all-reduce's, where NVLS lifts it above intra_gbps (else None)


def local_expected(env: Mapping[str, str], backend: Backend,
                   root: str = "/") -> tuple[Expected | None, bool, str | None]:
    """This node's yardstick from the probe (~30 ms): the links the backend will use, and their rates,
    whether a link is virtual (a veth: its speed is nominal, so no line rate to judge figures against, only
    the floor of a slow link), and
    why there is no yardstick when the node cannot be read (the figures are still measured).
    Gloo without GLOO_SOCKET_IFNAME binds what routes to MASTER_ADDR (the launcher sets it so).
    A bug here is raised, not turned into a silent "no yardstick"."""
    route_iface = None
    if backend == Backend.GLOO and not env.get("GLOO_SOCKET_IFNAME") and env.get("MASTER_ADDR"):
        route_iface = gloo_iface_to(env["MASTER_ADDR"], int(env.get("MASTER_PORT", str(DEFAULT_PORT))))
    try:
        node = probe_node(root, env)
    except (InputError, OSError) as exc:
        return None, False, f"no yardstick: the probe could not read this node ({exc})"
    exp = expected_bandwidth(node, backend, route_iface=route_iface)
    nominal = any(i is not None and nominal_speed(i.virtual_kind) for i in map(node.facts.iface, exp.ifaces))
    return exp, nominal, None


def nominal_speed(virtual_kind: str | None) -> bool:
    """An interface of this virtual kind has a nominal sysfs speed, not a line rate (a veth's 10000 Mb/s)."""
    return bool(virtual_kind) and virtual_kind not in RATED_VIRTUAL_KINDS


def expected_bandwidth(node: NodeProbe, backend: Backend, *, route_iface: str | None = None) -> Expected:
    """``node``: a ``probe.NodeProbe``. ``route_iface``: the interface routing to the rendezvous host,
    Gloo's fallback when GLOO_SOCKET_IFNAME is unset (as the launcher would set it)."""
    inter = _nccl_rdma(node) if backend == Backend.NCCL else None
    if inter is None:
        inter = _socket(node, backend, route_iface)
    intra, intra_basis, allreduce = _intra(node) if backend == Backend.NCCL else (*_no_intra(node), None)
    return Expected(inter_gbps=inter[0], per_rank_gbps=inter[1], inter_basis=inter[2], ifaces=inter[3],
                    iface=_netdev(node, inter[3][0]) if inter[3] else None, intra_gbps=intra, intra_basis=intra_basis,
                    intra_allreduce_gbps=allreduce)


def _netdev(node: NodeProbe, name: str) -> str:
    """A netdev name for an RDMA port ("mlx5_0:1" -> "ib0"); netdev names pass through."""
    dev, _, port = name.partition(":")
    for d in node.facts.rdma_devices:
        for p in d.ports:
            if d.name == dev and str(p.port) == port and (p.netdevs or d.netdevs):
                return str((p.netdevs or d.netdevs)[0])
    return name


# an inter-node yardstick: (all links GB/s, one rank pair's GB/s, how, the links)
InterLinks = tuple[float | None, float | None, str, tuple[str, ...]]


def _nccl_rdma(node: NodeProbe) -> InterLinks | None:
    """NCCL's IB transport: the ports it opens (NCCL_IB_HCA applied), or EFA through the OFI plugin."""
    rates = {f"{d.name}:{p.port}": p.rate_gbps for d in node.facts.rdma_devices for p in d.ports if p.rate_gbps}
    if node.nccl_ib.disabled_by:
        return None
    ports = [p for p in node.nccl_ib.ports if rates.get(p)]
    how, per_gpu = "NCCL IB", 1
    if not ports:  # EFA ports (link layer Unknown) are NCCL's through aws-ofi-nccl, not its IB transport
        ports = [f"{d.name}:{p.port}" for d in node.facts.rdma_devices if d.is_efa for p in d.ports
                 if p.active and p.rate_gbps]
        how, per_gpu = "EFA via aws-ofi-nccl", efa_ports_per_gpu(len(ports), len(node.facts.gpus))
    if not ports:
        return None
    total = sum(rates[p] for p in ports) / BITS_PER_BYTE
    one = per_gpu * max(rates[p] for p in ports) / BITS_PER_BYTE
    shown = ", ".join(ports[:4]) + (", ..." if len(ports) > 4 else "")
    each = sorted({rates[p] for p in ports})
    rate_text = "/".join(f"{r:g}" for r in each)
    uses = ("one" if per_gpu == 1 else
            f"{per_gpu} (the plugin's rails: {len(ports)} ports for {len(node.facts.gpus)} GPUs)")
    return (total, one, f"{len(ports)} x {rate_text} Gb/s RDMA port(s) ({how}: {shown}); one rank pair uses {uses}",
            tuple(ports))


def efa_ports_per_gpu(ports: int, gpus: int) -> int:
    """EFA ports one GPU drives: aws-ofi-nccl stripes each GPU's traffic over the EFA devices it groups
    with that GPU (p5: 32 x 100 Gb/s for 8 GPUs, 4 each; p4d: 4 for 8, one each, shared); one port when
    the GPUs are unknown or outnumber the ports."""
    return max(1, ports // gpus) if gpus else 1


def _socket(node: NodeProbe, backend: Backend, route_iface: str | None) -> InterLinks:
    """The socket interfaces the backend binds: NCCL's choice (NCCL_SOCKET_IFNAME rules), or Gloo's
    (GLOO_SOCKET_IFNAME, else the route to the rendezvous host, else the hostname's interface)."""
    if backend == Backend.NCCL:
        names, how = list(node.nccl_socket.ifaces), f"NCCL sockets, {node.nccl_socket.rule}"
        if node.nccl_ib.disabled_by:
            how += f"; IB off by {node.nccl_ib.disabled_by}"
    elif node.gloo.rule == "GLOO_SOCKET_IFNAME" or not route_iface:
        names, how = [n for n in node.gloo.ifaces if n not in node.gloo.missing], f"Gloo, {node.gloo.rule}"
    else:
        names, how = [route_iface], "Gloo, the interface routing to the rendezvous host"
    ifaces = [node.facts.iface(n) for n in names]
    real = [i for i in ifaces if i is not None and i.name not in ("lo", node.facts.loopback)]
    speeds = [i.speed_mbps for i in real if i.speed_mbps and i.speed_mbps > 0]
    if not real or len(speeds) != len(real):
        missing = [i.name for i in real if not (i.speed_mbps and i.speed_mbps > 0)]
        why = (f"no speed in sysfs for {', '.join(missing)}" if missing
               else "no inter-node interface (" + (", ".join(names) or "none") + ")")
        return None, None, f"{why} ({how})", tuple(names)
    total = link_gbps(sum(speeds))
    text = " + ".join(f"{i.name} {i.speed_mbps} Mb/s" for i in real)
    virtual = [f"{i.name} is a {i.virtual_kind}" for i in real if nominal_speed(i.virtual_kind)]
    if virtual:  # no line rate: no % of expected, no ND305; the slow-link floor still comes from it
        text += f", nominal ({', '.join(virtual)}): no line rate, only the slow-link floor"
    return total, total, f"{text} ({how})", tuple(i.name for i in real)


def _no_intra(node: NodeProbe) -> tuple[float | None, str | None]:
    """Gloo on a GPU node (``--cpu``): say why its intra-node figures have no yardstick."""
    if not node.facts.gpus:
        return None, None
    return None, (f"none: the ranks run Gloo on CPU (--cpu), which does not use the {len(node.facts.gpus)} GPUs' "
                  "NVLink/PCIe peer-to-peer links; not judged against them")


def _intra(node: NodeProbe) -> tuple[float | None, str | None, float | None]:
    """(busbw, how, all-reduce's busbw where NVLS lifts it) inside this node, from the slowest GPU model."""
    gpus = node.facts.gpus
    if not gpus:
        return None, None, None
    unknown = sorted({g.pci.device or "?" for g in gpus if (g.pci.device or "").lower() not in GPU_INTRA})
    if unknown:
        return None, f"GPU model {', '.join(unknown)} not in the table: no intra-node estimate", None
    slowest = min((GPU_INTRA[(g.pci.device or "").lower()] for g in gpus), key=lambda k: k.gbps)
    gbps, how = slowest.gbps, slowest.how
    sockets = sorted({g.pci.numa_node for g in gpus if g.pci.numa_node is not None})
    if slowest.pcie and len(sockets) > 1 and gbps > CROSS_SOCKET_GBPS:
        gbps = CROSS_SOCKET_GBPS
        how += (f", but the GPUs span NUMA nodes {', '.join(map(str, sockets))}: the ring crosses the CPUs' link, "
                f"{CROSS_SOCKET_GBPS:g} GB/s (NCCL's Skylake UPI figure, the lowest current x86 one)")
    nvls = gbps * NVLS_ALLREDUCE_GAIN if slowest.nvls else None
    if nvls:
        how += f"; all-reduce with NVLS {NVLS_ALLREDUCE_GAIN:g} x"
    return gbps, (f"estimate for {len(gpus)} x {slowest.model}: {how} (NCCL's effective figure, "
                  "nccl-facts.md section E)"), nvls
