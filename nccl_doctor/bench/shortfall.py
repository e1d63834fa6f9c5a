"""Figures below what they should reach (ND312: FAIL below a quarter of the yardstick, WARN below half). On
NCCL: each group's peak busbw at bandwidth-bound sizes against ``figures.group_expected`` (all-reduce against
its own, NVLS-aware one: ``figures.op_expected``), and each rail on a NIC of its own against its per-rail
yardstick (``figures.yardstick_gbps``). On any backend: a rail far behind the rails sharing its link
(``pairs.lagging_rails``): a lagging rank, not the link. Pure; ``judge.judge`` calls it.

Why half (``EXPECTED_SHARE``): the yardsticks are estimates (intra: NCCL's effective NVLink/PCIe figure
from a table; inter: the ports' line rate), which healthy nodes reach at 80-95% in nccl-tests at 256 MiB
and above; a NIC or cable at half its rate (a rail at ~48%) lands below half, while the run-to-run spread
and PyTorch's per-call overhead do not. Why a quarter FAILs (``FAIL_SHARE``): a dead NVLink (NCCL falls back
to SHM or PCIe: 5-15% of NVLink), sockets instead of RDMA, or a link at a few percent is broken, not slow,
and a gate that exits 0 on it lets the node into the job; no estimate in the table is off by 4x.
Why per-rank chunks (``JUDGED_CHUNK``): a ring moves ``size / n`` per step, so at 1,024 x 8 ranks even
256 MiB is 32 KiB a step and latency-bound (about 13 GB/s against a 50 GB/s yardstick on a healthy
cluster): a size is judged only when its chunk is bandwidth-bound, otherwise its figure is reported
unjudged (``unjudged_groups``, said in ND300). Gloo is never judged so: it is CPU-bound, its figures say
nothing about the links' capacity. Rails already judged slow (ND302/ND303: under a quarter of the best link
or the floor, FAIL) are not repeated.
"""

from __future__ import annotations

import statistics

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import MIB, format_size
from nccl_doctor.bench.figures import group_expected, node_localisation, op_basis, op_expected, yardstick_gbps
from nccl_doctor.bench.model import BenchResult, Group, Measurement, PairResult, RailResult
from nccl_doctor.bench.pairs import LAGGING_RAIL_RATIO, below_share, lagging_rails
from nccl_doctor.bench.rails import rail_label
from nccl_doctor.codes import Code
from nccl_doctor.report import Finding, Severity, finding

EXPECTED_SHARE = 0.5  # on NCCL, a figure below half its yardstick is a WARN
FAIL_SHARE = 0.25  # ... and below a quarter a FAIL: a dead NVLink, sockets for RDMA, a link at a few percent
JUDGED_FROM = 64 * MIB  # group figures are judged at sizes this big or bigger (smaller ones are latency-bound)
# ... and only where each rank's ring chunk (size / ranks) is this big: with ~10 us per ring step across
# nodes and 50 GB/s (about 0.5 MB in flight), a 4 MiB chunk reaches ~90% of the link, so a healthy group is
# never judged below half; at 1,024 x 8 ranks 256 MiB is 32 KiB per rank, latency-bound
JUDGED_CHUNK = 4 * MIB
RANK_SPREAD = 1.2  # the slowest rank is named when its time is above this many times the median rank's
MAX_EVIDENCE = 8
PCT = 100


def judge_expected(result: BenchResult) -> list[Finding]:
    """ND312 for groups and rails below ``EXPECTED_SHARE`` of their yardstick (NCCL only), and for rails
    lagging behind the rails that share their link (any backend)."""
    lagging = _lagging(result)
    if result.backend != Backend.NCCL:
        return lagging
    return [*_groups(result), *_rails(result), *lagging]


def judged_groups(result: BenchResult) -> list[str]:
    """The groups with one yardstick: intra and inter, and world on one node (the intra-node figure);
    world across nodes mixes NVLink and the NICs, so no single yardstick applies."""
    seen = dict.fromkeys(m.group for m in result.results)
    return [g for g in seen if g != Group.WORLD or result.nnodes == 1]


def slowest_rank(result: BenchResult, m: Measurement) -> tuple[int, str] | None:
    """(rank, host) of the rank whose own time stands out (``RANK_SPREAD`` x the median), else None:
    every rank of a collective waits for the others, so only a clear straggler is named."""
    times = m.rank_time_us
    if len(times) < 2:
        return None
    med = statistics.median(times)
    rank = max(range(len(times)), key=lambda r: times[r])
    if med <= 0 or times[rank] <= RANK_SPREAD * med:
        return None
    host = next((n.host for n in result.nodes if rank in n.ranks), "?")
    return rank, host


def group_basis(result: BenchResult, group: str) -> str:
    """How a group's yardstick was made: the slowest node's basis."""
    exps = [n.expected for n in result.nodes if n.expected is not None]
    if group == Group.INTRA or (group == Group.WORLD and result.nnodes == 1):
        known = [e for e in exps if e.intra_gbps]
        low = min(known, key=lambda e: e.intra_gbps or 0.0) if known else None
        return (low.intra_basis or "") if low else "intra-node estimate"
    known = [e for e in exps if e.inter_gbps]
    low = min(known, key=lambda e: e.inter_gbps or 0.0) if known else None
    basis = low.inter_basis if low else "the nodes' link speed"
    return f"{basis}, shared by the {result.local_world_size} inter groups that run at once"


def judged(m: Measurement) -> bool:
    """A size whose figure is judged against its yardstick: big enough (``JUDGED_FROM``) and with a
    bandwidth-bound chunk per rank (``JUDGED_CHUNK``)."""
    return m.size_bytes >= JUDGED_FROM and m.size_bytes / max(m.group_size, 1) >= JUDGED_CHUNK


def unjudged_groups(result: BenchResult) -> list[Measurement]:
    """On NCCL, each group with a yardstick whose every size is too small per rank to judge (``judged``):
    its largest measurement, reported without a verdict (a large cluster's inter and world groups)."""
    if result.backend != Backend.NCCL:
        return []
    out = []
    for g in judged_groups(result):
        ms = [m for m in result.results if m.group == g]
        if ms and group_expected(result, g) and not any(judged(m) for m in ms):
            out.append(max(ms, key=lambda m: m.size_bytes))
    return out


def severity_of(share: float) -> Severity | None:
    """FAIL below ``FAIL_SHARE`` of the yardstick, WARN below ``EXPECTED_SHARE``, else no finding."""
    if share < FAIL_SHARE:
        return Severity.FAIL
    return Severity.WARN if share < EXPECTED_SHARE else None


def _groups(result: BenchResult) -> list[Finding]:
    out = []
    for g in judged_groups(result):
        ms = [m for m in result.results if m.group == g and judged(m)]
        wants = {op: op_expected(result, g, op) for op in {m.op for m in ms}}
        ms = [m for m in ms if wants[m.op]]
        if not ms:
            continue
        best = max(ms, key=lambda m: m.busbw_gbps / (wants[m.op] or 1.0))  # each op on its own yardstick
        want = wants[best.op] or 1.0
        severity = severity_of(best.busbw_gbps / want)
        if severity is None:
            continue
        slow = slowest_rank(result, best)
        who = (f"; the slowest rank is {slow[0]} on {slow[1]}" if slow else
               "; every rank took about as long (the whole group, or every node alike)")
        intra = g != Group.INTER
        fix = ("check NVLink on the host: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`, the fabric manager "
               "(`systemctl status nvidia-fabricmanager`), and NCCL's transport with NCCL_DEBUG=INFO "
               "(`nccl-doctor parse`: P2P/IPC, not SHM)" if intra else
               "check the NICs at both ends (`ibstat`, `ethtool`), that NCCL uses IB/RoCE and not sockets "
               "(`nccl-doctor parse` on an NCCL_DEBUG=INFO log), and the node-pair pass for the rail")
        limit = FAIL_SHARE if severity is Severity.FAIL else EXPECTED_SHARE
        out.append(finding(
            Code.BELOW_EXPECTED, severity,
            f"{g} group ({best.group_size} ranks): peak busbw {best.busbw_gbps:.1f} GB/s ({best.op} at "
            f"{format_size(best.size_bytes)}) is {PCT * best.busbw_gbps / want:.0f}% of the expected {want:.1f} GB/s, "
            f"below {PCT * limit:.0f}%; yardstick: {group_basis(result, g)}{op_basis(result, g, best.op)}{who}",
            fix, host=slow[1] if slow else None, rank=slow[0] if slow else None))
    return out


def _rails_of(result: BenchResult, p: PairResult) -> tuple[RailResult, ...]:
    """A pair's rails; a result without rails is its first ranks' one rail."""
    if p.rails:
        return p.rails
    ends = (result.nodes[p.a].ranks[0], result.nodes[p.b].ranks[0])
    return (RailResult(rail=0, ranks=ends, time_us=p.time_us, busbw_gbps=p.busbw_gbps, wrong=p.wrong),)


def rails_below(result: BenchResult) -> list[tuple[PairResult, RailResult, float]]:
    """(pair, rail, yardstick) for every rail below ``EXPECTED_SHARE`` of its yardstick, worst share first;
    links the pair pass already calls slow are left to ND302/ND303, rails sharing a link to ``_lagging``."""
    if not result.pairs:
        return []
    slow = set(node_localisation(result).slow_links())
    n = result.pair_rails
    out = []
    for p in result.pairs:
        known = [y for x in (p.a, p.b) if (y := yardstick_gbps(result.nodes[x], n))]
        if p.link in slow or not known or p.rails_shared:
            continue
        want = min(known)
        out += [(p, r, want) for r in below_share(_rails_of(result, p), want, EXPECTED_SHARE)]
    return sorted(out, key=lambda t: t[1].busbw_gbps / t[2])


def _common_node(pairs: list[PairResult]) -> int | None:
    """The one node every pair involves, when there are 2+ distinct pairs (that node is the suspect)."""
    common = set.intersection(*({q.a, q.b} for q in pairs)) if pairs else set()
    return min(common) if len(common) == 1 and len({q.link for q in pairs}) > 1 else None


def _lagging(result: BenchResult) -> list[Finding]:
    """Rails far behind their siblings on a shared link: the pair's figure (their sum) is fine, one rank is not."""
    slow = _slow_links(result)  # once, not per pair: each call rebuilds the pass's verdicts
    rows = [(p, r) for p in result.pairs if p.link not in slow for r in lagging_rails(p)]
    if not rows:
        return []
    host = [n.host for n in result.nodes]
    node = _common_node([p for p, _ in rows])

    def line(p: PairResult, r: RailResult) -> str:
        mean = sum(x.busbw_gbps for x in p.rails) / len(p.rails)
        return (f"{host[p.a]}<->{host[p.b]} {rail_label(r.rail, r.nics)} ranks {r.ranks[0]}<->{r.ranks[1]}: "
                f"{r.busbw_gbps:.3f} GB/s, {PCT * r.busbw_gbps / mean:.0f}% of the {len(p.rails)} rails' mean "
                f"{mean:.3f} GB/s")

    where = f"; every one involves {host[node]}" if node is not None else ""
    return [finding(
        Code.BELOW_EXPECTED, Severity.WARN,
        f"{len(rows)} rail(s) lag far behind the rails sharing their link (under {PCT * LAGGING_RAIL_RATIO:.0f}% of "
        f"their mean): {line(*rows[0])}{where}; the link is fine, a rank at one end is slow (its GPU, CPU or "
        "process)",
        "check the named local rank's process and device on both hosts (`nvidia-smi`, `top`: CPU binding, a "
        "throttled or busy GPU), then rerun",
        evidence=[line(*t) for t in rows[:MAX_EVIDENCE]], host=host[node] if node is not None else host[rows[0][0].a])]


def _slow_links(result: BenchResult) -> set[tuple[int, int]]:
    return set(node_localisation(result).slow_links()) if result.pairs else set()


def _rails(result: BenchResult) -> list[Finding]:
    below = rails_below(result)
    if not below:
        return []
    host = [n.host for n in result.nodes]

    def line(p: PairResult, r: RailResult, want: float) -> str:
        return (f"{host[p.a]}<->{host[p.b]} {rail_label(r.rail, r.nics)}: {r.busbw_gbps:.2f} GB/s, "
                f"{PCT * r.busbw_gbps / want:.0f}% of {want:.2f} GB/s")

    p, r, want = below[0]
    node = _common_node([q for q, _, _ in below])
    basis = next((x.expected.inter_basis for x in (result.nodes[p.a], result.nodes[p.b]) if x.expected), "link speed")
    where = f"; every one involves {host[node]}" if node is not None else ""
    nic = r.nics[0] if node in (None, p.a) else r.nics[1]
    severity = severity_of(r.busbw_gbps / want) or Severity.WARN  # the worst rail's: below a quarter FAILs
    return [finding(
        Code.BELOW_EXPECTED, severity,
        f"{len(below)} rail(s) of the node-pair pass below {PCT * EXPECTED_SHARE:.0f}% of the expected per-rail "
        f"figure; the slowest: {line(p, r, want)} (yardstick: {basis}){where}",
        f"check {nic or 'the NIC of local rank ' + str(r.rail)} at both ends of the named rail(s): `ibstat`, "
        "`ethtool`, its cable and switch port; `nccl-doctor probe` shows which NIC is nearest each GPU",
        evidence=[line(*t) for t in below[:MAX_EVIDENCE]],
        host=host[node] if node is not None else host[p.a], iface=nic)]
