"""A round of the node-pair pass sized to fit (``pairs.rail_iters``, ``pair_loop_budget_s``,
``closing_deadline_s``): one rail fallen back to 1 GbE is measured in fewer exchanges and named slow, where it
ran 33 x 2 x 256 MiB (~140 s) under one 120 s collective timeout and the round timed out naming nobody."""

from __future__ import annotations

import pytest

from nccl_doctor.bench.busbw import GB, MIB
from nccl_doctor.bench.pairs import (
    CLOSE_MARGIN_S,
    PAIR_LOOP_BUDGET_S,
    closing_deadline_s,
    pair_loop_budget_s,
    rail_iters,
)

SIZE = 256 * MIB
PLANNED = 32  # preflight's 256 MiB pair size within the bench's budget: 33 exchanges with the checked one


def exchange_s(gbps: float) -> float:
    """One ping-pong of ``SIZE`` each way, one way at a time, at ``gbps`` GB/s."""
    return 2 * SIZE / (gbps * GB)


def test_a_1gbe_rail_is_cut_to_fit_the_budget_and_a_healthy_rail_is_not():
    one_gbe = exchange_s(0.125)  # 1 Gb/s: 4.29 s per exchange
    assert one_gbe == pytest.approx(4.295, abs=1e-3)
    assert PLANNED * one_gbe > 120  # the old round: past the 120 s collective timeout
    assert rail_iters(PLANNED, one_gbe, PAIR_LOOP_BUDGET_S) == 2  # 8.6 s
    assert rail_iters(PLANNED, exchange_s(50.0), PAIR_LOOP_BUDGET_S) == PLANNED  # NDR: 10.7 ms each
    assert rail_iters(PLANNED, exchange_s(3.125), PAIR_LOOP_BUDGET_S) == PLANNED  # 25 GbE: 0.17 s each


def test_a_rail_slower_than_the_whole_budget_still_gets_one_timed_exchange():
    assert rail_iters(PLANNED, exchange_s(0.025), PAIR_LOOP_BUDGET_S) == 1  # 200 Mb/s: 21.5 s per exchange
    assert rail_iters(PLANNED, 0.0, PAIR_LOOP_BUDGET_S) == PLANNED  # no pace measured: as planned


@pytest.mark.parametrize(("timeout_s", "budget_s"), [(None, 10.0), (120.0, 10.0), (20.0, 5.0), (0.0, 10.0)])
def test_the_budget_is_a_share_of_a_short_collective_timeout(timeout_s, budget_s):
    assert pair_loop_budget_s(timeout_s) == budget_s


def test_the_closing_all_reduce_waits_for_the_slowest_planned_loop_and_no_longer():
    loops = [2 * exchange_s(0.125), PLANNED * exchange_s(50.0)]  # the 1 GbE rail: 8.6 s; the others 0.34 s
    assert closing_deadline_s(loops, None) == pytest.approx(4 * 8.59 + CLOSE_MARGIN_S, abs=0.1)
    assert closing_deadline_s(loops, 30.0) == 30.0  # never past the collective timeout
    assert closing_deadline_s([], None) == CLOSE_MARGIN_S  # a round this rank has no rail in
