"""The intra-node GPU-pair pass (ND315), planned and judged (pure; ``gpupass.py`` measures it).

Why: a node's intra group is a ring over all its GPUs, so one GPU whose NVLink is dead (NCCL falls back to
SHM or PCIe: 5-15% of NVLink) drags the whole figure down without saying which GPU, and a GPU that lost one
NVLink of 18 (~6%) hides in the noise. Here every GPU exchanges with its ring neighbours (all pairs on
nodes of up to ``ALL_PAIRS_UP_TO`` GPUs), disjoint pairs of every node at once, and NVML's NVLink state is
read where nvidia-ml-py is installed (``nvlinks.py``): a pair far below the node's best, or below a quarter
of the node's yardstick, names the GPU common to its slow pairs; a GPU with fewer NVLinks up than its peers
is named from NVML alone.

Thresholds: the node-pair pass's (``pairs.SLOW_RATIO``: a quarter of the best is broken, FAIL) and
``LAGGING_SHARE`` (half of the node's best pair: WARN), and a quarter of the yardstick (``shortfall``'s
``FAIL_SHARE``). No WARN against the yardstick: a two-GPU send/recv uses fewer NCCL channels than a ring
collective, so the share of the table's estimate it reaches healthy is not known until a GPU run says so
(docs/benchmarks.md); relative to the node's own best pair it needs no estimate.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from nccl_doctor.bench.busbw import format_size
from nccl_doctor.bench.model import BenchResult, GpuPairResult, NvLinkState
from nccl_doctor.bench.pairs import SLOW_RATIO
from nccl_doctor.codes import Code
from nccl_doctor.report import Finding, Severity, hosts_text, plural, templated

ALL_PAIRS_UP_TO = 4  # GPUs per node measured all pairs (a round-robin: n-1 rounds); more: ring neighbours
LAGGING_SHARE = 0.5  # a pair below half the node's best pair WARNs (below SLOW_RATIO, a quarter, it FAILs)
YARDSTICK_FAIL_SHARE = 0.25  # ... and below a quarter of the node's intra yardstick it FAILs too
PCT = 100
MAX_EVIDENCE = 8
MIN_PAIRS_TO_COMPARE = 2
BIG_FIGURE_GBPS = 10.0  # figures this big show one decimal, smaller ones three


def plan_gpu_pairs(local: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint local-rank pairs: all pairs (circle method) up to ``ALL_PAIRS_UP_TO`` GPUs, else each
    GPU with its ring neighbour (i, i+1 mod n): 2 rounds for an even count, 3 for an odd one."""
    if local < 2:
        return []
    if local <= ALL_PAIRS_UP_TO:
        return _round_robin(local)
    edges = [(i, (i + 1) % local) for i in range(local)]
    rounds: list[list[tuple[int, int]]] = []
    for a, b in edges:
        pair = (min(a, b), max(a, b))
        for r in rounds:
            if not any(set(pair) & set(q) for q in r):
                r.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def _round_robin(n: int) -> list[list[tuple[int, int]]]:
    """Every pair of ``n`` once, in rounds of disjoint pairs (the circle method; a bye when ``n`` is odd)."""
    ids: list[int | None] = [*range(n), *([None] if n % 2 else [])]
    m, rounds = len(ids), []
    for _ in range(m - 1):
        pairs = [(ids[i], ids[m - 1 - i]) for i in range(m // 2)]
        rounds.append(sorted((min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None))
        ids = [ids[0], ids[-1], *ids[1:-1]]
    return rounds


def gpu_pairs_stage(round_no: int, pairs: Iterable[tuple[int, int]]) -> str:
    """The stage of one round: ``gpu-pairs round 1: 0<->1 2<->3`` (local ranks, every node at once)."""
    return f"gpu-pairs round {round_no}: " + " ".join(f"{a}<->{b}" for a, b in pairs)


def judge_gpu_pairs(result: BenchResult) -> list[Finding]:
    """ND315 per node with slow GPU pairs or GPUs short of NVLinks; one PASS for the pass when none is."""
    if not result.gpu_pairs and not result.nvlinks:
        return []
    out: list[Finding] = []
    by_node: dict[int, list[GpuPairResult]] = {}
    for p in result.gpu_pairs:
        by_node.setdefault(p.node, []).append(p)
    for node, pairs in by_node.items():
        out += _slow_pairs(result, node, pairs)
    out += _short_of_nvlinks(result)
    return out or [_all_good(result)]


def _yardstick(result: BenchResult, node: int) -> float | None:
    exp = result.nodes[node].expected
    return exp.intra_gbps if exp is not None else None


def shown_gbps(value: float) -> str:
    """A figure in a message: one decimal on NVLink/PCIe, three on CPU ranks (0.010 GB/s, not 0.0)."""
    return f"{value:.1f}" if value >= BIG_FIGURE_GBPS else f"{value:.3f}"


def pair_severity(bw: float, best: float, want: float | None) -> Severity | None:
    """FAIL below a quarter of the node's best pair or of its yardstick, WARN below half its best pair."""
    if bw < SLOW_RATIO * best or (want and bw < YARDSTICK_FAIL_SHARE * want):
        return Severity.FAIL
    return Severity.WARN if bw < LAGGING_SHARE * best else None


def _slow_pairs(result: BenchResult, node: int, pairs: list[GpuPairResult]) -> list[Finding]:
    """ND315 for one node's slow pairs, naming the GPU (local rank) every slow pair involves when there is one."""
    host = result.nodes[node].host
    best = max(p.busbw_gbps for p in pairs) if len(pairs) >= MIN_PAIRS_TO_COMPARE else 0.0
    want = _yardstick(result, node)
    graded = [(p, s) for p in pairs if (s := pair_severity(p.busbw_gbps, best, want)) is not None]
    out = [templated(Code.GPU_PAIR_SLOW, Severity.FAIL, "wrong", host=host, rank=p.ranks[0], a=p.local[0],
                     b=p.local[1], rank_a=p.ranks[0], rank_b=p.ranks[1], wrong=p.wrong) for p in pairs if p.wrong]
    if not graded:
        return out
    slow = sorted(graded, key=lambda t: t[0].busbw_gbps)
    severity = Severity.FAIL if any(s is Severity.FAIL for _, s in slow) else Severity.WARN
    common = set.intersection(*(set(p.local) for p, _ in slow))
    gpu = min(common) if len(common) == 1 and len(slow) > 1 else None

    def line(p: GpuPairResult) -> str:
        return f"GPUs {p.local[0]}<->{p.local[1]} {shown_gbps(p.busbw_gbps)} GB/s"

    first = slow[0][0]
    who = (f"GPU {gpu} (local rank {gpu}) is in every slow pair: its NVLink, not its peers'" if gpu is not None
           else f"the path between GPUs {first.local[0]} and {first.local[1]}" if len(slow) == 1
           else "no one GPU is in every slow pair")
    rank = next((p.ranks[p.local.index(gpu)] for p, _ in slow if gpu in p.local), None) if gpu is not None else None
    out.append(templated(
        Code.GPU_PAIR_SLOW, severity, "slow-pairs", host=host, rank=rank,
        evidence=[line(p) for p, _ in slow[:MAX_EVIDENCE]], slow=plural(len(slow), "GPU pair"), total=len(pairs),
        slowest=line(first), best=shown_gbps(max(p.busbw_gbps for p in pairs)),
        median=shown_gbps(statistics.median(p.busbw_gbps for p in pairs)),
        yardstick=f", yardstick {want:.1f} GB/s" if want else "",
        size=format_size(first.size_bytes), who=who))
    return out


def _short_of_nvlinks(result: BenchResult) -> list[Finding]:
    """ND315 for GPUs with fewer NVLinks up than the most on their node (NVML): FAIL with none up, else WARN."""
    by_node: dict[int, list[NvLinkState]] = {}
    for s in result.nvlinks:
        by_node.setdefault(s.node, []).append(s)
    out = []
    for node, states in by_node.items():
        most = max(s.up for s in states)
        short = [s for s in states if s.up < most]
        if not short:
            continue
        out.append(templated(
            Code.GPU_PAIR_SLOW, Severity.FAIL if any(s.up == 0 for s in short) else Severity.WARN, "nvlinks",
            host=result.nodes[node].host,
            evidence=[f"{s.gpu}: {s.up}/{s.links} NVLinks up" for s in short[:MAX_EVIDENCE]],
            gpus=plural(len(short), "GPU"), most=most, which=", ".join(f"{s.gpu} {s.up} of {s.links}" for s in short)))
    return out


def _all_good(result: BenchResult) -> Finding:
    """ND315 PASS: what the pass measured, and whether NVML's NVLink state was read."""
    hosts = sorted({result.nodes[p.node].host for p in result.gpu_pairs})
    figs = [p.busbw_gbps for p in result.gpu_pairs] or [0.0]
    nvml = (f"; NVLinks up on every GPU alike ({len(result.nvlinks)} GPUs, NVML)" if result.nvlinks
            else f"; NVLink state not read: {result.nvlinks_unread}" if result.nvlinks_unread else "")
    return templated(Code.GPU_PAIR_SLOW, Severity.PASS, pairs=plural(len(result.gpu_pairs), "GPU pair"),
                     hosts=hosts_text(hosts) or "no node", slowest=shown_gbps(min(figs)),
                     fastest=shown_gbps(max(figs)), nvml=nvml)
