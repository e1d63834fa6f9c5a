"""How the bench times a collective on a rank: the calls queued back to back, the window closed on the stream.

On CUDA the window is two timing events on the current stream. The end event must follow the last call on the
stream, not on the host: ``Work.wait()`` under ``TORCH_NCCL_BLOCKING_WAIT`` also holds the host, polling
``isCompleted()`` with a 1 ms sleep, and an end event recorded after it timed that polling too (the first GPU
run, one H200: all-gather and reduce-scatter at 256 MiB and 1 GiB read 4-19% slower than with the stream
wait, ``fixtures/gpu/h200-2026-12-04/timing-blocking-wait-*.out``). So the last call's ``Work.synchronize()``
makes the stream wait (no host block), the end event is recorded after it, and only then does the host wait,
bounded by the group's timeout (``close_on_stream``). On CPU (Gloo) there is no stream: each call is
synchronous and the host clock times the loop.

Imported only in worker processes (it imports torch at the top). ``time_loop`` takes its ``StreamClock`` (the
events and the device-wide synchronize) as a parameter, so the order of the calls is tested on CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.distributed as dist

MS = 1e3  # milliseconds in a second (CUDA events time in ms)


class Collective(Protocol):
    """One call of the collective on a group; with ``async_op`` it returns the call's ``Work`` (the last of
    them for an exchange of several calls, like a ping-pong)."""

    def __call__(self, group: Any, async_op: bool = False) -> Any: ...


class TimingEvent(Protocol):
    """What the window needs of ``torch.cuda.Event(enable_timing=True)``."""

    def record(self) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: Any) -> float: ...  # milliseconds from this event to ``end``


class StreamClock(Protocol):
    """The device side of the timed window: a device-wide synchronize before it starts, and its two events."""

    def synchronize(self) -> None: ...

    def event(self) -> TimingEvent: ...


class CudaClock:
    """``StreamClock`` over the real ``torch.cuda``."""

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def event(self) -> TimingEvent:
        event: TimingEvent = torch.cuda.Event(enable_timing=True)
        return event


def launch_back_to_back(fn: Collective, group: Any, iters: int) -> Any:
    """``iters`` calls queued without waiting, as nccl-tests does; returns the last call's ``Work`` (None when
    ``iters`` is 0). A synchronous call would hold the host after each one, timing host round trips at small
    sizes."""
    work = None
    for _ in range(iters):
        work = fn(group, async_op=True)
    return work


def close_on_stream(work: Any, end: TimingEvent) -> None:
    """Close the timed window after ``work`` (the last call): the current stream waits for it
    (``Work.synchronize``: a stream wait, the host goes on), the end event is recorded behind it, and then the
    host waits (``Work.wait``: bounded by the group's timeout, raising if the collective failed or timed out)."""
    if work is not None:
        work.synchronize()
    end.record()
    if work is not None:
        work.wait()


def time_on_stream(fn: Collective, group: Any, iters: int, clock: StreamClock) -> float:
    """Seconds per call between two events on the stream, the calls queued back to back in between."""
    clock.synchronize()
    start, end = clock.event(), clock.event()
    start.record()
    close_on_stream(launch_back_to_back(fn, group, iters), end)
    end.synchronize()
    return float(start.elapsed_time(end)) / MS / iters


def time_loop(fn: Collective, group: Any, iters: int, device: str, barrier: Callable[[], None] | None = None, *,
              clock: StreamClock | None = None) -> float:
    """Seconds per call of ``fn(group)`` on this rank: events on the stream on GPU (``time_on_stream``, with
    ``clock``: CUDA's unless given), the host clock on CPU, both after a barrier: an all-reduce on ``group``,
    or ``barrier`` (a rail's handshake: only its two ranks meet)."""
    if barrier is None:
        dist.all_reduce(torch.zeros(1, device=device), group=group)
    else:
        barrier()
    if device.startswith("cuda"):
        return time_on_stream(fn, group, iters, clock or CudaClock())
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(group)
    return (time.perf_counter() - t0) / iters
