"""Where this node stands in the run: how many nodes, which one this is, node 0's port, how many ranks.

Everything comes from SLURM_* under ``srun``; outside Slurm (or on one node) the run is this machine alone.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from nccl_doctor.cluster import (
    DEFAULT_PORT,
    SlurmInfo,
    default_nproc,
    free_port,
    one_task_per_node,
    port_from_env,
    slurm_launch_config,
    visible_gpus,
)
from nccl_doctor.errors import InputError
from nccl_doctor.report import plural

STEP_PORTS = 1000  # (job id + step id) % this, added to DEFAULT_PORT


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    nnodes: int
    node_rank: int
    hosts: tuple[str, ...]
    head: str
    port: int
    nproc: int
    slurm: bool
    host: str
    run_id: str = ""  # what every node of this run shares and no other run does (Slurm: job.step)
    step: str = ""
    nproc_source: str = ""  # why this node starts ``nproc`` ranks (compared across nodes)

    @property
    def is_head(self) -> bool:
        return self.node_rank == 0

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc

    @property
    def head_host(self) -> str:
        """Node 0's name as the Slurm node list spells it (``head`` is the address to connect to)."""
        return self.hosts[0]

    def host_of(self, rank: int) -> str:
        return self.hosts[rank // self.nproc]


def node_plan(args: argparse.Namespace, env: Mapping[str, str]) -> NodePlan:
    """Everything from SLURM_* under srun; one node with 2 CPU ranks (or one per GPU) otherwise."""
    host = socket.gethostname()
    slurm = slurm_launch_config(env)
    nproc = args.nproc_per_node or default_nproc(env, slurm, cpu=args.cpu)
    source = nproc_source(args, env, slurm)
    if slurm is None or slurm.nnodes == 1:
        port = args.port or port_from_env(env) or free_port()
        return NodePlan(nnodes=1, node_rank=0, hosts=(host,), head="127.0.0.1", port=port, nproc=nproc,
                        slurm=slurm is not None, host=host, run_id=f"{host}.{os.getpid()}", nproc_source=source)
    if not env.get("SLURM_STEP_ID") or not env.get("SLURM_NODEID"):
        raise InputError(f"this {slurm.nnodes}-node allocation needs one preflight per node: run "
                         "`srun --ntasks-per-node=1 nccl-doctor preflight` (not bare in the batch script)")
    one_task_per_node(slurm, "preflight")
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "0"
    step = env["SLURM_STEP_ID"]
    port = args.port or port_from_env(env) or step_port(job, step)
    return NodePlan(nnodes=slurm.nnodes, node_rank=int(env["SLURM_NODEID"]), hosts=slurm.hosts,
                    head=slurm.rdzv_host, port=port, nproc=nproc, slurm=True, host=host,
                    run_id=f"{job}.{step}", step=step, nproc_source=source)


def step_port(job: str, step: str) -> int:
    """29500 + (job id + step id) % 1000: step 0 keeps the job's usual port, and two preflight steps of one
    job running at once (``srun --overlap``) do not meet on one port."""
    num = (int(job) if job.isdigit() else 0) + (int(step) if step.isdigit() else 0)
    return DEFAULT_PORT + num % STEP_PORTS


def nproc_source(args: argparse.Namespace, env: Mapping[str, str], slurm: SlurmInfo | None) -> str:
    """Why this node starts the ranks it does, in the words of the fix (compared across nodes)."""
    if args.nproc_per_node:
        return f"--nproc-per-node {args.nproc_per_node}"
    if args.cpu:
        return "--cpu: 2 CPU ranks"
    if gpus := visible_gpus(env):
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        return f"{plural(gpus, 'visible GPU')}" + (f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else "")
    if slurm is not None and slurm.gpus_on_node:
        return f"SLURM_GPUS_ON_NODE={slurm.gpus_on_node}"
    return "no GPU visible: 2 CPU ranks"
