"""Socket and Gloo checks: NCCL_SOCKET_IFNAME, the bootstrap interface, GLOO_SOCKET_IFNAME."""


import pytest

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.view import probe_report
from tests.helpers import sysfs_builder as b
from tests.helpers.probing import ENV, codes, first

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_socket_ifname_only_down(roots):
    node = probe_node(roots["degraded_ib"], {"NCCL_SOCKET_IFNAME": "=ib1"})
    f = next(f for f in check(node) if f.code == "ND203")
    assert f.severity.value == "fail" and f.where.iface == "ib1" and f.fix.startswith("export NCCL_SOCKET_IFNAME=")


def test_virtual_bootstrap(roots):
    assert "ND206" in codes(roots["cloud_vm"], {"NCCL_SOCKET_IFNAME": "docker"}, "warn")


def test_cloud_vm_gloo_loopback(roots):
    node = probe_node(roots["cloud_vm"], {})
    got = {f.code: f for f in check(node)}
    assert "ND215" in got and got["ND215"].fix == "export GLOO_SOCKET_IFNAME=ens5"
    assert "ND226" in got and node.nccl_socket.ifaces == ["ens5"]


def test_container_veth_uplink_is_data_not_virtual_bootstrap(tmp_path):
    """A pod's eth0 is a veth with the default route: NCCL bootstrapping on it is right, not ND206.
    A docker bridge in the same container stays virtual, and choosing it is still ND206."""
    spec = {"net": [{"name": "eth0", "kind": "veth", "speed": 10000, "addrs": ["198.18.0.1/24"]},
                    {"name": "docker0", "kind": "bridge", "addrs": ["198.18.200.1/24"]}],
            "default": ("eth0", "198.18.0.254")}
    root = b.build(spec, tmp_path)
    node = probe_node(root, {})
    roles = {i.name: (i.kind, i.role) for i in node.facts.interfaces}
    assert roles["eth0"] == ("virtual", "data") and roles["docker0"][1] == "virtual"
    assert node.nccl_socket.bootstrap == "eth0"
    assert "ND206" not in codes(root)
    assert "ND206" in codes(root, {"NCCL_SOCKET_IFNAME": "=docker0"}, "warn")


@pytest.mark.parametrize("value, bad, fix", [
    ("ens5,lo", "lo", "export GLOO_SOCKET_IFNAME=ens5"),
    ("lo", "lo", "export GLOO_SOCKET_IFNAME=ens5"),
    ("docker0,ens5", "docker0", "export GLOO_SOCKET_IFNAME=ens5"),
])
def test_gloo_list_with_unreachable_device(roots, value, bad, fix):
    fs = [f for f in check(probe_node(roots["cloud_vm"], {"GLOO_SOCKET_IFNAME": value})) if f.code == "ND216"]
    assert [(f.severity.value, f.where.iface, f.fix) for f in fs] == [("warn", bad, fix)]
    assert not [f for f in check(probe_node(roots["cloud_vm"], {"GLOO_SOCKET_IFNAME": "ens5"})) if f.code == "ND216"]


def test_gloo_down_device_fix_drops_it(roots):
    fs = [f for f in check(probe_node(roots["degraded_ib"], {"GLOO_SOCKET_IFNAME": "eth0,ib1"})) if f.code == "ND216"]
    assert [(f.where.iface, f.fix) for f in fs] == [("ib1", "export GLOO_SOCKET_IFNAME=eth0")]
    assert "is down" in fs[0].message


def test_quoted_ifname_fix_names_its_origin(dgx, tmp_path):
    env_fix = next(f for f in check(probe_node(dgx, {"NCCL_SOCKET_IFNAME": '"ib0"'})) if f.code == "ND204")
    assert env_fix.fix == "export NCCL_SOCKET_IFNAME=ib0" and "environment" in env_fix.message
    assert "conf" not in env_fix.fix
    spec = b.dgx_h100()
    spec["files"] = {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME='=ib0'\n"}
    conf = next(f for f in check(probe_node(b.build(spec, tmp_path), {})) if f.code == "ND204")
    assert conf.fix == "remove the quotes in /etc/nccl.conf: NCCL_SOCKET_IFNAME==ib0"
    assert conf.where.file == "/etc/nccl.conf" and "/etc/nccl.conf" in conf.message


def test_loopback_bootstrap_fails(tmp_path):
    node = probe_node(b.build(b.mgmt_only(), tmp_path), {**ENV, "NCCL_SOCKET_IFNAME": "^eno1"})
    assert node.nccl_socket.bootstrap == "lo"
    f = first(node, "ND206", "fail")
    assert f.where.iface == "lo" and "single-node" in f.message and f.fix == "export NCCL_SOCKET_IFNAME==eno1"
    assert probe_report(node).verdict.value == "fail"
