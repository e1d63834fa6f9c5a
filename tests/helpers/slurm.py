"""A real Slurm cluster in network namespaces, for end-to-end tests of ``nccl-doctor preflight`` (root).

Built on ``netns.Cluster`` (platform.md section 4, "cluster in a box"): a controller namespace
``<prefix>-ctl`` (hostname ``ctl``, 198.18.0.100) runs ``slurmctld``; every node namespace runs one
``slurmd`` under its own hostname. One private ``munged`` (its own socket, so it never meets a system
munged) authenticates them all: munge talks over a filesystem socket, which crosses namespaces.
Everything lives in a private temp dir (``SLURM_CONF`` included; nothing is written to /etc/slurm) and
is torn down in ``finally``: daemons killed by the PIDs we saved, namespaces deleted, the dir removed.

    with SlurmCluster(2) as sc:
        job = sc.submit("examples/preflight.sbatch", env=env, timeout=90)
        assert job.rc == 0, job.output

Pitfalls handled here: ``ip netns exec`` mounts a fresh ``/sys`` that hides ``/sys/fs/cgroup`` and
slurmd refuses to start without it (``cgmount`` below); the spool dir must exist beforehand; a job's
environment is the submitter's (``--export=ALL``), so pass ``PATH`` with the venv's bin dir first.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.helpers import netns

CTL_HOST = "ctl"
TIMED_OUT_RC = 124  # a job that did not end within its timeout (as timeout(1) exits)
JOB_POLL_S = 0.2  # scontrol polls of a running job
IDLE_POLL_S = 0.25  # sinfo polls while the nodes come up
MUNGE_POLL_S = 0.05  # munged's socket appearing
MUNGE_START_S = 10.0  # munged must have made its socket by then
# A throttled node's link: 0.05 GB/s where a healthy veth pair moves 1-2.5 GB/s under Gloo here, below 5%
# where Gloo's slow ratio is 10%; 100mbit read the same verdict and its bench took 4x longer (14 s, 3.8 s)
SLOW_RATE = "400mbit"

# Remount the host's cgroup hierarchies inside the namespace's fresh /sys (slurmd needs them even with
# proctrack/linuxproc and task/none). The mounts stay inside this process's private mount namespace.
CGMOUNT = r"""
mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
while read -r _ dir fstype opts _; do
  case "$fstype" in
    cgroup) sub=${dir#/sys/fs/cgroup/}; mkdir -p "/sys/fs/cgroup/$sub"
            o=$(echo "$opts" | tr , '\n' | grep -Ev '^(rw|ro|relatime|nosuid|nodev|noexec)$' | paste -sd,)
            mount -t cgroup -o "$o" cgroup "/sys/fs/cgroup/$sub" ;;
    cgroup2) sub=${dir#/sys/fs/cgroup}; sub=${sub#/}; [ -n "$sub" ] && mkdir -p "/sys/fs/cgroup/$sub"
             mount -t cgroup2 cgroup2 "/sys/fs/cgroup/$sub" ;;
  esac
done < "$CGROUP_MOUNTS"
"""


def can_run_slurm() -> str | None:
    """None when a Slurm cluster can be started here, else why not (the skip reason)."""
    reason = netns.can_use_netns()
    if reason:
        return reason
    missing = [b for b in ("slurmctld", "slurmd", "sbatch", "srun", "munged") if not _which(b)]
    if missing:
        return ("Slurm/munge not installed (missing " + ", ".join(missing) + "): apt-get install -y "
                "--no-install-recommends slurmctld slurmd slurm-client munge")
    return None


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE"}


@dataclass
class Job:
    """A submitted batch job; ``rc`` and ``output`` are set once it ended (or timed out: rc 124).

    ``wait`` polls ``scontrol show job`` every 0.2 s: ``sbatch --wait`` polls with a growing interval and
    added ~30 s to every job here."""

    job_id: str
    cluster: SlurmCluster
    out_path: Path
    started: float
    rc: int | None = None
    state: str = ""
    output: str = ""
    seconds: float = 0.0

    def wait(self, timeout: float) -> Job:
        end = self.started + timeout
        while True:
            self.state, self.rc = self.cluster.job_state(self.job_id)
            if self.state in TERMINAL or time.monotonic() > end:
                break
            time.sleep(JOB_POLL_S)
        if self.state not in TERMINAL:
            self.rc = TIMED_OUT_RC
        self.seconds = time.monotonic() - self.started
        self.output = self.out_path.read_text(errors="replace") if self.out_path.exists() else ""
        return self


class SlurmCluster:
    """``n`` namespace nodes running slurmd, plus a controller namespace. A context manager."""

    def __init__(self, n: int, *, prefix: str | None = None, cpus: int = 2) -> None:
        self.prefix = prefix or f"ncs{uuid.uuid4().hex[:6]}"
        self.net = netns.Cluster(n, prefix=self.prefix)
        self.nodes = self.net.nodes
        self.ctl_ns = f"{self.prefix}-ctl"
        self.ctl_addr = f"{self.net.subnet}.100"
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.conf = self.dir / "slurm.conf"
        self.munge_socket = self.dir / "munge" / "munge.sock"
        self.pids: dict[str, int] = {}
        self._logs: list[IO[bytes]] = []
        for node in self.nodes:
            node.extra_hosts[CTL_HOST] = self.ctl_addr

    # --- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> SlurmCluster:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> None:
        os.chmod(self.dir, 0o755)  # munged runs as user munge and must reach its socket dir
        self.net.up()
        self._add_controller_ns()
        self._write_config()
        self._start_munged()
        self._start("slurmctld", self.ctl_ns, CTL_HOST, ["slurmctld", "-D", "-f", str(self.conf)])
        for node in self.nodes:
            (self.dir / "spool" / node.name).mkdir(parents=True)
            self._start(f"slurmd-{node.name}", node.ns, node.name,
                        ["sh", "-c", CGMOUNT + 'exec slurmd -D -f "$SLURM_CONF"'])
        self._wait_idle(timeout=30)

    def down(self) -> None:
        """Kill what we started (by PID, processes in our namespaces included), delete namespaces."""
        for ns in [n.ns for n in self.nodes] + [self.ctl_ns]:
            self._kill_ns_processes(ns)
        for pid in reversed(list(self.pids.values())):
            _kill(pid)
        for fh in self._logs:
            fh.close()
        netns.sh("ip", "netns", "del", self.ctl_ns, check=False)
        shutil.rmtree(netns.NETNS_ETC / self.ctl_ns, ignore_errors=True)
        self.net.down()
        shutil.rmtree(self.dir, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """Anything of ours still alive: namespaces, daemons, the temp dir (a test asserts it is empty)."""
        left = netns.leftovers(self.prefix)
        left += [f"pid {pid} ({name})" for name, pid in self.pids.items() if _alive(pid)]
        if self.dir.exists():
            left.append(str(self.dir))
        return left

    # --- setup steps ---------------------------------------------------------------------------
    def _add_controller_ns(self) -> None:
        sw, ns = self.net.switch, self.ctl_ns
        netns.sh("ip", "netns", "add", ns)
        netns.sh("ip", "-n", ns, "link", "set", "lo", "up")
        netns.sh("ip", "-n", ns, "link", "add", "eth1", "type", "veth", "peer", "name", "sw-ctl", "netns", sw)
        netns.sh("ip", "-n", sw, "link", "set", "sw-ctl", "master", "br0", "up")
        netns.sh("ip", "-n", ns, "addr", "add", f"{self.ctl_addr}/24", "dev", "eth1")
        netns.sh("ip", "-n", ns, "link", "set", "eth1", "up")
        self.net.write_hosts()
        hosts = (netns.NETNS_ETC / self.nodes[0].ns / "hosts").read_text()
        (netns.NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
        (netns.NETNS_ETC / ns / "hosts").write_text(hosts)

    def _write_config(self) -> None:
        d = self.dir
        for sub in ("state", "log"):
            (d / sub).mkdir()
        node_lines = "\n".join(
            f"NodeName={n.name} NodeAddr={n.addr} CPUs={self.cpus} RealMemory=1000 State=UNKNOWN"
            for n in self.nodes)
        self.conf.write_text(f"""\
ClusterName={self.prefix}
SlurmctldHost={CTL_HOST}({self.ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
SlurmdTimeout=5
JobRequeue=0
MessageTimeout=5
KillWait=2
InactiveLimit=0
{node_lines}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    def _start_munged(self) -> None:
        mdir = self.munge_socket.parent
        mdir.mkdir()
        shutil.chown(mdir, "munge", "munge")
        argv = ["setpriv", "--reuid=munge", "--regid=munge", "--clear-groups", _which("munged") or "munged",
                "--foreground", "--force",
                f"--socket={self.munge_socket}", f"--pid-file={mdir}/munged.pid",
                f"--log-file={mdir}/munged.log", f"--seed-file={mdir}/munged.seed"]
        self._spawn("munged", argv)
        deadline = time.monotonic() + MUNGE_START_S
        while not self.munge_socket.exists():
            if time.monotonic() > deadline or not _alive(self.pids["munged"]):
                raise RuntimeError(f"munged did not start: {self._log_tail('munged')}")
            time.sleep(MUNGE_POLL_S)

    def _start(self, name: str, ns: str, hostname: str, argv: list[str]) -> None:
        wrapped = ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                   'hostname "$0" && exec "$@"', hostname, *argv]
        self._spawn(name, wrapped)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.dir / f"{name}.out", "wb")  # noqa: SIM115 - the daemon writes it until down() closes it
        self._logs.append(log)
        env = dict(os.environ, SLURM_CONF=str(self.conf), CGROUP_MOUNTS="/proc/1/mounts")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.pids[name] = proc.pid

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        states: list[str] = []
        while time.monotonic() < deadline:
            for name, pid in self.pids.items():
                if not _alive(pid):
                    raise RuntimeError(f"{name} exited during startup: {self._log_tail(name)}")
            proc = self.client(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10, check=False)
            states = proc.stdout.split("\n")
            if proc.returncode == 0 and sum(line.endswith(" idle") for line in states) == len(self.nodes):
                return
            time.sleep(IDLE_POLL_S)
        raise RuntimeError(f"nodes not idle after {timeout}s: {states}; slurmctld: {self._log_tail('slurmctld')}")

    def _log_tail(self, name: str, n: int = 15) -> str:
        path = self.dir / f"{name}.out"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"

    # --- using the cluster ---------------------------------------------------------------------
    def client(self, argv: list[str], *, env: Mapping[str, str] | None = None, timeout: float = 30,
               check: bool = True, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        """A Slurm client command (sinfo, squeue, scancel...) run from the controller namespace."""
        full_env = dict(env if env is not None else os.environ, SLURM_CONF=str(self.conf))
        proc = subprocess.run(["ip", "netns", "exec", self.ctl_ns, *argv], capture_output=True, text=True,
                              env=full_env, timeout=timeout, cwd=cwd, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def sbatch(self, script: str | Path, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
               nodes: int | None = None, time_limit_s: int = 300, workdir: Path | None = None) -> Job:
        """Submit; ``Job.wait(timeout)`` collects the exit code and the output."""
        workdir = workdir or self.dir
        out = workdir / f"job-{uuid.uuid4().hex[:6]}.out"
        argv = ["sbatch", "--parsable", f"--nodes={nodes or len(self.nodes)}", "--ntasks-per-node=1",
                f"--output={out}", f"--time={max(1, (time_limit_s + 59) // 60)}", str(script), *args]
        # the jobs' temp files (even a SIGKILLed node's) live in this cluster's dir, removed at teardown
        tmp = self.dir / "tmp"
        tmp.mkdir(mode=0o1777, exist_ok=True)
        env = {**(env if env is not None else os.environ), "TMPDIR": str(tmp)}
        proc = self.client(argv, env=env, cwd=str(workdir))
        job_id = proc.stdout.strip().split(";")[0]
        return Job(job_id=job_id, cluster=self, out_path=out, started=time.monotonic())

    def job_state(self, job_id: str) -> tuple[str, int]:
        """(JobState, exit code) from ``scontrol show job``: a signal counts as 128+N, and a job that
        ended badly with exit code 0 (NODE_FAIL, CANCELLED...) as 1, as ``sbatch --wait`` reports it."""
        out = self.client(["scontrol", "show", "job", "-o", job_id], check=False).stdout
        fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        state = fields.get("JobState", "")
        code, _, sig = fields.get("ExitCode", "0:0").partition(":")
        rc = int(code or 0) or (128 + int(sig) if sig and int(sig) else 0)
        if state in TERMINAL and state != "COMPLETED" and rc == 0:
            rc = 1
        return state, rc

    def submit(self, script: str | Path, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
               timeout: float = 120, nodes: int | None = None) -> tuple[int, str]:
        """Submit, wait at most ``timeout`` s, return (exit code, job output). 124 = timed out."""
        job = self.sbatch(script, args, env=env, nodes=nodes, time_limit_s=int(timeout) + 60)
        job.wait(timeout)
        if job.rc == TIMED_OUT_RC:
            self.client(["scancel", "--full", "--user=root"], check=False)
        return (TIMED_OUT_RC if job.rc is None else job.rc), job.output

    def throttle(self, node: netns.Node, rate: str = SLOW_RATE) -> None:
        self.net.throttle(node, rate)

    def kill_node(self, node: netns.Node) -> list[int]:
        """The node dies: every process in its namespace (slurmd, its job's processes) is SIGKILLed."""
        return self._kill_ns_processes(node.ns)

    def node_pids(self, node: netns.Node) -> list[int]:
        out = netns.sh("ip", "netns", "pids", node.ns, check=False).stdout
        return [int(p) for p in out.split()]

    def _kill_ns_processes(self, ns: str) -> list[int]:
        out = netns.sh("ip", "netns", "pids", ns, check=False).stdout
        pids = [int(p) for p in out.split()]
        for pid in pids:
            _kill(pid)
        return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
