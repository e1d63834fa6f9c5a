"""One node's launcher: what node 0 and followers both do (say, report alone, decide, clean up) and its ranks
(``Ranks``: start, relay their stages, stop). What the node knows is ``nodestate.NodeState``, which both
act on; node 0's steps are in ``head.py``, a follower's in ``follower.py``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from nccl_doctor.bench import Backend
from nccl_doctor.cluster.net import gloo_iface_to
from nccl_doctor.cluster.procs import child_env, ignore_sigterm, kill_groups, private_dir, sigterm_as_interrupt
from nccl_doctor.cluster.rankenv import overridden, rank_env
from nccl_doctor.cluster.slurm import visible_gpus
from nccl_doctor.cluster.stages import Stage
from nccl_doctor.codes import Code
from nccl_doctor.preflight.auth import without_secret
from nccl_doctor.preflight.fsdp_smoke import DCP_PREFIX
from nccl_doctor.preflight.heartbeat import Heartbeat
from nccl_doctor.preflight.nccllogs import nccl_log_summary
from nccl_doctor.preflight.nodestate import NodeState
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.probe import probe_this_node
from nccl_doctor.preflight.protocol import (
    ACKS_KEY,
    BACKEND_RECORD,
    BACKEND_RECORD_ENV,
    RUN_ENV,
    STAGE_RECORD,
    STAGE_RECORD_ENV,
    TOTAL,
    VERDICT_KEY,
    LogSummary,
    NodePost,
    NodeStages,
    VerdictMessage,
    recorded_backends,
    recorded_stage,
    stages_key,
)
from nccl_doctor.preflight.verdict import NodeVerdict, alone, decide
from nccl_doctor.report import Report, Severity

PREFIX = "nccl-doctor preflight"
WORKER_ENV = "NCCL_DOCTOR_PREFLIGHT_WORKER"
KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL to our ranks
DCP_RECORD = "fsdp-smoke-checkpoint"  # in the log dir: where rank 0 put the smoke test's checkpoint
PUBLISH_WAIT_S = 5.0  # node 0 waits this long for the followers to read its verdict
POLL_S = 0.1
SHOWN_FATAL = 3  # probe failures named in the progress line
NCCL_DEBUG_SUBSYS = "INIT,BOOTSTRAP,ENV,NET"
NCCL_LOG_NAME = "%h.%p.log"  # NCCL_DEBUG_FILE: one file per host and process


class Launcher:
    """One node's side of the run. Node 0 also decides; the others follow its verdict."""

    def __init__(self, args: PreflightOptions, plan: NodePlan, env: Mapping[str, str]):
        self.state = NodeState.start(args, plan, env)
        self.ranks = Ranks(self.state)

    def say(self, msg: str) -> None:
        """Progress on stderr (a job log shows it interleaved with the report on stdout)."""
        state = self.state
        print(f"{PREFIX} [{state.plan.host} {state.elapsed():5.1f}s] {msg}", file=sys.stderr, flush=True)

    # --- the whole run ---------------------------------------------------------------------------
    @contextmanager
    def running(self) -> Iterator[None]:
        """Never leaves a rank behind: SIGTERM (srun, scancel, the time limit) stops us like Ctrl-C, and
        the exit stops the ranks, which live in sessions of their own."""
        old = sigterm_as_interrupt()
        try:
            self.state.log_dir = private_dir("nccl-logs")  # SIGKILLed runs' dirs: removed by the next run
            yield
        finally:
            if old is not None:  # a second SIGTERM must not cut the cleanup short
                ignore_sigterm()
            state = self.state
            try:
                if state.heartbeat is not None:
                    state.heartbeat.stop.set()
                self.ranks.kill_workers()
                if state.heartbeat is not None:
                    state.heartbeat.close()
            finally:
                if state.log_dir is not None:
                    remove_checkpoint(state.log_dir / DCP_RECORD)
                    shutil.rmtree(state.log_dir, ignore_errors=True)
                if old is not None:
                    signal.signal(signal.SIGTERM, old)

    def probe(self) -> NodePost:
        t = time.monotonic()
        # the probe posts and reports NCCL_* settings, as they apply to this run's backend
        mine = probe_this_node(self.state.plan, without_secret(self.state.env), self.ranks.backend())
        self.state.mark(Stage.PROBE, t)
        fatal = [f for f in mine.findings if f.severity is Severity.FAIL]
        if fatal:
            self.say("probe FAILED: " + "; ".join(f"{f.code} {f.message}" for f in fatal[:SHOWN_FATAL]))
        return mine

    def start_heartbeat(self) -> None:
        plan = self.state.plan
        self.state.heartbeat = Heartbeat(self.state.live, plan.node_rank, self.say, f"{plan.head}:{plan.port}")
        self.state.heartbeat.start()

    def alone(self, mine: NodePost, stage: str, why: str, *, fix: str | None = None, code: Code | None = None,
              host: str | None = None) -> NodeVerdict:
        """This node cannot reach the others: report what it knows itself, naming node 0 (or ``host``)."""
        return alone(self.state.plan, mine, stage, why, self.state.timings, fix=fix, code=code, host=host)

    def decide(self, report: Report, stage: str) -> NodeVerdict:
        """The verdict of this run (node 0, or one node alone)."""
        state = self.state
        state.timings[TOTAL] = round(state.elapsed(), 2)
        return decide(report, state.plan, stage, state.timings, measured_nothing=state.measured_nothing,
                      strict=state.args.output.strict)

    def publish(self, outcome: NodeVerdict) -> None:
        """Node 0: tell every node the verdict, and wait (briefly) until they have read it."""
        store = self.state.store
        if not self.state.plan.is_head or store is None:
            return
        try:
            msg = VerdictMessage(code=outcome.code, verdict=outcome.verdict, summary=outcome.summary)
            store.set(VERDICT_KEY, msg.to_json())
            end = time.monotonic() + PUBLISH_WAIT_S
            while time.monotonic() < end and store.count(ACKS_KEY) < self.state.alive_followers():
                time.sleep(POLL_S)
        except Exception:
            pass

    def abandon(self, why: str) -> None:
        """Leave now, from a thread, while the main thread is stuck in a store call: ranks stopped, our
        temp dir removed, one line, exit 1."""
        self.ranks.kill_workers()
        if self.state.log_dir is not None:
            shutil.rmtree(self.state.log_dir, ignore_errors=True)
        print(f"{PREFIX} ({self.state.plan.host}): FAIL: stopped in stage run: {why}", flush=True)
        sys.stderr.flush()
        os._exit(1)


class Ranks:
    """This node's ranks: their command line and environment, start, stages relayed to node 0, stop, and what
    they recorded (the backend, NCCL's logs). Acts on the node's state; the processes are its own."""

    def __init__(self, state: NodeState):
        self.state = state
        self.args, self.env = state.args, state.env  # fixed for the run (the plan is not: read it from state)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.relayed: NodeStages | None = None  # the ranks' stages as last written to ``stages/<node>``

    @property
    def plan(self) -> NodePlan:
        return self.state.plan

    @property
    def log_dir(self) -> Path | None:
        return self.state.log_dir

    def worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "nccl_doctor", *self.args.argv()]

    def worker_env(self, local: int, gloo_iface: str | None) -> dict[str, str]:
        plan, log_dir = self.plan, self.log_dir or Path()
        env = rank_env(self.env, self.log_settings())  # NCCL connects at init and logs for us (cluster/rankenv.py)
        env.update({
            WORKER_ENV: "1", "RANK": str(plan.node_rank * plan.nproc + local), "LOCAL_RANK": str(local),
            "WORLD_SIZE": str(plan.world_size), "LOCAL_WORLD_SIZE": str(plan.nproc),
            "GROUP_RANK": str(plan.node_rank), "NNODES": str(plan.nnodes), "MASTER_ADDR": plan.head,
            "MASTER_PORT": str(plan.port),
            "NCCL_DOCTOR_FSDP_BASE": self.args.fsdp_smoke_dir or (os.getcwd() if plan.nnodes > 1 else ""),
            "NCCL_DOCTOR_DCP_RECORD": str(log_dir / DCP_RECORD), BACKEND_RECORD_ENV: str(log_dir / BACKEND_RECORD),
            RUN_ENV: plan.run_id,  # the ranks seal their values for this run (the secret rides in env as it came)
            STAGE_RECORD_ENV: str(log_dir / STAGE_RECORD),
        })
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("PYTHONWARNINGS", "ignore")
        if gloo_iface:
            env["GLOO_SOCKET_IFNAME"] = gloo_iface
        return env

    def log_settings(self) -> dict[str, str]:
        """NCCL's log as node 0 reads it (``nccllogs.py``): INFO, the subsystems the summary needs, in our log
        dir. They replace the user's own NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE (``setting_notes``)."""
        return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": NCCL_DEBUG_SUBSYS,
                "NCCL_DEBUG_FILE": str((self.log_dir or Path()) / NCCL_LOG_NAME)}

    def setting_notes(self) -> list[str]:
        """The user's own values ``rank_env`` replaced for our ranks (said in the report), the NCCL log's too."""
        return overridden(self.env, {**self.log_settings(), "NCCL_DEBUG_FILE": "a file in nccl-doctor's log dir"})

    def spawn_workers(self) -> None:
        gloo_iface = None
        if self.plan.nnodes > 1 and not self.env.get("GLOO_SOCKET_IFNAME"):
            gloo_iface = gloo_iface_to(self.plan.head, self.plan.port)
        argv = self.worker_argv()
        for local in range(self.plan.nproc):
            self.procs.append(subprocess.Popen(argv, env=child_env(self.worker_env(local, gloo_iface)),
                                               start_new_session=True))  # (ranks die with us: child_env)

    def kill_workers(self) -> None:
        """Each rank runs in a session of its own (so a Ctrl-C reaches only us): stop them all, TERM first."""
        kill_groups(self.procs, KILL_GRACE_S)

    def relay_stages(self) -> None:
        """This node's ranks' stage files, as one value ``stages/<node>`` for node 0, when one changed."""
        if self.log_dir is None:
            return
        first = self.plan.node_rank * self.plan.nproc
        now = NodeStages(tuple(recorded_stage(self.log_dir / STAGE_RECORD, first + r) for r in range(self.plan.nproc)))
        if now != self.relayed:
            self.state.live.set(stages_key(self.plan.node_rank), now.to_json())
            self.relayed = now

    def workers_done(self) -> bool:
        return all(p.poll() is not None for p in self.procs)

    def dead_workers(self) -> list[int]:
        """Local ranks that exited with an error."""
        return [i for i, p in enumerate(self.procs) if p.poll() not in (None, 0)]

    def backend(self) -> Backend:
        """The backend this node's ranks ran; until one has recorded it, the one its GPUs suggest."""
        return self.used_backend() or (Backend.GLOO if self.args.cpu or not visible_gpus(self.env) else Backend.NCCL)

    def used_backend(self) -> Backend | None:
        """The backend this node's ranks recorded after init (``protocol.record_backend``); None before."""
        used = recorded_backends(self.log_dir) if self.log_dir is not None else set()
        known = [b for b in Backend if b.value in used]
        return known[0] if len(known) == 1 else None

    def nccl_logs(self) -> LogSummary:
        return nccl_log_summary(self.log_dir or Path(), self.backend(), host=self.plan.host)


def remove_checkpoint(record: Path) -> None:
    """The ``--fsdp-smoke`` checkpoint, when its ranks were killed before they could remove it (it sits on
    the user's shared file system). Only a directory the smoke test made (its prefix) is removed."""
    try:
        path = Path(record.read_text().strip())
    except OSError:
        return
    if path.name.startswith(DCP_PREFIX):
        shutil.rmtree(path, ignore_errors=True)
