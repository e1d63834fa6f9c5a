"""bench's judging on built results (``bench.judge``): slow nodes and links, wrong data, figures not to
trust, and what was not measured."""

from nccl_doctor.bench import build_report, coverage, judge, measured_nothing
from nccl_doctor.bench.busbw import link_gbps, round_size
from nccl_doctor.bench.expected import Expected
from nccl_doctor.bench.figures import group_expected, node_figures
from nccl_doctor.bench.model import NodeInfo
from nccl_doctor.bench.view import node_rows
from nccl_doctor.cluster.slurm import SlurmInfo


def codes(findings):
    return sorted(f.code for f in findings)


def test_good_partner_of_a_slow_node_is_retested_not_blamed(build):
    nodes = [build.node(i, f"n{i + 1}", [i]) for i in range(4)]
    pairs = build.planned_pairs(4, lambda a, b: 0.02 if 3 in (a, b) else 0.9)  # n4 slow; round 1 pairs it with n3
    assert [p.round for p in pairs] == [1, 1, 2, 2]
    r = build.result(nodes, [build.meas()], pairs)
    fs = judge(r)
    assert [(f.code, f.where.host) for f in fs if f.severity.value == "fail"] == [("ND302", "n4")]
    assert "slow with every partner" in fs[0].message and "drain n4" in fs[0].fix
    rows = {row["host"]: row for row in node_rows(r)}
    assert rows["n3"]["inter_node_busbw_gbps"] == 0.9 and rows["n3"]["pairs"] == ["n4", "n1"]
    assert [h for h, row in rows.items() if row["slow"]] == ["n4"]
    rep = build_report(r, fs)
    assert rep.data["localisation"]["bad_nodes"] == ["n4"] and len(rep.data["localisation"]["rounds"]) == 2
    # round 1 alone: n3 and n4 share one slow link and nobody proved either good -> the link, not a node
    first = [p for p in pairs if p.round == 1]
    fs1 = [f for f in judge(build.result(nodes, [build.meas()], first)) if f.severity.value == "fail"]
    assert [f.code for f in fs1] == ["ND303"] and "n3 and n4" in fs1[0].message
    assert "cannot tell which end" in fs1[0].message


def test_uniformly_slow_cluster_is_one_finding_not_one_per_pair(build):
    nodes = [build.node(i, f"n{i + 1}", [i]) for i in range(6)]  # 10 Gb/s links: Gloo floor 0.0625 GB/s
    r = build.result(nodes, [build.meas()], build.planned_pairs(6, lambda a, b: 0.01))
    (f,) = [f for f in judge(r) if f.severity.value == "fail"]
    assert f.code == "ND303" and "every node pair is slow" in f.message and "0.062 GB/s floor" in f.message


def test_slow_path_between_two_good_nodes_blames_neither(build):
    nodes = [build.node(i, f"n{i + 1}", [i]) for i in range(3)]
    pairs = [build.pair(0, 1, 0.02), build.pair(0, 2, 0.9), build.pair(1, 2, 0.9)]
    fails = [f for f in judge(build.result(nodes, [build.meas()], pairs)) if f.severity.value == "fail"]
    assert [f.code for f in fails] == ["ND303"] and "path between them" in fails[0].message


def test_slow_node_named_against_known_good_peers(build):
    nodes = [build.node(0, "n1", [0]), build.node(1, "n2", [1]), build.node(2, "n3", [2])]
    # ring n1-n2, n2-n3, n3-n1: n2 is slow with both partners
    r = build.result(nodes, [build.meas()], [build.pair(0, 1, 0.024), build.pair(1, 2, 0.023), build.pair(2, 0, 0.6)])
    fs = judge(r)
    slow = [f for f in fs if f.code == "ND302"]
    assert len(slow) == 1 and slow[0].where.host == "n2" and slow[0].severity.value == "fail"
    rows = {row["host"]: row for row in node_rows(r)}
    assert rows["n2"]["inter_node_busbw_gbps"] == 0.024 and rows["n1"]["inter_node_busbw_gbps"] == 0.6


def test_two_nodes_slow_link_cannot_be_pinned(build):
    r = build.result([build.node(0, "n1", [0]), build.node(1, "n2", [1])], [build.meas()], [build.pair(0, 1, 0.02)])
    (f,) = [f for f in judge(r) if f.code == "ND303"]
    assert "cannot tell which end" in f.message and "n1" in f.message and "n2" in f.message
    ok = build.result([build.node(0, "n1", [0]), build.node(1, "n2", [1])], [build.meas()], [build.pair(0, 1, 0.5)])
    assert codes(judge(ok)) == ["ND300"]


def test_wrong_elements_fail(build):
    r = build.result([build.node(0, "vm", [0, 1])], [build.meas(wrong=3), build.meas(size=1 << 20)])
    (f,) = [f for f in judge(r) if f.code == "ND301"]
    assert "3 wrong elements" in f.message and "ND300" not in codes(judge(r))


def test_untrustworthy_figures_warn(build):
    nodes = [build.node(0, "n1", [0], mbit=100), build.node(1, "n2", [1], mbit=100)]  # 0.0125 GB/s links
    r = build.result(nodes, [build.meas(size=1 << 20, iters=2)], [build.pair(0, 1, 0.5)])
    slurm = SlurmInfo(nnodes=3, hosts=("n1", "n2", "n3"), rdzv_host="n1", port=1, rdzv_id="x", gpus_on_node=None,
                      tasks_per_node=None)
    got = codes(judge(r, slurm=slurm))
    assert {"ND305", "ND306", "ND307", "ND308"} <= set(got)
    # preflight's sweep is short on purpose: the size/iteration warnings go, the rest stay; the sizes are
    # still said to be too small, at PASS (issue 22 point 14)
    short = judge(r, slurm=slurm, short_sweep=True)
    warned = {f.code for f in short if f.severity.value != "pass"}
    assert {"ND305", "ND308"} <= warned and not {"ND306", "ND307"} & warned
    assert [f.severity.value for f in short if f.code == "ND306"] == ["pass"]


def test_nominal_veth_speed_is_no_ceiling(build):
    nodes = [NodeInfo(index=i, host=f"n{i + 1}", ranks=(i,), iface="eth1", link_gbps=link_gbps(10000),
                      nominal_link=True) for i in range(2)]
    r = build.result(nodes, [build.meas()], [build.pair(0, 1, 3.2)])  # 2.5x the 1.25 GB/s a veth claims
    assert "ND305" not in codes(judge(r))
    assert any("nominal sysfs speed, not a line rate" in n for n in build_report(r, judge(r)).notes)
    r.nodes = [build.node(0, "n1", [0]), build.node(1, "n2", [1])]  # a real 10 Gb/s NIC: the same figure is impossible
    assert "ND305" in codes(judge(r))


def test_nothing_measured_warns_and_cannot_pass(build):
    """--groups inter on one node: no measurement at all is ND001 (WARN) and "could not run", never a PASS."""
    r = build.result([build.node(0, "vm", [0, 1])])
    r.skipped = ["inter: needs 2+ nodes (1 node x 2 ranks per node)"]
    assert measured_nothing(r)
    [f] = coverage(r, asked=True)
    assert f.code == "ND001" and f.severity.value == "warn" and "inter: needs 2+ nodes" in f.message
    rep = build_report(r, [*judge(r), f])
    assert rep.verdict.value == "warn" and rep.summary.startswith("nothing measured: inter: needs 2+ nodes")
    # some groups measured: a named group that was skipped still warns; the default groups do not
    r.results = [build.meas()]
    assert not measured_nothing(r)
    assert [f.code for f in coverage(r, asked=True)] == ["ND001"] and coverage(r, asked=False) == []


def test_healthy_nodes_on_veths_end_with_nothing_above_pass(build):
    """Issue 12, point 6: three healthy namespace nodes on veths (10000 Mb/s, nominal), 1.468 GB/s between
    them, 16 MiB rounded down to 3 ranks' whole elements. The probe gives no yardstick for a virtual link,
    so nothing is judged against its nominal speed; the PASS says the yardstick is unknown."""
    exp = Expected(inter_gbps=1.25, per_rank_gbps=1.25, ifaces=("eth1",), iface="eth1",
                   inter_basis="eth1 10000 Mb/s, nominal (eth1 is a veth): no line rate, only the slow-link floor")
    nodes = [NodeInfo(index=i, host=f"n{i + 1}", ranks=(i,), iface="eth1", link_gbps=1.25, expected=exp,
                      nominal_link=True) for i in range(3)]
    size = round_size(16 << 20, 3)
    assert size < 16 << 20
    r = build.result(nodes, [build.meas(size=size, n=3)],
                     [build.pair(0, 1, 1.468), build.pair(0, 2, 1.41), build.pair(1, 2, 1.39)])
    found = judge(r)
    assert [(f.code, f.severity) for f in found] == [("ND300", "pass")], [f.message for f in found]
    assert "yardstick unknown on n[1-3]: a virtual interface has no line rate" in found[0].message
    assert all(row.pct_of_expected is None and row.expected_gbps is None and row.link_gbps is None
               for row in node_figures(r))
    assert group_expected(r, "world") is None  # no ND312 "below expected" from a nominal speed either
    # the nominal speed still gives the slow-link floor (5% on Gloo): two nodes at 25 MB/s are named
    r = build.result(nodes[:2], [build.meas(size=size, n=2)], [build.pair(0, 1, 0.025)])
    [f] = [f for f in judge(r) if f.code == "ND303"]
    assert "under the 0.062 GB/s floor" in f.message, f.message


def test_a_real_short_sweep_still_warns_whatever_the_rounding(build):
    nodes = [build.node(i, f"n{i + 1}", [i]) for i in range(3)]
    r = build.result(nodes, [build.meas(size=round_size(4 << 20, 3), n=3)])
    assert "ND306" in codes(judge(r))


def test_preflights_cpu_sweep_says_what_bench_says_of_the_same_sizes(build):
    """Preflight's 1 and 4 MiB on Gloo: bench warns (ND306) on these very sizes; preflight says the same
    (the code, the sizes, what they are below), at PASS: no --sizes to fix it, and a healthy preflight ends with
    nothing above PASS (issue 12). Its GPU sweep (256 MiB) needs no word."""
    nodes = [build.node(i, f"n{i + 1}", [i]) for i in range(2)]
    r = build.result(nodes, [build.meas(size=1 << 20), build.meas(size=4 << 20)])
    (bench,) = [f for f in judge(r) if f.code == "ND306"]
    (short,) = [f for f in judge(r, short_sweep=True) if f.code == "ND306"]
    assert bench.severity.value == "warn" and short.severity.value == "pass"
    assert short.message.startswith(bench.message)  # the same words, then why preflight's sweep is short
    assert "largest size 4 MiB is below 16 MiB" in short.message
    assert "nccl-doctor bench --sizes 1M:64M:4" in short.fix
    r.backend, r.device = "nccl", "cuda:0"
    r.results = [build.meas(size=64 << 20), build.meas(size=256 << 20)]
    assert "ND306" not in codes(judge(r, short_sweep=True))


def test_the_pass_quotes_the_largest_bandwidth_bound_size_not_a_latency_bound_peak(build):
    """1 MiB (latency-bound in the table) came out faster than 64 MiB: the PASS quotes 64 MiB's figure."""
    r = build.result([build.node(0, "vm", [0, 1])],
                     [build.meas(size=1 << 20, t_us=10.0), build.meas(size=64 << 20, t_us=1000.0)])
    (ok,) = [f for f in judge(r) if f.code == "ND300"]
    assert "busbw 33.554 GB/s (all_gather world) at 64 MiB, the largest bandwidth-bound size" in ok.message
    assert "52.4" not in ok.message  # 1 MiB's 52.429 GB/s


def test_every_size_latency_bound_says_so_in_the_pass(build):
    r = build.result([build.node(0, "vm", [0, 1])], [build.meas(size=1 << 20), build.meas(size=4 << 20)])
    (ok,) = [f for f in judge(r) if f.code == "ND300"]
    assert "(all_gather world) at 4 MiB, latency-bound: not the links' bandwidth" in ok.message
