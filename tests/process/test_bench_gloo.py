"""bench's real runs: Gloo ranks on this machine through the self-launcher (or a launcher of someone else's),
the JSON they agree on, and how a hung, failed or empty run is reported."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_doctor.cluster.net import free_port

pytestmark = pytest.mark.torch
# nccl-tests' busbw factors on 2 ranks: all-gather and reduce-scatter (n-1)/n, all-reduce 2(n-1)/n
TWO_RANK_FACTOR = {"all_gather": 0.5, "reduce_scatter": 0.5, "all_reduce": 1.0}


def env(**kw):
    e = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME"):
        e.pop(var, None)
    e.update(kw)
    return e


def bench(*argv, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", *argv], capture_output=True, text=True,
                          check=False, timeout=timeout, env=env(**kw))


def test_real_two_rank_gloo_run_json():
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K,1M", "--iters", "5",
                           "--format", "json"], capture_output=True, text=True, check=False, timeout=120, env=env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["backend"] == "gloo" and doc["world_size"] == 2 and doc["verdict"] == "warn"  # sizes too small
    got = {(r["op"], r["size_bytes"]) for r in doc["results"]}
    assert got == {(op, s) for op in ("all_gather", "reduce_scatter", "all_reduce") for s in (65536, 1 << 20)}
    for r in doc["results"]:
        assert r["wrong"] == 0 and r["time_us"] > 0 and r["group"] == "world"
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9, rel=1e-3, abs=1e-4)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * TWO_RANK_FACTOR[r["op"]], rel=1e-3, abs=1e-4)
    assert [f["code"] for f in doc["findings"]] == ["ND306", "ND300"]
    assert "[6/6]" in proc.stderr  # sparse progress lines in a job log


def test_plain_worker_ranks_all_exit_with_rank0_verdict(tmp_path):
    """Ranks started by someone else's launcher (RANK/WORLD_SIZE set): rank 0 renders, both exit 1 (--strict)."""
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
                          capture_output=True, text=True, check=False, timeout=120, env=e)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "reduce_scatter world 64 KiB" and doc["missing_ranks"] == [1]
    (f,) = doc["findings"]
    assert f["code"] == "ND310" and "rank 1" in f["message"]
    # one line from the launcher instead of torchrun's ChildFailedError dump, which stays in the log
    assert "ChildFailedError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    log = doc["worker_log"]
    assert f"stderr: {log}" in proc.stderr and "ChildFailedError" in Path(log).read_text()
    os.unlink(log)


def test_rank_stuck_inside_a_collective_is_named_as_the_one_that_entered_and_never_left():
    """Rank 1 records the stage, runs the warm-up with rank 0, then hangs: rank 0 waits inside the timed loop's
    collective. Every rank reached the stage, so nobody is "missing"; rank 1's marks stop at the stage's entry
    while rank 0's go past the warm-up, so the watchdog names rank 1 as the rank that entered and never left
    (issue 21, point 6: it used to say only "every rank reached it"). The watchdog ends it, not PyTorch: the
    collective timeout of 5 s, long before Gloo's own (20 s) and --timeout."""
    t0 = time.monotonic()
    proc = bench("--sizes", "64K", "--iters", "5", "--collective-timeout", "5", "--timeout", "60", "--format", "json",
                 NCCL_DOCTOR_TEST_STALL_INSIDE="1:reduce_scatter")
    seconds = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "reduce_scatter world 64 KiB" and doc["missing_ranks"] == []
    assert doc["never_left_ranks"] == [1] and doc["never_left_hosts"] == [socket.gethostname()]
    assert doc["results"] == [] and doc["localisation"] == {
        "skipped": "the run stopped in stage reduce_scatter world 64 KiB"}
    (f,) = doc["findings"]
    assert f["code"] == "ND310" and f["where"]["rank"] == 0
    assert f["message"].endswith(f"; every rank reached it; ranks that entered it and never left: rank 1 "
                                 f"({socket.gethostname()})"), f["message"]
    # rank 0's watchdog reports it; or rank 1's fired first, its exit closed the pair and rank 0's guard reports
    # the closed connection: either way with the marks that name rank 1
    assert "outlived --collective-timeout (5 s) on rank 0" in f["message"] or "failed on rank 0" in f["message"]
    assert "ChildFailedError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    log = doc["worker_log"]
    assert f"stderr: {log}" in proc.stderr
    os.unlink(log)
    assert seconds < 60, f"took {seconds:.1f} s"  # ND310, not the deadline's ND309: the watchdog ended it


def test_a_rank_that_never_arrives_at_init_is_named_in_the_init_stage():
    """Rank 1 never calls init_process_group (issue 21, points 1 and 17): rank 0's watchdog, armed inside the
    init stage, ends the run after the collective timeout and charges it to init, naming rank 1 as never there.
    On NCCL, with eager init, this is where a peer missing at the world communicator's creation now shows."""
    t0 = time.monotonic()
    proc = bench("--sizes", "64K", "--iters", "2", "--no-pairs", "--collective-timeout", "5", "--timeout", "60",
                 "--format", "json", NCCL_DOCTOR_TEST_STALL="1:init")
    seconds = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "init" and doc["missing_ranks"] == [1] and doc["missing_hosts"] == ["?"]
    (f,) = doc["findings"]
    assert f["code"] == "ND310" and f["message"].startswith("stage init outlived --collective-timeout (5 s) on rank 0")
    assert f["message"].endswith("; ranks that never reached it: rank 1 (?)"), f["message"]
    os.unlink(doc["worker_log"])
    assert seconds < 60, f"took {seconds:.1f} s"  # ND310 before the deadline's ND309 (start-up is slow on 2 cores)


def test_real_run_that_measures_nothing_exits_2():
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--groups", "inter", "--no-pairs",
                           "--sizes", "64K", "--format", "json"], capture_output=True, text=True, check=False, timeout=120,
                          env=env())
    assert proc.returncode == 2, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "warn" and doc["results"] == [] and doc["pairs"] == []
    assert doc["summary"].startswith("nothing measured: inter: needs 2+ nodes")
    assert doc["summary"].endswith("; could not run (exit 2)")  # the verdict line does not read as a mere warning
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == [("ND001", "warn")]
    assert "inter: needs 2+ nodes" in doc["findings"][0]["message"]
    assert doc["localisation"] == {"skipped": "one node: no inter-node link to test"}


def test_one_rank_measures_nothing_and_cannot_pass(tmp_path):
    """A world of one rank crosses no link: its 0 GB/s is no measurement. ND001, exit 2, JUnit error."""
    junit = tmp_path / "bench.xml"
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--nproc-per-node", "1", "--sizes", "64K",
                           "--format", "json", "--junit-out", str(junit)], capture_output=True, text=True,
                          check=False, timeout=120, env=env(TMPDIR=str(tmp_path)))
    assert proc.returncode == 2, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["results"] == [] and doc["could_not_run"] == "nothing was measured"
    nd001 = next(f for f in doc["findings"] if f["code"] == "ND001")
    assert "world: 1 rank" in nd001["message"] and "--nproc-per-node 2" in nd001["fix"]
    assert 'errors="1"' in junit.read_text()


def test_buffers_that_do_not_fit_in_memory_are_the_sizes_not_the_cluster(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "4096G", "--ops", "ar",
                           "--no-pairs", "--iters", "1", "--format", "json"], capture_output=True, text=True,
                          check=False, timeout=120, env=env(TMPDIR=str(tmp_path)))
    assert proc.returncode == 2, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    f = next(f for f in doc["findings"] if f["code"] == "ND310")
    assert "do not fit in memory" in f["message"] and "smaller --sizes" in f["fix"] and "drain" not in f["fix"]
    assert "do not fit in memory" in doc["could_not_run"]
