"""Where we are: a rank of a launcher already, the GPUs we may use, and what Slurm's ``SLURM_*`` says."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import hostlist

from nccl_doctor.cluster.validate import check_port, env_int
from nccl_doctor.cudavisible import visible_devices
from nccl_doctor.errors import InputError

DEFAULT_PORT = 29500
SLURM_PORT_SPREAD = 1000  # a job's default port: DEFAULT_PORT + job id % this (jobs on one node rarely collide)
CPU_RANKS = 2  # ranks per node without a GPU, and always with --cpu
_GPU_DEVICE = re.compile(r"nvidia\d+")


def in_worker(env: Mapping[str, str]) -> bool:
    """A launcher (torchrun, or us through it) already made this process a rank."""
    return "RANK" in env and "WORLD_SIZE" in env


def visible_gpus(env: Mapping[str, str], dev_root: Path = Path("/dev")) -> int:
    """GPUs this process may use, without importing torch: CUDA_VISIBLE_DEVICES, else /dev/nvidiaN."""
    visible = visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None:  # what CUDA will show: a list of MIG devices is one (``cudavisible``)
        return visible.cuda_count
    try:
        return sum(1 for p in dev_root.iterdir() if _GPU_DEVICE.fullmatch(p.name))
    except OSError:
        return 0


@dataclass(frozen=True, kw_only=True)
class SlurmInfo:
    """What ``srun --ntasks-per-node=1 nccl-doctor ...`` needs, read from the SLURM_* variables."""

    nnodes: int
    hosts: tuple[str, ...]
    rdzv_host: str
    port: int
    rdzv_id: str
    gpus_on_node: int | None
    tasks_per_node: int | None


def slurm_launch_config(env: Mapping[str, str]) -> SlurmInfo | None:
    """None outside a Slurm job. The step's node list wins over the job's (``srun -N1`` in a big job)."""
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        return None
    try:
        hosts = tuple(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as exc:
        raise InputError(f"cannot expand SLURM node list {nodelist!r}: {exc}") from None
    count = env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    nnodes = env_int(count, "SLURM_*_NUM_NODES") if count else len(hosts)
    port = port_from_env(env) or DEFAULT_PORT + env_int(job, "SLURM_JOB_ID") % SLURM_PORT_SPREAD
    step = env.get("SLURM_STEP_ID")
    tasks = None
    if env.get("SLURM_STEP_NUM_TASKS") and env.get("SLURM_STEP_NUM_NODES"):
        tasks = env_int(env["SLURM_STEP_NUM_TASKS"], "SLURM_STEP_NUM_TASKS") // max(1, nnodes)
    gpus = env.get("SLURM_GPUS_ON_NODE")
    return SlurmInfo(nnodes=nnodes, hosts=hosts, rdzv_host=hosts[0], port=port,
                     rdzv_id=f"slurm-{job}" + (f".{step}" if step else ""),
                     gpus_on_node=env_int(gpus, "SLURM_GPUS_ON_NODE") if gpus else None, tasks_per_node=tasks)


def port_from_env(env: Mapping[str, str]) -> int | None:
    """MASTER_PORT when set (a bad value is an error, never silently replaced); None when unset."""
    text = env.get("MASTER_PORT")
    return check_port(env_int(text, "MASTER_PORT"), "MASTER_PORT") if text else None


def default_nproc(env: Mapping[str, str], slurm: SlurmInfo | None, *, cpu: bool = False) -> int:
    """Ranks per node when the user did not say: one per visible GPU, else SLURM_GPUS_ON_NODE, else 2
    CPU ranks (always 2 with ``--cpu``: Gloo on CPU tests the network, not the GPUs)."""
    if cpu:
        return CPU_RANKS
    return visible_gpus(env) or (slurm.gpus_on_node if slurm and slurm.gpus_on_node else 0) or CPU_RANKS


def one_task_per_node(slurm: SlurmInfo | None, command: str) -> None:
    """nccl-doctor starts its own ranks: an srun step with several tasks per node would start them N times."""
    if slurm and slurm.tasks_per_node and slurm.tasks_per_node > 1:
        raise InputError(f"this srun step runs {slurm.tasks_per_node} tasks per node; nccl-doctor starts one "
                         f"rank per GPU itself: use `srun --ntasks-per-node=1 nccl-doctor {command}`")
