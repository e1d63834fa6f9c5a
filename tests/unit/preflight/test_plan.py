"""Where a node stands in the run: the node plan from SLURM_* (or one machine alone), and its port."""

from __future__ import annotations

import argparse

import pytest

from nccl_doctor.errors import InputError
from nccl_doctor.preflight.plan import node_plan


def _args(**kw):
    base = {"nproc_per_node": None, "cpu": True, "port": None}
    base.update(kw)
    return argparse.Namespace(**base)


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
    args = argparse.Namespace(nproc_per_node=None, cpu=True, port=None)
    p0 = node_plan(args, _slurm(1, job="1234", step="0", nodelist="gpu[01-02]"))
    p1 = node_plan(args, _slurm(1, job="1234", step="1", nodelist="gpu[01-02]"))
    assert p0.port == 29500 + 234 and p1.port == 29500 + 235  # step 0 keeps the job's usual port
    assert (p0.run_id, p1.run_id) == ("1234.0", "1234.1")


def test_the_node_plan_says_why_it_starts_its_ranks():
    args = argparse.Namespace(nproc_per_node=None, cpu=False, port=None)
    env = _slurm(1, nodelist="gpu[01-02]")
    assert node_plan(argparse.Namespace(nproc_per_node=1, cpu=False, port=None), env).nproc_source == \
        "--nproc-per-node 1"
    assert node_plan(args, dict(env, SLURM_GPUS_ON_NODE="4")).nproc_source == "SLURM_GPUS_ON_NODE=4"
