"""Which groups a run measures, and why the others are skipped: a pure plan the worker builds groups from.

``intra`` and ``inter`` are the "fsdp" and "dp" dims of the HSDP mesh ``init_device_mesh(dev, (nodes,
ranks per node))``; they are measured only where that mesh fits the nodes and differs from ``world``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nccl_doctor.bench.model import Group, NodeInfo
from nccl_doctor.node import majority_first
from nccl_doctor.report import hosts_text, plural

MISFIT_SKIP = "does not fit the HSDP mesh"  # in a skipped group's reason (judge.coverage looks for it)


@dataclass(frozen=True, kw_only=True)
class GroupPlan:
    """``world``: measure the default group; ``mesh``: the sub-groups to take from the HSDP mesh."""

    world: bool = False
    mesh: tuple[Group, ...] = ()
    skipped: list[str] = field(default_factory=list)


def plan_groups(nodes: list[NodeInfo], wanted: tuple[str, ...]) -> GroupPlan:
    """What to measure of ``wanted`` on these nodes, and each skipped group's reason."""
    skipped: list[str] = []
    world_ranks = sum(len(n.ranks) for n in nodes)
    world = Group.WORLD in wanted and world_ranks > 1
    if Group.WORLD in wanted and not world:
        skipped.append("world: 1 rank, no link to measure")
    want_sub = tuple(g for g in (Group.INTRA, Group.INTER) if g in wanted)
    if not want_sub:
        return GroupPlan(world=world, skipped=skipped)
    misfit = mesh_misfit(nodes) if len(nodes) > 1 else None
    if misfit is not None:  # before the 1-rank test: node 0 may be the odd one
        skipped += [f"{g}: {MISFIT_SKIP} ({misfit[0]})" for g in want_sub]
        return GroupPlan(world=world, skipped=skipped)
    local = len(nodes[0].ranks)
    if len(nodes) == 1 or local == 1:
        skipped += [why_not(g, len(nodes), local) for g in want_sub]
        return GroupPlan(world=world, skipped=skipped)
    return GroupPlan(world=world, mesh=want_sub, skipped=skipped)


def why_not(group: str, nnodes: int, local: int) -> str:
    """Why ``group`` is not measured on ``nnodes`` x ``local`` ranks (one of the two is 1)."""
    shape = f"{plural(nnodes, 'node')} x {plural(local, 'rank')} per node"
    if group == Group.INTER:
        return (f"inter: needs 2+ nodes ({shape})" if nnodes == 1 else
                f"inter: the same group as world with 1 rank per node ({shape})")
    return (f"intra: needs 2+ ranks per node ({shape})" if local == 1 else
            f"intra: the same group as world on one node ({shape})")


def mesh_misfit(nodes: list[NodeInfo]) -> tuple[str, list[str]] | None:
    """Why HSDP's 2-D mesh ``init_device_mesh(dev, (nodes, ranks per node))`` does not fit these nodes,
    and the odd nodes; None when it fits. Odd: the nodes outside the most common rank count (on a tie,
    the ones with fewer ranks: a missing GPU or a short CUDA_VISIBLE_DEVICES is the usual cause)."""
    counts: dict[int, list[str]] = {}
    for n in nodes:
        counts.setdefault(len(n.ranks), []).append(n.host)
    if len(counts) > 1:
        ordered = majority_first(counts)
        odd = [h for _, hs in ordered[1:] for h in hs]
        parts = [f"{hosts_text(hs)} {'runs' if len(hs) == 1 else 'run'} {plural(k, 'rank')}"
                 for k, hs in ordered[1:] + ordered[:1]]
        return "the nodes run different rank counts: " + ", ".join(parts), odd
    local = len(nodes[0].ranks) if nodes else 0
    odd_nodes = [n for n in nodes if tuple(n.ranks) != tuple(range(n.index * local, (n.index + 1) * local))]
    if odd_nodes:
        first = odd_nodes[0]
        return (f"the ranks are not numbered node by node ({first.host} holds ranks "
                f"{', '.join(map(str, first.ranks))})", [n.host for n in odd_nodes])
    return None
