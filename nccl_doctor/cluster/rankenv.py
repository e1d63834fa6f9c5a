"""The settings every rank of ours runs NCCL under: the ones that make its failures and its log tell the truth.

Both launchers (bench's torchrun, preflight's own spawning) hand their ranks these, whatever the user's
environment says: they change how NCCL and PyTorch *report*, not what the user's training would do.
"""

from __future__ import annotations

from collections.abc import Mapping

# NCCL >= 2.22 (with cuMem) connects each algorithm lazily, at the collective that first uses it: the world
# communicator's `via NET/...` lines would then be printed while another communicator is being set up and be
# charged to it. 0 connects every channel at init, under the communicator it belongs to (nccl-facts A.6).
RUNTIME_CONNECT = ("NCCL_RUNTIME_CONNECT", "0")
# With the default async error handling, a rank blocked in synchronize()/.item() past the timeout is killed by
# PyTorch's watchdog before our guard can say which ranks were missing; blocking wait makes wait() raise
# DistBackendError in the main thread instead.
BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "1")
RANK_SETTINGS: dict[str, str] = dict((RUNTIME_CONNECT, BLOCKING_WAIT))


def rank_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``RANK_SETTINGS`` in force (a user's own value for them is replaced)."""
    return {**env, **RANK_SETTINGS}


def overridden(env: Mapping[str, str]) -> list[str]:
    """A note for each of the user's own values ``rank_env`` replaces (their training keeps them)."""
    return [f"{name}={env[name]} replaced by {value} for nccl-doctor's own ranks (your training keeps yours)"
            for name, value in RANK_SETTINGS.items() if name in env and env[name] != value]
