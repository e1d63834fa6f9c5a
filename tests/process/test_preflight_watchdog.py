"""preflight's ranks run our watchdog too (issue 21, points 1 and 6): a rank stuck inside a bench collective,
past --collective-timeout, is ended by the watchdog of each rank, which posts ``error/<rank>`` (on a connection
of its own) naming the rank that entered the stage and never left; node 0 reports it (ND406) long before
--timeout."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch


@pytest.mark.timeout(150)
def test_a_rank_stuck_inside_a_collective_is_named_by_the_watchdog(venv_env, tmp_path):
    env = dict(venv_env, TMPDIR=str(tmp_path), NCCL_DOCTOR_TEST_STALL_INSIDE="1:all_gather")
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--cpu", "--format", "json",
                           "--timeout", "100", "--collective-timeout", "5"], env=env, capture_output=True, text=True,
                          timeout=140, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    [f] = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert f["code"] == "ND406", f
    text = f["message"] + " ".join(f.get("evidence", []))
    assert "outlived --collective-timeout (5 s)" in text, text
    assert f"ranks that entered it and never left: rank 1 ({socket.gethostname()})" in text, text
    assert doc["timings_s"]["total"] < 100  # the watchdog, not the deadline
