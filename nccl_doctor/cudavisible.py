"""``CUDA_VISIBLE_DEVICES`` as CUDA reads it, without CUDA: which devices a process sees, and how many.

Shared by the launcher's rank count (``cluster.slurm.visible_gpus``), the device choice (``bench.device``) and
the probe's GPU list (``node.sysfs.read_gpus``), so the three agree. CUDA's rules (CUDA Programming Guide,
"CUDA Environment Variables"; the MIG user guide, "CUDA Device Enumeration"):

- unset: every GPU; set but empty: none;
- a comma list of integer indices (nvidia-smi's order, which is PCI bus order), GPU UUIDs (``GPU-8932f937-...``,
  or a unique prefix of one) or MIG devices (``MIG-<uuid>``, or ``MIG-GPU-<uuid>/<gi>/<ci>`` before R470);
- an invalid entry (``-1``; ``NoDevFiles``, what Slurm writes when a job has no GPU) hides itself and every
  entry after it;
- a CUDA process enumerates only one MIG device, the first listed, however many the list names: MIG devices
  in the list are one device to CUDA (and have no peer-to-peer with each other).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIG_PREFIX = "MIG-"
GPU_UUID_PREFIX = "GPU-"
STOP_WORDS = ("NoDevFiles",)  # Slurm's value for "no GPU in this job"
_NEGATIVE = re.compile(r"-\d+")


@dataclass(frozen=True)
class VisibleDevices:
    """The entries CUDA keeps from ``CUDA_VISIBLE_DEVICES``, in its order."""

    entries: tuple[str, ...]

    @property
    def mig(self) -> bool:
        """A MIG device is listed: CUDA shows this process one device, the first MIG one."""
        return any(e.startswith(MIG_PREFIX) for e in self.entries)

    @property
    def cuda_count(self) -> int:
        """How many devices ``torch.cuda.device_count()`` will show (MIG: one)."""
        return 1 if self.mig else len(self.entries)

    @property
    def indices(self) -> tuple[int, ...] | None:
        """The entries as nvidia-smi indices, when every entry is one (else None: UUIDs or MIG)."""
        return tuple(int(e) for e in self.entries) if all(e.isdigit() for e in self.entries) else None


def visible_devices(value: str | None) -> VisibleDevices | None:
    """None when unset (every GPU is visible); else the entries CUDA keeps, up to the first invalid one."""
    if value is None:
        return None
    kept: list[str] = []
    for item in value.split(","):
        entry = item.strip()
        if not entry:
            continue
        if entry in STOP_WORDS or _NEGATIVE.fullmatch(entry):
            break
        kept.append(entry)
    return VisibleDevices(tuple(kept))
