"""One stage model for every rank and launcher: the stage names, a rank's stage file, and where a stage goes.

A stage is where a rank or a launcher is, so that a hang or a failure names it. A rank records each stage it
enters on one or more ``StageSink``s: its stage file (``StageFile``, which ``bench``'s launcher reads when
the deadline fires) and, under ``preflight``, the file its launcher relays to node 0's store
(``preflight.protocol.StageMarks``). The names the code branches on are ``Stage``; the others are free text
(the collective a rank is in: ``all_gather inter 1 MiB``), so a stage field is a ``str``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nccl_doctor.enums import StrEnum
from nccl_doctor.files import atomic_write

STAGE_DIR_ENV = "NCCL_DOCTOR_STAGE_DIR"
RANK0_POLL_S = 0.05
RANK0_START_S = 30.0  # for rank 0 of this node to record its first stage (it imports torch first)


class Stage(StrEnum):
    """Every named stage, of ``bench`` and ``preflight`` alike; the values are what reports, stage files and
    the store carry."""

    # a rank's, in both commands
    INIT = "init"  # a worker started
    DONE = "done"  # a worker recorded the shared verdict; preflight: the run finished
    FAILED = "failed"  # a worker recorded its own failure
    # bench's launcher
    START_UP = "start-up"  # the deadline fired before torchrun or any rank had started
    RENDEZVOUS = "rendezvous"  # no local rank started (the nodes never all joined); preflight: the same
    SHUTDOWN = "shutdown"  # every local rank had recorded its code
    # bench's ranks (a measurement's stage is ``measure_stage``, a pair round's ``pairs_stage``)
    PROBE = "probe"  # the launcher's own probe of this node: nothing launched; preflight: the same
    TOPOLOGY = "topology"  # which rank runs on which node, and each node's yardstick
    GROUPS = "groups"  # the intra/inter sub-groups
    # preflight's (where a run stopped: the report's ``stage``; its ranks' bench stages carry ``bench ``)
    CONSISTENCY = "consistency"
    RUN = "run"
    VERDICT = "verdict"
    NCCL_LOGS = "nccl-logs"
    NOT_STARTED = "not started"
    FSDP_SMOKE = "fsdp-smoke"


@dataclass(frozen=True, kw_only=True)
class StageOverdue:
    """What a rank's watchdog saw when its stage outlived ``--collective-timeout`` (``bench.watchdog``): the
    ranks that never reached the stage and those that entered it and never left, with their hosts ("?" where
    unknown). The rank then exits; its launcher reports it (``bench``: ND310)."""

    waited_s: float
    timeout_s: float
    missing: tuple[int, ...] = ()
    missing_hosts: tuple[str, ...] = ()
    never_left: tuple[int, ...] = ()
    never_left_hosts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"waited_s": round(self.waited_s, 2), "timeout_s": self.timeout_s, "missing": list(self.missing),
                "missing_hosts": list(self.missing_hosts), "never_left": list(self.never_left),
                "never_left_hosts": list(self.never_left_hosts)}

    @classmethod
    def from_json(cls, d: object) -> StageOverdue:
        """The stage file's ``overdue`` object; ``ValueError`` for anything else (the file is then skipped)."""
        if not isinstance(d, dict):
            raise ValueError("overdue is not an object")
        return cls(waited_s=float(d["waited_s"]), timeout_s=float(d["timeout_s"]),
                   missing=tuple(int(x) for x in d.get("missing", ())),
                   missing_hosts=tuple(str(x) for x in d.get("missing_hosts", ())),
                   never_left=tuple(int(x) for x in d.get("never_left", ())),
                   never_left_hosts=tuple(str(x) for x in d.get("never_left_hosts", ())))

    def describe(self) -> str:
        """The ranks in prose: who never reached the stage, who never left it."""
        parts = []
        if self.missing:
            parts.append(f"ranks that never reached it: {_who(self.missing, self.missing_hosts)}")
        if self.never_left:
            parts.append(f"ranks that entered it and never left: {_who(self.never_left, self.never_left_hosts)}")
        return "; ".join(parts) or "every rank reached it and none is behind"


def _who(ranks: tuple[int, ...], hosts: tuple[str, ...]) -> str:
    return ", ".join(f"rank {r} ({h})" for r, h in zip(ranks, hosts, strict=False))


@dataclass(frozen=True, kw_only=True)
class StageRecord:
    """One rank's stage file: where it is, since when, and its exit code once it recorded one (with the
    watchdog's findings when the stage outlived its timeout)."""

    rank: int
    host: str
    stage: str
    since: float
    code: int | None = None
    error: str | None = None
    overdue: StageOverdue | None = None


class StageSink(Protocol):
    """Where a rank's stages go: each stage it enters, in order."""

    def record(self, stage: str) -> None: ...


@dataclass(frozen=True)
class PrefixedSink:
    """Another sink's stages under a prefix: ``preflight``'s ranks show bench's stages as ``bench <stage>``."""

    sink: StageSink
    prefix: str

    def record(self, stage: str) -> None:
        self.sink.record(f"{self.prefix}{stage}")


class StageFile:
    """A worker's heartbeat, a ``StageSink``: its current stage in ``$NCCL_DOCTOR_STAGE_DIR/rank<R>.json``,
    written atomically so the watching parent never reads half a file. A no-op outside our launcher."""

    def __init__(self, rank: int, host: str, env: Mapping[str, str] = os.environ) -> None:
        d = env.get(STAGE_DIR_ENV)
        self.path = Path(d) / f"rank{rank}.json" if d else None
        self.rank, self.host = rank, host
        local = env.get("LOCAL_RANK", "")
        # torchrun numbers a node's ranks RANK-LOCAL_RANK onwards: rank 0 is ours when that is 0
        self.rank0_here = rank - int(local) == 0 if local.isdigit() else True

    @property
    def managed(self) -> bool:
        return self.path is not None

    def record(self, stage: str, *, code: int | None = None, error: str | None = None,
               overdue: StageOverdue | None = None) -> None:
        if self.path is None:
            return
        rec = {"rank": self.rank, "host": self.host, "stage": stage, "since": time.time(), "code": code,
               "error": error}
        if overdue is not None:
            rec["overdue"] = overdue.to_json()
        atomic_write(self.path, json.dumps(rec))

    def wait_for_rank0(self, seconds: float, *, start_s: float = RANK0_START_S) -> None:
        """Until rank 0 has recorded its code, at most ``seconds`` once it has started. A failing rank's
        non-zero exit makes torchrun stop every rank, rank 0 too, perhaps before it printed the report: the
        launcher would then exit with the failing rank's code and no report (seen as an empty stdout). Only
        rank 0 of this node is waited for (its file is in the same directory), and first for its file to
        appear, up to ``start_s``: on a loaded box rank 1 can fail before rank 0 has even imported torch,
        and leaving then lost the report too (seen in CI)."""
        if self.path is None or self.rank == 0 or not self.rank0_here:
            return
        rank0 = self.path.with_name("rank0.json")
        end = time.monotonic() + start_s
        while (record := _read_stage(rank0)) is None and time.monotonic() < end:
            time.sleep(RANK0_POLL_S)
        end = time.monotonic() + seconds
        while record is not None and record.code is None and time.monotonic() < end:
            time.sleep(RANK0_POLL_S)
            record = _read_stage(rank0)


def read_stages(stage_dir: Path) -> list[StageRecord]:
    """Every rank's last stage, by rank; a file that cannot be read or parsed is skipped."""
    out = []
    for p in sorted(stage_dir.glob("rank*.json")):
        record = _read_stage(p)
        if record is not None:
            out.append(record)
    return sorted(out, key=lambda r: r.rank)


def _read_stage(path: Path) -> StageRecord | None:
    try:
        d = json.loads(path.read_text())
        if isinstance(d, dict) and d.get("overdue") is not None:
            d["overdue"] = StageOverdue.from_json(d["overdue"])
        return StageRecord(**d)
    except (OSError, ValueError, TypeError, KeyError):
        return None
