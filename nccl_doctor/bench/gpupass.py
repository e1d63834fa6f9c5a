"""The intra-node GPU-pair pass, measured (torch; planned and judged in ``gpupairs.py``).

``run_bench`` calls ``measure_gpu_pairs`` after the sweep and before the node-pair pass, on every rank. It
runs on NCCL with 2+ ranks on every node (the same count everywhere), and on Gloo CPU ranks only under the
test seam ``NCCL_DOCTOR_TEST_GPU_PAIRS=gloo`` (there it measures loopback, to prove the wiring).
Each round, every node's disjoint pairs of local ranks ping-pong at once over ``batch_isend_irecv`` on the
world group: a batched point-to-point uses the world communicator, where a bare ``send``/``recv`` makes torch
create a 2-rank NCCL communicator per pair (a blocking creation per pair, and a row each in the NCCL logs).
One checked exchange, a world all-reduce to line the pairs up, then ``iters`` round trips queued back to back
and timed on the stream (CUDA events after ``Work.synchronize()``: no host polling in the window); two world
all-reduces share the figures, so every rank ends with every pair's. Local rank 0 of each node reads NVML.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
import torch.distributed as dist

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import FLOAT32_BYTES, MIB, auto_iters, pair_gbps, round_size
from nccl_doctor.bench.exchange import all_gather_json, expect
from nccl_doctor.bench.gpupairs import gpu_pairs_stage, plan_gpu_pairs
from nccl_doctor.bench.model import BenchConfig, BenchResult, GpuPairResult, NvLinkState
from nccl_doctor.bench.nvlinks import load_nvml, read_nvlinks

TEST_ENV = "NCCL_DOCTOR_TEST_GPU_PAIRS"  # "gloo": run the pass on Gloo CPU ranks (test seam)
SLOW_ENV = "NCCL_DOCTOR_TEST_SLOW_GPU"  # "RANK:SECONDS": that rank's GPU-pair round trips each sleep (test seam)
GPU_PAIR_BYTES = 64 * MIB  # 170 us one way at 370 GB/s: bandwidth-bound past the ~10 us a call costs
MIN_ITERS = 3
US, MS = 1e6, 1e3

T = TypeVar("T")


class StageMarks(Protocol):
    """What the pass needs of the worker's ``Stages``: marking the stage it enters."""

    def enter(self, stage: str) -> None: ...


def wanted(result: BenchResult, env: Mapping[str, str]) -> bool:
    """NCCL (or the Gloo test seam), and the same 2+ ranks on every node."""
    counts = {len(n.ranks) for n in result.nodes}
    on = result.backend is Backend.NCCL or env.get(TEST_ENV) == str(Backend.GLOO)
    return on and len(counts) == 1 and min(counts) >= 2


def measure_gpu_pairs(result: BenchResult, cfg: BenchConfig, stages: StageMarks, *, env: Mapping[str, str],
                      guard: Callable[[Callable[[], Any]], Any]) -> None:
    """Fill ``result.gpu_pairs`` (and ``nvlinks``) when ``wanted``; ``guard`` turns a failed collective into
    the worker's ``BenchFailure`` naming the stage."""
    if not wanted(result, env):
        return
    cuda = result.device.startswith("cuda")
    size = round_size(GPU_PAIR_BYTES if cuda else cfg.pair_size, 2)
    iters = cfg.iters or auto_iters(size, budget_bytes=cfg.budget_bytes, lo=MIN_ITERS)
    slow_rank, _, delay = env.get(SLOW_ENV, "").partition(":")
    slow_s = float(delay) if slow_rank == str(dist.get_rank()) and delay else 0.0
    for i, pairs in enumerate(plan_gpu_pairs(result.local_world_size), 1):
        stages.enter(gpu_pairs_stage(i, pairs))
        plan = _Plan(pairs=pairs, round_no=i, size=size, iters=iters, warmup=cfg.warmup, slow_s=slow_s)
        result.gpu_pairs += guard(lambda: _round(result, plan))  # noqa: B023
    stages.enter("gpu-pairs nvlinks")
    states, why = guard(lambda: _gather_nvlinks(result, cuda))
    result.nvlinks, result.nvlinks_unread = states, why


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """One round: its pairs of local ranks (on every node), and how much to exchange."""

    pairs: list[tuple[int, int]]
    round_no: int
    size: int
    iters: int
    warmup: int
    slow_s: float  # the test seam's sleep per round trip on this rank


def _round(result: BenchResult, plan: _Plan) -> list[GpuPairResult]:
    device, rank = result.device, dist.get_rank()
    pairs, size, iters, warmup, round_no = plan.pairs, plan.size, plan.iters, plan.warmup, plan.round_no
    slots = [(n.index, a, b, (n.ranks[a], n.ranks[b])) for n in result.nodes for a, b in pairs]
    times = torch.zeros(len(slots), dtype=torch.float64, device=device)
    wrong = torch.zeros(len(slots), dtype=torch.int64, device=device)
    mine = [(k, ends) for k, (_, _, _, ends) in enumerate(slots) if rank in ends]
    ex = [(k, _Exchange(size, ends, rank, device)) for k, ends in mine]
    for k, x in ex:
        wrong[k] = x.check()
        for _ in range(max(warmup - 1, 0)):
            x.round_trip()
    dist.all_reduce(torch.zeros(1, device=device))  # every pair starts timing together
    for k, x in ex:
        times[k] = x.timed(iters, plan.slow_s)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    dist.all_reduce(wrong)
    secs, bad = [float(t) for t in times.tolist()], [int(w) for w in wrong.tolist()]
    return [GpuPairResult(node=node, local=(a, b), ranks=ends, size_bytes=size, iters=iters, time_us=secs[k] * US,
                          busbw_gbps=pair_gbps(size, secs[k]), wrong=bad[k], round=round_no)
            for k, (node, a, b, ends) in enumerate(slots)]


class _Exchange:
    """One pair's round trips between world ranks ``ends``: ``size`` bytes there, then back, one way at a time,
    each leg a one-op ``batch_isend_irecv`` (the world communicator)."""

    def __init__(self, size: int, ends: tuple[int, int], rank: int, device: str):
        self.first = rank == ends[0]
        self.peer = ends[1] if self.first else ends[0]
        self.device = device
        self.send = torch.full((size // FLOAT32_BYTES,), float(rank + 1), device=device)
        self.recv = torch.empty(size // FLOAT32_BYTES, device=device)
        self.token = torch.zeros(1, device=device)

    def _legs(self, out: Any, into: Any) -> list[Any]:
        works: list[Any] = []
        for sending in ((True, False) if self.first else (False, True)):
            op = dist.P2POp(dist.isend if sending else dist.irecv, out if sending else into, self.peer)
            works += dist.batch_isend_irecv([op]) or []
        return works

    def round_trip(self, out: Any = None, into: Any = None) -> None:
        for w in self._legs(self.send if out is None else out, self.recv if into is None else into):
            w.wait()

    def check(self) -> int:
        self.recv.zero_()
        self.round_trip()
        return int((self.recv != float(self.peer + 1)).sum())

    def timed(self, iters: int, slow_s: float) -> float:
        """Seconds per round trip: queued back to back and timed on the stream on CUDA, by the host on CPU."""
        self.round_trip(self.token, self.token)  # the two ends meet before timing
        if not self.device.startswith("cuda"):
            t0 = time.perf_counter()
            for _ in range(iters):
                if slow_s:
                    time.sleep(slow_s)
                self.round_trip()
            return (time.perf_counter() - t0) / iters
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        works: list[Any] = []
        for _ in range(iters):
            works = self._legs(self.send, self.recv)  # stream-ordered: no host wait between legs
        for w in works:
            getattr(w, "synchronize", w.wait)()  # the current stream waits for NCCL's: the end event follows it
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / MS / iters


def _gather_nvlinks(result: BenchResult, cuda: bool) -> tuple[list[NvLinkState], str | None]:
    """Each node's local rank 0 reads NVML (GPU ranks only); every rank gets every node's states."""
    rank = dist.get_rank()
    node = next(n for n in result.nodes if rank in n.ranks)
    mine: dict[str, Any] = {"states": [], "why": None}
    if node.ranks[0] == rank:
        nvml, why = load_nvml() if cuda else (None, "the ranks ran on CPU")
        states, why = read_nvlinks(nvml) if nvml is not None else ([], why)
        mine = {"states": [list(s) for s in states], "why": why}
    got = all_gather_json(mine)
    out: list[NvLinkState] = []
    whys = []
    for r, entry in enumerate(got):
        d = expect(entry, r, "NVLink state", {"states": (list,), "why": (str, type(None))})
        at = next(n.index for n in result.nodes if r in n.ranks)
        out += [NvLinkState(node=at, gpu=s[0], up=s[1], links=s[2]) for s in d["states"] if _nvlink_entry(s)]
        if d["why"]:
            whys.append(d["why"])
    return out, (whys[0] if whys and not out else None)


def _nvlink_entry(entry: Any) -> bool:
    """A peer's ``[gpu, up, links]`` as ``read_nvlinks`` makes it (a string and two counts); anything else from
    a peer is left out, never converted (``int("abc")`` would end the rank with a traceback)."""
    return (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in entry[1:]))
