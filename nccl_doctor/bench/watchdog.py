"""Our own per-rank watchdog over the stages (``worker.Stages``): the pure half, no torch.

NCCL's communicator creation (``ncclCommInitRank``, ``ncclCommSplit``) has no timeout, only an abort flag, and
PyTorch's own watchdog covers collectives only (and, once its timeout fires, takes the process down before anyone
can say who was missing). So each rank runs a thread that watches the stage it is in: once the stage has outlived
``--collective-timeout``, the rank says which ranks never reached the stage and which entered it and never left
(``laggards``, from the marks every rank leaves in the rendezvous store), aborts its communicators and exits. The
clock is injected (``StageWatch(clock=...)``) so the timing logic is tested without waiting.

PyTorch's own timeout (``torch_timeout_s``) is set longer than ours, so ours always fires first and PyTorch's
stays a backstop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

POLL_S = 0.2  # how often the thread looks at the stage clock: a stage ends at most this late past its timeout
# PyTorch's timeout (Gloo's collectives and store, NCCL's watchdog) = ours + the larger of these: long enough for
# our thread to read the store, record and abort first, short enough to stay a backstop
TORCH_LEAD_S = 15.0
TORCH_LEAD_FRACTION = 0.25
EXIT_BOUND_S = 20.0  # the whole expiry (store reads, records, abort) at most this long, then the rank exits anyway


@dataclass(frozen=True)
class Overdue:
    """A stage that outlived the timeout: its name, when it was entered (on the watch's clock), how long it ran."""

    stage: str
    since: float
    waited_s: float


class StageWatch:
    """The stage a rank is in and since when; ``overdue()`` once it has lasted longer than ``timeout_s``.
    Armed by entering a stage, disarmed on leaving it (between stages nothing is watched: only our own code
    runs there). Thread-safe: the rank's main thread arms, the watchdog thread reads."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic):
        if timeout_s <= 0:
            raise ValueError(f"the watchdog's timeout must be positive (got {timeout_s})")
        self.timeout_s = timeout_s
        self.clock = clock
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._since = 0.0

    def arm(self, stage: str) -> None:
        with self._lock:
            self._stage, self._since = stage, self.clock()

    def disarm(self) -> None:
        with self._lock:
            self._stage = None

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._stage is not None

    def overdue(self) -> Overdue | None:
        with self._lock:
            if self._stage is None:
                return None
            waited = self.clock() - self._since
            return Overdue(self._stage, self._since, waited) if waited > self.timeout_s else None


def watch(stages: StageWatch, on_overdue: Callable[[Overdue], None], stop: threading.Event, *,
          poll_s: float = POLL_S) -> None:
    """The watchdog thread's body: look every ``poll_s`` until ``stop`` is set or a stage is overdue, which it
    hands to ``on_overdue`` once (that call is expected to end the process)."""
    while not stop.wait(poll_s):
        late = stages.overdue()
        if late is not None:
            on_overdue(late)
            return


def start(stages: StageWatch, on_overdue: Callable[[Overdue], None], *, poll_s: float = POLL_S,
          ) -> threading.Event:
    """``watch`` on a daemon thread (it never keeps a finished rank alive); returns the event that stops it."""
    stop = threading.Event()
    threading.Thread(target=watch, args=(stages, on_overdue, stop), kwargs={"poll_s": poll_s},
                     name="nccl-doctor-watchdog", daemon=True).start()
    return stop


def torch_timeout_s(collective_timeout_s: float) -> float:
    """PyTorch's own timeout for a run whose stages are bounded by ``collective_timeout_s``: later than ours."""
    return collective_timeout_s + max(TORCH_LEAD_S, collective_timeout_s * TORCH_LEAD_FRACTION)


# --- who is holding the stage up ---------------------------------------------------------------------
class Reached(IntEnum):
    """How far one rank got through a stage, from its marks in the store (``worker.Stages``)."""

    ABSENT = 0  # no mark: it never reached the stage
    ENTERED = 1  # it entered the stage
    WARM = 2  # it finished the stage's warm-up (a measurement's midpoint, ``Stages.inside``)
    LEFT = 3  # it left the stage


@dataclass(frozen=True)
class Laggards:
    """The ranks a stuck rank blames: ``missing`` never reached the stage; ``never_left`` entered it and are
    furthest behind among those that did not leave it."""

    missing: tuple[int, ...]
    never_left: tuple[int, ...]


def laggards(progress: Mapping[int, Reached], me: int) -> Laggards:
    """From every rank's progress through the stage ``me`` is stuck in: who never arrived, and who entered but
    never left. Of the ranks still inside (``me`` among them), those furthest behind are named when some are
    further on (a rank that stopped before the collective the others wait in; ``me`` when it is that rank); when
    all are equally far, every other rank still inside (a peer that died inside the collective: the store
    cannot tell which)."""
    here = {**progress, me: max(progress.get(me, Reached.ENTERED), Reached.ENTERED)}  # me: at least entered
    missing = tuple(sorted(r for r, p in here.items() if p is Reached.ABSENT))
    inside = {r: p for r, p in here.items() if Reached.ENTERED <= p < Reached.LEFT}
    if not inside:
        return Laggards(missing, ())
    low = min(inside.values())
    if any(p > low for p in inside.values()):
        return Laggards(missing, tuple(sorted(r for r, p in inside.items() if p == low)))
    return Laggards(missing, tuple(sorted(r for r in inside if r != me)))
