"""A rank's failure reaches preflight's report as what it is (issue 15, points 3 and 5): CUDA that cannot serve
the ranks is ND313 with CUDA's own error and fix (never a silent Gloo, never "check NCCL_SOCKET_IFNAME"), and
a collective that timed out in the rank's main thread (``DistBackendError``: what PyTorch raises from
``WorkNCCL::synchronizeInternal`` under TORCH_NCCL_BLOCKING_WAIT=1) is written to ``error/<rank>``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nccl_doctor.preflight import worker
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.protocol import ERRORS_KEY, RankError, error_key

pytestmark = pytest.mark.torch


@pytest.mark.timeout(120)
def test_cuda_that_cannot_start_is_reported_with_its_own_error_and_fix(tmp_path, venv_env):
    """Two GPUs expected (CUDA_VISIBLE_DEVICES), CUDA answers error 802 (the fabric manager is down): the
    ranks must not run Gloo; the report names CUDA's error and the fabric manager."""
    env = dict(venv_env, CUDA_VISIBLE_DEVICES="0,1", NCCL_DOCTOR_TEST_CUDA="802")
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--timeout", "60", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=110, cwd=tmp_path, check=False)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert [f["code"] for f in fails] == ["ND313"], fails
    (f,) = fails
    assert "Error 802" in f["message"] or "cudaGetDeviceCount" in f["message"]
    assert "fabricmanager" in f["fix"] and "SOCKET_IFNAME" not in f["fix"]
    assert doc["stage"] == "init" and "backend" not in doc  # no rank got as far as choosing one


class _Store:
    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.counters: dict[str, int] = {}

    def set(self, key: str, value: str) -> None:
        self.keys[key] = value

    def add(self, key: str, amount: int) -> int:
        self.counters[key] = self.counters.get(key, 0) + amount
        return self.counters[key]


def test_a_collective_timeout_raised_in_the_main_thread_is_written_to_error_rank(monkeypatch):
    import torch.distributed as dist

    store = _Store()
    monkeypatch.setattr(worker.stores, "client", lambda *a: store)
    monkeypatch.setattr(worker, "_init", lambda *a: "cpu")

    def timed_out(*_a):
        raise dist.DistBackendError("[Rank 1] Work WorkNCCL(SeqNum=7, OpType=ALLGATHER) timed out in blocking "
                                    "wait (TORCH_NCCL_BLOCKING_WAIT=1).")

    monkeypatch.setattr(worker, "_work", timed_out)

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(worker, "leave_now", exit_)
    args = PreflightOptions(collective_timeout=30)
    with pytest.raises(SystemExit) as info:
        worker.run_worker(args, {"RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"})
    assert info.value.code == 1
    err = RankError.from_json(store.keys[error_key(1)])
    assert err.error.startswith("DistBackendError: [Rank 1] Work WorkNCCL(SeqNum=7") and "timed out" in err.error
    assert err.stage == "init" and store.counters[ERRORS_KEY] == 1


@pytest.mark.timeout(120)
def test_a_timeout_inside_a_guarded_bench_collective_reaches_error_rank(monkeypatch):
    """The real path on a 1-rank Gloo group: bench's guard turns the DistBackendError of the timed loop into
    its stage failure, and preflight's rank writes it, with the stage it was in, to ``error/<rank>``."""
    import socket
    from datetime import timedelta

    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw
    from nccl_doctor.preflight import store as stores

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = stores.Store(dist.TCPStore("127.0.0.1", port, 1, True, timeout=timedelta(seconds=60)))

    def timed_out(*_a, **_k):
        raise dist.DistBackendError("[Rank 0] Work WorkNCCL(SeqNum=1, OpType=ALLGATHER) timed out in blocking wait")

    monkeypatch.setattr(bw, "gather_nodes", timed_out)  # bench's first guarded collective

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(worker, "leave_now", exit_)
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "NNODES": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    args = PreflightOptions(collective_timeout=30, cpu=True, fsdp_smoke=False)
    try:
        with pytest.raises(SystemExit) as info:
            worker.run_worker(args, env)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert info.value.code == 1
    err = RankError.from_json(server.get(error_key(0)) or "{}")
    assert err.stage.startswith("bench ") and "timed out in blocking wait" in err.error, err
    assert err.error.startswith("BenchFailure: stage ")
