"""How the timed loop issues collectives and closes its window (``bench.timing``): back to back, one wait at
the end (nccl-tests' way), and on CUDA the end event recorded on the stream before the host waits.

Under TORCH_NCCL_BLOCKING_WAIT=1 ``Work.wait()`` holds the host, polling with a 1 ms sleep: an end event
recorded after it timed that polling (the first GPU run read AG/RS 4-19% slow at 256 MiB-1 GiB,
``fixtures/gpu/h200-2026-12-04/timing-blocking-wait-1.out``). The order is tested here on a fake clock; that
the figures then match the stream-ordered reference is for a GPU run to confirm (``docs/benchmarks.md``).
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.torch

timing = pytest.importorskip("nccl_doctor.bench.timing")
worker = pytest.importorskip("nccl_doctor.bench.worker")


class _Work:
    def __init__(self, log: list[str], name: str):
        self.log, self.name = log, name

    def synchronize(self) -> None:
        self.log.append(f"synchronize {self.name}")

    def wait(self) -> None:
        self.log.append(f"wait {self.name}")


class _Event:
    """A timing event on a fake stream: ``record`` stamps the next tick (1 ms apart)."""

    def __init__(self, log: list[str], name: str, ticks: list[int]):
        self.log, self.name, self.ticks, self.at = log, name, ticks, -1

    def record(self) -> None:
        self.log.append(f"{self.name}.record")
        self.ticks[0] += 1
        self.at = self.ticks[0]

    def synchronize(self) -> None:
        self.log.append(f"{self.name}.synchronize")

    def elapsed_time(self, end: _Event) -> float:
        return float(end.at - self.at)


class _Clock:
    def __init__(self, log: list[str], ticks: list[int]):
        self.log, self.ticks, self.made = log, ticks, 0

    def synchronize(self) -> None:
        self.log.append("device synchronize")

    def event(self) -> _Event:
        self.made += 1
        return _Event(self.log, "start" if self.made == 1 else "end", self.ticks)


def _collective(log: list[str], ticks: list[int]):
    def collective(group: Any, async_op: bool = False) -> _Work:
        assert async_op, "a synchronous call would make the host wait after each one"
        n = sum(e.startswith("launch") for e in log)
        log.append(f"launch {n}")
        ticks[0] += 10  # the stream runs it: 10 ticks later the next event can be recorded
        return _Work(log, str(n))

    return collective


def test_calls_are_queued_without_waiting_and_the_last_work_is_returned():
    log: list[str] = []
    work = timing.launch_back_to_back(_collective(log, [0]), None, 3)
    assert log == ["launch 0", "launch 1", "launch 2"] and work.name == "2"
    assert timing.launch_back_to_back(_collective(log, [0]), None, 0) is None


def test_the_end_event_is_recorded_on_the_stream_before_the_host_waits():
    """The window: start, the calls, the stream waits for the last (no host block), end, and only then the
    host waits. Before, the host's wait came first and the end event after it."""
    log: list[str] = []
    ticks = [0]
    secs = timing.time_loop(_collective(log, ticks), None, 3, "cuda:0", barrier=lambda: log.append("handshake"),
                            clock=_Clock(log, ticks))
    assert log == ["handshake", "device synchronize", "start.record", "launch 0", "launch 1", "launch 2",
                   "synchronize 2", "end.record", "wait 2", "end.synchronize"]
    assert secs == pytest.approx(31 / 1e3 / 3)  # 31 ms between the events over 3 calls


def _fake_p2p(log: list[str]):
    def leg(kind: str):
        def call(tensor: Any, peer: int) -> _Work:
            log.append(f"{kind} {peer}")
            return _Work(log, f"{kind} {peer}")
        return call

    return leg("isend"), leg("irecv")


@pytest.mark.parametrize(("rank", "legs"), [(0, ["isend 1", "irecv 1"]), (1, ["irecv 0", "isend 0"])])
def test_a_queued_ping_pong_waits_for_nothing_and_hands_back_its_second_leg(rank, legs):
    """On CUDA a rail's exchanges are queued (the pair's NCCL stream keeps the legs in order, so it is still a
    ping-pong) and the timed loop waits once; synchronously (Gloo) each leg is waited for, in the same order."""
    log: list[str] = []
    isend, irecv = _fake_p2p(log)
    pp = worker.ping_pong(64, (0, 1), rank, "cpu", isend=isend, irecv=irecv)
    work = pp.run(None, async_op=True)
    assert log == legs and work.name == legs[1]
    log.clear()
    pp.run(None)
    assert log == [legs[0], f"wait {legs[0]}", legs[1], f"wait {legs[1]}"]


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_reduce"])
def test_every_benchmarked_op_can_be_launched_asynchronously(op, tmp_path):
    """A real one-rank Gloo group: each op's closure accepts ``async_op`` and returns a Work the window can
    close on (``synchronize`` then ``wait``), and the host-clock loop still measures."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        fn, _inp, out, _count = worker._buffers(op, 4096, 1, 0, "cpu")
        work = fn(None, async_op=True)
        work.synchronize()
        work.wait()
        timing.close_on_stream(timing.launch_back_to_back(fn, None, 2), _Event([], "end", [0]))
        assert out.numel() > 0
        assert timing.time_loop(fn, None, 3, "cpu") > 0
    finally:
        dist.destroy_process_group()
