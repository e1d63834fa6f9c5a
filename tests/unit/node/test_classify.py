"""Classifying interfaces from sysfs facts: kinds, roles, RDMA links, and the management boundary."""

from dataclasses import asdict

import pytest

from nccl_doctor.node.classify import MGMT_MAX_MBPS, classify
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.sysfs import read_node
from tests.helpers import sysfs_builder as b


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    out = {}
    for name, spec in b.SPECS.items():
        root = b.build(spec(), tmp_path_factory.mktemp(name))
        facts = read_node(FsReader(root))
        classify(facts)
        out[name] = facts
    return out


def kinds(facts):
    return {i.name: i.kind for i in facts.interfaces}


def test_dgx(nodes):
    f = nodes["dgx_h100"]
    k = kinds(f)
    assert k["lo"] == "loopback" and k["docker0"] == "virtual" and k["bond0"] == "bond"
    assert all(k[f"ib{i}"] == "infiniband" for i in range(8))
    assert k["eno1"] == "management" and f.iface("bond0").role == "management"
    assert f.default_route_ifaces == ["bond0"]
    ib3 = f.iface("ib3")
    assert [asdict(r) for r in ib3.rdma] == [{"device": "mlx5_3", "port": 1, "state": "ACTIVE", "rate": "400 Gb/sec (4X NDR)",
                         "rate_gbps": 400.0, "link_layer": "InfiniBand"}]
    assert [str(a) for a in ib3.addresses] == ["10.1.3.11/24"] and ib3.numa_node == 0
    assert len(f.gpus) == 8 and f.gpus[7].pci.numa_node == 1 and f.gdr.peermem_module == "nvidia_peermem"


def test_roce(nodes):
    f = nodes["roce"]
    k = kinds(f)
    assert k["bond0"] == "bond" and k["ens1f0np0"] == "roce" and k["eno1"] == "management"
    bond = f.iface("bond0")
    assert bond.bond.down_slaves == ["ens1f1np1"] and bond.bond.mode == "802.3ad 4"
    port = f.rdma_devices[0].ports[0]
    assert port.link_layer == "Ethernet" and port.netdevs == ["bond0"]
    assert [(g.index, g.type) for g in port.gids] == [(0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"), (3, "RoCE v2")]
    assert f.gdr.dmabuf_possible and f.gdr.peermem_module is None


def test_p5_efa(nodes):
    f = nodes["p5"]
    assert kinds(f)["ens32"] == "efa"
    assert len(f.rdma_devices) == 8 and all(d.is_efa and d.ports[0].link_layer == "Unknown" for d in f.rdma_devices)


def test_cloud_vm(nodes):
    f = nodes["cloud_vm"]
    k = kinds(f)
    assert k["ens5"] == "ethernet"  # the only NIC: not "management" although it has the default route
    assert k["docker0"] == "virtual" and f.iface("docker0").virtual_kind == "bridge"
    assert f.iface("veth1a2b3c").virtual_kind == "veth" and f.iface("veth1a2b3c").master == "docker0"
    assert f.iface("ens5").speed_mbps is None and f.iface("ens5").pci.address == "0000:00:05.0"


def test_degraded(nodes):
    f = nodes["degraded_ib"]
    states = {d.name: (d.ports[0].state, d.ports[0].phys_state, d.ports[0].rate_gbps) for d in f.rdma_devices}
    assert states["mlx5_1"] == ("DOWN", "Disabled", 10.0) and states["mlx5_2"][2] == 100.0
    assert kinds(f)["eth0"] == "management"
    assert not f.iface("ib1").running and f.iface("ib0").running


def test_veth_named_ib0_is_virtual_and_noted(tmp_path):
    spec = {"net": [{"name": "eth0", "kind": "veth", "speed": 10000, "addrs": ["198.18.0.1/24"]},
                    {"name": "ib0", "kind": "veth", "speed": 10000, "addrs": ["198.19.0.1/30"]}]}
    facts = read_node(FsReader(b.build(spec, tmp_path)))
    classify(facts)
    ib0 = facts.iface("ib0")
    assert ib0.kind == "virtual" and ib0.virtual_kind == "veth"
    assert "named like InfiniBand" in ib0.notes[0]


def _classified(spec: dict, tmp_path):
    facts = read_node(FsReader(b.build(spec, tmp_path)))
    classify(facts)
    return facts


def test_management_boundary_is_25_gbps():
    assert MGMT_MAX_MBPS == 25_000


@pytest.mark.parametrize("speed, kind, role", [
    (25_000, "management", "management"),  # at the boundary: management next to a faster data link
    (25_001, "ethernet", "data"),  # just above it: a data interface of its own
    (10_000, "management", "management"),
])
def test_slower_ethernet_without_default_route_is_management_up_to_25_gbps(tmp_path, speed, kind, role):
    facts = _classified(b.ethernet_pair(speed), tmp_path)
    eth1 = facts.iface("eth1")
    assert (eth1.kind, eth1.role) == (kind, role) and eth1.speed_mbps == speed and not eth1.default_route
    assert (facts.iface("eth0").kind, facts.iface("eth0").role) == ("ethernet", "data")


def test_management_boundary_shows_in_the_probe_json(tmp_path):
    from nccl_doctor.node import probe_node
    from nccl_doctor.node.view import node_dict

    at = node_dict(probe_node(b.build(b.ethernet_pair(25_000), tmp_path / "at"), {}))
    above = node_dict(probe_node(b.build(b.ethernet_pair(25_001), tmp_path / "above"), {}))
    kind = {d["name"]: (d["kind"], d["role"]) for d in at["interfaces"]}
    assert kind["eth1"] == ("management", "management")
    kind = {d["name"]: (d["kind"], d["role"]) for d in above["interfaces"]}
    assert kind["eth1"] == ("ethernet", "data")
