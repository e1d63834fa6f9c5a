"""bench's yardstick: expected bandwidth from the probe, as a pure function of fixture trees."""

import pytest

from nccl_doctor.bench.expected import expected_bandwidth, nominal_speed
from nccl_doctor.node import probe_node
from tests.helpers import sysfs_builder as b


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return {name: b.build(spec(), tmp_path_factory.mktemp(name)) for name, spec in b.SPECS.items()}


def exp(roots, name, backend, env=None, route=None):
    return expected_bandwidth(probe_node(roots[name], env or {}), backend, route_iface=route)


def test_dgx_nccl_sums_the_ib_ports_and_one_rank_pair_gets_one_nic(roots):
    e = exp(roots, "dgx_h100", "nccl")
    assert e.inter_gbps == pytest.approx(8 * 400 / 8) and e.per_rank_gbps == pytest.approx(50.0)
    assert e.ifaces == tuple(f"mlx5_{i}:1" for i in range(8)) and "NCCL IB" in e.inter_basis and e.iface == "ib0"
    assert e.intra_gbps == pytest.approx(370.0) and "estimate" in e.intra_basis and "H100" in e.intra_basis


def test_nccl_ib_hca_and_disable_change_the_yardstick(roots):
    e = exp(roots, "dgx_h100", "nccl", {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"})
    assert e.inter_gbps == pytest.approx(100.0) and e.ifaces == ("mlx5_0:1", "mlx5_1:1")
    off = exp(roots, "dgx_h100", "nccl", {"NCCL_IB_DISABLE": "1"})  # NCCL sockets: ib0..ib7 by default
    assert off.inter_gbps == pytest.approx(8 * 400000 / 8 / 1000) and "NCCL_IB_DISABLE=1" in off.inter_basis
    off = exp(roots, "dgx_h100", "nccl", {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "bond0"})
    assert off.inter_gbps == pytest.approx(50000 / 8 / 1000) and off.ifaces == ("bond0",)


def test_degraded_port_counts_at_its_trained_rate(roots):
    e = exp(roots, "degraded_ib", "nccl")  # mlx5_1 down (not used), mlx5_2 at 100 Gb/s
    assert e.ifaces == ("mlx5_0:1", "mlx5_2:1", "mlx5_3:1")
    assert e.inter_gbps == pytest.approx((200 + 100 + 200) / 8) and e.per_rank_gbps == pytest.approx(25.0)


def test_roce_and_efa(roots):
    assert exp(roots, "roce", "nccl").inter_gbps == pytest.approx(200 / 8)
    e = exp(roots, "p5", "nccl")
    assert e.inter_gbps == pytest.approx(8 * 100 / 8) and "EFA" in e.inter_basis


def test_gloo_uses_its_interface_not_the_rdma_ports(roots):
    e = exp(roots, "dgx_h100", "gloo")  # hostname -> 10.0.0.11 on bond0
    assert e.ifaces == ("bond0",) and e.inter_gbps == pytest.approx(50000 / 8 / 1000) and "Gloo" in e.inter_basis
    e = exp(roots, "dgx_h100", "gloo", {"GLOO_SOCKET_IFNAME": "ib0,ib1"})
    assert e.ifaces == ("ib0", "ib1") and e.inter_gbps == pytest.approx(2 * 400000 / 8 / 1000)
    e = exp(roots, "dgx_h100", "gloo", route="ib3")  # the launcher's route when GLOO_SOCKET_IFNAME is unset
    assert e.ifaces == ("ib3",) and "routing" in e.inter_basis


def test_unknown_speed_or_loopback_gives_no_figure(roots):
    e = exp(roots, "cloud_vm", "gloo")  # hostname on 127.0.1.1: loopback fallback
    assert e.inter_gbps is None and e.per_rank_gbps is None and e.intra_gbps is None
    e = exp(roots, "cloud_vm", "gloo", route="ens5")  # virtio: no speed in sysfs
    assert e.inter_gbps is None and "no speed in sysfs for ens5" in e.inter_basis


def test_a_virtual_interface_has_no_line_rate_to_judge_against(roots):
    """A veth's sysfs speed (10000 Mb/s) is nominal: the basis says so (the judge then takes no "% of expected"
    or ND305 from it, only the slow-link floor: issue 12, point 6); a bond's speed (its slaves' sum) is a rate."""
    e = exp(roots, "cloud_vm", "gloo", route="veth1a2b3c")  # the route to the rendezvous host
    assert e.ifaces == ("veth1a2b3c",) and e.inter_gbps == pytest.approx(1.25)  # kept: the slow-link floor
    assert "nominal (veth1a2b3c is a veth): no line rate, only the slow-link floor" in e.inter_basis, e.inter_basis
    assert exp(roots, "dgx_h100", "gloo", {"GLOO_SOCKET_IFNAME": "bond0"}).inter_gbps == pytest.approx(50 / 8)


@pytest.mark.parametrize(("kind", "nominal"), [("veth", True), ("virtual-ethernet", True), ("bridge", True),
                                               ("macvlan", True), ("vxlan", True), ("tun", True), ("bond", False),
                                               ("vlan", False), (None, False)])
def test_which_kinds_have_a_nominal_speed(kind, nominal):
    assert nominal_speed(kind) is nominal
