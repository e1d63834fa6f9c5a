"""From a ``ParseResult`` to a ``Report``: which transports the job used, what went wrong, the fix.

Verdict conventions (``fixtures/nccl-logs/README.md``): fail on any fatal error (NCCL error, IB
completion error, failed connect, CUDA failure, watchdog timeout) or on TCP sockets between nodes
that have IB/EFA; warn on RDMA without GPUDirect RDMA, sockets on plain Ethernet, intra-node SHM or
NIC loopback, non-fatal NCCL WARNs, and logs too thin to show the transport; pass otherwise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from nccl_doctor.logs.parser import Comm, Evidence, Group, ParseResult
from nccl_doctor.report import Finding, Report, Severity, Table, Where, hosts_text, plural

# NCCL return codes (nccl.h) as they appear in "file.cc:NN -> N" traces.
RETCODES = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
            4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 8: "ncclTimeout"}
# ibv_wc_status values worth naming (verbs.h).
IB_STATUS = {
    "1": "local length error", "2": "local QP operation error", "4": "local protection error",
    "5": "work request flushed (a consequence of an earlier error)", "9": "remote invalid request",
    "10": "remote access error", "11": "remote operation error",
    "12": "transport retry counter exceeded", "13": "RNR retry counter exceeded",
}
_IB_STATUS_FIX = {
    "12": ("the peer stopped answering over the fabric: check both ports with `ibstat` / `ibdiagnet` "
           "(link flaps, cable), for RoCE the GID index (`show_gids`; NCCL_IB_GID_INDEX=3 is the usual "
           "RoCEv2/IPv4 entry), MTU and PFC/ECN; NCCL_IB_TIMEOUT=22 gives a congested fabric more time"),
    "13": "the receiver had no buffers posted: usually the remote process died; look for its first error",
    "4": ("memory registration problem, most often GPUDirect RDMA: check `lsmod | grep nvidia_peermem` "
          "(or DMA-BUF support); NCCL_NET_GDR_LEVEL=LOC disables GDR to confirm"),
    "5": "a consequence of an earlier failure on the same connection; find the first error",
}
_ERROR_CODES = {
    "ib-completion": "ND109", "connect": "ND110", "verbs": "ND111", "cuda": "ND112",
    "no-interface": "ND113", "nccl-error": "ND115", "version-mismatch": "ND107",
}
MAX_TABLE_ROWS = 40


@dataclass(frozen=True)
class InterNode:
    transport: str  # IB | RoCE | Socket | OFI | <plugin> | none | unknown
    gdr: bool | None
    evidence: str


# --- transports ---------------------------------------------------------------------------------


def net_family(name: str, result: ParseResult) -> str:
    """NCCL's network name (``NET/<name>/``, ``Using network <name>``) as a fabric family."""
    low = name.lower()
    if low.startswith("ib"):  # internal IB transport and the IBext plugins: IB or RoCE by link layer
        layers = set(result.link_layers)
        return "RoCE" if layers and layers <= {"RoCE"} else "IB"
    if "socket" in low:
        return "Socket"
    if "libfabric" in low or "ofi" in low:
        return "OFI"
    return name


def split_net(comm: Comm) -> tuple[Counter, Counter, Counter]:
    """(inter-node connections by net name, inter-node RDMA connections by GDR yes/no, intra-node NET
    loopback by name). Socket connections never count for GDR: it does not apply to them."""
    inter, gdr, loop = Counter(), Counter(), Counter()
    for (host, peer, name, has_gdr), n in comm.net.items():
        peer_host = comm.rank_host.get(peer) if peer is not None else None
        if comm.nnodes == 1 or (peer_host is not None and peer_host == host):
            loop[name] += n
        else:
            inter[name] += n
            if not _is_socket(name):
                gdr[has_gdr] += n
    return inter, gdr, loop


def _is_socket(name: str) -> bool:
    return "socket" in name.lower()


def _gdr_from(gdr: Counter) -> bool | None:
    if not gdr:
        return None
    return gdr.get(False, 0) == 0


def _network_evidence(r: ParseResult) -> bool:
    return bool(r.networks or r.ib_devices or r.ofi_providers or r.verbs_seen or r.ib_no_device
                or r.socket_ifaces)


def single_node(r: ParseResult, inter_conns: int) -> bool:
    """True when the log proves (or makes very plain) that every communicator stays on one node."""
    if inter_conns:
        return False
    nodes = [c.nnodes for c in r.comms.values() if c.nnodes is not None]
    if any(n > 1 for n in nodes):
        return False
    if nodes:
        return True
    if len(r.hosts) != 1:
        return False
    host = next(iter(r.hosts))
    sizes = [c.nranks for c in r.comms.values() if c.nranks]
    if sizes and max(sizes) <= r.host_max_dev.get(host, -1) + 1:
        return True  # every communicator fits on the GPUs this one host shows
    return any(c.nvls for c in r.comms.values()) and not _network_evidence(r)


def inter_node(r: ParseResult) -> InterNode:
    fam, gdr = Counter(), Counter()
    for comm in r.comms.values():
        inter, g, _ = split_net(comm)
        for name, n in inter.items():
            fam[net_family(name, r)] += n
        gdr.update(g)
    if fam:
        transport = fam.most_common(1)[0][0]
        return InterNode(transport, None if transport == "Socket" else _gdr_from(gdr), "channel lines")
    if single_node(r, 0):
        return InterNode("none", None, "all communicators on one node")
    if r.networks:
        transport = net_family(r.networks.most_common(1)[0][0], r)
        evidence = "Using network line"
    elif r.ofi_providers or "aws-ofi-nccl" in r.net_plugins:
        transport, evidence = "OFI", "NET/OFI lines"
    elif r.ib_devices:
        transport, evidence = net_family("IB", r), "NET/IB device list"
    elif r.verbs_seen:
        transport, evidence = net_family("IB", r), "IB verbs errors"
    elif r.ib_no_device and r.socket_ifaces:
        transport, evidence = "Socket", "NET/IB : No device found"
    else:
        return InterNode("unknown", None, "no transport lines")
    return InterNode(transport, None if transport == "Socket" else _static_gdr(r), evidence)


def _static_gdr(r: ParseResult) -> bool | None:
    """GPUDirect RDMA from lines other than ``via`` (when no channel line is visible)."""
    ring = set().union(*(c.ring_gdr for c in r.comms.values())) if r.comms else set()
    if ring:
        return 0 not in ring
    if r.gdr_hca.get("Disabled") and not r.gdr_hca.get("Enabled"):
        return False
    if r.gdr_gpu:
        return r.gdr_gpu.get("Disabled", 0) == 0
    return None


def intra_transports(r: ParseResult) -> list[str]:
    seen: Counter = Counter()
    for comm in r.comms.values():
        seen.update(comm.intra)
        if comm.nvls:
            seen["NVLS"] += 1
        for name, n in split_net(comm)[2].items():
            seen[f"NET/{name} (same node)"] += n
    return sorted(seen)


# --- helpers ------------------------------------------------------------------------------------


def ranges(numbers) -> str:
    """[0,1,2,5,7,8] -> "0-2,5,7-8"."""
    out, run = [], []
    for n in sorted(set(numbers)):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _ranks_text(ranks) -> str:
    """``rank 3`` or ``ranks 0-2,5``."""
    text = ranges(ranks)
    return f"rank {text}" if text.isdigit() else f"ranks {text}"


def _first_host(g: Group) -> str | None:
    return sorted(g.hosts)[0] if g.hosts else None


def _on(hosts) -> str:
    """`` on n[1-3,7]`` for the hosts lines came from (``?``, an unknown host, is left out); ``""`` for none."""
    text = hosts_text(h for h in hosts if h != "?")
    return f" on {text}" if text else ""


def _evidence(groups: list[Group], limit: int = 3) -> tuple[str, ...]:
    out: list[str] = []
    for g in groups:
        for ev in g.examples:
            if len(out) < limit:
                out.append(str(ev))
    return tuple(out)


def _all_ranks(r: ParseResult) -> set[int]:
    ranks = set(r.named_ranks)
    for c in r.comms.values():
        ranks.update(c.rank_host)
    return ranks


def _setting(r: ParseResult, name: str) -> str | None:
    c = r.settings.get(name)
    return c.most_common(1)[0][0] if c else None


def _by_value(per_host: dict[str, list[str]]) -> list[dict]:
    """Hosts grouped by identical values: 4,096 identical NIC lists make one entry."""
    groups: dict[tuple, list[str]] = {}
    for host, values in per_host.items():
        groups.setdefault(tuple(values), []).append(host)
    return [{"value": list(v), "host_count": len(h), "hosts": sorted(h)[:20]}
            for v, h in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


# --- where a finding is, and the lines that show it ------------------------------------------------


def _comm_name(comm: Comm | None) -> str | None:
    return comm.key if comm is not None and comm.key != "unidentified" else None


def _where(ev: Evidence | None, comm: Comm | None = None, host: str | None = None) -> Where:
    """The host/rank/comm and file:line of the line a finding quotes first."""
    if ev is None:
        return Where(host=host, comm=_comm_name(comm))
    return Where(host=ev.host or host, rank=ev.rank, comm=_comm_name(comm), file=ev.file, line=ev.line)


def _inter_peer(comm: Comm, host: str | None, peer: int | None) -> bool:
    """The rule of ``split_net`` for one connection: False when both ends are on one node."""
    peer_host = comm.rank_host.get(peer) if peer is not None else None
    return not (comm.nnodes == 1 or (peer_host is not None and peer_host == host))


def _by_position(found: list[tuple[Comm, Evidence]]) -> list[tuple[Comm, Evidence]]:
    return sorted(found, key=lambda ce: (ce[1].file or "", ce[1].line or 0))


def _net_lines(r: ParseResult, *, inter: bool, family: str | None = None, gdr: bool | None = None,
               name: str | None = None) -> list[tuple[Comm, Evidence]]:
    """Kept ``via NET/...`` channel lines (first in the logs first) matching the filters."""
    found = []
    for comm in r.comms.values():
        for key, evs in comm.tr_first.items():
            if key[0] != "net" or (name is not None and key[1] != name) or (gdr is not None and key[2] != gdr):
                continue
            if family is not None and net_family(key[1], r) != family:
                continue
            found += [(comm, ev) for peer, ev in evs if _inter_peer(comm, ev.host, peer) == inter]
    return _by_position(found)


def _intra_lines(r: ParseResult, tokens) -> list[tuple[Comm, Evidence]]:
    """Kept intra-node channel lines (first in the logs first) of the given transport tokens."""
    found = []
    for comm in r.comms.values():
        for token in tokens:
            found += [(comm, ev) for _, ev in comm.tr_first.get(("intra", token), ())]
    if "NVLS" in tokens and "nvls" in r.facts:
        found.append((None, r.facts["nvls"]))
    return _by_position(found)


def _facts(r: ParseResult, *keys: str, prefix: str | None = None) -> list[Evidence]:
    """First lines of transport facts (``ParseResult.facts``) by exact key or key prefix."""
    found = [r.facts[k] for k in keys if k in r.facts]
    if prefix is not None:
        found += [ev for k, ev in r.facts.items() if k.startswith(prefix)]
    return found


def _static_transport_lines(r: ParseResult, transport: str) -> list[Evidence]:
    """Lines other than channel lines that show the inter-node transport (``Using network``, NET/...)."""
    found = [ev for k, ev in r.facts.items()
             if k.startswith("network:") and net_family(k.split(":", 1)[1], r) == transport]
    if transport == "OFI":
        found += _facts(r, prefix="ofi:")
    elif transport in ("IB", "RoCE"):
        found += _facts(r, "ib-devices")
        found += [g.first for g in r.errors.values() if g.category in ("verbs", "ib-completion") and g.first][:1]
    elif transport == "Socket":
        found += _facts(r, "socket-ifaces")
    return found


def _quoted(lines: list[Evidence], limit: int = 3) -> tuple[str, ...]:
    out: list[str] = []
    for ev in lines:
        text = str(ev)
        if text not in out and len(out) < limit:
            out.append(text)
    return tuple(out)


def _any_line(r: ParseResult) -> Evidence | None:
    """The first NCCL line kept (version, communicator, fact, error) for findings about what is missing."""
    candidates = list(r.version_first.values()) + [c.first for c in r.comms.values() if c.first] + list(r.facts.values())
    candidates += [g.first for table in (r.errors, r.watchdog, r.warnings) for g in table.values() if g.first]
    return _by_position([(None, ev) for ev in candidates])[0][1] if candidates else None


# --- findings -----------------------------------------------------------------------------------


def _fix_class(category: str, g: Group) -> str:
    """What in a group's own text selects its fix: groups of one category share a finding only if equal."""
    text = g.kind
    if category == "ib-completion":
        return g.detail.get("status", "")
    if category == "verbs":
        if "create_cq" in text or "reg_mr" in text:
            return "memlock"
        if "modify_qp" in text:
            return "gid"
        return "mixed" if "incompatible" in text else ""
    if category == "cuda":
        return "oom" if "memory" in text else ""
    if category == "nccl-error":
        return "ifname" if "family" in text or "Internal check" in text else ""
    return ""


def _error_findings(r: ParseResult) -> list[Finding]:
    by_fix: dict[tuple[str, str], list[Group]] = {}
    for g in r.errors.values():
        by_fix.setdefault((g.category, _fix_class(g.category, g)), []).append(g)
    out = []
    for (category, cls), groups in by_fix.items():
        groups.sort(key=lambda g: (g.first.line or 0) if g.first else 0)
        count = sum(g.count for g in groups)
        hosts = set().union(*(g.hosts for g in groups))
        ranks = set().union(*(g.ranks for g in groups))
        first = groups[0]
        where = Where(host=_first_host(first), rank=min(first.ranks) if first.ranks else None,
                      file=first.first.file if first.first else None, line=first.first.line if first.first else None)
        message, fix = _error_text(category, cls, groups, count, hosts, r)
        if ranks:
            message += f" ({_ranks_text(ranks)})"
        out.append(Finding(code=_ERROR_CODES.get(category, "ND115"), severity=Severity.FAIL, message=message,
                           fix=fix, where=where, evidence=_evidence(groups)))
    return out


_VERBS_FIX = {
    "": "check the RDMA devices with `ibstat` / `ibv_devinfo` (ports ACTIVE) and `ulimit -l` (must be unlimited)",
    "memlock": ("the locked-memory limit is too low: `ulimit -l` must print unlimited (Slurm: PropagateResourceLimits; "
                "containers: --ulimit memlock=-1)"),
    "gid": ("the queue pair could not reach the peer: for RoCE pick a routable GID with NCCL_IB_GID_INDEX "
            "(list them with `show_gids`; 3 is the usual RoCEv2/IPv4 entry), and check `ibstat` on both hosts"),
    "mixed": "mixing IB and RoCE ports: select one link type with NCCL_IB_HCA (compare `ibstat`)",
}


def _error_text(category: str, cls: str, groups: list[Group], count: int, hosts,
                r: ParseResult) -> tuple[str, str]:
    """Message and fix for groups of one category whose texts select the same fix (``cls``)."""
    on = _on(hosts)
    times = plural(count, "time")
    shown = [g.text or g.kind for g in groups]
    if category == "ib-completion":
        statuses = [cls] if cls else []
        named = ", ".join(f"status {s} = {IB_STATUS.get(s, 'see ibv_wc_status')}" for s in statuses)
        vendor = sorted({g.detail["vendor_err"] for g in groups if "vendor_err" in g.detail})
        msg = f"IB work completion errors{on} ({times}; {named or 'status not printed'}"
        msg += f", vendor err {', '.join(vendor)})" if vendor else ")"
        fix = _IB_STATUS_FIX.get(cls, "check the links of both hosts with `ibstat` and `ibdiagnet`, "
                                      "and the peer's log for its first error")
        return msg, fix
    if category == "connect":
        kinds = "; ".join(shown[:2])
        ifaces = {i for v in r.socket_ifaces.values() for i in v} | {i for v in r.bootstrap_ifaces.values() for i in v}
        virtual = sorted({i.split(":", 1)[0] for i in ifaces
                          if i.startswith(("veth", "docker", "br-", "virbr", "cni", "flannel", "cali")) or "fe80:" in i})
        fix = ("make sure the nodes reach each other on the interface NCCL uses (ping the peer address, "
               "check firewalls/security groups) and pin it with NCCL_SOCKET_IFNAME=<routable interface>")
        ifname = _setting(r, "NCCL_SOCKET_IFNAME")
        if ifname:
            fix = _ifname_set_fix(ifname, ifaces)
        if virtual:
            fix = (f"NCCL also uses {', '.join(virtual)} (virtual/link-local, unreachable from other nodes): "
                   f"set NCCL_SOCKET_IFNAME to the routable interface (or NCCL_SOCKET_IFNAME=^docker,lo,veth)")
        return f"connection between ranks failed{on} ({times}): {kinds}", fix
    if category == "verbs":
        return f"RDMA verbs call failed{on} ({times}): {shown[0]}", _VERBS_FIX[cls]
    if category == "cuda":
        fix = ("the GPU ran out of memory while NCCL set up its buffers: free memory before creating communicators, "
               "or lower NCCL_BUFFSIZE / the number of channels (NCCL_MAX_NCHANNELS)") if cls == "oom" else \
            "check the GPU with `nvidia-smi` and the driver/CUDA versions (`nvidia-smi -q`, CUDA compat)"
        return f"CUDA failure inside NCCL{on} ({times}): {shown[0]}", fix
    if category == "no-interface":
        ifname = _setting(r, "NCCL_SOCKET_IFNAME")
        fix = ("NCCL_SOCKET_IFNAME=%s matches no interface with an IP address: list them with `ip -br addr` and fix it"
               % ifname) if ifname else "set NCCL_SOCKET_IFNAME to an interface that has an IP address (`ip -br addr`)"
        return f"no usable network interface{on}: {shown[0]}", fix
    if category == "version-mismatch":
        return f"NCCL reported mismatched versions between ranks{on}", \
            "install the same NCCL on every node (one container image / one nvidia-nccl wheel)"
    # nccl-error
    kinds = "; ".join(dict.fromkeys(shown[:3]))
    codes = [RETCODES[c] for c, _ in r.retcodes.most_common() if c in RETCODES]
    extra = f" (return codes: {', '.join(codes[:3])})" if codes else ""
    fix = "find the first WARN line of the first failing rank; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV"
    if cls == "ifname":
        ifname = _setting(r, "NCCL_SOCKET_IFNAME")
        if ifname:
            fix = (f"NCCL_SOCKET_IFNAME={ifname} probably names no interface with an address on this node "
                   "(check `ip -br addr`); fix or unset it")
    return f"NCCL failed{on} ({times}): {kinds}{extra}", fix


def _ifname_set_fix(ifname: str, ifaces: set[str]) -> str:
    """Connect fix when NCCL_SOCKET_IFNAME is already set: what it matched (a prefix matches eth0 and eth1,
    nccl-facts B.1/B.2), and the exact-match form that names one interface."""
    names = sorted({i.split(":", 1)[0] for i in ifaces})
    matched = f" (it selected {', '.join(names)} here)" if names else ""
    exact = names[0] if len(names) == 1 and ifname != f"={names[0]}" and ifname != names[0] else "<routable interface>"
    return (f"NCCL_SOCKET_IFNAME={ifname} is set{matched}: ping the peer address from each node, check "
            f"firewalls/security groups, and name only the interface that routes between nodes, exactly: "
            f"NCCL_SOCKET_IFNAME=={exact}")


def _trace_finding(r: ParseResult) -> Finding | None:
    codes = [(c, n) for c, n in r.retcodes.most_common() if c != 7]
    if not codes:
        return None
    names = ", ".join(f"{RETCODES.get(c, f'code {c}')} x{n}" for c, n in codes[:3])
    ev = r.facts.get("retcode")
    hosts = r.fact_hosts.get("retcode", ())
    return Finding(code="ND115", severity=Severity.FAIL,
                   message=f"NCCL calls returned errors{_on(hosts)}: {names}",
                   fix="find the first NCCL WARN of the first failing rank (rerun with NCCL_DEBUG=INFO if none is shown)",
                   where=_where(ev), evidence=_quoted([ev] if ev else []))


def _watchdog_findings(r: ParseResult) -> list[Finding]:
    out = []
    for (op, seq), g in r.watchdog.items():
        timeout = g.detail.get("timeout_ms")
        tmo = f", timeout {int(timeout) / 1000:g} s" if timeout else ""
        ranks = f" on {_ranks_text(g.ranks)}" if g.ranks else ""
        out.append(Finding(
            code="ND114", severity=Severity.FAIL,
            message=f"watchdog timeout: collective {op} (SeqNum {seq}{tmo}) never completed{ranks}",
            fix=("a rank stopped entering or finishing this collective: look for the rank that is missing here or "
                 "failed first; set TORCH_NCCL_DUMP_ON_TIMEOUT=1 and NCCL_DEBUG=INFO. A hang at a low SeqNum "
                 "points at connectivity: run `nccl-doctor preflight`"),
            where=Where(rank=min(g.ranks) if g.ranks else None, file=g.first.file if g.first else None,
                        line=g.first.line if g.first else None),
            evidence=_evidence([g])))
    return out


def _behind_finding(r: ParseResult) -> Finding | None:
    """ND118: when the watchdog fired at different SeqNums of one process group, the ranks at the oldest
    are behind: the others finished that collective, went on to the next, and wait there for them. So
    the ranks behind are where to look first. SeqNums of different process groups do not compare."""
    timed = [(int(seq), op, g) for (op, seq), g in r.watchdog.items() if seq.isdigit() and g.ranks]
    pgs = {g.detail.get("pg", "") for _, _, g in timed}
    if len(pgs) != 1 or "mixed" in pgs or len({seq for seq, _, _ in timed}) < 2:
        return None
    low = min(seq for seq, _, _ in timed)
    ahead = set().union(*(g.ranks for seq, _, g in timed if seq != low))
    behind = set().union(*(g.ranks for seq, _, g in timed if seq == low)) - ahead
    if not behind:
        return None
    untagged = pgs == {""}  # torch < 2.3 names no process group: sub-groups' SeqNums may be mixed in
    first = next(g for seq, _, g in sorted(timed, key=lambda t: t[0]) if seq == low)
    later = sorted({(seq, op) for seq, op, _ in timed if seq != low})
    said = ", ".join(f"SeqNum {seq} ({op})" for seq, op in later)
    who = _ranks_text(behind)
    return Finding(
        code="ND118", severity=Severity.WARN if untagged else Severity.FAIL,
        message=f"{who} {'is' if len(behind) == 1 else 'are'} behind: {'its' if len(behind) == 1 else 'their'} "
                f"watchdog fired at SeqNum {low} ({first.kind.split()[0]}) while {_ranks_text(ahead)} had reached "
                f"{said} and waited there"
                + (" (assuming one process group: these lines name none, torch < 2.3)" if untagged else ""),
        fix=(f"look at {who} first: what it was doing (`py-spy dump --pid PID`, or the flight recorder with "
             "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1), its GPU (`nvidia-smi`, Xid errors in "
             "`dmesg`), and whether it skipped or added a collective (code that runs on some ranks only)"),
        where=Where(rank=min(behind), file=first.first.file if first.first else None,
                    line=first.first.line if first.first else None),
        evidence=_evidence([first]))


def _rdma_hardware(r: ParseResult) -> list[str]:
    """Signs that the nodes have IB/RoCE/EFA although the job used sockets."""
    signs = []
    if _setting(r, "NCCL_IB_HCA"):
        signs.append(f"NCCL_IB_HCA is set ({_setting(r, 'NCCL_IB_HCA')})")
    ifaces = {i.split(":", 1)[0] for d in (r.socket_ifaces, r.bootstrap_ifaces) for v in d.values() for i in v}
    ifaces |= set(r.oob_ifaces.values())
    ipoib = sorted(i for i in ifaces if i.startswith("ib"))
    if ipoib:
        signs.append(f"IPoIB interface {', '.join(ipoib)}")
    if r.ib_sideband:
        signs.append("NET/IB found a sideband interface")
    if r.ib_devices:
        signs.append(f"NET/IB devices on {plural(len(r.ib_devices), 'host')}")
    if any("efa" in p for p in r.ofi_providers):
        signs.append("libfabric EFA provider")
    if r.verbs_seen:
        signs.append("IB verbs in use")
    rdma = sorted({net_family(name, r) for _, _, name, _, _ in _inter_connections(r) if not _is_socket(name)})
    if rdma:
        signs.append(f"other connections use {', '.join(rdma)}")
    return signs


def _transport_findings(r: ParseResult, inter: InterNode) -> list[Finding]:
    out = []
    t = inter.transport
    hosts = sorted(r.hosts)
    host = hosts[0] if len(hosts) == 1 else None
    shown = _net_lines(r, inter=True, family=t)  # channel lines that show the transport, first first
    comm = shown[0][0] if shown else None
    lines = [ev for _, ev in shown[:1]] + _static_transport_lines(r, t)
    if t == "Socket":
        out.append(_socket_finding(r, lines, comm, host))
    elif t == "OFI" and r.ofi_providers and not any("efa" in p for p in r.ofi_providers):
        prov = ", ".join(r.ofi_providers)
        said = _facts(r, *(f"ofi:{p}" for p in r.ofi_providers))
        on = _on(set().union(*(r.fact_hosts.get(f"ofi:{p}", set()) for p in r.ofi_providers)))
        out.append(Finding(
            code="ND116", severity=Severity.FAIL,
            message=f"aws-ofi-nccl selected libfabric provider '{prov}', not 'efa'{on}: inter-node traffic runs over TCP",
            fix="check the EFA device with `fi_info -p efa` (EFA driver, security group allowing all traffic "
                "to itself); set FI_PROVIDER=efa so a missing EFA fails loudly",
            where=_where(said[0] if said else None, host=host), evidence=_quoted(said + lines)))
    elif t == "unknown":
        ev = _any_line(r)
        out.append(Finding(
            code="ND106", severity=Severity.WARN,
            message="the log does not show the inter-node transport (no `via NET/...` or `Using network` line)",
            fix="rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV and let at least one collective run "
                "(NCCL 2.22+ connects lazily, at the first collective)",
            where=_where(ev, host=host) if ev else _input_where(r, host), evidence=_quoted([ev] if ev else [])))
    elif t != "none":
        label = {"OFI": "EFA/libfabric (aws-ofi-nccl)"}.get(t, t)
        if inter.gdr is False:
            out.append(_gdr_finding(r, t, label, lines, host))
        else:
            gdr = {True: "with GPUDirect RDMA", None: "(GPUDirect RDMA not visible in the log)"}[inter.gdr]
            out.append(Finding(code="ND101", severity=Severity.PASS,
                               message=f"inter-node traffic uses {label} {gdr}",
                               where=_where(lines[0] if lines else None, comm, host), evidence=_quoted(lines, 2)))
        beside = _socket_beside_rdma(r, label)
        if beside:
            out.append(beside)
    return out


def _inter_connections(r: ParseResult):
    """(comm, host, net name, GDR, connections) of every inter-node ``via NET/...`` key, by ``split_net``'s rule."""
    for comm in r.comms.values():
        for (host, peer, name, has_gdr), n in comm.net.items():
            if _inter_peer(comm, host, peer):
                yield comm, host, name, has_gdr, n


def _socket_finding(r: ParseResult, lines: list[Evidence], comm: Comm | None, host: str | None) -> Finding:
    """ND102 when the nodes evidently have RDMA, else ND103 with what the log says about why."""
    signs = _rdma_hardware(r)
    no_dev = sorted(h for h in r.ib_no_device if h != "?")
    no_dev_lines = list(r.ib_no_device.values())[:2]
    ib_disable = _setting(r, "NCCL_IB_DISABLE")
    ib_disabled = bool(ib_disable) and ib_disable not in ("0", "")  # NCCL echoes the strtoll value
    if signs:
        hca = _setting(r, "NCCL_IB_HCA")
        if ib_disabled:
            fix = (f"export NCCL_IB_DISABLE=0 (it is {ib_disable}: it turns NCCL's IB transport off; NCCL echoes "
                   "values from nccl.conf as 'set by environment' too, and the environment wins over the file)")
        elif hca and r.ib_no_device:
            fix = (f"NCCL_IB_HCA={hca} matches no ACTIVE port: compare with `ibstat` (or `ibv_devinfo`) on "
                   f"{no_dev[0] if no_dev else 'each node'} and list only ACTIVE ports (e.g. NCCL_IB_HCA==mlx5_0:1)")
        else:
            fix = ("NCCL found no usable RDMA device: run `ibstat` / `ibv_devinfo` (ports must be ACTIVE), make sure "
                   "the container sees /dev/infiniband and has libibverbs plus the provider (rdma-core, libmlx5)")
        first = r.ib_no_device.get(no_dev[0]) if no_dev else (lines[0] if lines else None)
        return Finding(
            code="ND102", severity=Severity.FAIL,
            message=f"inter-node traffic uses TCP sockets (NET/Socket) although the nodes have RDMA: {'; '.join(signs)}",
            fix=fix, where=_where(first, comm, no_dev[0] if no_dev else host),
            evidence=_quoted(no_dev_lines + lines))
    ofi = [g.first for g in r.warnings.values() if "NET/OFI" in g.text and g.first][:1]
    if ib_disabled:
        why = (f"NCCL_IB_DISABLE={ib_disable} turned NCCL's IB/RoCE transport off, so the log cannot show "
               "whether the nodes have RDMA")
        fix = ("if the nodes have InfiniBand or RoCE (`ibstat` lists ACTIVE ports), export NCCL_IB_DISABLE=0 (it "
               "overrides nccl.conf too); on plain "
               "Ethernet prefer HSDP and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD")
    elif "aws-ofi-nccl" in r.net_plugins and not r.ofi_providers:
        why = "the aws-ofi-nccl (EFA) plugin is installed but did not initialise, and NCCL fell back to sockets"
        fix = ("on EFA instances run `fi_info -p efa` (EFA driver and libfabric installed, /dev/infiniband/uverbs* "
               "visible in the container, a security group that allows all traffic to itself) and read the NET/OFI "
               "warning; on instances without EFA sockets are expected: prefer HSDP across nodes")
        lines = ofi + _facts(r, "ofi-plugin") + lines
    else:
        why = "no RDMA device in evidence"
        fix = ("use nodes with InfiniBand, RoCE or EFA for multi-node training; on plain Ethernet prefer HSDP "
               "(shard within a node, replicate across nodes) and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD")
    return Finding(
        code="ND103", severity=Severity.WARN,
        message=f"inter-node traffic uses TCP sockets (NET/Socket): {why}; multi-node training will be network-bound",
        fix=fix, where=_where(lines[0] if lines else None, comm, host), evidence=_quoted(lines + no_dev_lines))


def _socket_beside_rdma(r: ParseResult, label: str) -> Finding | None:
    """ND102 for communicators or hosts whose inter-node connections use NET/Socket while the rest of the job
    uses RDMA: the job-wide transport is the most used one and would hide them."""
    comms, hosts = {}, set()
    for comm, host, name, _, _ in _inter_connections(r):
        if _is_socket(name):
            comms[comm.key] = comm
            hosts.add(host)
    if not comms:
        return None
    shown = _net_lines(r, inter=True, family="Socket")
    first_comm, first = shown[0] if shown else (None, None)
    names = [k for k in comms if k != "unidentified"]
    which = f"communicator{'s' if len(names) > 1 else ''} {', '.join(names[:5])}" if names else "some connections"
    no_dev = sorted(h for h in hosts if h in r.ib_no_device)
    if no_dev:
        fix = (f"NCCL found no IB device on {hosts_text(no_dev)} (NET/IB : No device found.): run `ibstat` there "
               "(ports ACTIVE) and check that the container sees /dev/infiniband")
    else:
        fix = ("these communicators chose another network than the rest: give every process the same NCCL_NET, "
               "NCCL_IB_DISABLE and NCCL_IB_HCA (and no netName in the ncclConfig_t of ncclCommInitRankConfig/"
               "ncclCommSplit), then compare `Using network` lines per host")
    return Finding(
        code="ND102", severity=Severity.FAIL,
        message=f"inter-node traffic of {which}{_on(hosts)} uses TCP sockets (NET/Socket) while the rest of the job "
                f"uses {label}",
        fix=fix, where=_where(first, first_comm), evidence=_quoted([ev for _, ev in shown[:2]]
                                                                  + [r.ib_no_device[h] for h in no_dev[:1]]))


def _gdr_finding(r: ParseResult, t: str, label: str, lines: list[Evidence], host: str | None) -> Finding:
    """ND104, naming the hosts without GDR when others of the job use it (the fix is on those hosts only)."""
    disabled = sorted(r.gdr_hca.get("Disabled", ()))
    extra = f" (GPU Direct RDMA Disabled for HCA {', '.join(disabled[:4])})" if disabled else ""
    with_gdr, without = set(), set()
    for _, h, name, has_gdr, _ in _inter_connections(r):
        if h is not None and net_family(name, r) == t:
            (with_gdr if has_gdr else without).add(h)
    only = without - with_gdr
    where_text = f" on {hosts_text(only)} ({hosts_text(with_gdr)} use{'s' if len(with_gdr) == 1 else ''} it)" \
        if only and with_gdr else ""
    no_gdr = _net_lines(r, inter=True, family=t, gdr=False)
    comm = no_gdr[0][0] if no_gdr else None
    why = [ev for _, ev in no_gdr[:2]] + _facts(r, "ring-gdr:0", "gdr-hca:Disabled", "gdr-gpu:Disabled")
    return Finding(code="ND104", severity=Severity.WARN,
                   message=f"inter-node traffic uses {label} without GPUDirect RDMA{where_text}{extra}: "
                           "data is staged through host memory", fix=_gdr_fix(r, t),
                   where=_where(why[0] if why else None, comm, host), evidence=_quoted(why + lines))


def _gdr_fix(r: ParseResult, t: str) -> str:
    """How to get GDR, for the NCCL version in the log: NCCL_NET_GDR_LEVEL takes path names only from 2.6
    (2.4/2.5 read an integer, so ``PHB`` would read as 0 and turn GDR off)."""
    if t == "OFI":
        return ("enable GPUDirect RDMA for EFA: FI_EFA_USE_DEVICE_RDMA=1 (p4d/p5), a recent aws-ofi-nccl, "
                "and check `lsmod | grep nvidia_peermem` or DMA-BUF support")
    versions = [_version_key(v)[:2] for v in r.versions]
    oldest = min(versions) if versions else None
    if oldest is not None and oldest < (2, 6):
        return ("load the peer-memory module (`lsmod | grep -e nv_peer_mem -e nvidia_peermem`); check GPU-NIC distance "
                "with `nvidia-smi topo -m` (NCCL 2.4/2.5 read NCCL_NET_GDR_LEVEL as an integer: "
                "NCCL_NET_GDR_LEVEL=3 allows GDR through the CPU host bridge); NCCL >= 2.13 can also use DMA-BUF")
    return ("load the peer-memory module (`lsmod | grep nvidia_peermem`; `modprobe nvidia_peermem`) or use "
            "DMA-BUF (kernel >= 5.12, NCCL >= 2.13); "
            "check GPU-NIC distance with `nvidia-smi topo -m` "
            "(NCCL_NET_GDR_LEVEL=PHB allows GDR through the CPU host bridge)")


def _input_where(r: ParseResult, host: str | None) -> Where:
    """Where a finding about the whole input is: the host, else the file read."""
    return Where(host=host, file=r.sources[0]["name"] if len(r.sources) == 1 else None)


def _intra_findings(r: ParseResult, inter: InterNode, intra: list[str]) -> list[Finding]:
    out = []
    host = sorted(r.hosts)[0] if len(r.hosts) == 1 else None
    degraded = [t for t in intra if t.startswith(("SHM", "direct shared memory")) or "(same node)" in t]
    if degraded:
        shown = _intra_lines(r, degraded)
        for name in (t[4:-len(" (same node)")] for t in degraded if t.endswith(" (same node)")):
            shown += _net_lines(r, inter=False, name=name)
        shown = _by_position(shown)
        first_comm, first = shown[0] if shown else (None, None)
        out.append(Finding(
            code="ND105", severity=Severity.WARN,
            message=f"GPUs of one node communicate via {', '.join(degraded)} instead of P2P/NVLink",
            fix="P2P is off between these GPUs: check NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, `nvidia-smi topo -m`, "
                "ACS/IOMMU settings; containers need --ipc=host (and NCCL_SHM_DISABLE unset)",
            where=_where(first, first_comm, host), evidence=_quoted([ev for _, ev in shown])))
    elif inter.transport == "none" and not intra:
        ev = _any_line(r)
        out.append(Finding(
            code="ND106", severity=Severity.WARN,
            message="single-node job, but no channel line shows the intra-node transport",
            fix="rerun with NCCL_DEBUG=INFO (Ray: RAY_DEDUP_LOGS=0) and let one collective run",
            where=_where(ev, host=host) if ev else _input_where(r, host), evidence=_quoted([ev] if ev else [])))
    elif inter.transport == "none":
        shown = _intra_lines(r, intra)
        first_comm, first = shown[0] if shown else (None, None)
        out.append(Finding(code="ND101", severity=Severity.PASS,
                           message=f"single-node job; GPUs communicate via {', '.join(intra)}",
                           where=_where(first, first_comm, host), evidence=_quoted([ev for _, ev in shown], 2)))
    return out


MAX_VERSION_EVIDENCE = 8  # versions quoted by ND107; a job rarely mixes more than two or three


def _version_key(version: str) -> tuple:
    """"2.21.5-1" sorts after "2.4.7": numerically, part by part."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("-")[0].split("."))


def _version_finding(r: ParseResult) -> Finding | None:
    base = {v.split("-")[0] for v in r.versions}
    if len(base) < 2:
        return None
    versions = sorted(r.versions, key=_version_key)
    parts = []
    for v in versions:
        who = r.versions[v]
        on = _on(w.rsplit(":", 1)[0] for w in who)
        parts.append(f"{v} ({plural(len(who), 'process', 'processes')}{on})" if who else v)
    firsts = [r.version_first[v] for v in versions if v in r.version_first]
    evidence = [str(ev) for ev in firsts[:MAX_VERSION_EVIDENCE]]  # the message names them all
    return Finding(code="ND107", severity=Severity.WARN,
                   message=f"different NCCL versions in one job: {', '.join(parts)}",
                   fix="install one NCCL version on every node (same container image / nvidia-nccl wheel); "
                       "check with `python -c 'import torch; print(torch.cuda.nccl.version())'`",
                   where=_version_where(r, firsts), evidence=tuple(evidence))


def _version_where(r: ParseResult, firsts: list[Evidence]) -> Where:
    """The hosts that printed a version; without any host, the file(s) where each version first appears."""
    hosts = hosts_text(w.rsplit(":", 1)[0] for who in r.versions.values() for w in who)
    hosts = hosts or hosts_text(ev.host for ev in firsts if ev.host)
    files = list(dict.fromkeys(ev.file for ev in firsts if ev.file))
    if hosts or len(files) > 1:
        shown = ", ".join(files[:MAX_VERSION_EVIDENCE]) + (" ..." if len(files) > MAX_VERSION_EVIDENCE else "")
        return Where(host=hosts or None, file=None if hosts else shown)
    first = _by_position([(None, ev) for ev in firsts])[0][1] if firsts else None
    return _where(first)


def _warning_findings(r: ParseResult) -> list[Finding]:
    out = []
    for kind, g in sorted(r.warnings.items(), key=lambda kv: -kv[1].count)[:20]:
        fix = None
        if "libibverbs" in kind:
            fix = "install rdma-core/libibverbs if the node has RDMA NICs (check `ibv_devices`)"
        elif "CollNet" in kind:
            fix = "CollNet/SHARP is unavailable: unset NCCL_ALGO=COLLNET or install/enable the SHARP plugin"
        elif "connect" in kind.lower():
            fix = "connections to peers are retried: check routing/firewall on the interface NCCL uses"
        out.append(Finding(code="ND108", severity=Severity.WARN,
                           message=f"NCCL warning x{g.count}{_on(g.hosts)}: {g.text or kind}",
                           fix=fix, where=Where(host=_first_host(g), file=g.first.file if g.first else None,
                                                line=g.first.line if g.first else None),
                           evidence=_evidence([g], 2)))
    return out


def _input_findings(r: ParseResult) -> list[Finding]:
    out = []
    for s in r.sources:
        if s.get("error"):
            read = f"diagnosed the {s['lines']} lines read" if s.get("lines") else "nothing read from it"
            out.append(Finding(code="ND117", severity=Severity.WARN,
                               message=f"{s['name']}: {s['error']}; {read}",
                               fix=("make the file readable for this user (`ls -l` it) or run as a user who can read it"
                                    if s["error"].startswith("cannot read") else
                                    "copy the log again (gzip -t FILE checks a .gz)"), where=Where(file=s["name"])))
        elif s.get("cut_lines"):
            out.append(Finding(code="ND117", severity=Severity.WARN,
                               message=f"{s['name']}: {plural(s['cut_lines'], 'over-long line')} cut",
                               where=Where(file=s["name"])))
    return out


# --- data and tables ----------------------------------------------------------------------------


def comm_summary(comm: Comm, r: ParseResult) -> dict:
    inter, gdr, loop = split_net(comm)
    fam = Counter()
    for name, n in inter.items():
        fam[net_family(name, r)] += n
    if fam:
        transport = fam.most_common(1)[0][0]
    elif comm.nnodes == 1 or (comm.intra and len(comm.hosts) <= 1 and not comm.net):
        transport = "none"
    else:
        transport = "unknown"
    intra = sorted(comm.intra) + (["NVLS"] if comm.nvls else []) + [f"NET/{n} (same node)" for n in sorted(loop)]
    g = _gdr_from(gdr)
    if g is None and comm.ring_gdr:
        g = 0 not in comm.ring_gdr
    return {
        "id": comm.key,
        "comm_id": comm.comm_id,
        "nranks": comm.nranks,
        "nnodes": comm.nnodes,
        "local_ranks": comm.local_ranks,
        "hosts_seen": len(comm.hosts),
        "ranks_seen": len(comm.rank_host),
        "processes_seen": comm.members,
        "init_complete": comm.complete,
        "intra_node": intra,
        "inter_node": {"transport": transport, "gdr": None if transport in ("none", "Socket") else g},
        "collnet": sorted({n for n, _ in comm.collnet}),
    }


def comm_table(comms: list[dict]) -> Table:
    groups: dict[tuple, list[dict]] = {}
    for c in comms:
        key = (c["nranks"], c["nnodes"] or c["hosts_seen"], c["local_ranks"], tuple(c["intra_node"]),
               c["inter_node"]["transport"], c["inter_node"]["gdr"])
        groups.setdefault(key if len(comms) > MAX_TABLE_ROWS else (c["id"],) + key, []).append(c)
    rows = []
    for members in sorted(groups.values(), key=lambda m: -(m[0]["nranks"] or m[0]["ranks_seen"])):
        c = members[0]
        name = c["id"] if len(members) == 1 else f"{len(members)} comms ({c['id']}, ...)"
        ranks = str(c["nranks"]) if c["nranks"] else f"{c['ranks_seen']} seen"
        nodes = str(c["nnodes"]) if c["nnodes"] else f"{c['hosts_seen']} seen"
        gdr = {True: "yes", False: "no", None: "-"}[c["inter_node"]["gdr"]]
        rows.append((name, ranks, nodes, str(c["local_ranks"] or "-"), ", ".join(c["intra_node"]) or "-",
                     c["inter_node"]["transport"], gdr))
    return Table(title="Communicators", columns=("communicator", "ranks", "nodes", "local ranks",
                                                 "intra-node", "inter-node", "GDR"), rows=tuple(rows[:200]))


def _group_dict(g: Group) -> dict:
    d = {"category": g.category, "kind": g.kind, "text": g.text or g.kind, "count": g.count,
         "first": {"file": g.first.file, "line": g.first.line, "text": g.first.text} if g.first else None,
         "hosts": sorted(g.hosts)[:50], "host_count": len(g.hosts),
         "ranks": ranges(g.ranks), "detail": dict(g.detail)}
    return d


def diagnose(r: ParseResult) -> Report:
    """Findings, verdict summary, JSON data and the communicator table for one parsed log set."""
    inter = inter_node(r)
    intra = intra_transports(r)
    report = Report(command="parse")
    report.extend(_error_findings(r))
    trace = _trace_finding(r) if not r.errors else None
    if trace:
        report.add(trace)
    report.extend(_watchdog_findings(r))
    behind = _behind_finding(r)
    if behind:
        report.add(behind)
    report.extend(_transport_findings(r, inter))
    report.extend(_intra_findings(r, inter, intra))
    vf = _version_finding(r)
    if vf:
        report.add(vf)
    report.extend(_warning_findings(r))
    report.extend(_input_findings(r))

    comms = [comm_summary(c, r) for c in r.comms.values()]
    comms.sort(key=lambda c: (-(c["nranks"] or 0), c["id"]))
    ranks = _all_ranks(r)
    if comms:
        report.tables.append(comm_table(comms))
    gdr = {True: "+GDRDMA", False: " without GDR", None: ""}[inter.gdr]
    parts = [f"inter-node {inter.transport}{gdr}"]
    if intra:
        parts.append(f"intra-node {', '.join(intra)}")
    parts.append(f"{plural(len(r.hosts), 'host')}, {plural(len(ranks), 'rank')} seen, "
                 f"{plural(len(comms), 'communicator')}")
    if r.versions:
        parts.append("NCCL " + ", ".join(sorted(r.versions)))
    report.summary = "; ".join(parts)
    if r.skipped:
        why = sorted({s.rsplit(": ", 1)[1] for s in r.skipped})
        names = ", ".join(s.rsplit(": ", 1)[0] for s in r.skipped[:5])
        more = f" and {len(r.skipped) - 5} more" if len(r.skipped) > 5 else ""
        report.notes.append(f"skipped {plural(len(r.skipped), 'file')} of the directory walk, evidently not "
                            f"logs ({', '.join(why)}): {names}{more}; name a file explicitly to parse it anyway")
    report.data = {
        "inter_node": {"transport": inter.transport, "gdr": inter.gdr, "evidence": inter.evidence},
        "intra_node": {"transports": intra},
        "nccl_versions": sorted(r.versions),
        "hosts": sorted(r.hosts),
        "processes": len(r.procs),
        "ranks": {"count": len(ranks), "ranges": ranges(ranks)},
        "communicators": comms,
        "network": {
            "selected": dict(r.networks),
            "net_plugins": dict(r.net_plugins),
            "ib_devices": _by_value(r.ib_devices),
            "link_layers": dict(r.link_layers),
            "ib_no_device_hosts": sorted(r.ib_no_device),
            "socket_interfaces": _by_value(r.socket_ifaces),
            "ofi_providers": dict(r.ofi_providers),
            "gdr_hca": {k: sorted(v)[:50] for k, v in r.gdr_hca.items()},
            "nvls_available": r.nvls_available,
        },
        "bootstrap_interfaces": _by_value(r.bootstrap_ifaces),
        "settings": {k: dict(v) for k, v in sorted(r.settings.items())},
        "warnings": [_group_dict(g) for g in sorted(r.warnings.values(), key=lambda g: -g.count)],
        "errors": [_group_dict(g) for g in r.errors.values()],
        "watchdog": [_group_dict(g) | {"op": k[0], "seq": k[1]} for k, g in r.watchdog.items()],
        "error_return_codes": {RETCODES.get(c, str(c)): n for c, n in r.retcodes.items()},
        "inputs": r.sources,
        "skipped_inputs": r.skipped,
        "lines": r.lines,
        "nccl_lines": r.nccl_lines,
    }
    return report
