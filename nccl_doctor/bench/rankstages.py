"""A rank's stages, torch side: marks on its sinks and in the rendezvous store, and our watchdog's end of a
stage that outlived ``--collective-timeout`` (the pure half is ``watchdog.py``). Imported only inside worker
processes (it imports torch at the top); ``worker.Stages`` is this module's ``Stages``."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.distributed as dist

from nccl_doctor.bench import watchdog
from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.watchdog import EXIT_BOUND_S, Overdue, Reached, StageWatch, laggards
from nccl_doctor.cluster.stages import Stage, StageFile, StageOverdue, StageSink

# test seams (hang-diagnosis tests), both "RANK:STAGE-PREFIX": that rank hangs in the first stage that matches,
STALL_ENV = "NCCL_DOCTOR_TEST_STALL"  # before entering it (the others see it missing; its own watchdog is idle)
STALL_INSIDE_ENV = "NCCL_DOCTOR_TEST_STALL_INSIDE"  # after entering it, past its warm-up (``Stages.inside``)
STALL_S = 3600
HOST_BYTES = 255  # a host name read back from a mark (RFC 1035: 253); whoever reached the store wrote the rest


class Stages:
    """Each rank marks the stage it enters on its sinks (its stage file, and whatever its caller adds:
    preflight's relayed marks) and in the rendezvous store (the store outlives a dead rank): ``ncd/<stage>/<rank>``
    (its host) on entering, ``.../warm`` past a measurement's warm-up (``inside``), ``.../left`` on leaving. So a
    rank stuck in a stage can name who never arrived and who entered and never left (``watchdog.laggards``).

    With ``timeout_s`` a watchdog thread (``watchdog.py``) bounds every stage, communicator creation included:
    once one outlives it, the rank records who is missing (stage file, ``on_overdue`` hooks), aborts its NCCL
    communicators and exits 1; its launcher reports the stage and the ranks (``bench``: ND310)."""

    def __init__(self, rank: int, host: str, env: Mapping[str, str] = os.environ, *,
                 sinks: Sequence[StageSink] = (), timeout_s: float | None = None, store: Any = None,
                 on_overdue: Sequence[Callable[[str, StageOverdue], None]] = (),
                 clock: Callable[[], float] = time.monotonic):
        self.rank, self.host = rank, host
        self.file = StageFile(rank, host, env)
        self.sinks: tuple[StageSink, ...] = (self.file, *sinks)
        self.current: str = Stage.INIT
        self.left = True  # nothing entered yet: nothing to leave
        self.stall = _stall_prefix(env.get(STALL_ENV, ""), rank)
        self.stall_inside = _stall_prefix(env.get(STALL_INSIDE_ENV, ""), rank)
        self.hosts: dict[int, str] = {}  # world rank -> host, once known (``run_bench`` after the topology)
        self.world_size = int(env.get("WORLD_SIZE", "1"))
        self.on_overdue = tuple(on_overdue)
        self.store: Any = store
        if store is None:
            try:
                self.store = dist.distributed_c10d._get_default_store()
            except Exception:
                self.store = None
        self.watch = StageWatch(timeout_s, clock) if timeout_s else None
        self.stop = watchdog.start(self.watch, self._expire) if self.watch else None

    def attach(self, store: Any) -> None:
        """The rendezvous store, once there is one (``init_from_env`` makes it inside the init stage): the
        current stage's entry mark goes to it now."""
        self.store = store
        if not self.left:
            self._mark(f"ncd/{self.current}/{self.rank}", self.host)

    def enter(self, stage: str) -> None:
        self.leave()  # entering the next stage leaves this one
        if self.stall and stage.startswith(self.stall):
            time.sleep(STALL_S)  # test seam: a rank that hangs before this stage (between stages: unwatched)
        self.current, self.left = stage, False
        if self.watch is not None:
            if stage in TERMINAL_STAGES:
                self.watch.disarm()
            else:
                self.watch.arm(stage)
        for sink in self.sinks:
            sink.record(stage)
        self._mark(f"ncd/{stage}/{self.rank}", self.host)

    def inside(self) -> None:
        """Called between a stage's warm-up and its timed loop: marks the rank past its warm-up, after the test
        seam for a rank stuck inside a stage (it entered, warmed up with the others, and never got further)."""
        if self.stall_inside and self.current.startswith(self.stall_inside):
            time.sleep(STALL_S)
        self._mark(f"ncd/{self.current}/{self.rank}/warm", "1")

    def leave(self) -> None:
        """The current stage is over on this rank (its guarded call returned): marked, and no longer watched."""
        if self.left:
            return
        self.left = True
        if self.watch is not None:
            self.watch.disarm()
        self._mark(f"ncd/{self.current}/{self.rank}/left", "1")

    def disarm(self) -> None:
        """The current stage failed on this rank (its error is the report): no longer watched, and not marked
        left (for the others it never left)."""
        if self.watch is not None:
            self.watch.disarm()

    def close(self) -> None:
        """Done with these stages: the watchdog thread stops (a rank's process may run on: an in-process test,
        preflight's next phase), so it can never fire for a stage this object no longer tracks."""
        self.disarm()
        if self.stop is not None:
            self.stop.set()

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rearm(self) -> None:
        """Watch the current stage again (a guarded call after the stage's own: it is bounded too)."""
        if self.watch is not None and self.current not in TERMINAL_STAGES:
            self.left = False
            self.watch.arm(self.current)

    def _mark(self, key: str, value: str) -> None:
        if self.store is not None:
            try:
                self.store.set(key, value)
            except Exception:
                self.store = None

    def missing(self, ranks: list[int]) -> list[int]:
        if self.store is None:
            return []
        try:
            return [r for r in ranks if not self.store.check([f"ncd/{self.current}/{r}"])]
        except Exception:
            return []

    def reached(self, rank: int, store: Any) -> Reached:
        """How far ``rank`` got through the current stage, from its marks in ``store``."""
        key = f"ncd/{self.current}/{rank}"
        for suffix, step in (("/left", Reached.LEFT), ("/warm", Reached.WARM), ("", Reached.ENTERED)):
            if store.check([key + suffix]):
                return step
        return Reached.ABSENT

    def overdue(self, waited_s: float, ranks: Sequence[int] | None = None, *, store: Any = None) -> StageOverdue:
        """Who holds the current stage up, as far as the store tells (nobody named when it cannot be read);
        ``store``: the connection to read it on (the watchdog's own; by default the main thread's)."""
        store = self.store if store is None else store
        ranks = range(self.world_size) if ranks is None else ranks
        timeout = self.watch.timeout_s if self.watch else 0.0
        try:
            found = laggards({r: self.reached(r, store) for r in ranks}, self.rank) if store is not None else None
        except Exception:
            found = None
        if found is None:
            return StageOverdue(waited_s=waited_s, timeout_s=timeout)
        return StageOverdue(waited_s=waited_s, timeout_s=timeout, missing=found.missing,
                            missing_hosts=tuple(self.hosts.get(r, "?") for r in found.missing),
                            never_left=found.never_left,
                            never_left_hosts=tuple(self._host(r, store) for r in found.never_left))

    def _host(self, rank: int, store: Any) -> str:
        """A rank that entered the stage left its host as the mark's value."""
        if rank in self.hosts:
            return self.hosts[rank]
        try:
            return bytes(store.get(f"ncd/{self.current}/{rank}"))[:HOST_BYTES].decode(errors="replace")
        except Exception:
            return "?"

    def _expire(self, late: Overdue) -> None:
        """The watchdog thread's end of a stage that outlived the timeout: say who is missing, everywhere our
        launchers look, then abort the communicators and exit, whatever the main thread is blocked in."""
        bound = threading.Timer(EXIT_BOUND_S, os._exit, (OVERDUE_EXIT,))
        bound.daemon = True
        bound.start()  # a store or an abort that hangs must not keep the rank alive
        stuck = self.overdue(late.waited_s, store=own_connection(self.store))
        msg = (f"stage {late.stage} outlived --collective-timeout ({stuck.timeout_s:g} s) on rank {self.rank} "
               f"({self.host}): {stuck.describe()}")
        print(f"nccl-doctor: {msg}", file=sys.stderr, flush=True)
        self.file.record(late.stage, code=OVERDUE_EXIT, error=msg, overdue=stuck)
        for hook in self.on_overdue:
            _quietly(hook, late.stage, stuck)
        abort_communicators()
        sys.stdout.flush()
        os._exit(OVERDUE_EXIT)


TERMINAL_STAGES = frozenset({Stage.DONE, Stage.FAILED})
OVERDUE_EXIT = 1  # a rank whose stage outlived the timeout: a failure, like any stage's
ABORT_WAIT_S = 5.0  # ncclCommAbort can itself hang (a peer gone mid-connection): exit after this long anyway


def abort_communicators() -> None:
    """Abort every NCCL communicator of this process (torch's ``_abort_process_group`` of the world, which
    takes every group; ``ProcessGroupNCCL.abort`` per group on torch without it), from a thread we wait for at
    most ``ABORT_WAIT_S``. Gloo has nothing to abort: exiting closes its sockets. Before init returns there is
    no group to abort either (an eager init stuck in ``ncclCommInitRank``): exiting is all there is."""
    if not dist.is_initialized() or dist.get_backend() != Backend.NCCL:
        return

    def abort() -> None:
        try:
            whole = getattr(dist.distributed_c10d, "_abort_process_group", None)
            if whole is not None:
                whole()
                return
            for pg in list(dist.distributed_c10d._world.pg_map):
                pg._get_backend(torch.device("cuda")).abort()
        except Exception:
            pass

    t = threading.Thread(target=abort, name="nccl-doctor-abort", daemon=True)
    t.start()
    t.join(ABORT_WAIT_S)


def own_connection(store: Any) -> Any:
    """A second connection to ``store`` for the watchdog thread, made when it fires (one per rank at a time: no
    extra connection for the whole run): a TCPStore client sends one request at a time, so on the main thread's
    connection the watchdog's reads would queue behind the ``get`` the main thread is blocked in (Gloo's and
    NCCL's rendezvous wait there) until PyTorch's own timeout. ``clone`` (torch 2.5+; a PrefixStore clones with
    its prefix); else the shared one, which still works whenever the main thread is blocked elsewhere (in a
    collective)."""
    try:
        return store.clone() if store is not None else None
    except Exception:
        return store


def _quietly(hook: Callable[[str, StageOverdue], None], stage: str, stuck: StageOverdue) -> None:
    """One ``on_overdue`` hook: its failure must not keep the rank from exiting."""
    try:
        hook(stage, stuck)
    except Exception:
        pass


def _stall_prefix(value: str, rank: int) -> str | None:
    rank_text, _, prefix = value.partition(":")
    return prefix if rank_text == str(rank) and prefix else None
