"""The shipped node checks, run for real against this machine's probe: ``examples/slurm/nccl_doctor.nhc``
sourced into bash as NHC does (``die`` and ``log`` are NHC's own API, defined here as NHC defines their
effect), and ``examples/slurm/node-check.sh`` outside Slurm. The drain itself is tested on the Slurm
namespace cluster (tests/system/test_drain_slurm.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NHC_CHECK = ROOT / "examples" / "slurm" / "nccl_doctor.nhc"
NODE_CHECK = ROOT / "examples" / "slurm" / "node-check.sh"
# NHC's die records the failure and its message (the node is marked offline with it); log writes a line
NHC_API = """
die() { local rc=$1; shift; echo "DIE $rc $*"; return "$rc"; }
log() { echo "LOG $*"; }
"""

pytestmark = pytest.mark.timeout(120)


def _env(**kw: str) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "SLURM_JOB_ID", "SLURMD_NODENAME", "NCCL_DOCTOR_ENV",
                "SLURM_CONF"):  # (a SLURM_CONF naming no file: scontrol retries for 60 s)
        env.pop(var, None)
    env.update(kw)
    return env


def nhc(args: str = "", **env: str) -> tuple[int, str]:
    script = f"{NHC_API}\n. {NHC_CHECK}\ncheck_nccl_doctor {args}\necho RC $?\n"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=90, env=_env(**env),
                          check=False)
    assert proc.returncode == 0, proc.stderr
    *lines, last = proc.stdout.strip().splitlines()
    return int(last.split()[1]), "\n".join(lines)


def test_nhc_check_dies_with_the_first_fail_line():
    rc, out = nhc(NCCL_SOCKET_IFNAME="nosuch")
    assert rc == 1
    [line] = out.splitlines()
    assert line.startswith("DIE 1 check_nccl_doctor:  [FAIL] ND2") and "nosuch" in line, out


def test_nhc_check_passes_a_node_without_fail():
    rc, out = nhc()  # this box: WARN at worst (Gloo on loopback), exit 0
    assert (rc, out) == (0, "")


def test_nhc_check_strict_dies_on_a_warning_with_that_line():
    rc, out = nhc('-a "--strict"', GLOO_SOCKET_IFNAME="lo")  # Gloo on loopback: a WARN (ND215)
    assert rc == 1 and out.startswith("DIE 1 check_nccl_doctor:  [WARN] "), out


def test_nhc_check_that_cannot_run_is_logged_never_a_drain():
    rc, out = nhc('-a "--no-such-option"')
    assert rc == 0 and out.startswith("LOG check_nccl_doctor:  nccl-doctor probe could not run (exit 2)"), out


def test_node_check_outside_slurm_fails_without_draining(tmp_path):
    """Run by hand (no Slurm): exit 1 on FAIL, and the log says the node was not drained and why."""
    log = tmp_path / "check.log"
    settings = tmp_path / "nccl-doctor.env"
    settings.write_text(f"NCCL_SOCKET_IFNAME=nosuch\nNCCL_DOCTOR_LOG={log}\nNCCL_DOCTOR_PROM_DIR={tmp_path}\n")
    env = _env(NCCL_DOCTOR_ENV=str(settings))
    proc = subprocess.run([str(NODE_CHECK)], capture_output=True, text=True, timeout=90, env=env, check=False)
    assert proc.returncode == 0  # Slurm's empty PATH, no PATH in the settings: not found, never a job blocked
    with settings.open("a") as fh:
        fh.write(f"PATH={Path(sys.executable).parent}:$PATH\n")
    proc = subprocess.run([str(NODE_CHECK)], capture_output=True, text=True, timeout=90, env=env, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = log.read_text()
    assert "[FAIL] ND2" in text and "ND002" in text and "not drained" in text, text
    assert (tmp_path / "nccl_doctor_probe.prom").read_text().count("nccl_doctor_verdict{") == 1


def test_node_check_never_sources_a_settings_file_others_can_write(tmp_path):
    """The settings file runs as root: a group/world-writable one is refused, what it holds never runs."""
    pwned = tmp_path / "pwned"
    settings = tmp_path / "nccl-doctor.env"
    settings.write_text(f"touch {pwned}\nNCCL_DOCTOR_LOG={tmp_path / 'check.log'}\n")
    settings.chmod(0o666)
    proc = subprocess.run([str(NODE_CHECK)], capture_output=True, text=True, timeout=90,
                          env=_env(NCCL_DOCTOR_ENV=str(settings)), check=False)
    assert proc.returncode == 0 and not pwned.exists()
    assert f"not reading {settings}: owned by uid {os.geteuid()}, mode 666" in proc.stderr
