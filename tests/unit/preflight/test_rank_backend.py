"""The backend preflight reports is the one its ranks used, and a rank that cannot use CUDA is reported as
that, with CUDA's own words and fix (issue 15, point 3): not "NCCL wrote no log", not "check
NCCL_SOCKET_IFNAME"."""

from __future__ import annotations

from nccl_doctor.bench import Backend
from nccl_doctor.preflight.head import Head
from nccl_doctor.preflight.launcher import Launcher
from nccl_doctor.preflight.nccllogs import NCCL_NEVER_RAN
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import RankError, record_backend
from nccl_doctor.preflight.verdict import RankState
from nccl_doctor.report import Report

TWO_NODES = NodePlan(nnodes=2, node_rank=0, hosts=("n1", "n2"), head="n1", port=1, nproc=2, slurm=True, host="n1")
GPUS = {"CUDA_VISIBLE_DEVICES": "0,1"}  # what the launcher sized the ranks by: it assumes NCCL
CUDA_REASON = ("2 GPU(s) expected (CUDA_VISIBLE_DEVICES=0,1) but CUDA 12.8 cannot be used: RuntimeError: Unexpected "
               "error from cudaGetDeviceCount(). Error 802: system not yet initialized")
CUDA_FIX = "run `nvidia-smi` on this node: ... nvidia-fabricmanager is not running"


def _launcher(tmp_path, env=GPUS):
    launcher = Launcher(PreflightOptions(timeout=10, cpu=False), TWO_NODES, env)
    launcher.state.log_dir = tmp_path
    return launcher


def test_the_backend_is_what_the_ranks_recorded_not_what_dev_nvidia_suggests(tmp_path):
    launcher = _launcher(tmp_path)
    assert launcher.ranks.backend() == Backend.NCCL  # nothing recorded yet: the assumption
    assert launcher.ranks.used_backend() is None
    for rank in (0, 1):
        record_backend(str(tmp_path / "backend"), rank, "cpu")
    assert launcher.ranks.used_backend() == Backend.GLOO == launcher.ranks.backend()
    assert launcher.ranks.nccl_logs().skipped == NCCL_NEVER_RAN


def test_a_rank_that_cannot_use_cuda_is_named_with_cudas_error_and_fix(tmp_path):
    head = Head(_launcher(tmp_path))
    states = [RankState() for _ in range(4)]
    errors = {  # rank 0 (healthy n1) times out waiting for n2, whose rank 3 could not start CUDA
        0: RankError(stage="init", error="DistBackendError: wait timeout after 30000ms, keys: /default_pg/0//cuda//0"),
        3: RankError(stage="init", error=f"CudaUnusable: {CUDA_REASON}", fix=CUDA_FIX, code="ND313"),
    }
    out = head.fail(Report(command="preflight"), states, errors, lost=[], local_dead=[])
    assert out.report is not None
    (f,) = [f for f in out.report.findings if f.severity.value == "fail"]
    assert f.code == "ND313" and f.where.host == "n2" and f.where.rank == 3
    assert "Error 802" in f.message and "rank 3 (n2)" in f.message
    assert f.fix == CUDA_FIX and "SOCKET_IFNAME" not in (f.fix or "")
    assert out.summary == "stopped in stage init; look at n2"


def test_a_cuda_error_that_is_not_about_connecting_gets_no_interface_fix(tmp_path):
    head = Head(_launcher(tmp_path))
    states = [RankState() for _ in range(4)]
    errors = {1: RankError(stage="init", error="RuntimeError: CUDA error: invalid device ordinal")}
    out = head.fail(Report(command="preflight"), states, errors, lost=[], local_dead=[])
    assert out.report is not None
    (f,) = [f for f in out.report.findings if f.code == "ND406"]
    assert "invalid device ordinal" in f.message and "SOCKET_IFNAME" not in (f.fix or "")


def test_a_rank_error_keeps_its_fix_and_code_through_the_store():
    e = RankError(stage="init", error="CudaUnusable: x", fix="y", code="ND313")
    assert RankError.from_json(e.to_json()) == e
    assert RankError.from_json('{"stage": "init", "error": "old"}') == RankError(stage="init", error="old")
