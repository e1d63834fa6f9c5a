"""What one node's launcher knows during a run: its plan and options, its clock, the store, who is absent.

Plain data, apart from the launcher's actions (``launcher.py``: ``Launcher`` says, reports alone, decides and
cleans up; ``Ranks`` starts, relays and stops this node's ranks), so that node 0's and a follower's steps (``head.py``,
``follower.py``) read and update the facts of the run in one place and call only the actions they need.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nccl_doctor.preflight.auth import Seal, secret_from_env
from nccl_doctor.preflight.heartbeat import Heartbeat
from nccl_doctor.preflight.limits import FilesLimit
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.store import Store

MIN_WINDOW_S = 1.0  # a rendezvous step gets at least this long, even past the deadline


@dataclass(kw_only=True)
class NodeState:
    """One node's facts of the run: fixed at start (options, plan, environment, seal, deadline), then
    learnt as it goes (the store, the log dir, who is absent, each stage's time)."""

    args: PreflightOptions
    plan: NodePlan  # named with every node's host once node 0 has gathered them
    env: dict[str, str]
    seal: Seal  # no secret: an unauthenticated store (a WARN)
    t0: float  # monotonic start of the run
    deadline: float  # monotonic: t0 + --timeout
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage, and the total
    store: Store | None = None
    log_dir: Path | None = None  # made in Launcher.running(), where every exit path removes it
    heartbeat: Heartbeat | None = None
    absent: set[int] = field(default_factory=set)  # nodes that never arrived or stopped heart-beating: no ack
    measured_nothing: bool = False  # the ranks ran but measured nothing: the verdict is "could not run"
    files: FilesLimit | None = None  # RLIMIT_NOFILE as preflight raised it at start

    @classmethod
    def start(cls, args: PreflightOptions, plan: NodePlan, env: Mapping[str, str]) -> NodeState:
        """The state at the start of a run: its clock starts now."""
        t0 = time.monotonic()
        return cls(args=args, plan=plan, env=dict(env), seal=Seal(secret_from_env(env), plan.run_id), t0=t0,
                   deadline=t0 + float(args.timeout))

    # --- time ------------------------------------------------------------------------------------
    def mark(self, stage: str, since: float) -> None:
        """How long ``stage`` took, since ``since`` (monotonic)."""
        self.timings[str(stage)] = round(time.monotonic() - since, 2)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def window(self) -> float:
        """How long a rendezvous step may take now."""
        return max(MIN_WINDOW_S, min(float(self.args.rendezvous_timeout), self.deadline - time.monotonic()))

    def left(self, most: float) -> float:
        """``most`` seconds, or what is left before the deadline when that is less."""
        return min(most, max(0.0, self.deadline - time.monotonic()))

    # --- what exists only once started ---------------------------------------------------------
    @property
    def beat(self) -> Heartbeat:
        """The heartbeat, once started."""
        if self.heartbeat is None:
            raise RuntimeError("preflight: no heartbeat")
        return self.heartbeat

    @property
    def live(self) -> Store:
        """The store, once connected (a step that needs it runs only then)."""
        if self.store is None:
            raise RuntimeError("preflight: no rendezvous store")
        return self.store

    def alive_followers(self) -> int:
        """The followers expected to read node 0's verdict: all but those absent."""
        return self.plan.nnodes - 1 - len(self.absent - {0})
