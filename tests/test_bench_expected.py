"""bench's yardstick: expected bandwidth from the probe, as a pure function of fixture trees."""

import pytest
from tests.helpers import sysfs_builder as b

from nccl_doctor.bench.expected import expected_bandwidth
from nccl_doctor.node.probe import probe_node


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


def test_node_rows_and_tables_show_pct_of_expected():
    bw = pytest.importorskip("nccl_doctor.bench.worker")
    from nccl_doctor.bench import command as bench
    from nccl_doctor.bench.expected import Expected

    def node(i, host):  # 2 NICs of 400 Gb/s, 2 ranks per node, H100 NVLink
        e = Expected(inter_gbps=100.0, per_rank_gbps=50.0, inter_basis="2 x 400 Gb/s", ifaces=("mlx5_0:1",),
                     iface="ib0", intra_gbps=370.0, intra_basis="estimate: H100")
        return bw.NodeInfo(index=i, host=host, ranks=(2 * i, 2 * i + 1), iface="ib0", link_gbps=100.0, expected=e)

    def m(group, busbw):
        return bw.Measurement(op="all_gather", group=group, group_size=2, size_bytes=1 << 30, count=1, iters=10,
                              time_us=1.0, algbw_gbps=2 * busbw, busbw_gbps=busbw, wrong=0)

    r = bw.BenchResult(backend="nccl", device="cuda", world_size=4, local_world_size=2,
                       nodes=[node(0, "a"), node(1, "b")],
                       results=[m("world", 80.0), m("intra", 185.0), m("inter", 25.0)],
                       pairs=[bw.PairResult(a=0, b=1, size_bytes=1 << 28, iters=5, time_us=1.0, busbw_gbps=45.0,
                                            wrong=0)])
    rep = bench.build_report(r, bench.judge(r))
    (row, _) = rep.data["nodes"]
    assert (row["expected_gbps"], row["pct_of_expected"], row["link_gbps"]) == (50.0, 90.0, 100.0)
    pct = {x["group"]: (x["expected_gbps"], x["pct_of_expected"]) for x in rep.data["results"]}
    assert pct == {"world": (100.0, 80.0), "intra": (370.0, 50.0), "inter": (50.0, 50.0)}
    assert "% of expected" in rep.tables[0].columns and rep.tables[0].rows[0][8] == "80.0"
    assert any("intra-node expected on a, b: estimate" in n for n in rep.notes)
    slow = bw.PairResult(a=0, b=1, size_bytes=1 << 28, iters=5, time_us=1.0, busbw_gbps=5.0, wrong=0)
    r.pairs = [slow]  # 10% of one NIC, under NCCL's 25%: the link is slow, judged on the pair yardstick
    assert "ND303" in {f.code for f in bench.judge(r)}
