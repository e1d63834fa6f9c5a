"""Bad-node localisation in O(N) work: disjoint node pairs first, then suspects against known-good nodes.

Round 1 pairs node 0 with 1, 2 with 3, ... (all pairs at once: one round whatever N). A pair whose
bandwidth is far below the best pair makes both its nodes suspects; each later round tests suspects
(and a leftover odd node) against nodes already shown good, as many at once as there are good nodes.
A healthy cluster costs one round; k bad nodes among N cost about 1 + ceil(2k / (N - 2k)) rounds,
never the N-1 rounds of all-pairs. The planning is plain functions (tested directly); ``measure_round``
is the only part that needs a process group.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

SLOW_RATIO = 0.25  # a link below a quarter of the best link is slow (tbf/bad cable: 10-100x)
MAX_ROUNDS = 6


@dataclass
class Localisation:
    """Measured links (GB/s per direction, keyed (a, b) with a < b) and what they say about nodes."""

    nnodes: int
    links: dict[tuple[int, int], float] = field(default_factory=dict)
    rounds: list[list[tuple[int, int]]] = field(default_factory=list)
    floor_gbps: float = 0.0  # absolute minimum (a fraction of the line rate), 0 when unknown
    seconds: float = 0.0

    @property
    def best(self) -> float:
        return max(self.links.values(), default=0.0)

    def slow(self, link: tuple[int, int]) -> bool:
        bw = self.links[link]
        return bw < SLOW_RATIO * self.best or bw < self.floor_gbps

    def partners(self, node: int) -> dict[int, bool]:
        """node -> {partner: link is slow} over measured links."""
        out = {}
        for (a, b) in self.links:
            if node in (a, b):
                out[b if a == node else a] = self.slow((a, b))
        return out

    def good(self) -> set[int]:
        return {n for n in range(self.nnodes) if any(not s for s in self.partners(n).values())}

    def bad(self) -> list[int]:
        """Every link slow, and slow against at least one node proven good elsewhere."""
        good = self.good()
        return [n for n in range(self.nnodes)
                if (p := self.partners(n)) and all(p.values()) and any(q in good for q in p)]

    def unresolved(self) -> list[int]:
        """Nodes with only slow links and no good partner yet, or never tested."""
        good, bad = self.good(), set(self.bad())
        return [n for n in range(self.nnodes) if n not in good and n not in bad]

    def slow_links(self) -> list[tuple[int, int]]:
        return [link for link in sorted(self.links) if self.slow(link)]


def first_round(nnodes: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(0, nnodes - 1, 2)]


def next_round(loc: Localisation) -> list[tuple[int, int]]:
    """Disjoint pairs testing each unresolved node against a good node (else any node it has not met)."""
    if len(loc.rounds) >= MAX_ROUNDS:
        return []
    good = sorted(loc.good())
    busy: set[int] = set()
    pairs = []
    for n in loc.unresolved():
        if n in busy:
            continue
        met = set(loc.partners(n))
        refs = [g for g in good if g not in busy and g not in met]
        refs = refs or [m for m in range(loc.nnodes)
                        if m != n and m not in busy and m not in met and m not in good]
        if refs:
            busy |= {n, refs[0]}
            pairs.append((min(n, refs[0]), max(n, refs[0])))
    return pairs


def predict_rounds(nnodes: int) -> tuple[int, int]:
    """(rounds when healthy, rounds with one bad node): printed before starting."""
    if nnodes < 2:
        return 0, 0
    if nnodes == 2:
        return 1, 1
    return (1, 2) if nnodes % 2 == 0 else (2, 3)


def predicted_seconds(rounds: int, size_bytes: int, iters: int, gbps: float, overhead_s: float = 0.05) -> float:
    """Per round: every pair moves ``size`` x ``iters`` each way at once, plus a world all-reduce."""
    return rounds * (size_bytes * iters / (gbps * 1e9) + overhead_s) if gbps > 0 else math.inf


# --- measuring (inside a process group) ------------------------------------------------------------
def measure_round(pairs: list[tuple[int, int]], leaders: list[int], nnodes: int, *, size_bytes: int,
                  iters: int, timeout_s: float, device: str = "cpu") -> dict[tuple[int, int], float]:
    """Each pair's leader ranks exchange ``size_bytes`` both ways at once, ``iters`` times (after one
    warm-up); every rank returns every pair's GB/s per direction (one world all-reduce)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    table = torch.zeros(nnodes, nnodes, dtype=torch.float64, device=device)
    wait = timedelta(seconds=timeout_s)
    for a, b in pairs:
        if rank not in (leaders[a], leaders[b]):
            continue
        peer = leaders[b] if rank == leaders[a] else leaders[a]
        send = torch.ones(size_bytes // 4, device=device)
        recv = torch.empty_like(send)

        def exchange():
            works = [dist.isend(send, peer), dist.irecv(recv, peer)]
            for w in works:
                w.wait(wait)

        exchange()
        t0 = time.perf_counter()
        for _ in range(iters):
            exchange()
        seconds = time.perf_counter() - t0
        if rank == leaders[a]:
            table[a, b] = size_bytes * iters / seconds / 1e9
    dist.all_reduce(table, op=dist.ReduceOp.MAX)
    return {(a, b): float(table[a, b]) for a, b in pairs}


def localise(leaders: list[int], *, size_bytes: int, iters: int, timeout_s: float, floor_gbps: float = 0.0,
             device: str = "cpu", on_round=None) -> Localisation:
    """Run rounds until every node is resolved (or nothing new can be tested). Same result on every rank."""
    t0 = time.monotonic()
    loc = Localisation(nnodes=len(leaders), floor_gbps=floor_gbps)
    pairs = first_round(len(leaders))
    while pairs:
        if on_round:
            on_round(len(loc.rounds) + 1, pairs)
        loc.links.update(measure_round(pairs, leaders, len(leaders), size_bytes=size_bytes, iters=iters,
                                       timeout_s=timeout_s, device=device))
        loc.rounds.append(pairs)
        pairs = next_round(loc)
    loc.seconds = time.monotonic() - t0
    return loc
