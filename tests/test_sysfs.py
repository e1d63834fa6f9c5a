"""Reading and classifying node facts from fixture trees built in the kernel's layout."""

import os

import pytest
from tests.helpers import sysfs_builder as b

from nccl_doctor.node.sysfs import (
    FsReader, attribute_ipv4, classify, default_route_ifaces, parse_fib_trie_local, parse_if_inet6,
    parse_ipv6_default, parse_rate, parse_route, parse_state, read_node,
)

# Verbatim from a live kernel (6.18, this dev box).
FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
"""
ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""
IF_INET6 = """fe8000000000000000fc00fffe000001 04 40 20 80     eth0
fd000000000000000000000000000002 04 40 00 82     eth0
00000000000000000000000000000001 01 80 10 80       lo
"""
IPV6_ROUTE = """00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
"""


def test_procfs_parsers_on_real_text():
    routes = parse_route(ROUTE)
    assert default_route_ifaces(routes) == ["eth0"]
    local = parse_fib_trie_local(FIB_TRIE)
    assert local == ["127.0.0.1", "192.0.2.2"]  # not 127.0.0.0/8 host LOCAL, not broadcasts
    v4, orphans = attribute_ipv4(local, routes, "lo")
    assert [str(a) for a in v4["eth0"]] == ["192.0.2.2/24"] and [str(a) for a in v4["lo"]] == ["127.0.0.1/8"]
    assert orphans == []
    v6 = parse_if_inet6(IF_INET6)
    assert [(a.address, a.prefixlen, a.scope) for a in v6["eth0"]] == [("fe80::fc:ff:fe00:1", 64, "link"),
                                                                       ("fd00::2", 64, "global")]
    assert parse_ipv6_default(IPV6_ROUTE) == ["eth0"]  # the lo reject route is not a default route


def test_rate_and_state():
    assert parse_rate("400 Gb/sec (4X NDR)") == 400.0 and parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    assert parse_state("4: ACTIVE") == "ACTIVE" and parse_state("5: LinkUp") == "LinkUp"
    assert parse_rate(None) is None and parse_state(None) == "UNKNOWN"


def test_same_subnet_on_two_ifaces_is_attributed_to_both():
    routes = parse_route("h\nib0\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
                         "ib1\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n")
    v4, _ = attribute_ipv4(["10.1.0.5"], routes, "lo")
    assert set(v4) == {"ib0", "ib1"}


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


def test_builder_uses_kernel_layout(tmp_path):
    root = b.build(b.dgx_h100(), tmp_path)
    link = os.readlink(root / "sys/class/net/ib0")
    assert link.startswith("../../devices/pci0000:") and link.endswith("/net/ib0")
    assert os.readlink(root / "sys/class/infiniband/mlx5_0/device").startswith("../../../0000:")
    assert (root / "sys/class/infiniband/mlx5_0/ports/1/state").read_text() == "4: ACTIVE\n"
    assert (root / "sys/class/net/bond0/bonding/slaves").read_text() == "eno1 eno2\n"
    assert not (root / "sys/class/net/docker0/device").exists()


def test_dgx(nodes):
    f = nodes["dgx_h100"]
    k = kinds(f)
    assert k["lo"] == "loopback" and k["docker0"] == "virtual" and k["bond0"] == "bond"
    assert all(k[f"ib{i}"] == "infiniband" for i in range(8))
    assert k["eno1"] == "management" and f.iface("bond0").role == "management"
    assert f.default_route_ifaces == ["bond0"]
    ib3 = f.iface("ib3")
    assert ib3.rdma == [{"device": "mlx5_3", "port": 1, "state": "ACTIVE", "rate": "400 Gb/sec (4X NDR)",
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


def test_reader_never_escapes_root_and_handles_absolute_links(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "real").mkdir()
    (tmp_path / "real/hosts").write_text("127.0.0.1 x\n")
    os.symlink("/real/hosts", tmp_path / "etc/hosts")  # absolute: re-rooted under tmp_path
    os.symlink("../../../../../../../../etc/passwd", tmp_path / "etc/evil")
    fs = FsReader(tmp_path)
    assert fs.read("/etc/hosts") == "127.0.0.1 x"
    assert fs.read("/etc/evil") is None
    os.symlink("loop", tmp_path / "loop")
    assert fs.read("/loop/x") is None  # link cycle: no hang


def test_missing_root_sys_is_input_error(tmp_path):
    from nccl_doctor.errors import InputError
    from nccl_doctor.node.probe import probe_node
    with pytest.raises(InputError, match="no sys/class/net"):
        probe_node(tmp_path, {})
