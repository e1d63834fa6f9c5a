"""From a ``ParseResult`` to a ``Report``: which transports the job used, what went wrong, the fix.

Verdict conventions (``fixtures/nccl-logs/README.md``): fail on any fatal error (NCCL error, IB
completion error, failed connect, CUDA failure, watchdog timeout) or on TCP sockets between nodes
that have IB/EFA; warn on RDMA without GPUDirect RDMA, sockets on plain Ethernet, intra-node SHM or
NIC loopback, non-fatal NCCL WARNs, and logs too thin to show the transport; pass otherwise.

This module holds ``diagnose`` and the findings about transports, versions, warnings and inputs;
``errorfindings.py`` those about errors and timeouts, ``view.py`` the table and JSON data.
"""

from __future__ import annotations

from nccl_doctor.codes import Code
from nccl_doctor.codes.text import DEFAULT_VARIANT
from nccl_doctor.logs.diagnosis import ofi
from nccl_doctor.logs.diagnosis.errorfindings import behind_finding, error_findings, trace_finding, watchdog_findings
from nccl_doctor.logs.diagnosis.hosted import host_finding, hosts_finding
from nccl_doctor.logs.diagnosis.limits import limits_finding
from nccl_doctor.logs.diagnosis.transports import (
    InterNode,
    Transport,
    by_position,
    comm_hosts_by_family,
    fact_lines,
    gdr_reads_off,
    inter_connections,
    inter_node,
    intra_lines,
    intra_transports,
    is_socket,
    net_family,
    net_lines,
    no_ib_hosts,
    static_transport_lines,
    without_errors,
)
from nccl_doctor.logs.diagnosis.where import (
    WhereArgs,
    any_line,
    first_host,
    group_evidence,
    group_where,
    input_where,
    on_hosts,
    quoted,
    setting,
    where_of,
)
from nccl_doctor.logs.parse.model import OFI_PLUGIN, UNKNOWN_HOST, Comm, Evidence, Fact, ParseResult
from nccl_doctor.logs.parse.warnsigns import collnet_setup
from nccl_doctor.logs.view import show
from nccl_doctor.report import Finding, Report, Severity, finding, hosts_text, plural


def _rdma_hardware(r: ParseResult) -> list[str]:
    """Signs that the nodes have IB/RoCE/EFA although the job used sockets."""
    signs = []
    if setting(r, "NCCL_IB_HCA"):
        signs.append(f"NCCL_IB_HCA is set ({setting(r, 'NCCL_IB_HCA')})")
    ifaces = {i.split(":", 1)[0] for d in (r.socket_ifaces, r.bootstrap_ifaces) for v in d.values() for i in v}
    oob_devices = sorted({d.split(":", 1)[0] for d in r.bootstrap_net.values()})
    if oob_devices:
        signs.append(f"the bootstrap runs over network device {', '.join(oob_devices)}")
    ifaces |= set(r.oob_ifaces.values())
    ipoib = sorted(i for i in ifaces if i.startswith("ib"))
    if ipoib:
        signs.append(f"IPoIB interface {', '.join(ipoib)}")
    if r.ib_sideband:
        signs.append("NET/IB found a sideband interface")
    if r.ib_devices:
        signs.append(f"NET/IB devices on {plural(len(r.ib_devices), 'host')}")
    if rdma_providers := sorted(p for p in r.ofi_providers if ofi.is_rdma(p)):
        signs.append(f"libfabric RDMA provider {', '.join(rdma_providers)}")
    if r.verbs_seen:
        signs.append("IB verbs in use")
    rdma = sorted({net_family(name, r) for _, _, name, _, _ in inter_connections(r) if not is_socket(name)})
    if rdma:
        signs.append(f"other connections use {', '.join(rdma)}")
    return signs


def _transport_findings(r: ParseResult, inter: InterNode) -> list[Finding]:
    out = []
    t = inter.transport
    hosts = sorted(r.hosts)
    host = hosts[0] if len(hosts) == 1 else None
    shown = net_lines(r, inter=True, family=t)  # channel lines that show the transport, first first
    comm = shown[0][0] if shown else None
    lines = [ev for _, ev in shown[:1]] + static_transport_lines(r, t)
    if t == Transport.SOCKET:
        out.append(_socket_finding(r, lines, comm, host))
    elif t == Transport.OFI and ofi.over_tcp(r.ofi_providers):
        prov = ", ".join(r.ofi_providers)
        said = fact_lines(r, *(f"{Fact.OFI_}{p}" for p in r.ofi_providers))
        on = set().union(*(r.fact_hosts.get(f"{Fact.OFI_}{p}", set()) for p in r.ofi_providers))
        out.append(hosts_finding(
            Code.OFI_PROVIDER_NOT_EFA, Severity.FAIL, DEFAULT_VARIANT, hosts=on, provider=prov,
            fix="check the EFA device with `fi_info -p efa` (EFA driver, security group allowing all traffic "
                "to itself); set FI_PROVIDER=efa so a missing EFA fails loudly",
            where=where_of(said[0] if said else None, host=host), evidence=quoted(said + lines)))
    elif t == Transport.UNKNOWN:
        ev = any_line(r)
        out.append(finding(
            code=Code.TRANSPORT_NOT_VISIBLE, severity=Severity.WARN,
            message="the log does not show the inter-node transport (no `via NET/...` or `Using network` line)",
            fix="rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV and let at least one collective run "
                "(NCCL 2.22+ connects lazily, at the first collective)",
            **(where_of(ev, host=host) if ev else input_where(r, host)), evidence=quoted([ev] if ev else [])))
    elif t != Transport.NONE:
        label = ofi.label(r.ofi_providers) if t == Transport.OFI else t
        if inter.gdr is not None and gdr_reads_off(r, t):  # GDR on receives, off on sends by NCCL's design
            out.append(_gdr_reads_off_finding(r, label, lines, comm, host))
        elif inter.gdr is False:
            out.append(_gdr_finding(r, t, label, lines, host))
        elif said := without_errors(r, lines):  # only error lines show it: the errors are the verdict
            gdr = {True: "with GPUDirect RDMA", None: "(GPUDirect RDMA not visible in the log)"}[inter.gdr]
            out.append(finding(code=Code.INTER_NODE_TRANSPORT_OK, severity=Severity.PASS,
                               message=f"inter-node traffic uses {label} {gdr}",
                               **where_of(said[0], comm, host), evidence=quoted(said, 2)))
        beside = _socket_beside_rdma(r, label)
        if beside:
            out.append(beside)
    return out


def _socket_finding(r: ParseResult, lines: list[Evidence], comm: Comm | None, host: str | None) -> Finding:
    """ND102 when the nodes evidently have RDMA, else ND103 with what the log says about why."""
    signs = _rdma_hardware(r)
    no_dev = sorted(h for h in r.ib_no_device if h != UNKNOWN_HOST)
    no_dev_lines = list(r.ib_no_device.values())[:2]
    ib_disable = setting(r, "NCCL_IB_DISABLE")
    ib_disabled = bool(ib_disable) and ib_disable not in ("0", "")  # NCCL echoes the strtoll value
    if signs:
        hca = setting(r, "NCCL_IB_HCA")
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
        where = where_of(first, comm, no_dev[0] if no_dev else host)
        if hca and r.ib_no_device and not ib_disabled and no_dev and where.get("host") == no_dev[0]:
            return host_finding(Code.SOCKET_FALLBACK, Severity.FAIL, "hca-no-port", where=where, hca=hca,
                                signs="; ".join(signs), evidence=quoted(no_dev_lines + lines))
        return finding(
            code=Code.SOCKET_FALLBACK, severity=Severity.FAIL,
            message="inter-node traffic uses TCP sockets (NET/Socket) although the nodes have RDMA: "
                    f"{'; '.join(signs)}",
            fix=fix, **where, evidence=quoted(no_dev_lines + lines))
    ofi = [g.first for g in r.warnings.values() if "NET/OFI" in g.text and g.first][:1]
    if ib_disabled:
        why = (f"NCCL_IB_DISABLE={ib_disable} turned NCCL's IB/RoCE transport off, so the log cannot show "
               "whether the nodes have RDMA")
        fix = ("if the nodes have InfiniBand or RoCE (`ibstat` lists ACTIVE ports), export NCCL_IB_DISABLE=0 (it "
               "overrides nccl.conf too); on plain "
               "Ethernet prefer HSDP and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD")
    elif OFI_PLUGIN in r.net_plugins and not r.ofi_providers:
        why = "the aws-ofi-nccl (EFA) plugin is installed but did not initialise, and NCCL fell back to sockets"
        fix = ("on EFA instances run `fi_info -p efa` (EFA driver and libfabric installed, /dev/infiniband/uverbs* "
               "visible in the container, a security group that allows all traffic to itself) and read the NET/OFI "
               "warning; on instances without EFA sockets are expected: prefer HSDP across nodes")
        lines = ofi + fact_lines(r, Fact.OFI_PLUGIN) + lines
    else:
        why = "no RDMA device in evidence"
        fix = ("use nodes with InfiniBand, RoCE or EFA for multi-node training; on plain Ethernet prefer HSDP "
               "(shard within a node, replicate across nodes) and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD")
    return finding(
        code=Code.SOCKET_TRANSPORT, severity=Severity.WARN,
        message=f"inter-node traffic uses TCP sockets (NET/Socket): {why}; multi-node training will be network-bound",
        fix=fix, **where_of(lines[0] if lines else None, comm, host), evidence=quoted(lines + no_dev_lines))


def _socket_beside_rdma(r: ParseResult, label: str) -> Finding | None:
    """ND102 for communicators or hosts whose inter-node connections use NET/Socket while the rest of the job
    uses RDMA: the job-wide transport is the most used one and would hide them. The node whose own lines say
    it has no IB (``no_ib_hosts``) is named first, its ring neighbours as affected; a communicator whose hops
    use RDMA on some nodes and Socket on others is named mixed, with the hosts of each."""
    comms: dict[str, Comm] = {}
    hosts: set[str] = set()
    for comm, host, name, _, _ in inter_connections(r):
        if is_socket(name):
            comms[comm.key] = comm
            if host is not None:  # (an unknown host names no one)
                hosts.add(host)
    if not comms:
        return None
    shown = net_lines(r, inter=True, family=Transport.SOCKET)
    first_comm, first = shown[0] if shown else (None, None)
    names = [k for k in comms if k != "unidentified"]
    which = f"communicator{'s' if len(names) > 1 else ''} {', '.join(names[:5])}" if names else "some connections"
    in_comms = hosts.union(*(c.hosts for c in comms.values()))
    no_dev = sorted(h for h in no_ib_hosts(r) if h in in_comms)
    mixed = [c for c in comms.values()
             if c.key != "unidentified" and comm_hosts_by_family(c, r).keys() - {Transport.SOCKET}]
    parts = "; ".join(f"{fam} on {hosts_text(hs)}" for fam, hs in sorted(comm_hosts_by_family(mixed[0], r).items())) \
        if mixed else ""
    mixed_text = f" (communicator {mixed[0].key} is mixed: {parts})" if mixed else ""
    if no_dev:
        affected = sorted(hosts - set(no_dev))
        one = len(no_dev) == 1
        cause = (f": {hosts_text(no_dev)} {'has' if one else 'have'} no IB device ({'its' if one else 'their'} own "
                 "lines say NET/IB : No device found or Using network Socket)"
                 + (f"; {'its' if one else 'their'} ring {'neighbour' if len(affected) == 1 else 'neighbours'} "
                    f"{hosts_text(affected)} {'is' if len(affected) == 1 else 'are'} affected" if affected else ""))
        said = [h for h in no_dev if h in r.ib_no_device] or no_dev
        fix = (f"NCCL found no IB device on {hosts_text(said)} "
               f"({'NET/IB : No device found.' if said[0] in r.ib_no_device else 'Using network Socket'}): run "
               "`ibstat` there (ports ACTIVE) and check that the container sees /dev/infiniband")
        own = [ev for h in no_dev[:1] for ev in (r.ib_no_device.get(h), _socket_network_line(r, h)) if ev]
        return finding(
            code=Code.SOCKET_FALLBACK, severity=Severity.FAIL,
            message=f"inter-node traffic of {which}{on_hosts(hosts)} uses TCP sockets (NET/Socket) while the rest "
                    f"of the job uses {label}{cause}{mixed_text}",
            fix=fix, **where_of(own[0] if own else first, first_comm, no_dev[0]),
            evidence=quoted(own[:1] + [ev for _, ev in shown[:2]]))
    fix = ("these communicators chose another network than the rest: give every process the same NCCL_NET, "
           "NCCL_IB_DISABLE and NCCL_IB_HCA (and no netName in the ncclConfig_t of ncclCommInitRankConfig/"
           "ncclCommSplit), then compare `Using network` lines per host")
    if mixed_text:
        return _mixed_finding(which, hosts, label, mixed_text=mixed_text, families=comm_hosts_by_family(mixed[0], r),
                              mixed=mixed[0].key, fix=fix, where=where_of(first, first_comm),
                              evidence=quoted([ev for _, ev in shown[:2]]))
    return hosts_finding(Code.SOCKET_FALLBACK, Severity.FAIL, "beside-rdma", hosts=hosts, which=which, label=label,
                         fix=fix, where=where_of(first, first_comm), evidence=quoted([ev for _, ev in shown[:2]]))


def _mixed_finding(which: str, hosts: set[str], label: str, *, mixed_text: str, families: dict[str, set[str]],
                   mixed: str, fix: str, where: WhereArgs, evidence: tuple[str, ...]) -> Finding:
    """ND102 for a communicator whose hops use RDMA and Socket: the hosts of each transport, free text; on a
    node's own log (two transports, both its own) the template that names it, so preflight merges it."""
    free = finding(code=Code.SOCKET_FALLBACK, severity=Severity.FAIL,
                   message=f"inter-node traffic of {which}{on_hosts(hosts)} uses TCP sockets (NET/Socket) "
                           f"while the rest of the job uses {label}{mixed_text}",
                   fix=fix, **where, evidence=evidence)
    own = {where.get("host")}
    if hosts != own or len(families) != 2 or any(hs != own for hs in families.values()):
        return free
    family, other = sorted(families)
    made = host_finding(Code.SOCKET_FALLBACK, Severity.FAIL, "beside-rdma-mixed", where=where, which=which,
                        label=label, mixed=mixed, family=family, other=other, fix=fix, evidence=evidence)
    return made if (made.message, made.fix) == (free.message, free.fix) else free


def _socket_network_line(r: ParseResult, host: str) -> Evidence | None:
    """The host's own ``Using network Socket`` line, when it is the one kept."""
    ev = r.facts.get(f"{Fact.NETWORK_}{Transport.SOCKET}")
    return ev if ev is not None and ev.host == host else None


def _gdr_finding(r: ParseResult, t: str, label: str, lines: list[Evidence], host: str | None) -> Finding:
    """ND104, naming the hosts without GDR when others of the job use it (the fix is on those hosts only)."""
    disabled = sorted(r.gdr_hca.get("Disabled", ()))
    extra = f" (GPU Direct RDMA Disabled for HCA {', '.join(disabled[:4])})" if disabled else ""
    with_gdr: set[str] = set()
    without: set[str] = set()
    for _, h, name, has_gdr, _ in inter_connections(r):
        if h is not None and net_family(name, r) == t:
            (with_gdr if has_gdr else without).add(h)
    only = without - with_gdr
    where_text = f" on {hosts_text(only)} ({hosts_text(with_gdr)} use{'s' if len(with_gdr) == 1 else ''} it)" \
        if only and with_gdr else ""
    no_gdr = net_lines(r, inter=True, family=t, gdr=False)
    comm = no_gdr[0][0] if no_gdr else None
    no_gdr_facts = (f"{Fact.RING_GDR_}0", f"{Fact.GDR_HCA_}Disabled", f"{Fact.GDR_GPU_}Disabled")
    why = [ev for _, ev in no_gdr[:2]] + fact_lines(r, *no_gdr_facts)
    return finding(code=Code.GDR_NOT_USED, severity=Severity.WARN,
                   message=f"inter-node traffic uses {label} without GPUDirect RDMA{where_text}{extra}: "
                           "data is staged through host memory", fix=_gdr_fix(r, t),
                   **where_of(why[0] if why else None, comm, host), evidence=quoted(why + lines))


def _gdr_reads_off_finding(r: ParseResult, label: str, lines: list[Evidence], comm: Comm | None,
                           host: str | None) -> Finding:
    """ND101 PASS: GDR on every receive, off on sends only, as NCCL decides it (``gdr_reads_off``)."""
    read = setting(r, "NCCL_NET_GDR_READ")
    why = (f"NCCL_NET_GDR_READ={read} turns it off for sends" if read == "0" else
           "NCCL turns GDR reads off for sends on pre-Ampere GPUs without NVLink between them (NCCL_NET_GDR_READ "
           "unset; =1 forces them)")
    shown = by_position(net_lines(r, inter=True, gdr=True)[:1] + net_lines(r, inter=True, gdr=False)[:1])
    lines = without_errors(r, lines)
    return finding(code=Code.INTER_NODE_TRANSPORT_OK, severity=Severity.PASS,
                   message=f"inter-node traffic uses {label} with GPUDirect RDMA on receives; sends are staged "
                           f"through host memory by design: {why}",
                   **where_of(lines[0] if lines else None, comm, host),
                   evidence=quoted([ev for _, ev in shown] + lines, 3))


def _gdr_fix(r: ParseResult, t: str) -> str:
    """How to get GDR, for the NCCL version in the log: NCCL_NET_GDR_LEVEL takes path names only from 2.6
    (2.4/2.5 read an integer, so ``PHB`` would read as 0 and turn GDR off)."""
    if t == Transport.OFI:
        return ("enable GPUDirect RDMA for EFA: FI_EFA_USE_DEVICE_RDMA=1 (p4d/p5), a recent aws-ofi-nccl, "
                "and check `lsmod | grep nvidia_peermem` or DMA-BUF support")
    versions = [version_key(v)[:2] for v in r.versions]
    oldest = min(versions) if versions else None
    if oldest is not None and oldest < (2, 6):
        return ("load the peer-memory module (`lsmod | grep -e nv_peer_mem -e nvidia_peermem`); check GPU-NIC distance "
                "with `nvidia-smi topo -m` (NCCL 2.4/2.5 read NCCL_NET_GDR_LEVEL as an integer: "
                "NCCL_NET_GDR_LEVEL=3 allows GDR through the CPU host bridge); NCCL >= 2.13 can also use DMA-BUF")
    return ("load the peer-memory module (`lsmod | grep nvidia_peermem`; `modprobe nvidia_peermem`) or use "
            "DMA-BUF (kernel >= 5.12, NCCL >= 2.13); "
            "check GPU-NIC distance with `nvidia-smi topo -m` "
            "(NCCL_NET_GDR_LEVEL=PHB allows GDR through the CPU host bridge)")


def _intra_findings(r: ParseResult, inter: InterNode, intra: list[str]) -> list[Finding]:
    out = []
    host = sorted(r.hosts)[0] if len(r.hosts) == 1 else None
    degraded = [t for t in intra if t.startswith(("SHM", "direct shared memory")) or "(same node)" in t]
    if degraded:
        shown = intra_lines(r, degraded)
        for name in (t[4:-len(" (same node)")] for t in degraded if t.endswith(" (same node)")):
            shown += net_lines(r, inter=False, name=name)
        shown = by_position(shown)
        first_comm, first = shown[0] if shown else (None, None)
        out.append(finding(
            code=Code.INTRA_NODE_DEGRADED, severity=Severity.WARN,
            message=f"GPUs of one node communicate via {', '.join(degraded)} instead of P2P/NVLink",
            fix="P2P is off between these GPUs: check NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, `nvidia-smi topo -m`, "
                "ACS/IOMMU settings; containers need --ipc=host (and NCCL_SHM_DISABLE unset)",
            **where_of(first, first_comm, host), evidence=quoted([ev for _, ev in shown])))
    elif inter.transport == Transport.NONE and not intra:
        ev = any_line(r)
        alone = bool(r.comms) and all(c.nranks == 1 for c in r.comms.values())
        out.append(finding(
            code=Code.TRANSPORT_NOT_VISIBLE, severity=Severity.WARN,
            message="every communicator has a single rank: no GPU exchanged data with another, so the network "
                    "NCCL selected was never used" if alone else
                    "single-node job, but no channel line shows the intra-node transport",
            fix="rerun with NCCL_DEBUG=INFO (Ray: RAY_DEDUP_LOGS=0) and let one collective run",
            **(where_of(ev, host=host) if ev else input_where(r, host)), evidence=quoted([ev] if ev else [])))
    elif inter.transport == Transport.NONE:
        shown = intra_lines(r, intra)
        first_comm, first = shown[0] if shown else (None, None)
        out.append(finding(code=Code.INTER_NODE_TRANSPORT_OK, severity=Severity.PASS,
                           message=f"single-node job; GPUs communicate via {', '.join(intra)}",
                           **where_of(first, first_comm, host), evidence=quoted([ev for _, ev in shown], 2)))
    return out


MAX_VERSION_EVIDENCE = 8  # versions quoted by ND107; a job rarely mixes more than two or three


def version_key(version: str) -> tuple[int, ...]:
    """"2.21.5-1" sorts after "2.4.7": numerically, part by part."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("-", maxsplit=1)[0].split("."))


def _version_finding(r: ParseResult) -> Finding | None:
    base = {v.split("-")[0] for v in r.versions}
    if len(base) < 2:
        return None
    versions = sorted(r.versions, key=version_key)
    parts = []
    for v in versions:
        who = r.versions[v]
        on = on_hosts(w.rsplit(":", 1)[0] for w in who)
        parts.append(f"{v} ({plural(len(who), 'process', 'processes')}{on})" if who else v)
    firsts = [r.version_first[v] for v in versions if v in r.version_first]
    evidence = [str(ev) for ev in firsts[:MAX_VERSION_EVIDENCE]]  # the message names them all
    return finding(code=Code.NCCL_VERSION_MISMATCH, severity=Severity.WARN,
                   message=f"different NCCL versions in one job: {', '.join(parts)}",
                   fix="install one NCCL version on every node (same container image / nvidia-nccl wheel); "
                       "check with `python -c 'import torch; print(torch.cuda.nccl.version())'`",
                   **_version_where(r, firsts), evidence=tuple(evidence))


def _version_where(r: ParseResult, firsts: list[Evidence]) -> WhereArgs:
    """The hosts that printed a version; without any host, the file(s) where each version first appears."""
    hosts = hosts_text(w.rsplit(":", 1)[0] for who in r.versions.values() for w in who)
    hosts = hosts or hosts_text(ev.host for ev in firsts if ev.host)
    files = list(dict.fromkeys(ev.file for ev in firsts if ev.file))
    if hosts or len(files) > 1:
        shown = ", ".join(files[:MAX_VERSION_EVIDENCE]) + (" ..." if len(files) > MAX_VERSION_EVIDENCE else "")
        return {"host": hosts or None, "file": None if hosts else shown}
    first = by_position([(None, ev) for ev in firsts])[0][1] if firsts else None
    return where_of(first)


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
        # NCCL gives CollNet/SHARP up and goes on over the point-to-point network: nothing degraded
        gave_up = collnet_setup(g.text or kind)
        out.append(hosts_finding(Code.NCCL_WARNING, Severity.PASS if gave_up else Severity.WARN, DEFAULT_VARIANT,
                                 hosts=g.hosts, count=g.count, text=g.text or kind,
                                 went_on="; NCCL went on without CollNet" if gave_up else "",
                                 fix=fix, where=group_where(g, host=first_host(g)), evidence=group_evidence([g], 2)))
    return out


def _input_findings(r: ParseResult) -> list[Finding]:
    out = []
    for s in r.sources:
        if s.get("error"):
            read = f"diagnosed the {s['lines']} lines read" if s.get("lines") else "nothing read from it"
            out.append(finding(code=Code.LOG_INPUT_DAMAGED, severity=Severity.WARN,
                               message=f"{s['name']}: {s['error']}; {read}",
                               fix=("make the file readable for this user (`ls -l` it) or run as a user who can read it"
                                    if s["error"].startswith("cannot read") else
                                    "copy the log again (gzip -t FILE checks a .gz)"), file=s["name"]))
        elif s.get("cut_lines"):
            out.append(finding(code=Code.LOG_INPUT_DAMAGED, severity=Severity.WARN,
                               message=f"{s['name']}: {plural(s['cut_lines'], 'over-long line')} cut",
                               file=s["name"]))
    return out


def diagnose(r: ParseResult) -> Report:
    """Findings, verdict summary, JSON data and the communicator table for one parsed log set."""
    inter = inter_node(r)
    intra = intra_transports(r)
    report = Report(command="parse")
    report.extend(error_findings(r))
    trace = trace_finding(r) if not r.errors else None
    if trace:
        report.add(trace)
    report.extend(watchdog_findings(r))
    behind = behind_finding(r)
    if behind:
        report.add(behind)
    report.extend(_transport_findings(r, inter))
    report.extend(_intra_findings(r, inter, intra))
    vf = _version_finding(r)
    if vf:
        report.add(vf)
    report.extend(_warning_findings(r))
    report.extend(_input_findings(r))
    limits = limits_finding(r)  # the log named more hosts/processes/communicators than parse keeps
    if limits:
        report.add(limits)

    show(report, r, inter, intra)
    return report
