"""Launch logs named after their run's stage dir: a SIGKILLed run's log goes with its stale stage dir, a kept
log (a failed run's, for the user) and another host's stay, and a link planted at a log's name is never
followed: neither its target nor another user's file is removed."""

import os
import subprocess
import sys

from nccl_doctor.cluster import procs


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def test_launch_log_is_named_after_the_stage_dir_and_private(tmp_path):
    stage = procs.private_dir("stages", str(tmp_path))
    log = procs.launch_log(stage, "stages")
    suffix = stage.name.removeprefix(f"nccl-doctor-stages-{procs.host_tag()}-")
    assert log == tmp_path / f"nccl-doctor-launch-{procs.host_tag()}-{suffix}.log"
    assert log.stat().st_size == 0 and log.stat().st_mode & 0o777 == 0o600


def test_stale_stage_dir_takes_its_log_and_nothing_else(tmp_path):
    tag, pid = procs.host_tag(), _dead_pid()
    stale = tmp_path / f"nccl-doctor-stages-{tag}-{pid}-abc"
    stale.mkdir()
    stale_log = tmp_path / f"nccl-doctor-launch-{tag}-{pid}-abc.log"
    kept_log = tmp_path / f"nccl-doctor-launch-{tag}-{pid}-zzz.log"  # its stage dir is gone: a failed run's, kept
    other_host = tmp_path / f"nccl-doctor-launch-{tag}x-{pid}-abc.log"
    for f in (stale_log, kept_log, other_host):
        f.write_text("log")
    procs.private_dir("stages", str(tmp_path))
    assert not stale.exists() and not stale_log.exists() and kept_log.exists() and other_host.exists()


def test_a_link_at_a_stale_logs_name_is_not_followed(tmp_path):
    tag, pid = procs.host_tag(), _dead_pid()
    (tmp_path / f"nccl-doctor-stages-{tag}-{pid}-abc").mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / f"nccl-doctor-launch-{tag}-{pid}-abc.log"
    os.symlink(victim, link)
    procs.private_dir("stages", str(tmp_path))
    assert victim.read_text() == "precious" and link.is_symlink()
