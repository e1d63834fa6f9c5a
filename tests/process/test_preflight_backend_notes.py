"""``nccl-doctor preflight`` on a CPU machine (ranks run Gloo): a failing NCCL setting keeps its FAIL (the GPU
job with this environment would fail) and says that this run does not use NCCL."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch


@pytest.mark.timeout(60)
def test_cpu_preflight_says_it_does_not_use_nccl(venv_env):
    env = dict(venv_env, NCCL_SOCKET_IFNAME="eht0")
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--cpu", "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=50, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    [f] = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "ND202"]
    assert f["severity"] == "fail" and "this run uses Gloo on the CPU, not NCCL" in f["message"]
