"""The checked run's values (``bench.checkvalues``): every partial sum exact in float32, whatever the world size
and the order NCCL adds the ranks in, so a healthy collective never fails its check (ND301) on a large cluster.
The ring orders are simulated in float32 (numpy's sequential ``add.accumulate``), as a GPU adds them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nccl_doctor.bench.checkvalues import (
    FLOAT32_EXACT,
    MAX_EXACT_RANKS,
    gather_expected,
    gather_value,
    reduce_expected,
    reduce_value,
)

ORDERS = 8  # ring orders simulated per world size: starts at 0, 1, the middle, the last, and four random ones


def ring_orders(n: int, seed: int = 0) -> list[list[int]]:
    """The orders in which a ring adds the ranks' values: one rotation per starting rank (a chunk's sum starts
    at the rank after its owner), plus the reversed ring and a shuffled one (a tree, NVLS: other orders)."""
    rng = random.Random(seed)
    starts = [0, 1, n // 2, n - 1, *rng.sample(range(n), min(n, ORDERS - 4))]
    ranks = list(range(n))
    orders = [ranks[s:] + ranks[:s] for s in starts]
    shuffled = ranks[:]
    rng.shuffle(shuffled)
    return [*orders, ranks[::-1], shuffled]


def float32_sums(values: list[float], orders: list[list[int]]) -> list[float]:
    """The total each order reaches, every partial sum rounded to float32 as the GPU keeps it."""
    arr = np.asarray(values, dtype=np.float32)
    return [float(np.add.accumulate(arr[order], dtype=np.float32)[-1]) for order in orders]


@pytest.mark.parametrize(("n", "total"), [(8192, 12288.0), (131072, 196608.0), (5800, 8700.0), (1, 1.0), (2, 3.0)])
def test_the_reduced_sum_is_exact_in_every_order(n, total):
    assert reduce_expected(n) == total  # n // 2 twos, the rest ones
    sums = float32_sums([reduce_value(r) for r in range(n)], ring_orders(n))
    assert sums == [total] * len(sums)


@pytest.mark.parametrize("n", [8192, 131072])
def test_the_old_values_fail_in_every_order(n):
    """Rank r sent r + 1 and the check wanted n(n + 1)/2: past 2^24 float32 rounds the partial sums, so a
    healthy reduction missed the expected value in every ring order: a false ND301 on every element."""
    old_expected = n * (n + 1) / 2
    assert old_expected > FLOAT32_EXACT
    sums = float32_sums([float(r + 1) for r in range(n)], ring_orders(n))
    assert all(s != old_expected for s in sums), sums


def test_the_old_values_held_below_the_float32_limit():
    """The bound the issue measured: 5,792 ranks (total 16,776,528) still summed exactly."""
    n = 5792
    assert n * (n + 1) // 2 < FLOAT32_EXACT
    orders = ring_orders(n)
    assert float32_sums([float(r + 1) for r in range(n)], orders) == [n * (n + 1) / 2] * len(orders)


@pytest.mark.parametrize("n", [8192, 131072])
def test_the_gathered_blocks_name_their_rank_exactly(n):
    want = gather_expected(n)
    assert want[0] == 1.0 and want[-1] == float(n) and len(set(want)) == n
    assert np.array_equal(np.asarray(want, dtype=np.float32).astype(np.float64), np.asarray(want))  # exact


def test_values_stay_exact_past_the_largest_worlds():
    assert gather_value(FLOAT32_EXACT - 1) == float(FLOAT32_EXACT)
    assert gather_value(FLOAT32_EXACT) == 1.0  # wraps rather than rounding
    assert reduce_expected(MAX_EXACT_RANKS) <= FLOAT32_EXACT
    with pytest.raises(ValueError, match="not 11184811"):
        reduce_expected(MAX_EXACT_RANKS + 1)
