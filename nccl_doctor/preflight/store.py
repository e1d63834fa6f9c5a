"""Node 0's TCPStore, from both sides: open it (bound to the job's address), or connect to it within a
bounded time whatever holds the port, and a small typed face over torch's store: values are sealed on
``set`` and opened on ``get`` (``auth.py``), capped and parsed (``read``), never trusted raw.

torch is imported only in the functions that open a connection.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from nccl_doctor.leave import leave_now
from nccl_doctor.preflight.auth import MAC_HEX, TAG, RejectedValueError, Seal
from nccl_doctor.preflight.protocol import value_cap

T = TypeVar("T")
Seen = dict[str, tuple[bytes, T]]  # a key's raw value as last read, and what it parsed to

HANDSHAKE_S = 10.0  # a port that accepts but does not answer the store handshake for this long is not our store
MIN_HANDSHAKE_S = 2.0
ACCEPT_PROBE_S = 1.0  # one plain TCP connect attempt, while waiting for the port to accept
ACCEPT_RETRY_S = 0.25
PROC_STAT_STARTTIME = 19  # field of /proc/self/stat after the command name: the start time, in clock ticks

SEAL_OVERHEAD = len(TAG) + MAC_HEX + 1
NOT_A_COUNT = -1  # a counter someone overwrote with something else: readers treat it as "look"
LISTEN_BACKLOG = 4096

_ABANDONED: list[threading.Thread] = []  # store calls given up on: the process must not wait for them at exit


class RawStore(Protocol):
    """The calls ``Store`` makes on torch's ``TCPStore`` (``tests/helpers/fake_store.py``: a dict behind them)."""

    def set(self, key: str, value: bytes, /) -> None: ...
    def get(self, key: str, /) -> bytes: ...
    def add(self, key: str, amount: int, /) -> int: ...
    def check(self, keys: list[str], /) -> bool: ...
    def multi_get(self, keys: list[str], /) -> list[bytes]: ...
    def multi_set(self, keys: list[str], values: list[bytes], /) -> None: ...


class Store:
    """A TCPStore client or server (``raw``), with the few calls the launchers use, typed. ``seal``
    authenticates what is set and got (no secret: values travel as they are)."""

    def __init__(self, raw: RawStore, seal: Seal | None = None):
        self.raw = raw
        self.seal = seal or Seal()

    def get(self, key: str) -> str | None:
        """The value of ``key`` (None: not there), opened: ``RejectedValueError`` when too big, forged or not text."""
        return self.open(key, self.raw.get(key)) if self.raw.check([key]) else None

    def open(self, key: str, raw: bytes) -> str:
        cap = value_cap(key) + SEAL_OVERHEAD
        if len(raw) > cap:
            raise RejectedValueError(key, f"{len(raw)} bytes, more than the {cap} its key may hold")
        try:
            return self.seal.open(key, raw).decode()
        except UnicodeDecodeError:
            raise RejectedValueError(key, "not UTF-8 text") from None

    def read(self, key: str, parse: Callable[[str], T]) -> T | None:
        """``get``, then ``parse``: whatever is wrong with the value is a ``RejectedValueError`` naming ``key``."""
        text = self.get(key)
        return None if text is None else parsed(key, text, parse)

    def read_all(self, keys: Sequence[str], parse: Callable[[str], T], seen: Seen[T] | None = None) -> list[T]:
        """Keys node 0 wrote first and others overwrite (stages, errors, heartbeats), in one round trip
        (``multi_get``) after one ``check``; a key that vanished was removed by someone: ``RejectedValueError``.
        ``seen``: the values this call last returned, by key; a value whose bytes did not change is neither
        verified nor parsed again (node 0 polls 1,024 nodes' stages every second; few of them change)."""
        if not keys:
            return []
        if not self.raw.check(list(keys)):
            gone = next((k for k in keys if not self.raw.check([k])), keys[0])
            raise RejectedValueError(gone, "removed from the store after node 0 wrote it")
        seen = {} if seen is None else seen
        out = []
        for k, v in zip(keys, self.raw.multi_get(list(keys)), strict=True):
            last = seen.get(k)
            if last is None or last[0] != v:
                last = seen[k] = (v, parsed(k, self.open(k, v), parse))
            out.append(last[1])
        return out

    def has(self, *keys: str) -> bool:
        return bool(self.raw.check(list(keys)))

    def set(self, key: str, value: str) -> None:
        self.raw.set(key, self.seal.seal(key, value.encode()))

    def set_all(self, items: dict[str, str]) -> None:
        """Many keys in one round trip (``multi_set``)."""
        if items:
            self.raw.multi_set(list(items), [self.seal.seal(k, v.encode()) for k, v in items.items()])

    def add(self, key: str, amount: int) -> int:
        return int(self.raw.add(key, amount))

    def count(self, key: str) -> int:
        """A counter others ``add`` to, read without ``add`` (an ``add`` on a value someone overwrote with
        text drops the connection): 0 when absent, ``NOT_A_COUNT`` when not a number. Unauthenticated:
        only ever a hint."""
        if not self.raw.check([key]):
            return 0
        text = self.raw.get(key)[:MAX_COUNT_DIGITS + 1]
        return int(text) if text.lstrip(b"-").isdigit() and len(text) <= MAX_COUNT_DIGITS else NOT_A_COUNT


MAX_COUNT_DIGITS = 20


def parsed(key: str, text: str, parse: Callable[[str], T]) -> T:
    try:
        return parse(text)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise RejectedValueError(key, first_line(exc)) from None


def open_store(host: str, port: int, timeout_s: float, seal: Seal, bind: str | None = None) -> Store:
    """Node 0: host the store, listening on ``bind`` only when given (raises ``OSError`` or what torch
    raises when the port cannot be bound).

    torch 2.13's TCPStore server binds every interface whatever ``host`` says (its libuv backend listens on
    the wildcard address); its ``master_listen_fd`` takes a socket already bound and listening, which is how
    the store is kept to the job's address."""
    from datetime import timedelta

    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    if bind is None:
        return Store(dist.TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=timeout), seal)
    listener = listen_on(bind, port)
    try:
        raw = dist.TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=timeout,
                            master_listen_fd=listener.fileno())
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store's server owns the descriptor now
    return Store(raw, seal)


def listen_on(address: str, port: int) -> socket.socket:
    """A listening TCP socket on ``address:port`` only (``OSError`` EADDRINUSE when it is held)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's own listener: TIME_WAIT is fine
        sock.bind((address, port))
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_address(head: str, nnodes: int) -> str | None:
    """The address node 0's store listens on: loopback on one node; else the one address ``head`` (the
    name the followers connect to) resolves to here, when it is one of this machine's and not loopback.
    None (every interface, as torch does) when it resolves to loopback here (``127.0.1.1 host`` in
    /etc/hosts: the followers would not reach it), to several addresses (a follower may pick another
    one), or to nothing this machine can bind."""
    if nnodes == 1:
        return "127.0.0.1"
    try:
        infos = socket.getaddrinfo(head, None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    found = {str(addr[0]): family for family, _, _, _, addr in infos}
    if len(found) != 1:
        return None
    [(ip, family)] = found.items()
    if ip.startswith("127.") or ip == "::1" or not _bindable(family, ip):
        return None
    return ip


def _bindable(family: int, ip: str) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, 0))
        except OSError as exc:
            return exc.errno != errno.EADDRNOTAVAIL
    return True


def client(host: str, port: int, timeout_s: float, seal: Seal | None = None) -> Store:
    """A plain client connection (the heartbeat's own, or a rank's)."""
    from datetime import timedelta

    import torch.distributed as dist

    return Store(dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout_s)), seal)


def _accepts(host: str, port: int, timeout: float = ACCEPT_PROBE_S) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def connect_store(host: str, port: int, window: float, seal: Seal, *,
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
                                               timeout=timedelta(seconds=max(1.0, end - time.monotonic()))), seal)
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
        leave_now(code)
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
