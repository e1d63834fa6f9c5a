"""The pair pass rail by rail on real Gloo ranks: 2 "nodes" x 2 local ranks on this machine (plain worker
ranks with torchrun's GROUP_RANK set per node), rank 3 (node 2, local rank 1) slowed by the test seam:
rail 1 is measured and named, where the old pass pinged each node's rank 0 only. The rails share one
link here (loopback, no yardstick), so the pair's figure is their sum and the slow rail is a lagging rank.
The GPU-pair pass runs here too, on Gloo under its test seam (NCCL_DOCTOR_TEST_GPU_PAIRS=gloo): each "node"'s
two local ranks exchange with each other, before the node-pair pass, and the report carries both pairs."""

import json
import os
import subprocess
import sys

import pytest

from nccl_doctor.cluster.net import free_port

pytestmark = pytest.mark.torch
LOCAL = 2


def test_rail_1_is_measured_and_named(tmp_path):
    out = tmp_path / "r.json"
    port = str(free_port())
    base = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port, WORLD_SIZE="4", LOCAL_WORLD_SIZE=str(LOCAL), NNODES="2",
                NCCL_DOCTOR_TEST_SLOW_RANK="3:0.2", NCCL_DOCTOR_TEST_GPU_PAIRS="gloo")
    for var in ("SLURM_JOB_ID", "GLOO_SOCKET_IFNAME"):
        base.pop(var, None)
    procs = [subprocess.Popen([sys.executable, "-m", "nccl_doctor", "bench", "--ops", "ag", "--groups", "world",
                               "--sizes", "64K", "--iters", "5", "--pair-size", "1M", "--json-out", str(out),
                               "--format", "json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(base, RANK=str(r), LOCAL_RANK=str(r % LOCAL), GROUP_RANK=str(r // LOCAL)))
             for r in range(4)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert outs[0][0], outs[0][1][-3000:]
    doc = json.loads(out.read_text())
    assert doc["nnodes"] == 2 and doc["local_world_size"] == LOCAL
    (pair,) = doc["pairs"]
    rails = {r["rail"]: r for r in pair["rails"]}
    assert sorted(rails) == [0, 1] and rails[0]["ranks"] == [0, 2] and rails[1]["ranks"] == [1, 3]
    assert rails[1]["busbw_gbps"] < 0.25 * rails[0]["busbw_gbps"]  # 2 x 1 MiB per 200 ms: ~0.01 GB/s
    assert pair["busbw_gbps"] == pytest.approx(rails[0]["busbw_gbps"] + rails[1]["busbw_gbps"], abs=2e-4)
    found = [f for f in doc["findings"] if f["code"] == "ND312"]
    assert len(found) == 1, [(f["code"], f["message"]) for f in doc["findings"]]
    f = found[0]
    assert "rail 1 (local rank 1) ranks 1<->3" in f["message"] and "a rank at one end is slow" in f["message"]
    assert doc["verdict"] == "warn" and [p.returncode for p in procs] == [0] * 4
    gpu = doc["gpu_pairs"]  # the GPU-pair pass's wiring, on CPU ranks: one pair per node, NVML not read on CPU
    assert [(p["ranks"], p["local"], p["wrong"]) for p in gpu["pairs"]] == [([0, 1], [0, 1], 0), ([2, 3], [0, 1], 0)]
    assert len({p["host"] for p in gpu["pairs"]}) == 1 and all(p["busbw_gbps"] > 0 for p in gpu["pairs"])
    assert gpu["nvlinks"] == [] and gpu["nvlinks_unread"] == "the ranks ran on CPU"
    (ok,) = [f for f in doc["findings"] if f["code"] == "ND315"]
    assert ok["severity"] == "pass" and ok["message"].startswith("2 GPU pairs on ")
