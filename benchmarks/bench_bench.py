"""Benchmark for `nccl-doctor bench` (root; issue 4 "Performance").

1. On a tbf-throttled veth link between two namespace nodes, the ratio of nccl-doctor's inter-node
   figures to raw TCP over the same link, measured in the same run (target >= 0.85 of the matching figure):
   the 2-node world all_gather busbw at the largest size (both directions at once) against raw TCP in both
   directions at once (and, for reference, one way), and the node-pair ping-pong figure (one direction at a
   time) against one-way raw TCP. A plain torch Gloo isend/irecv exchange of the same size shows what the
   Gloo transport itself does with both directions (see docs/bench.md).
2. Wall time of the default CPU bench (`nccl-doctor bench`, 2 ranks, 64K..64M) here (target < 20 s).

    .venv/bin/python benchmarks/bench_bench.py [--rate 200mbit] [--skip-netns]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: tests.helpers

SERVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None
while True:
    b = c.recv(1 << 20)
    if t0 is None: t0 = time.perf_counter()
    if not b: break
    n += len(b)
print(n, time.perf_counter() - t0, flush=True)
"""
CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); c.sendall(b"x" * int(sys.argv[3])); c.close()
"""


EXCHANGE = """
import sys, time, torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
rank, size = dist.get_rank(), int(sys.argv[1])
snd, rcv = torch.ones(size // 4), torch.empty(size // 4)
def once():
    works = [dist.isend(snd, 1 - rank), dist.irecv(rcv, 1 - rank)]
    for w in works: w.wait()
once(); dist.barrier(); t0 = time.perf_counter()
for _ in range(3): once()
t = torch.tensor([(time.perf_counter() - t0) / 3], dtype=torch.float64); dist.all_reduce(t, op=dist.ReduceOp.MAX)
if rank == 0: print(size / t.item() / 1e9, flush=True)
"""


def raw_tcp_gbps(cluster, flows: list[tuple], nbytes: int, port: int = 5201) -> list[float]:
    """TCP streams (src, dst), all at once, GB/s (1e9) each, timed at each receiver from first byte to EOF."""
    servers = []
    for k, (_, dst) in enumerate(flows):
        srv = cluster.popen(dst, [sys.executable, "-c", SERVER, dst.addr, str(port + k)], stdout=subprocess.PIPE,
                            text=True)
        assert srv.stdout.readline().strip() == "ready"
        servers.append(srv)
    clients = [cluster.popen(src, [sys.executable, "-c", CLIENT, dst.addr, str(port + k), str(nbytes)])
               for k, (src, dst) in enumerate(flows)]
    for c in clients:
        assert c.wait(timeout=120) == 0
    out = []
    for srv in servers:
        n, secs = srv.communicate(timeout=120)[0].split()
        out.append(int(n) / float(secs) / 1e9)
    return out


def gloo_exchange_gbps(cluster, size: int, env: dict) -> float:
    """torch Gloo isend+irecv of ``size`` bytes both ways at once between the two nodes, GB/s per direction."""
    from nccl_doctor.cluster.net import free_port

    e = {**env, "MASTER_ADDR": cluster.nodes[0].addr, "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
         "GLOO_SOCKET_IFNAME": cluster.nodes[0].iface}
    procs = [cluster.popen(n, [sys.executable, "-c", EXCHANGE, str(size)], env={**e, "RANK": str(i)},
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for i, n in enumerate(cluster.nodes)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    return float(outs[0].strip())


def netns_ratio(rate: str) -> dict:
    import os

    from nccl_doctor.cluster.net import free_port
    from tests.helpers import netns

    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    size = 16 << 20
    with netns.Cluster(2) as c:
        a, b = c.nodes
        c.throttle(b, rate)  # tbf on both ends of n2's link: the link is slow in both directions
        one_way = raw_tcp_gbps(c, [(a, b)], size) + raw_tcp_gbps(c, [(b, a)], size)
        # both ways at once: the slower direction is what a 2-rank all-gather waits for; it varies run to
        # run (ACKs queue behind the other direction's data in tbf), so take the median of 3 runs
        both_runs = [raw_tcp_gbps(c, [(a, b), (b, a)], size, port=5211 + 2 * k) for k in range(3)]
        both = sorted(both_runs, key=min)[1]
        args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"n1:{free_port()}", "--ops",
                "all_gather", "--sizes", "1M,4M,16M", "--pair-size", "8M", "--format", "json", "--timeout", "300"]
        t0 = time.monotonic()
        procs = [c.popen(n, [sys.executable, "-m", "nccl_doctor", "bench", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env) for n in c.nodes]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        wall = time.monotonic() - t0
        exchange = gloo_exchange_gbps(c, size // 2, env)  # the all-gather's per-direction share
    doc = next(json.loads(o) for o in outs if o.strip())
    largest = max((r for r in doc["results"] if r["group"] == "world"), key=lambda r: r["size_bytes"])
    ag = largest["busbw_gbps"]  # 2 ranks: busbw = S/2/t, the bytes each direction carries per second
    tcp_one, tcp_both = min(one_way), min(both)
    node = min(doc["nodes"], key=lambda n: n["inter_node_busbw_gbps"])
    return {"rate": rate, "tbf": f"rate {rate} burst 64kb latency 50ms on both veth ends",
            "raw_tcp_one_way_gbps": [round(x, 5) for x in one_way],
            "raw_tcp_both_ways_at_once_gbps": [round(x, 5) for x in both],
            "raw_tcp_both_ways_runs_min_gbps": [round(min(r), 5) for r in both_runs],
            "world_all_gather_busbw_gbps": ag, "largest_size": largest["size_bytes"],
            "ratio_all_gather_to_tcp_one_way": round(ag / tcp_one, 3),
            "ratio_all_gather_to_tcp_both_ways": round(ag / tcp_both, 3),
            "gloo_isend_irecv_both_ways_gbps": round(exchange, 5),
            "ratio_gloo_exchange_to_tcp_both_ways": round(exchange / tcp_both, 3),
            "ratio_all_gather_to_gloo_exchange": round(ag / exchange, 3),
            "node_pingpong_gbps": node["inter_node_busbw_gbps"],
            "ratio_pingpong_to_tcp_one_way": round(node["inter_node_busbw_gbps"] / tcp_one, 3),
            "node_expected_gbps": node["expected_gbps"], "node_pct_of_expected": node["pct_of_expected"],
            "bench_wall_s": round(wall, 1)}


def default_cpu_wall() -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--format", "json"], capture_output=True,
                          text=True, timeout=300, check=False, env={**__import__("os").environ, "PYTHONWARNINGS": "ignore",
                                                       "CUDA_VISIBLE_DEVICES": ""})
    wall = time.monotonic() - t0
    doc = json.loads(proc.stdout)
    return {"default_cpu_bench_wall_s": round(wall, 1), "ranks": doc["world_size"], "verdict": doc["verdict"],
            "measurements": len(doc["results"])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", default="200mbit")
    p.add_argument("--skip-netns", action="store_true")
    a = p.parse_args()
    out = {"default_cpu": default_cpu_wall()}
    if not a.skip_netns:
        out["throttled_link"] = netns_ratio(a.rate)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
