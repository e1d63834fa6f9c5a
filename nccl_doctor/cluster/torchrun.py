"""Start ``python -m nccl_doctor <command>`` workers through torch's elastic launcher, and watch them.

Why not plain torchrun: across hosts it trips on a hostname that resolves to 127.0.0.1 (``net``'s
route), and its dynamic rendezvous unpickles what anyone who reaches its port writes. torchrun runs our
own static rendezvous (``rendezvous.py``: node 0 hosts the store, the others draw their rank); we pass
``is_host`` and ``GLOO_SOCKET_IFNAME`` from the route to the rendezvous host, derive everything from
``SLURM_*`` under srun, and enforce a deadline: when it expires we kill the launcher's process group and
say which stage each local rank was in (from its stage file). torchrun and its workers die with us.

Nothing here imports torch; the parent stays light and the workers import it themselves.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nccl_doctor.cluster.net import RouteFn, free_port, gloo_iface, parse_endpoint, resolve, route_to
from nccl_doctor.cluster.procs import (
    child_env,
    ignore_sigterm,
    kill_group,
    launch_log,
    private_dir,
    sigterm_as_interrupt,
)
from nccl_doctor.cluster.rankenv import RANK_SETTINGS, overridden
from nccl_doctor.cluster.slurm import (
    SlurmInfo,
    default_nproc,
    in_worker,
    one_task_per_node,
    port_from_env,
    slurm_launch_config,
)
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, Stage, StageRecord, read_stages
from nccl_doctor.cluster.stderr import StderrFilter, binary_out, relay_stderr, show
from nccl_doctor.enums import StrEnum
from nccl_doctor.errors import InputError

LOG_ENV = "NCCL_DOCTOR_WORKER_LOG"  # where the launcher keeps torchrun's and the workers' stderr
NOTES_ENV = "NCCL_DOCTOR_LAUNCH_NOTES"
DEFAULT_JOIN_TIMEOUT_S = 600.0
DEFAULT_DEADLINE_S = 900.0
DEFAULT_GRACE_S = 5.0  # between SIGTERM and SIGKILL to the launcher's process group
MONITOR_INTERVAL_S = 0.5  # how often torchrun's agent looks at its workers
RDZV_BACKEND = "nccl-doctor"  # ``rendezvous.BACKEND``: registered by the module torchrun runs as
RDZV_MODULE = "nccl_doctor.cluster.rendezvous"  # torchrun's main, with that backend
_RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")  # ours would confuse torchrun's


class TorchrunPhase(StrEnum):
    """How far torchrun got (``torchrun_phase``)."""

    STARTING = "starting"  # importing torch, parsing its arguments
    RENDEZVOUS = "rendezvous"  # waiting for the other nodes
    WORKERS = "workers"  # the rendezvous is complete: it started the workers


# --- the plan --------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """One torchrun invocation on this node."""

    nnodes: int = 1
    nproc_per_node: int
    rdzv_endpoint: str  # host:port
    rdzv_id: str
    is_host: bool | None = None  # None: let torchrun decide (single node, loopback endpoint)
    local_addr: str | None = None
    join_timeout_s: float = DEFAULT_JOIN_TIMEOUT_S
    deadline_s: float = DEFAULT_DEADLINE_S
    extra_env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _RoutePlan:
    """What the route to the rendezvous host adds to a multi-node plan."""

    is_host: bool | None = None
    local_addr: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def plan_launch(*, nnodes: int | None, nproc_per_node: int | None, rdzv_endpoint: str | None,
                rdzv_id: str | None, join_timeout_s: float, deadline_s: float,
                env: Mapping[str, str], route: RouteFn = route_to, cpu: bool = False,
                command: str = "bench") -> LaunchConfig:
    """Fill what the user left out from Slurm, the GPUs and the network; CLI values always win."""
    slurm = slurm_launch_config(env)
    if not in_worker(env):
        one_task_per_node(slurm, command)
    if nnodes is None:
        nnodes = slurm.nnodes if slurm else 1
    if nproc_per_node is None:
        nproc_per_node = default_nproc(env, slurm, cpu=cpu)
    if nnodes < 1 or nproc_per_node < 1:
        raise InputError(f"--nnodes and --nproc-per-node must be >= 1 (got {nnodes} and {nproc_per_node})")
    if rdzv_endpoint is None:
        rdzv_endpoint = _default_endpoint(nnodes, slurm, env)
    host, port = parse_endpoint(rdzv_endpoint)
    if nnodes == 1:  # across nodes, ``route`` resolves it
        resolve(host, "--rdzv-endpoint")
    rdzv_endpoint = f"{host}:{port}"
    if rdzv_id is None:
        rdzv_id = slurm.rdzv_id if slurm else "nccl-doctor"
    via = _route_plan(rdzv_endpoint, host, port, env, route) if nnodes > 1 else _RoutePlan()
    return LaunchConfig(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint,
                        rdzv_id=rdzv_id, is_host=via.is_host, local_addr=via.local_addr,
                        join_timeout_s=join_timeout_s, deadline_s=deadline_s, extra_env=via.extra_env,
                        notes=via.notes)


def _default_endpoint(nnodes: int, slurm: SlurmInfo | None, env: Mapping[str, str]) -> str:
    """Slurm's first node across nodes; a local port (MASTER_PORT, else a free one) on one node."""
    if slurm and nnodes > 1:
        return f"{slurm.rdzv_host}:{slurm.port}"
    if nnodes > 1:
        raise InputError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node), "
                         "or run under Slurm with `srun --ntasks-per-node=1`")
    return f"127.0.0.1:{port_from_env(env) or free_port()}"  # as preflight's port


def _route_plan(rdzv_endpoint: str, host: str, port: int, env: Mapping[str, str], route: RouteFn) -> _RoutePlan:
    """Whether this node hosts the rendezvous, the address it reaches it from and the interface Gloo
    should bind (unless the user set one); a loopback endpoint is left to torchrun."""
    r = route(host, port)
    if r.loopback:
        return _RoutePlan()
    notes = [f"rendezvous {rdzv_endpoint} ({r.peer_ip}); this node "
             f"{'hosts it' if r.is_local else 'joins it'} from {r.local_ip} ({r.iface})"]
    extra: dict[str, str] = {}
    iface = gloo_iface(r)
    if iface and not env.get("GLOO_SOCKET_IFNAME"):
        extra["GLOO_SOCKET_IFNAME"] = iface
        notes.append(f"GLOO_SOCKET_IFNAME={iface} (the interface that routes to the rendezvous host)")
    return _RoutePlan(is_host=r.is_local, local_addr=r.local_ip, extra_env=extra, notes=tuple(notes))


def torchrun_argv(cfg: LaunchConfig, worker_argv: list[str], *, python: str = sys.executable,
                  module: str = "nccl_doctor") -> list[str]:
    """torchrun (``python -m nccl_doctor.cluster.rendezvous``, torchrun's main with our static rendezvous
    registered) ``... -m nccl_doctor <command> ...``; never restarts workers."""
    conf = [f"join_timeout={int(cfg.join_timeout_s)}"]
    if cfg.is_host is not None:
        conf.append(f"is_host={int(cfg.is_host)}")
    argv = [python, "-m", RDZV_MODULE, f"--nnodes={cfg.nnodes}",
            f"--nproc-per-node={cfg.nproc_per_node}", f"--rdzv-backend={RDZV_BACKEND}",
            f"--rdzv-endpoint={cfg.rdzv_endpoint}", f"--rdzv-id={cfg.rdzv_id}",
            f"--rdzv-conf={','.join(conf)}", "--max-restarts=0", f"--monitor-interval={MONITOR_INTERVAL_S}"]
    if cfg.local_addr:
        argv.append(f"--local-addr={cfg.local_addr}")
    return [*argv, "-m", module, *worker_argv]


def launch_notes(env: Mapping[str, str]) -> list[str]:
    """The notes the parent passed down (what it set for the user, and why)."""
    try:
        return list(json.loads(env.get(NOTES_ENV, "[]")))
    except ValueError:
        return []


# --- what came of it -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LaunchOutcome:
    """How the local workers ended: torchrun's exit code, the deadline, and each rank's last stage."""

    returncode: int
    timed_out: bool
    elapsed_s: float
    stages: tuple[StageRecord, ...]
    host: str
    cfg: LaunchConfig
    log_path: str | None = None  # torchrun's and the workers' full stderr; kept only when something failed
    launcher_error: str | None = None  # the last line of torchrun's own traceback, when it printed one
    phase: TorchrunPhase | None = None  # how far torchrun got when the deadline fired (``torchrun_phase``)

    @property
    def worker_code(self) -> int | None:
        """The verdict code the local ranks recorded (all ranks share rank 0's); None if none did."""
        codes = [s.code for s in self.stages if s.code is not None]
        return max(codes) if codes else None

    def overdue(self) -> StageRecord | None:
        """The lowest local rank whose watchdog ended its stage (``StageRecord.overdue``), unless a local rank
        recorded a verdict of its own (rank 0 reported it): the record the launcher reports."""
        if any(s.code is not None and s.overdue is None for s in self.stages):
            return None
        late = [s for s in self.stages if s.overdue is not None]
        return min(late, key=lambda s: s.rank) if late else None

    def final_code(self) -> int | None:
        """The code to exit with when the workers reached a verdict, else None (the launcher reports).

        Never below what the workers really exited with: a recorded 0 must not hide a rank that
        failed afterwards (rank 0 could not write --json-out, a crash in teardown)."""
        if self.timed_out or self.worker_code is None:
            return None
        return max(self.worker_code, 0 if self.returncode == 0 else max(self.returncode, 1))

    @property
    def starting(self) -> bool:
        """The deadline fired while torchrun or the workers were still starting (importing torch)."""
        return self.timed_out and not self.stages and self.phase in (TorchrunPhase.STARTING, TorchrunPhase.WORKERS)

    def stuck_stage(self) -> str:
        """The earliest stage any local rank was stuck in; ``rendezvous`` when no worker started
        (``start-up`` when the deadline fired before torchrun reached the rendezvous, or after it but
        before any worker reported)."""
        if not self.stages:
            return Stage.START_UP if self.starting else Stage.RENDEZVOUS
        pending = [s for s in self.stages if s.code is None]
        return min(pending, key=lambda s: s.since).stage if pending else Stage.SHUTDOWN

    def describe(self) -> str:
        """One paragraph for the user: the stage, and the local ranks that did not finish."""
        what = f"deadline of {self.cfg.deadline_s:g} s expired" if self.timed_out else \
            f"torchrun exited with code {self.returncode} before the workers reported a verdict"
        if self.starting:
            where = ("torchrun had not reached the rendezvous yet (still importing torch)"
                     if self.phase == TorchrunPhase.STARTING
                     else "the rendezvous was complete, but no local rank had started yet (importing torch)")
            return (f"{what} during start-up on {self.host}: {where}; the deadline was shorter than the "
                    "start-up took, which says nothing about the network")
        if not self.stages:
            return self._no_stage(what)
        pending = [s for s in self.stages if s.code is None]
        parts = [f"rank {s.rank} in {s.stage}" + (f" ({s.error})" if s.error else "") for s in pending]
        missing = self.cfg.nproc_per_node - len(self.stages)
        if missing > 0:
            parts.append(f"{missing} local rank(s) never started")
        return (f"{what} in stage {self.stuck_stage()} on {self.host}: " + ("; ".join(parts) or "all local ranks done"))

    def _no_stage(self, what: str) -> str:
        """No local rank reported a stage: torchrun or the workers failed to start, or the rendezvous hung."""
        cfg = self.cfg
        if not self.timed_out and self.phase == TorchrunPhase.WORKERS and not self.launcher_error:
            return (f"the workers on {self.host} exited (torchrun code {self.returncode}) before reporting any stage "
                    "(a failing import of torch or CUDA, or a crash at start-up); their stderr is in the launch log")
        if not self.timed_out:
            return (f"torchrun exited with code {self.returncode} before starting any worker on {self.host} "
                    f"(rendezvous {cfg.rdzv_endpoint}, id {cfg.rdzv_id})"
                    + (f": {self.launcher_error}" if self.launcher_error else "; its output is in the launch log"))
        if cfg.nnodes == 1:
            return (f"{what} in stage rendezvous: no worker started on {self.host} (a 1-node rendezvous at "
                    f"{cfg.rdzv_endpoint}, id {cfg.rdzv_id}); this node cannot open or reach that "
                    "address and port (not one of its addresses, port in use, or firewalled)")
        return (f"{what} in stage rendezvous: no worker started on {self.host} "
                f"(waiting for {cfg.nnodes} nodes at {cfg.rdzv_endpoint}, id {cfg.rdzv_id}); "
                "the other nodes did not join, or cannot reach the rendezvous host (or another program holds "
                "its port: the rendezvous host then says so)")


# --- running it -----------------------------------------------------------------------------------
def self_launch(worker_argv: list[str], cfg: LaunchConfig, *, env: Mapping[str, str] | None = None,
                python: str = sys.executable, module: str = "nccl_doctor",
                grace_s: float = DEFAULT_GRACE_S) -> LaunchOutcome:
    """Run ``python -m <module> <worker_argv>`` on ``nproc_per_node`` ranks here, in a process group of
    its own; past ``cfg.deadline_s`` the whole group is terminated, then killed after ``grace_s``."""
    argv = torchrun_argv(cfg, worker_argv, python=python, module=module)  # before creating anything
    base = dict(os.environ if env is None else env)
    old = sigterm_as_interrupt()  # srun/scancel send SIGTERM: the new session would outlive us
    stage_dir: Path | None = None
    log_name: str | None = None
    try:
        stage_dir = private_dir("stages")  # (and removes those, and the logs, of SIGKILLed runs)
        log_name = str(launch_log(stage_dir, "stages"))
        return _run_torchrun(argv, base, cfg, stage_dir=stage_dir, log_name=log_name, grace_s=grace_s)
    except BaseException:  # an error or Ctrl-C/SIGTERM: nothing failed in the workers, keep no log
        if log_name:
            Path(log_name).unlink(missing_ok=True)
        raise
    finally:
        if old is not None:  # a second SIGTERM must not cut the cleanup short
            ignore_sigterm()
        try:
            if stage_dir is not None:
                shutil.rmtree(stage_dir, ignore_errors=True)
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)


def _worker_env(base: dict[str, str], cfg: LaunchConfig, stage_dir: Path, log_name: str) -> Path:
    """Fill ``base`` for torchrun and its workers (``rankenv.RANK_SETTINGS`` in force, a note for each user value
    they replace); returns torchrun's TMPDIR (inside the stage dir)."""
    notes = [*cfg.notes, *overridden(base)]
    base.update(RANK_SETTINGS)
    base.update(cfg.extra_env)
    base[STAGE_DIR_ENV] = str(stage_dir)
    tmp = stage_dir / "tmp"  # torchrun's own torchelastic_* dir (left behind when it is killed) goes with ours
    tmp.mkdir()
    base["TMPDIR"] = str(tmp)
    base[LOG_ENV] = log_name
    base[NOTES_ENV] = json.dumps(notes)
    base.setdefault("OMP_NUM_THREADS", "1")
    for var in _RANK_ENV:
        base.pop(var, None)
    return tmp


def _run_torchrun(argv: list[str], base: dict[str, str], cfg: LaunchConfig, *, stage_dir: Path, log_name: str,
                  grace_s: float) -> LaunchOutcome:
    tmp = _worker_env(base, cfg, stage_dir, log_name)
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=child_env(base), start_new_session=True, stderr=subprocess.PIPE)
    assert proc.stderr is not None  # stderr=PIPE
    filt = StderrFilter()
    relay = threading.Thread(target=relay_stderr, args=(proc.stderr, sys.stderr, Path(log_name), filt), daemon=True)
    relay.start()
    timed_out = False
    phase = None
    try:
        rc = proc.wait(timeout=cfg.deadline_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        phase = torchrun_phase(tmp)  # before the kill: how far torchrun had got
        rc = kill_group(proc, grace_s)
    except BaseException:  # Ctrl-C or SIGTERM: stop the ranks, which live in a session of their own
        ignore_sigterm()  # a second one must not cut the stopping short
        kill_group(proc, grace_s)
        raise
    finally:
        relay.join(timeout=grace_s)
    if not timed_out:
        phase = torchrun_phase(tmp)  # did it get as far as starting the workers?
    log_path = _keep_log(log_name, filt, rc, timed_out)
    return LaunchOutcome(returncode=rc, timed_out=timed_out, elapsed_s=time.monotonic() - start,
                         stages=tuple(read_stages(stage_dir)), host=socket.gethostname(), cfg=cfg, log_path=log_path,
                         launcher_error=filt.errors[0] if filt.errors else None, phase=phase)


def _keep_log(log_name: str, filt: StderrFilter, rc: int, timed_out: bool) -> str | None:
    """A run that passed keeps no log; a failed one says where it is (and shows the deferred store errors)."""
    if rc == 0 and not timed_out:
        Path(log_name).unlink(missing_ok=True)
        return None
    show(binary_out(sys.stderr), filt.deferred)  # store errors matter in a failed run
    what = "hit the deadline" if timed_out else f"exited with code {rc}"
    print(f"nccl-doctor: the local workers {what}; torchrun's and the workers' stderr: {log_name}",
          file=sys.stderr, flush=True)
    return log_name


def torchrun_phase(tmp: Path) -> TorchrunPhase | None:
    """How far torchrun got, from the log dir it makes in its TMPDIR (``torchelastic_*``, made once its
    imports are done and its arguments parsed; ``<run id>_*/attempt_N`` once the rendezvous is complete
    and it starts the workers): "starting", "rendezvous" or "workers"; None when it cannot be read."""
    try:
        roots = [p for p in tmp.iterdir() if p.name.startswith("torchelastic_")]
        if not roots:
            return TorchrunPhase.STARTING
        started = any(next(p.glob("*/attempt_*"), None) for p in roots)
    except OSError:
        return None
    return TorchrunPhase.WORKERS if started else TorchrunPhase.RENDEZVOUS
