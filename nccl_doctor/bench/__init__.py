"""Collective bandwidth within and across nodes: the ``bench`` command.

What other packages use is imported from here; the modules behind it are this package's own.

Torch-free: the torch side is ``nccl_doctor.bench.worker``, imported by name where a rank runs.
"""

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import Op, format_size
from nccl_doctor.bench.device import CudaUnusable, expects_nccl, gpus_expected
from nccl_doctor.bench.judge import coverage, judge, measured_nothing
from nccl_doctor.bench.model import BenchConfig, BenchResult, Group
from nccl_doctor.bench.view import build_report

__all__ = ["Backend", "BenchConfig", "BenchResult", "CudaUnusable", "Group", "Op", "build_report", "coverage",
           "expects_nccl", "format_size", "gpus_expected", "judge", "measured_nothing"]
