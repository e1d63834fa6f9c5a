"""bench: judging on built results, and real multi-process Gloo runs through the self-launcher."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.bench import command as bench
from nccl_doctor.bench.busbw import bus_factor, link_gbps
from nccl_doctor.cluster.launch import SlurmInfo
from nccl_doctor.bench.pairs import Localisation, first_round, next_round

bw = pytest.importorskip("nccl_doctor.bench.worker")  # imports torch (bench is never used without it)


def node(i, host, ranks, mbit=10000):
    return bw.NodeInfo(index=i, host=host, ranks=tuple(ranks), iface="eth1", link_gbps=link_gbps(mbit))


def meas(op="all_gather", group="world", size=64 << 20, t_us=1000.0, n=2, wrong=0, iters=10):
    algbw = size / (t_us / 1e6) / 1e9
    return bw.Measurement(op=op, group=group, group_size=n, size_bytes=size, count=size // 4 // n, iters=iters,
                          time_us=t_us, algbw_gbps=algbw, busbw_gbps=algbw * bus_factor(op, n), wrong=wrong)


def pair(a, b, gbps):
    return bw.PairResult(a=a, b=b, size_bytes=16 << 20, iters=5, time_us=1.0, busbw_gbps=gbps, wrong=0)


def result(nodes, results=(), pairs=()):
    return bw.BenchResult(backend="gloo", device="cpu", world_size=sum(len(n.ranks) for n in nodes),
                          local_world_size=len(nodes[0].ranks), nodes=list(nodes), results=list(results),
                          pairs=list(pairs))


def codes(findings):
    return sorted(f.code for f in findings)


def planned_pairs(nnodes, gbps_of):
    """The pairs a run would measure: localize's real planning loop with a bandwidth oracle."""
    loc = Localisation(nnodes=nnodes)
    pairs, out = first_round(nnodes), []
    while pairs:
        got = [bw.PairResult(a=a, b=b, size_bytes=16 << 20, iters=5, time_us=1.0, busbw_gbps=gbps_of(a, b), wrong=0,
                             round=len(loc.rounds) + 1) for a, b in pairs]
        loc.add(got)
        out += got
        pairs = next_round(loc)
    return out


def test_good_partner_of_a_slow_node_is_retested_not_blamed():
    nodes = [node(i, f"n{i + 1}", [i]) for i in range(4)]
    pairs = planned_pairs(4, lambda a, b: 0.02 if 3 in (a, b) else 0.9)  # n4 slow; round 1 pairs it with n3
    assert [p.round for p in pairs] == [1, 1, 2, 2]
    r = result(nodes, [meas()], pairs)
    fs = bench.judge(r)
    assert [(f.code, f.where.host) for f in fs if f.severity.value == "fail"] == [("ND302", "n4")]
    assert "slow with every partner" in fs[0].message and "drain n4" in fs[0].fix
    rows = {row["host"]: row for row in bench.node_rows(r)}
    assert rows["n3"]["inter_node_busbw_gbps"] == 0.9 and rows["n3"]["pairs"] == ["n4", "n1"]
    assert [h for h, row in rows.items() if row["slow"]] == ["n4"]
    rep = bench.build_report(r, fs)
    assert rep.data["localisation"]["bad_nodes"] == ["n4"] and len(rep.data["localisation"]["rounds"]) == 2
    # round 1 alone: n3 and n4 share one slow link and nobody proved either good -> the link, not a node
    first = [p for p in pairs if p.round == 1]
    fs1 = [f for f in bench.judge(result(nodes, [meas()], first)) if f.severity.value == "fail"]
    assert [f.code for f in fs1] == ["ND303"] and "n3 and n4" in fs1[0].message
    assert "cannot tell which end" in fs1[0].message


def test_uniformly_slow_cluster_is_one_finding_not_one_per_pair():
    nodes = [node(i, f"n{i + 1}", [i]) for i in range(6)]  # 10 Gb/s links: Gloo floor 0.0625 GB/s
    r = result(nodes, [meas()], planned_pairs(6, lambda a, b: 0.01))
    (f,) = [f for f in bench.judge(r) if f.severity.value == "fail"]
    assert f.code == "ND303" and "every node pair is slow" in f.message and "0.062 GB/s floor" in f.message


def test_slow_path_between_two_good_nodes_blames_neither():
    nodes = [node(i, f"n{i + 1}", [i]) for i in range(3)]
    pairs = [pair(0, 1, 0.02), pair(0, 2, 0.9), pair(1, 2, 0.9)]
    fails = [f for f in bench.judge(result(nodes, [meas()], pairs)) if f.severity.value == "fail"]
    assert [f.code for f in fails] == ["ND303"] and "path between them" in fails[0].message


def test_slow_node_named_against_known_good_peers():
    nodes = [node(0, "n1", [0]), node(1, "n2", [1]), node(2, "n3", [2])]
    # ring n1-n2, n2-n3, n3-n1: n2 is slow with both partners
    r = result(nodes, [meas()], [pair(0, 1, 0.024), pair(1, 2, 0.023), pair(2, 0, 0.6)])
    fs = bench.judge(r)
    slow = [f for f in fs if f.code == "ND302"]
    assert len(slow) == 1 and slow[0].where.host == "n2" and slow[0].severity.value == "fail"
    rows = {row["host"]: row for row in bench.node_rows(r)}
    assert rows["n2"]["inter_node_busbw_gbps"] == 0.024 and rows["n1"]["inter_node_busbw_gbps"] == 0.6


def test_two_nodes_slow_link_cannot_be_pinned():
    r = result([node(0, "n1", [0]), node(1, "n2", [1])], [meas()], [pair(0, 1, 0.02)])
    (f,) = [f for f in bench.judge(r) if f.code == "ND303"]
    assert "cannot tell which end" in f.message and "n1" in f.message and "n2" in f.message
    ok = result([node(0, "n1", [0]), node(1, "n2", [1])], [meas()], [pair(0, 1, 0.5)])
    assert codes(bench.judge(ok)) == ["ND300"]


def test_wrong_elements_fail():
    r = result([node(0, "vm", [0, 1])], [meas(wrong=3), meas(size=1 << 20)])
    (f,) = [f for f in bench.judge(r) if f.code == "ND301"]
    assert "3 wrong elements" in f.message and "ND300" not in codes(bench.judge(r))


def test_untrustworthy_figures_warn():
    nodes = [node(0, "n1", [0], mbit=100), node(1, "n2", [1], mbit=100)]  # 0.0125 GB/s links
    r = result(nodes, [meas(size=1 << 20, iters=2)], [pair(0, 1, 0.5)])
    slurm = SlurmInfo(nnodes=3, hosts=("n1", "n2", "n3"), rdzv_host="n1", port=1, rdzv_id="x", gpus_on_node=None,
                      tasks_per_node=None)
    got = codes(bench.judge(r, slurm=slurm))
    assert {"ND305", "ND306", "ND307", "ND308"} <= set(got)
    # preflight's sweep is short on purpose: only the size/iteration warnings go, the rest stay
    short = set(codes(bench.judge(r, slurm=slurm, short_sweep=True)))
    assert {"ND305", "ND308"} <= short and not {"ND306", "ND307"} & short


def test_nominal_veth_speed_is_no_ceiling():
    nodes = [bw.NodeInfo(index=i, host=f"n{i + 1}", ranks=(i,), iface="eth1", link_gbps=link_gbps(10000), nominal_link=True)
             for i in range(2)]
    r = result(nodes, [meas()], [pair(0, 1, 3.2)])  # 2.5x the 1.25 GB/s a veth claims
    assert "ND305" not in codes(bench.judge(r))
    assert any("nominal sysfs speed" in n for n in bench.build_report(r, bench.judge(r)).notes)
    r.nodes = [node(0, "n1", [0]), node(1, "n2", [1])]  # a real 10 Gb/s NIC: the same figure is impossible
    assert "ND305" in codes(bench.judge(r))


def test_report_tables_and_json_keys():
    r = result([node(0, "vm", [0, 1])], [meas(size=s) for s in (1 << 20, 64 << 20)])
    rep = bench.build_report(r, bench.judge(r))
    assert rep.data["localisation"] == {"skipped": "one node: no inter-node link to test"}  # never null
    two = result([node(0, "n1", [0]), node(1, "n2", [1])], [meas()])
    assert bench.build_report(two, bench.judge(two)).data["localisation"] == {
        "skipped": "the node-pair pass was not run (--no-pairs)"}
    assert rep.tables[0].columns[:2] == ("size (B)", "count") and len(rep.tables[0].rows) == 2
    row = rep.data["results"][0]
    assert {"op", "group", "size_bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong"} <= set(row)
    assert rep.data["nodes"][0]["host"] == "vm"


SECONDS = "expected a finite number of seconds, > 0 and at most 604800 (7 days)"
NOT_A_SIZE = "is not a size: expected a positive whole number with optional K/M/G (e.g. 64K, 1M, 1G)"


@pytest.mark.parametrize("argv,msg", [(["--ops", "broadcast"], "--ops: unknown op 'broadcast'"),
                                      (["--sizes", "1T"], f"--sizes '1T': '1T' {NOT_A_SIZE}"),
                                      (["--sizes", "0"], f"--sizes '0': '0' {NOT_A_SIZE}"),
                                      (["--sizes", "abc"], f"--sizes 'abc': 'abc' {NOT_A_SIZE}"),
                                      (["--sizes", "64K:1M:0.5"], "--sizes '64K:1M:0.5': the factor must be an integer >= 2"),
                                      (["--pair-size", "0"], f"--pair-size '0': '0' {NOT_A_SIZE}"),
                                      (["--groups", "rack"], "--groups: unknown rack"),
                                      (["--ops", ""], "--ops: empty"),
                                      (["--groups", " "], "--groups: empty"),
                                      (["--sizes", ""], "--sizes: empty"),
                                      (["--iters", "0"], "--iters must be >= 1"),
                                      (["--warmup", "-1"], "--warmup must be >= 0, got -1"),
                                      (["--timeout", "-5"], f"--timeout -5: {SECONDS}"),
                                      (["--timeout", "inf"], f"--timeout inf: {SECONDS}"),
                                      (["--timeout", "1e400"], f"--timeout inf: {SECONDS}"),
                                      (["--timeout", "nan"], f"--timeout nan: {SECONDS}"),
                                      (["--timeout", "604801"], f"--timeout 604801: {SECONDS}"),
                                      (["--deadline", "0"], f"--deadline 0: {SECONDS}"),
                                      (["--collective-timeout", "0"], f"--collective-timeout 0: {SECONDS}"),
                                      (["--collective-timeout", "inf"], f"--collective-timeout inf: {SECONDS}")])
def test_bad_arguments_one_line_exit_2(argv, msg, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", *argv], capture_output=True, text=True,
                          timeout=60, env=dict(env(), TMPDIR=str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"nccl-doctor bench: error: {msg}"), proc.stderr
    assert list(tmp_path.iterdir()) == []  # refused before any stage dir or launch log was made


@pytest.mark.parametrize("port", ["99999", "0", "abc"])
def test_bad_master_port_is_refused_on_one_node_too(port):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K"], capture_output=True,
                          text=True, timeout=60, env=dict(env(), MASTER_PORT=port))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "MASTER_PORT" in proc.stderr, proc.stderr


def env():
    e = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME"):
        e.pop(var, None)
    return e


def test_real_two_rank_gloo_run_json():
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K,1M", "--iters", "5",
                           "--format", "json"], capture_output=True, text=True, timeout=120, env=env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["backend"] == "gloo" and doc["world_size"] == 2 and doc["verdict"] == "warn"  # sizes too small
    got = {(r["op"], r["size_bytes"]) for r in doc["results"]}
    assert got == {(op, s) for op in ("all_gather", "reduce_scatter", "all_reduce") for s in (65536, 1 << 20)}
    for r in doc["results"]:
        assert r["wrong"] == 0 and r["time_us"] > 0 and r["group"] == "world"
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * bus_factor(r["op"], 2), rel=1e-3, abs=1e-4)
    assert [f["code"] for f in doc["findings"]] == ["ND306", "ND300"]
    assert "[6/6]" in proc.stderr  # sparse progress lines in a job log


def test_plain_worker_ranks_all_exit_with_rank0_verdict(tmp_path):
    """Ranks started by someone else's launcher (RANK/WORLD_SIZE set): rank 0 renders, both exit 1 (--strict)."""
    from nccl_doctor.cluster.launch import free_port

    out = tmp_path / "r.json"
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-m", "nccl_doctor", "bench", "--ops", "ag", "--sizes", "64K",
                               "--iters", "5", "--strict", "--json-out", str(out), "--format", "json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(env(), RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
             for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs[0][1][-2000:]
    assert json.loads(out.read_text())["verdict"] == "warn"  # --strict: a warning exits 1
    assert json.loads(outs[0][0])["verdict"] == "warn" and outs[1][0] == ""  # rank 1 renders nothing


def test_hung_rank_is_named_with_its_stage():
    e = dict(env(), NCCL_DOCTOR_TEST_STALL="1:reduce_scatter")
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K", "--iters", "5",
                           "--collective-timeout", "5", "--timeout", "60", "--format", "json"],
                          capture_output=True, text=True, timeout=120, env=e)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "reduce_scatter world 64 KiB" and doc["missing_ranks"] == [1]
    (f,) = doc["findings"]
    assert f["code"] == "ND310" and "rank 1" in f["message"]
    # one line from the launcher instead of torchrun's ChildFailedError dump, which stays in the log
    assert "ChildFailedError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    log = doc["worker_log"]
    assert f"stderr: {log}" in proc.stderr and "ChildFailedError" in open(log).read()
    os.unlink(log)


def test_bad_interface_variable_blocks_the_launch_before_any_rank_starts(tmp_path):
    """GLOO_SOCKET_IFNAME naming nothing fails in milliseconds with the fix, instead of an init timeout;
    an NCCL-only typo does not stop a Gloo run."""
    import argparse

    from tests.helpers import sysfs_builder

    from nccl_doctor.bench.command import launch_blockers

    root = sysfs_builder.build(sysfs_builder.cloud_vm(), tmp_path)
    cpu = argparse.Namespace(cpu=True)
    report = launch_blockers(cpu, {"GLOO_SOCKET_IFNAME": "ib9"}, root)
    assert report is not None and report.verdict.value == "fail"
    [f] = report.findings
    assert f.code == "ND216" and f.where.iface == "ib9" and f.fix == "export GLOO_SOCKET_IFNAME=ens5"
    assert launch_blockers(cpu, {"NCCL_SOCKET_IFNAME": "ib9"}, root) is None
    assert launch_blockers(cpu, {}, root) is None


def test_bad_gloo_ifname_cli_exits_1_without_launching(venv_env):
    env = {**venv_env, "GLOO_SOCKET_IFNAME": "nonexistent9"}
    p = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--cpu", "--format", "json"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["stage"] == "probe" and [f["code"] for f in doc["findings"]] == ["ND216"]
    assert "torch" not in p.stderr  # nothing was launched


def test_nothing_measured_warns_and_cannot_pass():
    """--groups inter on one node: no measurement at all is ND001 (WARN) and "could not run", never a PASS."""
    r = result([node(0, "vm", [0, 1])])
    r.skipped = ["inter: needs 2+ nodes (1 node x 2 ranks per node)"]
    assert bench.measured_nothing(r)
    [f] = bench.coverage(r, asked=True)
    assert f.code == "ND001" and f.severity.value == "warn" and "inter: needs 2+ nodes" in f.message
    rep = bench.build_report(r, bench.judge(r) + [f])
    assert rep.verdict.value == "warn" and rep.summary.startswith("nothing measured: inter: needs 2+ nodes")
    # some groups measured: a named group that was skipped still warns; the default groups do not
    r.results = [meas()]
    assert not bench.measured_nothing(r)
    assert [f.code for f in bench.coverage(r, asked=True)] == ["ND001"] and bench.coverage(r, asked=False) == []


def test_why_a_group_is_not_measured():
    assert bw._why_not("inter", 1, 2) == "inter: needs 2+ nodes (1 node x 2 ranks per node)"
    assert bw._why_not("intra", 1, 2) == "intra: the same group as world on one node (1 node x 2 ranks per node)"
    assert bw._why_not("intra", 2, 1) == "intra: needs 2+ ranks per node (2 nodes x 1 rank per node)"
    assert bw._why_not("inter", 2, 1).startswith("inter: the same group as world with 1 rank per node")


def test_real_run_that_measures_nothing_exits_2():
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--groups", "inter", "--no-pairs",
                           "--sizes", "64K", "--format", "json"], capture_output=True, text=True, timeout=120,
                          env=env())
    assert proc.returncode == 2, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "warn" and doc["results"] == [] and doc["pairs"] == []
    assert doc["summary"].startswith("nothing measured: inter: needs 2+ nodes")
    assert doc["summary"].endswith("; could not run (exit 2)")  # the verdict line does not read as a mere warning
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == [("ND001", "warn")]
    assert "inter: needs 2+ nodes" in doc["findings"][0]["message"]
    assert doc["localisation"] == {"skipped": "one node: no inter-node link to test"}


def test_rank0_that_cannot_write_its_output_records_2_for_the_launcher(tmp_path, capsys):
    """The launcher returns the code in the stage file: a failed --json-out write must not leave a 0 there."""
    import argparse

    from nccl_doctor.errors import DoctorError
    from nccl_doctor.cluster.launch import STAGE_DIR_ENV, StageFile, read_stages
    from nccl_doctor.report import Report

    sf = StageFile(0, "vm", {STAGE_DIR_ENV: str(tmp_path)})
    args = argparse.Namespace(format="json", json_out=Path("/proc/nccl-doctor-test.json"), junit_out=None,
                              strict=False)
    with pytest.raises(DoctorError, match="cannot write /proc/nccl-doctor-test.json"):
        bench._finish(args, 0, sf, Report(command="bench"), code=0)
    assert [(s.stage, s.code) for s in read_stages(tmp_path)] == [("failed", 2)]
    assert json.loads(capsys.readouterr().out)["command"] == "bench"  # the report itself was still printed
    # a rank that is not rank 0 renders nothing and returns the shared code
    assert bench._finish(args, 1, StageFile(1, "vm", {STAGE_DIR_ENV: str(tmp_path)}), Report(command="bench"),
                         code=1) == 0
    assert capsys.readouterr().out == ""


def test_a_node_without_yardstick_says_why(tmp_path):
    """The probe cannot read the node: the figures are still measured, and the report says why there is
    no "% of expected" (a bug in probe/expected is raised, never turned into this)."""
    exp, nominal, why = bw.local_expected({}, "gloo", root=str(tmp_path / "missing"))
    assert (exp, nominal) == (None, False) and why.startswith("no yardstick: the probe could not read this node")
    n = bw.NodeInfo(index=0, host="n1", ranks=(0,), iface=None, link_gbps=None, no_expected=why)
    rep = bench.build_report(result([n], [meas()]), [])
    assert rep.data["nodes"][0]["expected_basis"] == why
    assert any(note.startswith(f"inter-node expected on n1: {why}") for note in rep.notes)


def test_one_rank_measures_nothing_and_cannot_pass(tmp_path):
    """A world of one rank crosses no link: its 0 GB/s is no measurement. ND001, exit 2, JUnit error."""
    junit = tmp_path / "bench.xml"
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--nproc-per-node", "1", "--sizes", "64K",
                           "--format", "json", "--junit-out", str(junit)], capture_output=True, text=True,
                          timeout=120, env=dict(env(), TMPDIR=str(tmp_path)))
    assert proc.returncode == 2, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["results"] == [] and doc["could_not_run"] == "nothing was measured"
    nd001 = next(f for f in doc["findings"] if f["code"] == "ND001")
    assert "world: 1 rank" in nd001["message"] and "--nproc-per-node 2" in nd001["fix"]
    assert 'errors="1"' in junit.read_text()


def test_buffers_that_do_not_fit_in_memory_are_the_sizes_not_the_cluster(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "4096G", "--ops", "ar",
                           "--no-pairs", "--iters", "1", "--format", "json"], capture_output=True, text=True,
                          timeout=120, env=dict(env(), TMPDIR=str(tmp_path)))
    assert proc.returncode == 2, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    f = next(f for f in doc["findings"] if f["code"] == "ND310")
    assert "do not fit in memory" in f["message"] and "smaller --sizes" in f["fix"] and "drain" not in f["fix"]
    assert "do not fit in memory" in doc["could_not_run"]
