"""The environment for a launcher (bench, torchrun) that a test starts by itself."""

from __future__ import annotations

import os
from pathlib import Path

OWN_RUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID",
                "GLOO_SOCKET_IFNAME")


def launch_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment less the rank, rendezvous, Slurm and Gloo settings of the test's own run;
    no GPU; temp files (and launch logs) in ``tmp_path``."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))
    for var in OWN_RUN_VARS:
        env.pop(var, None)
    return env
