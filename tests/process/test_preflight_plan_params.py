"""``preflight --plan-params``: the report says what ``plan`` would recommend from the run's own figures, and
``plan --from`` that very report agrees; a bad value is one line before anything starts."""

import json
import os
import subprocess
import sys

import pytest

from nccl_doctor.cli import main

pytestmark = [pytest.mark.torch, pytest.mark.timeout(200)]


def _env(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME", "MASTER_PORT"):
        env.pop(var, None)
    return env


def test_preflight_says_the_mesh_plan_would_recommend(tmp_path, capsys):
    js = tmp_path / "preflight.json"
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--cpu", "--plan-params", "350M",
                           "--json-out", str(js)], capture_output=True, text=True, check=False, timeout=180,
                          env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = json.loads(js.read_text())["plan"]
    # Gloo on CPU: no GPU memory is claimed (issue 22 point 14)
    assert line.startswith("plan (350M parameters, Gloo/CPU figures, GPU memory not sized): use (1, 2) FSDP, ")
    assert line in proc.stdout

    assert main(["plan", "--params", "350M", "--from", str(js), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["recommended"]["mesh"] == [1, 2]
    assert f"use {doc['summary'].removesuffix(' (Gloo/CPU figures)')}" in line  # the same mesh and figure both ways
    assert [f["code"] for f in doc["findings"]] == ["ND504", "ND500"]
    assert doc["inputs"]["intra_all_gather_gbps"]["source"].startswith(str(js))


def test_a_bad_plan_params_is_one_line_before_anything_starts(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--cpu", "--plan-params", "lots"],
                          capture_output=True, text=True, check=False, timeout=60, env=_env(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--plan-params" in proc.stderr and proc.stdout == ""
