"""The node-pair pass planned, judged and reported at 8,192 nodes (``pairs.py``, ``judge.py``, ``view.py``):
few rounds, the slow nodes named exactly, in well under a second each (it was minutes: per-node and per-link
passes over every pair); and the linear planner plans what the plain rule says (``benchmarks/bench_pair_plan.py``
prints the same figures)."""

from __future__ import annotations

import random
import statistics
import time

import pytest

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.figures import peer_median
from nccl_doctor.bench.judge import judge
from nccl_doctor.bench.model import BenchResult, NodeInfo, PairResult, RailResult
from nccl_doctor.bench.pairs import MAX_ROUNDS, Localisation, far_round, first_round, next_round
from nccl_doctor.bench.view import SLOW_ROWS, SLOWEST_OTHERS, build_report, shown
from nccl_doctor.codes import Code

GOOD, SLOW_SHARE, NOISE = 25.0, 1 / 20, 0.05
NODES = 8192
CPU_BUDGET_S = 3.0  # planning and judging one case, or its report: ~0.5 s each measured on the 2-core dev box


def run(nnodes: int, slow: set[int], *, report: bool, seed: int = 0) -> tuple[Localisation, set[int], float, float]:
    """The bench's loop with a simulated cluster (a link runs at its slower end's speed, +-5% noise), then
    its judgement and, with ``report``, its report: (the pass, the nodes named slow, CPU seconds planning and
    judging, CPU seconds building the report)."""
    rng = random.Random(seed)
    speed = [GOOD * (SLOW_SHARE if n in slow else 1.0) for n in range(nnodes)]
    start = time.process_time()
    loc = Localisation(nnodes=nnodes)
    pairs = first_round(nnodes)
    while pairs:
        got = []
        for a, b in pairs:
            gbps = min(speed[a], speed[b]) * rng.uniform(1 - NOISE, 1 + NOISE)
            rail = RailResult(rail=0, ranks=(a, b), time_us=1.0, busbw_gbps=gbps, wrong=0)
            got.append(PairResult(a=a, b=b, size_bytes=1 << 30, iters=5, time_us=1.0, busbw_gbps=gbps, wrong=0,
                                  round=len(loc.rounds) + 1, rails=(rail,)))
        loc.add(got)
        pairs = next_round(loc)
    nodes = [NodeInfo(index=i, host=f"gpu{i + 1:05d}", ranks=(i,), iface="ib0", link_gbps=GOOD) for i in range(nnodes)]
    result = BenchResult(backend=Backend.NCCL, device="cuda:0", world_size=nnodes, local_world_size=1, nodes=nodes,
                         pairs=loc.results)
    findings = judge(result)
    cpu = time.process_time() - start
    start = time.process_time()
    if report:
        built = build_report(result, findings)
        data = built.data
        assert len(data["pairs"]) == len(loc.results) and sum(n["slow"] for n in data["nodes"]) == len(slow)
        check_tables_stay_short(built.tables, slow, nodes)
    report_cpu = time.process_time() - start
    index = {n.host: n.index for n in nodes}
    named = {index[f.where.host] for f in findings if f.code == Code.SLOW_NODE_BANDWIDTH and f.where.host}
    return loc, named, cpu, report_cpu


def check_tables_stay_short(tables: list, slow: set[int], nodes: list) -> None:
    """The text tables show the slow nodes (up to ``SLOW_ROWS``) and the slowest others, not 8,192 rows; the
    JSON's data keeps every node and pair."""
    per_node = next(t for t in tables if t.title.startswith("inter-node figure per node"))
    shown_slow = {row[0] for row in per_node.rows if row[-1] == "yes"}
    assert len(per_node.rows) <= SLOW_ROWS + SLOWEST_OTHERS and "of 8192 nodes shown" in (per_node.caption or "")
    assert shown_slow <= {nodes[i].host for i in slow} and len(shown_slow) == min(len(slow), SLOW_ROWS)
    assert all(len(t.rows) <= SLOW_ROWS + SLOWEST_OTHERS for t in tables)


@pytest.mark.serial  # counts its CPU seconds
@pytest.mark.slow  # 8,192 nodes
@pytest.mark.parametrize(("slow", "rounds", "report"), [(16, 3, False), (256, 3, True)])
def test_slow_nodes_among_8192_are_named_exactly_in_few_rounds(slow, rounds, report):
    bad = set(random.Random(slow).sample(range(NODES), slow))
    loc, named, cpu, report_cpu = run(NODES, bad, report=report)
    assert named == bad
    assert len(loc.rounds) <= rounds and len(loc.rounds[0]) == NODES // 2
    assert loc.rounds[1] == far_round(NODES)  # the halves against each other: across the spine
    assert sum(len(r) for r in loc.rounds[2:]) <= 2 * slow  # then a retest per suspect at most
    assert cpu < CPU_BUDGET_S, f"planning and judging took {cpu:.2f} s of CPU"
    assert report_cpu < CPU_BUDGET_S, f"the report took {report_cpu:.2f} s of CPU"


def reference_next_round(loc: Localisation) -> list[tuple[int, int]]:
    """The rule as first written (nodes x candidates): round 2 the far round, then each unresolved node
    against the first free good node it has not met, else the first free node it has not met that is not
    good."""
    if len(loc.rounds) >= MAX_ROUNDS:
        return []
    if len(loc.rounds) == 1 and loc.nnodes >= 3:
        return [(i, i + (loc.nnodes + 1) // 2) for i in range(loc.nnodes // 2)]
    good = sorted(loc.good())
    busy: set[int] = set()
    pairs = []
    for n in loc.unresolved():
        if n in busy:
            continue
        met = set(loc.partners(n))
        refs = [g for g in good if g not in busy and g not in met]
        refs = refs or [m for m in range(loc.nnodes) if m != n and m not in busy and m not in met and m not in good]
        if refs:
            busy |= {n, refs[0]}
            pairs.append((min(n, refs[0]), max(n, refs[0])))
    return pairs


@pytest.mark.parametrize("seed", range(6))
def test_the_linear_planner_plans_what_the_plain_rule_plans(seed):
    """Random clusters, a few to most nodes slow (a bad rack: good partners run out): every round the same."""
    rng = random.Random(seed)
    nnodes = rng.choice([5, 17, 64, 101, 200])
    bad = set(rng.sample(range(nnodes), rng.randint(1, nnodes - 1)))
    loc = Localisation(nnodes=nnodes)
    pairs = first_round(nnodes)
    while pairs:
        loc.links.update({(a, b): 0.1 if {a, b} & bad else 10.0 for a, b in pairs})
        loc.rounds.append(pairs)
        pairs = next_round(loc)
        assert pairs == reference_next_round(loc)


@pytest.mark.parametrize("figs", [[1.0, 2.0, 3.0], [5.0, 1.0, 1.0, 2.0, 9.0], [3.0, 3.0, 1.0, 8.0, 2.0, 7.0]])
def test_peer_median_is_the_median_of_the_other_nodes(figs):
    known = sorted(figs)
    for i, fig in enumerate(figs):
        peers = figs[:i] + figs[i + 1:]
        assert peer_median(known, fig) == round(statistics.median(peers), 4)
    assert peer_median(known, None) == round(statistics.median(figs), 4)  # a node without a figure: everyone
    assert peer_median([4.0, 5.0], 4.0) is None  # one peer: no median


def test_a_small_cluster_shows_every_row_and_a_large_one_the_slow_and_slowest():
    small = list(range(10))
    assert shown(small, lambda i: i == 3, float) == small
    large = list(range(1000, 0, -1))  # figures falling: the slowest are at the end
    kept = shown(large, lambda i: i in (500, 900), float)
    assert kept == [900, 500, *range(SLOWEST_OTHERS, 0, -1)]  # in the table's own order
