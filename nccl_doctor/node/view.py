"""The probe's report: its JSON (``probe_payload``, keys as documented), its tables and its summary line,
all built from the ``NodeProbe`` model."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from nccl_doctor.node.checks import check
from nccl_doctor.node.checks_rdma import net_fails
from nccl_doctor.node.checks_socket import cannot_start, data_path
from nccl_doctor.node.classify import link_mbps, speed_text
from nccl_doctor.node.exports import exports
from nccl_doctor.node.model import Interface, InterfaceKind, NodeProbe, Role, Scope
from nccl_doctor.node.ncclenv import show
from nccl_doctor.node.payload import ProbePayload
from nccl_doctor.payload import Json
from nccl_doctor.report import Finding, Report, Table

INTERFACE_COLUMNS = ("interface", "kind", "state", "speed", "MTU", "addresses", "RDMA dev:port state rate link",
                     "NUMA", "NCCL")
GPU_COLUMNS = ("GPU", "NUMA", "nearest NIC", "NIC NUMA", "path")


def _nccl_use(i: Interface, node: NodeProbe) -> str | None:
    """``bootstrap`` or ``socket`` for the interfaces NCCL's sockets use."""
    if i.name == node.nccl_socket.bootstrap:
        return "bootstrap"
    return "socket" if i.name in node.nccl_socket.ifaces else None


def _iface_dict(i: Interface, node: NodeProbe) -> dict[str, Any]:
    d = asdict(i)
    d["addresses"] = [str(a) for a in i.addresses]
    d["numa_node"] = i.numa_node
    d["pci"] = i.pci.address if i.pci else None
    d["nccl"] = _nccl_use(i, node)
    return d


def transport(node: NodeProbe) -> str:
    """The network NCCL will use between nodes: IB, Socket, or a plugin (EFA needs aws-ofi-nccl)."""
    net = node.settings.get("NCCL_NET")
    if net is not None and net_fails(node):
        return f"none (NCCL_NET={show(net)} is not usable here: init fails)"
    return data_path(node)[0]


def probe_payload(node: NodeProbe) -> ProbePayload:
    """The probe's JSON keys."""
    f = node.facts
    return ProbePayload(
        host=f.host,
        root=node.root,
        interfaces=[_iface_dict(i, node) for i in f.interfaces],
        rdma_devices=[asdict(d) for d in f.rdma_devices],
        gpus=[asdict(g) for g in f.gpus],
        gdr=asdict(f.gdr),
        default_route=f.default_route_ifaces,
        default_route6=f.default_route6_ifaces,
        unattributed_addresses=f.unattributed_addresses,
        nccl={
            "socket_ifaces": node.nccl_socket.ifaces,
            "bootstrap_iface": node.nccl_socket.bootstrap,
            "socket_rule": node.nccl_socket.rule,
            "ib_devices": node.nccl_ib.ports,
            "ib_usable": node.nccl_ib.usable,
            "ib_disabled_by": node.nccl_ib.disabled_by,
            "transport": transport(node),
        },
        gloo_iface=node.gloo.ifaces[0] if node.gloo.ifaces else None,
        gloo=asdict(node.gloo),
        settings={k: {"value": v.value, "source": v.source} for k, v in sorted(node.settings.values.items())},
        conf_files=node.settings.conf_files,
        exports=exports(node),
    )


def node_dict(node: NodeProbe) -> dict[str, Json]:
    """The probe's JSON keys as one object (``probe_payload``'s)."""
    return dict(probe_payload(node).to_json())


def _rdma_cell(i: Interface) -> str:
    return "; ".join(f"{r.device}:{r.port} {r.state} {r.rate or '?'} {r.link_layer}" for r in i.rdma)


def _kind_cell(i: Interface) -> str:
    """``virtual (veth, uplink)``: a virtual interface's kind of device, and whether it is the node's uplink."""
    if i.kind != InterfaceKind.VIRTUAL:
        return f"{i.kind}"
    detail = ", ".join(x for x in (i.virtual_kind, "uplink" if i.role == Role.DATA else None) if x)
    return f"{i.kind} ({detail})" if detail else f"{i.kind}"


def interface_table(node: NodeProbe) -> Table:
    rows = tuple(
        (i.name, _kind_cell(i), i.operstate, speed_text(i) if link_mbps(i) else "-", str(i.mtu or "-"),
         " ".join(str(a) for a in i.addresses if a.scope != Scope.LINK) or "-", _rdma_cell(i) or "-",
         "-" if i.numa_node is None else str(i.numa_node), _nccl_use(i, node) or "")
        for i in node.facts.interfaces)
    return Table(title=f"Interfaces on {node.host}", columns=INTERFACE_COLUMNS, rows=rows)


def gpu_table(node: NodeProbe) -> Table:
    return Table(title="GPUs", columns=GPU_COLUMNS, rows=tuple(
        (g.pci.address, str(g.pci.numa_node), g.nearest_nic or "-", str(g.nearest_nic_numa), g.pcie_distance or "-")
        for g in node.facts.gpus))


def probe_report(node: NodeProbe, findings: list[Finding] | None = None) -> Report:
    """The probe's report; ``findings`` default to every check's on this node."""
    findings = check(node) if findings is None else findings
    payload = probe_payload(node)
    tables = [interface_table(node)]
    if node.facts.gpus:
        tables.append(gpu_table(node))
    notes = ["Recommended exports for this node:"] + [f"  {line}" for line in payload.exports]
    return Report(command="probe", findings=findings, payload=payload, tables=tables, notes=notes,
                  summary=_summary(node))


def _summary(node: NodeProbe) -> str:
    said = cannot_start(node) or f"NCCL bootstrap {node.nccl_socket.bootstrap}, transport {transport(node)}"
    return f"{node.host}: {said}"
