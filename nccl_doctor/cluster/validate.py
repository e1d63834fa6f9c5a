"""The values a launch is made of, checked before anything starts: ports, deadlines, numbers from the env."""

from __future__ import annotations

import math

from nccl_doctor.errors import InputError

MAX_SECONDS = 7 * 24 * 3600  # a deadline beyond a week is a typo (or inf), not a plan
MAX_PORT = 65535


def check_port(port: int, name: str) -> int:
    """A TCP port the rendezvous can listen on or connect to: 1-65535."""
    if not 1 <= port <= MAX_PORT:
        raise InputError(f"{name} {port} is not a TCP port (1-{MAX_PORT})")
    return port


def check_seconds(value: float, option: str, *, minimum: float | None = None, why: str = "") -> float:
    """A deadline option: finite, > 0 and at most a week. ``inf`` or ``1e400`` would pass ``> 0`` and
    then overflow ``int()`` or ``timedelta`` deep inside torchrun or a rank (a traceback per rank).
    ``minimum``: below it the deadline cannot mean anything (``why`` says what it must cover)."""
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise InputError(f"{option} {value:g}: expected a finite number of seconds, > 0 and at most "
                         f"{MAX_SECONDS} (7 days)")
    if minimum is not None and value < minimum:
        raise InputError(f"{option} {value:g}: the minimum is {minimum:g} seconds" + (f" ({why})" if why else ""))
    return value


def env_int(text: str, name: str) -> int:
    """A number from an environment variable; Slurm's ``2(x3)`` repeat counts keep their first number."""
    try:
        return int(text.split("(", maxsplit=1)[0])
    except ValueError:
        raise InputError(f"{name}={text!r} is not a number") from None
