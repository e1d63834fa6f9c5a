"""Review 3 of ``preflight``: who owns the rendezvous store, a foreign program on its port, uneven ranks per
node, a late node, and a loopback Gloo interface on a multi-node job.

Most run the launchers as separate processes with the SLURM_* variables srun would set, on this machine
(node 0's host is ``localhost``): what is tested is the store protocol between launchers, which needs no
second machine and no Slurm daemon. Naming nodes needs hostnames: those tests use network namespaces."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from nccl_doctor.node.compare import compare
from nccl_doctor.report import Severity

PY = sys.executable
STACK_DUMP = ("frame #", "Exception raised from", "socket.cpp")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm(node: int, *, job: str = "4242", step: str = "0", nodelist: str = "localhost,ghost",
           nnodes: int = 2) -> dict:
    """What ``srun --ntasks-per-node=1`` sets for one task of a ``nnodes``-node step."""
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": step, "SLURM_NODEID": str(node),
            "SLURM_STEP_NODELIST": nodelist, "SLURM_JOB_NODELIST": nodelist, "SLURM_NNODES": str(nnodes),
            "SLURM_STEP_NUM_NODES": str(nnodes), "SLURM_STEP_NUM_TASKS": str(nnodes)}


def _env(base: dict, **extra) -> dict:
    env = {k: v for k, v in base.items() if not k.startswith(("SLURM_", "MASTER_"))}
    env.update(extra)
    return env


def _preflight(*argv: str) -> list[str]:
    return [PY, "-m", "nccl_doctor", "preflight", "--cpu", *argv]


def _fails(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] == "fail"]


@pytest.mark.timeout(60)
def test_a_listener_that_never_answers_is_reported_within_the_deadline(venv_env):
    """A foreign program accepts on the rendezvous port and never answers: TCPStore's connect would block
    for as long as it lives. The follower must give up within its deadlines, say what holds the port,
    and print no C++ stack dump."""
    port = _free_port()
    listener = subprocess.Popen([PY, "-c", "import socket,time;s=socket.socket();"
                                 "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
                                 f"s.bind(('127.0.0.1',{port}));s.listen(5);print('up',flush=True);time.sleep(50)"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == "up"
        t0 = time.monotonic()
        proc = subprocess.run(_preflight("--port", str(port), "--rendezvous-timeout", "4", "--timeout", "30",
                                         "--format", "json"),
                              env=_env(venv_env, **_slurm(1)), capture_output=True, text=True, timeout=40)
        seconds = time.monotonic() - t0
    finally:
        listener.kill()
        listener.wait()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert seconds < 25, f"took {seconds:.1f} s"
    doc = json.loads(proc.stdout)
    [f] = [f for f in _fails(doc) if f["code"] == "ND406"]
    assert f"port {port} on localhost (node 0) accepts connections but is not an nccl-doctor store" in f["message"]
    assert "--port" in f["fix"] and f["where"]["host"] == "localhost"
    assert not any(s in proc.stderr + proc.stdout for s in STACK_DUMP), proc.stderr[-2000:]


@pytest.mark.timeout(90)
def test_a_second_run_on_the_same_port_touches_nothing_of_the_first(venv_env, tmp_path):
    """Two preflight steps of one job on one port (MASTER_PORT): run B's node 0 cannot bind and says so;
    B's follower reaches run A's store, sees it is not its run's and leaves before writing anything, so
    A still waits for its own node 1 (and names it missing, not B's)."""
    port = _free_port()
    a_out = tmp_path / "a.json"
    b0 = None
    a = subprocess.Popen(_preflight("--rendezvous-timeout", "12", "--timeout", "40", "--json-out", str(a_out)),
                         env=_env(venv_env, MASTER_PORT=str(port), **_slurm(0, step="0")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not _accepting(port):  # A's node 0 holds the port
            assert time.monotonic() < deadline and a.poll() is None, a.communicate()[1][-2000:]
            time.sleep(0.2)
        b_env = dict(MASTER_PORT=str(port))
        b0 = subprocess.Popen(_preflight("--rendezvous-timeout", "12", "--timeout", "40", "--format", "json"),
                              env=_env(venv_env, **b_env, **_slurm(0, step="1")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        b1 = subprocess.run(_preflight("--rendezvous-timeout", "12", "--timeout", "40", "--format", "json"),
                            env=_env(venv_env, **b_env, **_slurm(1, step="1")), capture_output=True, text=True,
                            timeout=40)
        b0_out, b0_err = b0.communicate(timeout=40)
        a_stdout, a_err = a.communicate(timeout=60)
    finally:
        for p in (a, b0):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    # B's follower: at once, naming what holds the port; nothing written to A's store
    assert b1.returncode == 1, b1.stderr[-2000:]
    [f] = [f for f in _fails(json.loads(b1.stdout)) if f["code"] == "ND406"]
    assert f"port {port} on localhost (node 0) is held by another nccl-doctor run (step 0" in f["message"]
    assert "--port" in f["fix"]
    # B's node 0: the port is in use there; the fix is a port, not a firewall
    assert b0.returncode == 1, b0_err[-2000:]
    [f] = [f for f in _fails(json.loads(b0_out)) if f["code"] == "ND406"]
    assert f"port {port} is already in use on node 0" in f["message"]
    assert "--port" in f["fix"] and "firewall" not in f["fix"]
    # A: undisturbed, its node 1 never came; no rank of A was started by B's "go"
    assert a.returncode == 1, a_err[-2000:]
    doc = json.loads(a_out.read_text())
    assert doc["stage"] == "rendezvous", doc["summary"]
    [missing] = [f for f in _fails(doc) if f["code"] == "ND405"]
    assert missing["where"]["host"] == "ghost"
    for err in (b0_err, b1.stderr, a_err):
        assert not any(s in err for s in STACK_DUMP), err[-2000:]


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_two_steps_of_one_job_default_to_different_ports():
    from nccl_doctor.preflight.command import node_plan

    args = argparse.Namespace(nproc_per_node=None, cpu=True, port=None)
    p0 = node_plan(args, _slurm(1, job="1234", step="0", nodelist="gpu[01-02]"))
    p1 = node_plan(args, _slurm(1, job="1234", step="1", nodelist="gpu[01-02]"))
    assert p0.port == 29500 + 234 and p1.port == 29500 + 235  # step 0 keeps the job's usual port
    assert (p0.run_id, p1.run_id) == ("1234.0", "1234.1")


@pytest.mark.timeout(60)
def test_a_node_that_arrives_after_node_0_gave_up_says_so(venv_env):
    """Node 0 gave up on the rendezvous (and left); node 1 comes much later. It must say it came too late
    and that the run was decided on node 0, without blaming node 0 or printing a C++ stack dump."""
    port = _free_port()
    head = subprocess.run(_preflight("--port", str(port), "--rendezvous-timeout", "2", "--timeout", "30",
                                     "--format", "json"),
                          env=_env(venv_env, **_slurm(0)), capture_output=True, text=True, timeout=40)
    assert head.returncode == 1 and json.loads(head.stdout)["stage"] == "rendezvous", head.stderr[-2000:]
    # as in a real late start: the launch began (the process started) long before it reached the rendezvous
    late = subprocess.run(["sh", "-c", 'sleep 3; exec "$@"', "sh",
                           *_preflight("--port", str(port), "--rendezvous-timeout", "2", "--timeout", "30",
                                       "--format", "json")],
                          env=_env(venv_env, **_slurm(1)), capture_output=True, text=True, timeout=40)
    assert late.returncode == 1, late.stderr[-2000:]
    doc = json.loads(late.stdout)
    host = socket.gethostname()
    expected = (f"this node ({host}) arrived after node 0 stopped waiting (--rendezvous-timeout 2 s); "
                "the run was already decided on localhost")
    assert doc["summary"] == expected
    [f] = _fails(doc)
    assert f["code"] == "ND405" and f["where"]["host"] == host
    assert "cannot reach" not in late.stdout
    assert not any(s in late.stderr + late.stdout for s in STACK_DUMP), late.stderr[-2000:]


def test_late_node_told_by_the_store_itself(tmp_path):
    """Node 0 is still there (rendering its report) when the late node posts: the store says it stopped
    waiting without this node, so the node need not guess from its age."""
    import shutil
    from datetime import timedelta

    import torch.distributed as dist

    from nccl_doctor.preflight.command import CLOSED_KEY, Launcher, NodePlan

    port = _free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))
    store.set(CLOSED_KEY, json.dumps({"missing": [1], "host": "n1"}))
    plan = NodePlan(nnodes=2, node_rank=1, hosts=("n1", "n2"), head="127.0.0.1", port=port, nproc=2, slurm=True,
                    host="n2", run_id="1.0", step="0")
    launcher = Launcher(argparse.Namespace(timeout=10, rendezvous_timeout=7, strict=False), plan, {})
    try:
        launcher.store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5))
        out = launcher._late({"host": "n2", "findings": []})
        assert out is not None and out.code == 1
        assert out.summary == ("this node (n2) arrived after node 0 stopped waiting (--rendezvous-timeout 7 s); "
                               "the run was already decided on n1")
        store.set(CLOSED_KEY, json.dumps({"missing": [2], "host": "n1"}))
        assert launcher._late({"host": "n2", "findings": []}) is None  # another node was the late one
    finally:
        shutil.rmtree(launcher.log_dir, ignore_errors=True)


# --- uneven ranks per node ----------------------------------------------------------------------------
def test_uneven_ranks_per_node_fail_naming_the_odd_node_and_the_cause():
    base = {"version.torch": "2.13.0"}
    nodes = [dict(base, host=f"n{i}", **{"ranks.per_node": "8", "ranks.source": "8 visible GPUs"}) for i in (1, 2, 4)]
    nodes.insert(2, dict(base, host="n3", **{"ranks.per_node": "7", "ranks.source": "7 visible GPUs"}))
    [f] = compare(nodes)
    assert f.code == "ND408" and f.severity is Severity.FAIL and f.where.host == "n3"
    assert f.message == ("ranks per node differ across nodes: 8 on n[1-2,4] (8 visible GPUs); 7 on n3 "
                         "(7 visible GPUs); no rank was started")
    assert "--nproc-per-node" in f.fix and "--gpus-per-node" in f.fix
    # equal counts from different causes agree
    same = [dict(base, host="a", **{"ranks.per_node": "2", "ranks.source": "--nproc-per-node 2"}),
            dict(base, host="b", **{"ranks.per_node": "2", "ranks.source": "2 visible GPUs"})]
    assert compare(same) == []


def test_the_node_plan_says_why_it_starts_its_ranks():
    from nccl_doctor.preflight.command import node_plan

    args = argparse.Namespace(nproc_per_node=None, cpu=False, port=None)
    env = _slurm(1, nodelist="gpu[01-02]")
    assert node_plan(argparse.Namespace(nproc_per_node=1, cpu=False, port=None), env).nproc_source == \
        "--nproc-per-node 1"
    assert node_plan(args, dict(env, SLURM_GPUS_ON_NODE="4")).nproc_source == "SLURM_GPUS_ON_NODE=4"


@pytest.mark.netns
@pytest.mark.timeout(90)
def test_uneven_ranks_stop_before_any_rank_starts(cluster_factory, venv_env, tmp_path):
    """Node n2 would start 1 rank, the others 2: ND408 names n2 with the cause; no rank is started."""
    c = cluster_factory(3)
    port = "29611"
    procs = []
    for node in c.nodes:
        extra = ["--nproc-per-node", "1"] if node.name == "n2" else []
        env = _env(venv_env, GLOO_SOCKET_IFNAME="eth1", NCCL_SOCKET_IFNAME="=eth1", TMPDIR=str(tmp_path),
                   **_slurm(node.index - 1, nodelist="n[1-3]", nnodes=3))
        procs.append(c.popen(node, _preflight("--port", port, "--timeout", "40", "--collective-timeout", "10",
                                              "--format", "json", *extra),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=70) for p in procs]
    assert [p.returncode for p in procs] == [1, 1, 1], outs[0][1][-2000:]
    doc = json.loads(outs[0][0])
    [f] = [f for f in _fails(doc) if f["code"] == "ND408"]
    assert f["where"]["host"] == "n2"
    assert "2 on n[1,3] (--cpu: 2 CPU ranks); 1 on n2 (--nproc-per-node 1)" in f["message"]
    assert doc["stage"] == "consistency" and "ranks" not in doc
    assert "no rank was started" in outs[0][0]
    assert not any("starting" in err for _, err in outs)  # no launcher started a rank


# --- loopback Gloo interface on 2+ nodes ------------------------------------------------------------------
def test_loopback_gloo_interface_fails_the_probe_on_two_nodes():
    from nccl_doctor.preflight.command import multi_node_findings
    from nccl_doctor.node.probe import check, probe_node

    env = {"GLOO_SOCKET_IFNAME": "lo", "PATH": "/bin"}
    node = probe_node("/", env)
    warn = [f for f in check(node) if f.code == "ND216"]
    assert [f.severity for f in warn] == [Severity.WARN]  # the probe on its own: a warning
    [f] = [f for f in multi_node_findings(check(node), node, 2) if f.code == "ND216"]
    assert f.severity is Severity.FAIL and "spans 2 nodes" in f.message and f.where.iface == "lo"


@pytest.mark.netns
@pytest.mark.timeout(90)
def test_loopback_gloo_on_one_node_stops_at_the_probe_naming_it(cluster_factory, venv_env, tmp_path):
    c = cluster_factory(2)
    procs = []
    for node in c.nodes:
        env = _env(venv_env, GLOO_SOCKET_IFNAME="lo" if node.name == "n2" else "eth1", NCCL_SOCKET_IFNAME="=eth1",
                   TMPDIR=str(tmp_path), **_slurm(node.index - 1, nodelist="n[1-2]"))
        procs.append(c.popen(node, _preflight("--port", "29612", "--timeout", "40", "--collective-timeout", "10",
                                              "--format", "json"),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=70) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs[0][1][-2000:]
    doc = json.loads(outs[0][0])
    assert doc["stage"] == "probe"
    [f] = [f for f in _fails(doc) if f["code"] == "ND216"]
    assert f["where"]["host"] == "n2" and "loopback" in f["message"]
    assert doc["summary"] == "stopped in stage probe; look at n2"
    assert "probe FAILED: ND216" in outs[1][1]
    assert not any("starting" in err for _, err in outs)  # no launcher started a rank


def test_failed_ranks_point_at_the_node_whose_own_probe_explains_it():
    """Rank 0 on healthy n1 is the first to report a failed Gloo connect; n2's own probe said its Gloo
    interface cannot reach other nodes: the summary must name n2, not n1."""
    import shutil

    from nccl_doctor.preflight.command import Launcher, NodePlan, RankState
    from nccl_doctor.report import Finding, Report, Where

    plan = NodePlan(nnodes=2, node_rank=0, hosts=("n1", "n2"), head="n1", port=1, nproc=2, slurm=True, host="n1")
    launcher = Launcher(argparse.Namespace(timeout=10, strict=False, cpu=True), plan, {})  # Gloo
    try:
        report = Report(command="preflight")
        report.add(Finding(code="ND216", severity=Severity.WARN, where=Where(host="n2", iface="docker0"),
                           message="GLOO_SOCKET_IFNAME=docker0: docker0 is a virtual (bridge) interface, not this "
                                   "node's uplink", fix="export GLOO_SOCKET_IFNAME=eth1"))
        states = [RankState() for _ in range(4)]
        errors = {0: {"stage": "init", "error": "RuntimeError: Gloo connectFullMesh failed with Connection refused"}}
        out = launcher._fail(report, states, errors, [], [])
        assert out.summary == "stopped in stage init; look at n2"
        [f] = [f for f in out.report.findings if f.code == "ND406"]
        assert f.where.host == "n2" and "ND216 on n2" in f.message and "rank 0 (n1)" in f.message
        assert "export GLOO_SOCKET_IFNAME=eth1" in f.fix
        # nothing explains it: the first rank to fail is named, as before
        out = launcher._fail(Report(command="preflight"), states, errors, [], [])
        assert out.summary == "stopped in stage init; look at n1"
        # an error that is not about connecting is not explained by an interface: the failing rank is named
        oom = {0: {"stage": "bench", "error": "RuntimeError: DefaultCPUAllocator: can't allocate memory"}}
        report = Report(command="preflight")
        report.add(Finding(code="ND216", severity=Severity.WARN, where=Where(host="n2", iface="docker0"),
                           message="GLOO_SOCKET_IFNAME=docker0 ...", fix="export GLOO_SOCKET_IFNAME=eth1"))
        out = launcher._fail(report, states, oom, [], [])
        assert out.summary == "stopped in stage bench; look at n1"
    finally:
        shutil.rmtree(launcher.log_dir, ignore_errors=True)


def _two_nodes(venv_env, tmp_path, until: str) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Node 0 and a follower on localhost, returned once node 0's progress on stderr shows ``until``;
    the follower's stdout is a pipe, node 0's JSON report too."""
    port = str(_free_port())
    args = _preflight("--port", port, "--timeout", "60", "--rendezvous-timeout", "20", "--collective-timeout", "10",
                      "--format", "json")
    env = dict(TMPDIR=str(tmp_path))
    n0 = subprocess.Popen(args, env=_env(venv_env, **env, **_slurm(0)), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    n1 = subprocess.Popen(args, env=_env(venv_env, **env, **_slurm(1)), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    for line in n0.stderr:
        if until in line:
            break
    return n0, n1


@pytest.mark.timeout(90)
def test_a_frozen_node_0_does_not_hold_its_followers(venv_env, tmp_path):
    """Node 0 stops (SIGSTOP: as if frozen, powered off or cut off) once the ranks run: a follower's store
    calls block in C++ with no timeout and no signal handler runs. Its watchdog must see node 0's store go
    silent, stop the ranks and leave with exit 1 and one line, well before the deadline."""
    n0, n1 = _two_nodes(venv_env, tmp_path, "starting 2 ranks per node")
    try:
        os.kill(n0.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        out, _ = n1.communicate(timeout=45)
        seconds = time.monotonic() - t0
    finally:
        for p in (n0, n1):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
    assert n1.returncode == 1 and seconds < 30, (n1.returncode, seconds)
    assert out.startswith("nccl-doctor preflight (") and "lost node 0 (localhost)" in out
    assert not [p for p in tmp_path.glob("nccl-doctor-*") if f"-{n1.pid}-" in p.name]  # (killed node 0's may stay)


@pytest.mark.timeout(120)
def test_a_late_node_told_by_the_store_exits_1_not_abort(venv_env):
    """Node 0's store says the rendezvous is closed: the follower leaves right after starting its heartbeat
    thread, whose C++ store call must not abort the exit ('terminate called ...', SIGABRT). Several times:
    the race lost more often than not."""
    from nccl_doctor.preflight.command import CLOSED_KEY, RUN_KEY

    port = _free_port()
    store = subprocess.Popen([PY, "-c", (
        "import json,sys,time; from datetime import timedelta; import torch.distributed as d;"
        f"s=d.TCPStore('127.0.0.1',{port},is_master=True,wait_for_workers=False,timeout=timedelta(seconds=30));"
        f"s.set({RUN_KEY!r},json.dumps({{'run':'4242.0','step':'0','host':'localhost'}}));"
        f"s.set({CLOSED_KEY!r},json.dumps({{'missing':[1],'host':'localhost'}}));print('up',flush=True);time.sleep(100)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert store.stdout.readline().strip() == "up"
        for _ in range(4):
            proc = subprocess.run(_preflight("--port", str(port), "--timeout", "30", "--rendezvous-timeout", "10",
                                             "--format", "json"), env=_env(venv_env, **_slurm(1)),
                                  capture_output=True, text=True, timeout=40)
            assert proc.returncode == 1 and "terminate called" not in proc.stderr, (proc.returncode, proc.stderr)
            assert "arrived after node 0 stopped waiting" in proc.stdout
    finally:
        store.kill()
        store.wait()


@pytest.mark.timeout(90)
def test_a_follower_whose_launcher_dies_after_the_measurements_fails_the_run(venv_env, tmp_path):
    """The follower's launcher is SIGKILLed once the ranks run; its ranks (own sessions) still finish, so
    the measurements pass. Node 0 must notice the lost heartbeat while it waits for that node's NCCL log
    summary: ND407 naming it and exit 1, not a PASS with a missing-summary note."""
    n0, n1 = _two_nodes(venv_env, tmp_path, "rank 0] bench")  # every rank is up and measuring
    try:
        n1.kill()
        out, _ = n0.communicate(timeout=60)
    finally:
        for p in (n0, n1):
            if p.poll() is None:
                p.kill()
            p.wait()
    assert n0.returncode == 1, out[-2000:]
    doc = json.loads(out)
    assert any(f["code"] == "ND407" and f["where"]["host"] == "ghost" and "after the measurements" in f["message"]
               for f in _fails(doc)), _fails(doc)


@pytest.mark.timeout(120)
def test_a_stopped_fsdp_smoke_leaves_no_checkpoint_on_the_users_file_system(venv_env, tmp_path):
    """SIGTERM (scancel) while the --fsdp-smoke checkpoint exists: the ranks die before their own cleanup,
    so the launcher removes the directory rank 0 recorded."""
    base = tmp_path / "shared"
    base.mkdir()
    proc = subprocess.Popen(_preflight("--fsdp-smoke", "--fsdp-smoke-dir", str(base), "--timeout", "90",
                                       "--format", "json"), env=_env(venv_env, TMPDIR=str(tmp_path)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 90
        while not list(base.glob(".nccl-doctor-dcp-*")):
            assert time.monotonic() < end and proc.poll() is None, "no checkpoint directory appeared"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(base.iterdir()) == []
