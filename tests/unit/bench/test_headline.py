"""The figure a headline quotes (``bench.headline``): the largest size the table does not mark latency-bound,
by the table's own predicate (issue 22 point 14)."""

import pytest

from nccl_doctor.bench import build_report, judge
from nccl_doctor.bench.busbw import LATENCY_BOUND_BYTES, latency_bound
from nccl_doctor.bench.headline import headline
from nccl_doctor.bench.view import LATENCY_MARK


def test_the_largest_bandwidth_bound_size_wins_over_a_faster_small_one(build):
    small, big = build.meas(size=1 << 20, t_us=10.0), build.meas(size=64 << 20, t_us=1000.0)
    assert small.busbw_gbps > big.busbw_gbps
    head = headline([small, big])
    assert head.measurement is big and not head.latency_bound and head.where == "at 64 MiB"


def test_the_boundary_is_the_tables(build):
    """At ``LATENCY_BOUND_BYTES`` the table says latency; one element above, it does not: so does the headline."""
    at, above = build.meas(size=LATENCY_BOUND_BYTES, t_us=1.0), build.meas(size=LATENCY_BOUND_BYTES + 8, t_us=1e6)
    assert latency_bound(at.size_bytes) and not latency_bound(above.size_bytes)
    assert headline([at, above]).measurement is above
    assert headline([at]).latency_bound


def test_every_size_latency_bound_quotes_the_largest_and_says_so(build):
    head = headline([build.meas(size=4 << 20, t_us=9000.0), build.meas(size=1 << 20, t_us=10.0)])
    assert head.measurement.size_bytes == 4 << 20 and head.latency_bound
    assert head.where == "at 4 MiB, latency-bound: not the links' bandwidth"


def test_the_best_of_the_groups_at_that_size(build):
    slow, fast = build.meas(group="inter", t_us=2000.0), build.meas(group="intra", t_us=500.0)
    assert headline([slow, fast, build.meas(size=1 << 20, t_us=1.0)]).measurement is fast


def test_nothing_measured_has_no_headline():
    with pytest.raises(ValueError, match="no measurement"):
        headline([])


def test_the_summary_quotes_no_size_its_table_marks_latency_bound(build):
    r = build.result([build.node(0, "vm", [0, 1])],
                     [build.meas(op=op, size=size, t_us=t) for op in ("all_gather", "reduce_scatter")
                      for size, t in ((1 << 20, 10.0), (64 << 20, 1000.0))])
    rep = build_report(r, judge(r))
    assert rep.summary == "all_gather world 33.554 GB/s; reduce_scatter world 33.554 GB/s busbw at 64 MiB"
    rows = {row[0]: row[-1] for t in rep.tables if t.title.startswith("all_gather") for row in t.rows}
    assert rows == {str(1 << 20): LATENCY_MARK, str(64 << 20): ""}


def test_the_summary_says_each_size_when_they_differ(build):
    r = build.result([build.node(0, "vm", [0, 1])],
                     [build.meas(size=64 << 20), build.meas(op="reduce_scatter", size=1 << 20)])
    assert build_report(r, judge(r)).summary == (
        "busbw: all_gather world 33.554 GB/s at 64 MiB; reduce_scatter world 0.524 GB/s at 1 MiB, latency-bound: "
        "not the links' bandwidth")
