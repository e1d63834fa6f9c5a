"""CPU starvation through a real launch (issue 21 point 8): `taskset -c 0 nccl-doctor bench --cpu` starts every
rank on one CPU, as a Slurm task that asked for no CPUs does, and the report names the CPUs (ND314) with the
Slurm fix instead of leaving a slow figure to blame the network. Two ranks (0.5 CPU each) keep it fast; the
issue's four ranks are the same path (``tests/unit/bench/test_cpus.py`` has the 0.25 case). Its negative twin:
``test_bench_gloo.test_real_two_rank_gloo_run_json``, 2 ranks on this box's 2 CPUs, has no ND314."""

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_ranks_sharing_one_cpu_are_named_not_the_network(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME", "MASTER_PORT"):
        env.pop(var, None)
    proc = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "nccl_doctor", "bench", "--cpu",
                           "--nproc-per-node", "2", "--ops", "ag", "--sizes", "4K", "--iters", "1", "--warmup", "0",
                           "--no-pairs", "--format", "json"], capture_output=True, text=True, check=False,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (f,) = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "ND314"]
    assert f["severity"] == "warn"
    assert "2 Gloo rank(s) may run on 1 CPU(s) (CPU 0): 0.5 per rank" in f["message"]
    assert "not the network" in f["message"] and "--cpus-per-task=2" in f["fix"] and "--exclusive" in f["fix"]
