"""``nccl-doctor preflight``'s options: a bad one is one line and exit 2, before anything is created or started."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

SECONDS = "expected a finite number of seconds, > 0 and at most 604800 (7 days)"


def test_bad_deadline_is_one_line_exit_2(venv_env):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--timeout", "0"], env=venv_env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("nccl-doctor preflight: error: --timeout 0: expected a finite number of seconds, "
                                   "> 0 and at most 604800 (7 days)")


@pytest.mark.parametrize("argv,msg", [
    (["--port", "70000"], "--port 70000 is not a TCP port (1-65535)"),
    (["--port", "-1"], "--port -1 is not a TCP port (1-65535)"),
    (["--collective-timeout", "0"], f"--collective-timeout 0: {SECONDS}"),
    (["--collective-timeout", "inf"], f"--collective-timeout inf: {SECONDS}"),
    (["--rendezvous-timeout", "-1"], f"--rendezvous-timeout -1: {SECONDS}"),
    (["--rendezvous-timeout", "inf"], f"--rendezvous-timeout inf: {SECONDS}"),
    (["--timeout", "1e400"], f"--timeout inf: {SECONDS}"),
    (["--timeout", "nan"], f"--timeout nan: {SECONDS}"),
    (["--timeout", "700000"], f"--timeout 700000: {SECONDS}"),
    (["--fsdp-smoke", "--fsdp-smoke-dir", "/nonexistent/dir"], "--fsdp-smoke-dir '/nonexistent/dir': no such directory"),
    (["--fsdp-smoke", "--fsdp-smoke-dir", "/etc/hostname"], "--fsdp-smoke-dir '/etc/hostname': not a directory"),
    (["--fsdp-smoke-dir", "."], "--fsdp-smoke-dir is only used by --fsdp-smoke: add --fsdp-smoke (or drop the directory)")])
def test_bad_rendezvous_and_timeout_options_are_one_line_exit_2(argv, msg, venv_env, tmp_path):
    """Refused before anything is created or started (no rank, no private dir: TMPDIR stays empty)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", *argv], env=dict(venv_env, TMPDIR=str(tmp)),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == f"nccl-doctor preflight: error: {msg}", proc.stderr
    assert list(tmp.iterdir()) == [] and time.monotonic() - t0 < 10
