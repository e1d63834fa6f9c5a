"""Collective bandwidth within and across nodes: the ``bench`` command.

What other packages use is imported from here; the modules behind it are this package's own.

Torch-free: the torch side is ``nccl_doctor.bench.worker``, imported by name where a rank runs.
"""

from nccl_doctor.bench.busbw import format_size
from nccl_doctor.bench.command import build_report, coverage, judge, measured_nothing

__all__ = ["build_report", "coverage", "format_size", "judge", "measured_nothing"]
