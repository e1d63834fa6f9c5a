"""Findings about what went wrong: fatal NCCL errors by category (each with the fix its own text
selects), error-code traces, watchdog timeouts and the ranks behind the others."""

from __future__ import annotations

from collections.abc import Iterable

from nccl_doctor.codes import Code
from nccl_doctor.logs.diagnosis.where import (
    first_host,
    group_evidence,
    group_where,
    on_hosts,
    quoted,
    ranks_text,
    setting,
    where_of,
)
from nccl_doctor.logs.parse.model import MIXED_PG, Category, Fact, Group, ParseResult
from nccl_doctor.logs.parse.patterns import NCCL_IN_PROGRESS, RETCODES
from nccl_doctor.report import Finding, Severity, finding, plural

VIRTUAL_IFACES = ("veth", "docker", "br-", "virbr", "cni", "flannel", "cali")  # unreachable from other nodes

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


_ERROR_CODES: dict[str, Code] = {
    Category.IB_COMPLETION: Code.IB_COMPLETION_ERROR, Category.CONNECT: Code.CONNECT_FAILED,
    Category.VERBS: Code.RDMA_VERBS_ERROR, Category.CUDA: Code.CUDA_ERROR,
    Category.NO_INTERFACE: Code.NO_SOCKET_INTERFACE,
    Category.NCCL_ERROR: Code.NCCL_ERROR, Category.VERSION_MISMATCH: Code.NCCL_VERSION_MISMATCH,
}


def _fix_class(category: str, g: Group) -> str:
    """What in a group's own text selects its fix: groups of one category share a finding only if equal."""
    text = g.kind
    if category == Category.IB_COMPLETION:
        return g.detail.get("status", "")
    if category == Category.VERBS:
        if "create_cq" in text or "reg_mr" in text:
            return "memlock"
        if "modify_qp" in text:
            return "gid"
        return "mixed" if "incompatible" in text else ""
    if category == Category.CUDA:
        return next((cls for cls, words in _CUDA_CLASSES if any(w in text for w in words)), "")
    if category == Category.NCCL_ERROR:
        return "ifname" if "family" in text or "Internal check" in text else ""
    return ""


def error_findings(r: ParseResult) -> list[Finding]:
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
        message, fix = _error_text(category, cls, groups, count=count, hosts=hosts, r=r)
        if ranks:
            message += f" ({ranks_text(ranks)})"
        out.append(finding(_ERROR_CODES.get(category, Code.NCCL_ERROR), Severity.FAIL, message, fix,
                           evidence=group_evidence(groups),
                           **group_where(first, host=first_host(first),
                                         rank=min(first.ranks) if first.ranks else None)))
    return out


_VERBS_FIX = {
    "": "check the RDMA devices with `ibstat` / `ibv_devinfo` (ports ACTIVE) and `ulimit -l` (must be unlimited)",
    "memlock": ("the locked-memory limit is too low: `ulimit -l` must print unlimited (Slurm: PropagateResourceLimits; "
                "containers: --ulimit memlock=-1)"),
    "gid": ("the queue pair could not reach the peer: for RoCE pick a routable GID with NCCL_IB_GID_INDEX "
            "(list them with `show_gids`; 3 is the usual RoCEv2/IPv4 entry), and check `ibstat` on both hosts"),
    "mixed": "mixing IB and RoCE ports: select one link type with NCCL_IB_HCA (compare `ibstat`)",
}


# What selects a CUDA error's fix, first match wins: "illegal memory access" names memory but is no allocation
_CUDA_CLASSES = (("illegal", ("illegal memory access", "illegal address")),
                 ("oom", ("out of memory", "MemoryAllocation", "Cannot allocate memory")))
_CUDA_FIX = {
    "": "check the GPU with `nvidia-smi` and the driver/CUDA versions (`nvidia-smi -q`, CUDA compat)",
    "illegal": ("a kernel on this rank touched memory it does not own (model code, a custom kernel, or a faulty "
                "GPU): rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel, and check `nvidia-smi -q` and dmesg "
                "for Xid errors on that GPU; drain the node if it repeats on the same GPU"),
    "oom": ("the GPU ran out of memory while NCCL set up its buffers: free memory before creating communicators, "
            "or lower NCCL_BUFFSIZE / the number of channels (NCCL_MAX_NCHANNELS)"),
}
SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"
SHOWN_RETCODES = 3  # return codes an nccl-error finding names
SHOWN_KINDS = 3  # distinct messages an nccl-error finding quotes


def _error_text(category: str, cls: str, groups: list[Group], *, count: int, hosts: Iterable[str],
                r: ParseResult) -> tuple[str, str]:
    """Message and fix for groups of one category whose texts select the same fix (``cls``)."""
    on = on_hosts(hosts)
    times = plural(count, "time")
    shown = [g.text or g.kind for g in groups]
    if category == Category.IB_COMPLETION:
        return _ib_completion_text(cls, groups, on, times)
    if category == Category.CONNECT:
        return f"connection between ranks failed{on} ({times}): {'; '.join(shown[:2])}", _connect_fix(r)
    if category == Category.VERBS:
        return f"RDMA verbs call failed{on} ({times}): {shown[0]}", _VERBS_FIX[cls]
    if category == Category.CUDA:
        return f"CUDA failure inside NCCL{on} ({times}): {shown[0]}", _CUDA_FIX[cls]
    if category == Category.NO_INTERFACE:
        ifname = setting(r, SOCKET_IFNAME)
        fix = (f"NCCL_SOCKET_IFNAME={ifname} matches no interface with an IP address: list them with `ip -br addr` "
               "and fix it") if ifname else \
            "set NCCL_SOCKET_IFNAME to an interface that has an IP address (`ip -br addr`)"
        return f"no usable network interface{on}: {shown[0]}", fix
    if category == Category.VERSION_MISMATCH:
        return f"NCCL reported mismatched versions between ranks{on}", \
            "install the same NCCL on every node (one container image / one nvidia-nccl wheel)"
    return _nccl_error_text(cls, shown, on, times, r)


def _ib_completion_text(status: str, groups: list[Group], on: str, times: str) -> tuple[str, str]:
    """IB work completion errors of one status (``""``: not printed), with the vendor errors seen."""
    named = f"status {status} = {IB_STATUS.get(status, 'see ibv_wc_status')}" if status else ""
    vendor = sorted({g.detail["vendor_err"] for g in groups if "vendor_err" in g.detail})
    msg = f"IB work completion errors{on} ({times}; {named or 'status not printed'}"
    msg += f", vendor err {', '.join(vendor)})" if vendor else ")"
    fix = _IB_STATUS_FIX.get(status, "check the links of both hosts with `ibstat` and `ibdiagnet`, "
                                     "and the peer's log for its first error")
    return msg, fix


def _connect_fix(r: ParseResult) -> str:
    """A failed connect: a virtual interface in use, else what NCCL_SOCKET_IFNAME matched, else pin one."""
    ifaces = {i for v in r.socket_ifaces.values() for i in v} | {i for v in r.bootstrap_ifaces.values() for i in v}
    virtual = sorted({i.split(":", 1)[0] for i in ifaces if i.startswith(VIRTUAL_IFACES) or "fe80:" in i})
    if virtual:
        return (f"NCCL also uses {', '.join(virtual)} (virtual/link-local, unreachable from other nodes): "
                f"set NCCL_SOCKET_IFNAME to the routable interface (or NCCL_SOCKET_IFNAME=^docker,lo,veth)")
    ifname = setting(r, SOCKET_IFNAME)
    if ifname:
        return _ifname_set_fix(ifname, ifaces)
    return ("make sure the nodes reach each other on the interface NCCL uses (ping the peer address, "
            "check firewalls/security groups) and pin it with NCCL_SOCKET_IFNAME=<routable interface>")


def _nccl_error_text(cls: str, shown: list[str], on: str, times: str, r: ParseResult) -> tuple[str, str]:
    """NCCL's own errors, with the return codes the traces show."""
    kinds = "; ".join(dict.fromkeys(shown[:SHOWN_KINDS]))
    codes = [RETCODES[c] for c, _ in r.retcodes.most_common() if c in RETCODES]
    extra = f" (return codes: {', '.join(codes[:SHOWN_RETCODES])})" if codes else ""
    fix = ("find the first WARN line of the first failing rank; "
           "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV")
    ifname = setting(r, SOCKET_IFNAME) if cls == "ifname" else None
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


def trace_finding(r: ParseResult) -> Finding | None:
    codes = [(c, n) for c, n in r.retcodes.most_common() if c != NCCL_IN_PROGRESS]
    if not codes:
        return None
    names = ", ".join(f"{RETCODES.get(c, f'code {c}')} x{n}" for c, n in codes[:3])
    ev = r.facts.get(Fact.RETCODE)
    hosts = r.fact_hosts.get(Fact.RETCODE, ())
    return finding(code=Code.NCCL_ERROR, severity=Severity.FAIL,
                   message=f"NCCL calls returned errors{on_hosts(hosts)}: {names}",
                   fix="find the first NCCL WARN of the first failing rank "
                       "(rerun with NCCL_DEBUG=INFO if none is shown)",
                   **where_of(ev), evidence=quoted([ev] if ev else []))


def watchdog_findings(r: ParseResult) -> list[Finding]:
    out = []
    for (op, seq), g in r.watchdog.items():
        timeout = g.detail.get("timeout_ms")
        tmo = f", timeout {int(timeout) / 1000:g} s" if timeout else ""
        ranks = f" on {ranks_text(g.ranks)}" if g.ranks else ""
        out.append(finding(
            code=Code.WATCHDOG_TIMEOUT, severity=Severity.FAIL,
            message=f"watchdog timeout: collective {op} (SeqNum {seq}{tmo}) never completed{ranks}",
            fix=("a rank stopped entering or finishing this collective: look for the rank that is missing here or "
                 "failed first; set TORCH_NCCL_DUMP_ON_TIMEOUT=1 and NCCL_DEBUG=INFO. A hang at a low SeqNum "
                 "points at connectivity: run `nccl-doctor preflight`"),
            **group_where(g, rank=min(g.ranks) if g.ranks else None),
            evidence=group_evidence([g])))
    return out


def behind_finding(r: ParseResult) -> Finding | None:
    """ND118: when the watchdog fired at different SeqNums of one process group, the ranks at the oldest
    are behind: the others finished that collective, went on to the next, and wait there for them. So
    the ranks behind are where to look first. SeqNums of different process groups do not compare."""
    timed = [(int(seq), op, g) for (op, seq), g in r.watchdog.items() if seq.isdigit() and g.ranks]
    pgs = {g.detail.get("pg", "") for _, _, g in timed}
    if len(pgs) != 1 or MIXED_PG in pgs or len({seq for seq, _, _ in timed}) < 2:
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
    who = ranks_text(behind)
    return finding(
        code=Code.RANKS_BEHIND, severity=Severity.WARN if untagged else Severity.FAIL,
        message=f"{who} {'is' if len(behind) == 1 else 'are'} behind: {'its' if len(behind) == 1 else 'their'} "
                f"watchdog fired at SeqNum {low} ({first.kind.split()[0]}) while {ranks_text(ahead)} had reached "
                f"{said} and waited there"
                + (" (assuming one process group: these lines name none, torch < 2.3)" if untagged else ""),
        fix=(f"look at {who} first: what it was doing (`py-spy dump --pid PID`, or the flight recorder with "
             "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1), its GPU (`nvidia-smi`, Xid errors in "
             "`dmesg`), and whether it skipped or added a collective (code that runs on some ranks only)"),
        **group_where(first, rank=min(behind)),
        evidence=group_evidence([first]))
