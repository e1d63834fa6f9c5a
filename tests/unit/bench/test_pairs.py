"""The node-pair pass planned against a simulated network (``bench.pairs``): which rounds run, which node
is named."""

from __future__ import annotations

import pytest

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.model import PairResult
from nccl_doctor.bench.pairs import Localisation, far_round, first_round, next_round, predict_rounds, slow_ratio


def simulate(nnodes: int, bad: set[int], fast: float = 1.5, slow: float = 0.012, floor: float = 0.06) -> Localisation:
    """The real planning loop with a bandwidth oracle: a link touching a bad node is slow. ``floor``
    is 5% of a 10 Gb/s line rate, as preflight derives it from the probe."""
    loc = Localisation(nnodes=nnodes, floor_gbps=floor)
    pairs = first_round(nnodes)
    while pairs:
        assert len({n for p in pairs for n in p}) == 2 * len(pairs), f"pairs of a round must be disjoint: {pairs}"
        for a, b in pairs:
            assert (a, b) not in loc.links, "a link is never measured twice"
            loc.links[(a, b)] = slow if {a, b} & bad else fast
        loc.rounds.append(pairs)
        pairs = next_round(loc)
    return loc


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_healthy_cluster_costs_predicted_rounds(n):
    loc = simulate(n, set())
    assert loc.bad() == [] and loc.unresolved() == [] and loc.slow_links() == []
    assert len(loc.rounds) == predict_rounds(n)[0]


@pytest.mark.parametrize("n,bad", [(3, 1), (3, 2), (3, 0), (4, 1), (5, 4), (8, 3), (9, 8), (64, 17)])
def test_one_bad_node_is_named_within_predicted_rounds(n, bad):
    loc = simulate(n, {bad})
    assert loc.bad() == [bad]
    assert loc.unresolved() == []
    assert len(loc.rounds) <= predict_rounds(n)[1]


def test_two_nodes_slow_link_cannot_say_which():
    loc = simulate(2, {1})
    assert loc.bad() == [] and loc.unresolved() == [0, 1] and loc.slow_links() == [(0, 1)]


def test_several_bad_nodes_at_scale_stay_linear():
    loc = simulate(128, {3, 40, 41, 99})
    assert loc.bad() == [3, 40, 41, 99]
    assert len(loc.rounds) <= 3
    assert len(loc.links) <= 128 + 2 * 4  # two rounds of N/2 pairs and a retest per suspect: never all-pairs (8128)


def test_without_a_floor_relative_speed_still_names_the_node():
    loc = simulate(4, {2}, floor=0.0)
    assert loc.bad() == [2]


def test_absolute_floor_flags_uniformly_slow_cluster():
    loc = Localisation(nnodes=2, links={(0, 1): 0.01}, floor_gbps=0.05)
    assert loc.slow_links() == [(0, 1)]


def measured(loc: Localisation, figures: dict[tuple[int, int], float]) -> None:
    """One round of measured pairs, through ``add`` (as the bench records them)."""
    loc.add([PairResult(a=a, b=b, size_bytes=1 << 22, iters=3, time_us=1.0, busbw_gbps=gbps, wrong=0,
                        round=len(loc.rounds) + 1) for (a, b), gbps in figures.items()])


@pytest.mark.parametrize("second", [1.4, 0.05])
def test_a_slow_link_between_good_nodes_is_measured_again_before_it_is_blamed(second):
    """Round 1 saw 0<->1 at a fraction of the others (a busy moment); both ends then run at full speed
    against good nodes. Round 3 measures 0<->1 again: fast now, nothing is blamed; slow again, the link is."""
    loc = Localisation(nnodes=4)
    measured(loc, {(0, 1): 0.2, (2, 3): 1.5})
    assert next_round(loc) == [(0, 2), (1, 3)]
    measured(loc, {(0, 2): 1.5, (1, 3): 1.5})
    assert next_round(loc) == [(0, 1)]
    measured(loc, {(0, 1): second})
    assert next_round(loc) == []
    assert loc.slow_links() == ([] if second > 1 else [(0, 1)]) and loc.bad() == []
    assert len(loc.results) == 5  # both figures of 0<->1 stay in the report


@pytest.mark.parametrize(("n", "far"), [(2, []), (3, [(0, 2)]), (4, [(0, 2), (1, 3)]), (5, [(0, 3), (1, 4)]),
                                        (8, [(0, 4), (1, 5), (2, 6), (3, 7)])])
def test_the_far_round_pairs_the_two_halves_of_the_node_list(n, far):
    assert far_round(n) == far


def test_1024_healthy_nodes_cost_two_rounds_and_the_second_crosses_the_halves():
    loc = simulate(1024, set())
    assert loc.rounds == [first_round(1024), far_round(1024)]
    assert loc.rounds[1][0] == (0, 512) and loc.rounds[1][-1] == (511, 1023)
    assert sorted(n for p in loc.rounds[1] for n in p) == list(range(1024))  # every node, once
    assert loc.bad() == [] and loc.unresolved() == [] and loc.slow_links() == []


def test_a_bad_spine_uplink_shows_as_slow_links_never_as_a_bad_node():
    """8 nodes, 4 per leaf switch; leaf 1's uplink is bad, so every link between the leaves is slow. Round 1's
    neighbours never leave their leaf (it saw nothing before the far round); the far round crosses, both ends
    of each cross link are good (round 1), so the links are measured again and then blamed, not the nodes."""
    loc = Localisation(nnodes=8)
    leaf = [n // 4 for n in range(8)]
    pairs = first_round(8)
    while pairs:
        measured(loc, {(a, b): 0.1 if leaf[a] != leaf[b] else 1.5 for a, b in pairs})
        pairs = next_round(loc)
    assert loc.rounds[1] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert loc.slow_links() == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert loc.bad() == [] and loc.unresolved() == [] and len(loc.rounds) == 3  # the retest of the far links


@pytest.mark.parametrize(("backend", "slow"), [(Backend.GLOO, []), (Backend.NCCL, [(0, 1)])])
def test_a_link_at_15_percent_of_the_best_is_slow_under_nccl_only(backend, slow):
    """Literal figures: 0<->1 moves 0.30 GB/s where 2<->3 moves 2.00 (15%, above a 0.05 GB/s floor). Gloo's
    ratio is a tenth (its CPU-bound rounds differ 3-6x on a busy host): not slow. NCCL's is a quarter: slow."""
    assert slow_ratio(backend) == {Backend.GLOO: 0.1, Backend.NCCL: 0.25}[backend]
    loc = Localisation(nnodes=4, floor_gbps=0.05, slow_ratio=slow_ratio(backend))
    measured(loc, {(0, 1): 0.30, (2, 3): 2.00})
    assert loc.slow_links() == slow
