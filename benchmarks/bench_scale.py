"""Preflight at scale: the real node 0 against simulated followers, on one machine.

Node 0 is preflight's own code (``command.post_and_run``, ``Head``, ``Launcher``, its TCPStore and heartbeat,
the consistency check, the stage watch, the verdict and the report), run in a process of its own so that
its CPU (the store server's thread included) is measured alone. Only its ranks are simulated: a thread
writes their stage files and rank 0's result, as the real ranks do. The other N-1 nodes are simulated by a
few processes (``--procs``), each holding one store connection per node and doing, on the real follower's
timers, what a real follower does (``follower.py``, ``heartbeat.py``): post a probe cloned from node 0's
real one (its host name replaced), beat every second, poll for node 0's go and verdict, relay its ranks'
stages, send its NCCL log summary when asked, ack the verdict. Every value is sealed with a secret, as with
``NCCL_DOCTOR_SECRET``.

Scenarios (``--scenario``, repeatable; default all): ``healthy``; ``silent`` (nodes that never arrive);
``inconsistent`` (nodes with another torch build, and late nodes that arrive within the window);
``lost`` (nodes that stop beating during the run); ``slow`` (nodes whose ranks stop advancing). Each
prints one JSON line: nodes, ranks, rendezvous_s (node 0's gather after the last node posted),
consistency_s, watch_cpu_s_per_min (node 0's CPU per minute of watching), verdict_s (from the result or
the fault to the verdict), store_connections (node 0's established connections while watching),
report_bytes (JSON), report_lines (text), named_exactly_faulty (the hosts named by the verdict's findings
are the faulty ones, no other), and more.

    .venv/bin/python benchmarks/bench_scale.py --nodes 1024 --ranks-per-node 8
    .venv/bin/python benchmarks/bench_scale.py --nodes 64 --ranks-per-node 8 --scenario lost --watch-s 10

What it does not simulate: the ranks' own process group (each rank's store connection and NCCL's
bootstrap) and the bench itself; ``docs/scale.md`` says what those cost.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import secrets
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_doctor import report as reports  # noqa: E402
from nccl_doctor.bench import Backend  # noqa: E402
from nccl_doctor.cluster.net import free_port  # noqa: E402
from nccl_doctor.preflight import head as heads  # noqa: E402
from nccl_doctor.preflight import protocol as proto  # noqa: E402
from nccl_doctor.preflight.auth import SECRET_ENV, Seal, secret_from_env  # noqa: E402
from nccl_doctor.preflight.follower import RUNNING_POLL_S  # noqa: E402
from nccl_doctor.preflight.heartbeat import HEARTBEAT_S  # noqa: E402
from nccl_doctor.preflight.nccllogs import nccl_log_summary  # noqa: E402
from nccl_doctor.preflight.store import Store  # noqa: E402

SCENARIOS = ("healthy", "silent", "inconsistent", "lost", "slow")
FAULTS_PER_KIND = 2
LATE = 8  # inconsistent: this many healthy nodes arrive LATE_S after the others
LATE_S = 5.0
LOST_AFTER_S = 4.0  # lost: the nodes fall silent this long after the go
SLOW_STAGE = 2  # slow: the nodes' ranks stop at this stage of the schedule
TICK_S = 0.2  # a real follower's loop (follower.FOLLOW_TICK_S); RUNNING_POLL_S while its ranks run
RELAY_S = 0.5  # follower.STAGE_RELAY_S
SCHEDULE = ("init", "bench all_gather intra 64 MiB", "bench all_gather inter 64 MiB",
            "bench reduce_scatter inter 64 MiB", "bench all_reduce inter 64 MiB", "node-pairs round 1")
TCP_ESTABLISHED = "01"
OTHER_TORCH = "+simulated.other.build"
NETNS_ENV = "NCCL_DOCTOR_SCALE_NETNS"  # set once the benchmark runs in its own network namespace
NETNS_SETUP = ("mount -t sysfs sysfs /sys && ip link set lo up && ip link add eth1 type veth peer name eth1-peer && "
               "ip addr add 198.18.0.1/24 dev eth1 && ip link set eth1 up && ip link set eth1-peer up")
LEAVE_AFTER_S = 60.0  # past the run's timeout, a follower process gives up on node 0


def host_name(i: int, width: int) -> str:
    return f"sim{i:0{width}d}"


@dataclass
class Faults:
    """Which simulated nodes misbehave, and how (node 0 is never faulty: it is the real one)."""

    silent: list[int] = field(default_factory=list)
    late: list[int] = field(default_factory=list)
    inconsistent: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    slow: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, scenario: str, nodes: int, seed: int) -> Faults:
        rng = random.Random(seed)
        picks = rng.sample(range(1, nodes), min(nodes - 1, FAULTS_PER_KIND + LATE))
        bad, late = picks[:FAULTS_PER_KIND], picks[FAULTS_PER_KIND:]
        if scenario == "healthy":
            return cls()
        if scenario == "inconsistent":
            return cls(inconsistent=bad, late=late)
        return cls(**{scenario: bad})

    def faulty(self) -> set[int]:
        """The nodes the verdict must name."""
        return set(self.silent) | set(self.inconsistent) | set(self.lost) | set(self.slow)


# --- node 0 -----------------------------------------------------------------------------------------
def run_head(args: argparse.Namespace) -> dict[str, Any]:
    """The real node 0 (its ranks simulated); returns what it measured."""
    from nccl_doctor.cli import parse_options
    from nccl_doctor.preflight.command import post_and_run
    from nccl_doctor.preflight.launcher import Launcher, Ranks
    from nccl_doctor.preflight.plan import NodePlan
    from nccl_doctor.render import make_console, render_json, render_text

    faults = Faults(**json.loads(args.faults))
    width = len(str(args.nodes - 1))
    hosts = tuple(host_name(i, width) for i in range(args.nodes))
    plan = NodePlan(nnodes=args.nodes, node_rank=0, hosts=hosts, head="127.0.0.1", port=args.port,
                    nproc=args.ranks_per_node, slurm=True, host=hosts[0], run_id=args.run, step="0",
                    nproc_source="--nproc-per-node", launcher="Slurm")
    _, pargs = parse_options(["preflight", "--cpu", "--timeout", str(args.timeout), "--rendezvous-timeout",
                              str(args.rendezvous_s), "--collective-timeout", str(args.collective_timeout)])
    heads.bind_address = lambda head, nnodes: "127.0.0.1"  # the simulation never listens beyond loopback
    out: dict[str, Any] = {}

    class SimHead(heads.Head):
        def gather_nodes(self) -> list[proto.NodePost | None]:
            nodes = super().gather_nodes()
            out["gathered_at"] = time.monotonic()
            return nodes

        def watch(self, report: reports.Report) -> Any:
            t, cpu = time.monotonic(), time.process_time()
            try:
                return super().watch(report)
            finally:
                wall = time.monotonic() - t
                out["watch_s"] = round(wall, 2)
                out["watch_cpu_s_per_min"] = round((time.process_time() - cpu) / wall * 60, 2)

    class SimRanks(Ranks):
        def spawn_workers(self) -> None:
            out["go_at"] = time.monotonic()
            threading.Thread(target=simulated_ranks, args=(self.state, args, out), daemon=True).start()

    launcher = Launcher(pargs, plan, os.environ)
    launcher.ranks = SimRanks(launcher.state)
    t0 = time.monotonic()
    with launcher.running():
        mine = launcher.probe()
        out["probe_bytes"] = len(mine.to_json())
        head = SimHead(launcher)
        refused = head.open_store(mine)
        t = time.monotonic()
        verdict = refused or post_and_run(launcher, mine, lambda: head.run(mine, t))
    out["verdict_at"] = time.monotonic()
    report = verdict.report
    text = io.StringIO()
    if report is not None:
        render_text(report, make_console(text, width=args.width))
    js = render_json(report) if report is not None else ""
    launcher.publish(verdict)
    out.update(verdict=verdict.verdict, summary=verdict.summary[:300], elapsed_s=round(time.monotonic() - t0, 2),
               consistency_s=launcher.state.timings.get("consistency"), report_bytes=len(js),
               report_lines=len(text.getvalue().splitlines()),
               longest_line=max((len(x) for x in text.getvalue().splitlines()), default=0),
               named=sorted(named_hosts(json.loads(js)) if js else []), faulty=sorted(faults.faulty()))
    if args.report_dir:
        Path(args.report_dir, "report.txt").write_text(text.getvalue())
        Path(args.report_dir, "report.json").write_text(js)
    return out


def simulated_ranks(launcher: Any, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Node 0's ranks: stage files on the schedule, then rank 0's result on its own store connection
    (``launcher``: node 0's ``NodeState``, with its log dir, plan, heartbeat and seal)."""
    from nccl_doctor.preflight.store import client

    log_dir, last = launcher.log_dir, reached(Faults(**json.loads(args.faults)))
    step = args.watch_s / len(SCHEDULE)
    for seq, name in enumerate(SCHEDULE[:last + 1]):
        for local in range(launcher.plan.nproc):
            proto.record_stage(str(log_dir / proto.STAGE_RECORD), local, proto.StageMark(seq, name))
        if launcher.heartbeat is not None and launcher.heartbeat.stop.wait(step):
            return
        if seq == 1:
            out["store_connections"] = store_connections(args.port)
    if last < len(SCHEDULE):  # waiting for the slow nodes, for ever: node 0 must find who is behind
        return
    for local in range(launcher.plan.nproc):
        proto.record_stage(str(log_dir / proto.STAGE_RECORD), local, proto.StageMark(len(SCHEDULE), "done"))
    rank0 = client("127.0.0.1", args.port, 30.0, launcher.seal)
    result = proto.RankResult(findings=[], tables=[], notes=[], data={"backend": "gloo"}, timings_s={})
    out["result_at"] = time.monotonic()
    rank0.set(proto.RESULT_KEY, result.to_json())


def reached(faults: Faults) -> int:
    """The last stage the healthy ranks reach: with slow nodes, the one after theirs, whose collective
    waits for them (no result ever comes: node 0 must find who is behind); else all of them."""
    return SLOW_STAGE + 1 if faults.slow else len(SCHEDULE)


def store_connections(port: int) -> int:
    """Established TCP connections whose local end is the store's port (the server's side)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            if state == TCP_ESTABLISHED and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def named_hosts(doc: dict[str, Any]) -> set[str]:
    """Hosts named by the report's WARN and FAIL findings, hostlists expanded."""
    return {name for f in doc.get("findings", []) if f.get("severity") in ("warn", "fail") and f["where"].get("host")
            for name in reports.host_names(f["where"]["host"])}


# --- the simulated followers ----------------------------------------------------------------------
@dataclass
class SimNode:
    """One simulated follower: its connection and where it is in the protocol."""

    index: int
    host: str
    store: Store | None = None
    beats: int = 0
    next_beat: float = 0.0
    started: bool = False
    relayed: int = -1
    last_relay: float = 0.0
    polled: float = 0.0
    sent_logs: bool = False
    done: bool = False


class Followers:
    """Nodes ``first``..``last - 1``, each on its own connection, all driven from one thread, on the real
    follower's timers (beat every second, loop every 0.2 s, relay every 0.5 s)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.faults = Faults(**json.loads(args.faults))
        self.seal = Seal(secret_from_env(os.environ), args.run)
        self.width = len(str(args.nodes - 1))
        self.nodes = [SimNode(i, host_name(i, self.width)) for i in range(args.first, args.last)
                      if i not in self.faults.silent]
        self.go_at: float | None = None
        self.stats: dict[str, Any] = {"posted_at": 0.0, "lost_at": 0.0, "slow_at": 0.0, "acked": 0, "lag_s": 0.0}
        self.template = ""

    def connect(self, node: SimNode) -> None:
        from nccl_doctor.preflight.store import client

        node.store = client("127.0.0.1", self.args.port, self.args.rendezvous_s, self.seal)
        if node.store.get(proto.RUN_KEY) is None:
            raise RuntimeError("no run stamp")
        post = self.template.replace(json.dumps(host_name(0, self.width)), json.dumps(node.host))
        doc = json.loads(post)
        doc["node"] = node.index
        if node.index in self.faults.inconsistent:
            doc["facts"]["version.torch"] = doc["facts"].get("version.torch", "?") + OTHER_TORCH
        node.store.set(proto.node_key(node.index), json.dumps(doc))
        node.next_beat = time.monotonic()
        self.stats["posted_at"] = max(self.stats["posted_at"], time.monotonic())

    def run(self) -> dict[str, Any]:
        from nccl_doctor.preflight.store import client

        first = client("127.0.0.1", self.args.port, self.args.rendezvous_s, self.seal)
        while not first.has(proto.node_key(0)):
            time.sleep(0.05)
        self.template = first.get(proto.node_key(0)) or ""
        del first
        t_start = time.monotonic()
        end = t_start + self.args.timeout + LEAVE_AFTER_S
        for node in self.nodes:
            if node.index not in self.faults.late:
                self.connect(node)
        while not all(n.done for n in self.nodes) and time.monotonic() < end:
            tick = time.monotonic()
            for node in self.nodes:
                if node.store is None and tick - t_start > LATE_S:
                    self.connect(node)
                if node.store is not None and not node.done:
                    self.step(node, tick)
            self.stats["lag_s"] = max(self.stats["lag_s"], time.monotonic() - tick - TICK_S)
            time.sleep(max(0.0, TICK_S - (time.monotonic() - tick)))
        return self.stats

    def step(self, node: SimNode, now: float) -> None:
        """One loop of a real follower (and its heartbeat thread, when a beat is due)."""
        store = node.store
        assert store is not None
        since_go = now - self.go_at if self.go_at is not None else 0.0
        if node.index in self.faults.lost and node.started and since_go > LOST_AFTER_S:
            self.stats["lost_at"] = max(self.stats["lost_at"], now)
            node.done = True  # powered off: nothing more from it, its connection left open until we exit
            return
        if now >= node.next_beat:
            node.beats += 1
            store.set(proto.heartbeat_key(node.index), str(node.beats))
            store.has(proto.heartbeat_key(node.index))
            node.next_beat += HEARTBEAT_S
        running = node.started and since_go <= self.args.watch_s
        if running and now - node.polled < RUNNING_POLL_S:
            if now - node.last_relay > RELAY_S:
                self.relay(node, store, since_go)
            return
        node.polled = now
        verdict = store.get(proto.VERDICT_KEY)
        if verdict is not None:
            store.add(proto.ACKS_KEY, 1)
            self.stats["acked"] += 1
            node.done = True
            return
        if not node.started and store.get(proto.GO_KEY) is not None:
            node.started = True
            self.go_at = self.go_at or now
            return
        if node.started and now - node.last_relay > RELAY_S:
            self.relay(node, store, since_go)
        done = since_go > self.args.watch_s
        if node.started and done and not node.sent_logs and store.get(proto.LOGS_WANTED_KEY) is not None:
            summary = nccl_log_summary(Path(self.args.empty_dir), Backend.GLOO, host=node.host)
            store.set(proto.logs_key(node.index), summary.to_json())
            node.sent_logs = True

    def relay(self, node: SimNode, store: Store, since_go: float) -> None:
        seq = min(int(since_go / (self.args.watch_s / len(SCHEDULE))), reached(self.faults))
        if node.index in self.faults.slow and seq > SLOW_STAGE:
            self.stats["slow_at"] = self.stats["slow_at"] or time.monotonic()
            seq = SLOW_STAGE
        node.last_relay = time.monotonic()
        if seq != node.relayed:
            name = SCHEDULE[seq] if seq < len(SCHEDULE) else "done"
            marks = proto.NodeStages((proto.StageMark(seq, name),) * self.args.ranks_per_node)
            store.set(proto.stages_key(node.index), marks.to_json())
            node.relayed = seq


# --- the driver ---------------------------------------------------------------------------------------
def scenario(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """One run: node 0 and the follower processes, to the end; its JSON line."""
    faults = Faults.of(name, args.nodes, args.seed)
    port, run = free_port(), f"sim-{secrets.token_hex(4)}"
    env = {**os.environ, SECRET_ENV: secrets.token_hex(32), "TORCH_CPP_LOG_LEVEL": "FATAL", "PYTHONWARNINGS": "ignore"}
    common = [sys.executable, __file__, "--nodes", str(args.nodes), "--ranks-per-node", str(args.ranks_per_node),
              "--port", str(port), "--run", run, "--faults", json.dumps(asdict(faults)), "--watch-s",
              str(args.watch_s), "--rendezvous-s", str(args.rendezvous_s), "--timeout", str(args.timeout),
              "--collective-timeout", str(args.collective_timeout)]
    with tempfile.TemporaryDirectory(prefix="nccl-doctor-scale-") as tmp:
        env["TMPDIR"] = tmp
        report_dir = args.report_dir and str(Path(args.report_dir, name))
        if report_dir:
            Path(report_dir).mkdir(parents=True, exist_ok=True)
        head = subprocess.Popen([*common, "--role", "head", "--report-dir", report_dir or ""], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        bounds = slices(args.nodes, args.procs)
        followers = [subprocess.Popen([*common, "--role", "followers", "--first", str(a), "--last", str(b),
                                       "--empty-dir", tmp], env=env,
                                      stdout=subprocess.PIPE) for a, b in bounds]
        limit = args.timeout + 120
        try:
            head_out, _ = head.communicate(timeout=limit)
            sims = [f.communicate(timeout=30)[0] for f in followers]
        finally:
            for proc in [head, *followers]:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    measured = json.loads(head_out.decode().strip().splitlines()[-1])
    stats = [json.loads(s.decode().strip().splitlines()[-1]) for s in sims if s.strip()]
    return summarise(args, name, measured, stats, faults)


def slices(nodes: int, procs: int) -> list[tuple[int, int]]:
    """Nodes 1..N-1 in ``procs`` contiguous slices."""
    per = -(-(nodes - 1) // procs)
    return [(a, min(nodes, a + per)) for a in range(1, nodes, per)]


def summarise(args: argparse.Namespace, name: str, head: dict[str, Any], sims: list[dict[str, Any]],
              faults: Faults) -> dict[str, Any]:
    width = len(str(args.nodes - 1))
    posted = max((s["posted_at"] for s in sims), default=0.0)
    trigger = {"lost": max((s["lost_at"] for s in sims), default=0.0),
               "slow": max((s["slow_at"] for s in sims), default=0.0),
               "silent": head.get("gathered_at", 0.0)}.get(name) or head.get("result_at", 0.0)
    faulty = {host_name(i, width) for i in faults.faulty()}
    named = set(head["named"])
    return {
        "scenario": name, "nodes": args.nodes, "ranks": args.nodes * args.ranks_per_node,
        "rendezvous_s": round(head["gathered_at"] - posted, 2) if "gathered_at" in head and posted else None,
        "consistency_s": head.get("consistency_s"),
        "watch_cpu_s_per_min": head.get("watch_cpu_s_per_min"), "watch_s": head.get("watch_s"),
        "verdict_s": round(head["verdict_at"] - trigger, 2) if trigger else None,
        "store_connections": head.get("store_connections"), "report_bytes": head["report_bytes"],
        "report_lines": head["report_lines"], "longest_line": head["longest_line"],
        "probe_bytes": head.get("probe_bytes"), "verdict": head["verdict"],
        "named_exactly_faulty": named == faulty,
        "faulty": reports.hosts_text(faulty), "named": reports.hosts_text(named),
        "acked": sum(s["acked"] for s in sims), "follower_lag_s": round(max((s["lag_s"] for s in sims), default=0), 2),
        "elapsed_s": head["elapsed_s"],
    }


def in_private_netns() -> int:
    """Run again in a network namespace of its own, with loopback only (root): torch's store resolves the
    name of every connection at both ends, and a resolver that drops a query stalls that connection 5 s
    (every tenth one here); with no route to a resolver the lookup fails at once. Nothing of the
    simulation can reach beyond this machine either. A veth pair gives node 0's real probe a data NIC, as a
    cluster node has (with loopback alone NCCL would bootstrap on ``lo``: a probe FAIL); /sys is mounted
    again in a mount namespace of its own so that the probe sees this namespace's interfaces, as
    ``ip netns exec`` does."""
    argv = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    env = {**os.environ, NETNS_ENV: "1"}
    return subprocess.call(["unshare", "--net", "--mount", "sh", "-c", f"{NETNS_SETUP} && exec {argv}"], env=env)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1024)
    p.add_argument("--ranks-per-node", type=int, default=8)
    p.add_argument("--scenario", action="append", choices=SCENARIOS)
    p.add_argument("--procs", type=int, default=4, help="processes simulating the followers")
    p.add_argument("--watch-s", type=float, default=30.0, help="how long the simulated ranks run")
    p.add_argument("--rendezvous-s", type=float, default=60.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--collective-timeout", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--report-dir", help="keep each scenario's report (text and JSON) here")
    p.add_argument("--width", type=int, default=160, help="the text report's width")
    p.add_argument("--role", choices=("head", "followers"), help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--run", help=argparse.SUPPRESS)
    p.add_argument("--faults", help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, help=argparse.SUPPRESS)
    p.add_argument("--last", type=int, help=argparse.SUPPRESS)
    p.add_argument("--empty-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.nodes < 2 or args.ranks_per_node < 1:
        p.error("--nodes must be >= 2 and --ranks-per-node >= 1")
    if args.role is None and os.geteuid() == 0 and not os.environ.get(NETNS_ENV):
        return in_private_netns()
    if args.role == "head":
        print(json.dumps(run_head(args)), flush=True)
        return 0
    if args.role == "followers":
        print(json.dumps(Followers(args).run()), flush=True)
        return 0
    for name in args.scenario or SCENARIOS:
        print(json.dumps(scenario(args, name)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
