"""The node-pair pass's planner and judge at scale, alone: no process, no torch (``pairs.py``, ``judge.py``).

A simulated cluster of ``--nodes`` nodes, ``k`` of them slow (``--slow``, one case per count) at positions
drawn from ``--seed``: a link's figure is the slower end's speed (a slow node runs at ``SLOW_SHARE`` of a
good one) with a small deterministic noise from the seed. The pass runs as the bench runs it: ``first_round``,
the figures of its pairs, ``Localisation.add``, ``next_round``, ... until no pair is left; then the bench's
own judgement (``judge.judge`` on a ``BenchResult`` holding those pairs) names the slow nodes (ND302). One
JSON line per case: nodes, slow, rounds, pairs_per_round, named (nodes named slow), named_exactly (the named
set is the slow set), links_unpinned (ND303 findings), plan_s (this process's CPU seconds planning and
judging, not wall time: other work on a shared box blurs it less), report_s (CPU seconds building the
bench's report from it and rendering its JSON, as ``nccl-doctor bench --format json`` does).

    .venv/bin/python benchmarks/bench_pair_plan.py --nodes 8192 --slow 0,1,16,256 [--seed S]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_doctor.bench.backend import Backend  # noqa: E402
from nccl_doctor.bench.judge import judge  # noqa: E402
from nccl_doctor.bench.model import BenchResult, NodeInfo, PairResult, RailResult  # noqa: E402
from nccl_doctor.bench.pairs import Localisation, first_round, next_round  # noqa: E402
from nccl_doctor.bench.view import build_report  # noqa: E402
from nccl_doctor.codes import Code  # noqa: E402
from nccl_doctor.render import render_json  # noqa: E402

GOOD_GBPS = 25.0  # one 200 Gb/s NIC per rail
SLOW_SHARE = 1 / 20  # a slow node's speed: a bad cable or a NIC at a fraction of its rate
NOISE = 0.05  # +-5% per link, from the seed
SIZE = 1 << 30
ITERS = 5


@dataclass(frozen=True)
class Case:
    """One run of the planner and the judge: what the bench would report."""

    nodes: int
    slow: int
    rounds: int
    pairs_per_round: list[int]
    named: int
    named_exactly: bool
    links_unpinned: int
    plan_s: float
    report_s: float

    def as_json(self) -> str:
        return json.dumps({"nodes": self.nodes, "slow": self.slow, "rounds": self.rounds,
                           "pairs_per_round": self.pairs_per_round, "named": self.named,
                           "named_exactly": self.named_exactly, "links_unpinned": self.links_unpinned,
                           "plan_s": round(self.plan_s, 3), "report_s": round(self.report_s, 3)})


class Cluster:
    """Each node's speed (GB/s), and each link's measured figure: the slower end's, with the seed's noise."""

    def __init__(self, nodes: int, slow: int, seed: int):
        rng = random.Random(seed)
        self.slow = set(rng.sample(range(nodes), slow))
        self.speed = [GOOD_GBPS * (SLOW_SHARE if n in self.slow else 1.0) for n in range(nodes)]
        self.seed = seed

    def measure(self, pairs: list[tuple[int, int]], round_no: int) -> list[PairResult]:
        out = []
        for a, b in pairs:
            noise = random.Random(f"{self.seed}:{a}:{b}").uniform(1 - NOISE, 1 + NOISE)
            gbps = min(self.speed[a], self.speed[b]) * noise
            time_us = 2 * SIZE / (gbps * 1e9) * 1e6
            rail = RailResult(rail=0, ranks=(a, b), time_us=time_us, busbw_gbps=gbps, wrong=0)
            out.append(PairResult(a=a, b=b, size_bytes=SIZE, iters=ITERS, time_us=time_us, busbw_gbps=gbps, wrong=0,
                                  round=round_no, rails=(rail,)))
        return out


def bench_result(nodes: int, pairs: list[PairResult]) -> BenchResult:
    """What the bench judges: one rank per node, each node's yardstick its NIC's line rate."""
    infos = [NodeInfo(index=i, host=f"gpu{i + 1:05d}", ranks=(i,), iface="ib0", link_gbps=GOOD_GBPS)
             for i in range(nodes)]
    return BenchResult(backend=Backend.NCCL, device="cuda:0", world_size=nodes, local_world_size=1, nodes=infos,
                       pairs=pairs)


def run_case(nodes: int, slow: int, seed: int) -> Case:
    """The pass as ``worker.localise`` runs it, with the cluster's figures instead of the ping-pongs, then
    the bench's judgement; only the planning and judging are timed (the simulated figures are not)."""
    cluster = Cluster(nodes, slow, seed)
    cpu = 0.0
    start = time.process_time()
    loc = Localisation(nnodes=nodes)
    pairs = first_round(nodes)
    cpu += time.process_time() - start
    while pairs:
        results = cluster.measure(pairs, len(loc.rounds) + 1)
        start = time.process_time()
        loc.add(results)
        pairs = next_round(loc)
        cpu += time.process_time() - start
    result = bench_result(nodes, loc.results)
    start = time.process_time()
    findings = judge(result)
    cpu += time.process_time() - start
    start = time.process_time()
    render_json(build_report(result, findings))
    report_s = time.process_time() - start
    host_index = {n.host: n.index for n in result.nodes}
    named = {host_index[f.where.host] for f in findings if f.code == Code.SLOW_NODE_BANDWIDTH and f.where.host}
    unpinned = sum(1 for f in findings if f.code == Code.SLOW_LINK_UNPINNED)
    return Case(nodes=nodes, slow=slow, rounds=len(loc.rounds), pairs_per_round=[len(r) for r in loc.rounds],
                named=len(named), named_exactly=named == cluster.slow, links_unpinned=unpinned, plan_s=cpu, report_s=report_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=8192, help="nodes in the simulated cluster (default 8192)")
    ap.add_argument("--slow", default="0,1,16,256", help="slow-node counts, one case each (default 0,1,16,256)")
    ap.add_argument("--seed", type=int, default=0, help="where the slow nodes are and the noise (default 0)")
    args = ap.parse_args(argv)
    try:
        counts = [int(x) for x in args.slow.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--slow: comma-separated counts, got {args.slow!r}")
    if args.nodes < 2 or any(not 0 <= k <= args.nodes for k in counts):
        ap.error("--nodes must be 2 or more and each --slow count between 0 and --nodes")
    for k in counts:
        print(run_case(args.nodes, k, args.seed).as_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
