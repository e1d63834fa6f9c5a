"""``plan --from`` on the JSON of a real 2-rank Gloo ``bench`` run: the figures it takes are that run's busbw at
the largest size measured, each sourced, and the plan is computed from them."""

import json
import os
import subprocess
import sys

import pytest

from nccl_doctor.cli import main

pytestmark = [pytest.mark.torch, pytest.mark.timeout(150)]


def test_plan_reads_a_gloo_bench_json(tmp_path, capsys):
    js = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--nproc-per-node", "2", "--ops", "ag,rs",
                           "--sizes", "64K,256K", "--iters", "3", "--json-out", str(js)],
                          capture_output=True, text=True, check=False, timeout=120, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    bench = json.loads(js.read_text())
    top = {r["op"]: r["busbw_gbps"] for r in bench["results"] if r["size_bytes"] == 262144}

    assert main(["plan", "--params", "100M", "--from", str(js), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    got = doc["inputs"]
    assert got["intra_all_gather_gbps"]["value"] == top["all_gather"]
    assert got["intra_reduce_scatter_gbps"]["value"] == top["reduce_scatter"]
    assert "262144 bytes" in got["intra_all_gather_gbps"]["source"]
    assert (got["nodes"]["value"], got["gpus_per_node"]["value"]) == (1, 2)
    p = 100e6  # one mesh (1, 2): AG 2 P 2 (1/2) / B_AG + RS P 4 (1/2) / B_RS
    want = 2 * p * 2 / 2 / (top["all_gather"] * 1e9) + p * 4 / 2 / (top["reduce_scatter"] * 1e9)
    assert doc["recommended"] == {"shard_size": 2, "mesh": [1, 2], "comm_s": pytest.approx(want, rel=1e-5)}
