"""The settings every rank of ours runs NCCL under, beyond the user's own environment, and the notes that say so.

Both launchers (bench's torchrun, preflight's own spawning) hand their ranks these, whatever the user's
environment says. They change what NCCL's log tells, not what the user's training would do; every user value
they replace is said in the report's notes (``overridden``). PyTorch's error handling is the training job's own:
no ``TORCH_NCCL_BLOCKING_WAIT`` (it would remove PyTorch's watchdog, heartbeat monitor and flight recorder), our
own watchdog (``bench/watchdog.py``) bounds every stage instead.
"""

from __future__ import annotations

from collections.abc import Mapping

# NCCL >= 2.22 (with cuMem) connects each algorithm lazily, at the collective that first uses it: the world
# communicator's `via NET/...` lines would then be printed while another communicator is being set up. The log
# parser charges such a line to a communicator that can hold both its ranks (logs/parse, the nranks rule), but
# on a rail's 2-rank communicator ranks 0 and 1 fit every communicator: 0 keeps each channel line under the
# communicator it belongs to (nccl-facts A.6). It costs every communicator its eager connections (memory, init
# time) that a lazily connecting training job pays only for the algorithms it uses.
RUNTIME_CONNECT = ("NCCL_RUNTIME_CONNECT", "0")
RANK_SETTINGS: dict[str, str] = dict((RUNTIME_CONNECT,))


def rank_env(env: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` with ``RANK_SETTINGS`` (and a launcher's ``extra``: preflight's NCCL log settings) in force; a
    user's own value for them is replaced."""
    return {**env, **RANK_SETTINGS, **(extra or {})}


def overridden(env: Mapping[str, str], extra: Mapping[str, str] | None = None) -> list[str]:
    """A note for each of the user's own values ``rank_env(env, extra)`` replaces (their training keeps them)."""
    settings = {**RANK_SETTINGS, **(extra or {})}
    return [f"{name}={env[name]} replaced by {value} for nccl-doctor's own ranks (your training keeps yours)"
            for name, value in settings.items() if name in env and env[name] != value]
