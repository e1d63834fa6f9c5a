"""The attack of issue 11 on a real ``bench`` run: a client on the network writes pickles whose unpickling runs
``touch MARKER`` into the rendezvous store's keys (torch's dynamic rendezvous state, bare and prefixed, and our
own rendezvous flags) while two launchers meet there. bench's rendezvous unpickles nothing: the marker never
appears and the run passes. The same client against torch's own dynamic rendezvous (``--rdzv-backend=c10d``,
what bench used to launch) runs the payload: the attacker is real, and this test fails on the old launch."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_doctor.cluster.net import free_port
from tests.helpers.launch import launch_env
from tests.helpers.netns import communicate_or_kill

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[2]
RDZV_ID = "nccl-doctor"  # bench's default outside Slurm: as guessable as Slurm's slurm-<job id>
LATE_S = 4.0  # the second node arrives this late: node 0 waits in the rendezvous while the attacker writes
MIN_WRITES = 20


def _attacker(port: int, marker: Path, stop: Path, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.rdzv_attack", "127.0.0.1", str(port), RDZV_ID,
                             str(marker), str(seconds), str(stop)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # (its refused connects are C++ warnings)


def _stop(attacker: subprocess.Popen[str], stop: Path) -> dict[str, object]:
    stop.touch()
    out, _ = communicate_or_kill(attacker, 30)
    return json.loads(out) if out.strip() else {}


def test_pickles_written_into_bench_rendezvous_store_never_run(tmp_path):
    marker, stop = tmp_path / "payload-ran", tmp_path / "stop"
    port = free_port()
    argv = [sys.executable, "-m", "nccl_doctor", "bench", "--nnodes", "2", "--nproc-per-node", "1",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--ops", "ag", "--groups", "world", "--sizes", "64K,1M",
            "--no-pairs", "--timeout", "90", "--format", "json"]
    env = launch_env(tmp_path)
    nodes: list[subprocess.Popen[str]] = []
    attacker = _attacker(port, marker, stop, 150)
    try:
        nodes.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        time.sleep(LATE_S)
        nodes.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [communicate_or_kill(p, 120) for p in nodes]
    finally:
        stats = _stop(attacker, stop)
        for p in nodes:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert not marker.exists(), "the pickled payload ran"
    assert stats.get("connected") and int(stats.get("writes", 0)) >= MIN_WRITES, stats  # the attack did happen
    docs = [json.loads(o) for o, _ in outs if o.strip()]
    assert [p.returncode for p in nodes] == [0, 0] and len(docs) == 1, "\n".join(e[-2500:] for _, e in outs)
    assert docs[0]["verdict"] in ("pass", "warn") and docs[0]["world_size"] == 2 and docs[0]["nnodes"] == 2
    assert all("Traceback" not in e for _, e in outs)
    print("attacker:", stats)


def test_the_same_attack_runs_code_in_torchs_dynamic_rendezvous(tmp_path):
    """The control: torchrun with ``--rdzv-backend=c10d`` (bench's old launch) unpickles the payload."""
    marker, stop = tmp_path / "payload-ran", tmp_path / "stop"
    port = free_port()
    script = tmp_path / "noop.py"
    script.write_text("pass\n")
    with open(tmp_path / "torchrun.log", "w") as log:
        victim = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                                   "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={RDZV_ID}",
                                   str(script)], env=launch_env(tmp_path), stdout=log, stderr=log, start_new_session=True)
    attacker = _attacker(port, marker, stop, 60)
    try:
        out, _ = communicate_or_kill(attacker, 90)
    finally:
        stop.touch()
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
    stats = json.loads(out)
    assert marker.exists() and stats["marker"], (stats, (tmp_path / "torchrun.log").read_text()[-2000:])
    print("attacker against --rdzv-backend=c10d:", stats)
