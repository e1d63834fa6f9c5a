"""What the launchers share: Slurm's environment, routes and ports, torchrun, stage files, processes.

What other packages use is imported from here; the modules behind it are this package's own.
"""

from nccl_doctor.cluster.launch import (
    DEFAULT_PORT,
    LOG_ENV,
    check_port,
    check_rdzv_port,
    check_seconds,
    default_nproc,
    free_port,
    gloo_iface_to,
    ignore_sigterm,
    in_worker,
    kill_groups,
    launch_notes,
    one_task_per_node,
    parse_endpoint,
    plan_launch,
    port_from_env,
    private_dir,
    rdzv_port_origin,
    self_launch,
    sigterm_as_interrupt,
    slurm_launch_config,
    SlurmInfo,
    StageFile,
    visible_gpus,
)

__all__ = ["DEFAULT_PORT", "LOG_ENV", "SlurmInfo", "StageFile", "check_port", "check_rdzv_port", "check_seconds", "default_nproc", "free_port", "gloo_iface_to", "ignore_sigterm", "in_worker", "kill_groups", "launch_notes", "one_task_per_node", "parse_endpoint", "plan_launch", "port_from_env", "private_dir", "rdzv_port_origin", "self_launch", "sigterm_as_interrupt", "slurm_launch_config", "visible_gpus"]
