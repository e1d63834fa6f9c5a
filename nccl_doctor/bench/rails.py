"""Which NIC each rail runs on: a rank's GPU (its PCI address, from CUDA) and the probe's nearest NIC for it.

Pure: the worker gathers (node, the rank's GPU address, local rank 0's GPU -> NIC map) from every rank
and ``rank_nics`` names each rank's NIC. The map is the probe's ``gpu_affinity`` (``node.classify``):
the RDMA device with an active port (else the data netdev) on the closest PCI path to each GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nccl_doctor.node import NodeProbe


def pci_address(domain: int, bus: int, device: int) -> str:
    """A CUDA device's PCI address as sysfs names it (``0000:1a:00.0``), the way torch.numa does."""
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def gpu_nics(node: NodeProbe) -> dict[str, str]:
    """GPU PCI address -> its nearest NIC, for the GPUs the probe matched to one."""
    return {g.pci.address.lower(): g.nearest_nic for g in node.facts.gpus if g.nearest_nic}


def rank_nics(per_rank: Sequence[tuple[int | str, str | None, Mapping[str, str] | None]]) -> list[str | None]:
    """Each world rank's NIC from (its node key, its GPU's PCI address or None, its node's map or None:
    only one rank per node sends the map). None where the rank has no GPU or the probe matched none."""
    maps: dict[int | str, Mapping[str, str]] = {}
    for node, _, nic_map in per_rank:
        if nic_map:
            maps.setdefault(node, nic_map)
    return [maps.get(node, {}).get(addr.lower()) if addr else None for node, addr, _ in per_rank]


def rail_label(rail: int, nics: Sequence[str | None] = ()) -> str:
    """``rail 3 (local rank 3, mlx5_3 <-> mlx5_3)``: the rail and, where known, the NIC at each end."""
    known = [n or "?" for n in nics]
    shown = f", {' <-> '.join(known)}" if any(nics) else ""
    return f"rail {rail} (local rank {rail}{shown})"
