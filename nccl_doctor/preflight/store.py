"""Node 0's TCPStore, from both sides: open it, or connect to it within a bounded time whatever holds the
port, and a small typed face over torch's store (``get`` answers None for a missing key).

torch is imported only in the functions that open a connection.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

HANDSHAKE_S = 10.0  # a port that accepts but does not answer the store handshake for this long is not our store
MIN_HANDSHAKE_S = 2.0
ACCEPT_PROBE_S = 1.0  # one plain TCP connect attempt, while waiting for the port to accept
ACCEPT_RETRY_S = 0.25
PROC_STAT_STARTTIME = 19  # field of /proc/self/stat after the command name: the start time, in clock ticks

_ABANDONED: list[threading.Thread] = []  # store calls given up on: the process must not wait for them at exit


class Store:
    """A TCPStore client or server (``raw``), with the few calls the launchers use, typed."""

    def __init__(self, raw: Any):
        self.raw = raw

    def get(self, key: str) -> str | None:
        return self.raw.get(key).decode() if self.raw.check([key]) else None

    def has(self, *keys: str) -> bool:
        return bool(self.raw.check(list(keys)))

    def set(self, key: str, value: str) -> None:
        self.raw.set(key, value)

    def add(self, key: str, amount: int) -> int:
        return int(self.raw.add(key, amount))


def open_store(host: str, port: int, timeout_s: float) -> Store:
    """Node 0: host the store (raises what torch raises when the port cannot be bound)."""
    from datetime import timedelta

    import torch.distributed as dist

    return Store(dist.TCPStore(host, port, is_master=True, wait_for_workers=False,
                               timeout=timedelta(seconds=timeout_s)))


def client(host: str, port: int, timeout_s: float) -> Store:
    """A plain client connection (the heartbeat's own, or a rank's)."""
    from datetime import timedelta

    import torch.distributed as dist

    return Store(dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout_s)))


def _accepts(host: str, port: int, timeout: float = ACCEPT_PROBE_S) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def connect_store(host: str, port: int, window: float, *,
                  handshake_s: float = HANDSHAKE_S) -> tuple[Store | None, Exception | None, float]:
    """A TCPStore client, within ``window`` seconds whatever holds the port: ``(store, error, silent)``.

    First wait (bounded) until the port accepts a plain TCP connection: TCPStore's own retries on a refused
    port outlast its timeout. Then the store handshake runs in a daemon thread: TCPStore waits for its
    answer without a timeout, so a foreign listener that accepts and never answers would hold us for as
    long as it lives. If the handshake has not finished ``handshake_s`` seconds later, ``silent`` is that
    many seconds and the thread is abandoned (``run`` then exits without waiting for it)."""
    from datetime import timedelta

    import torch.distributed as dist

    end = time.monotonic() + window
    while not _accepts(host, port, timeout=min(ACCEPT_PROBE_S, max(0.1, end - time.monotonic()))):
        if time.monotonic() >= end:
            return None, None, 0.0
        time.sleep(ACCEPT_RETRY_S)
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["store"] = Store(dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                                               timeout=timedelta(seconds=max(1.0, end - time.monotonic()))))
        except Exception as exc:
            box["error"] = exc

    th = threading.Thread(target=connect, daemon=True, name="preflight-connect")
    th.start()
    grace = min(handshake_s, max(MIN_HANDSHAKE_S, window))
    th.join(grace)
    if th.is_alive():
        abandon(th)
        return None, None, grace
    return box.get("store"), box.get("error"), 0.0


def abandon(thread: threading.Thread) -> None:
    """A thread stuck in a C++ store call: the process must leave without waiting for it."""
    _ABANDONED.append(thread)


def store_call_abandoned() -> bool:
    return any(t.is_alive() for t in _ABANDONED)


def exit_now(code: int) -> int:
    """A store connect we gave up on is still blocked in C++: exiting the normal way would tear torch down
    under it (``terminate called without an active exception``). Everything is written: leave at once."""
    if store_call_abandoned():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def process_age() -> float | None:
    """Seconds since this process started (its launch: ``exec`` keeps the start time), from /proc."""
    try:
        stat = Path("/proc/self/stat").read_text()
        start = int(stat.rsplit(")", 1)[1].split()[PROC_STAT_STARTTIME]) / os.sysconf("SC_CLK_TCK")
        return float(Path("/proc/uptime").read_text().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return None


def first_line(exc: BaseException | None) -> str:
    """An exception's first line (its type when it has no text); "timed out" for none."""
    if exc is None:
        return "timed out"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def port_fix(port: int, head: str) -> str:
    return (f"pass a free port on every node: `--port PORT` (or export MASTER_PORT); `ss -ltnp 'sport = :{port}'` "
            f"on {head} shows who holds {port}; run one preflight at a time per allocation")
