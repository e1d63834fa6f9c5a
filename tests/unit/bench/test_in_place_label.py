"""How the report labels each op's buffers, as nccl-tests does (``src/common.cu``: an in-place run passes
send == recv for all-reduce, send == recv + rank * count for all-gather / reduce-scatter's chunk): bench's
all-reduce sums one buffer in place, its all-gather and reduce-scatter use their own input and output."""

from nccl_doctor.bench.model import Measurement
from nccl_doctor.bench.view import build_report, in_place


def meas(op):
    return Measurement(op=op, group="world", group_size=2, size_bytes=1 << 20, count=1 << 17, iters=5,
                       time_us=1000.0, algbw_gbps=1.0, busbw_gbps=0.5, wrong=0)


def test_all_reduce_is_in_place_and_the_others_out_of_place(build):
    result = build.result([build.node(0, "n1", (0, 1))], [meas(op) for op in ("all_gather", "reduce_scatter",
                                                                           "all_reduce")])
    report = build_report(result, [])
    titles = {t.title.split()[0]: t.title for t in report.tables}
    assert titles["all_reduce"].endswith(", in-place)")
    assert titles["all_gather"].endswith(", out-of-place)") and titles["reduce_scatter"].endswith(", out-of-place)")
    assert {r["op"]: r["in_place"] for r in report.data["results"]} == {
        "all_gather": False, "reduce_scatter": False, "all_reduce": True}
    assert [in_place(op) for op in ("all_gather", "reduce_scatter", "all_reduce")] == [False, False, True]
