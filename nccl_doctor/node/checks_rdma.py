"""Checks of the RDMA fabric and the hardware around it: ports, NCCL_IB_HCA, NCCL_NET, RoCE GIDs, bonds,
GPU-NIC locality and GPUDirect RDMA prerequisites. Each takes the ``NodeProbe`` and returns findings."""

from __future__ import annotations

from nccl_doctor.codes import Code
from nccl_doctor.node.fixes import IB_ON, SHOWN_MAX, conf_file, set_fix, source_note, undo_fix
from nccl_doctor.node.model import (
    IPV4_MAPPED_GID,
    VERBS_LINK_LAYERS,
    GidType,
    LinkLayer,
    NodeProbe,
    RdmaDevice,
    RdmaPort,
    Role,
)
from nccl_doctor.node.ncclenv import (
    EFA_PLUGIN_NETS,
    RDMA_PLUGIN_NETS,
    NetKind,
    classify_net,
    match_if_list,
    overmatching_prefixes,
    parse_c_int,
    parse_if_list,
    show,
)
from nccl_doctor.report import Finding, Severity, finding

PASS, WARN, FAIL = Severity.PASS, Severity.WARN, Severity.FAIL


def check_rdma(node: NodeProbe) -> list[Finding]:
    devs = node.facts.rdma_devices
    if not devs:
        return _no_rdma(node)
    out = _ib_turned_off(node) + _hca_selection(node) + _port_health(node) + _no_active_port(node)
    if any(d.is_efa for d in devs):
        out.append(finding(Code.EFA_NEEDS_PLUGIN, PASS, "EFA devices present: NCCL's built-in IB transport ignores "
                           "them; the aws-ofi-nccl plugin must load (log line 'Using network Libfabric')",
                           "install aws-ofi-nccl and check with NCCL_DEBUG=INFO", host=node.host))
    return out + check_roce(node)


def _no_rdma(node: NodeProbe) -> list[Finding]:
    facts = node.facts
    if not any(i.role == Role.DATA for i in facts.interfaces):
        return []
    if facts.gpus:
        return [finding(Code.NO_RDMA, WARN, "no RDMA device (InfiniBand/RoCE/EFA): inter-node NCCL traffic will "
                        "use TCP sockets (NET/Socket)", "run multi-node training on nodes with an RDMA fabric",
                        host=node.host)]
    # a CPU node: only Gloo runs here, over TCP anyway
    return [finding(Code.NO_RDMA, PASS, "no RDMA device and no NVIDIA GPU: collectives here use Gloo over TCP; "
                    "NCCL settings are still checked for GPU nodes running with this environment", host=node.host)]


def _ib_off_vars(node: NodeProbe) -> list[str]:
    """Variables that turn NCCL's IB transport off (ND207); a misspelt NCCL_NET fails init instead (ND222)."""
    net = node.settings.get("NCCL_NET")
    return [v for v in node.nccl_ib.disablers if v != "NCCL_NET" or classify_net(net or "").kind == NetKind.SOCKET]


def _ib_turned_off(node: NodeProbe) -> list[Finding]:
    """ND207: active ports, and a variable that keeps NCCL off them."""
    ib, off = node.nccl_ib, _ib_off_vars(node)
    if not ib.usable or not off:
        return []
    what = " and ".join(f"{v}={show(node.settings.get(v) or '')}{source_note(node, v)}" for v in off)
    return [finding(Code.RDMA_DISABLED_BY_ENV, FAIL, f"{len(ib.usable)} active RDMA port(s) "
                    f"({', '.join(ib.usable[:SHOWN_MAX])}) but {what} turn{'s' if len(off) == 1 else ''} NCCL's IB "
                    "transport off: traffic goes over TCP sockets", undo_fix(node, [(v, IB_ON[v]) for v in off]),
                    host=node.host, file=conf_file(node, *off))]


def _hca_selection(node: NodeProbe) -> list[Finding]:
    """ND208 (NCCL_IB_HCA selects no active port) and ND205 (a prefix entry selects more than it names)."""
    ib = node.nccl_ib
    if not ib.hca_value or ib.disabled_by:
        return []
    out = []
    if ib.usable and not ib.selected:
        out.append(finding(Code.IB_HCA_SELECTS_NOTHING, FAIL, f"NCCL_IB_HCA={show(ib.hca_value)}"
                           f"{source_note(node, 'NCCL_IB_HCA')} selects none of the active ports "
                           f"({', '.join(ib.usable)}): NCCL falls back to sockets silently",
                           set_fix(node, "NCCL_IB_HCA", f"={','.join(ib.usable)}"), host=node.host))
    names = [d.name for d in node.facts.rdma_devices]
    for prefix, hits in overmatching_prefixes(parse_if_list(ib.hca_value), names).items():
        out.append(finding(Code.IFNAME_PREFIX_OVERMATCH, WARN, f"NCCL_IB_HCA entry '{prefix}' is a prefix: it also "
                           f"selects {', '.join(h for h in hits if h != prefix)}", f"export NCCL_IB_HCA=={prefix}",
                           host=node.host, device=prefix))
    return out


# ND210 FAILs a port NCCL uses at or below this share of its peers' rate: 4X trained as 1X (three lanes dead)
# or SDR among HDR; bench fails a rail below the same quarter of its yardstick (``bench.shortfall.FAIL_SHARE``).
# Half rate (2X of 4X, HDR among NDR) stays a WARN: the rail runs at ~48%, slow, not broken
PORT_FAIL_SHARE = 0.25


def _port_health(node: NodeProbe) -> list[Finding]:
    """ND209 per port that is not ACTIVE, ND210 per active port slower than its peers of the same link layer:
    FAIL where it is a port NCCL uses (``nccl_would_use``), WARN otherwise."""
    devs = node.facts.rdma_devices
    active_rates: dict[str, list[float]] = {}
    for d in devs:
        for p in d.ports:
            if p.active and p.rate_gbps:
                active_rates.setdefault(p.link_layer, []).append(p.rate_gbps)
    out = []
    for d in devs:
        for p in d.ports:
            top = max(active_rates.get(p.link_layer, [0]))
            if not p.active:
                out.append(_port_down(node, d, p))
            elif p.rate_gbps and top > p.rate_gbps:
                out.append(_port_slow(node, d, p, top))
    return out


def _netdev_note(p: RdmaPort) -> str:
    return f" (netdev {', '.join(p.netdevs)})" if p.netdevs else ""


def nccl_would_use(node: NodeProbe, d: RdmaDevice, p: RdmaPort) -> bool:
    """Whether NCCL's IB transport on this GPU node opens this port, or would were it ACTIVE: IB in use (not
    turned off, no other plugin), an IB/RoCE port NCCL_IB_HCA keeps, and (for a port that is down) no other port
    of its HCA active: a dual-port card's second port is often uncabled on purpose, a dark HCA is a lost rail."""
    ib = node.nccl_ib
    if not node.facts.gpus or not ib.ports or d.is_efa or p.link_layer not in VERBS_LINK_LAYERS:
        return False
    if ib.hca_value and not match_if_list(d.name, p.port, parse_if_list(ib.hca_value)):
        return False
    return p.active or not any(q.active for q in d.ports if q is not p)


def _port_down(node: NodeProbe, d: RdmaDevice, p: RdmaPort) -> Finding:
    where = f"{d.name}:{p.port}"
    skip = f"; exclude it with NCCL_IB_HCA=^={d.name}:{p.port} until fixed" if node.nccl_ib.usable else ""
    used = nccl_would_use(node, d, p)
    why = ": a rail NCCL would use is missing, so its GPU's traffic crowds another NIC" if used else ": NCCL skips it"
    return finding(Code.RDMA_PORT_NOT_ACTIVE, FAIL if used else WARN, f"RDMA port {where}{_netdev_note(p)} is "
                   f"{p.state} / {p.phys_state}{why}", f"check the cable/switch port; `ibstat {d.name}`{skip}",
                   host=node.host, device=where)


def _port_slow(node: NodeProbe, d: RdmaDevice, p: RdmaPort, top: float) -> Finding:
    where = f"{d.name}:{p.port}"
    broken = bool(p.rate_gbps) and (p.rate_gbps or 0.0) <= PORT_FAIL_SHARE * top and nccl_would_use(node, d, p)
    return finding(Code.RDMA_PORT_SLOW, FAIL if broken else WARN, f"RDMA port {where}{_netdev_note(p)} runs at "
                   f"{p.rate}, below the {top:g} Gb/sec of its peers on this node: rings through it run at its speed"
                   + (" (a quarter or less, on a port NCCL uses)" if broken else ""),
                   f"reseat/replace the cable or transceiver; {_link_tool(d)}", host=node.host, device=where,
                   evidence=(f"rate: {p.rate}",))


MELLANOX_PREFIX = "mlx"  # mlx4_*/mlx5_* devices and their mlx4_core/mlx5_core drivers: mlxlink reads their links


def _link_tool(d: RdmaDevice) -> str:
    """How to read a port's lanes and errors: mlxlink for Mellanox/NVIDIA devices only; ibv_devinfo (every
    verbs device: Omni-Path hfi1, iWARP i40iw/irdma, ...) otherwise."""
    if d.name.startswith(MELLANOX_PREFIX) or (d.driver or "").startswith(MELLANOX_PREFIX):
        return "check `mlxlink -d <pci>` for lanes/errors"
    return (f"check `ibv_devinfo -v -d {d.name}` (active_width, active_speed) and `ibstat {d.name}`, and the "
            "vendor's link tool, for lanes/errors")


def _no_active_port(node: NodeProbe) -> list[Finding]:
    """IB/RoCE hardware on a GPU node with no ACTIVE port: NCCL logs 'NET/IB : No device found' (INFO, not
    WARN) and runs on TCP sockets; the same silent fallback that ``parse`` fails as ND102."""
    facts, ib = node.facts, node.nccl_ib
    devs = [d for d in facts.rdma_devices if not d.is_efa]
    if not devs or ib.usable or not facts.gpus or node.settings.get("NCCL_NET") is not None:  # NCCL_NET: ND222
        return []
    ports = [f"{d.name}:{p.port} {p.state}/{p.phys_state}" for d in devs for p in d.ports]
    over = ", ".join(node.nccl_socket.ifaces[:SHOWN_MAX]) or "no interface"
    return [finding(Code.RDMA_PORT_NOT_ACTIVE, FAIL, f"no IB/RoCE port is ACTIVE ({', '.join(ports)}): NCCL finds no "
                    f"IB device and silently falls back to TCP sockets over {over} for all inter-node traffic",
                    "check each port with `ibstat` (State must be Active, Physical state LinkUp), the cables and "
                    "switch ports, and that a subnet manager answers (`sminfo`; RoCE: the switch port and "
                    "`ethtool <netdev>`)", host=node.host,
                    device=", ".join(f"{d.name}:{p.port}" for d in devs for p in d.ports))]


# ---------------------------------------------------------------------------------------------------
# NCCL_NET
# ---------------------------------------------------------------------------------------------------


def check_net(node: NodeProbe) -> list[Finding]:
    """NCCL_NET must name a network that initialises here with a device, else NCCL init fails
    (``Error: network <name> not found``). Checked on every node, with or without RDMA."""
    net = node.settings.get("NCCL_NET")
    if net is None:
        return []
    n, ib, devs = classify_net(net), node.nccl_ib, node.facts.rdma_devices
    head = f"NCCL_NET={show(net)}{source_note(node, 'NCCL_NET')}"
    drop = undo_fix(node, [("NCCL_NET", None)])
    fails = f"NCCL init fails ('Error: network {net} not found' / 'Failed to initialize any NET plugin')"
    if n.kind == NetKind.IB and not ib.ports:
        why, fix = _why_no_ib(node, drop)
        return [finding(Code.NCCL_NET_UNAVAILABLE, FAIL, f"{head} but {why}: {fails}", fix, host=node.host)]
    if n.kind == NetKind.TYPO:
        usable = n.meant != "IB" or bool(ib.usable)
        fix = set_fix(node, "NCCL_NET", n.meant) if usable and n.meant else drop
        return [finding(Code.NCCL_NET_UNAVAILABLE, FAIL, f"{head} is not a network name NCCL knows (IB, Socket, or a "
                        f"plugin's name; did you mean {n.meant}?): {fails}", fix, host=node.host)]
    if n.kind == NetKind.PLUGIN and n.plugin in RDMA_PLUGIN_NETS and not ib.usable:
        return [finding(Code.NCCL_NET_UNAVAILABLE, FAIL, f"{head}: that plugin (nccl-rdma-sharp-plugins) drives "
                        f"IB/RoCE ports and none is active here: {fails}", drop, host=node.host)]
    if n.kind == NetKind.PLUGIN and n.plugin in EFA_PLUGIN_NETS and not any(d.is_efa for d in devs):
        return [finding(Code.NCCL_NET_UNAVAILABLE, WARN, f"{head}: aws-ofi-nccl uses EFA devices and there are none "
                        f"here; unless its libfabric provider is set to another one (FI_PROVIDER), {fails}", drop,
                        host=node.host)]
    if n.kind == NetKind.UNKNOWN:
        return [finding(Code.NCCL_NET_UNAVAILABLE, WARN, f"{head} is not a built-in network (IB, Socket) nor a known "
                        f"plugin name; if no installed plugin registers it, {fails}", drop, host=node.host)]
    return []


def _why_no_ib(node: NodeProbe, drop: str) -> tuple[str, str]:
    """(why, fix) for NCCL_NET=IB with no port for IB to open."""
    ib, devs = node.nccl_ib, node.facts.rdma_devices
    if ib.disabled_by:
        return f"{ib.disabled_by} turns the IB transport off", undo_fix(node, [(v, "0") for v in ib.disablers])
    if ib.usable:
        return (f"NCCL_IB_HCA={show(ib.hca_value or '')} selects none of the active ports",
                undo_fix(node, [("NCCL_IB_HCA", None)]))
    if devs and all(d.is_efa for d in devs):
        return "EFA devices are not IB devices (they need the aws-ofi-nccl plugin)", drop
    if devs:
        return "no RDMA port is ACTIVE with an IB/Ethernet link layer", f"{drop} (or fix the ports: see ND209)"
    return "this node has no RDMA device (InfiniBand/RoCE)", drop


def net_fails(node: NodeProbe) -> bool:
    """True when NCCL_NET makes NCCL init fail on this node (an ND222 FAIL)."""
    return any(f.severity is FAIL for f in check_net(node))


# ---------------------------------------------------------------------------------------------------
# RoCE GIDs, bonds, GPUs
# ---------------------------------------------------------------------------------------------------


def check_roce(node: NodeProbe) -> list[Finding]:
    """ND211: the GID NCCL would use on each active RoCE port (NCCL_IB_GID_INDEX, or one it can find)."""
    out = []
    for d in node.facts.rdma_devices:
        for p in d.ports:
            if p.active and p.link_layer == LinkLayer.ETHERNET:
                out += _roce_port(node, d, p)
    return out


def _roce_port(node: NodeProbe, d: RdmaDevice, p: RdmaPort) -> list[Finding]:
    s = node.settings
    gid_idx = s.get("NCCL_IB_GID_INDEX")
    want_idx = parse_c_int(gid_idx)[0] if gid_idx is not None else -1
    want_type = GidType.ROCE_V1 if s.get("NCCL_IB_ROCE_VERSION_NUM") == "1" else GidType.ROCE_V2
    fam6 = s.get("NCCL_IB_ADDR_FAMILY") == "AF_INET6"
    ip = "IPv6" if fam6 else "IPv4"
    where = f"{d.name}:{p.port}"
    usable = [g for g in p.gids if g.type == want_type and (g.gid.startswith(IPV4_MAPPED_GID) != fam6)]
    fix = f"export NCCL_IB_GID_INDEX={usable[0].index}" if usable else "unset NCCL_IB_GID_INDEX"
    if want_idx < 0:
        if usable:
            return []
        return [finding(Code.ROCE_GID_UNUSABLE, WARN, f"RoCE port {where} has no {want_type} {ip} GID (is an IP "
                        f"address set on {', '.join(p.netdevs) or 'its netdev'}?)",
                        "assign an IP address to the RoCE netdev; check `show_gids`", host=node.host, device=where)]
    g = next((g for g in p.gids if g.index == want_idx), None)
    if g is None:
        return [finding(Code.ROCE_GID_UNUSABLE, WARN, f"NCCL_IB_GID_INDEX={gid_idx} but RoCE port {where} has no GID "
                        f"at index {want_idx}", fix, host=node.host, device=where)]
    if g not in usable:
        return [finding(Code.ROCE_GID_UNUSABLE, WARN, f"NCCL_IB_GID_INDEX={gid_idx}: GID {g.gid} on {where} is "
                        f"{g.type}, not an {ip} {want_type} GID", fix, host=node.host, device=where)]
    return []


def check_bonds(node: NodeProbe) -> list[Finding]:
    return [finding(Code.BOND_SLAVE_DOWN, WARN, f"bond {i.name}{f' ({i.bond.mode})' if i.bond.mode else ''} has "
                    "down slave(s) "
                    f"{', '.join(i.bond.down_slaves)} of {', '.join(i.bond.slaves)}: it runs degraded",
                    f"check links: cat /proc/net/bonding/{i.name}", host=node.host, iface=i.name)
            for i in node.facts.interfaces if i.bond and i.bond.down_slaves]


def check_gpus(node: NodeProbe) -> list[Finding]:
    """ND213 per GPU whose nearest NIC sits on another NUMA node; ND214 when GPUDirect RDMA cannot work."""
    facts = node.facts
    far = [g for g in facts.gpus if g.nearest_nic and g.pci.numa_node is not None
           and g.nearest_nic_numa is not None and g.pci.numa_node != g.nearest_nic_numa]
    out = [finding(Code.GPU_NIC_NUMA_MISMATCH, WARN, f"GPU {g.pci.address} (NUMA {g.pci.numa_node}) has its nearest "
                   f"NIC {g.nearest_nic} on NUMA node {g.nearest_nic_numa} (path {g.pcie_distance}): GPUDirect RDMA "
                   "crosses the CPU interconnect", "place NICs and GPUs on the same socket, or accept lower bandwidth",
                   host=node.host, device=g.pci.address) for g in far]
    rdma_live = any(p.active for d in facts.rdma_devices for p in d.ports)
    gdr = facts.gdr
    if facts.gpus and rdma_live and not gdr.peermem_module and not gdr.dmabuf_possible:
        why = "the nvidia module is not loaded" if not gdr.nvidia_loaded else \
            "no nvidia_peermem/nv_peer_mem module is loaded and DMA-BUF is not available " \
            f"(open kernel module: {gdr.open_kernel_module}, driver {gdr.driver_version}, kernel {gdr.kernel})"
        out.append(finding(Code.GDR_PREREQUISITES_MISSING, WARN, f"GPUDirect RDMA prerequisites missing: {why}; NCCL "
                           "will stage through host memory (no /GDRDMA)", "modprobe nvidia_peermem (or use the open "
                           "kernel module >= 515 on kernel >= 5.12 for DMA-BUF)", host=node.host))
    return out
