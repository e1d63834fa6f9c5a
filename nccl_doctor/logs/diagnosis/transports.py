"""Which transports a job used, read from a ``ParseResult``: the inter-node fabric (with or without
GPUDirect RDMA), the intra-node transports, and the kept lines that show each of them. No findings
here: ``diagnose.py`` and ``view.py`` build on these answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from nccl_doctor.enums import StrEnum
from nccl_doctor.logs.parse.model import OFI_PLUGIN, Category, Comm, Evidence, Fact, ParseResult, Tr

ROCE_LAYER = "RoCE"  # the link layer NET/IB prints for RoCE ports ("mlx5_0:1/RoCE")
NVLS = "NVLS"  # the intra-node transport token of NVLink SHARP


class Transport(StrEnum):
    """The inter-node transport families the diagnosis names; a net plugin NCCL does not know by
    family keeps its own name (``net_family``), so ``InterNode.transport`` is a ``str``."""

    IB = "IB"
    ROCE = "RoCE"
    SOCKET = "Socket"
    OFI = "OFI"
    NONE = "none"  # every communicator on one node
    MIXED = "mixed"  # a communicator whose hops use RDMA on some nodes and Socket on others
    UNKNOWN = "unknown"  # the log does not show it


# Third-party net plugins by the fabric they drive (their NET/<name>, Using network <name>): Google's
# FastSocket and GPUDirect-TCPX/TCPXO move bytes over TCP; gIB and vendors' "NCCL RDMA Plugin" over IB
# verbs (IB or RoCE by the link layer their device lines show). Matched on the lower-cased name.
TCP_PLUGIN_WORDS = ("socket", "tcpx")
RDMA_PLUGIN_WORDS = ("gib", "rdma")


@dataclass(frozen=True)
class InterNode:
    transport: str  # a Transport, or a plugin's own net name when its fabric is not known
    gdr: bool | None
    evidence: str
    network: str | None = None  # NCCL's own name for it (``IB``, ``Socket``, a plugin's: ``GIB``), if shown


Located = tuple[Comm | None, Evidence]  # a kept line and the communicator it is about (None: none)


def net_family(name: str, result: ParseResult) -> str:
    """NCCL's network name (``NET/<name>/``, ``Using network <name>``) as a fabric family."""
    low = name.lower()
    if low.startswith("ib"):  # internal IB transport and the IBext plugins: IB or RoCE by link layer
        layers = set(result.link_layers)
        return Transport.ROCE if layers and layers <= {ROCE_LAYER} else Transport.IB
    if is_socket(name):
        return Transport.SOCKET
    if "libfabric" in low or "ofi" in low:
        return Transport.OFI
    # a plugin on IB verbs that listed its own devices (``NET/<name> : Using [0]mlx5_bond_0:1/RoCE``)
    layers = {k.rsplit("/", 1)[1] for k in result.facts
              if k.startswith(Fact.PLUGIN_LINK_) and k[len(Fact.PLUGIN_LINK_):].rsplit("/", 1)[0] == low}
    if layers:
        return Transport.ROCE if layers <= {ROCE_LAYER} else Transport.IB
    if low.startswith(RDMA_PLUGIN_WORDS) or any(w in low.split() for w in RDMA_PLUGIN_WORDS):
        known = set(result.link_layers)  # from NET/IB's device lines, when the log has them
        return Transport.ROCE if known and known <= {ROCE_LAYER} else Transport.IB
    return name


def split_net(comm: Comm) -> tuple[Counter[str], Counter[bool], Counter[str]]:
    """(inter-node connections by net name, inter-node RDMA connections by GDR yes/no, intra-node NET
    loopback by name). Socket connections never count for GDR: it does not apply to them.

    GPUDirect RDMA shown in one direction counts: a send without ``/GDRDMA`` from a host whose receives
    on that network show it is NCCL's own choice (GDR reads off for sends, ``gdr_reads_off``; NCCL 2.4-2.6
    printed ``/GDRDMA`` on the receive side alone), so it counts as GDR, not as GDR missing."""
    inter: Counter[str] = Counter()
    gdr: Counter[bool] = Counter()
    loop: Counter[str] = Counter()
    receives_gdr = {(host, name) for host, _, name, has_gdr, side in comm.net if has_gdr and side == "receive"}
    for (host, peer, name, has_gdr, side), n in comm.net.items():
        if not inter_peer(comm, host, peer):
            loop[name] += n
        else:
            inter[name] += n
            if not is_socket(name):
                gdr[has_gdr or (side == "send" and (host, name) in receives_gdr)] += n
    return inter, gdr, loop


def comm_hosts_by_family(comm: Comm, result: ParseResult) -> dict[str, set[str]]:
    """The hosts of a communicator's inter-node connections, by transport family."""
    out: dict[str, set[str]] = {}
    for host, peer, name, _, _ in comm.net:
        if host is not None and inter_peer(comm, host, peer):
            out.setdefault(net_family(name, result), set()).add(host)
    return out


def no_ib_hosts(r: ParseResult) -> set[str]:
    """Hosts whose own lines say they have no IB: ``NET/IB : No device found`` or ``Using network Socket``."""
    return {h for h in r.ib_no_device if h != "?"} | set(r.fact_hosts.get(f"{Fact.NETWORK_}{Transport.SOCKET}", ()))


def is_socket(name: str) -> bool:
    """A net name that carries bytes over TCP: NCCL's ``Socket``, FastSocket, GPUDirect-TCPX/TCPXO."""
    low = name.lower()
    return any(w in low for w in TCP_PLUGIN_WORDS)


def gdr_from(gdr: Counter[bool]) -> bool | None:
    """True when every RDMA connection counted uses GPUDirect RDMA; None when none was counted."""
    if not gdr:
        return None
    return gdr.get(False, 0) == 0


def network_evidence(r: ParseResult) -> bool:
    """Any line about the network at all (which a single-node job need not print)."""
    return bool(r.networks or r.ib_devices or r.ofi_providers or r.verbs_seen or r.ib_no_device
                or r.socket_ifaces)


def comm_on_one_node(comm: Comm) -> bool:
    """True when what the log shows of a communicator is complete enough to place all of it on one node:
    ``nNodes 1``, a single rank, every rank known on one host, or a ring that closes inside a node (every
    rank sent over P2P/SHM and none over the network; a ring across nodes has a NET hop on each node)."""
    if comm.nnodes is not None:
        return comm.nnodes == 1
    if comm.nranks == 1:
        return True
    hosts = set(comm.rank_host.values())
    if comm.nranks and len(comm.rank_host) >= comm.nranks and len(hosts) == 1 and None not in hosts:
        return True
    if comm.net or comm.collnet or not comm.intra:
        return False
    ranks = set(range(comm.nranks)) if comm.nranks else set(comm.rank_host)
    return bool(ranks) and ranks <= comm.intra_src


def one_host_holds_all(r: ParseResult) -> bool:
    """One host, and its processes hold every rank of every communicator size they joined (each process
    with CUDA_VISIBLE_DEVICES set prints device [0]; one process may drive all GPUs)."""
    if len(r.hosts) != 1:
        return False
    held: dict[int, set[int]] = {}
    for proc in r.procs.values():
        for m in proc.memberships:
            if m.comm.nranks and m.rank is not None:
                held.setdefault(m.comm.nranks, set()).add(m.rank)
    return bool(held) and all(set(range(n)) <= ranks for n, ranks in held.items())


def single_node(r: ParseResult, inter_conns: int) -> bool:
    """True when the log proves (or makes very plain) that every communicator stays on one node."""
    if inter_conns:
        return False
    nodes = [c.nnodes for c in r.comms.values() if c.nnodes is not None]
    if any(n > 1 for n in nodes):
        return False
    if nodes:
        return True
    if r.comms and all(comm_on_one_node(c) for c in r.comms.values()):
        return True
    if len(r.hosts) != 1:
        return False
    if one_host_holds_all(r):
        return True
    host = next(iter(r.hosts))
    sizes = [c.nranks for c in r.comms.values() if c.nranks]
    if sizes and max(sizes) <= r.host_max_dev.get(host, -1) + 1:
        return True  # every communicator fits on the GPUs this one host shows
    return any(c.nvls for c in r.comms.values()) and not network_evidence(r)


def inter_node(r: ParseResult) -> InterNode:
    """The job-wide inter-node transport: the most used one in channel lines, else what other lines say."""
    fam: Counter[str] = Counter()
    names: Counter[str] = Counter()
    gdr: Counter[bool] = Counter()
    for comm in r.comms.values():
        inter, g, _ = split_net(comm)
        for name, n in inter.items():
            fam[net_family(name, r)] += n
        names.update(inter)
        gdr.update(g)
    if fam:
        transport = fam.most_common(1)[0][0]
        shown = next(n for n, _ in names.most_common() if net_family(n, r) == transport)
        return InterNode(transport, None if transport == Transport.SOCKET else gdr_from(gdr), "channel lines",
                         shown)
    if single_node(r, 0):
        return InterNode(Transport.NONE, None, "all communicators on one node")
    network = r.networks.most_common(1)[0][0] if r.networks else None
    if network is not None:
        transport = net_family(network, r)
        evidence = "Using network line"
    elif r.ofi_providers or OFI_PLUGIN in r.net_plugins:
        transport, evidence = Transport.OFI, "NET/OFI lines"
    elif r.ib_devices:
        transport, evidence = net_family(Transport.IB, r), "NET/IB device list"
    elif r.verbs_seen:
        transport, evidence = net_family(Transport.IB, r), "IB verbs errors"
    elif f"{Fact.HINT_}{Transport.IB}" in r.facts:
        transport, evidence = net_family(Transport.IB, r), "IB error lines"
    elif r.ib_no_device and r.socket_ifaces:
        transport, evidence = Transport.SOCKET, "NET/IB : No device found"
    elif f"{Fact.HINT_}{Transport.SOCKET}" in r.facts or r.socket_ifaces:
        transport, evidence = Transport.SOCKET, "NET/Socket lines"
    else:
        return InterNode(Transport.UNKNOWN, None, "no transport lines")
    return InterNode(transport, None if transport == Transport.SOCKET else static_gdr(r), evidence, network)


def static_gdr(r: ParseResult) -> bool | None:
    """GPUDirect RDMA from lines other than ``via`` (when no channel line is visible)."""
    ring: set[int] = set().union(*(c.ring_gdr for c in r.comms.values())) if r.comms else set()
    if ring:
        return 0 not in ring
    if r.gdr_hca.get("Disabled") and not r.gdr_hca.get("Enabled"):
        return False
    if r.gdr_gpu:
        return r.gdr_gpu.get("Disabled", 0) == 0
    return None


def intra_transports(r: ParseResult) -> list[str]:
    """Every intra-node transport token seen, NVLS and NIC loopback (``NET/<name> (same node)``) included."""
    seen: Counter[str] = Counter()
    for comm in r.comms.values():
        seen.update(comm.intra)
        if comm.nvls:
            seen[NVLS] += 1
        for name, n in split_net(comm)[2].items():
            seen[f"NET/{name} (same node)"] += n
    return sorted(seen)


# --- the kept lines that show a transport -------------------------------------------------------


def inter_peer(comm: Comm, host: str | None, peer: int | None) -> bool:
    """The rule of ``split_net`` for one connection: False when both ends are on one node: a one-node
    communicator, or the peer's host is this one, unless NCCL put each rank on a node of its own
    (``Comm.rank_per_node``: a shared hostname is then not a shared node)."""
    if comm.nnodes == 1:
        return False
    if comm.rank_per_node:
        return True
    peer_host = comm.rank_host.get(peer) if peer is not None else None
    return not (peer_host is not None and peer_host == host)


def inter_connections(r: ParseResult) -> Iterator[tuple[Comm, str | None, str, bool, int]]:
    """(comm, host, net name, GDR, connections) of every inter-node ``via NET/...`` key, by ``split_net``'s rule."""
    for comm in r.comms.values():
        for (host, peer, name, has_gdr, _), n in comm.net.items():
            if inter_peer(comm, host, peer):
                yield comm, host, name, has_gdr, n


def gdr_reads_off(r: ParseResult, family: str) -> bool:
    """True when the only inter-node RDMA connections without GPUDirect RDMA are sends, from hosts whose
    receives use it: NCCL's own choice, not a missing GDR. ``ncclTopoCheckGdr`` (src/graph/paths.cc) is asked
    with read=1 for a send (the NIC reads GPU memory) and, unless NCCL_NET_GDR_READ=1, leaves GDR off there on
    GPUs older than Ampere (compute capability < 8.0) without NVLink to another GPU, or everywhere with
    NCCL_NET_GDR_READ=0; it prints nothing about it."""
    sends_off: set[str | None] = set()
    receives_on: set[str | None] = set()
    for comm in r.comms.values():
        for host, peer, name, has_gdr, side in comm.net:
            if is_socket(name) or net_family(name, r) != family or not inter_peer(comm, host, peer):
                continue
            if not has_gdr:
                if side != "send":
                    return False
                sends_off.add(host)
            elif side == "receive":
                receives_on.add(host)
    return bool(sends_off) and sends_off <= receives_on


def by_position(found: list[Located]) -> list[Located]:
    """Kept lines in the order of the input: file, then line number."""
    return sorted(found, key=lambda ce: (ce[1].file or "", ce[1].line or 0))


def net_lines(r: ParseResult, *, inter: bool, family: str | None = None, gdr: bool | None = None,
              name: str | None = None) -> list[Located]:
    """Kept ``via NET/...`` channel lines (first in the logs first) matching the filters."""
    found: list[Located] = []
    for comm in r.comms.values():
        for key, evs in comm.tr_first.items():
            if key[0] != Tr.NET or (name is not None and key[1] != name) or (gdr is not None and key[-1] != gdr):
                continue
            if family is not None and net_family(key[1], r) != family:
                continue
            found += [(comm, ev) for peer, ev in evs if inter_peer(comm, ev.host, peer) == inter]
    return by_position(found)


def intra_lines(r: ParseResult, tokens: Iterable[str]) -> list[Located]:
    """Kept intra-node channel lines (first in the logs first) of the given transport tokens."""
    tokens = list(tokens)
    found: list[Located] = []
    for comm in r.comms.values():
        for token in tokens:
            found += [(comm, ev) for _, ev in comm.tr_first.get((Tr.INTRA, token), ())]
    if NVLS in tokens and Fact.NVLS in r.facts:
        found.append((None, r.facts[Fact.NVLS]))
    return by_position(found)


def fact_lines(r: ParseResult, *keys: str, prefix: str | None = None) -> list[Evidence]:
    """First lines of transport facts (``ParseResult.facts``) by exact key or key prefix."""
    found = [r.facts[k] for k in keys if k in r.facts]
    if prefix is not None:
        found += [ev for k, ev in r.facts.items() if k.startswith(prefix)]
    return found


def without_errors(r: ParseResult, lines: list[Evidence]) -> list[Evidence]:
    """The lines that are not errors or warnings: an error line may show which transport was in use, but
    never that it works (a PASS is never evidenced by one)."""
    bad = {(ev.file, ev.line, ev.text) for ev in fact_lines(r, prefix=Fact.HINT_)}
    bad |= {(g.first.file, g.first.line, g.first.text)
            for groups in (r.errors, r.warnings) for g in groups.values() if g.first}
    return [ev for ev in lines if (ev.file, ev.line, ev.text) not in bad]


def static_transport_lines(r: ParseResult, transport: str) -> list[Evidence]:
    """Lines other than channel lines that show the inter-node transport (``Using network``, NET/...)."""
    found = [ev for k, ev in r.facts.items()
             if k.startswith(Fact.NETWORK_) and net_family(k.split(":", 1)[1], r) == transport]
    if transport == Transport.OFI:
        found += fact_lines(r, prefix=Fact.OFI_)
    elif transport in (Transport.IB, Transport.ROCE):
        found += fact_lines(r, Fact.IB_DEVICES)
        found += [g.first for g in r.errors.values()
                  if g.category in (Category.VERBS, Category.IB_COMPLETION) and g.first][:1]
    elif transport == Transport.SOCKET:
        found += fact_lines(r, Fact.SOCKET_IFACES)
    if not found and transport in (Transport.IB, Transport.ROCE, Transport.SOCKET):
        # only error lines showed the transport (``evidence.transport_hint``)
        found = fact_lines(r, f"{Fact.HINT_}{Transport.SOCKET if transport == Transport.SOCKET else Transport.IB}")
    return found
