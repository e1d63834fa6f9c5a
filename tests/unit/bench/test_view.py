"""bench's report (``bench.view``): tables, JSON keys, yardsticks and their notes."""

from nccl_doctor.bench import build_report, judge
from nccl_doctor.bench.expected import Expected, local_expected
from nccl_doctor.bench.model import BenchResult, Measurement, NodeInfo, PairResult
from nccl_doctor.bench.view import format_or_dash


def test_report_tables_and_json_keys(build):
    r = build.result([build.node(0, "vm", [0, 1])], [build.meas(size=s) for s in (1 << 20, 64 << 20)])
    rep = build_report(r, judge(r))
    assert rep.data["localisation"] == {"skipped": "one node: no inter-node link to test"}  # never null
    two = build.result([build.node(0, "n1", [0]), build.node(1, "n2", [1])], [build.meas()])
    assert build_report(two, judge(two)).data["localisation"] == {
        "skipped": "the node-pair pass was not run (--no-pairs)"}
    assert rep.tables[0].columns[:2] == ("size (B)", "count") and len(rep.tables[0].rows) == 2
    row = rep.data["results"][0]
    assert {"op", "group", "size_bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong"} <= set(row)
    assert rep.data["nodes"][0]["host"] == "vm"
    assert (format_or_dash(None), format_or_dash(1.23456), format_or_dash(12.34, "{:.1f}")) == ("-", "1.235", "12.3")


def test_a_node_without_yardstick_says_why(tmp_path, build):
    """The probe cannot read the node: the figures are still measured, and the report says why there is
    no "% of expected" (a bug in probe/expected is raised, never turned into this)."""
    exp, nominal, why = local_expected({}, "gloo", root=str(tmp_path / "missing"))
    assert (exp, nominal) == (None, False) and why.startswith("no yardstick: the probe could not read this node")
    n = NodeInfo(index=0, host="n1", ranks=(0,), iface=None, link_gbps=None, no_expected=why)
    rep = build_report(build.result([n], [build.meas()]), [])
    assert rep.data["nodes"][0]["expected_basis"] == why
    assert any(note.startswith(f"inter-node expected on n1: {why}") for note in rep.notes)


def test_node_rows_and_tables_show_pct_of_expected():
    def node(i, host):  # 2 NICs of 400 Gb/s, 2 ranks per node, H100 NVLink
        e = Expected(inter_gbps=100.0, per_rank_gbps=50.0, inter_basis="2 x 400 Gb/s", ifaces=("mlx5_0:1",),
                     iface="ib0", intra_gbps=370.0, intra_basis="estimate: H100")
        return NodeInfo(index=i, host=host, ranks=(2 * i, 2 * i + 1), iface="ib0", link_gbps=100.0, expected=e)

    def m(group, busbw):
        return Measurement(op="all_gather", group=group, group_size=2, size_bytes=1 << 30, count=1, iters=10,
                           time_us=1.0, algbw_gbps=2 * busbw, busbw_gbps=busbw, wrong=0)

    r = BenchResult(backend="nccl", device="cuda", world_size=4, local_world_size=2,
                    nodes=[node(0, "a"), node(1, "b")],
                    results=[m("world", 80.0), m("intra", 185.0), m("inter", 25.0)],
                    pairs=[PairResult(a=0, b=1, size_bytes=1 << 28, iters=5, time_us=1.0, busbw_gbps=45.0, wrong=0)])
    rep = build_report(r, judge(r))
    (row, _) = rep.data["nodes"]
    assert (row["expected_gbps"], row["pct_of_expected"], row["link_gbps"]) == (50.0, 90.0, 100.0)
    pct = {x["group"]: (x["expected_gbps"], x["pct_of_expected"]) for x in rep.data["results"]}
    assert pct == {"world": (100.0, 80.0), "intra": (370.0, 50.0), "inter": (50.0, 50.0)}
    assert "% of expected" in rep.tables[0].columns and rep.tables[0].rows[0][8] == "80.0"
    assert any("intra-node expected on a, b: estimate" in n for n in rep.notes)
    slow = PairResult(a=0, b=1, size_bytes=1 << 28, iters=5, time_us=1.0, busbw_gbps=5.0, wrong=0)
    r.pairs = [slow]  # 10% of one NIC, under NCCL's 25%: the link is slow, judged on the pair yardstick
    assert "ND303" in {f.code for f in judge(r)}
