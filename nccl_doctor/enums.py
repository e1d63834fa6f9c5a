"""``StrEnum`` on every supported Python: members are their string values in JSON, f-strings and ``==``."""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, enum.Enum):
        """The 3.11 class: ``str(member)`` and ``format(member)`` are its value."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


__all__ = ["StrEnum"]
