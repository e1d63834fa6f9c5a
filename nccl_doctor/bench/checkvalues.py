"""The values each rank sends in a collective's checked run, and what every rank must then hold.

The check (``worker._count_wrong``, like nccl-tests' validation pass) runs in float32, whose 24-bit
significand holds every integer up to 2^24 exactly and not 2^24 + 1. A sum is compared exactly, so every
partial sum, in whatever order NCCL adds the ranks' values (a ring starting at any rank, a tree, NVLS in
the switch), must stay an exact integer. Filling rank r with r + 1 made the total n(n + 1)/2, past 2^24 from
5,793 ranks: a healthy all-reduce or reduce-scatter then failed its check (ND301) on a large cluster.

Here the reduced ops send ``r % 2 + 1`` (1 or 2): all partial sums are integers no larger than the total
``n + n // 2``, exact up to ``MAX_EXACT_RANKS`` (over eleven million). A sum still catches a rank that sent
nothing, sent twice or sent garbage. The all-gather reduces nothing, so each rank keeps a value of its own
(``r % 2^24 + 1``, exact for any rank), and a block that landed in the wrong place is caught.

Pure: no torch, so the arithmetic is tested with literal world sizes.
"""

from __future__ import annotations

FLOAT32_EXACT = 1 << 24  # the largest float32 below which every integer is exact (its significand has 24 bits)
REDUCE_VALUES = 2  # the reduced ops send 1 or 2 (rank parity): sums stay small and still vary by rank
# the largest world whose reduced total (n + n // 2, every partial sum no larger) stays exact in float32
MAX_EXACT_RANKS = FLOAT32_EXACT * REDUCE_VALUES // (REDUCE_VALUES + 1)


def reduce_value(rank: int) -> float:
    """What ``rank`` sends into an all-reduce or reduce-scatter's checked run: 1 or 2."""
    return float(rank % REDUCE_VALUES + 1)


def reduce_expected(nranks: int) -> float:
    """Every element after summing ``reduce_value`` over ``nranks`` ranks: ``nranks // 2`` twos and the rest
    ones. Raises ``ValueError`` past ``MAX_EXACT_RANKS``, where float32 could not hold the sum exactly."""
    if not 1 <= nranks <= MAX_EXACT_RANKS:
        raise ValueError(f"a float32 check sums exactly for 1..{MAX_EXACT_RANKS} ranks, not {nranks}")
    return float(nranks + nranks // 2)


def gather_value(rank: int) -> float:
    """What ``rank`` sends into an all-gather's checked run: its own value, exact in float32 for any rank."""
    return float(rank % FLOAT32_EXACT + 1)


def gather_expected(nranks: int) -> list[float]:
    """The all-gather's blocks in rank order: block r holds ``gather_value(r)``."""
    return [gather_value(r) for r in range(nranks)]
