"""The store protocol between launchers, run as separate processes with the SLURM_* variables srun would
set, on this machine (node 0's host is ``localhost``): who owns the rendezvous store, a foreign program on
its port, a late node, a frozen node 0, a follower whose launcher dies. Needs no second machine and no
Slurm daemon (naming nodes needs hostnames: those tests are in ``tests/system``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from nccl_doctor.cluster.net import free_port
from nccl_doctor.preflight.options import PreflightOptions
from tests.helpers.preflight_cli import PY, failures, preflight_argv, slurm_env, without_launcher

pytestmark = pytest.mark.torch

STACK_DUMP = ("frame #", "Exception raised from", "socket.cpp")


@pytest.mark.timeout(60)
def test_a_listener_that_never_answers_is_reported_within_the_deadline(venv_env):
    """A foreign program accepts on the rendezvous port and never answers: TCPStore's connect would block
    for as long as it lives. The follower must give up within its deadlines, say what holds the port,
    and print no C++ stack dump."""
    port = free_port()
    listener = subprocess.Popen([PY, "-c", "import socket,time;s=socket.socket();"
                                 "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
                                 f"s.bind(('127.0.0.1',{port}));s.listen(5);print('up',flush=True);time.sleep(50)"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == "up"
        t0 = time.monotonic()
        proc = subprocess.run(preflight_argv("--port", str(port), "--rendezvous-timeout", "4", "--timeout", "30",
                                         "--format", "json"),
                              env=without_launcher(venv_env, **slurm_env(1)), capture_output=True, text=True, timeout=40, check=False)
        seconds = time.monotonic() - t0
    finally:
        listener.kill()
        listener.wait()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert seconds < 25, f"took {seconds:.1f} s"
    doc = json.loads(proc.stdout)
    [f] = [f for f in failures(doc) if f["code"] == "ND406"]
    assert f"port {port} on localhost (node 0) accepts connections but is not an nccl-doctor store" in f["message"]
    assert "--port" in f["fix"] and f["where"]["host"] == "localhost"
    assert not any(s in proc.stderr + proc.stdout for s in STACK_DUMP), proc.stderr[-2000:]


A_RENDEZVOUS_S = 20


@pytest.mark.timeout(90)
def test_a_second_run_on_the_same_port_touches_nothing_of_the_first(venv_env, tmp_path):
    """Two preflight steps of one job on one port (MASTER_PORT): run B's node 0 cannot bind and says so;
    B's follower reaches run A's store, sees it is not its run's and leaves before writing anything, so
    A still waits for its own node 1 (and names it missing, not B's)."""
    port = free_port()
    a_out = tmp_path / "a.json"
    b0 = None
    # A waits A_RENDEZVOUS_S for its node 1: long enough that B's two launchers (each importing torch on a
    # busy box) reach A's store while A still holds it (12 s failed once beside two other test workers)
    a = subprocess.Popen(preflight_argv("--rendezvous-timeout", str(A_RENDEZVOUS_S), "--timeout", "40",
                                        "--json-out", str(a_out)),
                         env=without_launcher(venv_env, MASTER_PORT=str(port), **slurm_env(0, step="0")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not _accepting(port):  # A's node 0 holds the port
            assert time.monotonic() < deadline and a.poll() is None, a.communicate()[1][-2000:]
            time.sleep(0.2)
        b_env = {"MASTER_PORT": str(port)}
        b0 = subprocess.Popen(preflight_argv("--rendezvous-timeout", "12", "--timeout", "40", "--format", "json"),
                              env=without_launcher(venv_env, **b_env, **slurm_env(0, step="1")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        b1 = subprocess.run(preflight_argv("--rendezvous-timeout", "12", "--timeout", "40", "--format", "json"),
                            env=without_launcher(venv_env, **b_env, **slurm_env(1, step="1")), capture_output=True, text=True,
                            timeout=40, check=False)
        b0_out, b0_err = b0.communicate(timeout=40)
        _a_stdout, a_err = a.communicate(timeout=60)
    finally:
        for p in (a, b0):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    # B's follower: at once, naming what holds the port; nothing written to A's store
    assert b1.returncode == 1, b1.stderr[-2000:]
    [f] = [f for f in failures(json.loads(b1.stdout)) if f["code"] == "ND406"]
    assert f"port {port} on localhost (node 0) is held by another nccl-doctor run (step 0" in f["message"]
    assert "--port" in f["fix"]
    # B's node 0: the port is in use there; the fix is a port, not a firewall
    assert b0.returncode == 1, b0_err[-2000:]
    [f] = [f for f in failures(json.loads(b0_out)) if f["code"] == "ND406"]
    assert f"port {port} is already in use on node 0" in f["message"]
    assert "--port" in f["fix"] and "firewall" not in f["fix"]
    # A: undisturbed, its node 1 never came; no rank of A was started by B's "go"
    assert a.returncode == 1, a_err[-2000:]
    doc = json.loads(a_out.read_text())
    assert doc["stage"] == "rendezvous", doc["summary"]
    [missing] = [f for f in failures(doc) if f["code"] == "ND405"]
    assert missing["where"]["host"] == "ghost"
    for err in (b0_err, b1.stderr, a_err):
        assert not any(s in err for s in STACK_DUMP), err[-2000:]


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.timeout(60)
def test_a_node_that_arrives_after_node_0_gave_up_says_so(venv_env):
    """Node 0 gave up on the rendezvous (and left); node 1 comes much later. It must say it came too late
    and that the run was decided on node 0, without blaming node 0 or printing a C++ stack dump."""
    port = free_port()
    head = subprocess.run(preflight_argv("--port", str(port), "--rendezvous-timeout", "2", "--timeout", "30",
                                     "--format", "json"),
                          env=without_launcher(venv_env, **slurm_env(0)), capture_output=True, text=True, timeout=40, check=False)
    assert head.returncode == 1 and json.loads(head.stdout)["stage"] == "rendezvous", head.stderr[-2000:]
    # as in a real late start: the launch began (the process started) long before it reached the rendezvous
    late = subprocess.run(["sh", "-c", 'sleep 3; exec "$@"', "sh",
                           *preflight_argv("--port", str(port), "--rendezvous-timeout", "2", "--timeout", "30",
                                       "--format", "json")],
                          env=without_launcher(venv_env, **slurm_env(1)), capture_output=True, text=True, timeout=40, check=False)
    assert late.returncode == 1, late.stderr[-2000:]
    doc = json.loads(late.stdout)
    host = socket.gethostname()
    expected = (f"this node ({host}) arrived after node 0 stopped waiting (--rendezvous-timeout 2 s); "
                "the run was already decided on localhost")
    assert doc["summary"] == expected
    [f] = failures(doc)
    assert f["code"] == "ND405" and f["where"]["host"] == host
    assert "cannot reach" not in late.stdout
    assert not any(s in late.stderr + late.stdout for s in STACK_DUMP), late.stderr[-2000:]


def test_late_node_told_by_the_store_itself():
    """Node 0 is still there (rendering its report) when the late node posts: the store says it stopped
    waiting without this node, so the node need not guess from its age."""
    from datetime import timedelta

    import torch.distributed as dist

    from nccl_doctor.preflight.follower import Follower
    from nccl_doctor.preflight.launcher import Launcher
    from nccl_doctor.preflight.plan import NodePlan
    from nccl_doctor.preflight.protocol import CLOSED_KEY, Closed, NodePost
    from nccl_doctor.preflight.store import Store

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))
    store.set(CLOSED_KEY, Closed(missing=[1], host="n1").to_json())
    plan = NodePlan(nnodes=2, node_rank=1, hosts=("n1", "n2"), head="127.0.0.1", port=port, nproc=2, slurm=True,
                    host="n2", run_id="1.0", step="0")
    launcher = Launcher(PreflightOptions(timeout=10, rendezvous_timeout=7), plan, {})
    launcher.state.store = Store(dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5)))
    mine = NodePost(host="n2", node=1)
    out = Follower(launcher).late(mine)
    assert out is not None and out.code == 1
    assert out.summary == ("this node (n2) arrived after node 0 stopped waiting (--rendezvous-timeout 7 s); "
                           "the run was already decided on n1")
    store.set(CLOSED_KEY, json.dumps({"missing": [2], "host": "n1"}))
    assert Follower(launcher).late(mine) is None  # another node was the late one


def _two_nodes(venv_env, tmp_path, until: str) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Node 0 and a follower on localhost, returned once node 0's progress on stderr shows ``until``;
    the follower's stdout is a pipe, node 0's JSON report too."""
    port = str(free_port())
    args = preflight_argv("--port", port, "--timeout", "60", "--rendezvous-timeout", "20", "--collective-timeout", "10",
                      "--format", "json")
    env = {"TMPDIR": str(tmp_path)}
    n0 = subprocess.Popen(args, env=without_launcher(venv_env, **env, **slurm_env(0)), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    n1 = subprocess.Popen(args, env=without_launcher(venv_env, **env, **slurm_env(1)), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    for line in n0.stderr:
        if until in line:
            break
    return n0, n1


@pytest.mark.timeout(150)
def test_a_frozen_node_0_does_not_hold_its_followers(venv_env, tmp_path):
    """Node 0 stops (SIGSTOP: as if frozen, powered off or cut off) once the ranks run: a follower's store
    calls block in C++ with no timeout and no signal handler runs. Its watchdog must see node 0's store go
    silent, stop the ranks and leave with exit 1 and one line, well before the deadline.

    The watchdog fires ``HEAD_SILENT_S`` (10 s) after the last answered heartbeat; the margin (45 s) covers
    a loaded machine, and is still well before the run's 60 s deadline plus its 20 s backstop."""
    from nccl_doctor.preflight.heartbeat import BACKSTOP_S, HEAD_SILENT_S, HEARTBEAT_S

    n0, n1 = _two_nodes(venv_env, tmp_path, "starting 2 ranks per node")
    try:
        os.kill(n0.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        out, _ = n1.communicate(timeout=90)
        seconds = time.monotonic() - t0
    finally:
        for p in (n0, n1):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
    print(f"the follower left {seconds:.1f} s after node 0 froze (watchdog: {HEAD_SILENT_S:.0f} s of silence)")
    # the last answered beat was up to one period before the freeze
    assert n1.returncode == 1 and HEAD_SILENT_S - HEARTBEAT_S - 1 < seconds < 45 < 60 + BACKSTOP_S, (n1.returncode, seconds)
    assert out.startswith("nccl-doctor preflight (") and "lost node 0 (localhost)" in out
    assert not [p for p in tmp_path.glob("nccl-doctor-*") if f"-{n1.pid}-" in p.name]  # (killed node 0's may stay)


@pytest.mark.timeout(120)
def test_a_late_node_told_by_the_store_exits_1_not_abort(venv_env):
    """Node 0's store says the rendezvous is closed: the follower leaves right after starting its heartbeat
    thread, whose C++ store call must not abort the exit ('terminate called ...', SIGABRT). Several times:
    the race lost more often than not."""
    from nccl_doctor.preflight.protocol import CLOSED_KEY, RUN_KEY

    port = free_port()
    store = subprocess.Popen([PY, "-c", (
        "import json,sys,time; from datetime import timedelta; import torch.distributed as d;"
        f"s=d.TCPStore('127.0.0.1',{port},is_master=True,wait_for_workers=False,timeout=timedelta(seconds=30));"
        f"s.set({RUN_KEY!r},json.dumps({{'run':'4242.0','step':'0','host':'localhost'}}));"
        f"s.set({CLOSED_KEY!r},json.dumps({{'missing':[1],'host':'localhost'}}));print('up',flush=True);time.sleep(100)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert store.stdout.readline().strip() == "up"
        for _ in range(4):
            proc = subprocess.run(preflight_argv("--port", str(port), "--timeout", "30", "--rendezvous-timeout", "10",
                                             "--format", "json"), env=without_launcher(venv_env, **slurm_env(1)),
                                  capture_output=True, text=True, timeout=40, check=False)
            assert proc.returncode == 1 and "terminate called" not in proc.stderr, (proc.returncode, proc.stderr)
            assert "arrived after node 0 stopped waiting" in proc.stdout
    finally:
        store.kill()
        store.wait()


@pytest.mark.timeout(90)
def test_a_follower_whose_launcher_dies_after_the_measurements_fails_the_run(venv_env, tmp_path):
    """The follower's launcher is SIGKILLed once the ranks run; its ranks die with it (parent-death signal),
    so the run cannot finish its measurements. Node 0 must notice the lost heartbeat and the lost ranks:
    ND407 naming that node and exit 1, not a PASS with a missing-summary note or a hang."""
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
    assert any(f["code"] == "ND407" and f["where"]["host"] == "ghost" for f in failures(doc)), failures(doc)
