"""Where a node stands in the run: the node plan from flags, SLURM_* or another launcher (or one machine alone),
and its port."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nccl_doctor.errors import InputError
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import node_plan


def _args(**kw):
    return PreflightOptions(**{"cpu": True, **kw})


def _slurm(node: int, *, job: str = "4242", step: str = "0", nodelist: str = "localhost,ghost",
           nnodes: int = 2) -> dict:
    """What ``srun --ntasks-per-node=1`` sets for one task of a ``nnodes``-node step."""
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": step, "SLURM_NODEID": str(node),
            "SLURM_STEP_NODELIST": nodelist, "SLURM_JOB_NODELIST": nodelist, "SLURM_NNODES": str(nnodes),
            "SLURM_STEP_NUM_NODES": str(nnodes), "SLURM_STEP_NUM_TASKS": str(nnodes)}


def test_plan_outside_slurm_is_one_node_two_ranks():
    plan = node_plan(_args(), {"PATH": "/bin"})
    assert (plan.nnodes, plan.node_rank, plan.nproc, plan.head) == (1, 0, 2, "127.0.0.1")


def test_plan_under_srun_comes_from_slurm_env():
    env = {"SLURM_JOB_ID": "1234", "SLURM_JOB_NODELIST": "gpu[01-03]", "SLURM_NNODES": "3", "SLURM_STEP_ID": "0",
           "SLURM_NODEID": "2", "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_NODELIST": "gpu[01-03]"}
    plan = node_plan(_args(), env)
    assert plan.hosts == ("gpu01", "gpu02", "gpu03") and plan.head == "gpu01"
    assert (plan.nnodes, plan.node_rank, plan.port) == (3, 2, 29500 + 234)
    assert not plan.is_head
    assert plan.world_size == 6 and plan.host_of(5) == "gpu03" and plan.head_host == "gpu01"


def test_plan_in_batch_script_without_srun_says_how():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NNODES": "2", "SLURM_NODEID": "0"}
    with pytest.raises(InputError, match=r"srun --ntasks-per-node=1 nccl-doctor preflight"):
        node_plan(_args(), env)


def test_plan_rejects_several_tasks_per_node():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NNODES": "2", "SLURM_NODEID": "0",
           "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "8"}
    with pytest.raises(InputError, match="4 tasks per node"):
        node_plan(_args(), env)


def test_a_bad_master_port_is_an_error_not_a_free_port():
    with pytest.raises(InputError, match="MASTER_PORT='29x' is not a number"):
        node_plan(_args(), {"MASTER_PORT": "29x"})
    assert node_plan(_args(), {"MASTER_PORT": "31001"}).port == 31001


def test_two_steps_of_one_job_default_to_different_ports():
    args = _args()
    p0 = node_plan(args, _slurm(1, job="1234", step="0", nodelist="gpu[01-02]"))
    p1 = node_plan(args, _slurm(1, job="1234", step="1", nodelist="gpu[01-02]"))
    assert p0.port == 29500 + 234 and p1.port == 29500 + 235  # step 0 keeps the job's usual port
    assert (p0.run_id, p1.run_id) == ("1234.0", "1234.1")


def test_the_node_plan_says_why_it_starts_its_ranks():
    args = _args(cpu=False)
    env = _slurm(1, nodelist="gpu[01-02]")
    assert node_plan(_args(nproc_per_node=1, cpu=False), env).nproc_source == \
        "--nproc-per-node 1"
    assert node_plan(args, dict(env, SLURM_GPUS_ON_NODE="4")).nproc_source == "SLURM_GPUS_ON_NODE=4"


def test_flags_alone_place_the_node_without_slurm():
    plan = node_plan(_args(nnodes=3, node_rank=2, master_addr="10.1.0.7:31000"), {})
    assert (plan.nnodes, plan.node_rank, plan.head, plan.port, plan.launcher) == (3, 2, "10.1.0.7", 31000, "flags")
    assert plan.hosts == ("10.1.0.7", "node-rank-1", "node-rank-2") and not plan.slurm
    assert plan.run_id == "3.31000" and plan.step == ""


def test_a_pytorchjob_pod_defaults_to_its_master_port():
    env = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"}
    plan = node_plan(_args(), env)
    assert (plan.nnodes, plan.node_rank, plan.head, plan.port, plan.launcher) == \
        (2, 1, "job-master-0", 23456, "PyTorchJob")
    assert node_plan(_args(), {**env, "MASTER_PORT": ""}).port == 29500


def test_a_flag_under_slurm_wins_and_says_so():
    plan = node_plan(_args(master_addr="10.0.0.1"), _slurm(1, job="1234", nodelist="gpu[01-02]"))
    assert (plan.head, plan.node_rank, plan.port, plan.run_id) == ("10.0.0.1", 1, 29500 + 234, "1234.0")
    assert plan.hosts == ("gpu01", "gpu02")
    assert plan.overrides == "--master-addr 10.0.0.1 overrides SLURM_NODELIST[0]=gpu01 (flags win over Slurm's " \
        "environment)"


def test_one_node_by_flag_is_this_machine_alone():
    plan = node_plan(_args(nnodes=1, port=31002), {"PET_NNODES": "4", "PET_NODE_RANK": "0", "MASTER_ADDR": "m"})
    assert (plan.nnodes, plan.head, plan.port) == (1, "127.0.0.1", 31002)
    assert plan.overrides == "--nnodes 1 overrides PET_NNODES=4 (flags win over PyTorchJob's environment)"


def test_the_names_nodes_give_at_the_rendezvous_replace_placeholders_never_slurms():
    plan = node_plan(_args(nnodes=3, node_rank=0, master_addr="10.1.0.7"), {})
    assert plan.named(["head-host", None, "n3"]).hosts == ("head-host", "node-rank-1", "n3")
    slurm = node_plan(_args(), _slurm(0, nodelist="gpu[01-02]"))
    assert slurm.named(["gpu01.cluster", "other"]).hosts == ("gpu01", "gpu02")


def test_an_incomplete_convention_is_one_line_exit_2_before_anything_starts():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MASTER_", "PET_", "OMPI_", "PMIX_"))}
    env.update(OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1")
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--cpu"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        "nccl-doctor preflight: error: Open MPI does not say where node 0 is: pass --master-addr HOST[:PORT] "
        "(node 0's address) or set MASTER_ADDR on every node (`mpirun -x MASTER_ADDR=node1 ...`)"]
