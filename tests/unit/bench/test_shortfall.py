"""On NCCL, figures below half their yardstick WARN (``bench.shortfall``, ND312), naming the figure, the
yardstick and where; latency-bound sizes are flagged, never judged; Gloo is never judged so."""

from dataclasses import replace

from nccl_doctor.bench import judge
from nccl_doctor.bench.expected import Expected
from nccl_doctor.bench.model import BenchResult, Measurement
from nccl_doctor.bench.shortfall import judge_expected, slowest_rank
from nccl_doctor.bench.view import build_report
from tests.unit.bench.test_rails import LOCAL, ib_node, rail_pair


def meas(group: str, busbw: float, *, size: int = 256 << 20, n: int = LOCAL, times=()) -> Measurement:
    return Measurement(op="all_gather", group=group, group_size=n, size_bytes=size, count=size // 4 // n, iters=10,
                       time_us=max(times, default=1000.0), algbw_gbps=busbw * n / (n - 1), busbw_gbps=busbw, wrong=0,
                       rank_time_us=tuple(times))


def one_node(results, backend="nccl") -> BenchResult:
    return BenchResult(backend=backend, device="cuda:0" if backend == "nccl" else "cpu", world_size=LOCAL,
                       local_world_size=LOCAL, nodes=[ib_node(0)], results=list(results))


def test_dead_nvlink_on_one_node_fails_with_the_figure_and_the_yardstick():
    """8 GPUs whose NVLink is down: NCCL falls back to SHM, ~20 GB/s against 370. The first judge had no
    verdict for it (ND300 only), the second a WARN, so the gate still exited 0: below a quarter FAILs."""
    times = [1000.0] * LOCAL
    r = one_node([meas("world", 21.0, times=times), meas("world", 12.0, size=4 << 20, times=times)])
    fs = judge(r)
    (w,) = [f for f in fs if f.code == "ND312"]
    assert w.severity.value == "fail" and not [f for f in fs if f.code == "ND300"]
    assert "world group (8 ranks): peak busbw 21.0 GB/s (all_gather at 256 MiB) is 6% of the expected 370.0 GB/s, " \
        "below 25%" in w.message
    assert "yardstick: estimate for 8 x H100 SXM5" in w.message and "nvlink" in w.fix
    assert "every rank took about as long" in w.message


def test_slowest_rank_is_named_from_per_rank_times():
    """Per-rank times (not only the max) name the straggler's rank and node."""
    nodes = [ib_node(0), ib_node(1)]
    times = [1000.0] * 16
    times[11] = 2500.0  # rank 11: n2, local rank 3
    m = meas("intra", 60.0, times=times)
    r = BenchResult(backend="nccl", device="cuda:0", world_size=16, local_world_size=LOCAL, nodes=nodes, results=[m])
    assert slowest_rank(r, m) == (11, "n2")
    (w,) = judge_expected(r)
    assert w.where.host == "n2" and w.where.rank == 11 and "the slowest rank is 11 on n2" in w.message
    assert slowest_rank(r, replace(m, rank_time_us=tuple([1000.0] * 16))) is None
    row = build_report(r, []).data["results"][0]
    assert row["rank_time_us"][11] == 2500.0 and row["time_us_mean"] == round((15 * 1000 + 2500) / 16, 2)


def test_inter_group_and_latency_bound_sizes_are_not_misjudged():
    nodes = [ib_node(0), ib_node(1)]
    # inter: 8 groups share the node's 8 NICs, so one group expects 400 / 8 = 50 GB/s; 30 is above half
    ok = BenchResult(backend="nccl", device="cuda:0", world_size=16, local_world_size=LOCAL, nodes=nodes,
                     results=[meas("inter", 30.0, n=2), meas("inter", 1.0, size=1 << 20, n=2)])
    assert judge_expected(ok) == []  # the 1 MiB figure is latency-bound: never judged
    low = replace(ok, results=[meas("inter", 20.0, n=2)])
    (w,) = judge_expected(low)
    assert "inter group (2 ranks)" in w.message and "40% of the expected 50.0 GB/s" in w.message
    assert "shared by the 8 inter groups" in w.message
    small = replace(ok, results=[meas("inter", 1.0, size=1 << 20, n=2)])
    assert judge_expected(small) == []  # only latency-bound sizes: no verdict (ND306 says the sizes are small)


def test_gloo_is_never_judged_against_the_links():
    r = one_node([meas("world", 1.0)], backend="gloo")
    assert judge_expected(r) == []


def test_rail_below_half_of_its_nic_warns_naming_pair_rail_and_nic():
    """Rail 6 at 20 GB/s of a 50 GB/s NIC: above the pair pass's floor (25%), so not a slow link, but
    below half its yardstick."""
    nodes = [ib_node(0), ib_node(1)]
    pair = rail_pair(0, 1, lambda a, b, rail: 20.0 if rail == 6 else 46.0)
    r = BenchResult(backend="nccl", device="cuda:0", world_size=16, local_world_size=LOCAL, nodes=nodes, pairs=[pair])
    fs = judge(r)
    assert [f.code for f in fs if f.severity.value != "pass"] == ["ND312"]
    (w,) = [f for f in fs if f.code == "ND312"]
    assert "1 rail(s) of the node-pair pass below 50%" in w.message
    assert "n1<->n2 rail 6 (local rank 6, mlx5_6 <-> mlx5_6): 20.00 GB/s, 40% of 50.00 GB/s" in w.message
    assert "8 x 400 Gb/s RDMA port(s)" in w.message and w.where.iface == "mlx5_6"
    rails = build_report(r, fs).data["pairs"][0]["rails"]
    assert rails[6]["pct_of_expected"] == 40.0 and rails[0]["pct_of_expected"] == 92.0
    gloo = replace(r, backend="gloo", device="cpu")
    assert judge_expected(gloo) == []


def test_latency_bound_sizes_are_flagged_in_table_json_and_notes():
    r = one_node([meas("world", 12.0, size=4 << 20), meas("world", 300.0, size=64 << 20)])
    rep = build_report(r, [])
    assert [row["latency_bound"] for row in rep.data["results"]] == [True, False]
    table = rep.tables[0]
    assert table.columns[-1] == "bound" and [row[-1] for row in table.rows] == ["latency", ""]
    assert any(n.startswith("sizes up to 4 MiB are latency-bound") and "averages over ranks" in n for n in rep.notes)


def test_between_a_quarter_and_half_warns_and_below_a_quarter_fails():
    """The two thresholds on literal figures: 100 of 370 (27%) WARNs, 90 (24%) FAILs, 190 (51%) passes."""
    def verdict(busbw):
        return [f.severity.value for f in judge_expected(one_node([meas("world", busbw)]))]

    assert (verdict(190.0), verdict(100.0), verdict(90.0)) == ([], ["warn"], ["fail"])


def test_a_thousand_nodes_inter_group_at_256_mib_is_reported_not_judged():
    """1,024 x 8 ranks: the inter group (1,024 ranks, one per node) at 256 MiB moves 256 KiB per rank and
    step, latency-bound: a healthy cluster read 13 GB/s against 8 x 400 Gb/s / 8 = 50 GB/s and WARNed. Now
    the figure is named in ND300, unjudged; 2 nodes at the same size are judged (128 MiB per rank)."""
    nodes = [ib_node(i) for i in range(1024)]
    big = BenchResult(backend="nccl", device="cuda:0", world_size=1024 * LOCAL, local_world_size=LOCAL,
                      nodes=nodes, results=[meas("inter", 13.0, n=1024), meas("intra", 360.0)])
    assert judge_expected(big) == []
    (ok,) = [f for f in judge(big) if f.code == "ND300"]
    assert ("not judged against its yardstick: inter (1024 ranks) at 256 MiB, 256 KiB per rank (judged from 4 MiB "
            "per rank): 13.000 GB/s, latency-bound at this scale") in ok.message
    two = replace(big, nodes=nodes[:2], world_size=2 * LOCAL, results=[meas("inter", 13.0, n=2)])
    assert [f.severity.value for f in judge_expected(two)] == ["warn"]


def nvls_node(i: int = 0):
    e = Expected(inter_gbps=400.0, per_rank_gbps=50.0, inter_basis="8 x 400 Gb/s", intra_gbps=370.0,
                 intra_basis="estimate for 8 x H100 SXM5", intra_allreduce_gbps=481.0)
    return replace(ib_node(i), expected=e)


def test_nvls_all_reduce_is_judged_on_its_own_yardstick():
    """NVLS all-reduce reached 480 GB/s on healthy H100s: 130% of the 370 "expected" in the report. Judged on
    481 it reads 100%; and 200 GB/s (54% of 370: passed before) is 42% of what NVLS reaches: a WARN."""
    ar = replace(meas("intra", 480.0), op="all_reduce")
    r = BenchResult(backend="nccl", device="cuda:0", world_size=2 * LOCAL, local_world_size=LOCAL,
                    nodes=[nvls_node(0), nvls_node(1)], results=[ar, meas("intra", 360.0)])
    assert judge_expected(r) == []
    rows = build_report(r, []).data["results"]
    assert [(x["op"], x["expected_gbps"], x["pct_of_expected"]) for x in rows] == [
        ("all_reduce", 481.0, 99.8), ("all_gather", 370.0, 97.3)]
    low = replace(r, results=[replace(ar, busbw_gbps=200.0)])
    (w,) = judge_expected(low)
    assert w.severity.value == "warn" and "42% of the expected 481.0 GB/s" in w.message
    assert "all_reduce with NVLS (NVSwitch multicast): 1.30 x 370.0 GB/s" in w.message
