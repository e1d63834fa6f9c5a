"""``nccl-doctor preflight``: the sbatch gate. Probe, compare, bench, localise, one verdict, never hang.

One *launcher* per node (``srun --ntasks-per-node=1 nccl-doctor preflight``, or plain
``nccl-doctor preflight`` on one machine) does, in order:

1. probe this node (``probe.py``), locally, before anything starts: a wrong ``NCCL_SOCKET_IFNAME``
   fails here, in seconds, with its fix;
2. rendezvous: node 0 hosts a TCPStore; each node posts its probe and facts, then heart-beats. Node 0
   waits (``--rendezvous-timeout``) and names the hosts of the Slurm node list that never arrived;
3. node 0 compares the nodes (``consistency.py``) and says go or stop;
4. each launcher starts its ranks directly (``python -m nccl_doctor preflight --worker``), whose process
   group rides on the same store. Ranks run ``bench`` on the HSDP mesh with NCCL logs captured into a
   private directory, then the node-pair pass (``localize.py``, as in ``bench``), then ``--fsdp-smoke``;
5. node 0 watches every rank's stage, every node's heartbeat, its deadlines; on a failure it names
   the stage and the hosts/ranks that had not arrived (or stopped heart-beating), kills its ranks and
   tells the other nodes the verdict through the store. Every node exits with that code.

torchrun is not used: its rendezvous cannot say *which* hosts did not arrive, and one store gives
heartbeats, stages and the verdict to every node for free. torch is imported only in functions.
"""

from __future__ import annotations

import argparse
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

from nccl_doctor.errors import InputError
from nccl_doctor.outcome import Outcome as CommandOutcome
from nccl_doctor.report import Finding, Report, Severity, Table, Where, exit_code, hosts_text, plural

PREFIX = "nccl-doctor preflight"
WORKER_ENV = "NCCL_DOCTOR_PREFLIGHT_WORKER"
KILL_GRACE_S = 3.0  # between SIGTERM and SIGKILL to our ranks
IMPORTED_AT = time.monotonic()  # this process's own start-up begins about here (a late node was delayed before)
HEARTBEAT_S = 1.0
HEARTBEAT_LOST_S = 6.0  # no heartbeat for this long: the node is gone
STAGE_POLL_S = 1.0
PAIR_SIZE = {"cpu": 4 << 20, "cuda": 256 << 20}
PAIR_ITERS = 3
BENCH_SIZES = {"cpu": (1 << 20, 4 << 20), "cuda": (64 << 20, 256 << 20)}
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0  # NCCL init on thousands of ranks takes 10-30 s
DEFAULT_RENDEZVOUS_TIMEOUT_S = 60.0
RUN_KEY = "nccl-doctor/run"  # node 0 writes its run's identity first: followers check it before writing anything
CLOSED_KEY = "rendezvous/closed"  # node 0 stopped waiting; the value lists the nodes it gave up on
HANDSHAKE_S = 10.0  # a port that accepts but does not answer the store handshake for this long is not our store
OWNER_WAIT_S = 5.0  # for node 0's run key to appear on a store that answered


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to run")
    g.add_argument("--nproc-per-node", type=int, metavar="N",
                   help="ranks per node (default: visible GPUs, else SLURM_GPUS_ON_NODE, else 2 CPU ranks; 2 with --cpu)")
    g.add_argument("--fsdp-smoke", action="store_true",
                   help="also train a tiny model with FSDP2 on the HSDP mesh and round-trip it through DCP")
    g.add_argument("--fsdp-smoke-dir", metavar="DIR",
                   help="with --fsdp-smoke (an error without it): an existing, writable directory for the DCP "
                        "checkpoint; on 2+ nodes one every node sees (default: the current working directory "
                        "on 2+ nodes, the system temp directory on one node)")
    g.add_argument("--cpu", action="store_true", help="use Gloo on CPU even when GPUs are visible")
    d = p.add_argument_group("deadlines (the same options as bench): a run never outlives --timeout")
    d.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"wall-clock limit of the whole run, every stage included (default: {DEFAULT_TIMEOUT_S:.0f})")
    d.add_argument("--collective-timeout", type=float, default=DEFAULT_COLLECTIVE_TIMEOUT_S, metavar="SECONDS",
                   help="limit for init_process_group and for each collective (default: "
                        f"{DEFAULT_COLLECTIVE_TIMEOUT_S:.0f})")
    d.add_argument("--rendezvous-timeout", type=float, default=DEFAULT_RENDEZVOUS_TIMEOUT_S, metavar="SECONDS",
                   help=f"for every node to arrive (default: {DEFAULT_RENDEZVOUS_TIMEOUT_S:.0f})")
    n = p.add_argument_group("rendezvous (derived from SLURM_* under srun)")
    n.add_argument("--port", type=int, metavar="PORT",
                   help="rendezvous port on node 0, 1-65535 (default: MASTER_PORT, else 29500 + (job id + step id) "
                        "%% 1000 under Slurm on 2+ nodes, else a free port; a MASTER_PORT that is not a port is an "
                        "error)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def check_args(args: argparse.Namespace) -> None:
    """Every option, before anything is created or started: one line naming the option, exit 2."""
    from nccl_doctor.cluster import check_port, check_seconds

    for name in ("timeout", "rendezvous_timeout", "collective_timeout"):
        check_seconds(getattr(args, name), f"--{name.replace('_', '-')}")
    if args.nproc_per_node is not None and args.nproc_per_node < 1:
        raise InputError(f"--nproc-per-node must be >= 1 (got {args.nproc_per_node})")
    if args.port is not None:
        check_port(args.port, "--port")
    if args.fsdp_smoke_dir is not None:
        if not args.fsdp_smoke:
            raise InputError("--fsdp-smoke-dir is only used by --fsdp-smoke: add --fsdp-smoke (or drop the directory)")
        check_smoke_dir(args.fsdp_smoke_dir)


def check_smoke_dir(path: str) -> None:
    """DCP writes its checkpoint there: a missing or read-only directory would fail only in the last
    stage, after every rank started, and read as a broken node."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"--fsdp-smoke-dir {path!r}: no such directory")
    if not p.is_dir():
        raise InputError(f"--fsdp-smoke-dir {path!r}: not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise InputError(f"--fsdp-smoke-dir {path!r}: not writable here")


def inputs(args: argparse.Namespace) -> tuple[Path, ...]:
    return ()


def run(args: argparse.Namespace) -> CommandOutcome:
    check_args(args)
    if args.worker or os.environ.get(WORKER_ENV):
        from nccl_doctor.preflight.worker import run_worker

        return CommandOutcome.exit(run_worker(args, os.environ))
    user_log_level = os.environ.get("TORCH_CPP_LOG_LEVEL")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10d's socket warnings would bury the report
    plan = node_plan(args, os.environ)
    launcher = Launcher(args, plan, os.environ)  # the ranks get ERROR (or the user's level)
    if user_log_level is None:  # this process reports its own store failures: no C++ stack dumps from c10d
        os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    try:
        outcome = launcher.run()
    except KeyboardInterrupt:  # (cli says "interrupted"); a store call given up on would abort a normal exit
        if any(t.is_alive() for t in _ABANDONED):
            print(f"{PREFIX}: interrupted", file=sys.stderr)
            _exit_now(130)
        raise
    if outcome.report is None:  # another node holds the full report; say the verdict in one line
        print(f"{PREFIX} ({plan.host}): {outcome.verdict.upper()}: {outcome.summary}", flush=True)
        return CommandOutcome.exit(_exit_now(outcome.code))

    def close(rendered: int) -> int:
        # only now: a follower that exits first may get the whole step killed (srun --kill-on-bad-exit)
        launcher.publish(outcome)
        return _exit_now(outcome.code if outcome.code == 2 else rendered)

    return CommandOutcome.of(outcome.report, after_render=close)


DCP_RECORD = "fsdp-smoke-checkpoint"  # in the log dir: where rank 0 put the smoke test's checkpoint


def _remove_checkpoint(record: Path) -> None:
    """The ``--fsdp-smoke`` checkpoint, when its ranks were killed before they could remove it (it sits on
    the user's shared file system). Only a directory the smoke test made (its prefix) is removed."""
    from nccl_doctor.preflight.fsdp_smoke import DCP_PREFIX

    try:
        path = Path(record.read_text().strip())
    except OSError:
        return
    if path.name.startswith(DCP_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def _exit_now(code: int) -> int:
    """A store connect we gave up on is still blocked in C++: exiting the normal way would tear torch down
    under it (``terminate called without an active exception``). Everything is written: leave at once."""
    if any(t.is_alive() for t in _ABANDONED):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


# --- where this node stands ------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class NodePlan:
    nnodes: int
    node_rank: int
    hosts: tuple[str, ...]
    head: str
    port: int
    nproc: int
    slurm: bool
    host: str
    run_id: str = ""  # what every node of this run shares and no other run does (Slurm: job.step)
    step: str = ""
    nproc_source: str = ""  # why this node starts ``nproc`` ranks (compared across nodes)

    @property
    def is_head(self) -> bool:
        return self.node_rank == 0


def node_plan(args: argparse.Namespace, env: Mapping[str, str]) -> NodePlan:
    """Everything from SLURM_* under srun; one node with 2 CPU ranks (or one per GPU) otherwise."""
    from nccl_doctor.cluster import default_nproc, free_port, one_task_per_node, port_from_env, slurm_launch_config

    host = socket.gethostname()
    slurm = slurm_launch_config(env)
    nproc = args.nproc_per_node or default_nproc(env, slurm, cpu=args.cpu)
    source = nproc_source(args, env, slurm)
    if slurm is None or slurm.nnodes == 1:
        port = args.port or port_from_env(env) or free_port()
        return NodePlan(nnodes=1, node_rank=0, hosts=(host,), head="127.0.0.1", port=port, nproc=nproc,
                        slurm=slurm is not None, host=host, run_id=f"{host}.{os.getpid()}", nproc_source=source)
    if not env.get("SLURM_STEP_ID") or not env.get("SLURM_NODEID"):
        raise InputError(f"this {slurm.nnodes}-node allocation needs one preflight per node: run "
                         "`srun --ntasks-per-node=1 nccl-doctor preflight` (not bare in the batch script)")
    one_task_per_node(slurm, "preflight")
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "0"
    step = env["SLURM_STEP_ID"]
    port = args.port or port_from_env(env) or step_port(job, step)
    return NodePlan(nnodes=slurm.nnodes, node_rank=int(env["SLURM_NODEID"]), hosts=slurm.hosts,
                    head=slurm.rdzv_host, port=port, nproc=nproc, slurm=True, host=host,
                    run_id=f"{job}.{step}", step=step, nproc_source=source)


def step_port(job: str, step: str) -> int:
    """29500 + (job id + step id) % 1000: step 0 keeps the job's usual port, and two preflight steps of one
    job running at once (``srun --overlap``) do not meet on one port."""
    from nccl_doctor.cluster import DEFAULT_PORT

    num = (int(job) if job.isdigit() else 0) + (int(step) if step.isdigit() else 0)
    return DEFAULT_PORT + num % 1000


def nproc_source(args: argparse.Namespace, env: Mapping[str, str], slurm) -> str:
    """Why this node starts the ranks it does, in the words of the fix (compared across nodes)."""
    from nccl_doctor.cluster import visible_gpus

    if args.nproc_per_node:
        return f"--nproc-per-node {args.nproc_per_node}"
    if args.cpu:
        return "--cpu: 2 CPU ranks"
    if gpus := visible_gpus(env):
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        return f"{plural(gpus, 'visible GPU')}" + (f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else "")
    if slurm is not None and slurm.gpus_on_node:
        return f"SLURM_GPUS_ON_NODE={slurm.gpus_on_node}"
    return "no GPU visible: 2 CPU ranks"


# --- what only a multi-node run turns into a failure ---------------------------------------------
RANKS_CODE = "ND408"


def rank_facts(nproc: int, source: str) -> dict[str, str]:
    """Compared across nodes by ``consistency.compare``: the count, and why (for the message and the fix)."""
    return {"ranks.per_node": str(nproc), "ranks.source": source}


def multi_node_findings(findings: list[Finding], node, nnodes: int) -> list[Finding]:
    """On 2+ nodes a Gloo interface that is loopback cannot reach the other nodes: the probe's WARN
    (ND216) becomes a FAIL here, on the node that has it, before any rank starts (NCCL's loopback
    bootstrap, ND206, is a FAIL already)."""
    loop = {n for n in node.gloo.ifaces if (i := node.facts.iface(n)) is not None
            and (i.kind == "loopback" or n == node.facts.loopback)} if node.gloo.rule == "GLOO_SOCKET_IFNAME" else set()
    out = []
    for f in findings:
        if f.code == "ND216" and f.severity is Severity.WARN and f.where.iface in loop:
            f = Finding(code=f.code, severity=Severity.FAIL, where=f.where, evidence=f.evidence, fix=f.fix,
                        message=f"{f.message} (this job spans {nnodes} nodes: Gloo's connections between nodes "
                                "fail)")
        out.append(f)
    return out


# --- findings made here --------------------------------------------------------------------------------
def _finding(code: str, sev: Severity, msg: str, fix: str | None = None, *, host: str | None = None,
             rank: int | None = None, evidence: tuple[str, ...] = ()) -> Finding:
    return Finding(code=code, severity=sev, message=msg, fix=fix, where=Where(host=host, rank=rank),
                   evidence=evidence)


STAGE_FIX = {
    "rendezvous": "start preflight on every node (`srun --ntasks-per-node=1 nccl-doctor preflight`) and check "
                  "that every node reaches the first node's port (firewall, hostname resolution)",
    "init": "check that every node reaches the others on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME "
            "(`nccl-doctor probe` on each) and that firewalls allow the ephemeral ports",
}
# probe findings that explain ranks failing to connect between nodes, by the backend whose interface they are about
EXPLAINS_RANK_FAILURES = {"gloo": {"ND215", "ND216"},
                          "nccl": {"ND201", "ND202", "ND203", "ND204", "ND206", "ND224"}}
# what a rank's error says when it is about connecting (not memory, CUDA or a bug)
CONNECT_WORDS = ("connect", "Connection", "timed out", "Timeout", "timeout", "refused", "unreachable", "socket")
DEFAULT_FIX = ("read the named hosts first: `nccl-doctor probe` there, dmesg, and the NCCL log; drain a host "
               "that fails again (`scontrol update nodename=HOST state=drain reason=preflight`)")


def port_fix(port: int, head: str) -> str:
    return (f"pass a free port on every node: `--port PORT` (or export MASTER_PORT); `ss -ltnp 'sport = :{port}'` "
            f"on {head} shows who holds {port}; run one preflight at a time per allocation")


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return "timed out"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def process_age() -> float | None:
    """Seconds since this process started (its launch: ``exec`` keeps the start time), from /proc."""
    try:
        stat = Path("/proc/self/stat").read_text()
        start = int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return float(Path("/proc/uptime").read_text().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return None


def _accepts(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


_ABANDONED: list[threading.Thread] = []  # connects given up on: the process must not wait for them at exit


def connect_store(host: str, port: int, window: float, *, handshake_s: float = HANDSHAKE_S):
    """A TCPStore client, within ``window`` seconds whatever holds the port: ``(store, error, silent)``.

    First wait (bounded) until the port accepts a plain TCP connection: TCPStore's own retries on a refused
    port outlast its timeout. Then the store handshake runs in a daemon thread: TCPStore waits for its
    answer without a timeout, so a foreign listener that accepts and never answers would hold us for as
    long as it lives. If the handshake has not finished ``handshake_s`` seconds later, ``silent`` is that
    many seconds and the thread is abandoned (``run`` then exits without waiting for it)."""
    from datetime import timedelta

    import torch.distributed as dist

    end = time.monotonic() + window
    while not _accepts(host, port, timeout=min(1.0, max(0.1, end - time.monotonic()))):
        if time.monotonic() >= end:
            return None, None, 0.0
        time.sleep(0.25)
    box: dict = {}

    def connect():
        try:
            box["store"] = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                                         timeout=timedelta(seconds=max(1.0, end - time.monotonic())))
        except Exception as exc:  # noqa: BLE001 - reported by the caller
            box["error"] = exc

    th = threading.Thread(target=connect, daemon=True, name="preflight-connect")
    th.start()
    grace = min(handshake_s, max(2.0, window))
    th.join(grace)
    if th.is_alive():
        _ABANDONED.append(th)
        return None, None, grace
    return box.get("store"), box.get("error"), 0.0


def _expand(hostlists) -> list[str]:
    """Host names from ``Where.host`` values, each one host or a compact list (``n[1-3]``)."""
    import hostlist

    out: list[str] = []
    for text in hostlists:
        try:
            out += hostlist.expand_hostlist(text)
        except hostlist.BadHostlist:
            out.append(text)
    return out


# --- the launcher ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    code: int
    verdict: str
    summary: str
    report: Report | None = None


@dataclass
class RankState:
    seq: int = -1
    stage: str = "not started"
    since: float = field(default_factory=time.monotonic)


NCCL_NEVER_RAN = "the ranks ran Gloo on CPU (no GPU or --cpu), so NCCL never ran and wrote no log"


def nccl_log_summary(log_dir: Path, backend: str, *, host: str) -> dict:
    """Parse one node's captured NCCL_DEBUG=INFO logs: the transport NCCL really used per communicator,
    and the parser's findings; or why there is nothing to parse. JSON-ready (it crosses the store)."""
    from nccl_doctor.logs import diagnose
    from nccl_doctor.logs import parse_paths

    files = sorted(log_dir.glob("*.log"))
    if not files:
        why = (NCCL_NEVER_RAN if backend == "gloo" else f"NCCL wrote no log on {host} (NCCL_DEBUG_FILE not honoured?)")
        return {"host": host, "skipped": why, "findings": []}
    try:
        rep = diagnose(parse_paths(files))
    except Exception as exc:  # noqa: BLE001 - a parser bug must not pass for a lost node or stop the verdict
        return {"host": host, "skipped": f"log parser failed: {exc!r}", "files": len(files), "findings": []}
    comms = [{k: c.get(k) for k in ("id", "nranks", "nnodes", "intra_node", "inter_node")}
             for c in rep.data.get("communicators", [])]
    return {"host": host, "skipped": None, "files": len(files), "inter_node": rep.data.get("inter_node"),
            "intra_node": rep.data.get("intra_node"), "communicators": comms,
            "findings": [f.as_dict() for f in rep.findings]}


def nccl_log_findings(logs: list[dict]) -> list[Finding]:
    """ND001 once per distinct reason a node's logs were not parsed: PASS when Gloo ran on CPU (there is
    no NCCL to check), WARN otherwise (a check that could not run); then every node's parser findings."""
    hosts: dict[str, list[str]] = {}
    for lg in logs:
        if lg.get("skipped"):
            hosts.setdefault(lg["skipped"], []).append(lg["host"])
    out = [_finding("ND001", Severity.PASS if why == NCCL_NEVER_RAN else Severity.WARN,
                    f"NCCL log check skipped: {why}", host=hosts_text(hosts[why]))
           for why in sorted(hosts)]
    return out + [Finding.from_dict(f) for lg in logs for f in lg["findings"]]


def nccl_log_table(logs: list[dict]) -> Table | None:
    """What NCCL really used, per node and communicator (world, the HSDP intra- and inter-node groups)."""
    rows = []
    for lg in logs:
        for c in lg.get("communicators") or []:
            inter = c.get("inter_node") or {}
            gdr = {True: "yes", False: "no"}.get(inter.get("gdr"), "-")
            rows.append((lg["host"], str(c.get("id")), str(c.get("nranks") or "-"), str(c.get("nnodes") or "-"),
                         ", ".join(c.get("intra_node") or []) or "-", inter.get("transport") or "-", gdr))
    if not rows:
        return None
    return Table(title="Transports NCCL used (from its NCCL_DEBUG=INFO logs)",
                 columns=("host", "communicator", "ranks", "nodes", "intra-node", "inter-node", "GDR"),
                 rows=tuple(rows))


class Launcher:
    """One node's side of the run. Node 0 also decides; the others follow its verdict."""

    def __init__(self, args: argparse.Namespace, plan: NodePlan, env: Mapping[str, str]):
        self.args, self.plan, self.env = args, plan, dict(env)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + args.timeout
        self.timings: dict[str, float] = {}
        self.procs: list[subprocess.Popen] = []
        self.store = None
        self.log_dir: Path | None = None  # made in run(), where every exit path removes it
        self.stop_beat = threading.Event()
        self.beat_thread: threading.Thread | None = None
        self.last_beat: float | None = None  # when node 0's store last answered this node's heartbeat
        self.nodes: list[dict] = []  # every node's probe, once all arrived (node 0)
        self.absent: set[int] = set()  # nodes that never arrived or stopped heart-beating: no ack expected
        self.measured_nothing = False  # the ranks ran but measured nothing: the verdict is "could not run"

    def say(self, msg: str) -> None:
        """Progress on stderr (a job log shows it interleaved with the report on stdout)."""
        print(f"{PREFIX} [{self.plan.host} {time.monotonic() - self.t0:5.1f}s] {msg}", file=sys.stderr, flush=True)

    def mark(self, stage: str, since: float) -> None:
        self.timings[stage] = round(time.monotonic() - since, 2)

    def run(self) -> Outcome:
        """Never leaves a rank behind: SIGTERM (srun, scancel, the time limit) stops us like Ctrl-C, and
        ``finally`` stops the ranks, which live in sessions of their own."""
        from nccl_doctor.cluster import ignore_sigterm, private_dir, sigterm_as_interrupt

        old = sigterm_as_interrupt()
        try:
            self.log_dir = private_dir("nccl-logs")  # SIGKILLed runs' dirs: removed by the next run
            return self._run()
        finally:
            if old is not None:  # a second SIGTERM must not cut the cleanup short
                ignore_sigterm()
            try:
                self.stop_beat.set()
                self._kill_workers()
                if self.beat_thread is not None:  # a C++ store call still running at exit aborts the process
                    self.beat_thread.join(2)
                    if self.beat_thread.is_alive():
                        _ABANDONED.append(self.beat_thread)
            finally:
                if self.log_dir is not None:
                    _remove_checkpoint(self.log_dir / DCP_RECORD)
                    shutil.rmtree(self.log_dir, ignore_errors=True)
                if old is not None:
                    signal.signal(signal.SIGTERM, old)

    def _run(self) -> Outcome:
        t = time.monotonic()
        mine = self._probe()
        self.mark("probe", t)
        if mine["fatal"] and self.plan.nnodes == 1:  # nobody to rendezvous with: stop here, no rank started
            return self._probe_stop([mine])
        t = time.monotonic()
        refused = self._open_store(mine) if self.plan.is_head else self._join_store(mine)
        if refused is not None:  # nothing was written to a store that is not this run's
            return refused
        self.store.set(f"node/{self.plan.node_rank}", json.dumps(mine))
        self._start_heartbeat()
        if self.plan.is_head:
            return self._lead(mine, t)
        self._start_watchdog()
        return self._late(mine) or self._follow(mine)

    # --- steps every node takes ----------------------------------------------------------------
    def _probe(self) -> dict:
        from nccl_doctor.node import node_facts
        from nccl_doctor.node import check, probe_node

        node = probe_node("/", self.env)
        findings = check(node)
        if self.plan.nnodes > 1:
            findings = multi_node_findings(findings, node, self.plan.nnodes)
        facts = node_facts(node, self.env, host=self.plan.host)
        facts.update(rank_facts(self.plan.nproc, self.plan.nproc_source))
        fatal = [f for f in findings if f.severity is Severity.FAIL]
        if fatal:
            self.say("probe FAILED: " + "; ".join(f"{f.code} {f.message}" for f in fatal[:3]))
        return {"host": self.plan.host, "node": self.plan.node_rank, "facts": facts,
                "findings": [f.as_dict() for f in findings], "fatal": bool(fatal)}

    def _window(self) -> float:
        return max(1.0, min(self.args.rendezvous_timeout, self.deadline - time.monotonic()))

    def _open_store(self, mine: dict) -> Outcome | None:
        """Node 0: open the store and stamp it with this run's identity before anyone else writes."""
        from datetime import timedelta

        import torch.distributed as dist

        port, head = self.plan.port, self.plan.host
        try:
            self.store = dist.TCPStore(self.plan.head, port, is_master=True, wait_for_workers=False,
                                       timeout=timedelta(seconds=self._window()))
        except Exception as exc:  # noqa: BLE001 - torch raises DistNetworkError/RuntimeError
            text = str(exc)
            if "EADDRINUSE" in text or "address already in use" in text.lower():
                return self._alone(mine, "rendezvous", f"port {port} is already in use on node 0 ({head}): another "
                                   "program or another nccl-doctor run (a second preflight step in this job) holds "
                                   "it", fix=port_fix(port, head), code="ND406", host=head)
            return self._alone(mine, "rendezvous", f"node 0 ({head}) cannot open the rendezvous store on port "
                               f"{port}: {_first_line(exc)}", fix=port_fix(port, head), code="ND406", host=head)
        self.store.set(RUN_KEY, json.dumps({"run": self.plan.run_id, "step": self.plan.step, "host": head}))
        return None

    def _join_store(self, mine: dict) -> Outcome | None:
        """A follower: connect to node 0's store, bounded (TCPStore's own connect blocks for as long as a
        silent listener keeps the connection open), and check it is this run's before writing anything."""
        head, port = self.plan.hosts[0], self.plan.port
        window = self._window()
        age = process_age()  # seconds since this node's launch; less our own start-up: how late it was started
        delay = None if age is None else age - (time.monotonic() - IMPORTED_AT)
        store, error, silent = connect_store(self.plan.head, port, window)
        if silent:
            return self._alone(mine, "rendezvous", f"port {port} on {head} (node 0) accepts connections but is not "
                               f"an nccl-doctor store (no answer to the store handshake in {silent:.0f} s): another "
                               "program holds it", fix=port_fix(port, head), code="ND406", host=head)
        if store is None:
            if delay is not None and delay > self.args.rendezvous_timeout:  # started after node 0's whole window
                return self._late(mine, certain=False)
            why = _first_line(error) if error else "nothing accepted connections on that port"
            return self._alone(mine, "rendezvous", f"cannot reach the rendezvous store on {self.plan.head}:"
                               f"{port} (node 0) within {window:.0f} s: {why}")
        self.store = store
        owner = self._owner(min(OWNER_WAIT_S, window))
        if owner is None:
            return self._alone(mine, "rendezvous", f"port {port} on {head} (node 0) answers as a TCP store but not "
                               "an nccl-doctor run's: another program holds it", fix=port_fix(port, head),
                               code="ND406", host=head)
        if owner.get("run") != self.plan.run_id:
            step = owner.get("step") or "?"
            self.store = None  # not ours: write nothing there, not even the verdict
            return self._alone(mine, "rendezvous", f"port {port} on {head} (node 0) is held by another nccl-doctor "
                               f"run (step {step}; this is step {self.plan.step or '?'}) or another program",
                               fix=port_fix(port, head), code="ND406", host=head)
        return None

    def _owner(self, wait_s: float) -> dict | None:
        """The run identity node 0 stamped on the store (it does so at once), or None: not an nccl-doctor store."""
        end = time.monotonic() + wait_s
        while True:
            try:
                if self.store.check([RUN_KEY]):
                    return json.loads(self.store.get(RUN_KEY).decode())
            except (RuntimeError, OSError, ValueError):
                return None
            if time.monotonic() > end:
                return None
            time.sleep(0.05)

    def _late(self, mine: dict, *, certain: bool = True) -> Outcome | None:
        """This node arrived after node 0 stopped waiting: say so (node 0 decided without it), never blame
        node 0. ``certain``: node 0's store says so; else the store is gone and this node started so long
        ago that node 0's --rendezvous-timeout had passed before it arrived."""
        if certain:
            try:
                closed = self._get(CLOSED_KEY)
            except (RuntimeError, OSError):
                return None
            if closed is None or self.plan.node_rank not in json.loads(closed).get("missing", []):
                return None
        head = self.plan.hosts[0]
        msg = (f"this node ({self.plan.host}) arrived after node 0 stopped waiting (--rendezvous-timeout "
               f"{self.args.rendezvous_timeout:g} s); the run was already decided on {head}")
        out = self._alone(mine, "rendezvous", msg, code="ND405", host=self.plan.host,
                          fix=f"read the report on {head}; start preflight on every node together and find why "
                              f"{self.plan.host} started late (slow file system, busy node), or raise "
                              "--rendezvous-timeout")
        out.report.summary = out.summary = msg
        return out

    def _start_heartbeat(self) -> None:
        """A second connection, opened in the heartbeat thread itself: it never blocks this one."""
        from datetime import timedelta

        import torch.distributed as dist

        key = f"hb/{self.plan.node_rank}"

        def beat():
            try:
                beat_store = dist.TCPStore(self.plan.head, self.plan.port, is_master=False,
                                           timeout=timedelta(seconds=10))
                beat_store.add(key, 1)
                self.last_beat = time.monotonic()
                while not self.stop_beat.wait(HEARTBEAT_S):
                    beat_store.add(key, 1)
                    self.last_beat = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - the main loop notices the head going away too
                if not self.stop_beat.is_set():  # else node 0 may name this node lost (ND407): say why here
                    self.say(f"heartbeat to {self.plan.head}:{self.plan.port} stopped: {_first_line(exc)}")

        self.beat_thread = threading.Thread(target=beat, daemon=True, name="preflight-heartbeat")
        self.beat_thread.start()

    def _start_watchdog(self) -> None:
        """A follower's bound on node 0: a store call blocks in C++ for as long as a frozen, powered-off or
        cut-off node 0 keeps its connection open (TCPStore's timeout bounds waiting for a key, not a read),
        and no Python signal handler runs meanwhile. When node 0's store has not answered the heartbeat for
        ``HEARTBEAT_LOST_S`` + 4 s, or the deadline's backstop passed, stop the ranks and leave."""
        def watch():
            while not self.stop_beat.wait(0.5):
                now, last = time.monotonic(), self.last_beat
                silent = last is not None and now - last > HEARTBEAT_LOST_S + 4
                if silent or now > self.deadline + 20:
                    why = (f"its store has not answered for {now - last:.0f} s" if silent else
                           f"no verdict {self.args.timeout:.0f} s + 20 s after the start")
                    self._abandon(f"lost node 0 ({self.plan.hosts[0]}): {why} (frozen, powered off or cut off?)")

        threading.Thread(target=watch, daemon=True, name="preflight-watchdog").start()

    def _abandon(self, why: str) -> None:
        """Leave now, from a thread, while the main thread is stuck in a store call: ranks stopped, our
        temp dir removed, one line, exit 1."""
        self._kill_workers()
        if self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        print(f"{PREFIX} ({self.plan.host}): FAIL: stopped in stage run: {why}", flush=True)
        sys.stderr.flush()
        os._exit(1)

    def _spawn_workers(self) -> None:
        argv = [sys.executable, "-m", "nccl_doctor", "preflight", "--worker",
                "--timeout", str(self.args.timeout), "--collective-timeout", str(self.args.collective_timeout)]
        if self.args.fsdp_smoke:
            argv.append("--fsdp-smoke")
        if self.args.fsdp_smoke_dir:
            argv += ["--fsdp-smoke-dir", self.args.fsdp_smoke_dir]
        if self.args.cpu:
            argv.append("--cpu")
        nproc, node = self.plan.nproc, self.plan.node_rank
        master = self.plan.head
        gloo_iface = None
        if self.plan.nnodes > 1 and not self.env.get("GLOO_SOCKET_IFNAME"):
            from nccl_doctor.cluster import gloo_iface_to

            gloo_iface = gloo_iface_to(self.plan.head, self.plan.port)
        for local in range(nproc):
            env = dict(self.env)
            env.update({
                WORKER_ENV: "1", "RANK": str(node * nproc + local), "LOCAL_RANK": str(local),
                "WORLD_SIZE": str(self.plan.nnodes * nproc), "LOCAL_WORLD_SIZE": str(nproc),
                "GROUP_RANK": str(node), "NNODES": str(self.plan.nnodes), "MASTER_ADDR": master,
                "MASTER_PORT": str(self.plan.port), "NCCL_DEBUG": "INFO",
                "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET",
                "NCCL_DEBUG_FILE": str(self.log_dir / "%h.%p.log"),
                "NCCL_DOCTOR_FSDP_BASE": self.args.fsdp_smoke_dir or (os.getcwd() if self.plan.nnodes > 1 else ""),
                "NCCL_DOCTOR_DCP_RECORD": str(self.log_dir / DCP_RECORD),
            })
            env.setdefault("OMP_NUM_THREADS", "1")
            env.setdefault("PYTHONWARNINGS", "ignore")
            if gloo_iface:
                env["GLOO_SOCKET_IFNAME"] = gloo_iface
            self.procs.append(subprocess.Popen(argv, env=env, start_new_session=True))

    def _kill_workers(self) -> None:
        """Each rank runs in a session of its own (so a Ctrl-C reaches only us): stop them all, TERM first."""
        from nccl_doctor.cluster import kill_groups

        kill_groups(self.procs, KILL_GRACE_S)

    def _get(self, key: str) -> str | None:
        return self.store.get(key).decode() if self.store.check([key]) else None

    def _nccl_logs(self) -> dict:
        return nccl_log_summary(self.log_dir, self._backend(), host=self.plan.host)

    def _backend(self) -> str:
        from nccl_doctor.cluster import visible_gpus

        return "gloo" if self.args.cpu or not visible_gpus(self.env) else "nccl"

    # --- a follower ----------------------------------------------------------------------------
    def _follow(self, mine: dict) -> Outcome:
        """Start the ranks on node 0's go, send this node's NCCL log summary when asked, return its verdict.
        Only a failing store call means node 0 is gone; any other error is ours and raised as such."""
        started = sent_logs = False
        while True:
            try:
                verdict = self._get("verdict")
                go = not started and verdict is None and self._get("go") is not None
                logs_wanted = (started and not sent_logs and self._workers_done()
                               and self._get("logs/wanted") is not None)
            except (RuntimeError, OSError) as exc:  # torch's store errors are RuntimeErrors
                return self._lost_head(mine, exc)
            if verdict is not None:
                v = json.loads(verdict)
                try:
                    self.store.add("acks", 1)
                except (RuntimeError, OSError):
                    pass  # node 0 left already: we have its verdict
                if not started and (late := self._late(mine)):  # posted just after node 0 stopped waiting
                    return late
                return Outcome(code=v["code"], verdict=v["verdict"], summary=v["summary"] + f" (report on "
                               f"{self.plan.hosts[0]})")
            if go:
                self._spawn_workers()
                started = True
            if logs_wanted:
                summary = json.dumps(self._nccl_logs())
                try:
                    self.store.set(f"logs/{self.plan.node_rank}", summary)
                except (RuntimeError, OSError) as exc:
                    return self._lost_head(mine, exc)
                sent_logs = True
            if time.monotonic() > self.deadline + 15:  # node 0 enforces the deadline; this is the backstop
                return self._alone(mine, "verdict", f"node 0 ({self.plan.hosts[0]}) gave no verdict within "
                                   f"the {self.args.timeout:.0f} s deadline")
            time.sleep(0.2)

    def _lost_head(self, mine: dict, exc: Exception) -> Outcome:
        return self._alone(mine, "run", f"lost node 0 ({self.plan.hosts[0]}), which holds the rendezvous store: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")

    def _workers_done(self) -> bool:
        return all(p.poll() is not None for p in self.procs)

    def _alone(self, mine: dict, stage: str, why: str, *, fix: str | None = None, code: str | None = None,
               host: str | None = None) -> Outcome:
        """This node cannot reach the others: report what it knows itself, naming node 0 (or ``host``)."""
        report = Report(command="preflight")
        report.extend(Finding.from_dict(f) for f in mine["findings"] if f["severity"] != "pass")
        report.add(_finding(code or ("ND407" if stage != "rendezvous" else "ND405"), Severity.FAIL,
                            f"stage {stage}: {why}", fix or STAGE_FIX.get(stage, DEFAULT_FIX),
                            host=host or (self.plan.hosts[0] if self.plan.nnodes > 1 else self.plan.host)))
        report.summary = f"stopped in stage {stage}: {why}"
        report.data = {"stage": stage, "nodes": [mine["host"]], "timings_s": self.timings,
                       "localisation": {"skipped": f"this node stopped in stage {stage}"}}
        return Outcome(code=1, verdict="fail", summary=report.summary, report=report)

    # --- node 0 ---------------------------------------------------------------------------------
    def _lead(self, mine: dict, t_rdzv: float) -> Outcome:
        nodes = self._gather_nodes()
        self.mark("rendezvous", t_rdzv)
        report = Report(command="preflight")
        data = report.data
        data.update({"nnodes": self.plan.nnodes, "nproc_per_node": self.plan.nproc,
                     "hosts": list(self.plan.hosts)})
        missing = [self.plan.hosts[i] for i, n in enumerate(nodes) if n is None]
        self.absent |= {i for i, n in enumerate(nodes) if n is None}
        if missing:
            self.say(f"rendezvous: {plural(len(missing), 'node')} never arrived: {hosts_text(missing)}")
            report.add(_finding("ND405", Severity.FAIL,
                                f"stage rendezvous: {len(missing)} of {self.plan.nnodes} nodes did not arrive "
                                f"within {self.args.rendezvous_timeout:.0f} s: {hosts_text(missing)}",
                                STAGE_FIX["rendezvous"], host=hosts_text(missing)))
            return self._decide(report, "rendezvous")
        if self.plan.nnodes > 1:
            self.say(f"rendezvous: all {self.plan.nnodes} nodes arrived in {self.timings['rendezvous']} s")
        t = time.monotonic()
        self._add_probe_findings(report, nodes)
        from nccl_doctor.node import compare

        diffs = compare([n["facts"] for n in nodes])
        report.extend(diffs)
        if self.plan.nnodes > 1 and not diffs:
            report.add(_finding("ND401", Severity.PASS, f"versions, NCCL/Gloo settings, NICs and net plugin "
                                f"agree on all {self.plan.nnodes} nodes"))
        data["node_facts"] = [n["facts"] for n in nodes]
        self.nodes = nodes
        self.mark("consistency", t)
        if any(n["fatal"] for n in nodes):
            return self._probe_stop(nodes, report)
        uneven = [f for f in diffs if f.code == RANKS_CODE]
        if uneven:  # the ranks' numbering assumes one count everywhere: they would collide, not fail cleanly
            report.notes.append(f"no rank was started: the nodes would start different numbers of ranks "
                                f"(odd: {uneven[0].where.host})")
            self.say(f"consistency FAILED: {uneven[0].message}")
            return self._decide(report, "consistency")
        self.store.set("go", "1")
        self.say(f"starting {plural(self.plan.nproc, 'rank')} per node")
        self._spawn_workers()
        return self._watch(report)

    def _probe_stop(self, nodes: list[dict], report: Report | None = None) -> Outcome:
        """The probe failed somewhere: report it, start no rank."""
        if report is None:  # one node: no rendezvous and no comparison took place
            report = Report(command="preflight")
            report.data.update({"nnodes": self.plan.nnodes, "nproc_per_node": self.plan.nproc,
                                "hosts": list(self.plan.hosts), "node_facts": [n["facts"] for n in nodes]})
            self._add_probe_findings(report, nodes)
        fatal = [n["host"] for n in nodes if n["fatal"]]
        report.notes.append(f"no rank was started: the probe failed on {hosts_text(fatal)}")
        return self._decide(report, "probe")

    def _gather_nodes(self) -> list[dict | None]:
        end = min(self.deadline, time.monotonic() + self.args.rendezvous_timeout)
        keys = [f"node/{i}" for i in range(self.plan.nnodes)]
        while time.monotonic() < end and not self.store.check(keys):
            time.sleep(0.1)
        nodes = [json.loads(self._get(k)) if self.store.check([k]) else None for k in keys]
        missing = [i for i, n in enumerate(nodes) if n is None]
        if missing:  # a node arriving from now on learns that it came too late (and is not blamed on us)
            self.store.set(CLOSED_KEY, json.dumps({"missing": missing, "host": self.plan.host}))
        return nodes

    def _add_probe_findings(self, report: Report, nodes: list[dict]) -> None:
        """Each node's WARN/FAIL probe findings; a PASS line per node would only bury them."""
        for n in nodes:
            bad = [Finding.from_dict(f) for f in n["findings"] if f["severity"] != "pass"]
            report.extend(bad)
        summaries = [Finding.from_dict(f) for n in nodes for f in n["findings"] if f["code"] == "ND200"]
        report.extend(summaries[:1])

    def _watch(self, report: Report) -> Outcome:
        """Follow every rank until the result, a failure, a lost node or a deadline."""
        world = self.plan.nnodes * self.plan.nproc
        states = [RankState() for _ in range(world)]
        beats = {i: (-1, time.monotonic()) for i in range(self.plan.nnodes)}
        t_run = last_stages = time.monotonic()
        while True:
            now = time.monotonic()
            result = self._get("result")
            if result is not None:
                self.mark("run", t_run)
                return self._finish(report, json.loads(result), beats)
            errors = self._errors(world) if self.store.add("errors", 0) else {}
            if now - last_stages > STAGE_POLL_S:  # 2 store ops per rank: not every tick at 1,000 nodes
                self._update_stages(states)
                last_stages = now
            lost = self._lost_nodes(beats)
            local_dead = [i for i, p in enumerate(self.procs) if p.poll() not in (None, 0)]
            if errors or lost or local_dead:
                time.sleep(min(2.0, max(0.0, self.deadline - time.monotonic())))  # let the other ranks report
                errors = self._errors(world)
                self._update_stages(states)
                lost = lost or self._lost_nodes(beats, settle=True)
                return self._fail(report, states, errors, lost, local_dead)
            stuck = self._stuck(states, now)
            if stuck or now > self.deadline:
                return self._fail(report, states, {}, [], [], timeout=stuck or "total")
            time.sleep(0.2)

    def _errors(self, world: int) -> dict[int, dict]:
        """rank -> {"stage", "error"} for every rank that reported a failure."""
        return {r: json.loads(v) for r in range(world) if (v := self._get(f"error/{r}")) is not None}

    def _update_stages(self, states: list[RankState]) -> None:
        for r, st in enumerate(states):
            v = self._get(f"stage/{r}")
            if v is None:
                continue
            seq, _, name = v.partition("|")
            if int(seq) != st.seq:
                st.seq, st.stage, st.since = int(seq), name, time.monotonic()

    def _lost_nodes(self, beats: dict, settle: bool = False) -> list[int]:
        """Nodes whose heartbeat counter has not moved for HEARTBEAT_LOST_S."""
        if settle:  # on a failure, give a dead node's heartbeat time to go stale
            end = time.monotonic() + HEARTBEAT_LOST_S
            while time.monotonic() < min(end, self.deadline):
                if self._lost_nodes(beats):
                    break
                time.sleep(0.5)
        now, lost = time.monotonic(), []
        for i, (count, seen) in beats.items():
            c = self.store.add(f"hb/{i}", 0)
            if c != count:
                beats[i] = (c, now)
            elif now - seen > HEARTBEAT_LOST_S:
                lost.append(i)
        return lost

    def _limit(self, stage: str) -> float:
        if stage in ("not started", "init"):
            return self.args.collective_timeout + 10
        return self.args.collective_timeout * (3 if stage.startswith("bench") else 1) + 10

    def _stuck(self, states: list[RankState], now: float) -> str | None:
        """The stage some rank has sat in past its deadline (the PG timeout should have fired first)."""
        for st in states:
            if st.stage != "done" and now - st.since > self._limit(st.stage):
                return st.stage
        return None

    def _who(self, rank: int) -> str:
        return self.plan.hosts[rank // self.plan.nproc]

    def _fail(self, report: Report, states: list[RankState], errors: dict, lost: list[int],
              local_dead: list[int], timeout: str | None = None) -> Outcome:
        ahead = max(st.seq for st in states)
        stage = (next((e["stage"] for e in errors.values()), None) or
                 next((st.stage for st in states if st.seq == ahead), "init"))
        behind = [r for r, st in enumerate(states) if st.seq < ahead or st.seq < 0]
        behind_txt = ", ".join(f"rank {r} ({self._who(r)}: {states[r].stage})" for r in behind)
        ev = tuple(f"rank {r} ({self._who(r)}): {e['error'].splitlines()[0] if e['error'] else '?'}"
                   for r, e in sorted(errors.items()))
        if lost:
            self.absent |= set(lost)
            hosts = hosts_text(self.plan.hosts[i] for i in lost)
            report.add(_finding("ND407", Severity.FAIL,
                                f"{'node' if len(lost) == 1 else 'nodes'} {hosts} stopped responding "
                                f"during stage {stage} (no heartbeat "
                                f"for {HEARTBEAT_LOST_S:.0f} s; their ranks never finished)"
                                + (f"; ranks behind: {behind_txt}" if behind_txt else ""),
                                f"check {hosts} (crashed, rebooted, OOM-killed or cut off): dmesg, "
                                "`scontrol show node`, and drain it before the job", host=hosts,
                                evidence=ev))
        elif timeout:
            cause, hosts, fix = self._explained_by(report)
            report.add(_finding("ND406", Severity.FAIL,
                                f"stage {timeout} passed its deadline"
                                + (f" ({self.args.timeout:.0f} s total)" if timeout == "total" else "")
                                + f"; ranks that had not arrived: {behind_txt or 'none (all waiting in it)'}" + cause,
                                fix or STAGE_FIX.get(timeout.split()[0], DEFAULT_FIX),
                                host=hosts or hosts_text(self._who(r) for r in behind) or None))
        else:
            first = min(errors) if errors else None
            where = self._who(first) if first is not None else self.plan.host
            why = (errors[first]["error"].splitlines()[0] if first is not None and errors[first]["error"]
                   else f"local {'rank' if len(local_dead) == 1 else 'ranks'} {local_dead} exited")
            cause, hosts, fix = self._explained_by(report, why)
            report.add(_finding("ND406", Severity.FAIL,
                                f"stage {stage} failed on rank {first} ({where}): {why}"
                                + (f"; ranks that had not arrived: {behind_txt}" if behind_txt else "") + cause,
                                fix or STAGE_FIX.get(stage.split()[0], DEFAULT_FIX), host=hosts or where,
                                rank=first, evidence=ev))
        report.data["stage"] = stage
        report.data["ranks"] = [{"rank": r, "host": self._who(r), "stage": st.stage} for r, st in enumerate(states)]
        self.say(f"FAILED in stage {stage}")
        return self._decide(report, stage)

    def _explained_by(self, report: Report, error: str = "timed out") -> tuple[str, str, str | None]:
        """When ranks fail to connect across nodes, the first rank to report is often a healthy node's (the
        one that waited for the broken peer). A node's own probe finding about the interface this backend
        uses (or that setting differing between nodes) names the node to look at: ``(text to add, its hosts,
        its fix)``. Empty on one node, for errors that are not about connecting (memory, CUDA), or when no
        finding explains it."""
        backend = self._backend()
        var = "GLOO_SOCKET_IFNAME" if backend == "gloo" else "NCCL_SOCKET_IFNAME"
        if self.plan.nnodes < 2 or not any(w in error for w in CONNECT_WORDS):
            return "", "", None
        why = [f for f in report.findings if f.severity is not Severity.PASS and f.where.host and (
               f.code in EXPLAINS_RANK_FAILURES[backend] or (f.code == "ND402" and var in f.message))]
        if not why:
            return "", "", None
        hosts = hosts_text(_expand(f.where.host for f in why))
        return (f"; what explains it: {why[0].code} on {why[0].where.host}: {why[0].message}", hosts,
                f"look at {hosts} first: {why[0].fix or DEFAULT_FIX}")

    def _finish(self, report: Report, result: dict, beats: dict) -> Outcome:
        """Merge rank 0's results, each node's parsed NCCL logs, then decide. A node whose launcher died
        after its ranks finished sends no logs: its lost heartbeat fails the run (its ranks passed, but
        it would not have started the training either), and nobody waits for it."""
        report.extend(Finding.from_dict(f) for f in result["findings"])
        report.tables.extend(Table.from_dict(t) for t in result["tables"])
        report.notes.extend(result.get("notes", []))
        report.data.update(result["data"])
        self.timings.update(result.get("timings_s", {}))
        self.measured_nothing = not result.get("measured", True)
        t = time.monotonic()
        self.store.set("logs/wanted", "1")
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, min(10, self.deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
        logs = [self._nccl_logs()]
        end = min(self.deadline, time.monotonic() + 15)
        lost: set[int] = set()
        checked = 0.0
        for i in range(1, self.plan.nnodes):
            while time.monotonic() < end and not self.store.check([f"logs/{i}"]) and i not in lost:
                if time.monotonic() - checked > 1:
                    lost.update(self._lost_nodes(beats))
                    checked = time.monotonic()
                time.sleep(0.1)
            v = self._get(f"logs/{i}")
            logs.append(json.loads(v) if v else {"host": self.plan.hosts[i], "findings": [],
                                                 "skipped": f"{self.plan.hosts[i]} sent no NCCL log summary"})
        if lost:
            self.absent |= lost
            hosts = hosts_text(self.plan.hosts[i] for i in sorted(lost))
            report.add(_finding("ND407", Severity.FAIL, f"{'node' if len(lost) == 1 else 'nodes'} {hosts} stopped "
                                f"responding after the measurements (no heartbeat for {HEARTBEAT_LOST_S:.0f} s): "
                                "its nccl-doctor launcher died or was stopped", f"check {hosts}: dmesg, "
                                "`scontrol show node`, and drain it before the job", host=hosts))
        report.extend(nccl_log_findings(logs))
        report.data["nccl_logs"] = logs
        table = nccl_log_table(logs)
        if table:
            report.tables.append(table)
        self.mark("nccl-logs", t)
        return self._decide(report, "nccl-logs" if lost else "done")

    def _decide(self, report: Report, stage: str) -> Outcome:
        """Publish the verdict to every node, wait (briefly) for them to read it, return ours."""
        self.timings["total"] = round(time.monotonic() - self.t0, 2)
        report.data["timings_s"] = dict(self.timings)
        report.data.setdefault("stage", stage)
        report.data.setdefault("localisation", {"skipped": f"the run stopped in stage {stage}"})
        shape = f"{plural(self.plan.nnodes, 'node')} x {plural(self.plan.nproc, 'rank')}"
        if not report.summary:
            fails = _expand(f.where.host for f in report.findings if f.severity is Severity.FAIL and f.where.host)
            if report.verdict is Severity.FAIL:
                report.summary = f"stopped in stage {stage}" + (f"; look at {hosts_text(fails)}" if fails else "")
            elif self.measured_nothing:
                report.summary = f"{shape}: nothing was measured (ND001); not a go"
            elif self.plan.nnodes == 1:
                report.summary = (f"{shape}: this node checks out; inter-node links not tested (run under Slurm "
                                  "on 2+ nodes)")
            else:
                report.summary = f"{shape} fit for multi-node training"
        if self.measured_nothing:  # could not run: a gate must not pass on no measurement
            report.could_not_run = "nothing was measured"
        code = exit_code(report, strict=self.args.strict)
        return Outcome(code=code, verdict=report.verdict.value, summary=report.summary, report=report)

    def publish(self, outcome: Outcome) -> None:
        """Node 0: tell every node the verdict, and wait (briefly) until they have read it."""
        if not self.plan.is_head or self.store is None:
            return
        try:
            self.store.set("verdict", json.dumps({"code": outcome.code, "verdict": outcome.verdict,
                                                   "summary": outcome.summary}))
            end = time.monotonic() + 5
            while time.monotonic() < end and self.store.add("acks", 0) < self._alive_followers():
                time.sleep(0.1)
        except Exception:  # noqa: BLE001 - followers fall back to their own report
            pass

    def _alive_followers(self) -> int:
        return self.plan.nnodes - 1 - len(self.absent - {0})
