"""Review 3 of `bench` across nodes: uneven rank counts (A), a busy rendezvous port (B), deadlines too short
to mean anything (C), c10d noise on the terminal (D)."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from nccl_doctor.bench import command as bench
from nccl_doctor.cluster import launch as L
from nccl_doctor.errors import InputError

bw = pytest.importorskip("nccl_doctor.bench.worker")


def env(**kw):
    e = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME", "MASTER_PORT"):
        e.pop(var, None)
    e.update(kw)
    return e


def nodes_of(*rank_lists):
    return [bw.NodeInfo(index=i, host=f"n{i + 1}", ranks=tuple(r), iface="eth1", link_gbps=1.25)
            for i, r in enumerate(rank_lists)]


def result_of(nodes, skipped):
    return bw.BenchResult(backend="gloo", device="cpu", world_size=sum(len(n.ranks) for n in nodes),
                          local_world_size=len(nodes[0].ranks), nodes=nodes, skipped=skipped,
                          results=[bw.Measurement(op="all_gather", group="world", group_size=3, size_bytes=1 << 20,
                                                  count=1, iters=5, time_us=1.0, algbw_gbps=1.0, busbw_gbps=1.0,
                                                  wrong=0)])


# --- A: different rank counts per node ---------------------------------------------------------------
def test_uneven_rank_counts_name_the_odd_node_its_count_and_the_fix():
    nodes = nodes_of((0, 1), (2,))  # --nproc-per-node 2 on n1, 1 on n2
    groups, skipped = bw.build_groups(nodes, "cpu", ("world", "intra", "inter"))
    assert set(groups) == {"world"} and len(skipped) == 2
    [f] = bench.coverage(result_of(nodes, skipped), asked=False)  # the default groups: still named
    assert (f.code, f.severity.value, f.where.host) == ("ND001", "warn", "n2")
    assert "n2 runs 1 rank, n1 runs 2 ranks" in f.message and "intra and inter" in f.message
    assert "--nproc-per-node" in f.fix and "CUDA_VISIBLE_DEVICES" in f.fix and "on n2" in f.fix
    # --groups intra,inter named by the user: one finding for the shape, not one more per group
    assert [x.code for x in bench.coverage(result_of(nodes, skipped), asked=True)] == ["ND001"]


def test_uneven_rank_counts_odd_nodes_in_hostlist_form_even_when_node_0_is_odd():
    nodes = nodes_of((0,), (1, 2), (3, 4), (5, 6), (7,))  # n1 and n5 run 1 rank, the rest 2
    groups, skipped = bw.build_groups(nodes, "cpu", ("intra", "inter"))
    assert groups == {} and all("n[1,5] run 1 rank" in s for s in skipped), skipped  # not "needs 2+ ranks"
    [f] = bench.coverage(result_of(nodes, skipped), asked=True)
    assert f.where.host == "n[1,5]" and "n[1,5] run 1 rank, n[2-4] run 2 ranks" in f.message


def test_ranks_not_numbered_node_by_node_are_named():
    nodes = nodes_of((0, 2), (1, 3))
    _, skipped = bw.build_groups(nodes, "cpu", ("intra", "inter"))
    [f] = bench.coverage(result_of(nodes, skipped), asked=False)
    assert "not numbered node by node (n1 holds ranks 0, 2)" in f.message and f.where.host == "n[1-2]"
    assert bench.coverage(result_of(nodes_of((0, 1), (2, 3)), []), asked=False) == []  # HSDP-shaped: nothing


# --- B: the rendezvous port is busy on the rendezvous host ---------------------------------------------
@pytest.fixture
def busy_port():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 0))
    s.listen(5)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def test_busy_port_is_found_before_torchrun_only_where_this_node_hosts_the_store(busy_port):
    assert L.port_busy(busy_port) == "already in use" and L.port_busy(L.free_port()) is None
    host = L.LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint=f"n1:{busy_port}", rdzv_id="x", is_host=True)
    with pytest.raises(InputError, match=rf"rendezvous port {busy_port} \(from --rdzv-endpoint\) is already in use on "
                                         rf".*, the rendezvous host: pick a free port, --rdzv-endpoint n1:OTHERPORT"):
        L.check_rdzv_port(host, "--rdzv-endpoint")
    joins = L.LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint=f"n1:{busy_port}", rdzv_id="x", is_host=False)
    L.check_rdzv_port(joins, "--rdzv-endpoint")  # another node's store: not ours to check
    two_on_one_box = L.LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint=f"127.0.0.1:{busy_port}", rdzv_id="x")
    L.check_rdzv_port(two_on_one_box, "--rdzv-endpoint")  # torchrun decides: the second launcher joins the first
    assert L.rdzv_port_origin(None, {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"}, 2) == "29500 + job id % 1000"


def test_busy_master_port_on_one_node_is_one_line_exit_2_at_once(busy_port, tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K", "--timeout", "30"],
                          capture_output=True, text=True, timeout=60,
                          env=env(MASTER_PORT=str(busy_port), TMPDIR=str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert f"rendezvous port {busy_port} (from MASTER_PORT) is already in use" in proc.stderr
    assert "set MASTER_PORT to a free port" in proc.stderr and time.monotonic() - t0 < 20
    assert list(tmp_path.iterdir()) == []  # nothing launched


@pytest.mark.netns
def test_busy_port_on_the_rendezvous_host_across_nodes(cluster_factory, venv_env, tmp_path):
    """The reviewer's case: --nnodes 2 --rdzv-endpoint n1:PORT with PORT bound on n1 by another program."""
    c = cluster_factory(1)
    n1 = c.nodes[0]
    listener = c.popen(n1, [sys.executable, "-c", "import socket,time; s=socket.socket(); s.bind(('0.0.0.0', 29623)); "
                                                  "s.listen(5); print('up', flush=True); time.sleep(60)"],
                       stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline() == "up\n"
        r = c.run(n1, [sys.executable, "-m", "nccl_doctor", "bench", "--nnodes", "2", "--rdzv-endpoint", "n1:29623",
                       "--timeout", "30"], env={**venv_env, "TMPDIR": str(tmp_path)}, timeout=60)
    finally:
        listener.kill()
        listener.wait()
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert "rendezvous port 29623 (from --rdzv-endpoint) is already in use on n1, the rendezvous host" in r.stderr
    assert "--rdzv-endpoint n1:OTHERPORT (the same on every node)" in r.stderr and "Traceback" not in r.stderr


TORCHRUN_BUSY = b"""Traceback (most recent call last):
  File "/v/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 156, in _create_tcp_store
    store = TCPStore(
            ^^^^^^^^^
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29623, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "/v/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>
    main()
  File "/v/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 343, in launch_agent
    rdzv_handler=rdzv_registry.get_rendezvous_handler(rdzv_parameters),
  File "/v/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 180, in _create_tcp_store
    raise RendezvousConnectionError(
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
"""

WORKER_CRASH = b"""Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/w/nccl_doctor/__main__.py", line 5, in <module>
  File "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 9, in init_process_group
RuntimeError: a worker's own crash stays visible
"""


def feed_all(filt, data):
    return (b"".join(x for line in data.splitlines(keepends=True) for x in filt.feed(line))
            + b"".join(filt.flush())).decode()


def test_torchrun_traceback_never_reaches_the_terminal_and_its_error_reaches_the_report():
    f = L.StderrFilter()
    assert feed_all(f, TORCHRUN_BUSY + b"after\n") == "after\n"
    assert "EADDRINUSE" in f.errors[0] and "RendezvousConnectionError" in f.errors[1]
    assert feed_all(L.StderrFilter(), WORKER_CRASH) == WORKER_CRASH.decode()
    cfg = L.LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint="n1:29623", rdzv_id="x", is_host=True)
    out = L.LaunchOutcome(returncode=1, timed_out=False, elapsed_s=3, stages=(), host="n1", cfg=cfg,
                          launcher_error=f.errors[0])
    text = out.describe()
    assert text.startswith("torchrun exited with code 1 before starting any worker on n1") and "EADDRINUSE" in text
    assert "did not join" not in text


# --- C: deadlines too short to mean anything ----------------------------------------------------------
@pytest.mark.parametrize("argv,msg", [
    (["--timeout", "1"], "--timeout 1: the minimum is 10 seconds (the whole run, start-up of torchrun"),
    (["--timeout", "5e-324"], "--timeout 4.94066e-324: the minimum is 10 seconds"),
    (["--deadline", "3"], "--deadline 3: the minimum is 10 seconds"),
    (["--collective-timeout", "0.001"], "--collective-timeout 0.001: the minimum is 5 seconds (init_process_group")])
def test_deadlines_below_the_start_up_are_refused_naming_the_minimum(argv, msg, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", *argv], capture_output=True, text=True,
                          timeout=60, env=env(TMPDIR=str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"nccl-doctor bench: error: {msg}"), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_preflight_keeps_its_own_bounds():
    """bench's minimums are bench's: preflight's short timeouts (tests, quick gates) stay valid."""
    import argparse

    from nccl_doctor.preflight import command as preflight

    p = argparse.ArgumentParser()
    preflight.add_arguments(p)
    preflight.check_args(p.parse_args(["--timeout", "5", "--collective-timeout", "1", "--rendezvous-timeout", "1"]))


def test_torchrun_phase_from_its_log_dir(tmp_path):
    assert L.torchrun_phase(tmp_path) == "starting"
    run = tmp_path / "torchelastic_abc" / "nccl-doctor_xyz"
    run.mkdir(parents=True)
    assert L.torchrun_phase(tmp_path) == "rendezvous"
    (run / "attempt_0").mkdir()
    assert L.torchrun_phase(tmp_path) == "workers"
    assert L.torchrun_phase(tmp_path / "gone") is None


def test_deadline_before_torchrun_started_says_so(tmp_path, monkeypatch):
    """A launcher still starting when the deadline fires: "start-up", not a network cause."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    cfg = L.LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:1", rdzv_id="x", deadline_s=1)
    t0 = time.monotonic()
    out = L.self_launch(["bench"], cfg, python=str(slow), grace_s=2)
    assert time.monotonic() - t0 < 10 and out.timed_out and out.phase == "starting"
    assert out.stuck_stage() == "start-up"
    text = out.describe()
    assert text.startswith("deadline of 1 s expired during start-up on ") and "still importing torch" in text
    assert "shorter than the start-up took" in text and "cannot open or reach" not in text
    assert "--timeout" in bench._stage_fix("start-up")
    os.unlink(out.log_path)


# --- D: c10d noise ------------------------------------------------------------------------------------
HOSTNAME_WARN = b"[W1130 12:41:53.153939801 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved. err=-3\n"
STORE_RACE = b"""[W1130 12:50:01.123456789 TCPStore.cpp:138] [c10d] recvVector failed on SocketImpl(fd=5, addr=[n2]:40000, remote=[n1]:29622): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?
Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in /v/torch/lib/libc10.so)
frame #1: <unknown function> + 0x5ba8bfe (0x7f in /v/torch/lib/libtorch_cpu.so)
frame #2: c10d::TCPStore::compareSet(std::string const&, std::vector<unsigned char> const&) + 0x2a9 (0x7f in /v/torch/lib/libtorch_cpu.so)

"""


def test_c10d_noise_and_shutdown_race_dumps_are_kept_off_the_terminal():
    f = L.StderrFilter()
    shown = feed_all(f, HOSTNAME_WARN + b"nccl-doctor bench: [1/2] all_gather world 1 MiB: busbw 0.4 GB/s\n"
                     + STORE_RACE + HOSTNAME_WARN + b"a later line\n")
    assert shown == "nccl-doctor bench: [1/2] all_gather world 1 MiB: busbw 0.4 GB/s\na later line\n"
    assert b"".join(f.deferred) == STORE_RACE  # shown only if the run failed
    # a rank's prefix, and other c10d warnings (not known harmless) still show
    other = b"[rank1]:[W1130 12:50:01.1 ProcessGroupGloo.cpp:1] [c10d] something new\n"
    assert feed_all(L.StderrFilter(), other) == other.decode()


@pytest.mark.parametrize("code", [0, 1])
def test_store_race_dump_shows_only_when_the_run_failed(code, tmp_path, monkeypatch, capfd):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fake = tmp_path / "fake-python"
    dump = (HOSTNAME_WARN + STORE_RACE).decode().replace("'", "")
    fake.write_text(f"#!/bin/sh\nprintf '%s' '{dump}' >&2\nexit {code}\n")
    fake.chmod(0o755)
    cfg = L.LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:1", rdzv_id="x", deadline_s=30)
    out = L.self_launch(["bench"], cfg, python=str(fake))
    err = capfd.readouterr().err
    assert "hostname of the client socket" not in err
    assert ("recvVector failed" in err) == (code != 0), err
    if out.log_path:
        assert "recvVector failed" in open(out.log_path).read()  # the log keeps everything
        os.unlink(out.log_path)


@pytest.mark.netns
def test_uneven_nodes_warn_by_name_and_a_passing_run_prints_no_c10d_noise(cluster_factory, venv_env, tmp_path):
    """A end to end, D's terminal: n1 runs 2 ranks, n2 1; the JSON names n2; neither node's stderr shows c10d's
    hostname warning (which every multi-node run printed twice per node)."""
    c = cluster_factory(2)
    base = ["--nnodes", "2", "--rdzv-endpoint", f"n1:{L.free_port()}", "--ops", "all_gather", "--sizes", "1M",
            "--iters", "5", "--pair-size", "1M", "--timeout", "90", "--format", "json"]
    procs = [c.popen(n, [sys.executable, "-m", "nccl_doctor", "bench", *base, "--nproc-per-node", k],
                     env={**venv_env, "TMPDIR": str(tmp_path)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True) for n, k in zip(c.nodes, ("2", "1"))]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=120))
        finally:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-3000:]
    doc = json.loads(outs[0][0])
    assert doc["verdict"] == "warn" and doc["world_size"] == 3
    [f] = [f for f in doc["findings"] if f["code"] == "ND001"]
    assert f["where"]["host"] == "n2" and "n2 runs 1 rank, n1 runs 2 ranks" in f["message"]
    for _, err in outs:
        assert "hostname of the client socket" not in err and "Traceback" not in err, err[-2000:]
