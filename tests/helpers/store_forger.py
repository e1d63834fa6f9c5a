"""A forging client for the preflight store's attack tests: a plain TCPStore client, as anyone on the
network could run, and the forged values it writes."""

from __future__ import annotations

import json

FORGED_PASS = json.dumps({"findings": [{"code": "ND300", "severity": "pass", "message": "FORGED all links fine"}],
                          "tables": [], "notes": [], "data": {"backend": "gloo"}, "timings_s": {}, "measured": True})
FORGED_VERDICT = json.dumps({"code": 0, "verdict": "pass", "summary": "FORGED"})
FORGED_POST = json.dumps({"host": "ghost", "node": 1, "facts": {}, "findings": [], "fatal": False})
# a plain client, as anyone on the network: argv PORT WAIT_KEY WRITES(JSON) REPEAT(0/1) [HOST]; waits for
# WAIT_KEY, then writes its values (every 50 ms when REPEAT, else once) until the store goes away or its
# time is up
FORGER = """
import json, sys, time
from datetime import timedelta
import torch.distributed as dist
port, wait_key, writes, repeat = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1"
host = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
end = time.monotonic() + 60
while True:
    try:
        s = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=5))
        break
    except Exception:
        if time.monotonic() > end:
            sys.exit(3)
        time.sleep(0.1)
try:
    while not s.check([wait_key]):
        time.sleep(0.02)
    print("forging", flush=True)
    while time.monotonic() < end:
        for k, v in writes.items():
            s.set(k, v)
        if not repeat:
            break
        time.sleep(0.05)
except Exception:
    pass
"""

