"""Shared by the probe tests: findings by code, fixture roots with an nccl.conf, what a shell holds after
the recommended exports, and the script that compares the probe's view of a live node with psutil's."""

from __future__ import annotations

import shlex
from pathlib import Path

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.model import NodeProbe
from nccl_doctor.report import Finding
from tests.helpers import sysfs_builder as b

ENV = {"HOME": "/nonexistent"}


def codes(root: Path, env: dict[str, str] | None = None, sev: str | None = None) -> set[str]:
    """The finding codes on ``root`` under ``env`` (only those of severity ``sev`` when given)."""
    fs = check(probe_node(root, {"HOME": "/root", **(env or {})}))
    return {f.code for f in fs if sev is None or f.severity.value == sev}


def first(node: NodeProbe, code: str, sev: str | None = None) -> Finding:
    """The first ``code`` finding (of severity ``sev``) on ``node``; fails naming what was found instead."""
    got = [f for f in check(node) if f.code == code and (sev is None or f.severity.value == sev)]
    assert got, f"no {code} {sev or ''} in {[(f.code, f.severity.value) for f in check(node)]}"
    return got[0]


def dgx_conf(tmp_path: Path, text: str) -> Path:
    """dgx_h100 with ``text`` as /etc/nccl.conf."""
    spec = b.dgx_h100()
    spec["files"] = {"/etc/nccl.conf": text}
    return b.build(spec, tmp_path)


def apply_exports(env: dict[str, str], lines: list[str]) -> dict[str, str]:
    """What a shell would hold after running the exports block (comments ignored)."""
    env = dict(env)
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:1] == ["unset"]:
            env.pop(words[1], None)
        elif words[:1] == ["export"]:
            name, _, value = words[1].partition("=")
            env[name] = value
    return env


# Runs in whatever network namespace it is started in: the probe's view (files) and the live view
# (psutil + netifaces, i.e. ioctl/netlink) of every interface, as JSON.
CROSS_CHECK = r"""
import json, socket, psutil, netifaces
from nccl_doctor.node import probe_node
node = probe_node("/", {})
files = {i.name: {"v4": sorted(str(a) for a in i.addresses if a.family == "inet"),
                  "v6": sorted(a.address for a in i.addresses if a.family == "inet6"),
                  "mtu": i.mtu, "running": i.running, "speed": i.speed_mbps}
         for i in node.facts.interfaces}
stats, addrs = psutil.net_if_stats(), psutil.net_if_addrs()
def plen(mask):
    return bin(int.from_bytes(socket.inet_pton(socket.AF_INET, mask), "big")).count("1")
live = {}
for name, st in stats.items():
    a = addrs.get(name, [])
    live[name] = {"v4": sorted(f"{x.address}/{plen(x.netmask)}" for x in a if x.family == socket.AF_INET),
                  "v6": sorted(x.address.split("%")[0] for x in a if x.family == socket.AF_INET6),
                  "mtu": st.mtu, "running": st.isup, "speed": st.speed or None}
gw = netifaces.gateways().get("default", {})
print(json.dumps({"files": files, "live": live,
                  "default_files": node.facts.default_route_ifaces[:1],
                  "default_live": [gw[netifaces.AF_INET][1]] if netifaces.AF_INET in gw else [],
                  "netifaces_v4": {n: sorted(x["addr"] for x in netifaces.ifaddresses(n).get(netifaces.AF_INET, []))
                                   for n in netifaces.interfaces()}}))
"""


def assert_views_agree(doc):
    files, live = doc["files"], doc["live"]
    assert set(files) == set(live)
    for name in files:
        f, seen = files[name], live[name]
        if not seen["running"]:  # a down interface has no routes: its IPv4 addresses are not in procfs
            f, seen = {**f, "v4": None}, {**seen, "v4": None}
        assert f == seen, name
        if f["v4"] is not None:
            assert [a.split("/")[0] for a in f["v4"]] == doc["netifaces_v4"].get(name, []), name
    assert doc["default_files"] == doc["default_live"]
