"""Wait for a condition instead of sleeping a fixed time: return as soon as it holds."""

from __future__ import annotations

import time
from collections.abc import Callable

INTERVAL_S = 0.02


def until(ready: Callable[[], bool], timeout_s: float, interval_s: float = INTERVAL_S) -> bool:
    """True once ``ready()`` is; False when ``timeout_s`` passed first (the caller asserts, with its message)."""
    end = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() >= end:
            return False
        time.sleep(interval_s)
    return True
