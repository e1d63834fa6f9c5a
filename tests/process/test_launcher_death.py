"""A SIGKILLed launcher takes its children with it (issue 11, point 9): bench's torchrun (and torchrun its
ranks), and preflight's ranks, all started in sessions of their own, die within seconds
(``cluster.die_with_parent``: the kernel's parent-death signal), and the launch log and stage dir the dead
launcher left are removed by the next run. Each case is one where the children used to live on."""

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from nccl_doctor.cluster.net import free_port
from tests.helpers.launch import launch_env

pytestmark = pytest.mark.torch
GONE_WITHIN_S = 5.0
START_S = 120.0  # the ranks' start-up on a loaded 2-core box


def _kill_and_watch(launcher: subprocess.Popen[str], kids: list[psutil.Process]) -> list[psutil.Process]:
    """SIGKILL the launcher; the children still alive ``GONE_WITHIN_S`` later (killed then, for the teardown)."""
    launcher.kill()
    launcher.wait()
    _, alive = psutil.wait_procs(kids, timeout=GONE_WITHIN_S)
    for p in alive:
        p.kill()
    return alive


def _leftovers(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    return sorted(tmp_path.glob("nccl-doctor-launch-*.log")), sorted(tmp_path.glob("nccl-doctor-stages-*"))


def _wait_for(what: str, ready, timeout_s: float = START_S) -> None:
    end = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_sigkilled_bench_launcher_takes_torchrun_and_its_log_goes_next_run(tmp_path):
    """Killed while torchrun waits in the rendezvous for a node that never comes: torchrun writes nothing
    then (no broken pipe to end it), and used to wait out its join timeout, holding the port."""
    env = launch_env(tmp_path)
    launcher = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "bench", "--nnodes", "2", "--nproc-per-node", "1",
                                 "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--timeout", "120"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        _wait_for("torchrun in the rendezvous",
                  lambda: any(tmp_path.glob("nccl-doctor-stages-*/tmp/torchelastic_*")) or launcher.poll() is not None)
        kids = psutil.Process(launcher.pid).children(recursive=True)
        assert len(kids) == 1, kids  # torchrun (no rank before the rendezvous completes)
        alive = _kill_and_watch(launcher, kids)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert alive == [], "torchrun outlived its SIGKILLed launcher"
    logs, stages = _leftovers(tmp_path)
    assert len(logs) == 1 and len(stages) == 1, (logs, stages)  # what a SIGKILL leaves: the next run's to remove
    later = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K", "--ops", "ag", "--no-pairs",
                            "--groups", "world", "--timeout", "120", "--format", "json"], check=False, env=env,
                           capture_output=True, text=True, timeout=START_S)
    assert later.returncode in (0, 1), later.stderr[-2000:]
    assert _leftovers(tmp_path) == ([], []), "the dead launcher's log or stage dir is still there"


def test_sigkilled_torchrun_takes_its_ranks(tmp_path):
    """torchrun itself killed while its ranks measure: they run in sessions of their own, and used to go on."""
    launcher = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K:64M", "--no-pairs",
                                 "--groups", "world", "--timeout", "120"], env=launch_env(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        first = launcher.stderr.readline()  # the first progress line: the ranks are measuring
        assert "[1/" in first, first
        (agent,) = psutil.Process(launcher.pid).children()
        ranks = agent.children()
        assert len(ranks) == 2, ranks
        agent.kill()
        _, alive = psutil.wait_procs(ranks, timeout=GONE_WITHIN_S)
        for p in alive:
            p.kill()
        launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert alive == [], "the ranks outlived their SIGKILLed torchrun"
    assert launcher.returncode not in (0, None)


def test_sigkilled_preflight_launcher_takes_its_ranks(tmp_path):
    env = launch_env(tmp_path)
    launcher = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "preflight", "--cpu", "--timeout", "120"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        end = time.monotonic() + START_S
        kids: list[psutil.Process] = []
        while time.monotonic() < end and len(kids) < 2 and launcher.poll() is None:
            time.sleep(0.2)
            kids = [k for k in psutil.Process(launcher.pid).children() if "--worker" in k.cmdline()]
        assert len(kids) == 2, "preflight started no ranks"
        alive = _kill_and_watch(launcher, kids)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert alive == []
