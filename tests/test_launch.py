"""Launcher glue: Slurm env, GPU count, the cross-host workarounds, stage files, the deadline."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from nccl_doctor.cluster import launch as L
from nccl_doctor.errors import InputError

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[07-09],login1", "SLURM_JOB_NUM_NODES": "4",
         "SLURM_NNODES": "4"}


def test_slurm_config_from_env():
    s = L.slurm_launch_config(SLURM)
    assert s.hosts == ("gpu07", "gpu08", "gpu09", "login1")
    assert (s.nnodes, s.rdzv_host, s.port, s.rdzv_id) == (4, "gpu07", 29500 + 242, "slurm-4242")


def test_slurm_step_wins_and_master_port_overrides():
    env = {**SLURM, "SLURM_STEP_NODELIST": "gpu[08-09]", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_ID": "3",
           "SLURM_STEP_NUM_TASKS": "2", "MASTER_PORT": "31000", "SLURM_GPUS_ON_NODE": "8"}
    s = L.slurm_launch_config(env)
    assert (s.nnodes, s.rdzv_host, s.port, s.rdzv_id, s.gpus_on_node, s.tasks_per_node) == \
        (2, "gpu08", 31000, "slurm-4242.3", 8, 1)


def test_no_slurm_and_bad_nodelist():
    assert L.slurm_launch_config({}) is None
    with pytest.raises(InputError, match="cannot expand SLURM node list"):
        L.slurm_launch_config({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "n[1-"})


def test_visible_gpus(tmp_path):
    assert L.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,3"}, tmp_path) == 3
    assert L.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, tmp_path) == 0
    assert L.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, tmp_path) == 0
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert L.visible_gpus({}, tmp_path) == 2


def fake_route(local: bool, loop: bool = False):
    def route(host, port):
        return L.Route(peer_ip="127.0.0.1" if loop else "198.18.0.1", local_ip="198.18.0.2", iface="eth1",
                       is_local=local or loop, loopback=loop)
    return route


def test_plan_under_slurm_fills_everything_and_gloo_iface():
    env = {**SLURM, "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"}
    cfg = L.plan_launch(nnodes=None, nproc_per_node=None, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=60,
                        deadline_s=30, env=env, route=fake_route(local=False))
    assert (cfg.nnodes, cfg.nproc_per_node, cfg.rdzv_endpoint, cfg.rdzv_id) == (2, 2, "n1:29742", "slurm-4242")
    assert (cfg.is_host, cfg.local_addr, cfg.extra_env) == (False, "198.18.0.2", {"GLOO_SOCKET_IFNAME": "eth1"})
    argv = L.torchrun_argv(cfg, ["bench", "--iters", "3"], python="py")
    assert argv[:3] == ["py", "-m", "torch.distributed.run"]
    assert "--rdzv-conf=join_timeout=60,is_host=0" in argv and "--local-addr=198.18.0.2" in argv
    assert "--max-restarts=0" in argv and argv[-5:] == ["-m", "nccl_doctor", "bench", "--iters", "3"]


def test_plan_keeps_user_gloo_iface_and_lets_torchrun_decide_on_loopback():
    cfg = L.plan_launch(nnodes=2, nproc_per_node=1, rdzv_endpoint="127.0.0.1:1234", rdzv_id="x",
                        join_timeout_s=60, deadline_s=30, env={}, route=fake_route(local=False, loop=True))
    assert cfg.is_host is None and cfg.local_addr is None and cfg.extra_env == {}
    cfg = L.plan_launch(nnodes=2, nproc_per_node=1, rdzv_endpoint="n1:1234", rdzv_id="x", join_timeout_s=60,
                        deadline_s=30, env={"GLOO_SOCKET_IFNAME": "ib0"}, route=fake_route(local=True))
    assert cfg.is_host is True and cfg.extra_env == {}


def test_plan_rejects_multinode_without_endpoint_and_multitask_steps():
    with pytest.raises(InputError, match="--rdzv-endpoint"):
        L.plan_launch(nnodes=2, nproc_per_node=1, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=1,
                      deadline_s=1, env={})
    env = {**SLURM, "SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": "gpu07"}
    with pytest.raises(InputError, match="--ntasks-per-node=1"):
        L.plan_launch(nnodes=None, nproc_per_node=None, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=1,
                      deadline_s=1, env=env)


def test_single_node_default_is_local_with_cpu_ranks():
    cfg = L.plan_launch(nnodes=None, nproc_per_node=None, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=1,
                        deadline_s=1, env={"CUDA_VISIBLE_DEVICES": ""})
    assert cfg.nnodes == 1 and cfg.nproc_per_node == 2 and cfg.rdzv_endpoint.startswith("127.0.0.1:")


def test_route_to_loopback_is_local():
    r = L.route_to("127.0.0.1", 29500)
    assert r.loopback and r.is_local and r.local_ip == "127.0.0.1" and r.iface == "lo"
    with pytest.raises(InputError, match="cannot resolve"):
        L.route_to("no-such-host.invalid", 1)


def test_stage_files_roundtrip_and_describe(tmp_path):
    env = {L.STAGE_DIR_ENV: str(tmp_path)}
    L.StageFile(0, "n1", env).set("done", code=1)
    L.StageFile(1, "n1", env).set("all_gather inter 1 MiB")
    assert not L.StageFile(0, "n1", {}).managed
    stages = L.read_stages(tmp_path)
    assert [(s.rank, s.stage, s.code) for s in stages] == [(0, "done", 1), (1, "all_gather inter 1 MiB", None)]
    cfg = L.LaunchConfig(nnodes=2, nproc_per_node=3, rdzv_endpoint="n1:1", rdzv_id="x", deadline_s=9)
    out = L.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=9, stages=tuple(stages), host="n1", cfg=cfg)
    assert out.worker_code == 1 and out.stuck_stage() == "all_gather inter 1 MiB"
    text = out.describe()
    assert "deadline of 9 s expired in stage all_gather inter 1 MiB on n1" in text
    assert "rank 1 in all_gather inter 1 MiB" in text and "1 local rank(s) never started" in text
    empty = L.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=9, stages=(), host="n2", cfg=cfg)
    assert "stage rendezvous: no worker started on n2 (waiting for 2 nodes at n1:1" in empty.describe()
    assert "the other nodes did not join" in empty.describe()
    alone = L.LaunchOutcome(returncode=-15, timed_out=True, elapsed_s=9, stages=(), host="n2",
                            cfg=L.LaunchConfig(nproc_per_node=2, rdzv_endpoint="n2:1", rdzv_id="x", deadline_s=9))
    assert "a 1-node rendezvous at n2:1" in alone.describe() and "other nodes" not in alone.describe()


def _outcome(rc, codes, timed_out=False):
    cfg = L.LaunchConfig(nproc_per_node=len(codes), rdzv_endpoint="h:1", rdzv_id="x")
    stages = tuple(L.StageRecord(rank=r, host="h", stage="done", since=0.0, code=c) for r, c in enumerate(codes))
    return L.LaunchOutcome(returncode=rc, timed_out=timed_out, elapsed_s=1, stages=stages, host="h", cfg=cfg)


def test_final_code_is_never_below_what_the_workers_exited_with():
    assert _outcome(0, [0, 0]).final_code() == 0
    assert _outcome(0, [1, 1]).final_code() == 1  # the shared verdict, workers exited 0 on purpose
    assert _outcome(1, [0, 0]).final_code() == 1  # a recorded 0, then a rank failed: never 0
    assert _outcome(1, [2, 0]).final_code() == 2  # rank 0 could not write its output: its 2 wins over torchrun's 1
    assert _outcome(-9, [0, 0]).final_code() == 1  # torchrun killed by a signal
    assert _outcome(1, [None, None]).final_code() is None  # no verdict: the launcher reports
    assert _outcome(-15, [0, 0], timed_out=True).final_code() is None


@pytest.mark.parametrize("text,msg", [
    ("host:99999", "port 99999 is not a TCP port (1-65535)"), ("host:0", "port 0 is not a TCP port"),
    ("nohostport", "is not HOST:PORT"), (":abc", "is not HOST:PORT"), (":29500", "is not HOST:PORT"),
    ("host:", "is not HOST:PORT")])
def test_rdzv_endpoint_syntax_and_port_range(text, msg):
    with pytest.raises(InputError, match=re.escape(msg)):
        L.parse_endpoint(text)


def test_rdzv_endpoint_parses_and_resolves():
    assert L.parse_endpoint("n1:29500") == ("n1", 29500)
    assert L.parse_endpoint("[::1]:29500") == ("::1", 29500)
    L.resolve("127.0.0.1", "--rdzv-endpoint")
    with pytest.raises(InputError, match="--rdzv-endpoint: cannot resolve host 'no-such-host.invalid'"):
        L.resolve("no-such-host.invalid", "--rdzv-endpoint")
    with pytest.raises(InputError, match="cannot resolve host"):
        L.plan_launch(nnodes=1, nproc_per_node=1, rdzv_endpoint="no-such-host.invalid:29500", rdzv_id=None,
                      join_timeout_s=1, deadline_s=1, env={})
    with pytest.raises(InputError, match="MASTER_PORT 70000 is not a TCP port"):
        L.slurm_launch_config({**SLURM, "MASTER_PORT": "70000"})


@pytest.mark.parametrize("argv,msg", [
    (["--rdzv-endpoint", "host:99999"], "--rdzv-endpoint 'host:99999': port 99999 is not a TCP port (1-65535)"),
    (["--rdzv-endpoint", "nohostport"], "--rdzv-endpoint 'nohostport' is not HOST:PORT"),
    (["--rdzv-endpoint", "no-such-host.invalid:29500"], "cannot resolve host 'no-such-host.invalid'")])
def test_bad_rdzv_endpoint_cli_one_line_exit_2_at_once(argv, msg):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", *argv], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and msg in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 20 and proc.stdout == ""


def test_deadline_kills_the_group_and_names_rendezvous():
    """A 2-node run whose second node never comes: the parent's deadline fires and says so."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--nnodes", "2", "--nproc-per-node", "1",
                           "--rdzv-endpoint", f"127.0.0.1:{L.free_port()}", "--timeout", "10", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < 30
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert doc["stage"] == "rendezvous" and doc["timed_out"] is True
    (f,) = doc["findings"]
    assert f["code"] == "ND309" and "no worker started" in f["message"] and "waiting for 2 nodes" in f["message"]
    os.unlink(doc["worker_log"])  # kept for the user after a failure


def test_stderr_filter_drops_torchrun_dump_and_keeps_worker_lines():
    dump = b"""nccl-doctor bench: [1/3] all_gather world 64 KiB: busbw 0.057 GB/s
W1130 10:18:48.603000 19427 .venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 19433 closing signal SIGTERM
Traceback (most recent call last):
  File "/x/torch/distributed/run.py", line 1032, in <module>
    main()
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
nccl_doctor FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
============================================================
Traceback (most recent call last):
  File "worker.py", line 1, in <module>
ValueError: a worker's own crash stays visible
after the dump
"""
    f = L.StderrFilter()
    shown = b"".join(x for line in dump.splitlines(keepends=True) for x in f.feed(line)) + b"".join(f.flush())
    text = shown.decode()
    assert "ChildFailedError" not in text and "FAILED" not in text and "SIGTERM" not in text and "====" not in text
    assert text.startswith("nccl-doctor bench: [1/3]") and "ValueError: a worker's own crash stays visible" in text
    assert text.rstrip().endswith("after the dump") and text.count("Traceback") == 1


def test_stderr_filter_drops_torchrun_signal_traceback_on_interrupt():
    """Ctrl-C: we SIGTERM torchrun, which dies with a SignalException traceback; the user pressed the key."""
    dump = b"""nccl-doctor bench: [3/15] all_gather world 256 KiB: busbw 0.267 GB/s
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/x/torch/distributed/elastic/agent/server/api.py", line 923, in _invoke_run
    time.sleep(monitor_interval)
  File "/x/torch/distributed/elastic/multiprocessing/api.py", line 86, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 15513 got signal: 15
"""
    f = L.StderrFilter()
    shown = b"".join(x for line in dump.splitlines(keepends=True) for x in f.feed(line)) + b"".join(f.flush())
    assert shown.decode() == "nccl-doctor bench: [3/15] all_gather world 256 KiB: busbw 0.267 GB/s\n"


def test_ctrl_c_exits_130_without_torchrun_traceback(tmp_path):
    """SIGINT to the parent (Ctrl-C): it stops the workers and says `interrupted`, with none of torchrun's noise,
    and leaves no stage dir or launch log behind."""
    import signal

    env = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME"):
        env.pop(var, None)
    proc = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K:64M", "--no-pairs"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stderr.readline()  # the first progress line: the workers are measuring
        assert "[1/" in first, first
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and time.monotonic() - t0 < 15
    assert err.rstrip().endswith("nccl-doctor bench: interrupted"), err[-2000:]
    assert "Traceback" not in err and "SignalException" not in err, err[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_master_port_and_default_ranks_are_one_rule_for_bench_and_preflight():
    assert L.port_from_env({}) is None and L.port_from_env({"MASTER_PORT": ""}) is None
    assert L.port_from_env({"MASTER_PORT": "31000"}) == 31000
    with pytest.raises(InputError, match="MASTER_PORT='x1' is not a number"):
        L.port_from_env({"MASTER_PORT": "x1"})
    with pytest.raises(InputError, match="MASTER_PORT 70000 is not a TCP port"):
        L.port_from_env({"MASTER_PORT": "70000"})
    slurm = L.slurm_launch_config({**SLURM, "SLURM_GPUS_ON_NODE": "4"})
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    assert L.default_nproc({"CUDA_VISIBLE_DEVICES": "0,1,2"}, slurm) == 3
    assert L.default_nproc(no_gpu, slurm) == 4 and L.default_nproc(no_gpu, None) == 2
    assert L.default_nproc({"CUDA_VISIBLE_DEVICES": "0,1,2"}, slurm, cpu=True) == 2


def test_gloo_iface_to_is_the_routed_interface_never_loopback():
    assert L.gloo_iface_to("n1", 1, route=fake_route(local=False)) == "eth1"
    assert L.gloo_iface_to("127.0.0.1", 1, route=fake_route(local=True, loop=True)) is None
    assert L.gloo_iface_to("127.0.0.1", 29500) is None  # the real route: lo
    assert L.gloo_iface_to("no-such-host.invalid", 1) is None  # best effort: Gloo falls back to the hostname


def test_kill_groups_terms_then_kills_what_ignores_term():
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN) if sys.argv[1] == 'stubborn' "
            "else None; print('ready', flush=True); time.sleep(60)")
    procs = [subprocess.Popen([sys.executable, "-c", code, kind], start_new_session=True, stdout=subprocess.PIPE)
             for kind in ("polite", "stubborn")]
    try:
        for p in procs:
            assert p.stdout.readline() == b"ready\n"
        t0 = time.monotonic()
        assert L.kill_groups(procs, grace_s=0.5) == [-15, -9]
        assert time.monotonic() - t0 < 5
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_deadline_options_must_be_finite_and_sane():
    assert L.check_seconds(0.5, "--timeout") == 0.5 and L.check_seconds(L.MAX_SECONDS, "--timeout") == L.MAX_SECONDS
    for bad in (0.0, -1.0, float("inf"), float("nan"), L.MAX_SECONDS + 1.0):
        with pytest.raises(InputError, match=r"^--timeout .*: expected a finite number of seconds"):
            L.check_seconds(bad, "--timeout")


def test_self_launch_that_cannot_start_leaves_nothing_behind(tmp_path, monkeypatch):
    """A plan torchrun cannot take (a join timeout of inf) fails before any stage dir or log exists."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cfg = L.LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:1", rdzv_id="x", join_timeout_s=float("inf"))
    with pytest.raises(OverflowError):
        L.self_launch(["bench"], cfg)
    assert list(tmp_path.iterdir()) == []
    bad_python = L.LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:1", rdzv_id="x")
    with pytest.raises(OSError):  # the launcher itself cannot start: the stage dir and log go too
        L.self_launch(["bench"], bad_python, python=str(tmp_path / "no-python"))
    assert list(tmp_path.iterdir()) == []


def test_private_dirs_of_dead_processes_are_removed_by_the_next_run(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = L._host_tag()
    stale = tmp_path / f"nccl-doctor-stages-{tag}-{dead.pid}-abc"
    live = tmp_path / f"nccl-doctor-stages-{tag}-{os.getpid()}-def"  # a run still going: kept
    other_host = tmp_path / f"nccl-doctor-stages-{tag}x-{dead.pid}-ghi"  # another node on a shared /tmp: kept
    other_kind = tmp_path / f"nccl-doctor-nccl-logs-{tag}-{dead.pid}-jkl"
    for d in (stale, live, other_host, other_kind):
        d.mkdir()
    (stale / "rank0.json").write_text("{}")
    fresh = L.private_dir("stages", str(tmp_path))
    assert not stale.exists() and live.is_dir() and other_host.is_dir() and other_kind.is_dir()
    assert fresh.name.startswith(f"nccl-doctor-stages-{tag}-{os.getpid()}-") and fresh.is_dir()


def test_one_node_rendezvous_port_is_master_port_when_set():
    cfg = L.plan_launch(nnodes=1, nproc_per_node=1, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=60,
                        deadline_s=30, env={"MASTER_PORT": "31234"})
    assert cfg.rdzv_endpoint == "127.0.0.1:31234"
    with pytest.raises(InputError, match="MASTER_PORT 99999 is not a TCP port"):
        L.plan_launch(nnodes=1, nproc_per_node=1, rdzv_endpoint=None, rdzv_id=None, join_timeout_s=60,
                      deadline_s=30, env={"MASTER_PORT": "99999"})
