"""Offline diagnosis of NCCL_DEBUG=INFO logs: the ``parse`` command.

What other packages use is imported from here; the modules behind it are this package's own.
"""

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths

__all__ = ["diagnose", "parse_lines", "parse_paths"]
