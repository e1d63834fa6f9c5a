"""Checks of the interfaces NCCL's sockets and Gloo will bind: NCCL_SOCKET_IFNAME, the bootstrap interface,
misleading names, GLOO_SOCKET_IFNAME; and the one line (ND200) saying what NCCL and Gloo will use."""

from __future__ import annotations

from nccl_doctor.codes import Code
from nccl_doctor.node.checks_rdma import net_fails
from nccl_doctor.node.classify import link_mbps, speed_text
from nccl_doctor.node.fixes import SHOWN_MAX, source_note
from nccl_doctor.node.model import ENVIRONMENT, Interface, InterfaceKind, NodeProbe, Role
from nccl_doctor.node.ncclenv import ANY_PORT, IB_RULE, match_if_list, overmatching_prefixes, parse_if_list, show
from nccl_doctor.report import Finding, Severity, finding, templated

PASS, WARN, FAIL = Severity.PASS, Severity.WARN, Severity.FAIL

# What we recommend first for NCCL sockets, by kind (others after these).
SOCKET_PREFERENCE = {InterfaceKind.INFINIBAND: 0, InterfaceKind.ROCE: 1, InterfaceKind.BOND: 2, InterfaceKind.EFA: 2,
                     InterfaceKind.ETHERNET: 3, InterfaceKind.VIRTUAL: 4, InterfaceKind.MANAGEMENT: 5}
HOST_BRIDGE_PREFIXES = ("docker", "virbr", "br-")  # virtual interfaces never worth recommending
OTHER_KIND = 6  # after every kind above
MAX_SUGGESTED_IFACES = 4
SocketRank = tuple[bool, int, int, int, int]


def _socket_rank(i: Interface) -> SocketRank:
    """Sort key of a recommendation: data before management, the RDMA fabric first, then by kind and speed."""
    fabric = 0 if i.rdma and i.role == Role.DATA else 1
    return (i.role == Role.MANAGEMENT, fabric, SOCKET_PREFERENCE.get(i.kind, OTHER_KIND),
            -link_mbps(i), i.ifindex or 0)


def best_socket_ifaces(node: NodeProbe) -> list[str]:
    """The interfaces we recommend for NCCL sockets/bootstrap: the fastest running data interfaces with IPv4."""
    ifaces = node.facts.interfaces
    live = [i for i in ifaces if i.running and i.ipv4() and i.role in (Role.DATA, Role.MANAGEMENT)]
    if not live:
        live = [i for i in ifaces if i.running and i.ipv4() and i.role == Role.VIRTUAL
                and not i.name.startswith(HOST_BRIDGE_PREFIXES)]
    if not live:
        return []
    live.sort(key=_socket_rank)
    top = live[0]
    ib = node.nccl_ib  # IB (once the fixes turn it back on) or a plugin carries the data
    if ib.ports or ib.plugin or ib.usable:  # sockets carry bootstrap/OOB only: one is enough
        return [top.name]
    best = _socket_rank(top)[:-1]  # as good as the top one, whatever its ifindex
    return [i.name for i in live if _socket_rank(i)[:-1] == best][:MAX_SUGGESTED_IFACES]


def _ifname_fix(node: NodeProbe) -> str:
    best = best_socket_ifaces(node)
    if best:
        return f"export NCCL_SOCKET_IFNAME=={','.join(best)}"
    if not node.facts.addresses_known:
        return "set NCCL_SOCKET_IFNAME to this node's inter-node interface (addresses unknown here: see ND001)"
    return "bring up an interface with an IP address"


def check_socket(node: NodeProbe) -> list[Finding]:
    """NCCL_SOCKET_IFNAME as written (ND202-ND205), no interface at all (ND224), and the bootstrap
    interface NCCL ends up with (ND201 management, ND206 loopback or virtual)."""
    sc = node.nccl_socket
    fix_if = _ifname_fix(node)
    out: list[Finding] = []
    if sc.user_value is not None:
        out += _user_ifname(node, sc.user_value, fix_if)
    if sc.ignored_value is not None:
        out.append(finding(Code.SOCKET_IFNAME_IGNORED, WARN, f"NCCL_SOCKET_IFNAME={sc.ignored_value!r}"
                           f"{source_note(node, 'NCCL_SOCKET_IFNAME')} is one character, so NCCL ignores it and uses "
                           "its default choice", fix_if, host=node.host))
    if not sc.ifaces and sc.user_value is None and node.facts.addresses_known:
        out.append(finding(Code.NCCL_FINDS_NO_INTERFACE, FAIL, "NCCL finds no running interface with an IP address: "
                           "it cannot bootstrap", fix_if, host=node.host))
    if sc.bootstrap:
        out += _bootstrap(node, sc.bootstrap, fix_if)
    return out


def _user_ifname(node: NodeProbe, u: str, fix_if: str) -> list[Finding]:
    sc, facts = node.nccl_socket, node.facts
    v, src = show(u), source_note(node, "NCCL_SOCKET_IFNAME")
    out = []
    if u.startswith("=^"):
        out.append(finding(Code.SOCKET_IFNAME_IGNORED, WARN, f"NCCL_SOCKET_IFNAME={v}{src}: '=^' reads as the exact "
                           f"name '{u[1:]}', not an exclusion; NCCL wants '^' before '='",
                           f"export NCCL_SOCKET_IFNAME=^={u[2:]}", host=node.host))
    if '"' in u or "'" in u:
        out.append(_quoted_ifname(node, u))
    down = sc.matched_not_running
    if not sc.ifaces and down:
        out.append(finding(Code.SOCKET_IFNAME_DOWN, FAIL, f"NCCL_SOCKET_IFNAME={v}{src} matches only "
                           f"{', '.join(down)}, which is down: NCCL cannot bootstrap", fix_if, host=node.host,
                           iface=down[0]))
    elif not sc.ifaces and not _names_match(node, u):
        here = ", ".join(i.name for i in facts.interfaces)
        out.append(finding(Code.SOCKET_IFNAME_MATCHES_NOTHING, FAIL, f"NCCL_SOCKET_IFNAME={v}{src} matches no "
                           f"interface here (interfaces: {here}): the job cannot start (Bootstrap : no socket "
                           "interface found)", fix_if, host=node.host))
    elif not sc.ifaces and facts.addresses_known:
        here = ", ".join(i.name for i in facts.interfaces)
        out.append(finding(Code.SOCKET_IFNAME_MATCHES_NOTHING, FAIL, f"NCCL_SOCKET_IFNAME={v}{src} matches no "
                           f"interface with an IP address (interfaces here: {here}): the job cannot start "
                           "(Bootstrap : no socket interface found)", fix_if, host=node.host))
    elif down:
        out.append(finding(Code.SOCKET_IFNAME_DOWN, WARN, f"NCCL_SOCKET_IFNAME={v}{src} also matches down "
                           f"interface(s) {', '.join(down)} (NCCL before 2.28 may pick them)", fix_if, host=node.host,
                           iface=down[0]))
    addressed = [i.name for i in facts.interfaces if i.addresses]
    for prefix, hits in overmatching_prefixes(parse_if_list(u), addressed).items():
        out.append(finding(Code.IFNAME_PREFIX_OVERMATCH, WARN, f"NCCL_SOCKET_IFNAME entry '{prefix}' is a prefix: it "
                           f"also matches {', '.join(h for h in hits if h != prefix)}",
                           f"export NCCL_SOCKET_IFNAME=={prefix}", host=node.host, iface=prefix))
    return out


def _names_match(node: NodeProbe, value: str) -> bool:
    """Whether ``value`` keeps any interface by name; True (nothing to say) when the addresses are known,
    where the address-aware choice decides."""
    if node.facts.addresses_known:
        return True
    lst = parse_if_list(value)
    return any(match_if_list(i.name, ANY_PORT, lst) for i in node.facts.interfaces)


def _quoted_ifname(node: NodeProbe, v: str) -> Finding:
    """Quotes NCCL keeps verbatim; the fix points where the value came from (environment or conf file)."""
    bare = v.replace('"', "").replace("'", "")
    source = node.settings.source("NCCL_SOCKET_IFNAME")
    if source in (None, ENVIRONMENT):
        where, fix, file = "the environment", f"export NCCL_SOCKET_IFNAME={bare}", None
    else:
        where, fix, file = source, f"remove the quotes in {source}: NCCL_SOCKET_IFNAME={bare}", source
    return finding(Code.SOCKET_IFNAME_IGNORED, WARN, f"NCCL_SOCKET_IFNAME={v} (from {where}) contains quotes, which "
                   "NCCL keeps as part of the interface name", fix, host=node.host, file=file)


def _bootstrap(node: NodeProbe, name: str, fix_if: str) -> list[Finding]:
    """The bootstrap interface: management while data interfaces exist (ND201), loopback or virtual (ND206)."""
    sc, facts = node.nccl_socket, node.facts
    b = facts.iface(name)
    if b is None:  # the choice comes from these interfaces; never from a name that is not here
        return []
    out = []
    data = [i for i in facts.interfaces if i.role == Role.DATA and i.running and i.addresses and i.name != b.name]
    if b.role == Role.MANAGEMENT and data:
        use = "bootstrap" if node.nccl_ib.ports else "bootstrap and all inter-node traffic (NET/Socket)"
        out.append(finding(Code.NCCL_ON_MANAGEMENT, WARN, f"NCCL will use management interface {b.name} "
                           f"({speed_text(b)}) for {use} ({sc.rule}) while data interfaces exist "
                           f"({', '.join(i.name for i in data[:SHOWN_MAX])})", fix_if, host=node.host, iface=b.name))
    if b.kind == InterfaceKind.LOOPBACK or b.name == facts.loopback:
        out.append(finding(Code.NCCL_ON_VIRTUAL, FAIL, f"NCCL will use {b.name}, the loopback interface, for bootstrap "
                           f"({sc.rule}): other nodes can never reach 127.0.0.1, so every multi-node job fails at "
                           "init (a single-node job would still run)", fix_if, host=node.host, iface=b.name))
    elif b.kind == InterfaceKind.VIRTUAL and b.role != Role.DATA:  # a container's veth uplink is fine
        what = b.virtual_kind or b.kind
        out.append(finding(Code.NCCL_ON_VIRTUAL, WARN, f"NCCL will use {b.name}, a {what} interface, for bootstrap "
                           f"({sc.rule}); other nodes usually cannot reach it", fix_if, host=node.host, iface=b.name))
    return out


def check_names(node: NodeProbe) -> list[Finding]:
    """ND223: names that say InfiniBand on interfaces that are not IPoIB (NCCL's default picks ib* first)."""
    sc = node.nccl_socket
    out = []
    for i in node.facts.interfaces:
        picked = i.name == sc.bootstrap and sc.rule.startswith(IB_RULE[0])
        chosen = " and NCCL's default picks it because of its name" if picked else ""
        out += [finding(Code.NAMED_LIKE_IB, WARN, f"{i.name} is {note}{chosen}",
                        "rename it, or set NCCL_SOCKET_IFNAME to the real fabric interface", host=node.host,
                        iface=i.name) for note in i.notes]
    return out


# ---------------------------------------------------------------------------------------------------
# Gloo
# ---------------------------------------------------------------------------------------------------


def check_gloo(node: NodeProbe) -> list[Finding]:
    """GLOO_SOCKET_IFNAME naming nothing (ND216 FAIL) or an unreachable device (ND216 WARN); without it,
    a hostname that resolves to loopback (ND215)."""
    g, best = node.gloo, best_socket_ifaces(node)
    fix = f"export GLOO_SOCKET_IFNAME={best[0]}" if best else "set GLOO_SOCKET_IFNAME to the inter-node interface"
    if g.rule == "GLOO_SOCKET_IFNAME":
        return _gloo_ifname(node, fix)
    if g.ifaces and all(i in ("lo", node.facts.loopback) for i in g.ifaces):
        return [_binds_loopback(node, fix)]
    return []


def _binds_loopback(node: NodeProbe, fix: str) -> Finding:
    """ND215 from its templates: the "hostname" variant when Gloo's rule names this host, so that nodes with
    the same problem merge into one finding naming their hostlist."""
    g, mine = node.gloo, f"hostname {node.host!r} "
    if node.host and g.rule.startswith(mine):
        return templated(Code.GLOO_BINDS_LOOPBACK, WARN, "hostname", fix=fix, host=node.host, iface=g.ifaces[0],
                         resolved=g.rule.removeprefix(mine), why="")
    return templated(Code.GLOO_BINDS_LOOPBACK, WARN, fix=fix, host=node.host, iface=g.ifaces[0], rule=g.rule, why="")


def _gloo_ifname(node: NodeProbe, fix: str) -> list[Finding]:
    g = node.gloo
    v = show(node.settings.get("GLOO_SOCKET_IFNAME") or "")
    out = []
    for name in g.missing:
        close = [i.name for i in node.facts.interfaces if i.name.startswith(name.lstrip("^=")) and i.addresses]
        hint = f"; Gloo takes exact names only (did you mean {close[0]}?)" if close else ""
        out.append(finding(Code.GLOO_IFNAME_INVALID, FAIL, f"GLOO_SOCKET_IFNAME={v}: no interface {name!r} with an "
                           f"address here{hint}: Gloo fails with 'Unable to find address for: {name}'", fix,
                           host=node.host, iface=name))
    bad = _gloo_unreachable(node)
    rest = [n for n in g.ifaces if n not in g.missing and n not in dict(bad)]
    for name, why in bad:
        drop = f"export GLOO_SOCKET_IFNAME={','.join(rest)}" if rest else fix
        out.append(finding(Code.GLOO_IFNAME_INVALID, WARN, f"GLOO_SOCKET_IFNAME={v}: {name} {why}: Gloo pairs over it "
                           "cannot reach other nodes and multi-node groups fail or hang", drop, host=node.host,
                           iface=name))
    return out


def _gloo_unreachable(node: NodeProbe) -> list[tuple[str, str]]:
    """GLOO_SOCKET_IFNAME entries that exist but other nodes cannot reach: down, loopback, or virtual
    (a bridge, docker0...) that is not the node's uplink. Gloo uses every listed device round-robin."""
    out = []
    for name in node.gloo.ifaces:
        i = node.facts.iface(name)
        if name in node.gloo.missing or i is None:
            continue
        if name in node.gloo.down:
            out.append((name, "is down"))
        elif i.kind == InterfaceKind.LOOPBACK or name == node.facts.loopback:
            out.append((name, "is the loopback interface"))
        elif i.kind == InterfaceKind.VIRTUAL and i.role != Role.DATA:
            out.append((name, f"is a virtual ({i.virtual_kind or 'virtual'}) interface, not this node's uplink"))
    return out


# ---------------------------------------------------------------------------------------------------
# What NCCL will do: the summary line, and why it cannot start
# ---------------------------------------------------------------------------------------------------


def no_interface_code(node: NodeProbe) -> Code | None:
    """The finding that explains why NCCL has no socket interface (None when it has one)."""
    sc = node.nccl_socket
    if sc.ifaces:
        return None
    if not node.facts.addresses_known and (sc.user_value is None or _names_match(node, sc.user_value)):
        return Code.CHECK_SKIPPED  # unknowable: the address files are missing
    if sc.user_value is None:
        return Code.NCCL_FINDS_NO_INTERFACE
    return Code.SOCKET_IFNAME_DOWN if sc.matched_not_running else Code.SOCKET_IFNAME_MATCHES_NOTHING


def cannot_start(node: NodeProbe) -> str | None:
    """Why NCCL cannot start on this node at all (and which finding says so); None when it can."""
    why = no_interface_code(node)
    if why == Code.CHECK_SKIPPED:
        return f"NCCL's interface unknown: no address files to read (see {why})"
    if why:
        return f"NCCL cannot bootstrap: no interface selected (see {why})"
    if net_fails(node):
        return (f"NCCL init fails: NCCL_NET={node.settings.get('NCCL_NET')} is not usable here "
                f"(see {Code.NCCL_NET_UNAVAILABLE})")
    return None


def nccl_line(node: NodeProbe) -> str:
    """One phrase for what NCCL will do between nodes; never reads as fine when it cannot start."""
    sc = node.nccl_socket
    return cannot_start(node) or f"NCCL bootstrap: {sc.bootstrap} ({sc.rule}); inter-node data: {data_path(node)[1]}"


def data_path(node: NodeProbe) -> tuple[str, str]:
    """(transport, phrase): the network NCCL will use between nodes, for the JSON/summary and for ND200,
    from one place so they never disagree. EFA is used only through aws-ofi-nccl, which may be missing."""
    sc, ib = node.nccl_socket, node.nccl_ib
    sockets = f"TCP sockets over {', '.join(sc.ifaces) or 'no interface'}"
    if ib.plugin:
        over = f" over IB ports {', '.join(ib.ports)}" if ib.ports else ""
        return f"plugin {ib.plugin}", f"plugin network {show(ib.plugin)}{over}"
    if ib.ports:
        return "IB", f"IB ports {', '.join(ib.ports)}"
    efa = [d.name for d in node.facts.rdma_devices if d.is_efa]
    if efa and "NCCL_NET" not in ib.disablers:
        more = ", ..." if len(efa) > SHOWN_MAX else ""
        return ("plugin (aws-ofi-nccl, if installed) else Socket",
                f"aws-ofi-nccl (Libfabric) over EFA {', '.join(efa[:SHOWN_MAX])}{more} if that "
                f"plugin is installed, else {sockets}")
    if ib.hca_value and ib.usable and not ib.selected and not ib.disabled_by:  # ND208 FAILs: say why sockets
        return "Socket", (f"{sockets} (NCCL_IB_HCA selects none of the active IB ports; see "
                          f"{Code.IB_HCA_SELECTS_NOTHING})")
    return "Socket", sockets


def check_summary(node: NodeProbe) -> list[Finding]:
    """The PASS line saying what NCCL and Gloo will use. When NCCL has no interface there is nothing
    to summarise: the failing finding (ND202/ND203/ND224, or ND222 when NCCL_NET cannot initialise)
    says it, and the report summary repeats it."""
    if no_interface_code(node) or net_fails(node):
        return []
    gloo = gloo_line(node)
    msg = f"{nccl_line(node)}; {gloo}" if gloo else nccl_line(node)
    return [finding(Code.PROBE_SUMMARY, PASS, msg, host=node.host)]


def gloo_line(node: NodeProbe) -> str | None:
    """What Gloo will bind; None when a FAIL says its interface is not here (ND216): a PASS line never
    carries a failure, so the choice Gloo cannot make is left to that FAIL."""
    g = node.gloo
    if g.missing:
        return None
    return f"Gloo: {', '.join(g.ifaces) or 'unknown'} ({g.rule})"
