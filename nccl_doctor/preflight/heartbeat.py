"""Heartbeats: every node counts ``hb/<i>`` up once a second from a thread of its own; node 0 names the
nodes whose count stopped; a follower's watchdog leaves when node 0's store stops answering.

The thread shares its node's one store connection (TCPStore serialises a client's calls and releases the
GIL while it waits): at 1,024 nodes a second connection per node would double node 0's sockets for a
value of a few bytes a second. A main thread stuck in a store call on a frozen node 0 holds the
connection, so the beats stop too, which is exactly what the watchdog looks for.

The count is an authenticated value (``set``), not a store counter (``add`` cannot carry a MAC): nobody
without the secret can keep a dead node alive, and a replayed old count is not a beat (it must grow)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from nccl_doctor.preflight import store as stores
from nccl_doctor.preflight.protocol import heartbeat_count, heartbeat_key
from nccl_doctor.preflight.store import Store

HEARTBEAT_S = 1.0
HEARTBEAT_LOST_S = 6.0  # no heartbeat for this long: the node is gone
JOIN_S = 2.0  # for the heartbeat thread at exit (a C++ store call still running at exit aborts the process)
WATCH_S = 0.5  # how often a follower's watchdog looks
HEAD_SILENT_S = HEARTBEAT_LOST_S + 4  # node 0's store has not answered a heartbeat this long: node 0 is lost
BACKSTOP_S = 20.0  # a follower's watchdog: this long past the deadline without a verdict, leave
SETTLE_POLL_S = 0.5


class Heartbeat:
    """This node's heartbeat thread. ``last`` is when node 0's store last answered it."""

    def __init__(self, store: Store, node: int, say: Callable[[str], None], where: str):
        self.store, self.key, self.say, self.where = store, heartbeat_key(node), say, where
        self.stop = threading.Event()
        self.last: float | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Beat from a thread: a slow step of the main one (a probe, a big value) never delays a beat."""
        self.thread = threading.Thread(target=self._beat, daemon=True, name="preflight-heartbeat")
        self.thread.start()

    def _beat(self) -> None:
        try:
            count = 1
            self._send(count)
            while not self.stop.wait(HEARTBEAT_S):
                count += 1
                self._send(count)
        except Exception as exc:
            if not self.stop.is_set():  # else node 0 may name this node lost (ND407): say why here
                self.say(f"heartbeat to {self.where} stopped: {stores.first_line(exc)}")

    def _send(self, count: int) -> None:
        """One beat, and node 0's answer: TCPStore's ``set`` does not wait for the server (a frozen node 0
        would still take beats into the socket buffer), so a ``check`` makes each beat a round trip."""
        self.store.set(self.key, str(count))
        self.store.has(self.key)
        self.last = time.monotonic()

    def close(self) -> None:
        """Stop beating; a thread still in a store call is left behind (the process exits without it)."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(JOIN_S)
            if self.thread.is_alive():
                stores.abandon(self.thread)


def start_watchdog(beat: Heartbeat, deadline: float, timeout_s: float, leave: Callable[[str], None]) -> None:
    """A follower's bound on node 0: a store call blocks in C++ for as long as a frozen, powered-off or
    cut-off node 0 keeps its connection open (TCPStore's timeout bounds waiting for a key, not a read),
    and no Python signal handler runs meanwhile. When node 0's store has not answered the heartbeat for
    ``HEAD_SILENT_S``, or the deadline's backstop passed, ``leave`` with why (it does not return)."""
    def watch() -> None:
        while not beat.stop.wait(WATCH_S):
            now, last = time.monotonic(), beat.last
            silent = last is not None and now - last > HEAD_SILENT_S
            if silent or now > deadline + BACKSTOP_S:
                why = (f"its store has not answered for {now - last:.0f} s" if last is not None and silent else
                       f"no verdict {timeout_s:.0f} s + {BACKSTOP_S:.0f} s after the start")
                leave(why)

    threading.Thread(target=watch, daemon=True, name="preflight-watchdog").start()


class Beats:
    """Node 0's view of every node's heartbeat count: which have not grown for ``HEARTBEAT_LOST_S``."""

    def __init__(self, store: Store, nnodes: int, deadline: float):
        self.store, self.deadline = store, deadline
        self.seen = {i: (-1, time.monotonic()) for i in range(nnodes)}
        self.keys = [heartbeat_key(i) for i in range(nnodes)]  # node 0 wrote each before anyone could

    def lost(self) -> list[int]:
        """The nodes whose count has not grown for ``HEARTBEAT_LOST_S`` (one ``multi_get`` for all);
        ``RejectedValueError`` for a count that does not authenticate."""
        now, lost = time.monotonic(), []
        counts = self.store.read_all(self.keys, heartbeat_count)
        for (i, (count, seen)), c in zip(self.seen.items(), counts, strict=True):
            if c > count:
                self.seen[i] = (c, now)
            elif now - seen > HEARTBEAT_LOST_S:
                lost.append(i)
        return lost

    def settle(self) -> list[int]:
        """On a failure, give a dead node's heartbeat time to go stale (until the deadline at most)."""
        end = min(time.monotonic() + HEARTBEAT_LOST_S, self.deadline)
        while time.monotonic() < end:
            if self.lost():
                break
            time.sleep(SETTLE_POLL_S)
        return self.lost()
