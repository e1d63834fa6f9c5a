"""The pair pass rail by rail (``bench.pairs.plan_rails``, ``bench.rails``): every local rank is measured
against the same local rank of the partner node, and a slow rail is named with its node and NIC."""

from nccl_doctor.bench import judge
from nccl_doctor.bench.busbw import link_gbps
from nccl_doctor.bench.expected import Expected
from nccl_doctor.bench.model import BenchResult, NodeInfo, PairResult, RailResult
from nccl_doctor.bench.pairs import (
    Localisation,
    first_round,
    floor_gbps,
    lagging_rails,
    next_round,
    pair_expected_gbps,
    pair_figure,
    plan_rails,
    rails_share_links,
    slow_rails,
)
from nccl_doctor.bench.rails import gpu_nics, pci_address, rail_label, rank_nics
from nccl_doctor.bench.view import build_report
from nccl_doctor.node import probe_node
from tests.helpers import sysfs_builder as b

LOCAL = 8
IB = Expected(inter_gbps=400.0, per_rank_gbps=50.0, inter_basis="8 x 400 Gb/s RDMA port(s) (NCCL IB: mlx5_0:1, ...)",
              ifaces=tuple(f"mlx5_{i}:1" for i in range(LOCAL)), iface="ib0", intra_gbps=370.0,
              intra_basis="estimate for 8 x H100 SXM5")


def ib_node(i: int, local: int = LOCAL) -> NodeInfo:
    return NodeInfo(index=i, host=f"n{i + 1}", ranks=tuple(range(i * local, (i + 1) * local)), iface="ib0",
                    link_gbps=IB.inter_gbps, expected=IB)


def rail_pair(a: int, b: int, gbps_of, *, local: int = LOCAL, round_no: int = 1) -> PairResult:
    rails = tuple(RailResult(rail=i, ranks=(a * local + i, b * local + i), time_us=1.0, busbw_gbps=gbps_of(a, b, i),
                             wrong=0, nics=(f"mlx5_{i}", f"mlx5_{i}")) for i in range(local))
    slowest = min(rails, key=lambda r: r.busbw_gbps)
    return PairResult(a=a, b=b, size_bytes=256 << 20, iters=5, time_us=slowest.time_us,
                      busbw_gbps=slowest.busbw_gbps, wrong=0, round=round_no, rails=rails)


def planned(nnodes: int, gbps_of, local: int = LOCAL) -> list[PairResult]:
    """The real planning loop (``pairs.py``) with a per-rail bandwidth oracle."""
    loc, pairs, out = Localisation(nnodes=nnodes), first_round(nnodes), []
    while pairs:
        got = [rail_pair(a, b, gbps_of, local=local, round_no=len(loc.rounds) + 1) for a, b in pairs]
        loc.add(got)
        out += got
        pairs = next_round(loc)
    return out


def nccl_result(nodes, pairs) -> BenchResult:
    return BenchResult(backend="nccl", device="cuda:0", world_size=sum(len(n.ranks) for n in nodes),
                       local_world_size=len(nodes[0].ranks), nodes=list(nodes), pairs=list(pairs))


def test_every_local_rank_meets_the_same_local_rank_of_its_partner():
    node_ranks = [range(8), range(8, 16), range(16, 24), range(24, 32)]
    plan = plan_rails([(0, 1), (2, 3)], node_ranks)
    assert len(plan) == 16  # 8 rails x 2 pairs, all in one round: the old pass measured 2 (each node's rank 0)
    assert [(p.rail, p.ranks) for p in plan if p.pair == 0] == [(i, (i, 8 + i)) for i in range(8)]
    assert [(p.rail, p.ranks) for p in plan if p.pair == 1] == [(i, (16 + i, 24 + i)) for i in range(8)]
    ranks = [r for p in plan for r in p.ranks]
    assert sorted(ranks) == list(range(32))  # each rank in exactly one ping-pong: they all run at once
    assert len(plan_rails([(0, 1)], [(0, 1, 2), (3, 4)])) == 2  # uneven nodes: the rails both have


def test_rail_nics_come_from_the_probe_nearest_nic_of_each_rank_gpu(tmp_path):
    node = probe_node(b.build(b.dgx_h100(), tmp_path), {})
    nics = gpu_nics(node)
    assert len(nics) == LOCAL and len(set(nics.values())) == LOCAL  # one NIC per GPU on a DGX
    addr = sorted(nics)[3]
    dom, bus, dev = addr.split(":")[0], addr.split(":")[1], addr.split(":")[2].split(".")[0]
    assert pci_address(int(dom, 16), int(bus, 16), int(dev, 16)) == addr
    per_rank = [(0, addr, nics), (0, None, None), (1, addr, None), (1, addr, {addr: "mlx5_9"})]
    assert rank_nics(per_rank) == [nics[addr], None, "mlx5_9", "mlx5_9"]
    assert rail_label(3, ["mlx5_3", None]) == "rail 3 (local rank 3, mlx5_3 <-> ?)"
    assert rail_label(1) == "rail 1 (local rank 1)"


def test_bad_nic_on_rail_5_names_the_node_and_the_rail():
    """The old pass pinged rank 0 only: rail 5 at a tenth of its rate was never measured."""
    nodes = [ib_node(i) for i in range(4)]
    pairs = planned(4, lambda a, b, rail: 4.5 if 2 in (a, b) and rail == 5 else 45.0)
    assert [p.round for p in pairs] == [1, 1, 2, 2]  # n3 and its round-1 partner n4 retested against good nodes
    r = nccl_result(nodes, pairs)
    assert slow_rails(4, pairs, floor_gbps(nodes, "nccl", LOCAL)) == {2: [5]}
    fails = [f for f in judge(r) if f.severity.value == "fail"]
    assert [(f.code, f.where.host) for f in fails] == [("ND302", "n3")]
    assert "n3 is the slow node on rail 5 (local rank 5, mlx5_5)" in fails[0].message
    rep = build_report(r, judge(r))
    row = next(x for x in rep.data["nodes"] if x["host"] == "n3")
    assert row["slow"] and row["slow_rails"] == [5] and row["rails"] == LOCAL
    rail_rows = rep.data["pairs"][0]["rails"]
    assert [x["rail"] for x in rail_rows] == list(range(LOCAL)) and rail_rows[5]["nics"] == ["mlx5_5", "mlx5_5"]
    assert any(t.title.startswith("rails (") for t in rep.tables)


def test_two_nodes_slow_rail_is_named_on_the_link():
    nodes = [ib_node(0), ib_node(1)]
    r = nccl_result(nodes, [rail_pair(0, 1, lambda a, b, rail: 2.0 if rail == 3 else 46.0)])
    (f,) = [f for f in judge(r) if f.severity.value == "fail"]
    assert f.code == "ND303" and "rail 3 (local rank 3, mlx5_3 <-> mlx5_3) 2.000 GB/s" in f.message


def test_rails_sharing_one_socket_link_split_its_yardstick():
    """Gloo or NCCL sockets: 2 rails on one 10 GbE link each get half of it, which is no slow link."""
    gloo = NodeInfo(index=0, host="a", ranks=(0, 1), iface="eth1", link_gbps=link_gbps(10000))
    assert pair_expected_gbps(gloo) == link_gbps(10000)
    assert pair_expected_gbps(gloo, 2) == link_gbps(10000) / 2
    assert pair_expected_gbps(ib_node(0), LOCAL) == 50.0  # one NIC per rail: 8 x 400 Gb/s / 8
    # 4 rails at once on one 10 GbE link: 0.3 GB/s each is the link full; judged against the whole link's
    # floor (25% on NCCL: 0.31 GB/s) every rail would be "slow"
    nodes = [NodeInfo(index=i, host=f"n{i}", ranks=tuple(range(4 * i, 4 * i + 4)), iface="eth1",
                      link_gbps=link_gbps(10000)) for i in range(2)]
    shared = rail_pair(0, 1, lambda a, b, rail: 0.3, local=4)
    r = BenchResult(backend="nccl", device="cpu", world_size=8, local_world_size=4, nodes=nodes, pairs=[shared])
    assert floor_gbps(nodes, "nccl", 4) == 0.25 * link_gbps(10000) / 4
    assert judge(r) == []


def test_two_nodes_rails_on_their_own_nics_compare_with_each_other():
    """Rails on a NIC each, no floor (no line rate known), one link: rail 1 at 2% of rail 0 is slow, and named."""
    nodes = [NodeInfo(index=i, host=f"n{i + 1}", ranks=(2 * i, 2 * i + 1), iface=None, link_gbps=None)
             for i in range(2)]
    pair = rail_pair(0, 1, lambda a, b, rail: 0.04 if rail == 1 else 2.0, local=2)
    r = BenchResult(backend="gloo", device="cpu", world_size=4, local_world_size=2, nodes=nodes, pairs=[pair])
    (f,) = [f for f in judge(r) if f.severity.value == "fail"]
    assert f.code == "ND303" and "moves 0.040 GB/s on rail 1 (local rank 1, mlx5_1 <-> mlx5_1)" in f.message
    assert "2% of the best pair (rail 0 (local rank 0) of n1<->n2 moves 2.000 GB/s)" in f.message


def test_rails_sharing_a_link_add_up_and_a_lagging_one_is_a_rank_not_the_link():
    """One socket link for every local rank: the pair's figure is the rails' sum (what the link moved); a
    rail far behind its siblings is named as a lagging rank (ND312 WARN), the link is not slow."""
    socket_nodes = [NodeInfo(index=i, host=f"n{i + 1}", ranks=(2 * i, 2 * i + 1), iface="eth1",
                             link_gbps=link_gbps(10000)) for i in range(2)]
    assert rails_share_links(socket_nodes, 2) and not rails_share_links(socket_nodes, 1)
    assert not rails_share_links([ib_node(0), ib_node(1)], LOCAL)  # a NIC per rail
    unknown = [NodeInfo(index=0, host="a", ranks=(0, 1), iface=None, link_gbps=None)]
    assert rails_share_links(unknown, 2)  # no yardstick: assume they share (no rail blamed on noise)
    p = rail_pair(0, 1, lambda a, b, rail: 0.01 if rail == 1 else 1.0, local=2)
    assert pair_figure(p.rails, shared=True) == 1.01 and pair_figure(p.rails, shared=False) == 0.01
    shared = PairResult(**{**p.__dict__, "busbw_gbps": 1.01, "rails_shared": True})
    assert [r.rail for r in lagging_rails(shared)] == [1] and lagging_rails(p) == []
    r = BenchResult(backend="gloo", device="cpu", world_size=4, local_world_size=2, nodes=socket_nodes,
                    pairs=[shared])
    fs = judge(r)
    assert [(f.code, f.severity.value) for f in fs] == [("ND312", "warn")]
    assert "n1<->n2 rail 1 (local rank 1, mlx5_1 <-> mlx5_1) ranks 1<->3: 0.010 GB/s" in fs[0].message
    # siblings within 10x of each other on a shared link are noise, not a lagging rank
    even = PairResult(**{**shared.__dict__, "rails": tuple(x if x.rail == 0 else RailResult(
        **{**x.__dict__, "busbw_gbps": 0.2}) for x in shared.rails)})
    assert lagging_rails(even) == []
