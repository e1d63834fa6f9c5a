"""``nccl-doctor probe``: this node's interfaces, classified, and NCCL/Gloo settings checked against them.

A pure function of the files under ``--root`` (default ``/``) and an environment mapping:
``probe_node`` gathers facts and what NCCL/Gloo will pick, ``check`` turns them into findings,
``probe_report`` builds the report. ``preflight`` calls the same three functions on every node.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from nccl_doctor.errors import InputError
from nccl_doctor.node.ncclenv import (
    DEBUG_LEVELS, DEPRECATED_TORCH, EFA_PLUGIN_NETS, INT_VARS, NOT_READ, RDMA_PLUGIN_NETS, GlooChoice, IbChoice,
    Setting, Settings, SocketChoice, classify_net, did_you_mean, effective_settings, gdr_level, gloo_ifaces, nccl_ib_ports,
    nccl_socket_ifaces, overmatching_prefixes, parse_c_int, parse_if_list, show,
)
from nccl_doctor.report import Finding, Report, Severity, Table, Where
from nccl_doctor.node.sysfs import FsReader, Interface, NodeFacts, PciInfo, classify, link_mbps, read_node

PASS, WARN, FAIL = Severity.PASS, Severity.WARN, Severity.FAIL


@dataclass
class NodeProbe:
    """Everything probe knows about one node; JSON-ready through ``node_dict``/``asdict``."""

    root: str
    facts: NodeFacts
    settings: Settings
    nccl_socket: SocketChoice
    nccl_ib: IbChoice
    gloo: GlooChoice

    @property
    def host(self) -> str:
        return self.facts.host


# ---------------------------------------------------------------------------------------------------
# Gathering
# ---------------------------------------------------------------------------------------------------


def probe_node(root: Path | str = "/", env: Mapping[str, str] | None = None, *, fs: FsReader | None = None) -> NodeProbe:
    """Read and classify the node under ``root``; compute what NCCL and Gloo will use with ``env``."""
    env = dict(os.environ if env is None else env)
    fs = fs or FsReader(root)
    if not fs.root.exists():
        raise InputError(f"--root {root}: does not exist")
    if not fs.root.is_dir():
        raise InputError(f"--root {root}: not a directory or a .tar.gz snapshot")
    if not fs.is_dir("/sys/class/net"):
        raise InputError(f"--root {root}: no sys/class/net under it (not a Linux root or snapshot)")
    facts = read_node(fs)
    classify(facts)
    _gpu_affinity(facts)
    settings = effective_settings(env, fs)
    return NodeProbe(
        root=str(root),
        facts=facts,
        settings=settings,
        nccl_socket=nccl_socket_ifaces(facts.interfaces, settings),
        nccl_ib=nccl_ib_ports(facts.rdma_devices, settings),
        gloo=gloo_ifaces(facts.interfaces, settings, facts.host, facts.etc_hosts),
    )


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def pcie_distance(a: PciInfo, b: PciInfo) -> str:
    """NCCL-like path type between two PCI functions from their sysfs paths (PIX/PXB/PHB/SYS)."""
    pa, pb = _parts(a.path), _parts(b.path)
    common = 0
    while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
        common += 1
    if common <= 2:  # different root complexes (/sys/devices/pciDDDD:BB)
        if a.numa_node is not None and b.numa_node is not None and a.numa_node != b.numa_node:
            return "SYS"
        return "PHB"
    if common == 3:  # same host bridge, different root ports
        return "PHB"
    below = max(len(pa), len(pb)) - common
    # a PCIe switch shows as an upstream bridge with downstream bridges: two hops under it is one switch
    return "PIX" if below <= 1 or (below <= 2 and common >= 5) else "PXB"


def _gpu_affinity(facts: NodeFacts) -> None:
    """Nearest data NIC for each GPU: RDMA devices with an active port, else physical data netdevs."""
    nics = [(d.name, d.pci) for d in facts.rdma_devices if d.pci and any(p.active for p in d.ports)]
    if not nics:
        nics = [(i.name, i.pci) for i in facts.interfaces if i.pci and i.role == "data"]
    rank = {"PIX": 0, "PXB": 1, "PHB": 2, "SYS": 3}
    for gpu in facts.gpus:
        if not nics:
            continue
        best = min(nics, key=lambda n: (rank[pcie_distance(gpu.pci, n[1])], -len(os.path.commonprefix([gpu.pci.path, n[1].path]))))
        gpu.nearest_nic, gpu.nearest_nic_numa = best[0], best[1].numa_node
        gpu.pcie_distance = pcie_distance(gpu.pci, best[1])


# ---------------------------------------------------------------------------------------------------
# Checks: each takes the NodeProbe and yields findings
# ---------------------------------------------------------------------------------------------------


def _f(code: str, sev: Severity, node: NodeProbe, msg: str, fix: str | None = None, *, iface: str | None = None,
       device: str | None = None, file: str | None = None, evidence: tuple[str, ...] = ()) -> Finding:
    return Finding(code=code, severity=sev, message=msg, fix=fix, evidence=evidence,
                   where=Where(host=node.host, iface=iface, device=device, file=file))


def _src(node: NodeProbe, name: str) -> str:
    st = node.settings.values.get(name)
    if st is None or st.source == "environment":
        return ""
    return f" (set in {st.source}" + (f" line {st.line})" if st.line else ")")


def _conf_origin(node: NodeProbe, name: str) -> Setting | None:
    """The nccl.conf line that sets ``name`` now, or that takes over once the environment's value is unset."""
    st = node.settings.values.get(name)
    if st is not None and st.source != "environment":
        return st
    return next(iter(node.settings.shadowed.get(name, [])), None)


def _undo_fix(node: NodeProbe, items: list[tuple[str, str | None]]) -> str:
    """Back to NCCL's default for each (variable, value meaning 'default'): ``unset`` where only the
    environment sets it. NCCL rereads nccl.conf at every init and the environment wins over it, so a
    value from a file is overridden with the default value, or its line deleted (and the environment's
    copy unset, else the file's value comes back)."""
    unsets, exports, lines, env_too, need_file = [], [], {}, [], False
    for name, default in items:
        conf = _conf_origin(node, name)
        if conf is None:
            unsets.append(f"unset {name}")
            continue
        lines.setdefault(conf.source, []).append((conf.line, f"{name}={show(conf.value)}"))
        if node.settings.source(name) == "environment":
            env_too.append(name)
        if default is None:
            need_file = True
        else:
            exports.append(f"export {name}={default}")
    if not lines:
        return "; ".join(unsets)
    files = ("unset " + " ".join(env_too) + " and " if env_too else "") + "delete " + ", ".join(
        f"line{'s' if len(n) > 1 else ''} {' and '.join(str(k) for k, _ in n)} of {path} ({', '.join(t for _, t in n)})"
        for path, n in lines.items())
    if need_file:  # some value only goes away with its line
        return "; ".join([*unsets, *exports, files])
    alt = f"{'; '.join(exports)} (the environment wins over nccl.conf), or {files}"
    return "; ".join(unsets) + "; and " + alt if unsets else alt


def _set_fix(node: NodeProbe, name: str, value: str) -> str:
    """Give ``name`` this value where it is set now (a conf file line, or the environment)."""
    st = node.settings.values.get(name)
    if st is None or st.source == "environment":
        return f"export {name}={value}"
    return f"change line {st.line} of {st.source} to {name}={value}, or export {name}={value} (the environment wins)"


def _hypothetical(node: NodeProbe, name: str, value: str, drop: str | None = None) -> NodeProbe:
    """This node with ``name=value`` exported (and ``drop`` gone): what a suggested fix would lead to."""
    values = {k: v for k, v in node.settings.values.items() if k != drop}
    values[name] = Setting(name, value, "environment")
    s = Settings(values, node.settings.conf_files, node.settings.missing_conf_file)
    f = node.facts
    return NodeProbe(node.root, f, s, nccl_socket_ifaces(f.interfaces, s), nccl_ib_ports(f.rdma_devices, s),
                     gloo_ifaces(f.interfaces, s, f.host, f.etc_hosts))


def _rejected(node: NodeProbe, name: str, value: str, drop: str | None = None) -> Finding | None:
    """The first WARN/FAIL this tool would raise after ``export name=value`` that it does not raise now:
    a fix must never lead to a finding of our own (None: the value is accepted)."""
    checks = [c for c in CHECKS if c is not check_env]
    now = {(f.code, f.message) for c in checks for f in c(node)}
    hyp = _hypothetical(node, name, value, drop)
    for f in [*(f for c in checks for f in c(hyp)), *_value_findings(hyp, hyp.settings.values[name])]:
        if f.severity is not PASS and (f.code, f.message) not in now:
            return f
    return None


def best_socket_ifaces(node: NodeProbe) -> list[str]:
    """The interfaces we recommend for NCCL sockets/bootstrap: the fastest running data interfaces with IPv4."""
    live = [i for i in node.facts.interfaces if i.running and i.ipv4() and i.role in ("data", "management")]
    if not live:
        live = [i for i in node.facts.interfaces if i.running and i.ipv4() and i.role == "virtual"
                and not i.name.startswith(("docker", "virbr", "br-"))]
    if not live:
        return []
    prio = {"infiniband": 0, "roce": 1, "bond": 2, "efa": 2, "ethernet": 3, "virtual": 4, "management": 5}

    def key(i: Interface):
        fabric = 0 if i.rdma and i.role == "data" else 1
        return (i.role == "management", fabric, prio.get(i.kind, 6), -link_mbps(i), i.ifindex or 0)

    live.sort(key=key)
    top = live[0]
    ib = node.nccl_ib  # IB (once the fixes turn it back on) or a plugin carries the data
    if ib.ports or ib.plugin or ib.usable:  # sockets carry bootstrap/OOB only: one is enough
        return [top.name]
    return [i.name for i in live if key(i)[:4] == key(top)[:4]][:4]


def check_socket(node: NodeProbe) -> list[Finding]:
    out: list[Finding] = []
    sc, facts = node.nccl_socket, node.facts
    names = [i.name for i in facts.interfaces]
    best = best_socket_ifaces(node)
    fix_if = f"export NCCL_SOCKET_IFNAME=={','.join(best)}" if best else "bring up an interface with an IP address"
    if sc.user_value is not None:
        v = show(sc.user_value)
        src = _src(node, "NCCL_SOCKET_IFNAME")
        if sc.user_value.startswith("=^"):
            u = sc.user_value
            out.append(_f("ND204", WARN, node, f"NCCL_SOCKET_IFNAME={v}{src}: '=^' reads as the exact name "
                          f"'{u[1:]}', not an exclusion; NCCL wants '^' before '='", f"export NCCL_SOCKET_IFNAME=^={u[2:]}"))
        if '"' in sc.user_value or "'" in sc.user_value:
            out.append(_quoted_ifname(node, sc.user_value))
        if not sc.ifaces:
            if sc.matched_not_running:
                out.append(_f("ND203", FAIL, node, f"NCCL_SOCKET_IFNAME={v}{src} matches only "
                              f"{', '.join(sc.matched_not_running)}, which is down: NCCL cannot bootstrap", fix_if,
                              iface=sc.matched_not_running[0]))
            else:
                out.append(_f("ND202", FAIL, node, f"NCCL_SOCKET_IFNAME={v}{src} matches no interface with an IP "
                              f"address (interfaces here: {', '.join(names)}): the job cannot start "
                              "(Bootstrap : no socket interface found)", fix_if))
        elif sc.matched_not_running:
            out.append(_f("ND203", WARN, node, f"NCCL_SOCKET_IFNAME={v}{src} also matches down interface(s) "
                          f"{', '.join(sc.matched_not_running)} (NCCL before 2.28 may pick them)", fix_if,
                          iface=sc.matched_not_running[0]))
        for prefix, hits in overmatching_prefixes(parse_if_list(sc.user_value),
                                                  [i.name for i in facts.interfaces if i.addresses]).items():
            out.append(_f("ND205", WARN, node, f"NCCL_SOCKET_IFNAME entry '{prefix}' is a prefix: it also matches "
                          f"{', '.join(h for h in hits if h != prefix)}", f"export NCCL_SOCKET_IFNAME=={prefix}",
                          iface=prefix))
    if sc.ignored_value is not None:
        out.append(_f("ND204", WARN, node, f"NCCL_SOCKET_IFNAME={sc.ignored_value!r}{_src(node, 'NCCL_SOCKET_IFNAME')} "
                      "is one character, so NCCL ignores it and uses its default choice", fix_if))
    if not sc.ifaces and sc.user_value is None:
        out.append(_f("ND224", FAIL, node, "NCCL finds no running interface with an IP address: it cannot bootstrap",
                      fix_if))
    if sc.bootstrap:
        b = facts.iface(sc.bootstrap)
        if b is None:  # the choice comes from these interfaces; never from a name that is not here
            return out
        data = [i for i in facts.interfaces if i.role == "data" and i.running and i.addresses and i.name != b.name]
        if b.role == "management" and data:
            use = "bootstrap" if node.nccl_ib.ports else "bootstrap and all inter-node traffic (NET/Socket)"
            out.append(_f("ND201", WARN, node, f"NCCL will use management interface {b.name} ({_fmt_speed(b)}) for "
                          f"{use} ({sc.rule}) while data interfaces exist ({', '.join(i.name for i in data[:4])})",
                          fix_if, iface=b.name))
        if b.kind == "loopback" or b.name == facts.loopback:
            out.append(_f("ND206", FAIL, node, f"NCCL will use {b.name}, the loopback interface, for bootstrap "
                          f"({sc.rule}): other nodes can never reach 127.0.0.1, so every multi-node job fails at init "
                          "(a single-node job would still run)", fix_if, iface=b.name))
        elif b.kind == "virtual" and b.role != "data":  # a container's veth uplink is fine
            what = b.virtual_kind or b.kind
            out.append(_f("ND206", WARN, node, f"NCCL will use {b.name}, a {what} interface, for bootstrap ({sc.rule}); "
                          "other nodes usually cannot reach it", fix_if, iface=b.name))
    return out


def _quoted_ifname(node: NodeProbe, v: str) -> Finding:
    """Quotes NCCL keeps verbatim; the fix points where the value came from (environment or conf file)."""
    bare = v.replace('"', "").replace("'", "")
    source = node.settings.source("NCCL_SOCKET_IFNAME")
    if source in (None, "environment"):
        where, fix, file = "the environment", f"export NCCL_SOCKET_IFNAME={bare}", None
    else:
        where, fix, file = source, f"remove the quotes in {source}: NCCL_SOCKET_IFNAME={bare}", source
    return _f("ND204", WARN, node, f"NCCL_SOCKET_IFNAME={v} (from {where}) contains quotes, which NCCL keeps as "
              "part of the interface name", fix, file=file)


def _fmt_speed(i: Interface) -> str:
    s = link_mbps(i)
    return "speed unknown" if not s else (f"{s // 1000} Gb/s" if s >= 1000 else f"{s} Mb/s")


def check_names(node: NodeProbe) -> list[Finding]:
    out = []
    for i in node.facts.interfaces:
        for note in i.notes:
            chosen = " and NCCL's default picks it because of its name" if i.name == node.nccl_socket.bootstrap \
                and node.nccl_socket.rule.startswith("default: names starting with ib") else ""
            out.append(_f("ND223", WARN, node, f"{i.name} is {note}{chosen}",
                          "rename it, or set NCCL_SOCKET_IFNAME to the real fabric interface", iface=i.name))
    return out


def check_rdma(node: NodeProbe) -> list[Finding]:
    out: list[Finding] = []
    facts, ib = node.facts, node.nccl_ib
    devs = facts.rdma_devices
    if not devs:
        if any(i.role == "data" for i in facts.interfaces) and facts.gpus:
            out.append(_f("ND226", WARN, node, "no RDMA device (InfiniBand/RoCE/EFA): inter-node NCCL traffic will "
                          "use TCP sockets (NET/Socket)", "run multi-node training on nodes with an RDMA fabric"))
        elif any(i.role == "data" for i in facts.interfaces):  # a CPU node: only Gloo runs here, over TCP anyway
            out.append(_f("ND226", PASS, node, "no RDMA device and no NVIDIA GPU: collectives here use Gloo over TCP; "
                          "NCCL settings are still checked for GPU nodes running with this environment"))
        return out
    off = _ib_off_vars(node)
    if ib.usable and off:
        what = " and ".join(f"{v}={show(node.settings.get(v) or '')}{_src(node, v)}" for v in off)
        out.append(_f("ND207", FAIL, node, f"{len(ib.usable)} active RDMA port(s) ({', '.join(ib.usable[:4])}) but "
                      f"{what} turn{'s' if len(off) == 1 else ''} NCCL's IB transport off: traffic goes over TCP sockets",
                      _undo_fix(node, [(v, IB_ON[v]) for v in off]), file=_conf_file(node, *off)))
    if ib.hca_value and not ib.disabled_by:
        lst = parse_if_list(ib.hca_value)
        if ib.usable and not ib.selected:
            out.append(_f("ND208", FAIL, node, f"NCCL_IB_HCA={show(ib.hca_value)}{_src(node, 'NCCL_IB_HCA')} selects "
                          f"none of the active ports ({', '.join(ib.usable)}): NCCL falls back to sockets silently",
                          _set_fix(node, "NCCL_IB_HCA", f"={','.join(ib.usable)}")))
        for prefix, hits in overmatching_prefixes(lst, [d.name for d in devs]).items():
            out.append(_f("ND205", WARN, node, f"NCCL_IB_HCA entry '{prefix}' is a prefix: it also selects "
                          f"{', '.join(h for h in hits if h != prefix)}", f"export NCCL_IB_HCA=={prefix}", device=prefix))
    active_rates: dict[str, list[float]] = {}
    for d in devs:
        for p in d.ports:
            if p.active and p.rate_gbps:
                active_rates.setdefault(p.link_layer, []).append(p.rate_gbps)
    for d in devs:
        for p in d.ports:
            where = f"{d.name}:{p.port}"
            nd = f" (netdev {', '.join(p.netdevs)})" if p.netdevs else ""
            if not p.active:
                skip = f"; exclude it with NCCL_IB_HCA=^={d.name}:{p.port} until fixed" if ib.usable else ""
                out.append(_f("ND209", WARN, node, f"RDMA port {where}{nd} is {p.state} / {p.phys_state}: NCCL skips it",
                              f"check the cable/switch port; `ibstat {d.name}`{skip}", device=where))
            elif p.rate_gbps and max(active_rates.get(p.link_layer, [0])) > p.rate_gbps:
                top = max(active_rates[p.link_layer])
                out.append(_f("ND210", WARN, node, f"RDMA port {where}{nd} runs at {p.rate}, below the {top:g} Gb/sec "
                              "of its peers on this node: rings through it run at its speed",
                              "reseat/replace the cable or transceiver; check `mlxlink -d <pci>` for lanes/errors",
                              device=where, evidence=(f"rate: {p.rate}",)))
    out += _no_active_port(node)
    if any(d.is_efa for d in devs):
        out.append(_f("ND225", PASS, node, "EFA devices present: NCCL's built-in IB transport ignores them; the "
                      "aws-ofi-nccl plugin must load (log line 'Using network Libfabric')",
                      "install aws-ofi-nccl and check with NCCL_DEBUG=INFO"))
    out += check_roce(node)
    return out


# The value that turns IB back on for each variable that can turn it off.
IB_ON = {"NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"}


def _ib_off_vars(node: NodeProbe) -> list[str]:
    """Variables that turn NCCL's IB transport off (ND207); a misspelt NCCL_NET fails init instead (ND222)."""
    net = node.settings.get("NCCL_NET")
    return [v for v in node.nccl_ib.disablers if v != "NCCL_NET" or classify_net(net or "").kind == "socket"]


def _conf_file(node: NodeProbe, *names: str) -> str | None:
    """The conf file a finding is about, when the values come from one."""
    return next((c.source for c in map(lambda n: _conf_origin(node, n), names) if c is not None), None)


def _no_active_port(node: NodeProbe) -> list[Finding]:
    """IB/RoCE hardware on a GPU node with no ACTIVE port: NCCL logs 'NET/IB : No device found' (INFO, not
    WARN) and runs on TCP sockets; the same silent fallback that ``parse`` fails as ND102."""
    facts, ib = node.facts, node.nccl_ib
    devs = [d for d in facts.rdma_devices if not d.is_efa]
    if not devs or ib.usable or not facts.gpus or node.settings.get("NCCL_NET") is not None:  # NCCL_NET: ND222
        return []
    ports = [f"{d.name}:{p.port} {p.state}/{p.phys_state}" for d in devs for p in d.ports]
    over = ", ".join(node.nccl_socket.ifaces[:4]) or "no interface"
    return [_f("ND209", FAIL, node, f"no IB/RoCE port is ACTIVE ({', '.join(ports)}): NCCL finds no IB device and "
               f"silently falls back to TCP sockets over {over} for all inter-node traffic",
               "check each port with `ibstat` (State must be Active, Physical state LinkUp), the cables and switch "
               "ports, and that a subnet manager answers (`sminfo`; RoCE: the switch port and `ethtool <netdev>`)",
               device=", ".join(f"{d.name}:{p.port}" for d in devs for p in d.ports))]


def check_net(node: NodeProbe) -> list[Finding]:
    """NCCL_NET must name a network that initialises here with a device, else NCCL init fails
    (``Error: network <name> not found``). Checked on every node, with or without RDMA."""
    net = node.settings.get("NCCL_NET")
    if net is None:
        return []
    n, ib, devs = classify_net(net), node.nccl_ib, node.facts.rdma_devices
    head = f"NCCL_NET={show(net)}{_src(node, 'NCCL_NET')}"
    drop = _undo_fix(node, [("NCCL_NET", None)])
    fails = f"NCCL init fails ('Error: network {net} not found' / 'Failed to initialize any NET plugin')"
    if n.kind == "ib" and not ib.ports:
        if ib.disabled_by:
            why, fix = f"{ib.disabled_by} turns the IB transport off", _undo_fix(node, [(v, "0") for v in ib.disablers])
        elif ib.usable:
            why, fix = f"NCCL_IB_HCA={show(ib.hca_value)} selects none of the active ports", _undo_fix(node, [("NCCL_IB_HCA", None)])
        elif devs and all(d.is_efa for d in devs):
            why, fix = "EFA devices are not IB devices (they need the aws-ofi-nccl plugin)", drop
        elif devs:
            why, fix = "no RDMA port is ACTIVE with an IB/Ethernet link layer", f"{drop} (or fix the ports: see ND209)"
        else:
            why, fix = "this node has no RDMA device (InfiniBand/RoCE)", drop
        return [_f("ND222", FAIL, node, f"{head} but {why}: {fails}", fix)]
    if n.kind == "typo":
        usable = n.meant != "IB" or bool(ib.usable)
        fix = _set_fix(node, "NCCL_NET", n.meant) if usable else drop
        return [_f("ND222", FAIL, node, f"{head} is not a network name NCCL knows (IB, Socket, or a plugin's name; "
                   f"did you mean {n.meant}?): {fails}", fix)]
    if n.kind == "plugin" and n.plugin in RDMA_PLUGIN_NETS and not ib.usable:
        return [_f("ND222", FAIL, node, f"{head}: that plugin (nccl-rdma-sharp-plugins) drives IB/RoCE ports and "
                   f"none is active here: {fails}", drop)]
    if n.kind == "plugin" and n.plugin in EFA_PLUGIN_NETS and not any(d.is_efa for d in devs):
        return [_f("ND222", WARN, node, f"{head}: aws-ofi-nccl uses EFA devices and there are none here; unless its "
                   f"libfabric provider is set to another one (FI_PROVIDER), {fails}", drop)]
    if n.kind == "unknown":
        return [_f("ND222", WARN, node, f"{head} is not a built-in network (IB, Socket) nor a known plugin name; "
                   f"if no installed plugin registers it, {fails}", drop)]
    return []


def net_fails(node: NodeProbe) -> bool:
    """True when NCCL_NET makes NCCL init fail on this node (an ND222 FAIL)."""
    return any(f.severity is FAIL for f in check_net(node))


def check_roce(node: NodeProbe) -> list[Finding]:
    out = []
    s = node.settings
    gid_idx = s.get("NCCL_IB_GID_INDEX")
    want_idx = parse_c_int(gid_idx)[0] if gid_idx is not None else -1
    want_type = "IB/RoCE v1" if s.get("NCCL_IB_ROCE_VERSION_NUM") == "1" else "RoCE v2"
    fam6 = s.get("NCCL_IB_ADDR_FAMILY") == "AF_INET6"
    for d in node.facts.rdma_devices:
        for p in d.ports:
            if not p.active or p.link_layer != "Ethernet":
                continue
            where = f"{d.name}:{p.port}"
            usable = [g for g in p.gids if g.type == want_type and (g.gid.startswith("0000:0000:0000:0000:0000:ffff:") != fam6)]
            if want_idx >= 0:
                g = next((g for g in p.gids if g.index == want_idx), None)
                if g is None:
                    out.append(_f("ND211", WARN, node, f"NCCL_IB_GID_INDEX={gid_idx} but RoCE port {where} has no GID at "
                                  f"index {want_idx}", _gid_fix(usable), device=where))
                elif g not in usable:
                    out.append(_f("ND211", WARN, node, f"NCCL_IB_GID_INDEX={gid_idx}: GID {g.gid} on {where} is "
                                  f"{g.type}, not an {'IPv6' if fam6 else 'IPv4'} {want_type} GID", _gid_fix(usable), device=where))
            elif not usable:
                out.append(_f("ND211", WARN, node, f"RoCE port {where} has no {want_type} "
                              f"{'IPv6' if fam6 else 'IPv4'} GID (is an IP address set on {', '.join(p.netdevs) or 'its netdev'}?)",
                              "assign an IP address to the RoCE netdev; check `show_gids`", device=where))
    return out


def _gid_fix(usable) -> str:
    return f"export NCCL_IB_GID_INDEX={usable[0].index}" if usable else "unset NCCL_IB_GID_INDEX"


def check_bonds(node: NodeProbe) -> list[Finding]:
    return [_f("ND212", WARN, node, f"bond {i.name} ({i.bond.mode}) has down slave(s) {', '.join(i.bond.down_slaves)} "
               f"of {', '.join(i.bond.slaves)}: it runs degraded", f"check links: cat /proc/net/bonding/{i.name}",
               iface=i.name)
            for i in node.facts.interfaces if i.bond and i.bond.down_slaves]


def check_gpus(node: NodeProbe) -> list[Finding]:
    out = []
    facts = node.facts
    for g in facts.gpus:
        if g.nearest_nic and g.pci.numa_node is not None and g.nearest_nic_numa is not None \
                and g.pci.numa_node != g.nearest_nic_numa:
            out.append(_f("ND213", WARN, node, f"GPU {g.pci.address} (NUMA {g.pci.numa_node}) has its nearest NIC "
                          f"{g.nearest_nic} on NUMA node {g.nearest_nic_numa} (path {g.pcie_distance}): GPUDirect RDMA "
                          "crosses the CPU interconnect", "place NICs and GPUs on the same socket, or accept lower "
                          "bandwidth", device=g.pci.address))
    rdma_live = any(p.active for d in facts.rdma_devices for p in d.ports)
    gdr = facts.gdr
    if facts.gpus and rdma_live and not gdr.peermem_module and not gdr.dmabuf_possible:
        why = "the nvidia module is not loaded" if not gdr.nvidia_loaded else \
            "no nvidia_peermem/nv_peer_mem module is loaded and DMA-BUF is not available " \
            f"(open kernel module: {gdr.open_kernel_module}, driver {gdr.driver_version}, kernel {gdr.kernel})"
        out.append(_f("ND214", WARN, node, f"GPUDirect RDMA prerequisites missing: {why}; NCCL will stage through "
                      "host memory (no /GDRDMA)", "modprobe nvidia_peermem (or use the open kernel module >= 515 "
                      "on kernel >= 5.12 for DMA-BUF)"))
    return out


def check_gloo(node: NodeProbe) -> list[Finding]:
    out = []
    g, best = node.gloo, best_socket_ifaces(node)
    fix = f"export GLOO_SOCKET_IFNAME={best[0]}" if best else "set GLOO_SOCKET_IFNAME to the inter-node interface"
    if g.rule == "GLOO_SOCKET_IFNAME":
        v = show(node.settings.get("GLOO_SOCKET_IFNAME") or "")
        for name in g.missing:
            close = [i.name for i in node.facts.interfaces if i.name.startswith(name.lstrip("^=")) and i.addresses]
            hint = f"; Gloo takes exact names only (did you mean {close[0]}?)" if close else ""
            out.append(_f("ND216", FAIL, node, f"GLOO_SOCKET_IFNAME={v}: no interface {name!r} with an address here"
                          f"{hint}: Gloo fails with 'Unable to find address for: {name}'", fix, iface=name))
        bad = _gloo_unreachable(node)
        rest = [n for n in g.ifaces if n not in g.missing and n not in dict(bad)]
        for name, why in bad:
            drop = f"export GLOO_SOCKET_IFNAME={','.join(rest)}" if rest else fix
            out.append(_f("ND216", WARN, node, f"GLOO_SOCKET_IFNAME={v}: {name} {why}: Gloo pairs over it cannot "
                          "reach other nodes and multi-node groups fail or hang", drop, iface=name))
    elif g.ifaces and all(i in ("lo", node.facts.loopback) for i in g.ifaces):
        out.append(_f("ND215", WARN, node, f"Gloo will bind loopback ({g.rule}): multi-node Gloo groups fail with "
                      "'Connection refused, remote=[127.0.0.1]'", fix, iface=g.ifaces[0]))
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
        elif i.kind == "loopback" or name == node.facts.loopback:
            out.append((name, "is the loopback interface"))
        elif i.kind == "virtual" and i.role != "data":
            out.append((name, f"is a virtual ({i.virtual_kind or 'virtual'}) interface, not this node's uplink"))
    return out


def check_env(node: NodeProbe) -> list[Finding]:
    out: list[Finding] = []
    s = node.settings
    for name, st in sorted(s.values.items()):
        if st.value == "":
            continue
        if name != name.strip():
            out += _spaced_name(node, st)
            continue
        out += _value_findings(node, st)
        out += _name_findings(node, st)
    if s.missing_conf_file:
        path = s.missing_conf_file
        rel = "" if path.startswith("/") else " (a relative path: NCCL opens it from the job's working directory)"
        out.append(_f("ND220", WARN, node, f"NCCL_CONF_FILE={path}: no such readable file{rel}; NCCL ignores it "
                      "silently, so none of its settings apply (and ~/.nccl.conf is not read instead)",
                      "point NCCL_CONF_FILE at the existing file, or unset NCCL_CONF_FILE", file=path))
    for path in s.conf_files:
        out.append(_conf_file_finding(node, path))
    return out


def _value_findings(node: NodeProbe, st: Setting) -> list[Finding]:
    """Values NCCL reads otherwise than the user meant (ND217, ND218) or that slow it down (ND221)."""
    out: list[Finding] = []
    name, v, src = st.name, st.value, _src(node, st.name)
    sv = show(v)
    if name in INT_VARS:
        n, ok = parse_c_int(v)
        if not ok:
            out.append(_not_integer(node, st, n))
    if name in ("NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL") and gdr_level(v) is None:
        up = f" (did you mean {v.upper()}?)" if v.upper() in ("LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS") else ""
        node_hint = " (NODE is an nvidia-smi term; NCCL calls it PHB)" if v.upper() == "NODE" else ""
        out.append(_f("ND218", WARN, node, f"{name}={sv}{src} is not a level NCCL knows (names are case-sensitive)"
                      f"{up}{node_hint}; NCCL ignores it and uses its default",
                      f"export {name}={v.upper() if up else 'PHB' if node_hint else 'PXB'}"))
    if name == "NCCL_DEBUG" and v.upper() not in DEBUG_LEVELS:
        out.append(_f("ND218", WARN, node, f"NCCL_DEBUG={sv}{src} is not one of {', '.join(DEBUG_LEVELS)}; NCCL "
                      "prints nothing extra", "export NCCL_DEBUG=INFO"))
    if name == "NCCL_CROSS_NIC" and parse_c_int(v)[1] and parse_c_int(v)[0] not in (0, 1, 2):
        out.append(_f("ND218", WARN, node, f"NCCL_CROSS_NIC={sv}{src}: valid values are 0, 1, 2 (default 2)",
                      _undo_fix(node, [(name, None)])))
    if name == "NCCL_P2P_DISABLE" and parse_c_int(v)[1] and parse_c_int(v)[0] not in (0, 1):
        out.append(_f("ND218", WARN, node, f"NCCL_P2P_DISABLE={sv}{src}: only 1 disables P2P; NCCL ignores {sv}",
                      _undo_fix(node, [(name, None)])))
    if name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE") and parse_c_int(v) == (1, True):
        what = "NVLink/PCIe peer-to-peer" if name == "NCCL_P2P_DISABLE" else "the shared-memory transport"
        out.append(_f("ND221", WARN, node, f"{name}=1{src} turns off {what} inside the node: intra-node "
                      "collectives slow down a lot", _undo_fix(node, [(name, "0")])))
    return out


def _not_integer(node: NodeProbe, st: Setting, n: int) -> Finding:
    """ND217. The obvious fix for a ``*_DISABLE`` flag is ``=1``, unless this tool would then flag that
    (IB off with active ports, P2P off): then back to the default, as ND207/ND221 say."""
    name, src = st.name, _src(node, st.name)
    meaning = f"NCCL reads it as {n}"
    if name.endswith("_DISABLE") and n == 0:
        meaning += f": {name.removesuffix('_DISABLE').removeprefix('NCCL_')} stays ENABLED"
    if "#" in st.value and st.source != "environment":
        meaning += " (nccl.conf has no end-of-line comments: '#' starts a comment only in column 0)"
    if not name.endswith("_DISABLE"):
        return _f("ND217", WARN, node, f"{name}={show(st.value)}{src} is not an integer; {meaning}",
                  _undo_fix(node, [(name, None)]))
    bad = _rejected(node, name, "1")
    if bad is not None:
        meaning += f"; {name}=1 would be flagged too ({bad.code})"
    fix = _undo_fix(node, [(name, "0")]) if bad is not None else _set_fix(node, name, "1")
    return _f("ND217", WARN, node, f"{name}={show(st.value)}{src} is not an integer; {meaning}", fix,
              file=_conf_file(node, name))


def _name_findings(node: NodeProbe, st: Setting) -> list[Finding]:
    """ND219: names NCCL (or torch's Gloo) does not read: deprecated, ignored, or misspelt."""
    name, v = st.name, st.value
    if not name.startswith(("NCCL_", "GLOO_")) or name in INT_VARS:
        return []
    if name in DEPRECATED_TORCH:
        return [_f("ND219", WARN, node, f"{name}{_src(node, name)} is the pre-2.2 PyTorch name (deprecated)",
                   f"export TORCH_{name}={show(v)}; " + _undo_fix(node, [(name, None)]))]
    if name in NOT_READ:
        return [_f("ND219", WARN, node, f"{name}{_src(node, name)} is not read by NCCL: {NOT_READ[name]}",
                   _undo_fix(node, [(name, None)]))]
    guess = did_you_mean(name)
    if not guess:
        return []
    what = "a Gloo" if name.startswith("GLOO_") else "an NCCL"
    return [_renamed(node, st, guess, v, f"{name}{_src(node, name)} is not {what} variable; did you mean {guess}?")]


def _spaced_name(node: NodeProbe, st: Setting) -> list[Finding]:
    """``NAME = value`` in nccl.conf: NCCL's setEnvFile keeps the spaces, so it sets a variable named
    ``'NAME '`` (value ``' value'``) that nothing reads."""
    bare = st.name.strip()
    if not bare.startswith(("NCCL_", "GLOO_")):
        return []
    where = f"{st.source} line {st.line}" if st.source != "environment" else "the environment"
    head = (f"spaces around '=' in {where} ({st.name}={st.value}): NCCL sets a variable named {st.name!r} to "
            f"{st.value!r}, which nothing reads, so {bare} is not set by it; write {bare}={st.value.strip()}")
    return [_renamed(node, st, bare, st.value.strip(), head)]


def _renamed(node: NodeProbe, st: Setting, target: str, value: str, head: str) -> Finding:
    """ND219 for a name nothing reads that stands for ``target``. The fix renames it only when that is
    safe: ``target`` is not already set, and this tool would not flag ``target=value``; else it only
    removes the wrong name. A conf file line is changed in the file."""
    conf = st.source != "environment"
    other = node.settings.values.get(target)
    bad = None
    if other is not None and other.value != "":
        head += f" ({target} is already set to {show(other.value)}{_src(node, target)}: just remove {st.name.strip()})"
    else:
        bad = _rejected(node, target, value, drop=st.name)
        if bad is not None:
            head += f" (but {target}={show(value)} would itself be flagged here: {bad.code} {bad.message})"
    if other is not None and other.value != "" or bad is not None:
        fix = f"delete line {st.line} of {st.source}" if conf else f"unset {st.name}"
        if bad is not None and bad.fix and f"{target}=" in bad.fix:  # a value that works, not just "unset"
            fix += f" (for {target}, {bad.code} suggests: {bad.fix})"
    elif conf:
        fix = f"change line {st.line} of {st.source} to {target}={value}"
    else:
        fix = f"export {target}={value}; unset {st.name}"
    return _f("ND219", WARN, node, head, fix, file=st.source if conf else None)


def _conf_file_finding(node: NodeProbe, path: str) -> Finding:
    """ND220: what a conf file sets; quotes and CRLF line ends are kept in the values by NCCL."""
    mine = [st for st in node.settings.values.values() if st.source == path]
    quoted = [st for st in mine if st.value[:1] in ("'", '"')]
    crlf = [st for st in mine if st.value.endswith("\r")]
    shown = [show(f"{st.name}={st.value}") if st.name != st.name.strip() else f"{st.name}={show(st.value)}" for st in mine]
    msg = f"{path} sets {', '.join(shown) or 'nothing new'}"
    fixes = []
    if quoted:
        msg += " (values are taken verbatim: the quotes are part of the value)"
        fixes.append(f"remove the quotes in {path}")
    if crlf:
        msg += ("; the file has Windows (CRLF) line ends and NCCL keeps the carriage return (\\r) at the end of "
                f"{', '.join(st.name for st in crlf)}, so those values match or mean nothing")
        fixes.append(f"convert the file: sed -i 's/\\r$//' {path} (or dos2unix {path})")
    return _f("ND220", WARN if fixes else PASS, node, msg, "; ".join(fixes) or None, file=path)


def no_interface_code(node: NodeProbe) -> str | None:
    """The finding that explains why NCCL has no socket interface (None when it has one)."""
    sc = node.nccl_socket
    if sc.ifaces:
        return None
    if sc.user_value is None:
        return "ND224"
    return "ND203" if sc.matched_not_running else "ND202"


def cannot_start(node: NodeProbe) -> str | None:
    """Why NCCL cannot start on this node at all (and which finding says so); None when it can."""
    why = no_interface_code(node)
    if why:
        return f"NCCL cannot bootstrap: no interface selected (see {why})"
    if net_fails(node):
        return f"NCCL init fails: NCCL_NET={node.settings.get('NCCL_NET')} is not usable here (see ND222)"
    return None


def nccl_line(node: NodeProbe) -> str:
    """One phrase for what NCCL will do between nodes; never reads as fine when it cannot start."""
    sc = node.nccl_socket
    return cannot_start(node) or f"NCCL bootstrap: {sc.bootstrap} ({sc.rule}); inter-node data: {_data_path(node)[1]}"


def _data_path(node: NodeProbe) -> tuple[str, str]:
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
        return ("plugin (aws-ofi-nccl, if installed) else Socket",
                f"aws-ofi-nccl (Libfabric) over EFA {', '.join(efa[:4])}{', ...' if len(efa) > 4 else ''} if that "
                f"plugin is installed, else {sockets}")
    return "Socket", sockets


def check_summary(node: NodeProbe) -> list[Finding]:
    """The PASS line saying what NCCL and Gloo will use. When NCCL has no interface there is nothing
    to summarise: the failing finding (ND202/ND203/ND224, or ND222 when NCCL_NET cannot initialise)
    says it, and the report summary repeats it."""
    if no_interface_code(node) or net_fails(node):
        return []
    g = node.gloo
    msg = f"{nccl_line(node)}; Gloo: {', '.join(g.ifaces) or 'unknown'} ({g.rule})"
    return [_f("ND200", PASS, node, msg)]


CHECKS = (check_summary, check_socket, check_names, check_rdma, check_net, check_bonds, check_gpus, check_gloo, check_env)


def check(node: NodeProbe) -> list[Finding]:
    """All probe findings for one node."""
    return [f for chk in CHECKS for f in chk(node)]


# ---------------------------------------------------------------------------------------------------
# Exports and report
# ---------------------------------------------------------------------------------------------------


def exports(node: NodeProbe) -> list[str]:
    """Shell lines that make NCCL and Gloo use the right interfaces on this node."""
    lines = []
    s, ib = node.settings, node.nccl_ib
    best = best_socket_ifaces(node)
    for name in ib.disablers:
        if _conf_origin(node, name) is None or ib.usable:
            lines.append(_undo_line(node, name, IB_ON[name]))
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"):
        if s.get(name) is not None and s.get(name) != "0":
            lines.append(_undo_line(node, name, "0"))
    if best:
        lines.append(f"export NCCL_SOCKET_IFNAME=={','.join(best)}")
    healthy = _healthy_ports(node)
    if healthy:
        lines.append(f"export NCCL_IB_HCA=={','.join(healthy)}")
        roce = _roce_gid_index(node)
        if roce is not None:
            lines.append(f"export NCCL_IB_GID_INDEX={roce}")
    if best:
        lines.append(f"export GLOO_SOCKET_IFNAME={best[0]}")
    return lines


def _undo_line(node: NodeProbe, name: str, default: str) -> str:
    """``unset`` where only the environment sets it; over a nccl.conf value (NCCL rereads the file and
    the environment wins) export the default instead."""
    conf = _conf_origin(node, name)
    if conf is None:
        return f"unset {name}"
    return f"export {name}={default}  # overrides {name}={show(conf.value)} in {conf.source} line {conf.line}"


def _healthy_ports(node: NodeProbe) -> list[str]:
    ports = [(d, p) for d in node.facts.rdma_devices for p in d.ports
             if p.active and p.link_layer in ("InfiniBand", "Ethernet")]
    if not ports:
        return []
    top = max((p.rate_gbps or 0) for _, p in ports)
    keep = [f"{d.name}:{p.port}" for d, p in ports if (p.rate_gbps or 0) >= top]
    order = {name: k for k, name in enumerate(node.nccl_ib.usable)}
    return sorted(keep, key=lambda n: order.get(n, 0))


def _roce_gid_index(node: NodeProbe) -> int | None:
    idx = None
    for d in node.facts.rdma_devices:
        for p in d.ports:
            if p.active and p.link_layer == "Ethernet":
                v2 = [g.index for g in p.gids if g.type == "RoCE v2" and g.gid.startswith("0000:0000:0000:0000:0000:ffff:")]
                if not v2 or (idx is not None and v2[0] != idx):
                    return None
                idx = v2[0]
    return idx


def _iface_dict(i: Interface, node: NodeProbe) -> dict[str, Any]:
    d = asdict(i)
    d["addresses"] = [str(a) for a in i.addresses]
    d["numa_node"] = i.numa_node
    d["pci"] = i.pci.address if i.pci else None
    d["nccl"] = ("bootstrap" if i.name == node.nccl_socket.bootstrap else
                 "socket" if i.name in node.nccl_socket.ifaces else None)
    return d


def node_dict(node: NodeProbe) -> dict[str, Any]:
    """The probe's JSON keys (also what preflight collects per node)."""
    f = node.facts
    return {
        "host": f.host,
        "root": node.root,
        "interfaces": [_iface_dict(i, node) for i in f.interfaces],
        "rdma_devices": [asdict(d) for d in f.rdma_devices],
        "gpus": [asdict(g) for g in f.gpus],
        "gdr": asdict(f.gdr),
        "default_route": f.default_route_ifaces,
        "default_route6": f.default_route6_ifaces,
        "unattributed_addresses": f.unattributed_addresses,
        "nccl": {
            "socket_ifaces": node.nccl_socket.ifaces,
            "bootstrap_iface": node.nccl_socket.bootstrap,
            "socket_rule": node.nccl_socket.rule,
            "ib_devices": node.nccl_ib.ports,
            "ib_usable": node.nccl_ib.usable,
            "ib_disabled_by": node.nccl_ib.disabled_by,
            "transport": _transport(node),
        },
        "gloo_iface": node.gloo.ifaces[0] if node.gloo.ifaces else None,
        "gloo": asdict(node.gloo),
        "settings": {k: {"value": v.value, "source": v.source} for k, v in sorted(node.settings.values.items())},
        "conf_files": node.settings.conf_files,
        "exports": exports(node),
    }


def _transport(node: NodeProbe) -> str:
    """The network NCCL will use between nodes: IB, Socket, or a plugin (EFA needs aws-ofi-nccl)."""
    net = node.settings.get("NCCL_NET")
    if net is not None and net_fails(node):
        return f"none (NCCL_NET={show(net)} is not usable here: init fails)"
    return _data_path(node)[0]


def _rdma_cell(i: Interface) -> str:
    return "; ".join(f"{r['device']}:{r['port']} {r['state']} {r['rate'] or '?'} {r['link_layer']}" for r in i.rdma)


def interface_table(node: NodeProbe) -> Table:
    rows = []
    for i in node.facts.interfaces:
        chosen = ("bootstrap" if i.name == node.nccl_socket.bootstrap else
                  "socket" if i.name in node.nccl_socket.ifaces else "")
        detail = ", ".join(x for x in ((i.virtual_kind if i.kind == "virtual" else None),
                                       ("uplink" if i.kind == "virtual" and i.role == "data" else None)) if x)
        rows.append((i.name, i.kind + (f" ({detail})" if detail else ""),
                     i.operstate, _fmt_speed(i) if link_mbps(i) else "-", str(i.mtu or "-"),
                     " ".join(str(a) for a in i.addresses if a.scope != "link") or "-", _rdma_cell(i) or "-",
                     "-" if i.numa_node is None else str(i.numa_node), chosen))
    return Table(title=f"Interfaces on {node.host}", columns=("interface", "kind", "state", "speed", "MTU",
                 "addresses", "RDMA dev:port state rate link", "NUMA", "NCCL"), rows=tuple(rows))


def probe_report(node: NodeProbe, findings: list[Finding] | None = None) -> Report:
    findings = check(node) if findings is None else findings
    data = node_dict(node)
    tables = [interface_table(node)]
    if node.facts.gpus:
        tables.append(Table(title="GPUs", columns=("GPU", "NUMA", "nearest NIC", "NIC NUMA", "path"), rows=tuple(
            (g.pci.address, str(g.pci.numa_node), g.nearest_nic or "-", str(g.nearest_nic_numa), g.pcie_distance or "-")
            for g in node.facts.gpus)))
    notes = ["Recommended exports for this node:"] + [f"  {line}" for line in data["exports"]]
    return Report(command="probe", findings=findings, data=data, tables=tables, notes=notes,
                  summary=_summary(node))


def _summary(node: NodeProbe) -> str:
    said = cannot_start(node) or f"NCCL bootstrap {node.nccl_socket.bootstrap}, transport {_transport(node)}"
    return f"{node.host}: {said}"


# ---------------------------------------------------------------------------------------------------
# Command entry
# ---------------------------------------------------------------------------------------------------
