"""How the timed loop issues collectives: back to back, one wait at the end (nccl-tests' way).

Under TORCH_NCCL_BLOCKING_WAIT=1 (our ranks' setting) a synchronous collective holds the host until it is
done, so a loop of synchronous calls would time host round trips at small sizes.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.torch

worker = pytest.importorskip("nccl_doctor.bench.worker")


class _Work:
    def __init__(self, log: list[str], n: int):
        self.log, self.n = log, n

    def wait(self) -> None:
        self.log.append(f"wait {self.n}")


def test_calls_are_queued_without_waiting_and_only_the_last_is_waited_for():
    log: list[str] = []

    def collective(group: Any, async_op: bool = False) -> _Work:
        assert async_op, "a synchronous call would make the host wait after each one"
        log.append(f"launch {len(log)}")
        return _Work(log, len(log) - 1)

    worker.launch_back_to_back(collective, None, 3)
    assert log == ["launch 0", "launch 1", "launch 2", "wait 2"]


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_reduce"])
def test_every_benchmarked_op_can_be_launched_asynchronously(op, tmp_path):
    """A real one-rank Gloo group: each op's closure accepts ``async_op`` and returns a waitable Work."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        fn, _inp, out, _count = worker._buffers(op, 4096, 1, 0, "cpu")
        work = fn(None, async_op=True)
        assert hasattr(work, "wait")
        work.wait()
        worker.launch_back_to_back(fn, None, 2)
        assert out.numel() > 0
    finally:
        dist.destroy_process_group()
