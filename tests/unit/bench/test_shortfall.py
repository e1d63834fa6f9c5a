"""On NCCL, figures below half their yardstick WARN (``bench.shortfall``, ND312), naming the figure, the
yardstick and where; latency-bound sizes are flagged, never judged; Gloo is never judged so."""

from dataclasses import replace

from nccl_doctor.bench import judge
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


def test_dead_nvlink_on_one_node_warns_with_the_figure_and_the_yardstick():
    """8 GPUs whose NVLink is down: NCCL falls back to SHM, ~20 GB/s against 370. The old judge had no
    verdict for it: the run ended "fit for training" (ND300 only)."""
    times = [1000.0] * LOCAL
    r = one_node([meas("world", 21.0, times=times), meas("world", 12.0, size=4 << 20, times=times)])
    fs = judge(r)
    (w,) = [f for f in fs if f.code == "ND312"]
    assert w.severity.value == "warn"
    assert "world group (8 ranks): peak busbw 21.0 GB/s (all_gather at 256 MiB) is 6% of the expected 370.0 GB/s" \
        in w.message
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
