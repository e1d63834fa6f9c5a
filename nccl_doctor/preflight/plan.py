"""Where this node stands in the run: how many nodes, which one this is, node 0's port, how many ranks.

``--nnodes``/``--node-rank``/``--master-addr`` first, then the launcher's variables (SLURM_* under ``srun``,
a PyTorchJob's PET_*/MASTER_*, Open MPI's OMPI_COMM_WORLD_*: ``cluster.launchers``); with none of them
(or on one node) the run is this machine alone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from nccl_doctor.cluster.launchers import JobLayout, LayoutFlags, job_layout
from nccl_doctor.cluster.net import free_port
from nccl_doctor.cluster.slurm import (
    DEFAULT_PORT,
    SlurmInfo,
    default_nproc,
    one_task_per_node,
    port_from_env,
    slurm_launch_config,
    visible_gpus,
)
from nccl_doctor.preflight.options import PreflightOptions
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
    launcher: str = ""  # who said where this node stands: Slurm, PyTorchJob, Open MPI, PMIx, flags
    overrides: str = ""  # the flags that replaced the launcher's values, in one line (said at start)
    hosts_named: bool = True  # False: ``hosts`` past node 0 are ``node-rank-N`` until the nodes arrive

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

    def named(self, arrived: Sequence[str | None]) -> NodePlan:
        """With the names the nodes gave at the rendezvous (``arrived[i]``, None for one that did not come)
        in place of ``node-rank-N``, when the launcher named no node; Slurm's node list stays as it is."""
        if self.hosts_named:
            return self
        return replace(self, hosts=tuple(name or old for name, old in zip(arrived, self.hosts, strict=True)))


def node_plan(args: PreflightOptions, env: Mapping[str, str]) -> NodePlan:
    """Flags, else the launcher's variables; one node with 2 CPU ranks (or one per GPU) when neither
    says more than one node."""
    host = socket.gethostname()
    slurm = slurm_launch_config(env)
    nproc = args.nproc_per_node or default_nproc(env, slurm, cpu=args.cpu)
    source = nproc_source(args, env, slurm)
    layout = job_layout(layout_flags(args), env)
    if layout is None or layout.nnodes == 1:
        port = (layout.port if layout else args.port) or port_from_env(env) or free_port()
        return NodePlan(nnodes=1, node_rank=0, hosts=(host,), head="127.0.0.1", port=port, nproc=nproc,
                        slurm=slurm is not None, host=host, run_id=f"{host}.{os.getpid()}", nproc_source=source,
                        launcher=layout.launcher if layout else "", overrides=layout.overrides if layout else "")
    return multi_node_plan(layout, env, slurm, host=host, nproc=nproc, nproc_source=source)


def layout_flags(args: PreflightOptions) -> LayoutFlags:
    return LayoutFlags(nnodes=args.nnodes, node_rank=args.node_rank, master_addr=args.master_addr, port=args.port)


def multi_node_plan(layout: JobLayout, env: Mapping[str, str], slurm: SlurmInfo | None, *, host: str, nproc: int,
                    nproc_source: str) -> NodePlan:
    """2+ nodes. Under Slurm the port defaults to the step's (``step_port``) and the run is the job step;
    under another launcher the port defaults to 29500 and the run is its job id (PMIx's namespace), else
    the node count and port: what every node of one run shares (a node told another count is refused)."""
    if slurm is not None:
        one_task_per_node(slurm, "preflight")
    step = env.get("SLURM_STEP_ID", "") if layout.under_slurm else ""
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "0"
    port = layout.port or (step_port(job, step) if layout.under_slurm else DEFAULT_PORT)
    run_id = layout.run_id or f"{layout.nnodes}.{port}"
    return NodePlan(nnodes=layout.nnodes, node_rank=layout.node_rank, hosts=layout.host_names(), head=layout.head,
                    port=port, nproc=nproc, slurm=slurm is not None, host=host, run_id=run_id, step=step,
                    nproc_source=nproc_source, launcher=layout.source, overrides=layout.overrides,
                    hosts_named=layout.names_nodes)


def step_port(job: str, step: str) -> int:
    """29500 + (job id + step id) % 1000: step 0 keeps the job's usual port, and two preflight steps of one
    job running at once (``srun --overlap``) do not meet on one port."""
    num = (int(job) if job.isdigit() else 0) + (int(step) if step.isdigit() else 0)
    return DEFAULT_PORT + num % STEP_PORTS


def nproc_source(args: PreflightOptions, env: Mapping[str, str], slurm: SlurmInfo | None) -> str:
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
