"""Node pairs for ``bench`` and ``preflight``: which node (or link) is slow, in O(N) work.

Planning (plain functions, tested directly). Round 1 pairs node 0 with 1, 2 with 3, ... (one round
whatever N). A slow pair makes both its nodes suspects; each later round tests suspects (and a leftover
odd node) against nodes already shown good, as many at once as there are good nodes. A healthy cluster
costs one round (two for odd N); k bad nodes among N about 1 + ceil(2k / (N - 2k)) rounds, never the
N-1 rounds of all-pairs.

Judging (one rule for both commands; ``judge.py`` applies it). A link is slow below ``SLOW_RATIO``
of the best link, or below the floor (a share of the line rate, ``FLOOR_SHARE``). A node is named only
when every link it has is slow *and* one of its partners is proven good elsewhere. This is preferred to
"a node's best pair below half its peers' median" because it needs proof: with adaptive rounds a good
node paired with a bad one in round 1 holds one slow pair until it is retested, and the median rule
would blame it whenever no retest could be planned; and a median stops naming anyone once half the
nodes are slow (a bad rack), the best link does not. A slow link with no end to blame (two nodes, or no
known-good node left to test against) is reported as a link. Each node's figure (its best pair) and its
peers' median are still reported, as figures.

Measuring (``worker.py``, inside a process group): each pair's first ranks ping-pong over a
dedicated 2-rank group, one direction at a time, so each flow's ACKs cross an idle link and a shaped
link shows its rate: 1.00 of one-way raw TCP on a tbf link, where a simultaneous two-way exchange gave
0.62-0.68. Every rank ends each round with the same figures (one world all-reduce), so every rank
plans the same next round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from nccl_doctor.bench.busbw import GB, format_size
from nccl_doctor.bench.model import Backend, NodeInfo, PairResult

SLOW_RATIO = 0.25  # a link below a quarter of the best link is slow (tbf/bad cable: 10-100x)
FLOOR_SHARE = {Backend.NCCL: 0.25, Backend.GLOO: 0.05}  # ... or below this share of the line rate (Gloo: CPU-bound)
MAX_ROUNDS = 6
ROUND_OVERHEAD_S = 0.05  # per round: group setup and a world all-reduce
UNKNOWN_RATE_GBPS = 1.0  # the prediction's rate when the line rate is unknown


@dataclass
class Localisation:
    """Measured links (GB/s per direction, keyed (a, b) with a < b) and what they say about nodes."""

    nnodes: int
    links: dict[tuple[int, int], float] = field(default_factory=dict)
    rounds: list[list[tuple[int, int]]] = field(default_factory=list)
    floor_gbps: float = 0.0  # absolute minimum (a share of the line rate), 0 when unknown
    seconds: float = 0.0
    results: list[PairResult] = field(default_factory=list)

    @classmethod
    def of(cls, nnodes: int, pairs: Iterable[PairResult], floor_gbps: float = 0.0) -> Localisation:
        """Rebuilt from measured pairs (a ``BenchResult``'s): the same verdicts as during the run."""
        loc = cls(nnodes=nnodes, floor_gbps=floor_gbps)
        by_round: dict[int, list[PairResult]] = {}
        for p in pairs:
            by_round.setdefault(p.round, []).append(p)
        for r in sorted(by_round):
            loc.add(by_round[r])
        return loc

    def add(self, results: list[PairResult]) -> None:
        self.results += results
        self.rounds.append([p.link for p in results])
        self.links.update({p.link: p.busbw_gbps for p in results})

    @property
    def best(self) -> float:
        return max(self.links.values(), default=0.0)

    def slow(self, link: tuple[int, int]) -> bool:
        bw = self.links[link]
        return bw < SLOW_RATIO * self.best or bw < self.floor_gbps

    def partners(self, node: int) -> dict[int, bool]:
        """node -> {partner: link is slow} over measured links."""
        out = {}
        for a, b in self.links:
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


# --- yardsticks and prediction ----------------------------------------------------------------------
def pair_expected_gbps(node: NodeInfo) -> float | None:
    """What one node pair should reach from this node: the probe's per-rank-pair figure (one NIC on an
    RDMA node), else the line rate of its inter-node links; None when unknown."""
    if node.expected is not None:
        return node.expected.per_rank_gbps or None
    return node.link_gbps or None


def floor_gbps(nodes: Iterable[NodeInfo], backend: str) -> float:
    """The absolute floor of a link: ``FLOOR_SHARE`` of the slowest node's yardstick (0 when unknown)."""
    known = [y for y in map(pair_expected_gbps, nodes) if y]
    share = FLOOR_SHARE[Backend(backend)] if backend in FLOOR_SHARE else FLOOR_SHARE[Backend.NCCL]
    return share * min(known) if known else 0.0


def predict_rounds(nnodes: int) -> tuple[int, int]:
    """(rounds when healthy, rounds with one bad node): printed before starting."""
    if nnodes < 2:
        return 0, 0
    if nnodes == 2:
        return 1, 1
    return (1, 2) if nnodes % 2 == 0 else (2, 3)


def predicted_seconds(rounds: int, size_bytes: int, exchanges: int, gbps: float,
                      overhead_s: float = ROUND_OVERHEAD_S) -> float:
    """Per round: every pair ping-pongs ``size`` bytes ``exchanges`` times (there and back, one way at a
    time, at ``gbps``), plus group setup and a world all-reduce."""
    return rounds * (2 * size_bytes * exchanges / (gbps * GB) + overhead_s) if gbps > 0 else math.inf


def plan_line(nnodes: int, size_bytes: int, exchanges: int, gbps: float | None) -> tuple[str, tuple[float, float]]:
    """The prediction printed before the pass, and (healthy, one bad node) seconds."""
    healthy, one_bad = predict_rounds(nnodes)
    rate = gbps or UNKNOWN_RATE_GBPS
    secs = (predicted_seconds(healthy, size_bytes, exchanges, rate), predicted_seconds(one_bad, size_bytes,
                                                                                        exchanges, rate))
    size = format_size(size_bytes)
    text = (f"node pairs: {nnodes} nodes -> {healthy} round(s) of disjoint pairs when healthy, {one_bad} with one "
            f"bad node; {size} ping-pong x {exchanges} per pair; predicted {secs[0]:.1f}-{secs[1]:.1f} s at "
            + (f"line rate ({gbps:.3f} GB/s)" if gbps else "1 GB/s (line rate unknown)"))
    return text, secs
