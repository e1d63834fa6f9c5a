"""probe in network namespaces the test creates (root): the files agree with psutil and netifaces, and
NCCL's choice among a veth named ib0, a bridge and loopback is judged as it should be."""

import json
import sys

import pytest

from tests.helpers.netns import sh
from tests.helpers.probing import CROSS_CHECK, assert_views_agree


@pytest.fixture
def fake_node(cluster_factory):
    """Node n1: veth ``eth0`` (default route), veth ``ib0``, bridge ``docker0``; all in 198.18.0.0/15."""
    c = cluster_factory(2, iface="eth0")
    n1, n2 = c.nodes
    c.add_link(n1, n2, "ib0", "198.19.0.1", "198.19.0.2")
    sh("ip", "-n", n1.ns, "link", "add", "docker0", "type", "bridge")
    sh("ip", "-n", n1.ns, "addr", "add", "198.18.200.1/24", "dev", "docker0")
    sh("ip", "-n", n1.ns, "link", "set", "docker0", "up")
    sh("ip", "-n", n1.ns, "route", "add", "default", "via", n2.addr, "dev", "eth0")
    return c, n1


@pytest.mark.netns
def test_files_match_psutil_and_netifaces_in_netns(fake_node):
    c, n1 = fake_node
    p = c.run(n1, [sys.executable, "-c", CROSS_CHECK], timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert set(doc["files"]) == {"lo", "eth0", "ib0", "docker0"} and doc["default_live"] == ["eth0"]
    assert_views_agree(doc)


@pytest.mark.netns
@pytest.mark.parametrize("ifname, chosen, rc, code", [
    (None, ["ib0"], 0, "ND223"),  # NCCL's default picks ib* by name: a veth here
    ("eth", ["eth0"], 0, None),
    ("^ib,docker", ["lo", "eth0"], 1, "ND206"),  # the exclusion list forgot lo: NCCL bootstraps on it (FAIL)
    ("=docker0", ["docker0"], 0, "ND206"),  # a bridge: other nodes cannot reach it
    ("ens", [], 1, "ND202"),
])
def test_probe_in_netns(fake_node, venv_env, *, ifname, chosen, rc, code):
    c, n1 = fake_node
    env = {k: v for k, v in venv_env.items() if not k.startswith(("NCCL_", "GLOO_"))}
    if ifname is not None:
        env["NCCL_SOCKET_IFNAME"] = ifname
    p = c.run(n1, [sys.executable, "-m", "nccl_doctor", "probe", "--format", "json"], env=env, timeout=60)
    assert p.returncode == rc, p.stderr + p.stdout[-2000:]
    doc = json.loads(p.stdout)
    kinds = {i["name"]: i["kind"] for i in doc["interfaces"]}
    assert kinds == {"lo": "loopback", "eth0": "virtual", "ib0": "virtual", "docker0": "virtual"}
    vk = {i["name"]: i["virtual_kind"] for i in doc["interfaces"]}
    assert vk["docker0"] == "bridge"
    # a veth's peer may have the same ifindex in the other namespace: then sysfs cannot say "veth"
    assert vk["eth0"] in ("veth", "virtual-ethernet") and vk["ib0"] in ("veth", "virtual-ethernet")
    assert doc["nccl"]["socket_ifaces"] == chosen
    assert doc["host"] == "n1" and doc["gloo_iface"] == "eth0" and doc["default_route"] == ["eth0"]
    found = {f["code"] for f in doc["findings"]}
    assert "ND223" in found  # ib0 is always reported as not IPoIB
    if code:
        assert code in found
    if ifname is None:
        msg = next(f["message"] for f in doc["findings"] if f["code"] == "ND223")
        assert "NCCL's default picks it" in msg
