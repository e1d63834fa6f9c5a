"""Cross-node consistency: what each node would bring to the job, and what differs between nodes.

A node is summed up as a flat ``{key: value}`` dict (``node_facts``): library versions, the effective
``NCCL_*``/``GLOO_*`` settings, the NIC inventory with link rates, the net plugin. ``compare`` groups
nodes by value per key and reports only keys where nodes disagree, naming the nodes on each side:
one node with a different NCCL or a missing IB port is exactly what a bandwidth number cannot explain.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence

from nccl_doctor.codes import Code
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.model import InterfaceKind, NodeFacts, NodeProbe, VirtualKind
from nccl_doctor.report import Finding, Severity, finding, hosts_text, plural

UNSET = "(unset)"
EVIDENCE_HOSTS = 4  # hosts named per value in a finding's evidence
VALUES_SHOWN = 4  # values named in a finding's message, largest groups first; the rest as one count and hostlist

# Settings expected to differ per node or per run: never reported.
PER_NODE_ENV = {"NCCL_DEBUG_FILE", "NCCL_COMM_ID", "NCCL_HOSTID", "NCCL_DOCTOR_STAGE_DIR",
                "NCCL_DOCTOR_LAUNCH_NOTES", "NCCL_DOCTOR_RUN"}

# Virtual interfaces that still say something about a node's network (bridges, tunnels do not). A veth
# whose peer has the same ifindex in its own namespace reads as plain virtual Ethernet: it is compared
# too, or the one node where the kernel's numbering happened to coincide (node 0 of every namespace run,
# a pod here and there) would lack the NIC all the others have (ND403 on a healthy cluster).
COMPARED_VIRTUAL = (VirtualKind.VETH, VirtualKind.VIRTUAL_ETHERNET, VirtualKind.BOND, VirtualKind.VLAN)
# Where NCCL looks for a net plugin after LD_LIBRARY_PATH.
PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/local/lib")

Kind = tuple[Code, Severity, str, str]  # (code, severity, what it is, fix)

# key prefix -> what a difference under it means
KINDS: dict[str, Kind] = {
    "version.": (Code.VERSION_MISMATCH, Severity.FAIL, "version",
                 "install the same torch/NCCL/CUDA build on every node (one container image or venv)"),
    "driver.": (Code.VERSION_MISMATCH, Severity.WARN, "driver",
                "update the GPU driver on the odd nodes (or drain them) so every node runs one driver"),
    "env.": (Code.SETTING_MISMATCH, Severity.WARN, "setting",
             "export the same value on every node in the job script (or set it in /etc/nccl.conf everywhere)"),
    "nic.": (Code.NIC_MISMATCH, Severity.WARN, "NIC",
             "check the odd nodes' links (`ip link`, `ibstat`) and cabling, or drain them"),
    "plugin.": (Code.NET_PLUGIN_MISMATCH, Severity.FAIL, "net plugin",
                "install the same NCCL net plugin on every node, or unset NCCL_NET_PLUGIN everywhere"),
}


def node_facts(node: NodeProbe, env: Mapping[str, str], *, versions: Mapping[str, str],
               host: str | None = None) -> dict[str, str]:
    """This node's comparable facts, from the probe already made (so sysfs is read once), ``env``, and
    ``versions`` (``version.torch``/``.cuda``/``.nccl``: the caller, a torch process, reads them; this
    package never imports torch)."""
    facts: dict[str, str] = {"host": host or node.host or socket.gethostname()}
    facts.update(versions)
    facts["driver.nvidia"] = _driver(node)
    facts.update(_settings(node))
    facts.update(_nics(node.facts))
    facts["plugin.net"] = _net_plugin(env)
    return facts


def _driver(node: NodeProbe) -> str:
    """The full driver version (``550.54.15``), read under the probe's root (a snapshot's too)."""
    return (FsReader(node.root).read("/sys/module/nvidia/version") or "").strip() or "none"


def _settings(node: NodeProbe) -> dict[str, str]:
    return {f"env.{name}": s.value for name, s in node.settings.values.items()
            if name.startswith(("NCCL_", "GLOO_")) and name not in PER_NODE_ENV}


def _nics(facts: NodeFacts) -> dict[str, str]:
    """Data NICs (not loopback, not bridges/tunnels) with kind, state and rate, plus RDMA ports, from
    classified facts."""
    out = {}
    for i in facts.interfaces:
        if i.kind == InterfaceKind.LOOPBACK or (i.virtual and i.virtual_kind not in COMPARED_VIRTUAL):
            continue
        speed = f"{i.speed_mbps} Mb/s" if i.speed_mbps else "speed unknown"
        out[f"nic.{i.name}"] = f"{i.kind}, {i.operstate}, {speed}"
    for dev in facts.rdma_devices:
        for p in dev.ports:
            out[f"nic.{dev.name}:{p.port}"] = f"{p.link_layer}, {p.state}, {p.rate or 'rate unknown'}"
    return out


def _net_plugin(env: Mapping[str, str]) -> str:
    """The plugin NCCL would load: NCCL_NET_PLUGIN, else the first libnccl-net*.so on the library path."""
    if env.get("NCCL_NET_PLUGIN"):
        return f"NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']}"
    for d in [*(env.get("LD_LIBRARY_PATH") or "").split(":"), *PLUGIN_DIRS]:
        try:
            names = sorted(n for n in os.listdir(d) if n.startswith("libnccl-net") and ".so" in n)
        except OSError:
            continue
        if names:
            return os.path.join(d, names[0])
    return "none"


def _kind(key: str) -> Kind | None:
    return next((v for prefix, v in KINDS.items() if key.startswith(prefix)), None)


RANKS_FIX = ("start the same number of ranks on every node: request the same GPUs per node (`--gpus-per-node`) "
             "and check what the odd nodes see (`nvidia-smi -L`, CUDA_VISIBLE_DEVICES), or pass one "
             "--nproc-per-node to every node; drain a node that lost a GPU")


def majority_first(counts: Mapping[int, list[str]]) -> list[tuple[int, list[str]]]:
    """Rank counts with their hosts, the most common first; on a tie the larger count first, so the nodes
    with fewer ranks (a lost GPU, a short CUDA_VISIBLE_DEVICES: the usual cause) are the odd ones."""
    return sorted(counts.items(), key=lambda kv: (-len(kv[1]), -kv[0]))


def compare_ranks(nodes: Sequence[Mapping[str, str]]) -> list[Finding]:
    """Ranks per node (``ranks.per_node``, set by preflight with its cause in ``ranks.source``): ranks are
    numbered node * count + local, so nodes that disagree would collide instead of failing cleanly."""
    groups: dict[str, list[str]] = {}
    causes: dict[str, set[str]] = {}
    for n in nodes:
        if "ranks.per_node" in n:
            value = n["ranks.per_node"]
            groups.setdefault(value, []).append(n.get("host", "?"))
            causes.setdefault(value, set()).add(n.get("ranks.source", "?"))
    if len(groups) < 2:
        return []
    ordered = [(str(v), h) for v, h in majority_first({int(k) if k.isdigit() else 0: h for k, h in groups.items()})]
    sides = "; ".join(f"{v} on {hosts_text(h)} ({', '.join(sorted(causes[v]))})" for v, h in ordered)
    odd = [h for _, hosts in ordered[1:] for h in hosts]
    return [finding(Code.RANK_COUNT_MISMATCH, Severity.FAIL, f"ranks per node differ across nodes: {sides}; no rank "
                    "was started", RANKS_FIX, host=hosts_text(odd),
                    evidence=[f"{h}: {v} ranks" for v, hosts in ordered for h in hosts[:EVIDENCE_HOSTS]])]


def compare(nodes: Sequence[Mapping[str, str]]) -> list[Finding]:
    """One finding per key whose value is not the same on every node (a missing key reads ``(unset)``).

    The message names the values with their nodes, largest group first, so the odd ones stand out: the
    first ``VALUES_SHOWN``, then the rest as a count on their hostlist (1,024 values would be no line)."""
    if len(nodes) < 2:
        return []
    keys = sorted({k for n in nodes for k in n if _kind(k)})
    return compare_ranks(nodes) + [f for key in keys if (f := _differs(nodes, key)) is not None]


def _differs(nodes: Sequence[Mapping[str, str]], key: str) -> Finding | None:
    """The finding for one key, when nodes disagree on it."""
    kind = _kind(key)
    groups: dict[str, list[str]] = {}
    for n in nodes:
        groups.setdefault(n.get(key, UNSET), []).append(n.get("host", "?"))
    if kind is None or len(groups) < 2:
        return None
    code, severity, what, fix = kind
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    name = key.split(".", 1)[1]
    odd = [h for _, hosts in ordered[1:] for h in hosts]
    return finding(code, severity, f"{what} {name} differs across nodes: {value_sides(ordered)}", fix,
                   host=hosts_text(odd), iface=name if what == "NIC" else None,
                   evidence=[f"{h}: {name}={value}" for value, hosts in [*ordered[1:], *ordered[:1]]
                             for h in hosts[:EVIDENCE_HOSTS]])


def value_sides(ordered: Sequence[tuple[str, Sequence[str]]]) -> str:
    """``2.21.5 on n[1-3]; 2.18.1 on n4``: the first ``VALUES_SHOWN`` values with their nodes, then
    ``and 7 more values on n[5-11]``."""
    shown = "; ".join(f"{value} on {hosts_text(hosts)}" for value, hosts in ordered[:VALUES_SHOWN])
    rest = ordered[VALUES_SHOWN:]
    if not rest:
        return shown
    return f"{shown}; and {plural(len(rest), 'more value')} on {hosts_text(h for _, hosts in rest for h in hosts)}"
