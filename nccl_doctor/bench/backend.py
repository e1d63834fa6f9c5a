"""The two process-group backends a run measures: NCCL on GPUs, Gloo on CPUs.

Its own module, below ``model`` and ``expected``: the yardstick (``expected``) depends on the backend, and the
models hold a yardstick, so the enum cannot live in either without an import cycle.
"""

from __future__ import annotations

from nccl_doctor.enums import StrEnum


class Backend(StrEnum):
    """The values are torch's names (``dist.get_backend()``) and the JSON's ``backend``."""

    NCCL = "nccl"
    GLOO = "gloo"
