"""Start ``python -m nccl_doctor <command>`` workers through torch's elastic launcher, and watch them.

Why not plain torchrun: across hosts it trips on a hostname that resolves to 127.0.0.1 (no node hosts
the rendezvous store, workers get ``MASTER_ADDR=localhost``, Gloo binds loopback; platform.md section 3).
We pass ``is_host``, ``--local-addr`` and ``GLOO_SOCKET_IFNAME`` from the route to the rendezvous host,
derive everything from ``SLURM_*`` under srun, and enforce a deadline: when it expires we kill the
launcher's process group and say which stage each local rank was in (from its stage file).

Nothing here imports torch; the parent stays light and the workers import it themselves.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.files import atomic_write

STAGE_DIR_ENV = "NCCL_DOCTOR_STAGE_DIR"
LOG_ENV = "NCCL_DOCTOR_WORKER_LOG"  # where the launcher keeps torchrun's and the workers' stderr
NOTES_ENV = "NCCL_DOCTOR_LAUNCH_NOTES"
DEFAULT_PORT = 29500
MAX_SECONDS = 7 * 24 * 3600  # a deadline beyond a week is a typo (or inf), not a plan


# --- where we are ---------------------------------------------------------------------------------
def in_worker(env: Mapping[str, str]) -> bool:
    """A launcher (torchrun, or us through it) already made this process a rank."""
    return "RANK" in env and "WORLD_SIZE" in env


def visible_gpus(env: Mapping[str, str], dev_root: Path = Path("/dev")) -> int:
    """GPUs this process may use, without importing torch: CUDA_VISIBLE_DEVICES, else /dev/nvidiaN."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        items = [x for x in cvd.split(",") if x.strip()]
        if not items or items[0].strip() in ("-1", "NoDevFiles"):
            return 0
        return len(items)
    try:
        return sum(1 for p in dev_root.iterdir() if re.fullmatch(r"nvidia\d+", p.name))
    except OSError:
        return 0


@dataclass(frozen=True, kw_only=True)
class SlurmInfo:
    """What ``srun --ntasks-per-node=1 nccl-doctor ...`` needs, read from the SLURM_* variables."""

    nnodes: int
    hosts: tuple[str, ...]
    rdzv_host: str
    port: int
    rdzv_id: str
    gpus_on_node: int | None
    tasks_per_node: int | None


def slurm_launch_config(env: Mapping[str, str]) -> SlurmInfo | None:
    """None outside a Slurm job. The step's node list wins over the job's (``srun -N1`` in a big job)."""
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        return None
    import hostlist

    try:
        hosts = tuple(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as exc:
        raise InputError(f"cannot expand SLURM node list {nodelist!r}: {exc}") from None
    count = env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    nnodes = _int(count, "SLURM_*_NUM_NODES") if count else len(hosts)
    port = port_from_env(env) or DEFAULT_PORT + _int(job, "SLURM_JOB_ID") % 1000
    step = env.get("SLURM_STEP_ID")
    tasks = None
    if env.get("SLURM_STEP_NUM_TASKS") and env.get("SLURM_STEP_NUM_NODES"):
        tasks = _int(env["SLURM_STEP_NUM_TASKS"], "SLURM_STEP_NUM_TASKS") // max(1, nnodes)
    gpus = env.get("SLURM_GPUS_ON_NODE")
    return SlurmInfo(nnodes=nnodes, hosts=hosts, rdzv_host=hosts[0], port=port,
                     rdzv_id=f"slurm-{job}" + (f".{step}" if step else ""),
                     gpus_on_node=_int(gpus, "SLURM_GPUS_ON_NODE") if gpus else None, tasks_per_node=tasks)


def port_from_env(env: Mapping[str, str]) -> int | None:
    """MASTER_PORT when set (a bad value is an error, never silently replaced); None when unset."""
    text = env.get("MASTER_PORT")
    return check_port(_int(text, "MASTER_PORT"), "MASTER_PORT") if text else None


def default_nproc(env: Mapping[str, str], slurm: SlurmInfo | None, *, cpu: bool = False) -> int:
    """Ranks per node when the user did not say: one per visible GPU, else SLURM_GPUS_ON_NODE, else 2
    CPU ranks (always 2 with ``--cpu``: Gloo on CPU tests the network, not the GPUs)."""
    if cpu:
        return 2
    return visible_gpus(env) or (slurm.gpus_on_node if slurm and slurm.gpus_on_node else 0) or 2


def one_task_per_node(slurm: SlurmInfo | None, command: str) -> None:
    """nccl-doctor starts its own ranks: an srun step with several tasks per node would start them N times."""
    if slurm and slurm.tasks_per_node and slurm.tasks_per_node > 1:
        raise InputError(f"this srun step runs {slurm.tasks_per_node} tasks per node; nccl-doctor starts one "
                         f"rank per GPU itself: use `srun --ntasks-per-node=1 nccl-doctor {command}`")


def check_port(port: int, name: str) -> int:
    """A TCP port the rendezvous can listen on or connect to: 1-65535."""
    if not 1 <= port <= 65535:
        raise InputError(f"{name} {port} is not a TCP port (1-65535)")
    return port


def check_seconds(value: float, option: str, *, minimum: float | None = None, why: str = "") -> float:
    """A deadline option: finite, > 0 and at most a week. ``inf`` or ``1e400`` would pass ``> 0`` and
    then overflow ``int()`` or ``timedelta`` deep inside torchrun or a rank (a traceback per rank).
    ``minimum``: below it the deadline cannot mean anything (``why`` says what it must cover)."""
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise InputError(f"{option} {value:g}: expected a finite number of seconds, > 0 and at most "
                         f"{MAX_SECONDS} (7 days)")
    if minimum is not None and value < minimum:
        raise InputError(f"{option} {value:g}: the minimum is {minimum:g} seconds" + (f" ({why})" if why else ""))
    return value


def parse_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6addr]:PORT`` too) -> (host, port); one clear line for anything else, before
    torchrun turns it into a traceback or a rendezvous that waits until the deadline."""
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit():
        raise InputError(f"--rdzv-endpoint {text!r} is not HOST:PORT (e.g. n1:29500)")
    return host, check_port(int(port_text), f"--rdzv-endpoint {text!r}: port")


def resolve(host: str, what: str, *, timeout_s: float = 10.0) -> None:
    """Fail at once on a host name that does not resolve (c10d would retry it until the deadline).
    Resolution runs in a thread so a DNS server that never answers costs ``timeout_s``, not minutes."""
    box: list = []

    def lookup():
        try:
            box.append(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
        except (socket.gaierror, UnicodeError) as exc:
            box.append(exc)

    t = threading.Thread(target=lookup, daemon=True)
    t.start()
    t.join(timeout_s)
    if not box:
        raise InputError(f"{what}: resolving {host!r} took more than {timeout_s:.0f} s")
    if isinstance(box[0], Exception):
        why = getattr(box[0], "strerror", None) or str(box[0])
        raise InputError(f"{what}: cannot resolve host {host!r} ({why})")


def _int(text: str, name: str) -> int:
    try:
        return int(text.split("(")[0])
    except ValueError:
        raise InputError(f"{name}={text!r} is not a number") from None


# --- the route to the rendezvous host -------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """How this node reaches the rendezvous host: our source address and the interface that owns it."""

    peer_ip: str
    local_ip: str | None
    iface: str | None
    is_local: bool  # the rendezvous host is this machine
    loopback: bool


def route_to(host: str, port: int) -> Route:
    """Resolve ``host`` and ask the kernel which source address it would use (a UDP ``connect``
    sends no packet). The interface is the one holding that address."""
    resolve(host, "rendezvous host")  # time-bounded: a DNS server that never answers costs seconds
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise InputError(f"cannot resolve rendezvous host {host!r}: {exc.strerror}") from None
    peer = infos[0][4][0]
    local_ip = None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((peer, port))
            local_ip = s.getsockname()[0]
        except OSError:
            pass
    addrs = local_addresses()
    iface = next((name for name, ips in addrs.items() if local_ip in ips), None)
    loop = ipaddress.ip_address(peer).is_loopback
    is_local = loop or any(peer in ips for ips in addrs.values())
    return Route(peer_ip=peer, local_ip=local_ip, iface=iface, is_local=is_local, loopback=loop)


def gloo_iface(r: Route) -> str | None:
    """The interface Gloo should bind to reach the rendezvous host (GLOO_SOCKET_IFNAME when unset):
    None on loopback, where Gloo's own default (the hostname's interface) is right."""
    return r.iface if r.iface and r.iface != "lo" and not r.loopback else None


def gloo_iface_to(host: str, port: int, *, route=route_to) -> str | None:
    """``gloo_iface`` of the route to ``host``; None when it cannot be found (Gloo then binds what the
    hostname resolves to). Costs a DNS lookup and a psutil scan: call it once per node, not per rank."""
    try:
        return gloo_iface(route(host, port))
    except (InputError, OSError):
        return None


def local_addresses() -> dict[str, set[str]]:
    import psutil

    return {name: {a.address for a in addrs if a.family == socket.AF_INET}
            for name, addrs in psutil.net_if_addrs().items()}


def port_busy(port: int) -> str | None:
    """Why this node cannot listen on ``port`` (the rendezvous store's port) on every address, as torch's
    TCPStore will; None when it can. SO_REUSEADDR as TCPStore sets it: a TIME_WAIT leftover of an earlier
    run is no conflict, a listening socket is."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as exc:
            return "already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc)).lower()
    return None


def hosts_store(cfg: "LaunchConfig") -> bool:
    """This node will host the rendezvous store: we told torchrun so (``is_host``), or the run is one node
    on one of this node's addresses. A loopback endpoint across "nodes" lets torchrun decide (two launchers
    on one machine: the second joins the first's store), so it is never ours to check."""
    if cfg.is_host is not None:
        return cfg.is_host
    if cfg.nnodes != 1:
        return False
    host, _ = parse_endpoint(cfg.rdzv_endpoint)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or any(host in ips for ips in local_addresses().values())


def check_rdzv_port(cfg: "LaunchConfig", origin: str) -> None:
    """On the node that hosts the rendezvous store, a port another program holds is one error line before
    torchrun starts (torchrun would print a traceback here while every other node waits its deadline).
    ``origin``: where the port came from (``rdzv_port_origin``), so the fix names what to change."""
    if not hosts_store(cfg):
        return
    host, port = parse_endpoint(cfg.rdzv_endpoint)
    why = port_busy(port)
    if why is None:
        return
    where = f"{socket.gethostname()}, the rendezvous host" if cfg.nnodes > 1 else socket.gethostname()
    every = " (the same on every node)" if cfg.nnodes > 1 else ""
    fix = {"--rdzv-endpoint": f"pick a free port, --rdzv-endpoint {host}:OTHERPORT{every}",
           "MASTER_PORT": f"set MASTER_PORT to a free port{every}"}.get(
        origin, f"set MASTER_PORT to a free port{every}, or pass --rdzv-endpoint {host}:OTHERPORT")
    raise InputError(f"rendezvous port {port} (from {origin}) is {why} on {where}: {fix}")


def rdzv_port_origin(rdzv_endpoint: str | None, env: Mapping[str, str], nnodes: int) -> str:
    """Where ``plan_launch`` took the rendezvous port from (for the busy-port error's fix)."""
    if rdzv_endpoint is not None:
        return "--rdzv-endpoint"
    if port_from_env(env) is not None:
        return "MASTER_PORT"
    return "29500 + job id % 1000" if nnodes > 1 and slurm_launch_config(env) else "a free port"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    join_timeout_s: float = 600
    deadline_s: float = 900
    extra_env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def plan_launch(*, nnodes: int | None, nproc_per_node: int | None, rdzv_endpoint: str | None,
                rdzv_id: str | None, join_timeout_s: float, deadline_s: float,
                env: Mapping[str, str], route=route_to, cpu: bool = False, command: str = "bench") -> LaunchConfig:
    """Fill what the user left out from Slurm, the GPUs and the network; CLI values always win."""
    slurm = slurm_launch_config(env)
    notes: list[str] = []
    if not in_worker(env):
        one_task_per_node(slurm, command)
    if nnodes is None:
        nnodes = slurm.nnodes if slurm else 1
    if nproc_per_node is None:
        nproc_per_node = default_nproc(env, slurm, cpu=cpu)
    if nnodes < 1 or nproc_per_node < 1:
        raise InputError(f"--nnodes and --nproc-per-node must be >= 1 (got {nnodes} and {nproc_per_node})")
    if rdzv_endpoint is None:
        if slurm and nnodes > 1:
            rdzv_endpoint = f"{slurm.rdzv_host}:{slurm.port}"
        elif nnodes > 1:
            raise InputError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node), "
                             "or run under Slurm with `srun --ntasks-per-node=1`")
        else:
            rdzv_endpoint = f"127.0.0.1:{port_from_env(env) or free_port()}"  # as preflight's port
    host, port = parse_endpoint(rdzv_endpoint)
    if nnodes == 1:  # across nodes, ``route`` resolves it
        resolve(host, "--rdzv-endpoint")
    rdzv_endpoint = f"{host}:{port}"
    if rdzv_id is None:
        rdzv_id = slurm.rdzv_id if slurm else "nccl-doctor"
    is_host, local_addr, extra = None, None, {}
    if nnodes > 1:
        r = route(host, port)
        if not r.loopback:
            is_host = r.is_local
            local_addr = r.local_ip
            notes.append(f"rendezvous {rdzv_endpoint} ({r.peer_ip}); this node "
                         f"{'hosts it' if is_host else 'joins it'} from {r.local_ip} ({r.iface})")
            iface = gloo_iface(r)
            if iface and not env.get("GLOO_SOCKET_IFNAME"):
                extra["GLOO_SOCKET_IFNAME"] = iface
                notes.append(f"GLOO_SOCKET_IFNAME={iface} (the interface that routes to the rendezvous host)")
    return LaunchConfig(nnodes=nnodes, nproc_per_node=nproc_per_node, rdzv_endpoint=rdzv_endpoint,
                        rdzv_id=rdzv_id, is_host=is_host, local_addr=local_addr, join_timeout_s=join_timeout_s,
                        deadline_s=deadline_s, extra_env=extra, notes=tuple(notes))


def torchrun_argv(cfg: LaunchConfig, worker_argv: list[str], *, python: str = sys.executable,
                  module: str = "nccl_doctor") -> list[str]:
    """``python -m torch.distributed.run ... -m nccl_doctor <command> ...``; never restarts workers."""
    conf = [f"join_timeout={int(cfg.join_timeout_s)}"]
    if cfg.is_host is not None:
        conf.append(f"is_host={int(cfg.is_host)}")
    argv = [python, "-m", "torch.distributed.run", f"--nnodes={cfg.nnodes}",
            f"--nproc-per-node={cfg.nproc_per_node}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={cfg.rdzv_endpoint}", f"--rdzv-id={cfg.rdzv_id}",
            f"--rdzv-conf={','.join(conf)}", "--max-restarts=0", "--monitor-interval=0.5"]
    if cfg.local_addr:
        argv.append(f"--local-addr={cfg.local_addr}")
    return argv + ["-m", module, *worker_argv]


# --- stages: what each rank was doing -------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class StageRecord:
    rank: int
    host: str
    stage: str
    since: float
    code: int | None = None
    error: str | None = None


class StageFile:
    """A worker's heartbeat: its current stage in ``$NCCL_DOCTOR_STAGE_DIR/rank<R>.json``, written
    atomically so the watching parent never reads half a file. A no-op outside our launcher."""

    def __init__(self, rank: int, host: str, env: Mapping[str, str] = os.environ):
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


def read_stages(stage_dir: Path) -> list[StageRecord]:
    out = []
    for p in sorted(stage_dir.glob("rank*.json")):
        try:
            out.append(StageRecord(**json.loads(p.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(out, key=lambda r: r.rank)


# --- private temporary directories -------------------------------------------------------------
def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def private_dir(kind: str, tmp: str | None = None) -> Path:
    """A fresh ``nccl-doctor-<kind>-<host>-<pid>-XXXX`` in the temp dir. Normal exits, errors and SIGTERM
    remove it; a SIGKILLed run cannot, so each new one first removes this host's dirs of the same kind
    whose process is gone (a live pid, or another host's dir on a shared /tmp, is left alone)."""
    tmp = tmp or tempfile.gettempdir()
    remove_stale_dirs(kind, tmp)
    return Path(tempfile.mkdtemp(prefix=f"nccl-doctor-{kind}-{_host_tag()}-{os.getpid()}-", dir=tmp))


def remove_stale_dirs(kind: str, tmp: str) -> list[Path]:
    """This host's ``private_dir(kind)`` dirs whose owner pid no longer runs, removed; returns them."""
    pat = re.compile(rf"nccl-doctor-{re.escape(kind)}-{re.escape(_host_tag())}-(\d+)-[^/]+")
    gone = []
    try:
        entries = list(Path(tmp).iterdir())
    except OSError:
        return gone
    for p in entries:
        m = pat.fullmatch(p.name)
        if m and not pid_alive(int(m.group(1))) and p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- running it -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LaunchOutcome:
    returncode: int
    timed_out: bool
    elapsed_s: float
    stages: tuple[StageRecord, ...]
    host: str
    cfg: LaunchConfig
    log_path: str | None = None  # torchrun's and the workers' full stderr; kept only when something failed
    launcher_error: str | None = None  # the last line of torchrun's own traceback, when it printed one
    phase: str | None = None  # how far torchrun got when the deadline fired (``torchrun_phase``)

    @property
    def worker_code(self) -> int | None:
        """The verdict code the local ranks recorded (all ranks share rank 0's); None if none did."""
        codes = [s.code for s in self.stages if s.code is not None]
        return max(codes) if codes else None

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
        return self.timed_out and not self.stages and self.phase in ("starting", "workers")

    def stuck_stage(self) -> str:
        """The earliest stage any local rank was stuck in; ``rendezvous`` when no worker started
        (``start-up`` when the deadline fired before torchrun reached the rendezvous, or after it but
        before any worker reported)."""
        if not self.stages:
            return "start-up" if self.starting else "rendezvous"
        pending = [s for s in self.stages if s.code is None]
        return min(pending, key=lambda s: s.since).stage if pending else "shutdown"

    def describe(self) -> str:
        """One paragraph for the user: the stage, and the local ranks that did not finish."""
        what = f"deadline of {self.cfg.deadline_s:g} s expired" if self.timed_out else \
            f"torchrun exited with code {self.returncode} before the workers reported a verdict"
        expected = self.cfg.nproc_per_node
        if self.starting:
            where = ("torchrun had not reached the rendezvous yet (still importing torch)" if self.phase == "starting"
                     else "the rendezvous was complete, but no local rank had started yet (importing torch)")
            return (f"{what} during start-up on {self.host}: {where}; the deadline was shorter than the "
                    "start-up took, which says nothing about the network")
        if not self.stages and not self.timed_out and self.phase == "workers" and not self.launcher_error:
            return (f"the workers on {self.host} exited (torchrun code {self.returncode}) before reporting any stage "
                    "(a failing import of torch or CUDA, or a crash at start-up); their stderr is in the launch log")
        if not self.stages and not self.timed_out:
            return (f"torchrun exited with code {self.returncode} before starting any worker on {self.host} "
                    f"(rendezvous {self.cfg.rdzv_endpoint}, id {self.cfg.rdzv_id})"
                    + (f": {self.launcher_error}" if self.launcher_error else "; its output is in the launch log"))
        if not self.stages and self.cfg.nnodes == 1:
            return (f"{what} in stage rendezvous: no worker started on {self.host} (a 1-node rendezvous at "
                    f"{self.cfg.rdzv_endpoint}, id {self.cfg.rdzv_id}); this node cannot open or reach that "
                    "address and port (not one of its addresses, port in use, or firewalled)")
        if not self.stages:
            return (f"{what} in stage rendezvous: no worker started on {self.host} "
                    f"(waiting for {self.cfg.nnodes} nodes at {self.cfg.rdzv_endpoint}, id {self.cfg.rdzv_id}); "
                    "the other nodes did not join, or cannot reach the rendezvous host (or another program holds "
                    "its port: the rendezvous host then says so)")
        pending = [s for s in self.stages if s.code is None]
        parts = [f"rank {s.rank} in {s.stage}" + (f" ({s.error})" if s.error else "") for s in pending]
        missing = expected - len(self.stages)
        if missing > 0:
            parts.append(f"{missing} local rank(s) never started")
        return (f"{what} in stage {self.stuck_stage()} on {self.host}: " + ("; ".join(parts) or "all local ranks done"))


def self_launch(worker_argv: list[str], cfg: LaunchConfig, *, env: Mapping[str, str] | None = None,
                python: str = sys.executable, module: str = "nccl_doctor", grace_s: float = 5.0) -> LaunchOutcome:
    """Run ``python -m <module> <worker_argv>`` on ``nproc_per_node`` ranks here, in a process group of
    its own; past ``cfg.deadline_s`` the whole group is terminated, then killed after ``grace_s``."""
    argv = torchrun_argv(cfg, worker_argv, python=python, module=module)  # before creating anything
    base = dict(os.environ if env is None else env)
    old = sigterm_as_interrupt()  # srun/scancel send SIGTERM: the new session would outlive us
    stage_dir = log_name = None
    try:
        stage_dir = private_dir("stages")
        fd, log_name = tempfile.mkstemp(prefix="nccl-doctor-launch-", suffix=".log")
        os.close(fd)
        return _run_torchrun(argv, base, cfg, stage_dir, log_name, grace_s)
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


def _run_torchrun(argv: list[str], base: dict, cfg: LaunchConfig, stage_dir: Path, log_name: str,
                  grace_s: float) -> LaunchOutcome:
    base.update(cfg.extra_env)
    base[STAGE_DIR_ENV] = str(stage_dir)
    tmp = stage_dir / "tmp"  # torchrun's own torchelastic_* dir (left behind when it is killed) goes with ours
    tmp.mkdir()
    base["TMPDIR"] = str(tmp)
    base[LOG_ENV] = log_name
    base[NOTES_ENV] = json.dumps(list(cfg.notes))
    base.setdefault("OMP_NUM_THREADS", "1")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        base.pop(var, None)
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=base, start_new_session=True, stderr=subprocess.PIPE)
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
        rc = _kill_group(proc, grace_s)
    except BaseException:  # Ctrl-C or SIGTERM: stop the ranks, which live in a session of their own
        ignore_sigterm()  # a second one must not cut the stopping short
        _kill_group(proc, grace_s)
        raise
    finally:
        relay.join(timeout=grace_s)
    if not timed_out:
        phase = torchrun_phase(tmp)  # did it get as far as starting the workers?
    log_path: str | None = log_name
    if rc == 0 and not timed_out:
        Path(log_name).unlink(missing_ok=True)
        log_path = None
    else:
        _show(getattr(sys.stderr, "buffer", sys.stderr), filt.deferred)  # store errors matter in a failed run
        what = "hit the deadline" if timed_out else f"exited with code {rc}"
        print(f"nccl-doctor: the local workers {what}; torchrun's and the workers' stderr: {log_name}",
              file=sys.stderr, flush=True)
    stages = tuple(read_stages(stage_dir))
    return LaunchOutcome(returncode=rc, timed_out=timed_out, elapsed_s=time.monotonic() - start,
                         stages=stages, host=socket.gethostname(), cfg=cfg, log_path=log_path,
                         launcher_error=filt.errors[0] if filt.errors else None, phase=phase)


def torchrun_phase(tmp: Path) -> str | None:
    """How far torchrun got, from the log dir it makes in its TMPDIR (``torchelastic_*``, made once its
    imports are done and its arguments parsed; ``<run id>_*/attempt_N`` once the rendezvous is complete
    and it starts the workers): "starting", "rendezvous" or "workers"; None when it cannot be read."""
    try:
        roots = [p for p in tmp.iterdir() if p.name.startswith("torchelastic_")]
        if not roots:
            return "starting"
        return "workers" if any(next(p.glob("*/attempt_*"), None) for p in roots) else "rendezvous"
    except OSError:
        return None


# torchrun's own noise: its glog-style log lines, and the ChildFailedError traceback and box it prints
# when a worker exits non-zero (or its SignalException traceback when we stop it on Ctrl-C or the deadline).
# Our workers already said what failed; the launcher says where the log is.
_ELASTIC_LINE = re.compile(rb"^\[?[IWEF]\d{4} [\d:. ]+\d+ .*torch/distributed/(elastic|run)")
# c10d's C++ warnings: "[W1130 12:41:53.153939801 socket.cpp:207] [c10d] ..." (a rank's may start "[rank3]:")
_C10D_LINE = re.compile(rb"^(\[rank\d+\]:)?\[[IWEF]\d{4} [\d:.]+ \w+\.cpp:\d+\] ")
# always harmless: the reverse lookup of a peer's address failed (no PTR record); the connection works
_C10D_HARMLESS = (b"The hostname of the client socket cannot be retrieved",)
# a store connection that broke (with a C++ stack dump after it): at shutdown the store's host may exit
# while another node still talks to it, a race that is harmless in a run that passed; shown if it failed
_C10D_BROKEN = re.compile(rb"(recv\w* failed|send\w* failed|should dump\" flag|Connection was likely closed|"
                          rb"Connection reset by peer|Broken pipe)")
_DUMP_LINE = re.compile(rb"^(Exception raised from |frame #\d+: )")
# torchrun's own frames (its main, launcher, agent, rendezvous): a traceback with no other frame is
# torchrun's (a busy rendezvous port, a store it cannot reach); a worker's always has nccl_doctor frames
_TORCHRUN_FRAME = re.compile(rb'^\s+File "[^"]*/torch/distributed/(run\.py|elastic/|launcher/)')
_FROZEN_FRAME = re.compile(rb'^\s+File "<frozen ')
_CHAIN = (b"The above exception was the direct cause of the following exception:",
          b"During handling of the above exception, another exception occurred:")


class StderrFilter:
    """Line by line: True for lines to show. Holds a Python traceback back until its last line says
    whose it is (torchrun's ChildFailedError is dropped with the box after it, its SignalException when
    we stop it, any traceback of torchrun's own code too, its last line kept in ``errors`` for the report;
    a worker's is shown). c10d's harmless warnings are dropped; broken store connections (the shutdown
    race) go to ``deferred``, for the launcher to show only when the run failed. The log keeps it all."""

    def __init__(self):
        self.held: list[bytes] = []
        self.box = 0  # "=====" lines still to swallow after a ChildFailedError
        self.deferred: list[bytes] = []
        self.errors: list[str] = []  # the last line of each torchrun traceback dropped
        self._dump = False  # inside a deferred c10d stack dump
        self._after_drop = False  # blank and "The above exception..." lines between dropped tracebacks

    def feed(self, line: bytes) -> list[bytes]:
        text = line.rstrip(b"\r\n")
        if self.box:
            if text.startswith(b"=" * 20):
                self.box -= 1
            return []
        if self.held:
            self.held.append(line)
            if text[:1] in (b" ", b"\t") or not text:
                return []
            held, self.held = self.held, []
            if b"ChildFailedError" in text:
                self.box = 2
                return []
            if text.startswith(b"torch.distributed.elastic.multiprocessing.api.SignalException"):
                return []
            if _torchrun_traceback(held):
                self.errors.append(text.decode(errors="replace"))
                self._after_drop = True
                return []
            return held
        if self._dump:
            if _DUMP_LINE.match(text) or not text:
                self.deferred.append(line)
                self._dump = bool(text)
                return []
            self._dump = False
        if self._after_drop:
            if not text or text in _CHAIN:
                return []
            self._after_drop = False
        if text.startswith(b"Traceback (most recent call last):"):
            self.held = [line]
            return []
        if _ELASTIC_LINE.match(text) or text.startswith(b"torch.distributed.elastic.multiprocessing.errors"):
            return []
        if _C10D_LINE.match(text):
            if any(h in text for h in _C10D_HARMLESS):
                return []
            if _C10D_BROKEN.search(text):
                self.deferred.append(line)
                self._dump = True
                return []
        return [line]

    @property
    def busy(self) -> bool:
        """A traceback, box or dump is being held back: a partial line must wait for it."""
        return bool(self.held or self.box or self._dump)

    def flush(self) -> list[bytes]:
        held, self.held = self.held, []
        if held and _torchrun_traceback(held):  # cut short (torchrun killed mid-traceback)
            return []
        return held


def _torchrun_traceback(lines: list[bytes]) -> bool:
    """Every frame is torchrun's own (or runpy's), at least one being torch.distributed's launcher."""
    frames = [x for x in lines if x.lstrip().startswith(b'File "')]
    own = [x for x in frames if _TORCHRUN_FRAME.match(x)]
    return bool(own) and all(_TORCHRUN_FRAME.match(x) or _FROZEN_FRAME.match(x) for x in frames)


def relay_stderr(src, dst, log: Path, filt: StderrFilter | None = None) -> None:
    """Copy torchrun's stderr to ``log`` whole, and to ``dst`` without torchrun's own noise. Partial
    lines (a progress bar redrawing with \\r) pass at once."""
    filt = filt or StderrFilter()
    out = getattr(dst, "buffer", dst)
    pending = b""
    with open(log, "ab") as fh:
        while True:
            chunk = os.read(src.fileno(), 65536)
            if not chunk:
                break
            fh.write(chunk)
            fh.flush()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            shown = [x for line in lines for x in filt.feed(line + b"\n")]
            if pending and (b"\r" in pending or b"\x1b" in pending) and not filt.busy:
                shown.append(pending)
                pending = b""
            _show(out, shown)
        _show(out, [x for line in ([pending] if pending else []) for x in filt.feed(line)] + filt.flush())


def _show(out, chunks: list[bytes]) -> None:
    """Write and flush; a closed or broken terminal must not stop the relay (the log still gets it all)."""
    if not chunks:
        return
    try:
        out.write(b"".join(chunks))
        out.flush()
    except (OSError, ValueError):
        pass


def sigterm_as_interrupt():
    """SIGTERM (srun, scancel, a job's time limit) raises KeyboardInterrupt, so ``finally`` blocks stop the
    ranks we started in their own sessions. Returns the old handler (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def ignore_sigterm() -> None:
    """While cleaning up after a SIGTERM: a second one must not interrupt the cleanup (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _kill_group(proc: subprocess.Popen, grace_s: float) -> int:
    return kill_groups([proc], grace_s)[0]


def kill_groups(procs: list[subprocess.Popen], grace_s: float) -> list[int]:
    """Stop each process's group (each started with ``start_new_session``): SIGTERM to all, ``grace_s``
    for them to exit, then SIGKILL to those still running. Returns their exit codes."""
    live = [p for p in procs if p.poll() is None]  # a reaped leader's pid may belong to someone else now
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not live:
            break
        for p in live:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace_s
        for p in live:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        live = [p for p in live if p.poll() is None]
    return [p.wait() for p in procs]


def launch_notes(env: Mapping[str, str]) -> list[str]:
    """The notes the parent passed down (what it set for the user, and why)."""
    try:
        return list(json.loads(env.get(NOTES_ENV, "[]")))
    except ValueError:
        return []
