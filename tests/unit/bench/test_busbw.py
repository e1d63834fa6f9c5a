"""nccl-tests' arithmetic (nccl-facts.md C): factors, GB = 1e9, binary size units."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nccl_doctor.bench import busbw as b


@pytest.mark.parametrize("op,n,factor", [
    ("all_gather", 2, 0.5), ("reduce_scatter", 8, 7 / 8), ("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75),
    ("all_gather", 1, 0.0), ("sendrecv", 2, 1.0),
])
def test_bus_factor_matches_nccl_tests(op, n, factor):
    assert b.bus_factor(op, n) == pytest.approx(factor)


def test_bus_factor_rejects_unknown_op_and_empty_group():
    with pytest.raises(ValueError, match="unknown op 'broadcastx'"):
        b.bus_factor("broadcastx", 2)
    with pytest.raises(ValueError, match=">= 1"):
        b.bus_factor("all_gather", 0)


def test_gb_is_1e9_bytes_and_sizes_are_binary():
    # 1 GiB all_reduce over 8 ranks in 10 ms: algbw 107.37 GB/s, busbw x 1.75
    assert b.algbw_gbps(1 << 30, 0.01) == pytest.approx(107.3741824)
    assert b.busbw_gbps("all_reduce", 1 << 30, 0.01, 8) == pytest.approx(107.3741824 * 1.75)
    assert b.algbw_gbps(100, 0) == 0.0


@pytest.mark.parametrize("text,value", [("64K", 65536), ("1m", 1 << 20), ("1G", 1 << 30), ("4096", 4096),
                                        ("2MiB", 2 << 20), ("16MB", 16 << 20)])
def test_parse_size(text, value):
    assert b.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "0", "1T", "-1K", "abc", "1.5M"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match=r"is not a size: expected a positive whole number"):
        b.parse_size(text)


def test_parse_sizes_list_and_range():
    assert b.parse_sizes("1M,64K,1M") == [65536, 1 << 20]
    assert b.parse_sizes("64K:64M:4") == [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
    assert b.parse_sizes("1M:4M") == [1 << 20, 2 << 20, 4 << 20]
    with pytest.raises(ValueError, match="empty"):
        b.parse_sizes("4M:1M")
    for bad in ("1M:4M:1", "64K:1M:0.5", "64K:1M:x", "64K:1M:"):
        with pytest.raises(ValueError, match=r"^the factor must be an integer >= 2$"):
            b.parse_sizes(bad)


@given(st.integers(1, 1 << 31), st.integers(1, 64))
def test_round_size_splits_evenly_and_never_grows_past_one_chunk(size, n):
    r = b.round_size(size, n)
    assert r % (4 * n) == 0 and r >= 4 * n
    assert r <= max(size, 4 * n)


def test_format_size_and_link_rate():
    assert b.format_size(1 << 30) == "1 GiB" and b.format_size(65536) == "64 KiB" and b.format_size(12) == "12 B"
    assert b.link_gbps(200) == pytest.approx(0.025)  # 200 Mbit/s = 25 MB/s
    assert b.link_gbps(400_000) == pytest.approx(50.0)  # NDR 400G


def test_auto_iters_is_clamped():
    assert b.auto_iters(1 << 10, budget_bytes=64 << 20) == 50
    assert b.auto_iters(1 << 30, budget_bytes=64 << 20) == 5
    assert b.auto_iters(4 << 20, budget_bytes=64 << 20) == 16


def test_node_pair_figure_counts_both_directions_of_the_round_trip():
    # 16 MiB there and back in 0.1 s: the link carried 2 x 16 MiB, one way at a time -> 0.33554432 GB/s
    assert b.pair_gbps(16 << 20, 0.1) == pytest.approx(0.33554432)
    assert b.pair_gbps(1_000_000_000, 2.0) == pytest.approx(1.0)  # 1 GB each way in 2 s: 1 GB/s over the link
    assert b.pair_gbps(1 << 20, 0.0) == 0.0  # no time measured: no figure, never a division by zero
