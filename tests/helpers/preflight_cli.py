"""Running ``nccl-doctor preflight`` as one node of a Slurm step would: its env, its argv, its failures."""

from __future__ import annotations

import sys

PY = sys.executable


def slurm_env(node: int, *, job: str = "4242", step: str = "0", nodelist: str = "localhost,ghost",
              nnodes: int = 2) -> dict[str, str]:
    """What ``srun --ntasks-per-node=1`` sets for one task of a ``nnodes``-node step."""
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": step, "SLURM_NODEID": str(node),
            "SLURM_STEP_NODELIST": nodelist, "SLURM_JOB_NODELIST": nodelist, "SLURM_NNODES": str(nnodes),
            "SLURM_STEP_NUM_NODES": str(nnodes), "SLURM_STEP_NUM_TASKS": str(nnodes)}


def without_launcher(base: dict[str, str], **extra: str) -> dict[str, str]:
    """``base`` less any Slurm or torchrun variables of the test's own environment, plus ``extra``."""
    env = {k: v for k, v in base.items() if not k.startswith(("SLURM_", "MASTER_"))}
    env.update(extra)
    return env


def preflight_argv(*argv: str) -> list[str]:
    return [PY, "-m", "nccl_doctor", "preflight", "--cpu", *argv]


def failures(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] == "fail"]
