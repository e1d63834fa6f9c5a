"""Findings about what went wrong: fatal NCCL errors by category (each with the fix its own text selects, from
the rows of ``logs/errorrules.py``), error-code traces, watchdog timeouts and the ranks behind the others."""

from __future__ import annotations

from nccl_doctor.codes import Code
from nccl_doctor.logs.diagnosis.hosted import hosts_finding
from nccl_doctor.logs.diagnosis.where import (
    first_host,
    group_evidence,
    group_where,
    quoted,
    ranks_text,
    setting,
    where_of,
)
from nccl_doctor.logs.errorrules import RULE_OF, ErrorRule, FixBy
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


def error_findings(r: ParseResult) -> list[Finding]:
    """One finding per category and fix class (``logs/errorrules.py``), in the order the groups came."""
    by_fix: dict[tuple[ErrorRule, str], list[Group]] = {}
    for g in r.errors.values():
        rule = RULE_OF.get(g.category, RULE_OF[Category.NCCL_ERROR])
        by_fix.setdefault((rule, rule.fix_class(g)), []).append(g)
    out = []
    for (rule, cls), groups in by_fix.items():
        groups.sort(key=lambda g: (g.first.line or 0) if g.first else 0)
        count = sum(g.count for g in groups)
        hosts = set().union(*(g.hosts for g in groups))
        ranks = set().union(*(g.ranks for g in groups))
        first = groups[0]
        fields = _message_fields(rule, cls, groups, count=count, r=r)
        out.append(hosts_finding(rule.code, Severity.FAIL, rule.variant, hosts=hosts, fix=_fix_text(rule, cls, r),
                                 evidence=group_evidence(groups),
                                 where=group_where(first, host=first_host(first),
                                                   rank=min(first.ranks) if first.ranks else None),
                                 ranks=f" ({ranks_text(ranks)})" if ranks else "", **fields))
    return out


SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"
SHOWN_RETCODES = 3  # return codes an nccl-error finding names
SHOWN_KINDS = 3  # distinct messages an nccl-error finding quotes


def _message_fields(rule: ErrorRule, cls: str, groups: list[Group], *, count: int, r: ParseResult) -> dict[str, str]:
    """What a row's message template may name besides its hosts and ranks: how often, the texts, the IB status,
    return codes."""
    shown = [g.text or g.kind for g in groups]
    status = cls if rule.by == FixBy.STATUS else ""
    vendor = sorted({g.detail["vendor_err"] for g in groups if "vendor_err" in g.detail})
    codes = [RETCODES[c] for c, _ in r.retcodes.most_common() if c in RETCODES]
    return {
        "times": plural(count, "time"), "first": shown[0], "first_two": "; ".join(shown[:2]),
        "kinds": "; ".join(dict.fromkeys(shown[:SHOWN_KINDS])),
        "status": f"status {status} = {IB_STATUS.get(status, 'see ibv_wc_status')}" if status else "status not printed",
        "vendor": f", vendor err {', '.join(vendor)}" if vendor else "",
        "retcodes": f" (return codes: {', '.join(codes[:SHOWN_RETCODES])})" if codes else "",
    }


def _fix_text(rule: ErrorRule, cls: str, r: ParseResult) -> str:
    """The row's fix for this class; where the log shows the interfaces NCCL used or was told to use, the fix
    that names them."""
    if rule.category == Category.CONNECT:
        return _connect_fix(r) or rule.fix(cls).text
    fix = rule.fix(cls)
    ifname = setting(r, SOCKET_IFNAME) if fix.if_ifname else None
    return fix.if_ifname.format(ifname=ifname) if fix.if_ifname and ifname else fix.text


def _connect_fix(r: ParseResult) -> str | None:
    """A failed connect: a virtual interface in use, else what NCCL_SOCKET_IFNAME matched (None: neither, the
    row's own fix says to pin one)."""
    ifaces = {i for v in r.socket_ifaces.values() for i in v} | {i for v in r.bootstrap_ifaces.values() for i in v}
    virtual = sorted({i.split(":", 1)[0] for i in ifaces if i.startswith(VIRTUAL_IFACES) or "fe80:" in i})
    if virtual:
        return (f"NCCL also uses {', '.join(virtual)} (virtual/link-local, unreachable from other nodes): "
                f"set NCCL_SOCKET_IFNAME to the routable interface (or NCCL_SOCKET_IFNAME=^docker,lo,veth)")
    ifname = setting(r, SOCKET_IFNAME)
    if ifname:
        return _ifname_set_fix(ifname, ifaces)
    return None


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
    return hosts_finding(Code.NCCL_ERROR, Severity.FAIL, "trace", hosts=hosts, names=names,
                         fix="find the first NCCL WARN of the first failing rank "
                             "(rerun with NCCL_DEBUG=INFO if none is shown)",
                         where=where_of(ev), evidence=quoted([ev] if ev else []))


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
