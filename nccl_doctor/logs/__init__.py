"""Offline diagnosis of NCCL_DEBUG=INFO logs: the ``parse`` command.

Its Python API is here (``diagnose``, ``parse_lines``, ``parse_paths``), loaded on first use: importing one
module of the package (a ``--jobs`` worker imports only the parse half) must not load the diagnose half.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["diagnose", "parse_lines", "parse_paths"]
_HOMES = {"diagnose": "nccl_doctor.logs.diagnosis.diagnose", "parse_lines": "nccl_doctor.logs.parse.api",
          "parse_paths": "nccl_doctor.logs.parse.api"}


def __getattr__(name: str) -> Any:
    """PEP 562: ``from nccl_doctor.logs import diagnose`` loads the module it lives in then, not before."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
