"""``examples/preflight.sbatch`` on 16 identical namespace nodes under real Slurm (root), twice on one
cluster: healthy, the job ends PASS with no finding above PASS (no node 0 that "differs", no warning a
healthy cluster would teach people to ignore); then with n5 and n12 throttled, both FAIL and the 14
healthy nodes are not named by any finding above PASS, not even a warning. The largest real runs CI
makes; node 0's protocol past 16 nodes is ``benchmarks/bench_scale.py``'s."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import hostlist
import pytest

from tests.helpers import slurm

ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "examples" / "preflight.sbatch"
NODES = 16
THROTTLED = (4, 11)  # n5 and n12
DEADLINE = 150  # PREFLIGHT_TIMEOUT: 16 launchers and their ranks share this box's 2 cores

pytestmark = [pytest.mark.slurm, pytest.mark.torch, pytest.mark.timeout(DEADLINE + 120)]


def job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env.update(PYTHONWARNINGS="ignore", PREFLIGHT_TIMEOUT=str(DEADLINE), NCCL_SOCKET_IFNAME="=eth1",
               GLOO_SOCKET_IFNAME="eth1", PREFLIGHT_ARGS="--nproc-per-node 1",
               SBATCH_GPUS_PER_NODE="0")  # the script asks for 8 GPUs per node; this test cluster has no GPU gres
    return env


def run(sc: slurm.SlurmCluster) -> tuple[int, str, dict]:
    """One sbatch of the example; its exit code, output and JSON report."""
    before = set(sc.dir.glob("preflight-*.json"))
    rc, out = sc.submit(SBATCH, env=job_env(), timeout=DEADLINE + 30)
    [path] = set(sc.dir.glob("preflight-*.json")) - before
    return rc, out, json.loads(path.read_text())


def named(doc: dict, severity: str) -> set[str]:
    """Hosts named by the report's findings of ``severity`` (a hostlist names each of its nodes)."""
    return {h for f in doc["findings"] if f["severity"] == severity and f["where"].get("host")
            for h in hostlist.expand_hostlist(f["where"]["host"])}


def above_pass(doc: dict) -> list[str]:
    """Each finding above PASS as ``CODE host``, for an assertion message that says who was blamed."""
    return [f"{f['code']} {f['where'].get('host', '')}" for f in doc["findings"]
            if f["severity"] != "pass"]


def test_sixteen_identical_nodes_pass_then_fail_exactly_the_two_throttled():
    with slurm.SlurmCluster(NODES) as sc:
        healthy_rc, healthy_out, healthy = run(sc)
        for i in THROTTLED:
            sc.throttle(sc.nodes[i], "100mbit")
        rc, out, doc = run(sc)
    leftovers = sc.leftovers()  # torn down: no namespace, daemon or process left
    assert healthy["nnodes"] == NODES
    assert (healthy_rc, healthy["verdict"], above_pass(healthy)) == (0, "pass", []), healthy_out
    assert doc["nnodes"] == NODES
    assert rc == 1 and doc["verdict"] == "fail", out
    assert named(doc, "fail") == {"n5", "n12"}, out
    assert sorted(doc["localisation"]["bad_nodes"]) == ["n12", "n5"]
    # nobody else blamed, not even in a warning, and no finding above PASS that names no host at all
    assert named(doc, "warn") <= {"n5", "n12"}, out
    assert [f["code"] for f in doc["findings"] if f["severity"] != "pass" and not f["where"].get("host")] == [], out
    assert leftovers == []
