"""Shared by the bench unit tests: torch-free builders of the models a run fills (``bench.model``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from nccl_doctor.bench.busbw import link_gbps
from nccl_doctor.bench.model import BenchResult, Measurement, NodeInfo, PairResult
from nccl_doctor.bench.pairs import Localisation, first_round, next_round


class Build:
    """``build.node(...)``, ``build.meas(...)``: results as a run would make them, from literal figures."""

    @staticmethod
    def node(i: int, host: str, ranks: Iterable[int], mbit: int = 10000) -> NodeInfo:
        return NodeInfo(index=i, host=host, ranks=tuple(ranks), iface="eth1", link_gbps=link_gbps(mbit))

    @staticmethod
    def meas(*, op: str = "all_gather", group: str = "world", size: int = 64 << 20, t_us: float = 1000.0, n: int = 2,
             wrong: int = 0, iters: int = 10) -> Measurement:
        algbw = size / (t_us / 1e6) / 1e9
        factor = {"all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_reduce": 2 * (n - 1) / n}[op]
        return Measurement(op=op, group=group, group_size=n, size_bytes=size, count=size // 4 // n, iters=iters,
                           time_us=t_us, algbw_gbps=algbw, busbw_gbps=algbw * factor, wrong=wrong)

    @staticmethod
    def pair(a: int, b: int, gbps: float) -> PairResult:
        return PairResult(a=a, b=b, size_bytes=16 << 20, iters=5, time_us=1.0, busbw_gbps=gbps, wrong=0)

    @staticmethod
    def result(nodes: Iterable[NodeInfo], results: Iterable[Measurement] = (),
               pairs: Iterable[PairResult] = ()) -> BenchResult:
        nodes = list(nodes)
        return BenchResult(backend="gloo", device="cpu", world_size=sum(len(n.ranks) for n in nodes),
                           local_world_size=len(nodes[0].ranks), nodes=nodes, results=list(results),
                           pairs=list(pairs))

    @staticmethod
    def planned_pairs(nnodes: int, gbps_of: Callable[[int, int], float]) -> list[PairResult]:
        """The pairs a run would measure: the real planning loop (``pairs.py``) with a bandwidth oracle."""
        loc = Localisation(nnodes=nnodes)
        pairs, out = first_round(nnodes), []
        while pairs:
            got = [PairResult(a=a, b=b, size_bytes=16 << 20, iters=5, time_us=1.0, busbw_gbps=gbps_of(a, b),
                              wrong=0, round=len(loc.rounds) + 1) for a, b in pairs]
            loc.add(got)
            out += got
            pairs = next_round(loc)
        return out


@pytest.fixture
def build() -> type[Build]:
    return Build
