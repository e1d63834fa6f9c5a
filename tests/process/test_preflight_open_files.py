"""Preflight at scale, in small: a launcher started with a low soft open-file limit raises it to the hard
one, and node 0 says in one WARN (ND413) when even the hard limit is below what its store needs."""

from __future__ import annotations

import json
import resource
import subprocess

import pytest

from nccl_doctor.cluster.net import free_port
from tests.helpers.preflight_cli import preflight_argv, without_launcher

pytestmark = pytest.mark.torch


def _limit_files() -> None:  # in the child: soft 100, hard 200 (node 0 needs about 260 for 1 x 2 ranks)
    resource.setrlimit(resource.RLIMIT_NOFILE, (100, 200))


@pytest.mark.timeout(120)
def test_a_low_open_file_limit_is_raised_and_a_too_low_hard_limit_is_one_warn(venv_env, tmp_path):
    env = without_launcher(venv_env, TMPDIR=str(tmp_path))
    proc = subprocess.run(preflight_argv("--port", str(free_port()), "--timeout", "60", "--format", "json"),
                          env=env, capture_output=True, text=True, timeout=100, check=False,
                          preexec_fn=_limit_files)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    [f] = [f for f in doc["findings"] if f["code"] == "ND413"]
    assert f["severity"] == "warn"
    assert f["message"].startswith("node 0's open-file limit is 200 (hard limit 200, raised from 100), below the "
                                   "about 259 its store needs for 1 node x 2 ranks")
    assert any(ln.get("code") == "ND300" for ln in doc["findings"])  # and the run itself went through
