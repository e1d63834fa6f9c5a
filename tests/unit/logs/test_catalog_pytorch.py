"""PyTorch's c10d messages in the catalog (tools/nccl_catalog.py --pytorch-file ...): each one the parser relies
on, rendered as torch logs it (``[rank1]:[E... ProcessGroupNCCL.cpp:NNN] <message>``), gives the finding it must."""

from __future__ import annotations

import pytest

from nccl_doctor.logs import diagnose, parse_lines
from nccl_doctor.logs.catalog.formats import Catalog, Cls, load, render
from nccl_doctor.report import Severity

TORCH_PREFIX = "[rank1]:[E1118 20:32:23.955028747 ProcessGroupNCCL.cpp:629] "

# a catalogued PyTorch format (its start) -> the FAIL code the parser must give a line it prints
RELIED_ON = {
    "[Rank %s] Watchdog caught collective operation timeout: ": "ND114",
    "NCCL error in: ": "ND115",
    "NCCL timeout in: ": "ND115",
    "%sHeartbeat monitor timed out!": "ND115",
    "NCCL communicator was aborted on rank ": "ND115",
    "ncclRemoteError: A call failed": "ND115",
    "ncclSystemError: System call": "ND115",
    "ncclInternalError: Internal check failed.": "ND115",
    "ncclUnhandledCudaError: Call to CUDA function failed.": "ND115",
}
SAMPLES = {  # what c10d puts in a format's %s, where the default sample would not read like a log line
    "[Rank %s] Watchdog caught collective operation timeout: ": (
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2635, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1800000) ran for 1800024 milliseconds before timing out."),
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load()


def test_the_catalog_holds_the_c10d_messages_the_parser_relies_on(catalog):
    formats = [e.format for e in catalog.entries if e.source == "pytorch"]
    for head in RELIED_ON:
        assert any(f.startswith(head) for f in formats), head
    assert catalog.built_from["pytorch"]["count"] >= 1


@pytest.mark.parametrize("head", sorted(RELIED_ON))
def test_each_relied_on_c10d_message_gives_its_fail(catalog, head):
    entry = next(e for e in catalog.entries if e.source == "pytorch" and e.format.startswith(head))
    assert Cls.WATCHDOG in entry.classes or Cls.PT_NCCL_ERROR in entry.classes, entry
    line = TORCH_PREFIX + SAMPLES.get(head, render(entry.format))
    report = diagnose(parse_lines([line]))
    fails = {f.code for f in report.findings if f.severity == Severity.FAIL}
    assert RELIED_ON[head] in fails, (line, [f.code for f in report.findings])


def test_a_watchdog_timeout_line_is_read_for_its_op_seq_and_timeout(catalog):
    report = diagnose(parse_lines([TORCH_PREFIX + SAMPLES["[Rank %s] Watchdog caught collective operation timeout: "]]))
    nd114 = next(f for f in report.findings if f.code == "ND114")
    assert "ALLREDUCE" in nd114.message and "SeqNum 2635" in nd114.message and "1800 s" in nd114.message
