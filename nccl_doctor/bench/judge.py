"""Findings from a ``BenchResult`` (pure): wrong data, slow nodes or links, figures not to trust, and what
was not measured. The same verdict on every rank, and in ``preflight``, which judges its own sweep here.

Why these thresholds: docs/bench.md; slow nodes and links: ``pairs.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import MIB, format_size, round_size
from nccl_doctor.bench.cpus import judge_cpus
from nccl_doctor.bench.figures import NodeFigures, node_figures, node_localisation
from nccl_doctor.bench.gpupairs import judge_gpu_pairs
from nccl_doctor.bench.groups import MISFIT_SKIP, mesh_misfit
from nccl_doctor.bench.headline import headline
from nccl_doctor.bench.model import BenchResult, PairResult
from nccl_doctor.bench.pairs import floor_gbps, link_slow_rails, slow_rails, slow_ratio
from nccl_doctor.bench.rails import rail_label
from nccl_doctor.bench.shortfall import JUDGED_CHUNK, judge_expected, unjudged_groups
from nccl_doctor.cluster.slurm import SlurmInfo
from nccl_doctor.codes import Code
from nccl_doctor.report import Finding, Severity, finding, hosts_text, plural

ABOVE_LINK = 1.10  # busbw above 110% of the line rate cannot be a per-link figure
MIN_ITERS = 5
BIG_ENOUGH = {Backend.NCCL: 256 * MIB, Backend.GLOO: 16 * MIB}  # below: latency-bound sizes
PCT = 100
SHORT_SWEEP = Severity.PASS  # ND306 of preflight's fixed short sweep: said, never a warning (``_judge_short_sweep``)
MAX_EVIDENCE = 8  # slow links listed in one "every pair is slow" finding


def judge(result: BenchResult, *, slurm: SlurmInfo | None = None, short_sweep: bool = False) -> list[Finding]:
    """Findings from one ``BenchResult``: wrong data, slow nodes or links, and figures not to trust.
    ``short_sweep``: the sweep is short on purpose (preflight), so its size and iteration counts are not
    warned about."""
    out: list[Finding] = []
    out += _judge_wrong(result)
    out += _judge_nodes(result)
    out += judge_expected(result)
    out += judge_cpus(result)
    out += judge_gpu_pairs(result)
    out += _judge_trust(result, slurm, short_sweep)
    if not any(f.severity is Severity.FAIL for f in out) and result.results:
        out.append(_all_good(result))
    return out


def _all_good(result: BenchResult) -> Finding:
    head = headline(result.results)  # (judge adds this finding only with results)
    best = head.measurement
    largest = "" if head.latency_bound else ", the largest bandwidth-bound size"
    msg = (f"{len(result.results)} measurements verified, 0 wrong elements; busbw {best.busbw_gbps:.3f} GB/s "
           f"({best.op} {best.group}) {head.where}{largest}")
    if result.pairs:
        loc = node_localisation(result)
        msg += (f"; no slow node or link: {len(loc.links)} node pair(s) in {len(loc.rounds)} round(s), "
                f"slowest {min(loc.links.values()):.3f} GB/s, fastest {max(loc.links.values()):.3f} GB/s")
    unjudged = unjudged_groups(result)
    if unjudged:  # said at PASS level: too small per rank to judge at this scale, not a fault
        msg += "; not judged against its yardstick: " + ", ".join(
            f"{m.group} ({m.group_size} ranks) at {format_size(m.size_bytes)}, "
            f"{format_size(m.size_bytes // m.group_size)} per rank (judged from {format_size(JUDGED_CHUNK)} per rank): "
            f"{max(x.busbw_gbps for x in result.results if x.group == m.group):.3f} GB/s, latency-bound at this scale"
            for m in unjudged)
    virtual = [n.host for n in result.nodes if n.nominal_link]
    if virtual:  # said at PASS level: no line rate was there to judge against, and that is not a fault
        msg += (f"; yardstick unknown on {hosts_text(virtual)}: a virtual interface has no line rate (its sysfs "
                "speed is nominal), so the figures were compared with each other")
    return finding(Code.BANDWIDTH_OK, Severity.PASS, msg)


def measured_nothing(result: BenchResult) -> bool:
    """No collective and no node pair was measured: the run cannot pass (exit 2, could not run)."""
    return not result.results and not result.pairs


def coverage(result: BenchResult, *, asked: bool) -> list[Finding]:
    """ND001 (WARN) for what was not measured: every skipped group when the user named the groups
    (``asked``), and always when nothing at all was measured. Nodes whose rank count (or order) does not
    fit the HSDP mesh are always named (one ND001 instead of one per group), whatever the groups asked for."""
    misfit = _misfit_finding(result)
    out = [misfit] if misfit is not None else []
    why = "; ".join(result.skipped) or "no group to measure"
    if measured_nothing(result):
        one_rank = result.nnodes * result.local_world_size == 1
        return [*out, finding(
            Code.CHECK_SKIPPED, Severity.WARN,
            f"nothing was measured on {plural(result.nnodes, 'node')} x {plural(result.local_world_size, 'rank')}: "
            f"{why}",
            "run 2+ ranks: --nproc-per-node 2 on one node, or 2+ nodes" if one_rank else
            "intra needs 2+ ranks per node and inter 2+ nodes; on one node use --groups world "
            "(the default), across nodes leave out --no-pairs or add world")]
    skipped = [s for s in result.skipped if misfit is None or MISFIT_SKIP not in s]
    if asked and skipped:
        out += [finding(Code.CHECK_SKIPPED, Severity.WARN, f"group not measured: {s}",
                        "intra needs 2+ ranks per node and inter 2+ nodes, with the same rank count on every node")
                for s in skipped]
    return out


def _misfit_finding(result: BenchResult) -> Finding | None:
    """ND001 (WARN) naming the nodes whose rank count (or rank order) keeps intra/inter, HSDP's fsdp and
    dp dims, from being measured: the same shape would stop an HSDP job."""
    misfit = mesh_misfit(result.nodes) if result.nnodes > 1 else None
    if misfit is None:
        return None
    why, odd = misfit
    odd_text = hosts_text(odd)
    counts = why.startswith("the nodes run different rank counts")
    return finding(
        Code.CHECK_SKIPPED, Severity.WARN,
        f"{why}: the HSDP mesh (nodes x ranks per node) needs "
        + ("the same rank count on every node" if counts else "node-major rank order")
        + ", so the intra and inter groups (its fsdp and dp dims) were not measured",
        (f"start the same number of ranks on every node: the same --nproc-per-node everywhere (default: one "
         f"per visible GPU), and the same visible GPUs (CUDA_VISIBLE_DEVICES, `nvidia-smi -L` on {odd_text})")
        if counts else "number the ranks node by node (torchrun and srun do; check your launcher's RANK order)",
        host=odd_text)


def _judge_wrong(result: BenchResult) -> list[Finding]:
    out = [finding(Code.WRONG_RESULTS, Severity.FAIL,
                   f"{m.op} on {m.group} ({m.group_size} ranks) at {format_size(m.size_bytes)} returned {m.wrong} "
                   "wrong elements",
                   "a rank computes or moves corrupt data: rerun with NCCL_DEBUG=WARN, check dmesg for Xid/ECC "
                   "errors, and drain the host if it repeats")
           for m in result.results if m.wrong]
    for p in result.pairs:
        if p.wrong:
            a, b = result.nodes[p.a].host, result.nodes[p.b].host
            out.append(finding(Code.WRONG_RESULTS, Severity.FAIL,
                               f"node pair {a} <-> {b} returned {p.wrong} wrong elements",
                               f"check the link between {a} and {b} and both hosts' dmesg", host=a))
    return out


def _judge_nodes(result: BenchResult) -> list[Finding]:
    """Slow nodes (ND302) and links no node can be blamed for (ND303), by ``pairs.py``'s one rule: a
    link is slow below a quarter (NCCL) or a tenth (Gloo) of the best link or below the floor (5% of the line
    rate on Gloo, 25% on NCCL); a node is named when every link it has is slow and a partner is proven good
    elsewhere."""
    if not result.pairs:
        return []
    loc = node_localisation(result)
    rows = {r.index: r for r in node_figures(result)}
    host = [n.host for n in result.nodes]
    best = max(loc.links, key=lambda k: loc.links[k])
    best_txt = f"{host[best[0]]}<->{host[best[1]]} moves {loc.best:.3f} GB/s"
    if loc.best > loc.links[best]:  # a rail beats every link's slowest rail: name it
        p, r = max(((p, r) for p in result.pairs for r in p.rails), key=lambda t: t[1].busbw_gbps)
        best_txt = f"{rail_label(r.rail)} of {host[p.a]}<->{host[p.b]} moves {r.busbw_gbps:.3f} GB/s"
    bad = loc.bad()
    on_rails = slow_rails(result.nnodes, result.pairs, loc.floor_gbps, loc.slow_ratio)
    total, nics = result.pair_rails, _rail_nics(result)  # once: each is a pass over the pairs
    bad_set = set(bad)
    mine: dict[int, dict[tuple[int, int], float]] = {b: {} for b in bad}  # each bad node's links, in one pass
    for k, bw in loc.links.items():
        for end in set(k) & bad_set:
            mine[end][k] = bw
    out = [_slow_node(rows[b], host, mine[b], best_txt, _node_rails(b, on_rails.get(b, []), total, nics))
           for b in bad]
    links = [k for k in loc.slow_links() if not set(k) & bad_set]
    good = loc.good()
    if len(links) > 1 and not good:  # nothing to compare with: one finding, not one per pair
        out.append(finding(
            Code.SLOW_LINK_UNPINNED, Severity.FAIL,
            f"every node pair is slow ({len(links)} pairs, the best {loc.best:.3f} GB/s, under the "
            f"{loc.floor_gbps:.3f} GB/s floor): no node is proven good, so it cannot tell which end is slow; "
            "the transport or the fabric, not one node",
            "check that traffic takes the fast interface (nccl-doctor probe) and that NCCL uses the IB/RoCE "
            "transport, not sockets (nccl-doctor parse on an NCCL_DEBUG=INFO log)",
            evidence=[f"{host[a]}<->{host[b]} {loc.links[(a, b)]:.3f} GB/s" for a, b in links[:MAX_EVIDENCE]],
            host=host[links[0][0]]))
        return out
    rails_text = _link_rails(result)
    for a, b in links:
        bw = loc.links[(a, b)]
        want = [w for w in (rows[a].expected_gbps, rows[b].expected_gbps) if w]
        how = (f"{PCT * bw / min(want):.1f}% of the {min(want):.2f} GB/s line rate" if bw < loc.floor_gbps and want
               else f"under the {loc.floor_gbps:.3f} GB/s floor" if bw < loc.floor_gbps
               else f"{PCT * bw / loc.best:.0f}% of the best pair ({best_txt})")
        if result.nnodes == 2:
            why = "with two nodes it cannot tell which end is slow"
        elif a in good and b in good:
            why = "both ends reach other nodes at full speed: the path between them, not either node"
        else:
            why = "neither end was tested against a node proven good, so it cannot tell which end is slow"
        out.append(finding(
            Code.SLOW_LINK_UNPINNED, Severity.FAIL,
            f"the link between {host[a]} and {host[b]} moves {bw:.3f} GB/s{rails_text((a, b))}, {how}; {why}",
            f"rerun with a third node (the pair pass then names the slow node), or check both ends: "
            f"`ethtool {rows[a].iface or '<iface>'}`, `tc qdisc show` on {host[a]} and {host[b]}, "
            "switch port counters",
            host=host[a], iface=rows[a].iface))
    return out


def _rail_nics(result: BenchResult) -> dict[tuple[int, int], str | None]:
    """(node, rail) -> that node's NIC on the rail (the last pair's word), from one pass over the pairs."""
    out: dict[tuple[int, int], str | None] = {}
    for p in result.pairs:
        for r in p.rails:
            out[(p.a, r.rail)], out[(p.b, r.rail)] = r.nics
    return out


def _node_rails(node: int, rails: list[int], total: int, nics: dict[tuple[int, int], str | None]) -> str:
    """`` on rail 3 (local rank 3, mlx5_3)``: the rails the per-rail rule names on ``node`` of the ``total``
    measured, with this node's NIC for each (``nics``: ``_rail_nics``); empty without rails or when every
    rail of several is slow (the node, not a NIC)."""
    if not rails or total < 2:
        return ""
    if len(rails) == total:
        return f" on every rail ({total} local ranks)"
    return " on " + ", ".join(rail_label(r, [nic] if (nic := nics.get((node, r))) else []) for r in rails)


def _link_rails(result: BenchResult) -> Callable[[tuple[int, int]], str]:
    """link -> `` on rail 2 (local rank 2, mlx5_2 <-> mlx5_2)``: the slow rails of one node pair (all of them:
    empty). Its passes over the pairs are made here, once, not once per slow link."""
    by_link: dict[tuple[int, int], PairResult] = {}
    for p in result.pairs:
        by_link.setdefault(p.link, p)
    best = max((r.busbw_gbps for p in result.pairs if not p.rails_shared for r in p.rails), default=0.0)
    floor = floor_gbps(result.nodes, result.backend, result.yardstick_rails)

    def text(link: tuple[int, int]) -> str:
        pair = by_link.get(link)
        if pair is None or len(pair.rails) < 2:
            return ""
        slow = link_slow_rails(pair, best, floor, slow_ratio(result.backend))
        if not slow or len(slow) == len(pair.rails):
            return ""
        return " on " + ", ".join(f"{rail_label(r.rail, r.nics)} {r.busbw_gbps:.3f} GB/s" for r in slow)

    return text


def _slow_node(row: NodeFigures, host: list[str], links: dict[tuple[int, int], float], best_txt: str,
               rails: str = "") -> Finding:
    """ND302: a node slow with every partner while its partners are fast elsewhere; ``links``: its own
    links (any others are left out); ``rails``: which rails."""
    b = row.index
    mine = sorted((k for k in links if b in k), key=lambda k: links[k])
    txt = ", ".join(f"{host[k[0] if k[1] == b else k[1]]} {links[k]:.3f} GB/s" for k in mine)
    med = f", its peers' median {row.peer_median_gbps:.3f} GB/s" if row.peer_median_gbps else ""
    iface = row.iface or "<iface>"
    return finding(
        Code.SLOW_NODE_BANDWIDTH, Severity.FAIL,
        f"{host[b]} is the slow node{rails}: inter-node bandwidth {row.inter_node_busbw_gbps:.3f} GB/s, slow "
        f"with every partner ({txt}) while {best_txt}{med}",
        f"drain {host[b]} (e.g. `scontrol update nodename={host[b]} state=drain reason=slow-link`) and "
        f"check its link: `ethtool {iface}`, `tc qdisc show dev {iface}`, cable and switch port",
        host=host[b], iface=row.iface)


def _judge_trust(result: BenchResult, slurm: SlurmInfo | None, short_sweep: bool = False) -> list[Finding]:
    out: list[Finding] = []
    if result.results:
        out += _judge_short_sweep(result) if short_sweep else _judge_sweep(result)
    nominal = {n.index for n in result.nodes if n.nominal_link}
    for r in node_figures(result):
        fig, link = r.inter_node_busbw_gbps, r.link_gbps
        if fig is not None and link and fig > ABOVE_LINK * link and r.index not in nominal:
            out.append(finding(
                Code.ABOVE_LINK_RATE, Severity.WARN,
                f"inter-node figure {fig:.3f} GB/s is above the {link:.2f} GB/s line rate of {r.iface}: traffic "
                "took another path, so it is not this link's figure",
                "set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface to test", host=r.host, iface=r.iface))
    if slurm is not None:
        out += _judge_allocation(result, slurm)
    return out


def big_enough(result: BenchResult) -> int | None:
    """The size a sweep must reach on this backend when none of its sizes does (``BIG_ENOUGH``), else None."""
    need = BIG_ENOUGH.get(result.backend, BIG_ENOUGH[Backend.NCCL])
    # a size is rounded down to split into whole elements per rank: 16 MiB over 3 ranks is 12 bytes short
    return need if all(m.size_bytes < round_size(need, m.group_size) for m in result.results) else None


def _too_small(result: BenchResult, need: int) -> str:
    biggest = max(m.size_bytes for m in result.results)
    return (f"largest size {format_size(biggest)} is below {format_size(need)}: small messages are latency-bound, "
            "so these figures understate the bandwidth")


def _judge_short_sweep(result: BenchResult) -> list[Finding]:
    """ND306 for preflight's short sweep, which says what bench says of the same sizes, at ``SHORT_SWEEP``.

    Its sizes are fixed (no --sizes to fix it with) and small only on CPU, where Gloo's figures are never
    judged against a line rate; a WARN there would stand on every healthy CPU run and teach people to ignore
    warnings (a healthy preflight ends with nothing above PASS). Its iterations are enough (``MIN_ITERS``)."""
    need = big_enough(result)
    if need is None:
        return []
    return [finding(Code.SIZES_TOO_SMALL, SHORT_SWEEP,
                    f"{_too_small(result, need)} (preflight's sweep is short on purpose: it checks that every "
                    "collective runs and finds slow nodes by comparing them, it does not measure the bandwidth)",
                    f"for the bandwidth, run `nccl-doctor bench --sizes 1M:{need * 4 // MIB}M:4` on these nodes")]


def _judge_sweep(result: BenchResult) -> list[Finding]:
    """ND306/ND307: sizes too small or too few iterations for the figures to mean much."""
    out = []
    need = big_enough(result)
    if need is not None:
        out.append(finding(Code.SIZES_TOO_SMALL, Severity.WARN, _too_small(result, need),
                           f"rerun with --sizes up to at least {format_size(need)}"))
    few = min(m.iters for m in result.results)
    if few < MIN_ITERS:
        out.append(finding(Code.TOO_FEW_ITERATIONS, Severity.WARN,
                           f"only {few} timed iteration(s) per size: one slow iteration dominates",
                           f"rerun with --iters {MIN_ITERS} or more (or leave --iters unset)"))
    return out


def _judge_allocation(result: BenchResult, slurm: SlurmInfo) -> list[Finding]:
    """ND308: the run does not cover the Slurm allocation it runs in."""
    local = result.local_world_size
    if slurm.nnodes == result.nnodes and not (slurm.gpus_on_node and slurm.gpus_on_node != local):
        return []
    want = plural(slurm.nnodes, "node") + (f" x {plural(slurm.gpus_on_node, 'GPU')}" if slurm.gpus_on_node else "")
    return [finding(Code.WORLD_SIZE_MISMATCH, Severity.WARN,
                    f"the bench ran {plural(result.nnodes, 'node')} x {plural(local, 'rank')}, but Slurm allocated "
                    f"{want}: figures are not for the whole allocation",
                    "run `srun --ntasks-per-node=1 nccl-doctor bench` inside the allocation, without "
                    "--nnodes/--nproc-per-node")]
