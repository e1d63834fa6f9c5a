"""Benchmark for `nccl-doctor bench` (root; issue 4 "Performance").

1. On a tbf-throttled veth link between two namespace nodes, the ratio of nccl-doctor's inter-node
   figures to a raw TCP transfer over the same link, measured in the same run (target >= 0.85):
   the 2-node world all_gather busbw at the largest size, and the node-pair ping-pong figure.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

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


def raw_tcp_gbps(cluster, src, dst, nbytes: int, port: int = 5201) -> float:
    """One TCP stream src -> dst, GB/s (1e9), timed at the receiver from first byte to EOF."""
    srv = cluster.popen(dst, [sys.executable, "-c", SERVER, dst.addr, str(port)], stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    cluster.run(src, [sys.executable, "-c", CLIENT, dst.addr, str(port), str(nbytes)], timeout=120, check=True)
    n, secs = srv.communicate(timeout=120)[0].split()
    return int(n) / float(secs) / 1e9


def netns_ratio(rate: str) -> dict:
    import netns
    from nccl_doctor.launch import free_port

    with netns.Cluster(2) as c:
        c.throttle(c.nodes[1], rate)
        tcp_fwd = raw_tcp_gbps(c, c.nodes[0], c.nodes[1], 16 << 20)
        tcp_back = raw_tcp_gbps(c, c.nodes[1], c.nodes[0], 16 << 20)
        args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"n1:{free_port()}", "--ops",
                "all_gather", "--sizes", "1M,4M,16M", "--pair-size", "8M", "--format", "json", "--deadline", "300"]
        t0 = time.monotonic()
        procs = [c.popen(n, [sys.executable, "-m", "nccl_doctor", "bench", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env={**__import__("os").environ,
                                                                     "PYTHONWARNINGS": "ignore"})
                 for n in c.nodes]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        wall = time.monotonic() - t0
    doc = next(json.loads(o) for o in outs if o.strip())
    largest = max(doc["results"], key=lambda r: r["size_bytes"])
    tcp = min(tcp_fwd, tcp_back)
    node_fig = min(n["inter_node_busbw_gbps"] for n in doc["nodes"])
    return {"rate": rate, "raw_tcp_gbps": [round(tcp_fwd, 5), round(tcp_back, 5)],
            "world_all_gather_busbw_gbps": largest["busbw_gbps"], "largest_size": largest["size_bytes"],
            "ratio_all_gather_to_tcp": round(largest["busbw_gbps"] / tcp, 3),
            "node_pingpong_gbps": node_fig, "ratio_pingpong_to_tcp": round(node_fig / tcp, 3),
            "bench_wall_s": round(wall, 1)}


def default_cpu_wall() -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--format", "json"], capture_output=True,
                          text=True, timeout=300, env={**__import__("os").environ, "PYTHONWARNINGS": "ignore",
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
