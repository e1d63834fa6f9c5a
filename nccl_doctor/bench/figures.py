"""Each node's and group's figures next to their yardsticks: what judging and the report both read (pure)."""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import Any

from nccl_doctor.bench.busbw import Op
from nccl_doctor.bench.model import BenchResult, Group, NodeInfo
from nccl_doctor.bench.pairs import Localisation, floor_gbps, pair_expected_gbps, slow_rails, slow_ratio

PCT = 100
GBPS_DIGITS = 4  # GB/s figures in the JSON
PCT_DIGITS = 1
MIN_PEERS_FOR_MEDIAN = 2


@dataclass(frozen=True, kw_only=True)
class NodeFigures:
    """One node's row in ``nodes`` (the JSON keys, in order)."""

    host: str
    index: int
    ranks: list[int]
    iface: str | None
    link_gbps: float | None
    expected_gbps: float | None
    expected_basis: str | None
    intra_expected_gbps: float | None
    intra_expected_basis: str | None
    inter_node_busbw_gbps: float | None
    pct_of_expected: float | None
    pct_of_link: float | None
    peer_median_gbps: float | None
    pairs: list[str]
    slow: bool
    rails: int = 0  # rails the pair pass measured per node pair (local ranks), 0 without a pair pass
    slow_rails: list[int] = field(default_factory=list)  # the rails (local ranks) behind ``slow``

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pct(value: float | None, want: float | None) -> float | None:
    """``value`` as a percentage of ``want``, one decimal; None when either is unknown."""
    return round(PCT * value / want, PCT_DIGITS) if value is not None and want else None


def gbps(value: float | None) -> float | None:
    """A GB/s figure as the JSON shows it; None for unknown (and for 0: no figure)."""
    return round(value, GBPS_DIGITS) if value else None


def yardstick_gbps(node: NodeInfo, rails: int = 1) -> float | None:
    """What one rail of a pair should reach from ``node`` (``pairs.pair_expected_gbps``), None on a virtual
    link: its sysfs speed is nominal, no line rate to judge a figure against (only the slow-link floor)."""
    return None if node.nominal_link else pair_expected_gbps(node, rails)


def line_rate_gbps(node: NodeInfo) -> float | None:
    """All the node's inter-node links together, None on a virtual link (a nominal speed is no line rate)."""
    return None if node.nominal_link else node.link_gbps


def node_localisation(result: BenchResult) -> Localisation:
    """The pair pass's verdicts, rebuilt from ``result.pairs`` with the floor the run planned with."""
    floor = floor_gbps(result.nodes, result.backend, result.yardstick_rails)
    return Localisation.of(result.nnodes, result.pairs, floor, slow_ratio(result.backend))


def node_figures(result: BenchResult) -> list[NodeFigures]:
    """Each node with its inter-node figure (best pair), what its links should deliver (the probe), its
    peers' median, and whether the pair pass names it (``slow``).

    ``expected_gbps`` is the yardstick for the figure (a pair's slowest rail): one rank pair, so one NIC on
    an NCCL/IB node, or the rails' share of links they share; ``link_gbps`` is all the inter-node links the
    backend uses on that node, together. ``slow_rails``: the rails the per-rail rule names on this node."""
    figs, partners = _pair_index(result)
    bad = set(node_localisation(result).bad()) if result.pairs else set()
    rails = result.yardstick_rails  # a pass over the pairs: once, not per node
    pair_rails = result.pair_rails if result.pairs else 0
    rails_of = slow_rails(result.nnodes, result.pairs, floor_gbps(result.nodes, result.backend, rails),
                          slow_ratio(result.backend))
    known = sorted(v for v in figs.values() if v is not None)
    rows = []
    for n in result.nodes:
        fig = figs[n.index]
        exp = n.expected
        want = yardstick_gbps(n, rails)
        rows.append(NodeFigures(
            host=n.host, index=n.index, ranks=list(n.ranks), iface=n.iface, link_gbps=gbps(line_rate_gbps(n)),
            expected_gbps=gbps(want),
            expected_basis=(exp.inter_basis if exp is not None else
                            n.no_expected or ("sysfs link speed" if n.link_gbps else None)),
            intra_expected_gbps=exp.intra_gbps if exp is not None else None,
            intra_expected_basis=exp.intra_basis if exp is not None else None,
            inter_node_busbw_gbps=round(fig, GBPS_DIGITS) if fig is not None else None,
            pct_of_expected=pct(fig, want), pct_of_link=pct(fig, line_rate_gbps(n)),
            peer_median_gbps=peer_median(known, fig),
            pairs=[result.nodes[k].host for k in partners[n.index]],
            slow=n.index in bad, rails=pair_rails,
            slow_rails=rails_of.get(n.index, []) if n.index in bad else []))
    return rows


def _pair_index(result: BenchResult) -> tuple[dict[int, float | None], dict[int, list[int]]]:
    """Each node's figure (``BenchResult.node_figure``: its best pair) and its partners in pair order, from
    one pass over the pairs (a pass per node is nodes x pairs: 8,192 nodes took seconds to minutes)."""
    figs: dict[int, float | None] = {n.index: None for n in result.nodes}
    partners: dict[int, list[int]] = {n.index: [] for n in result.nodes}
    for p in result.pairs:
        for me, other in ((p.a, p.b), (p.b, p.a)):
            best = figs.get(me)
            figs[me] = p.busbw_gbps if best is None else max(best, p.busbw_gbps)
            partners.setdefault(me, []).append(other)
    return figs, partners


def peer_median(known: list[float], fig: float | None) -> float | None:
    """The median of the other nodes' figures: ``known`` (every node's, sorted) without this node's one
    ``fig``; None with fewer than ``MIN_PEERS_FOR_MEDIAN`` peers. Index arithmetic, not a list per node."""
    skip = bisect.bisect_left(known, fig) if fig is not None else len(known)
    n = len(known) - (fig is not None)
    if n < MIN_PEERS_FOR_MEDIAN:
        return None

    def at(i: int) -> float:  # the i-th of the peers' sorted figures
        return known[i if i < skip else i + 1]

    mid = at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2
    return round(mid, GBPS_DIGITS)


def group_expected(result: BenchResult, group: str) -> float | None:
    """What a group's busbw should reach, from the slowest node: world across nodes and inter run over
    the inter-node links (inter: one group per local rank at once, sharing them); world on one node and
    intra over NVLink/PCIe (GPUs only; CPU ranks have no link to compare with)."""
    links = [line_rate_gbps(n) for n in result.nodes]
    intra = [n.expected.intra_gbps if n.expected is not None else None for n in result.nodes]
    if group == Group.INTRA or (group == Group.WORLD and result.nnodes == 1):
        known = [x for x in intra if x]
        return min(known) if intra and len(known) == len(intra) else None
    known_links = [x for x in links if x]
    if not links or len(known_links) != len(links):
        return None
    share = result.local_world_size if group == Group.INTER else 1
    return min(known_links) / share


def op_expected(result: BenchResult, group: str, op: str) -> float | None:
    """What ``op``'s busbw on ``group`` should reach: ``group_expected``, but all-reduce inside a node of
    NVLS-capable GPUs (NVSwitch multicast: ~480 GB/s busbw on H100 where the other ops reach ~370) against
    its own yardstick (``Expected.intra_allreduce_gbps``), so NVLS neither reads 130% nor hides a fault."""
    want = group_expected(result, group)
    intra = group == Group.INTRA or (group == Group.WORLD and result.nnodes == 1)
    if op != Op.ALL_REDUCE or not intra or want is None:
        return want
    gains = [n.expected.intra_allreduce_gbps / n.expected.intra_gbps
             if n.expected is not None and n.expected.intra_allreduce_gbps and n.expected.intra_gbps else 1.0
             for n in result.nodes]
    return want * min(gains, default=1.0)


def op_basis(result: BenchResult, group: str, op: str) -> str:
    """How ``op_expected`` differs from the group's yardstick, for a finding's text (empty when it does not)."""
    want, mine = group_expected(result, group), op_expected(result, group, op)
    if not want or not mine or mine == want:
        return ""
    return f"; {op} with NVLS (NVSwitch multicast): {mine / want:.2f} x {want:.1f} GB/s"
