"""bench refuses what cannot work before launching anything: one line, exit 2 (bad arguments, a busy or bad
rendezvous port, deadlines shorter than the start-up), or exit 1 with the probe's finding (a Gloo interface
that matches nothing). Each runs ``python -m nccl_doctor bench``; none starts torch."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from nccl_doctor.cluster.net import check_rdzv_port, free_port, port_busy, rdzv_port_origin
from nccl_doctor.cluster.torchrun import LaunchConfig
from nccl_doctor.errors import InputError


def env(**kw):
    e = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME", "MASTER_PORT"):
        e.pop(var, None)
    e.update(kw)
    return e


SECONDS = "expected a finite number of seconds, > 0 and at most 604800 (7 days)"
NOT_A_SIZE = "is not a size: expected a positive whole number with optional K/M/G (e.g. 64K, 1M, 1G)"


@pytest.mark.parametrize("argv,msg", [(["--ops", "broadcast"], "--ops: unknown op 'broadcast'"),
                                      (["--sizes", "1T"], f"--sizes '1T': '1T' {NOT_A_SIZE}"),
                                      (["--sizes", "0"], f"--sizes '0': '0' {NOT_A_SIZE}"),
                                      (["--sizes", "abc"], f"--sizes 'abc': 'abc' {NOT_A_SIZE}"),
                                      (["--sizes", "64K:1M:0.5"], "--sizes '64K:1M:0.5': the factor must be an integer >= 2"),
                                      (["--pair-size", "0"], f"--pair-size '0': '0' {NOT_A_SIZE}"),
                                      (["--groups", "rack"], "--groups: unknown rack"),
                                      (["--ops", ""], "--ops: empty"),
                                      (["--groups", " "], "--groups: empty"),
                                      (["--sizes", ""], "--sizes: empty"),
                                      (["--iters", "0"], "--iters must be >= 1"),
                                      (["--warmup", "-1"], "--warmup must be >= 0, got -1"),
                                      (["--timeout", "-5"], f"--timeout -5: {SECONDS}"),
                                      (["--timeout", "inf"], f"--timeout inf: {SECONDS}"),
                                      (["--timeout", "1e400"], f"--timeout inf: {SECONDS}"),
                                      (["--timeout", "nan"], f"--timeout nan: {SECONDS}"),
                                      (["--timeout", "604801"], f"--timeout 604801: {SECONDS}"),
                                      (["--deadline", "0"], f"--deadline 0: {SECONDS}"),
                                      (["--collective-timeout", "0"], f"--collective-timeout 0: {SECONDS}"),
                                      (["--collective-timeout", "inf"], f"--collective-timeout inf: {SECONDS}")])
def test_bad_arguments_one_line_exit_2(argv, msg, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", *argv], capture_output=True, text=True,
                          check=False, timeout=60, env=env(TMPDIR=str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"nccl-doctor bench: error: {msg}"), proc.stderr
    assert list(tmp_path.iterdir()) == []  # refused before any stage dir or launch log was made


@pytest.mark.parametrize("port", ["99999", "0", "abc"])
def test_bad_master_port_is_refused_on_one_node_too(port):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K"], capture_output=True,
                          text=True, check=False, timeout=60, env=env(MASTER_PORT=port))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "MASTER_PORT" in proc.stderr, proc.stderr



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
    assert port_busy(busy_port) == "already in use" and port_busy(free_port()) is None
    host = LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint=f"n1:{busy_port}", rdzv_id="x", is_host=True)
    with pytest.raises(InputError, match=rf"rendezvous port {busy_port} \(from --rdzv-endpoint\) is already in use on "
                                         rf".*, the rendezvous host: pick a free port, --rdzv-endpoint n1:OTHERPORT"):
        check_rdzv_port(host, "--rdzv-endpoint")
    joins = LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint=f"n1:{busy_port}", rdzv_id="x", is_host=False)
    check_rdzv_port(joins, "--rdzv-endpoint")  # another node's store: not ours to check
    two_on_one_box = LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint=f"127.0.0.1:{busy_port}", rdzv_id="x")
    check_rdzv_port(two_on_one_box, "--rdzv-endpoint")  # torchrun decides: the second launcher joins the first
    assert rdzv_port_origin(None, {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"}, 2) == "29500 + job id % 1000"



def test_busy_master_port_on_one_node_is_one_line_exit_2_at_once(busy_port, tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K", "--timeout", "30"],
                          capture_output=True, text=True, check=False, timeout=60,
                          env=env(MASTER_PORT=str(busy_port), TMPDIR=str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert f"rendezvous port {busy_port} (from MASTER_PORT) is already in use" in proc.stderr
    assert "set MASTER_PORT to a free port" in proc.stderr and time.monotonic() - t0 < 20
    assert list(tmp_path.iterdir()) == []  # nothing launched


@pytest.mark.parametrize("argv,msg", [
    (["--timeout", "1"], "--timeout 1: the minimum is 10 seconds (the whole run, start-up of torchrun"),
    (["--timeout", "5e-324"], "--timeout 4.94066e-324: the minimum is 10 seconds"),
    (["--deadline", "3"], "--deadline 3: the minimum is 10 seconds"),
    (["--collective-timeout", "0.001"], "--collective-timeout 0.001: the minimum is 5 seconds (init_process_group")])
def test_deadlines_below_the_start_up_are_refused_naming_the_minimum(argv, msg, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", *argv], capture_output=True, text=True,
                          check=False, timeout=60, env=env(TMPDIR=str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"nccl-doctor bench: error: {msg}"), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_gloo_ifname_cli_exits_1_without_launching(venv_env):
    env = {**venv_env, "GLOO_SOCKET_IFNAME": "nonexistent9"}
    p = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--cpu", "--format", "json"], env=env,
                       capture_output=True, text=True, check=False, timeout=60)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["stage"] == "probe" and [f["code"] for f in doc["findings"]] == ["ND216"]
    assert "torch" not in p.stderr  # nothing was launched
