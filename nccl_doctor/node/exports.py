"""The "Recommended exports" block: shell lines that make NCCL and Gloo use the right interfaces and ports."""

from __future__ import annotations

from nccl_doctor.node.checks_socket import best_socket_ifaces
from nccl_doctor.node.fixes import IB_ON, conf_origin, undo_line
from nccl_doctor.node.model import IPV4_MAPPED_GID, VERBS_LINK_LAYERS, GidType, LinkLayer, NodeProbe

INTRA_NODE_DISABLERS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")


def exports(node: NodeProbe) -> list[str]:
    """Shell lines that make NCCL and Gloo use the right interfaces on this node."""
    lines = []
    s, ib = node.settings, node.nccl_ib
    best = best_socket_ifaces(node)
    lines += [undo_line(node, name, IB_ON[name]) for name in ib.disablers
              if conf_origin(node, name) is None or ib.usable]
    lines += [undo_line(node, name, "0") for name in INTRA_NODE_DISABLERS
              if s.get(name) is not None and s.get(name) != "0"]
    if best:
        lines.append(f"export NCCL_SOCKET_IFNAME=={','.join(best)}")
    healthy = _healthy_ports(node)
    if healthy:
        lines.append(f"export NCCL_IB_HCA=={','.join(healthy)}{_left_out(node, healthy)}")
        roce = _roce_gid_index(node)
        if roce is not None:
            lines.append(f"export NCCL_IB_GID_INDEX={roce}")
    if best:
        lines.append(f"export GLOO_SOCKET_IFNAME={best[0]}")
    return lines


def _healthy_ports(node: NodeProbe) -> list[str]:
    """Active IB/RoCE ports at the node's top rate, in NCCL's device order."""
    ports = [(d, p) for d in node.facts.rdma_devices for p in d.ports if p.active and p.link_layer in VERBS_LINK_LAYERS]
    if not ports:
        return []
    top = max((p.rate_gbps or 0) for _, p in ports)
    keep = [f"{d.name}:{p.port}" for d, p in ports if (p.rate_gbps or 0) >= top]
    order = {name: k for k, name in enumerate(node.nccl_ib.usable)}
    return sorted(keep, key=lambda n: order.get(n, 0))


def _left_out(node: NodeProbe, kept: list[str]) -> str:
    """A shell comment naming the active ports the line leaves out and why: slower than the kept ones (a
    ring runs at its slowest port), so NCCL should not stripe traffic over them."""
    rates = {f"{d.name}:{p.port}": p for d in node.facts.rdma_devices for p in d.ports}
    out = [n for n in node.nccl_ib.usable if n not in kept]
    if not out:
        return ""
    top = max((rates[n].rate_gbps or 0) for n in kept)
    slower = "; ".join(f"{n} at {rates[n].rate or 'an unknown rate'}" for n in out)
    return (f"  # leaves out {slower}: slower than the {top:g} Gb/sec of {', '.join(kept)} (a ring runs at its "
            "slowest port)")


def _roce_gid_index(node: NodeProbe) -> int | None:
    """The RoCE v2 IPv4 GID index every active RoCE port shares (None: none, or they differ)."""
    idx = None
    for d in node.facts.rdma_devices:
        for p in d.ports:
            if not p.active or p.link_layer != LinkLayer.ETHERNET:
                continue
            v2 = [g.index for g in p.gids if g.type == GidType.ROCE_V2 and g.gid.startswith(IPV4_MAPPED_GID)]
            if not v2 or (idx is not None and v2[0] != idx):
                return None
            idx = v2[0]
    return idx
