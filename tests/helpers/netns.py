"""Network-namespace "nodes" for real multi-node tests (root only).

Topology (platform.md, recipe b): a switch namespace ``<prefix>-sw`` holding bridge ``br0``; node
namespaces ``<prefix>-n<i>``, each with a veth ``eth1`` at ``198.18.0.<i>/24`` whose peer ``sw-n<i>`` is a
bridge port. Every node gets its own hostname (``n<i>`` by default, via ``unshare --uts``) and an
``/etc/netns/<ns>/hosts`` that resolves every node name, so plain ``torchrun --rdzv-endpoint=n1:PORT``
works as on a real cluster. Nothing is created in the root namespace except the ``/etc/netns`` files;
``down()`` removes everything, and is safe to call twice.

    with Cluster(3) as c:
        c.throttle(c.nodes[1], "200mbit")
        procs = [c.popen(n, ["python", "-m", "nccl_doctor", "bench", ...]) for n in c.nodes]

Addresses come from 198.18.0.0/15 only and exist only inside these namespaces.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers import poll

NETNS_ETC = Path("/etc/netns")


def can_use_netns() -> str | None:
    """None when namespaces can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (runs in CI as root)"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "needs iproute2 `ip` and util-linux `unshare`"
    return None


def _link_up(node: Node) -> bool:
    state = sh("ip", "netns", "exec", node.ns, "cat", f"/sys/class/net/{node.iface}/operstate", check=False)
    return state.stdout.strip() == "up"


def sh(*argv: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """Run a setup command; raise with its stderr on failure."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc


@dataclass
class Node:
    index: int
    name: str
    ns: str
    addr: str
    iface: str = "eth1"
    switch_port: str = ""
    extra_hosts: dict[str, str] = field(default_factory=dict)


LINK_UP_S = 10.0  # for a node's veth to read operstate up
SHARED_IFINDEX = 4000  # above anything the kernel numbers in a fresh namespace of a few dozen links


class Cluster:
    """``n`` namespace nodes on one bridge. Use as a context manager: teardown runs in ``finally``."""

    def __init__(self, n: int, *, prefix: str | None = None, subnet: str = "198.18.0",
                 hostnames: list[str] | None = None, iface: str = "eth1") -> None:
        self.prefix = prefix or f"ncd{uuid.uuid4().hex[:6]}"
        self.switch = f"{self.prefix}-sw"
        names = hostnames or [f"n{i}" for i in range(1, n + 1)]
        self.nodes = [
            Node(index=i, name=names[i - 1], ns=f"{self.prefix}-n{i}", addr=f"{subnet}.{i}", iface=iface,
                 switch_port=f"sw-n{i}")
            for i in range(1, n + 1)
        ]
        self.subnet = subnet

    # --- lifecycle -----------------------------------------------------------------------------
    def up(self) -> Cluster:
        try:
            sh("ip", "netns", "add", self.switch)
            sh("ip", "-n", self.switch, "link", "set", "lo", "up")
            sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", "br0", "up")
            for node in self.nodes:
                sh("ip", "netns", "add", node.ns)
                sh("ip", "-n", node.ns, "link", "set", "lo", "up")
                # node 1's veth and its switch port share one ifindex, each in its own namespace, as a
                # pod's eth0 and its host-side peer can: sysfs cannot tell that veth from other virtual
                # Ethernet (iflink == ifindex), and a healthy cluster must not read it as a NIC that differs
                same = ["index", str(SHARED_IFINDEX)] if node.index == 1 else []
                sh("ip", "-n", node.ns, "link", "add", node.iface, *same, "type", "veth",
                   "peer", "name", node.switch_port, *same, "netns", self.switch)
                sh("ip", "-n", self.switch, "link", "set", node.switch_port, "master", "br0", "up")
                sh("ip", "-n", node.ns, "addr", "add", f"{node.addr}/24", "dev", node.iface)
                sh("ip", "-n", node.ns, "link", "set", node.iface, "up")
            self.write_hosts()
            self.wait_links_up()
        except BaseException:
            self.down()
            raise
        return self

    def wait_links_up(self) -> None:
        """Until every node's link reads ``up`` in its sysfs, as a booted node's does: the kernel turns the
        operstate up a moment after the carrier, and a probe in that moment saw node 1's eth1 down (ND206
        "NCCL will use lo", ND403), a harness artefact no cluster has."""
        for node in self.nodes:
            if not poll.until(lambda node=node: _link_up(node), LINK_UP_S, interval_s=0.05):
                raise RuntimeError(f"{node.name}: {node.iface} did not come up within {LINK_UP_S} s")

    def write_hosts(self) -> None:
        """``/etc/netns/<ns>/hosts``: ``ip netns exec`` bind-mounts it over /etc/hosts."""
        lines = ["127.0.0.1 localhost"] + [f"{n.addr} {n.name}" for n in self.nodes]
        for node in self.nodes:
            lines += [f"{addr} {name}" for name, addr in node.extra_hosts.items()]
        for node in self.nodes:
            d = NETNS_ETC / node.ns
            d.mkdir(parents=True, exist_ok=True)
            (d / "hosts").write_text("\n".join(lines) + "\n")

    def down(self) -> None:
        for ns in [n.ns for n in self.nodes] + [self.switch]:
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
        try:
            NETNS_ETC.rmdir()  # only when empty: other runs may be using it
        except OSError:
            pass

    def __enter__(self) -> Cluster:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    # --- running things ------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def argv(self, node: Node, argv: list[str]) -> list[str]:
        """``argv`` run inside ``node``: its netns, its own hostname, its /etc/hosts."""
        return ["ip", "netns", "exec", node.ns, "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', node.name, *argv]

    def popen(self, node: Node, argv: list[str], *, env: dict[str, str] | None = None,
              **kw: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.argv(node, argv), env=env, **kw)

    def run(self, node: Node, argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 60,
            check: bool = False, **kw: Any) -> subprocess.CompletedProcess[Any]:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.argv(node, argv), env=env, timeout=timeout, check=check, **kw)

    # --- shaping the network -------------------------------------------------------------------
    def throttle(self, node: Node, rate: str = "200mbit", *, burst: str = "64kb", latency: str = "50ms") -> None:
        """Slow ``node``'s link in both directions: tbf shapes egress only, so shape both veth ends."""
        for ns, dev in ((node.ns, node.iface), (self.switch, node.switch_port)):
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
               "rate", rate, "burst", burst, "latency", latency)

    def unthrottle(self, node: Node) -> None:
        for ns, dev in ((node.ns, node.iface), (self.switch, node.switch_port)):
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)

    def add_link(self, a: Node, b: Node, name: str, addr_a: str, addr_b: str, *, prefixlen: int = 30) -> None:
        """A direct veth named ``name`` (e.g. ``ib0``) between two nodes, addresses in 198.18.0.0/15."""
        sh("ip", "-n", a.ns, "link", "add", name, "type", "veth", "peer", "name", name, "netns", b.ns)
        for node, addr in ((a, addr_a), (b, addr_b)):
            sh("ip", "-n", node.ns, "addr", "add", f"{addr}/{prefixlen}", "dev", name)
            sh("ip", "-n", node.ns, "link", "set", name, "up")


def communicate_or_kill(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``p``'s output within ``timeout``; past it the process is killed and what it wrote so far returned."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()


def leftovers(prefix: str) -> list[str]:
    """Namespaces still named with ``prefix``: a test asserts this is empty after teardown."""
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]
