"""Node pairs for ``bench`` and ``preflight``: which node (or link) is slow, in O(N) work.

Planning (plain functions, tested directly). Round 1 pairs node 0 with 1, 2 with 3, ...: neighbours in
the node list, usually under one leaf switch. Round 2, the far round (``far_round``), pairs node i with
node i + ceil(N/2): the halves of the list meet, so the leaf-to-spine links carry traffic too. A slow link
makes both its nodes suspects; each later round tests suspects (and a node not yet measured) against nodes
already shown good, as many at once as there are good nodes. A healthy cluster of 3 or more nodes costs
two rounds (2 nodes: one); one bad node is named in those two (its two partners are proven good by their
other link; with odd N one more round at most), 16 and 256 bad nodes among 8,192 in 2 and 3 rounds; never
the N-1 rounds of all-pairs. A bad uplink makes far links slow between nodes good in round 1: they are
measured again and reported as slow links, never as bad nodes.

Judging (one rule for both commands; ``judge.py`` applies it). A link is slow below ``slow_ratio`` (a
quarter on NCCL, a tenth on CPU-bound Gloo) of the best link, or below the floor (a share of the line rate,
``FLOOR_SHARE``). A node is named only
when every link it has is slow *and* one of its partners is proven good elsewhere. This is preferred to
"a node's best pair below half its peers' median" because it needs proof: with adaptive rounds a good
node paired with a bad one in round 1 holds one slow pair until it is retested, and the median rule
would blame it whenever no retest could be planned; and a median stops naming anyone once half the
nodes are slow (a bad rack), the best link does not. A slow link with no end to blame (two nodes, or no
known-good node left to test against) is reported as a link. Each node's figure (its best pair) and its
peers' median are still reported, as figures.

Rails: every local rank of a node ping-pongs the same local rank of the partner node, all rails of all
pairs at once (``plan_rails``): on 8-GPU / 8-NIC nodes rail i is GPU i and the NIC nearest it, so a bad
NIC or cable on any rail is measured, not only GPU 0's. A link's figure is its slowest rail, so planning
and judging above run unchanged on node pairs; ``rail_localisation`` runs the same rule per rail, which
names the rail (and its NIC) behind a slow node or link. The yardstick of one rail is one NIC, or its share
of the node's links when rails share them (``pair_expected_gbps``).

Measuring (``worker.py``, inside a process group): each rail's two ranks ping-pong point-to-point
(isend/irecv) on the world group, one direction at a time, so each flow's ACKs cross an idle link and a
shaped link shows its rate: 1.00-1.05 of one-way raw TCP on a tbf link, where a simultaneous two-way
exchange gave 0.62-0.68. nccl-doctor creates no group: a ``new_group`` is a store barrier over every rank,
made by every rank for every group, so 1,024 nodes x 8 rails cost 4,096 of them per rank per round before a
byte moved. On NCCL, torch itself gives each rail a communicator of its own: an unbatched send/recv in lazy
init makes a 2-rank NCCL communicator for the two ranks at their first exchange (torch warns: "An unbatched
P2P op (send/recv) was called on this ProcessGroup with size N. In lazy initialization mode, this will
result in a new 2-rank NCCL communicator to be created", ``fixtures/gpu/h200-2026-12-04/fake2``); with
``device_id`` (eager init) torch runs it on the group's own communicator instead, serialised with that
group's other operations. Either way a rail measures the two GPUs' NIC-level path as NCCL picks it for
that pair: not the world communicator's rings and trees, and not PXN. The NIC named for a rail is the
probe's nearest to its GPU by PCI path (``rails.py``), not read from NCCL's log. Gloo reuses the world
group's TCP connection between the two ranks. Each rail's two ranks shake hands (a one-element exchange)
before timing, instead of a barrier on their group; the ranks outside every rail of a round (the odd
node out) make the same world all-reduces as the others: one that shares each rail's pace and lines the
rails up, and the two that share the figures, so every rank ends each round with the same figures and
plans the same next round. A rail's timed exchanges fit ``PAIR_LOOP_BUDGET_S`` at the pace of its first
ones (``rail_iters``), and the closing all-reduce waits ``closing_deadline_s``: a rail fallen back to 1 GbE
is measured in fewer exchanges and named slow, not left to outlast the collective timeout.

Cost: planning and judging are linear in nodes and links (``Localisation.verdicts``, ``Pool``): 8,192
nodes plan and judge in about half a second of CPU (``benchmarks/bench_pair_plan.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field, replace

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import GB, format_size
from nccl_doctor.bench.model import NodeInfo, PairResult, RailResult

SLOW_RATIO = 0.25  # a link below a quarter of the best link is slow (tbf/bad cable: 10-100x)
# Gloo moves bytes with the host's CPUs: a round of many pairs at once shares the cores, and a later round of
# a few runs alone, so healthy links differ by up to ~6x across rounds on a busy host (16 nodes on 2 cores:
# 0.43-2.58 GB/s); a throttled or broken link is still 40-200x below
SLOW_RATIO_BY_BACKEND: dict[Backend, float] = {Backend.NCCL: SLOW_RATIO, Backend.GLOO: 0.1}
# rails sharing one link split it unevenly (TCP, CPU contention: 6x seen on 2 cores); one far below its
# siblings' mean is a rank lagging (its GPU, CPU or process), not the link
LAGGING_RAIL_RATIO = 0.1
FLOOR_SHARE = {Backend.NCCL: 0.25, Backend.GLOO: 0.05}  # ... or below this share of the line rate (Gloo: CPU-bound)
MAX_ROUNDS = 6
FAR_MIN_NODES = 3  # the far round needs a node round 1 did not pair with: from 3 nodes
# the timed exchanges of one rail, at most: a rail's iterations are cut to fit (``rail_iters``). A healthy rail
# never needs it (32 x 2 x 256 MiB: 0.34 s at 50 GB/s, 5.5 s at 25 Gb/s), a rail fallen back to 1 GbE needs
# ~140 s for the same: beyond the collective timeout, which turned a slow rail into a timeout naming nobody
PAIR_LOOP_BUDGET_S = 10.0
PAIR_LOOP_TIMEOUT_SHARE = 0.25  # ... and at most this share of the collective timeout (its check runs first)
# the rails' closing all-reduce waits for the slowest rail's planned loop this many times over, plus the
# margin (the handshakes, a loop slower than its first exchange), never past the collective timeout
CLOSE_SLACK = 4.0
CLOSE_MARGIN_S = 10.0
ROUND_OVERHEAD_S = 0.05  # per round: its world all-reduces and handshakes
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
    best_rail_gbps: float = 0.0  # the fastest rail anywhere: a link's slowest rail is judged against it
    measured: dict[tuple[int, int], int] = field(default_factory=dict)  # times each link was measured (``add``)
    slow_ratio: float = SLOW_RATIO  # of the best link, below which a link is slow (``slow_ratio``)

    @classmethod
    def of(cls, nnodes: int, pairs: Iterable[PairResult], floor_gbps: float = 0.0,
           ratio: float = SLOW_RATIO) -> Localisation:
        """Rebuilt from measured pairs (a ``BenchResult``'s): the same verdicts as during the run."""
        loc = cls(nnodes=nnodes, floor_gbps=floor_gbps, slow_ratio=ratio)
        by_round: dict[int, list[PairResult]] = {}
        for p in pairs:
            by_round.setdefault(p.round, []).append(p)
        for r in sorted(by_round):
            loc.add(by_round[r])
        return loc

    def add(self, results: list[PairResult]) -> None:
        self.results += results
        self.rounds.append([p.link for p in results])
        for p in results:  # a link measured again keeps its better figure: a slow link is slow every time
            self.links[p.link] = max(self.links.get(p.link, 0.0), p.busbw_gbps)
            self.measured[p.link] = self.measured.get(p.link, 0) + 1
        self.best_rail_gbps = max([self.best_rail_gbps,
                                   *(r.busbw_gbps for p in results if not p.rails_shared for r in p.rails)])

    @property
    def best(self) -> float:
        """The best link, or the best rail anywhere when rails were measured (with two nodes a bad rail is
        slow against the good rails of the same pair)."""
        return max(max(self.links.values(), default=0.0), self.best_rail_gbps)

    def threshold(self) -> float:
        """A link below this is slow: ``slow_ratio`` of the best, or the floor."""
        return max(self.slow_ratio * self.best, self.floor_gbps)

    def slow(self, link: tuple[int, int]) -> bool:
        return self.links[link] < self.threshold()

    def partners(self, node: int) -> dict[int, bool]:
        """node -> {partner: link is slow} over measured links."""
        return self.verdicts().partners.get(node, {})

    def verdicts(self) -> Verdicts:
        """Every verdict at once, from one pass over the links: linear in nodes and links (the links are
        read as they are now; tests may write them directly)."""
        cut = self.threshold()
        partners: dict[int, dict[int, bool]] = {}
        for (a, b), bw in self.links.items():
            partners.setdefault(a, {})[b] = partners.setdefault(b, {})[a] = bw < cut
        good = {n for n, p in partners.items() if not all(p.values())}
        bad = [n for n in sorted(partners) if all(partners[n].values()) and any(q in good for q in partners[n])]
        done = good | set(bad)
        return Verdicts(partners=partners, good=good, bad=bad,
                        unresolved=[n for n in range(self.nnodes) if n not in done])

    def good(self) -> set[int]:
        return self.verdicts().good

    def bad(self) -> list[int]:
        """Every link slow, and slow against at least one node proven good elsewhere."""
        return self.verdicts().bad

    def unresolved(self) -> list[int]:
        """Nodes with only slow links and no good partner yet, or never tested."""
        return self.verdicts().unresolved

    def slow_links(self) -> list[tuple[int, int]]:
        cut = self.threshold()
        return sorted(link for link, bw in self.links.items() if bw < cut)


@dataclass(frozen=True)
class Verdicts:
    """What the measured links say, node by node (``Localisation.verdicts``): each node's partners
    (partner -> the link is slow), the nodes with a good link, the nodes named slow (every link slow, one
    against a good node), and the rest (``unresolved``: only slow links and no good partner, or untested)."""

    partners: dict[int, dict[int, bool]]
    good: set[int]
    bad: list[int]
    unresolved: list[int]


@dataclass(frozen=True)
class RailPlan:
    """One ping-pong of a round: local rank ``rail`` of node ``a`` (world rank ``ranks[0]``) with the same
    local rank of node ``b`` (``ranks[1]``); ``pair`` indexes the round's node pairs."""

    pair: int
    a: int
    b: int
    rail: int
    ranks: tuple[int, int]


def plan_rails(pairs: Sequence[tuple[int, int]], node_ranks: Sequence[Sequence[int]]) -> list[RailPlan]:
    """Every rail of every node pair of a round, measured at once: local rank i of node a with local rank i
    of node b (as many rails as the smaller node has ranks). Pairs are disjoint, so no rank is in two."""
    return [RailPlan(k, a, b, i, (node_ranks[a][i], node_ranks[b][i]))
            for k, (a, b) in enumerate(pairs) for i in range(min(len(node_ranks[a]), len(node_ranks[b])))]


def rails_share_links(nodes: Iterable[NodeInfo], rails: int) -> bool:
    """Whether ``rails`` rails at once share the nodes' links: a rail's yardstick is below one rank pair's
    (one socket link for every local rank), or some node's yardstick is unknown (then assume they do)."""
    for n in nodes:
        one = n.expected.per_rank_gbps if n.expected is not None else n.link_gbps
        if not one or (pair_expected_gbps(n, rails) or 0.0) < one:
            return rails > 1
    return False


def pair_figure(rails: Sequence[RailResult], shared: bool) -> float:
    """A node pair's figure from its rails: their sum when they share the link (what it moved), else the
    slowest rail's (a NIC each: one bad NIC makes the pair slow)."""
    figs = [r.busbw_gbps for r in rails]
    return (sum(figs) if shared else min(figs)) if figs else 0.0


def lagging_rails(pair: PairResult) -> list[RailResult]:
    """Rails sharing a link that lag far behind their siblings (``LAGGING_RAIL_RATIO`` of the mean)."""
    if not pair.rails_shared or len(pair.rails) < 2:
        return []
    mean = sum(r.busbw_gbps for r in pair.rails) / len(pair.rails)
    return [r for r in pair.rails if r.busbw_gbps < LAGGING_RAIL_RATIO * mean]


def rail_localisation(nnodes: int, pairs: Iterable[PairResult], rail: int, floor_gbps: float = 0.0,
                      ratio: float = SLOW_RATIO) -> Localisation:
    """The pair pass's rule run on one rail's figures alone (pairs without that rail, or whose rails share
    the link, are left out)."""
    one = [replace(p, busbw_gbps=r.busbw_gbps, time_us=r.time_us, rails=(r,))
           for p in pairs if not p.rails_shared for r in p.rails if r.rail == rail]
    return Localisation.of(nnodes, one, floor_gbps, ratio)


def slow_rails(nnodes: int, pairs: Sequence[PairResult], floor_gbps: float = 0.0,
               ratio: float = SLOW_RATIO) -> dict[int, list[int]]:
    """node -> the rails on which the per-rail rule names it (slow with every partner on that rail)."""
    rails = sorted({r.rail for p in pairs for r in p.rails})
    out: dict[int, list[int]] = {}
    for rail in rails:
        for n in rail_localisation(nnodes, pairs, rail, floor_gbps, ratio).bad():
            out.setdefault(n, []).append(rail)
    return out


def link_slow_rails(pair: PairResult, best_rail_gbps: float, floor_gbps: float = 0.0,
                    ratio: float = SLOW_RATIO) -> list[RailResult]:
    """The rails of one node pair (a NIC each) below ``ratio`` of the best rail anywhere, or under the
    floor; rails sharing the link: the lagging ones."""
    if pair.rails_shared:
        return lagging_rails(pair)
    return [r for r in pair.rails if r.busbw_gbps < ratio * best_rail_gbps or r.busbw_gbps < floor_gbps]


def slow_ratio(backend: Backend) -> float:
    """The share of the best link below which a link is slow, for the backend that measured it."""
    return SLOW_RATIO_BY_BACKEND.get(backend, SLOW_RATIO)


def below_share(rails: Iterable[RailResult], want_gbps: float | None, share: float) -> list[RailResult]:
    """Rails below ``share`` of their yardstick (none when the yardstick is unknown)."""
    return [r for r in rails if want_gbps and r.busbw_gbps < share * want_gbps]


def first_round(nnodes: int) -> list[tuple[int, int]]:
    """Neighbours in the node list: 0-1, 2-3, ... (the odd node out waits for a later round)."""
    return [(i, i + 1) for i in range(0, nnodes - 1, 2)]


def far_round(nnodes: int) -> list[tuple[int, int]]:
    """Node i with node i + ceil(N/2): the two halves of the node list (racks, leaf switches: the list is in
    the scheduler's order) against each other, so leaf-to-spine links carry traffic that round 1's
    neighbours keep under one leaf. Disjoint; with odd N it takes in round 1's odd node out and leaves out one
    that round 1 measured. None for fewer than 3 nodes (nothing round 1 did not pair)."""
    if nnodes < FAR_MIN_NODES:
        return []
    half = (nnodes + 1) // 2
    return [(i, i + half) for i in range(nnodes - half)]


def next_round(loc: Localisation) -> list[tuple[int, int]]:
    """Round 2 is the far round (``far_round``), whatever round 1 found: it crosses the spine and, where
    round 1 saw a slow pair, tests both ends against other partners at once. Later rounds: disjoint pairs
    testing each unresolved node against a good node (else any node it has not met): the first free one in
    node order. Linear in nodes and links (``Pool``), so 8,192 nodes plan in milliseconds."""
    if len(loc.rounds) >= MAX_ROUNDS:
        return []
    if len(loc.rounds) == 1:
        far = [p for p in far_round(loc.nnodes) if p not in loc.links]
        if far:
            return far
    v = loc.verdicts()
    busy: set[int] = set()
    good = Pool(sorted(v.good), busy)
    others = Pool([m for m in range(loc.nnodes) if m not in v.good], busy)
    pairs = []
    for n in v.unresolved:
        if n in busy:
            continue
        avoid = v.partners.get(n, {}).keys() | {n}
        ref = good.first(avoid)
        ref = others.first(avoid) if ref is None else ref
        if ref is not None:
            busy |= {n, ref}
            pairs.append((min(n, ref), max(n, ref)))
    for a, b in unexplained(loc, v):
        if a not in busy and b not in busy:
            busy |= {a, b}
            pairs.append((a, b))
    return pairs


def unexplained(loc: Localisation, v: Verdicts) -> list[tuple[int, int]]:
    """Slow links measured once whose both ends are proven good elsewhere: measured once more before they
    are blamed (ND303). On a busy fabric or shared cores one round's figure can be a fraction of the link's
    (a 16-node run on 2 cores saw one healthy pair at 17% of the best); a link that is really slow is slow
    the second time too, and a healthy one costs one more round instead of a false FAIL."""
    return [link for link in loc.slow_links()
            if loc.measured.get(link) == 1 and link[0] in v.good and link[1] in v.good]


class Pool:
    """Candidate partners in order; ``first`` finds the first one neither busy nor to avoid. Busy ones at
    the front are passed once for all, and a node avoids only its few partners, so a round's search is
    linear in the nodes, not nodes x candidates."""

    def __init__(self, nodes: list[int], busy: set[int]):
        self.nodes, self.busy, self.start = nodes, busy, 0

    def first(self, avoid: Set[int]) -> int | None:
        while self.start < len(self.nodes) and self.nodes[self.start] in self.busy:
            self.start += 1
        for i in range(self.start, len(self.nodes)):
            m = self.nodes[i]
            if m not in self.busy and m not in avoid:
                return m
        return None


# --- yardsticks and prediction ----------------------------------------------------------------------
def pair_expected_gbps(node: NodeInfo, rails: int = 1) -> float | None:
    """What one rail of a node pair should reach from this node while ``rails`` rails run at once: the
    probe's per-rank-pair figure (one NIC on an RDMA node), but no more than the rails' share of all the
    node's inter-node links (rails sharing one socket link split it); None when unknown."""
    one = node.expected.per_rank_gbps if node.expected is not None else node.link_gbps
    total = node.expected.inter_gbps if node.expected is not None else node.link_gbps
    if not one:
        return None
    return min(one, total / max(rails, 1)) if total else one


def floor_gbps(nodes: Iterable[NodeInfo], backend: Backend, rails: int = 1) -> float:
    """The absolute floor of a link: ``FLOOR_SHARE`` of the slowest node's yardstick (0 when unknown)."""
    known = [y for n in nodes if (y := pair_expected_gbps(n, rails))]
    share = FLOOR_SHARE.get(backend, FLOOR_SHARE[Backend.NCCL])
    return share * min(known) if known else 0.0


def predict_rounds(nnodes: int) -> tuple[int, int]:
    """(rounds when healthy, rounds with one bad node): printed before starting. From 3 nodes a healthy
    cluster runs round 1 and the far round; one bad node is then named by both its partners (proven good by
    their other link), except with odd N when the node the far round left out was its round-1 partner (one
    more round for that node)."""
    if nnodes < 2:
        return 0, 0
    if nnodes < FAR_MIN_NODES:
        return 1, 1
    return (2, 2) if nnodes % 2 == 0 else (2, 3)


def predicted_seconds(rounds: int, size_bytes: int, exchanges: int, gbps: float,
                      overhead_s: float = ROUND_OVERHEAD_S) -> float:
    """Per round: every pair ping-pongs ``size`` bytes ``exchanges`` times (there and back, one way at a
    time, at ``gbps``), plus the round's world all-reduces and handshakes."""
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


# --- sizing a round to its slowest rail -------------------------------------------------------------
def pair_loop_budget_s(timeout_s: float | None) -> float:
    """The most one rail's timed exchanges may take: ``PAIR_LOOP_BUDGET_S``, or a share of the collective
    timeout when that is shorter (the rail's checked exchange and the closing all-reduce share it too)."""
    if timeout_s is None or timeout_s <= 0:
        return PAIR_LOOP_BUDGET_S
    return min(PAIR_LOOP_BUDGET_S, PAIR_LOOP_TIMEOUT_SHARE * timeout_s)


def rail_iters(planned: int, first_exchange_s: float, budget_s: float) -> int:
    """A rail's timed exchanges: the ``planned`` count, or as many as fit ``budget_s`` at the pace of its
    first (checked) exchange, one at least: a slow rail is measured in fewer exchanges and named slow, never
    left to run into the timeout. Every rank computes it from the same shared paces, so both ends agree."""
    if first_exchange_s <= 0:
        return planned
    return max(1, min(planned, int(budget_s / first_exchange_s)))


def closing_deadline_s(loops_s: Sequence[float], timeout_s: float | None) -> float:
    """How long a rank waits in the round's closing all-reduce for the slowest rail (``loops_s``: each rail's
    planned loop, its iterations x its pace): ``CLOSE_SLACK`` times the slowest plus ``CLOSE_MARGIN_S``, at most
    the collective timeout (where known). A rail that stops inside its loop is then a failure of this round
    within seconds of its plan, not of the whole timeout."""
    slowest = max(loops_s, default=0.0)
    deadline = CLOSE_SLACK * slowest + CLOSE_MARGIN_S
    return deadline if timeout_s is None or timeout_s <= 0 else min(deadline, timeout_s)
