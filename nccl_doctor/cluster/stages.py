"""Stage files: each rank's heartbeat (the stage it is in), which the launcher reads when the deadline fires."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nccl_doctor.enums import StrEnum
from nccl_doctor.files import atomic_write

STAGE_DIR_ENV = "NCCL_DOCTOR_STAGE_DIR"
RANK0_POLL_S = 0.05


class Stage(StrEnum):
    """The stage names the workers and the launcher share. A worker's other stages are free text
    (the collective it is in: ``all_gather inter 1 MiB``), so a stage field is a ``str``."""

    INIT = "init"  # a worker started
    DONE = "done"  # a worker recorded the shared verdict
    FAILED = "failed"  # a worker recorded its own failure
    START_UP = "start-up"  # the launcher: the deadline fired before torchrun or any rank had started
    RENDEZVOUS = "rendezvous"  # the launcher: no local rank started (the nodes never all joined)
    SHUTDOWN = "shutdown"  # the launcher: every local rank had recorded its code


@dataclass(frozen=True, kw_only=True)
class StageRecord:
    """One rank's stage file: where it is, since when, and its exit code once it recorded one."""

    rank: int
    host: str
    stage: str
    since: float
    code: int | None = None
    error: str | None = None


class StageFile:
    """A worker's heartbeat: its current stage in ``$NCCL_DOCTOR_STAGE_DIR/rank<R>.json``, written
    atomically so the watching parent never reads half a file. A no-op outside our launcher."""

    def __init__(self, rank: int, host: str, env: Mapping[str, str] = os.environ) -> None:
        d = env.get(STAGE_DIR_ENV)
        self.path = Path(d) / f"rank{rank}.json" if d else None
        self.rank, self.host = rank, host

    @property
    def managed(self) -> bool:
        return self.path is not None

    def set(self, stage: str, *, code: int | None = None, error: str | None = None) -> None:
        if self.path is None:
            return
        rec = {"rank": self.rank, "host": self.host, "stage": stage, "since": time.time(), "code": code,
               "error": error}
        atomic_write(self.path, json.dumps(rec))

    def wait_for_rank0(self, seconds: float) -> None:
        """Until rank 0 has recorded its code, at most ``seconds``. A failing rank's non-zero exit makes
        torchrun stop every rank, rank 0 too, perhaps before it printed the report: the launcher would then
        exit with the failing rank's code and no report (seen as an empty stdout). Only rank 0 of this node
        is waited for (its file is in the same directory); elsewhere there is nothing to wait for."""
        if self.path is None or self.rank == 0:
            return
        rank0 = self.path.with_name("rank0.json")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            record = _read_stage(rank0)
            if record is None or record.code is not None:
                return
            time.sleep(RANK0_POLL_S)


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
        return StageRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
