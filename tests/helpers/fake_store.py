"""A dict-backed stand-in for torch's ``TCPStore``, behind ``preflight.store.RawStore``: node 0's store logic
(sealing, ``read_all``, counters) and the launchers' polling run in one process, with no port and no torch.

Thread-safe (one lock, one condition): several threads may play several nodes. It keeps TCPStore's
semantics where the code relies on them: values are bytes (``str`` is encoded, as torch does), ``get`` and
``wait`` block until the keys exist or the timeout passes (then raise, as TCPStore does), ``add`` makes a
missing counter and stores its decimal text, ``check`` is true only when every key is there.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

DEFAULT_TIMEOUT_S = 5.0


class StoreTimeoutError(RuntimeError):
    """What TCPStore raises when a ``get``/``wait`` outlasts its timeout (torch: ``DistStoreError``)."""


class FakeStore:
    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.data: dict[str, bytes] = {}
        self.calls: list[str] = []  # the method names called, in order (round trips a test may count)
        self._changed = threading.Condition(threading.Lock())

    @staticmethod
    def _bytes(value: bytes | str) -> bytes:
        return value.encode() if isinstance(value, str) else bytes(value)

    def _wait_locked(self, keys: list[str], timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while not all(k in self.data for k in keys):
            left = end - time.monotonic()
            if left <= 0:
                missing = [k for k in keys if k not in self.data]
                raise StoreTimeoutError(f"wait timeout after {timeout_s * 1000:.0f}ms, keys: {missing}")
            self._changed.wait(left)

    def set(self, key: str, value: bytes | str, /) -> None:
        with self._changed:
            self.calls.append("set")
            self.data[key] = self._bytes(value)
            self._changed.notify_all()

    def multi_set(self, keys: list[str], values: list[bytes], /) -> None:
        if len(keys) != len(values):
            raise ValueError("multi_set: as many values as keys")
        with self._changed:
            self.calls.append("multi_set")
            self.data.update(zip(keys, map(self._bytes, values), strict=True))
            self._changed.notify_all()

    def get(self, key: str, /) -> bytes:
        with self._changed:
            self.calls.append("get")
            self._wait_locked([key], self.timeout_s)
            return self.data[key]

    def multi_get(self, keys: list[str], /) -> list[bytes]:
        with self._changed:
            self.calls.append("multi_get")
            self._wait_locked(keys, self.timeout_s)
            return [self.data[k] for k in keys]

    def add(self, key: str, amount: int, /) -> int:
        with self._changed:
            self.calls.append("add")
            value = int(self.data.get(key, b"0")) + amount  # a non-number: ValueError (TCPStore drops the link)
            self.data[key] = str(value).encode()
            self._changed.notify_all()
            return value

    def check(self, keys: list[str], /) -> bool:
        with self._changed:
            self.calls.append("check")
            return all(k in self.data for k in keys)

    def wait(self, keys: list[str], timeout: timedelta | float | None = None, /) -> None:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        with self._changed:
            self.calls.append("wait")
            self._wait_locked(keys, self.timeout_s if seconds is None else seconds)

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str, /) -> bytes:
        """TCPStore's: set ``desired`` when the value is ``expected`` (or absent and ``expected`` empty);
        return the value the key holds afterwards."""
        with self._changed:
            self.calls.append("compare_set")
            now = self.data.get(key)
            if (now is None and not self._bytes(expected)) or now == self._bytes(expected):
                self.data[key] = self._bytes(desired)
                self._changed.notify_all()
            return self.data.get(key, self._bytes(expected))

    def delete_key(self, key: str, /) -> bool:
        with self._changed:
            self.calls.append("delete_key")
            return self.data.pop(key, None) is not None

    def num_keys(self) -> int:
        with self._changed:
            return len(self.data)
