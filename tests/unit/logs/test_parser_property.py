"""The parser never raises, whatever the lines or bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines
from nccl_doctor.logs.parse.reader import ReadStats, Source, read_lines

PIECES = [
    "node01:1:2 [0] NCCL INFO ", "NCCL WARN ", " NCCL INFO ", "Channel 00/0 : ", "Ring 01 : ", "0[0] -> 1[1] ",
    "[send] ", "[receive] ", "via NET/IB/0/GDRDMA", "via P2P/CUMEM/read", "via NET/Socket/1", "comm 0x1 rank ",
    "nranks 8 ", "nRanks 4 nNodes 2 localRanks 2", "commId 0xab - Init START", "Init COMPLETE",
    "NET/IB : Using [0]mlx5_0:1/RoCE ; OOB ib0:1.2.3.4<0>", "Using network ", "NCCL version 2.21.5+cuda12.4",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=", "Got completion from peer x with status=",
    "[rank3]:", "[1,2]<stdout>:", "\x1b[0m", "[0m ", " [repeated 3x across cluster]", "\r", "ncclInternalError",
    "set by environment to ", "NET/Plugin: Loaded net plugin ", " -> 3", "GPU Direct RDMA Disabled for HCA 0 'm'",
]
line = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(line, max_size=30))
def test_parse_lines_never_raises(lines):
    report = diagnose(parse_lines(lines))
    assert report.verdict.value in ("pass", "warn", "fail")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), max_size=20))
def test_arbitrary_text_never_raises(lines):
    diagnose(parse_lines(lines))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_raise(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("b") / "x.log"
    f.write_bytes(data)
    lines = list(read_lines(Source(str(f), f), ReadStats()))
    diagnose(parse_lines(lines))
