"""Stopping process groups, and private dirs of dead processes (plain Python subprocesses, no torch)."""

import os
import subprocess
import sys
import time

import pytest

from nccl_doctor.cluster import procs


@pytest.mark.serial  # times itself
def test_kill_groups_terms_then_kills_what_ignores_term():
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN) if sys.argv[1] == 'stubborn' "
            "else None; print('ready', flush=True); time.sleep(60)")
    children = [subprocess.Popen([sys.executable, "-c", code, kind], start_new_session=True, stdout=subprocess.PIPE)
             for kind in ("polite", "stubborn")]
    try:
        for p in children:
            assert p.stdout.readline() == b"ready\n"
        t0 = time.monotonic()
        assert procs.kill_groups(children, grace_s=0.5) == [-15, -9]
        assert time.monotonic() - t0 < 5
    finally:
        for p in children:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_private_dirs_of_dead_processes_are_removed_by_the_next_run(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = procs.host_tag()
    stale = tmp_path / f"nccl-doctor-stages-{tag}-{dead.pid}-abc"
    live = tmp_path / f"nccl-doctor-stages-{tag}-{os.getpid()}-def"  # a run still going: kept
    other_host = tmp_path / f"nccl-doctor-stages-{tag}x-{dead.pid}-ghi"  # another node on a shared /tmp: kept
    other_kind = tmp_path / f"nccl-doctor-nccl-logs-{tag}-{dead.pid}-jkl"
    for d in (stale, live, other_host, other_kind):
        d.mkdir()
    (stale / "rank0.json").write_text("{}")
    fresh = procs.private_dir("stages", str(tmp_path))
    assert not stale.exists() and live.is_dir() and other_host.is_dir() and other_kind.is_dir()
    assert fresh.name.startswith(f"nccl-doctor-stages-{tag}-{os.getpid()}-") and fresh.is_dir()
