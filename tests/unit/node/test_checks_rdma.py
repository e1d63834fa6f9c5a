"""RDMA checks: port health, silent socket fallbacks, NCCL_NET, RoCE GIDs, EFA, nodes without RDMA."""


import pytest

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.view import node_dict, probe_report
from tests.helpers import sysfs_builder as b
from tests.helpers.probing import ENV, codes, first

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_degraded_ports_and_exports(roots):
    node = probe_node(roots["degraded_ib"], {})
    fs = check(node)
    assert {(f.code, f.where.device) for f in fs if f.code in ("ND209", "ND210")} == {("ND209", "mlx5_1:1"),
                                                                                      ("ND210", "mlx5_2:1")}
    assert "ND214" in {f.code for f in fs}  # GPUs + IB, no peermem, proprietary driver: no DMA-BUF
    ex = node_dict(node)["exports"]
    hca = "export NCCL_IB_HCA==mlx5_0:1,mlx5_3:1  # leaves out mlx5_2:1 at 100 Gb/sec (2X HDR): slower than"
    assert any(x.startswith(hca) for x in ex) and "export NCCL_SOCKET_IFNAME==ib0" in ex


def test_roce_node(roots):
    node = probe_node(roots["roce"], {})
    fs = check(node)
    got = {f.code for f in fs}
    assert {"ND201", "ND212", "ND213"} <= got and "ND214" not in got  # DMA-BUF possible
    assert node.nccl_socket.bootstrap == "eno1"  # NCCL's default: first non-docker/lo interface
    ex = node_dict(node)["exports"]
    assert ex[:3] == ["export NCCL_SOCKET_IFNAME==bond0", "export NCCL_IB_HCA==mlx5_bond_0:1",
                      "export NCCL_IB_GID_INDEX=3"]
    assert "ND211" in codes(roots["roce"], {"NCCL_IB_GID_INDEX": "2"})  # a RoCE v1 GID
    assert "ND211" in codes(roots["roce"], {"NCCL_IB_GID_INDEX": "9"})
    assert "ND211" not in codes(roots["roce"], {"NCCL_IB_GID_INDEX": "3"})


def test_p5_efa(roots):
    node = probe_node(roots["p5"], {})
    assert node.nccl_ib.ports == [] and node.nccl_socket.ifaces == ["ens32"]
    assert "ND225" in {f.code for f in check(node)}
    assert node_dict(node)["nccl"]["transport"].startswith("plugin")


def test_no_rdma_warns_only_where_gpus_make_nccl_matter(roots, tmp_path):
    cpu_only = {f.code: f.severity.value for f in check(probe_node(roots["cloud_vm"], {}))}
    assert cpu_only["ND226"] == "pass"
    spec = b.cloud_vm()
    spec["pci"] = {**spec.get("pci", {}), "0000:00:1e.0": {"at": "pci0000:00", "vendor": "0x10de", "device": "0x2330",
                                                          "class": "0x030200", "numa": 0}}
    with_gpu = {f.code: f.severity.value for f in check(probe_node(b.build(spec, tmp_path), {}))}
    assert with_gpu["ND226"] == "warn"


def test_cpu_node_nd226_does_not_contradict_nccl_failures(roots):
    """A CPU node still fails a job-breaking NCCL setting; ND226 must not claim NCCL is irrelevant here."""
    fs = {f.code: f for f in check(probe_node(roots["cloud_vm"], {"NCCL_SOCKET_IFNAME": "^="}))}
    assert fs["ND202"].severity.value == "fail" and fs["ND226"].severity.value == "pass"
    assert "does not run" not in fs["ND226"].message and "still checked" in fs["ND226"].message


@pytest.mark.parametrize("net, sev, fix", [
    ("IB", "fail", "unset NCCL_NET"), ("ib", "fail", "unset NCCL_NET"),
    ("Sockets", "fail", "export NCCL_NET=Socket"), ("TCP", "fail", "export NCCL_NET=Socket"),
    ("RoCE", "fail", "unset NCCL_NET"),  # RoCE is NCCL's IB transport, and there is none here
    ("UCX", "fail", "unset NCCL_NET"), ("IBext_v8", "fail", "unset NCCL_NET"),
    ("MyVendorNet", "warn", "unset NCCL_NET"),
])
def test_nccl_net_checked_without_rdma(tmp_path, net, sev, fix):
    root = b.build(b.dgx_without_rdma(), tmp_path)
    node = probe_node(root, {"NCCL_NET": net})
    assert not node.facts.rdma_devices and node.facts.gpus
    f = next(f for f in check(node) if f.code == "ND222")
    assert (f.severity.value, f.fix) == (sev, fix) and f"NCCL_NET={net}" in f.message
    if sev == "fail":
        rep = probe_report(node)
        assert "ND200" not in {x.code for x in rep.findings}  # no PASS line saying TCP sockets will carry data
        assert "NCCL init fails" in rep.summary and rep.payload.nccl["transport"].startswith("none")
    for ok in ("Socket", "socket"):
        assert "ND222" not in codes(root, {"NCCL_NET": ok})


def test_nccl_net_plugin_on_ib_node_is_not_rdma_disabled(roots):
    """NCCL_NET=UCX drives the IB ports through a plugin: not ND207 ('IB off, traffic over TCP'), not ND222."""
    got = codes(roots["dgx_h100"], {"NCCL_NET": "UCX"})
    assert "ND207" not in got and "ND222" not in got
    assert {"ND207", "ND222"} & codes(roots["dgx_h100"], {"NCCL_NET": "Sockets"}) == {"ND222"}


@pytest.mark.parametrize("tree, net", [("p5", "Libfabric"), ("dgx", "IBext"), ("dgx", "UCX")])
def test_plugin_net_is_not_unset(request, tree, net):
    node = probe_node(request.getfixturevalue(tree), {**ENV, "NCCL_NET": net})
    assert node.nccl_ib.disabled_by is None
    assert not any("NCCL_NET" in line for line in node_dict(node)["exports"])
    assert not [f for f in check(node) if f.severity.value != "pass"]
    assert net in first(node, "ND200").message


def test_all_ports_down_is_one_fail(tmp_path):
    node = probe_node(b.build(b.dgx_all_ports_down(), tmp_path), ENV)
    fails = [f for f in check(node) if f.severity.value == "fail"]
    assert [f.code for f in fails] == ["ND209"]
    f = fails[0]
    assert "mlx5_0:1" in f.message and "mlx5_7:1" in f.message and "TCP sockets" in f.message
    assert "ibstat" in f.fix and "sminfo" in f.fix
    # the per-port WARNs stay, but do not suggest excluding ports when none is left
    assert all("NCCL_IB_HCA" not in x.fix for x in check(node) if x.code == "ND209")
    # bond0 stays management; ND201 is silent because no running data interface is left to switch to
    assert node.facts.iface("bond0").role == "management" and "ND201" not in {x.code for x in check(node)}


DOWN = {"state": "1: DOWN", "phys": "2: Polling", "rate": "10 Gb/sec", "ll": "InfiniBand"}


def test_one_compute_port_down_fails_and_a_port_nccl_does_not_use_warns(tmp_path):
    """One of a DGX's 8 compute HCAs dark: NCCL skips it and the gate exited 0 (a WARN) while its GPU's rail
    crowds another NIC. Now a FAIL; the same port excluded by NCCL_IB_HCA, or a dual-port card's second port
    (its first active: often uncabled on purpose), stays a WARN."""
    spec = b.dgx_h100()
    spec["rdma"][0]["ports"] = {1: DOWN}
    root = b.build(spec, tmp_path / "a")
    node = probe_node(root, ENV)
    assert {(f.code, f.severity.value) for f in check(node) if f.severity.value != "pass"} == {("ND209", "fail")}
    (f,) = [f for f in check(node) if f.code == "ND209"]
    assert f.where.device == "mlx5_0:1" and "a rail NCCL would use is missing" in f.message
    excluded = probe_node(root, {**ENV, "NCCL_IB_HCA": "^=mlx5_0"})
    assert {(f.code, f.severity.value) for f in check(excluded) if f.code == "ND209"} == {("ND209", "warn")}
    spec = b.dgx_h100()
    spec["rdma"][0]["ports"] = {**spec["rdma"][0]["ports"], 2: DOWN}
    spare = probe_node(b.build(spec, tmp_path / "b"), ENV)
    assert {(f.where.device, f.severity.value) for f in check(spare) if f.code == "ND209"} == {("mlx5_0:2", "warn")}


def test_a_port_at_a_quarter_of_its_peers_fails_and_at_half_warns(tmp_path):
    """ND210: 4X NDR trained as 1X (100 of 400 Gb/s: three lanes dead) FAILs on a port NCCL uses; half rate
    (the degraded_ib fixture's 2X HDR) stays a WARN."""
    spec = b.dgx_h100()
    spec["rdma"][3]["ports"] = {1: {**spec["rdma"][3]["ports"][1], "rate": "100 Gb/sec (1X NDR)"}}
    node = probe_node(b.build(spec, tmp_path), ENV)
    (f,) = [f for f in check(node) if f.code == "ND210"]
    assert (f.severity.value, f.where.device) == ("fail", "mlx5_3:1") and "a quarter or less" in f.message
    half = probe_node(b.build(b.degraded_ib(), tmp_path / "half"), {})
    assert [f.severity.value for f in check(half) if f.code == "ND210"] == ["warn"]
