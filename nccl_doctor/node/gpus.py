"""Which of the node's GPUs this process's CUDA will see: ``CUDA_VISIBLE_DEVICES`` against the PCI bus.

The probe lists NVIDIA GPUs from ``/sys/bus/pci/devices``; a job given two of eight (Slurm's gres, a container's
device list, ``CUDA_VISIBLE_DEVICES``) must be judged on those two, not on the bus. CUDA's rules are in
``cudavisible``; here they meet the node:

- an index is nvidia-smi's ordinal, which is PCI bus order (the sorted ``/sys/bus/pci/devices`` names);
- a GPU UUID (or a unique prefix of one) is found in the driver's ``/proc/driver/nvidia/gpus/<bdf>/information``
  (its ``GPU UUID:`` line, no nvidia-smi needed);
- a MIG device: the old form ``MIG-GPU-<uuid>/<gi>/<ci>`` names its GPU; the new ``MIG-<uuid>`` does not, and
  only NVML knows its parent: the GPU with MIG instances (``/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi*``)
  is its parent when there is one such GPU, else every GPU with instances is a candidate;
- an entry that names no GPU hides itself and the rest, as in CUDA. Where the driver's files are not there to
  read (a container without ``/proc/driver/nvidia``), a UUID cannot be placed: every GPU is kept, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nccl_doctor.cudavisible import GPU_UUID_PREFIX, MIG_PREFIX, VisibleDevices
from nccl_doctor.node.fsreader import FsReader

GPU_INFO_DIR = "/proc/driver/nvidia/gpus"  # <bdf>/information, written by the driver's nv-procfs.c
MIG_CAPS = "/proc/driver/nvidia/capabilities/gpu{minor}/mig"  # gi<N>/ci<M>/access per MIG instance
_UUID_LINE = re.compile(r"^GPU UUID:\s*(\S+)\s*$", re.MULTILINE)
_MINOR_LINE = re.compile(r"^Device Minor:\s*(\d+)\s*$", re.MULTILINE)
_OLD_MIG = re.compile(r"MIG-(GPU-[0-9a-fA-F-]+)/\d+/\d+")


@dataclass(frozen=True)
class GpuIds:
    """What the driver says of one GPU: its UUID (``GPU-...``) and whether it has MIG instances."""

    uuid: str | None
    mig: bool = False


def read_gpu_ids(fs: FsReader, bdfs: Sequence[str]) -> dict[str, GpuIds]:
    """bdf -> the driver's UUID and MIG state, for the GPUs whose ``information`` file is there."""
    out = {}
    for bdf in bdfs:
        text = fs.read(f"{GPU_INFO_DIR}/{bdf}/information")
        if text is None:
            continue
        uuid, minor = _UUID_LINE.search(text), _MINOR_LINE.search(text)
        mig = minor is not None and any(d.startswith("gi") for d in fs.listdir(MIG_CAPS.format(minor=minor.group(1))))
        out[bdf] = GpuIds(uuid.group(1) if uuid else None, mig)
    return out


def needs_ids(visible: VisibleDevices | None) -> bool:
    """Only UUIDs and MIG devices need the driver's files; indices are placed by the bus order alone."""
    return visible is not None and visible.indices is None


def visible_bdfs(bdfs: Sequence[str], visible: VisibleDevices | None, ids: Mapping[str, GpuIds]) -> list[str]:
    """The GPUs (by PCI address, in ``bdfs``' bus order) that CUDA shows under ``visible``, in CUDA's order."""
    if visible is None:
        return list(bdfs)
    if needs_ids(visible) and not any(i.uuid for i in ids.values()):
        return list(bdfs)  # no driver files to place a UUID: the bus, as before
    if visible.mig:
        return _mig_parents(bdfs, visible, ids)
    order = sorted(bdfs)  # nvidia-smi's index order
    out: list[str] = []
    for entry in visible.entries:
        bdf = _one(order, entry, ids)
        if bdf is None:
            break  # CUDA: an entry that names no device hides itself and every later one
        if bdf not in out:
            out.append(bdf)
    return out


def _one(order: Sequence[str], entry: str, ids: Mapping[str, GpuIds]) -> str | None:
    if entry.isdigit():
        return order[int(entry)] if int(entry) < len(order) else None
    if not entry.upper().startswith(GPU_UUID_PREFIX):
        return None
    hits = [b for b in order if (u := ids.get(b, GpuIds(None)).uuid) and u.lower().startswith(entry.lower())]
    return hits[0] if len(hits) == 1 else None  # a prefix must name one GPU


def _mig_parents(bdfs: Sequence[str], visible: VisibleDevices, ids: Mapping[str, GpuIds]) -> list[str]:
    """CUDA shows the first MIG device listed: its GPU, where the entry or the node names it."""
    first = next(e for e in visible.entries if e.startswith(MIG_PREFIX))
    old = _OLD_MIG.fullmatch(first)
    if old:
        bdf = _one(sorted(bdfs), old.group(1), ids)
        return [bdf] if bdf else []
    with_instances = [b for b in bdfs if ids.get(b, GpuIds(None)).mig]
    return with_instances or list(bdfs)
