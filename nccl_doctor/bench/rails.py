"""Which NIC each rail runs on: a rank's GPU (its PCI address, from CUDA) and the probe's nearest NIC for it.

Pure: the worker gathers (node, the rank's GPU address, local rank 0's GPU -> NIC map) from every rank
and ``rank_nics`` names each rank's NIC. The map is the probe's ``gpu_affinity`` (``node.classify``):
the RDMA device with an active port (else the data netdev) on the closest PCI path to each GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nccl_doctor.cudavisible import GPU_UUID_PREFIX
from nccl_doctor.node import NodeProbe
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.gpus import read_gpu_ids
from nccl_doctor.node.sysfs import read_gpus

# torch.cuda's device properties that give the PCI address; a torch without them (older, or another build)
# has only ``uuid`` (``_CUuuid``, whose str() is the UUID without nvidia-smi's "GPU-"), or neither
PCI_FIELDS = ("pci_domain_id", "pci_bus_id", "pci_device_id")


def pci_address(domain: int, bus: int, device: int) -> str:
    """A CUDA device's PCI address as sysfs names it (``0000:1a:00.0``), the way torch.numa does."""
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


@dataclass(frozen=True)
class BusGpus:
    """The GPUs this process's CUDA shows, as sysfs and the driver list them: PCI addresses in CUDA's order,
    and the driver's UUID (``GPU-...``, lower case) of each it has an ``information`` file for."""

    addresses: tuple[str, ...] = ()
    by_uuid: Mapping[str, str] = field(default_factory=dict)


def bus_gpus(fs: FsReader, cuda_visible: str | None) -> BusGpus:
    """``BusGpus`` from the files under ``fs`` (``/sys/bus/pci/devices``, ``/proc/driver/nvidia/gpus``)."""
    addresses = tuple(g.pci.address.lower() for g in read_gpus(fs, cuda_visible))
    ids = read_gpu_ids(fs, list(addresses))
    return BusGpus(addresses, {i.uuid.lower(): bdf for bdf, i in ids.items() if i.uuid})


def gpu_pci_address(props: object, bus: Callable[[], BusGpus]) -> str | None:
    """This rank's GPU as sysfs names it, from CUDA's device properties (read with getattr: a torch may lack
    any of them), else its UUID through the driver's files, else the one GPU this process sees on the bus.
    ``bus`` is called only when the properties do not give the address. None when nothing places it: the
    rail is then named by its local rank alone."""
    pci = [getattr(props, name, None) for name in PCI_FIELDS]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in pci):
        domain, bus_id, device = (int(v) for v in pci if isinstance(v, int))
        return pci_address(domain, bus_id, device)
    found = bus()
    uuid = str(getattr(props, "uuid", "") or "").strip().lower()
    if uuid:
        key = uuid if uuid.startswith(GPU_UUID_PREFIX.lower()) else GPU_UUID_PREFIX.lower() + uuid
        if key in found.by_uuid:
            return found.by_uuid[key]
    return found.addresses[0] if len(found.addresses) == 1 else None


def rank_gpu_address(props: object, env: Mapping[str, str], root: str = "/") -> str | None:
    """``gpu_pci_address`` on this node: its files under ``root`` and the rank's ``CUDA_VISIBLE_DEVICES``."""
    return gpu_pci_address(props, lambda: bus_gpus(FsReader(root), env.get("CUDA_VISIBLE_DEVICES")))


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
