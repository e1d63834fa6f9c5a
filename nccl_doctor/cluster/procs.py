"""Processes: SIGTERM as an interrupt, stopping process groups, children that die with their launcher, and
private temp dirs (and launch logs) that outlive a SIGKILL only until the next run."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

PARENT_ENV = "NCCL_DOCTOR_PARENT_PID"  # the process a launcher's child must not outlive
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when the thread that started it exits
LAUNCH_LOG = "launch"  # ``launch_log``'s kind: nccl-doctor-launch-<host>-<pid>-XXXX.log

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


# --- children that die with their launcher ---------------------------------------------------------
def die_with_parent(env: Mapping[str, str]) -> None:
    """In a child a launcher started (``PARENT_ENV`` names the launcher): SIGKILL us when the launcher dies.

    Our launchers start their children in sessions of their own (so a Ctrl-C reaches only the launcher, which
    stops them in order); a SIGKILLed launcher cannot, and without this its torchrun and ranks ran on. The
    kernel's parent-death signal fires when the *thread* that started us exits: every launcher here starts
    its children from its main thread. Called first thing in the child; a launcher already gone (our parent
    is no longer the one named) ends us at once."""
    text = env.get(PARENT_ENV, "")
    if not text.isdigit():
        return
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # libc's, in this process already
    except (OSError, AttributeError):
        return  # not Linux: the launcher's own cleanup is all there is
    if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if os.getppid() != int(text):  # the launcher died before the prctl
        os.kill(os.getpid(), signal.SIGKILL)


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a child this process starts (from its main thread), which then dies with us."""
    return {**env, PARENT_ENV: str(os.getpid())}


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


def launch_log(stage_dir: Path, kind: str) -> Path:
    """A fresh, empty 0600 launch log beside ``stage_dir`` (``private_dir(kind)``) and named after it:
    ``nccl-doctor-launch-<host>-<pid>-XXXX.log``. A failed run keeps its log for the user; a SIGKILLed one
    leaves its stage dir too, and ``remove_stale_dirs`` removes the log with it."""
    path = _log_of(stage_dir, kind)
    if path is None:
        raise ValueError(f"{stage_dir} is not a private_dir({kind!r})")
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    return path


def _log_of(private: Path, kind: str) -> Path | None:
    """The launch log named after a ``private_dir(kind)``: the same host, pid and random part."""
    prefix = f"nccl-doctor-{kind}-{host_tag()}-"
    if not private.name.startswith(prefix):
        return None
    return private.with_name(f"nccl-doctor-{LAUNCH_LOG}-{host_tag()}-{private.name[len(prefix):]}.log")


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
            log = _log_of(p, kind)
            if log is not None:
                _remove_own_file(log)
            gone.append(p)
    return gone


def _remove_own_file(path: Path) -> None:
    """Unlink ``path`` when it is a regular file of ours (never a link, nor another user's file in /tmp)."""
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
        path.unlink(missing_ok=True)
