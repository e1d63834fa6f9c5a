"""``nccl-doctor preflight`` across network-namespace nodes without Slurm (root): each node placed by flags, by
a PyTorchJob pod's variables or by Open MPI / PMIx's, and a run that passes; a flag that replaces the
launcher's value says so in one line."""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from nccl_doctor.cluster.net import free_port
from tests.helpers.netns import communicate_or_kill
from tests.helpers.preflight_cli import preflight_argv

pytestmark = [pytest.mark.torch, pytest.mark.netns, pytest.mark.timeout(150)]

RUN = ("--timeout", "90", "--collective-timeout", "20", "--format", "json")
SECRET = secrets.token_hex(16)  # every node the same (the store is authenticated: a healthy run ends PASS)
LAUNCHER_PREFIXES = ("SLURM_", "MASTER_", "PET_", "OMPI_", "PMIX_", "WORLD_SIZE", "RANK", "TORCHELASTIC_")


def _env(base: dict[str, str], tmp: str, **extra: str) -> dict[str, str]:
    """The test's environment less every launcher's variables, the namespace interfaces named, plus ``extra``."""
    env = {k: v for k, v in base.items() if not k.startswith(LAUNCHER_PREFIXES)}
    env.update(GLOO_SOCKET_IFNAME="eth1", NCCL_SOCKET_IFNAME="=eth1", TMPDIR=tmp, NCCL_DOCTOR_SECRET=SECRET, **extra)
    return env


def _run_two(c, envs: list[dict[str, str]], extra: list[list[str]]) -> list[tuple[int, str, str]]:
    procs = [c.popen(node, preflight_argv(*RUN, *argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True) for node, env, argv in zip(c.nodes, envs, extra, strict=True)]
    outs = [communicate_or_kill(p, 120) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs, strict=True)]


def _passed(results: list[tuple[int, str, str]]) -> dict:
    assert [rc for rc, _, _ in results] == [0, 0], results[0][2][-3000:] + results[1][2][-3000:]
    doc = json.loads(results[0][1])
    assert doc["verdict"] == "pass", results[0][1]
    assert doc["nnodes"] == 2 and doc["hosts"] == ["n1", "n2"]  # the names the nodes gave, not node-rank-1
    assert "PASS" in results[1][1]  # node 1's one line: the verdict node 0 holds the report of
    return doc


def test_flags_alone_place_each_node(cluster_factory, venv_env, tmp_path):
    c = cluster_factory(2)
    port = str(free_port())
    envs = [_env(venv_env, str(tmp_path)) for _ in c.nodes]
    argv = [["--nnodes", "2", "--node-rank", str(i), "--master-addr", f"n1:{port}"] for i in range(2)]
    doc = _passed(_run_two(c, envs, argv))
    assert {(f["code"], f["severity"]) for f in doc["findings"]} >= {("ND300", "pass"), ("ND401", "pass")}


def test_a_pytorchjob_pod_and_an_open_mpi_task_meet(cluster_factory, venv_env, tmp_path):
    """Node 0 reads a PyTorchJob master pod's variables, node 1 an ``mpirun -N 1 -x MASTER_ADDR`` task's."""
    c = cluster_factory(2)
    port = str(free_port())
    pod = _env(venv_env, str(tmp_path), MASTER_ADDR="n1", MASTER_PORT=port, WORLD_SIZE="4", RANK="0",
               PET_NNODES="2", PET_NODE_RANK="0", PET_NPROC_PER_NODE="2")
    task = _env(venv_env, str(tmp_path), OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1",
                OMPI_COMM_WORLD_LOCAL_SIZE="1", OMPI_COMM_WORLD_LOCAL_RANK="0", MASTER_ADDR="n1", MASTER_PORT=port)
    results = _run_two(c, [pod, task], [[], []])
    _passed(results)
    assert not any("overrides" in err for _, _, err in results)  # nothing replaced: nothing said


def test_flags_win_over_the_environment_and_say_so(cluster_factory, venv_env, tmp_path):
    """Node 0's pod says 3 nodes and another master; its flags win, in one line. Node 1 is a PMIx task,
    whose environment has no job size: --nnodes gives it."""
    c = cluster_factory(2)
    port = str(free_port())
    pod = _env(venv_env, str(tmp_path), MASTER_ADDR="stale-master-0", MASTER_PORT="23456", PET_NNODES="3",
               PET_NODE_RANK="0")
    task = _env(venv_env, str(tmp_path), PMIX_RANK="1", MASTER_ADDR="n1", MASTER_PORT=port)
    results = _run_two(c, [pod, task], [["--nnodes", "2", "--master-addr", f"n1:{port}"], ["--nnodes", "2"]])
    _passed(results)
    said = [line for line in results[0][2].splitlines() if "overrides" in line]
    assert said == [f"nccl-doctor preflight (n1): --nnodes 2 overrides PET_NNODES=3; --master-addr n1 overrides "
                    f"MASTER_ADDR=stale-master-0; port {port} overrides MASTER_PORT=23456 (flags win over "
                    "PyTorchJob's environment)"]
