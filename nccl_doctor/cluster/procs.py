"""Processes: SIGTERM as an interrupt, stopping process groups, and private temp dirs that outlive a SIGKILL
only until the next run."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

# a signal's handler, as ``signal.signal`` takes and returns it
SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def sigterm_as_interrupt() -> SignalHandler:
    """SIGTERM (srun, scancel, a job's time limit) raises KeyboardInterrupt, so ``finally`` blocks stop the
    ranks we started in their own sessions. Returns the old handler (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def ignore_sigterm() -> None:
    """While cleaning up after a SIGTERM: a second one must not interrupt the cleanup (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def kill_group(proc: subprocess.Popen[Any], grace_s: float) -> int:
    """``kill_groups`` of one process; its exit code."""
    return kill_groups([proc], grace_s)[0]


def kill_groups(procs: list[subprocess.Popen[Any]], grace_s: float) -> list[int]:
    """Stop each process's group (each started with ``start_new_session``): SIGTERM to all, ``grace_s``
    for them to exit, then SIGKILL to those still running. Returns their exit codes."""
    live = [p for p in procs if p.poll() is None]  # a reaped leader's pid may belong to someone else now
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not live:
            break
        _signal_groups(live, sig)
        _wait_all(live, time.monotonic() + grace_s)
        live = [p for p in live if p.poll() is None]
    return [p.wait() for p in procs]


def _signal_groups(procs: list[subprocess.Popen[Any]], sig: signal.Signals) -> None:
    for p in procs:
        _signal_group(p.pid, sig)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:  # the whole group is gone already
        pass


def _wait_all(procs: list[subprocess.Popen[Any]], end: float) -> None:
    """Wait for each until the monotonic time ``end``; those still running are left to the caller."""
    for p in procs:
        _wait(p, max(0.0, end - time.monotonic()))


def _wait(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- private temporary directories -------------------------------------------------------------
def host_tag() -> str:
    """This host's name as it appears in a private dir's name (a shared /tmp holds other nodes' too)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def private_dir(kind: str, tmp: str | None = None) -> Path:
    """A fresh ``nccl-doctor-<kind>-<host>-<pid>-XXXX`` in the temp dir. Normal exits, errors and SIGTERM
    remove it; a SIGKILLed run cannot, so each new one first removes this host's dirs of the same kind
    whose process is gone (a live pid, or another host's dir on a shared /tmp, is left alone)."""
    tmp = tmp or tempfile.gettempdir()
    remove_stale_dirs(kind, tmp)
    return Path(tempfile.mkdtemp(prefix=f"nccl-doctor-{kind}-{host_tag()}-{os.getpid()}-", dir=tmp))


def remove_stale_dirs(kind: str, tmp: str) -> list[Path]:
    """This host's ``private_dir(kind)`` dirs whose owner pid no longer runs, removed; returns them."""
    pat = re.compile(rf"nccl-doctor-{re.escape(kind)}-{re.escape(host_tag())}-(\d+)-[^/]+")
    gone: list[Path] = []
    try:
        entries = list(Path(tmp).iterdir())
    except OSError:
        return gone
    for p in entries:
        m = pat.fullmatch(p.name)
        if m and not pid_alive(int(m.group(1))) and p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone
