"""What the launchers share: Slurm's environment, routes and ports, torchrun, stage files, processes.

What other packages use is imported from here; the modules behind it are this package's own:
``slurm`` (where we are), ``launchers`` (this node's place, from flags or any launcher), ``drain``
(``--drain-on-fail``'s ``scontrol``), ``net`` (routes, ports, endpoints), ``torchrun`` (the plan, the
launch, its outcome), ``stderr`` (torchrun's output), ``stages`` (each rank's stage file), ``procs``
(signals, process groups, private dirs) and ``validate`` (ports, deadlines, numbers).
"""

from nccl_doctor.cluster.drain import drain_on_fail
from nccl_doctor.cluster.launchers import JobLayout, LayoutFlags, job_layout
from nccl_doctor.cluster.net import (
    PortOrigin,
    Route,
    check_rdzv_port,
    free_port,
    gloo_iface_to,
    parse_endpoint,
    port_busy,
    rdzv_port_origin,
    route_to,
)
from nccl_doctor.cluster.procs import (
    child_env,
    die_with_parent,
    ignore_sigterm,
    kill_groups,
    private_dir,
    sigterm_as_interrupt,
)
from nccl_doctor.cluster.rankenv import RANK_SETTINGS, overridden, rank_env
from nccl_doctor.cluster.slurm import (
    DEFAULT_PORT,
    SlurmInfo,
    default_nproc,
    in_worker,
    one_task_per_node,
    port_from_env,
    slurm_launch_config,
    visible_gpus,
)
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, Stage, StageFile, StageRecord, read_stages
from nccl_doctor.cluster.stderr import StderrFilter
from nccl_doctor.cluster.torchrun import (
    LOG_ENV,
    LaunchConfig,
    LaunchOutcome,
    TorchrunPhase,
    launch_notes,
    plan_launch,
    self_launch,
    torchrun_phase,
)
from nccl_doctor.cluster.validate import MAX_SECONDS, check_port, check_seconds

__all__ = [
    "DEFAULT_PORT",
    "LOG_ENV",
    "MAX_SECONDS",
    "RANK_SETTINGS",
    "STAGE_DIR_ENV",
    "JobLayout",
    "LaunchConfig",
    "LaunchOutcome",
    "LayoutFlags",
    "PortOrigin",
    "Route",
    "SlurmInfo",
    "Stage",
    "StageFile",
    "StageRecord",
    "StderrFilter",
    "TorchrunPhase",
    "check_port",
    "check_rdzv_port",
    "check_seconds",
    "child_env",
    "default_nproc",
    "die_with_parent",
    "drain_on_fail",
    "free_port",
    "gloo_iface_to",
    "ignore_sigterm",
    "in_worker",
    "job_layout",
    "kill_groups",
    "launch_notes",
    "one_task_per_node",
    "overridden",
    "parse_endpoint",
    "plan_launch",
    "port_busy",
    "port_from_env",
    "private_dir",
    "rank_env",
    "rdzv_port_origin",
    "read_stages",
    "route_to",
    "self_launch",
    "sigterm_as_interrupt",
    "slurm_launch_config",
    "torchrun_phase",
    "visible_gpus",
]
