"""Whether each node's ranks have the CPUs they need, so a CPU-starved node is not read as a bad fabric.

A rank runs only on the CPUs of its affinity (``os.sched_getaffinity``: Slurm's cpuset, ``taskset``, a
container's cpuset). A Slurm job that asks for no CPUs gets one per task unless the cluster sets
``DefCpuPerGPU`` or the job is ``--exclusive``; nccl-doctor runs one task per node and starts every rank in
it, so eight ranks and their NCCL proxy threads share that one CPU, and ND302/ND303 then blame the network.

Each rank sends its affinity (``own_entry``, as a Linux cpulist: ``0-3,8``, a few bytes at any scale) through
``exchange.all_gather_json``; ``judge_cpus`` compares each node's CPUs per rank with what a rank needs:

- NCCL: ``NCCL_MIN_CPUS`` = 2. The rank's own thread launches kernels and waits on them, and NCCL's proxy
  thread (one per rank, busy while the network moves data) needs a CPU of its own, or each waits on the other.
- Gloo (``--cpu``): ``GLOO_MIN_CPUS`` = 1. A Gloo collective is CPU work by nature (the reduction and the TCP
  copies run on the rank's threads), so a Gloo run is always CPU-bound and one CPU per rank is a fair run; the
  2-core test box's 2 ranks on 2 CPUs are. Below one CPU per rank the ranks time-slice with each other.

Pure (no torch): the worker gathers, the judge calls ``judge_cpus``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.model import BenchResult, NodeInfo, RankCpus
from nccl_doctor.codes import Code
from nccl_doctor.report import Finding, Severity, templated

NCCL_MIN_CPUS = 2  # per rank: its own thread, plus NCCL's proxy thread
GLOO_MIN_CPUS = 1  # per rank: Gloo's collectives are CPU work; less than one CPU each and the ranks time-slice
MAX_LIST_CHARS = 256  # a longer cpulist (a scattered set on a huge node) is sent as its count only
# no CPU number reaches this (Linux's NR_CPUS is at most 8,192 on x86_64 and arm64): a peer's "0-4294967295"
# would otherwise make every rank build a set of four billion CPUs
MAX_CPUS = 1 << 16
BACKEND_NAMES = {Backend.NCCL: "NCCL", Backend.GLOO: "Gloo"}


def min_cpus(backend: Backend) -> int:
    return NCCL_MIN_CPUS if backend is Backend.NCCL else GLOO_MIN_CPUS


def cpulist(cpus: Iterable[int]) -> str:
    """The kernel's cpulist form (``/sys/fs/cgroup/cpuset.cpus``, ``taskset -c``): ``0-3,8,10-11``."""
    ordered = sorted(set(cpus))
    runs: list[tuple[int, int]] = []
    for c in ordered:
        if runs and c == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def parse_cpulist(text: str) -> frozenset[int] | None:
    """``cpulist``'s inverse; None for text that is not one, longer than a rank sends (``MAX_LIST_CHARS``), or
    naming a CPU from ``MAX_CPUS`` up (a peer's text: bounded before anything is built from it)."""
    if len(text) > MAX_LIST_CHARS:
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        first, last = int(lo), int(hi or lo)
        if last < first or last >= MAX_CPUS:
            return None
        out.update(range(first, last + 1))
    return frozenset(out)


def own_entry(cpus: Iterable[int]) -> dict[str, Any]:
    """What a rank sends: ``{"count": n, "list": "0-3"}`` (``list`` None when longer than MAX_LIST_CHARS)."""
    mine = set(cpus)
    text = cpulist(mine)
    return {"count": len(mine), "list": text if len(text) <= MAX_LIST_CHARS else None}


def gather_cpus(gather: Callable[[Any], list[Any]], cpus: Iterable[int] | None = None) -> list[RankCpus | None]:
    """Every rank's CPUs, by world rank, through ``gather`` (``exchange.all_gather_json``: every rank calls
    it); ``cpus``: this rank's (default: its affinity, ``os.sched_getaffinity(0)``)."""
    return [rank_cpus(e) for e in gather(own_entry(os.sched_getaffinity(0) if cpus is None else cpus))]


def rank_cpus(entry: Any) -> RankCpus | None:
    """One rank's entry, or None when it is not what ``own_entry`` writes: the CPUs are then unknown, which
    is no finding (a peer's odd entry must not fail the run)."""
    if not isinstance(entry, dict):
        return None
    count, text = entry.get("count"), entry.get("list")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    cpus = parse_cpulist(text) if isinstance(text, str) else None
    return RankCpus(count, cpus if cpus is not None and len(cpus) == count else None)


def node_cpus(ranks: Sequence[RankCpus]) -> tuple[int, str | None, float]:
    """(CPUs the node's ranks may use together, their cpulist where known, CPUs per rank). Per rank is the
    shared CPUs over the ranks, or the smallest rank's own set where that is less (ranks pinned one each)."""
    lists = [r.cpus for r in ranks]
    if all(c is not None for c in lists):
        union = frozenset().union(*(c for c in lists if c is not None))
        total, text = len(union), cpulist(union)
    else:
        total, text = max(r.count for r in ranks), None
    return total, text, min(total / len(ranks), *(r.count for r in ranks))


def judge_cpus(result: BenchResult) -> list[Finding]:
    """ND314 (WARN) for each node whose ranks have fewer CPUs each than their backend needs (``min_cpus``)."""
    need = min_cpus(result.backend)
    out = []
    for node in result.nodes:
        known = [c for r in node.ranks if r < len(result.rank_cpus) and (c := result.rank_cpus[r]) is not None]
        if not known or len(known) < len(node.ranks):
            continue  # a rank that sent nothing readable: no per-rank figure to stand on
        total, text, per_rank = node_cpus(known)
        if per_rank < need:
            out.append(_starved(node, result.backend, need, total=total, text=text, per_rank=per_rank))
    return out


def _starved(node: NodeInfo, backend: Backend, need: int, *, total: int, text: str | None,
             per_rank: float) -> Finding:
    name = BACKEND_NAMES.get(backend, str(backend))
    return templated(Code.CPU_STARVED, Severity.WARN, host=node.host, ranks=len(node.ranks), backend=name,
                     cpus=total, cpu_list=f"CPU {text}" if text else "list not sent", per_rank=round(per_rank, 2),
                     need=need, want=need * len(node.ranks))
