"""``examples/preflight.sbatch`` on a real Slurm cluster in namespaces, submitted with ``sbatch --wait``.

One cluster per test (2-3 nodes, about 1 s to start); never more than one at a time."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers import slurm

ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "examples" / "preflight.sbatch"
DEADLINE = 90  # PREFLIGHT_TIMEOUT: the job must end (and say why) well within it

pytestmark = [pytest.mark.slurm, pytest.mark.torch, pytest.mark.timeout(240)]


@pytest.fixture
def job_env():
    """The submitter's environment, as a user's: the venv on PATH, interfaces named as in a real job."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env.update(PYTHONWARNINGS="ignore", PREFLIGHT_TIMEOUT=str(DEADLINE), NCCL_SOCKET_IFNAME="=eth1",
               GLOO_SOCKET_IFNAME="eth1",
               SBATCH_GPUS_PER_NODE="0")  # the script asks for 8 GPUs per node; this test cluster has no GPU gres
    return env


def _report(sc: slurm.SlurmCluster) -> dict:
    [path] = sc.dir.glob("preflight-*.json")
    return json.loads(path.read_text())


def _fails(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] == "fail"]


def test_healthy_two_nodes_pass(job_env):
    with slurm.SlurmCluster(2) as sc:
        rc, out = sc.submit(SBATCH, env=job_env, timeout=DEADLINE + 30)
        assert rc == 0, out
        doc = _report(sc)
    # each namespace node's eth1 is a veth uplink (as in a container): a data interface, nothing to warn about
    assert doc["verdict"] == "pass", out
    assert doc["nnodes"] == 2 and doc["hosts"] == ["n1", "n2"]
    assert [f for f in doc["findings"] if f["severity"] != "pass"] == [], out  # nothing above PASS (issue 12)
    assert {(f["code"], f["severity"]) for f in doc["findings"]} >= {("ND300", "pass"), ("ND401", "pass")}
    [ok] = [f for f in doc["findings"] if f["code"] == "ND300"]
    assert "no slow node or link: 1 node pair(s) in 1 round(s)" in ok["message"]  # the pair pass ran, found none
    assert doc["localisation"]["bad_nodes"] == [] and doc["localisation"]["rounds"] == [[["n1", "n2"]]]
    assert "NCCL log check skipped" in out  # CPU only: Gloo ran, and the report says why NCCL logs are absent
    assert "fit for multi-node training" in out
    assert sc.leftovers() == []


def test_could_not_run_is_the_jobs_exit_code_2(job_env):
    """preflight's 2 (could not run) must reach the job as 2, not as 1 (a fail)."""
    job_env["PREFLIGHT_ARGS"] = "--collective-timeout inf"
    with slurm.SlurmCluster(2) as sc:
        rc, out = sc.submit(SBATCH, env=job_env, timeout=60)
    assert rc == 2, out
    assert "error: --collective-timeout inf: expected a finite number of seconds" in out


def test_three_nodes_one_throttled_fails_naming_it(job_env):
    with slurm.SlurmCluster(3) as sc:
        sc.throttle(sc.nodes[1])
        rc, out = sc.submit(SBATCH, env=job_env, timeout=DEADLINE + 30)
        doc = _report(sc)
    assert rc == 1, out
    slow = [f for f in _fails(doc) if f["code"] == "ND302"]
    assert [f["where"]["host"] for f in slow] == ["n2"], out
    assert doc["localisation"]["bad_nodes"] == ["n2"]
    assert "drain n2" in slow[0]["fix"]


def test_missing_socket_ifname_fails_in_seconds_with_the_fix(job_env):
    job_env["NCCL_SOCKET_IFNAME"] = "missing"
    with slurm.SlurmCluster(2) as sc:
        t0 = time.monotonic()
        rc, out = sc.submit(SBATCH, env=job_env, timeout=60)
        seconds = time.monotonic() - t0
        doc = _report(sc)
    assert rc == 1, out
    assert seconds < 30, f"took {seconds:.1f} s"
    [first] = [f for f in _fails(doc) if "NCCL_SOCKET_IFNAME=missing" in f["message"]]
    assert first["where"]["host"] == "n[1-2]"  # one finding for the problem both nodes share
    assert first["fix"] == "export NCCL_SOCKET_IFNAME==eth1"
    assert "no rank was started" in out  # failed before any worker started
    assert doc["timings_s"]["total"] < 15


def test_node_killed_mid_run_fails_fast_naming_it(job_env):
    """The survivors' own exit codes, as srun reports them, are the test: Slurm itself takes another ~20 s
    to declare the node failed and cancel the job, which says nothing about nccl-doctor, so the test does
    not wait for it (the cluster's teardown ends the job)."""
    before = set(Path(tempfile.gettempdir()).glob("nccl-doctor-*"))
    survivors = ("n1: task 0: Exited with exit code 1", "n3: task 2: Exited with exit code 1")
    with slurm.SlurmCluster(3) as sc:
        job = sc.sbatch(SBATCH, env=job_env, time_limit_s=DEADLINE + 60)
        t0 = time.monotonic()
        while "bench:" not in (job.out_path.read_text() if job.out_path.exists() else ""):
            assert time.monotonic() - t0 < 60, "preflight never reached the bench"
            time.sleep(0.2)
        sc.kill_node(sc.nodes[1])
        killed = time.monotonic()
        while not all(line in (out := job.out_path.read_text(errors="replace")) for line in survivors):
            assert time.monotonic() - killed < DEADLINE, f"the survivors did not stop on their own:\n{out}"
            time.sleep(0.2)
        doc = _report(sc)
    lost = [f for f in _fails(doc) if f["code"] == "ND407"]
    assert lost and lost[0]["where"]["host"] == "n2", out
    assert doc["timings_s"]["total"] < DEADLINE / 2  # the survivors stopped on their own, long before the deadline
    # even the SIGKILLed node's private dirs went with the cluster (its TMPDIR), none in the machine's /tmp
    assert set(Path(tempfile.gettempdir()).glob("nccl-doctor-*")) - before == set()
