"""One stage poll of node 0 at scale, before and after, on a local TCPStore, MACs verified both ways:

- before: one ``stage/<rank>`` per rank, read with a ``check`` and a ``get`` each (the old ``update_stages``:
  two round trips and one MAC per rank);
- after: one ``stages/<node>`` per node (its launcher relays its ranks' stage files), read with one
  ``check`` and one ``multi_get`` for all nodes (``Head.update_stages``: two round trips, one MAC per node).

    .venv/bin/python benchmarks/bench_store_poll.py [--nodes 1024] [--nproc 8] [--repeat 3]

Prints the median wall time of one poll each way and their ratio, in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from any directory

from nccl_doctor.cluster.net import free_port  # noqa: E402 - after the path above
from nccl_doctor.preflight.auth import Seal  # noqa: E402
from nccl_doctor.preflight.protocol import NodeStages, StageMark, stages_key  # noqa: E402
from nccl_doctor.preflight.store import Store  # noqa: E402

MARK = StageMark(3, "bench all_gather inter 4 MiB")


def per_rank(store: Store, keys: list[str]) -> list[StageMark]:
    """The old poll: one ``get`` (a ``check`` and a ``get``) per rank."""
    return [StageMark.decode(v) for k in keys if (v := store.get(k)) is not None]


def per_node(store: Store, keys: list[str]) -> list[StageMark]:
    """The new poll: one ``check`` and one ``multi_get`` of every node's ``stages/<i>``."""
    return [m for node in store.read_all(keys, NodeStages.from_json) for m in node.marks]


def timed(fn, store: Store, keys: list[str], world: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        marks = fn(store, keys)
        times.append(time.perf_counter() - t)
        assert len(marks) == world
    return statistics.median(times)


def main() -> int:
    import torch.distributed as dist

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1024)
    p.add_argument("--nproc", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    world = args.nodes * args.nproc
    seal = Seal(b"\x5a" * 16, "4242.0")
    port = free_port()
    raw = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    server = Store(raw, seal)
    rank_keys = [f"stage/{r}" for r in range(world)]  # the old layout, one key per rank
    node_keys = [stages_key(i) for i in range(args.nodes)]
    server.set_all({k: MARK.encode() for k in rank_keys})
    server.set_all({k: NodeStages((MARK,) * args.nproc).to_json() for k in node_keys})
    client = Store(dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60)), seal)
    before = timed(per_rank, client, rank_keys, world, args.repeat)
    after = timed(per_node, client, node_keys, world, args.repeat)
    print(f"one stage poll of {args.nodes} nodes x {args.nproc} ranks = {world} ranks, local TCPStore, "
          f"MACs verified, median of {args.repeat}")
    print(f"{'per-rank get (before)':>28}: {before * 1000:9.1f} ms")
    print(f"{'per-node multi_get (after)':>28}: {after * 1000:9.1f} ms")
    print(f"{'ratio':>28}: {before / after:9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
