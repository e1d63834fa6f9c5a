"""What a real ``self_launch`` hands the process it starts (torchrun, whose workers inherit it): ``rank_env``'s
settings (NCCL connects at init), and the user's own PyTorch error handling (no blocking wait of ours)."""

import os
import stat

import pytest

from nccl_doctor.cluster import torchrun
from nccl_doctor.cluster.rankenv import RANK_SETTINGS

pytestmark = pytest.mark.torch


def test_self_launch_hands_torchrun_the_rank_settings(tmp_path, monkeypatch):
    dump = tmp_path / "env.txt"
    fake = tmp_path / "python"  # stands in for `python -m torch.distributed.run ...`: records its environment
    fake.write_text(f"#!/bin/sh\nenv > {dump}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "0")
    monkeypatch.setenv("NCCL_RUNTIME_CONNECT", "1")
    cfg = torchrun.LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:29500", rdzv_id="x", deadline_s=30)
    outcome = torchrun.self_launch(["bench"], cfg, python=str(fake))
    assert outcome.returncode == 0 and not outcome.timed_out
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert {k: seen.get(k) for k in RANK_SETTINGS} == RANK_SETTINGS
    assert "NCCL_RUNTIME_CONNECT=1 replaced by 0" in seen[torchrun.NOTES_ENV]
    assert seen["TORCH_NCCL_BLOCKING_WAIT"] == "0"  # the user's own: PyTorch's error handling is theirs
    assert os.environ["NCCL_RUNTIME_CONNECT"] == "1"  # the user's own environment is left alone
