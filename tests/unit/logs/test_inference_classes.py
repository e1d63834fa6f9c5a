"""Inference from what is complete (issue 10, items 3-5): one fixture per class of log the held-out sets showed,
each written from NCCL's own format strings (fixtures/logs/SOURCES.md names the tags and files). Every case
here failed before: the expected verdict/transport is what the labelling conventions of
fixtures/nccl-logs/README.md give."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths
from nccl_doctor.logs.parse.state import ParserState, torch_exception
from nccl_doctor.logs.parse.warnsigns import fatal_beyond_rules, teardown, transport_hint
from nccl_doctor.report import Report

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "logs"

# fixture -> (verdict, inter-node transport, GDR)
CLASSES = {
    # single-node jobs: inter-node none, PASS on P2P (every prefix [0] with CUDA_VISIBLE_DEVICES; IB NICs listed)
    "single-node-cuda-visible-devices-ib-nics.log": ("pass", "none", None),
    "nccl-2.3-single-node-cuda-visible-devices-p2p-ipc.log": ("pass", "none", None),
    # old formats: 2.3 prints NET ring lines on the receive side only, without "[receive]"
    "nccl-2.3-two-nodes-socket-receive-side-ring-lines.log": ("warn", "Socket", None),
    # false PASS: every rank alone, the selected IB never carried a byte between nodes
    "every-rank-alone-nranks-1-on-ib-nodes.log": ("warn", "none", None),
    # transport evidence outside `via NET/...` lines
    "ib-async-fatal-qp-event-no-channel-lines.log": ("fail", "IB", None),
    "socket-transport-only-in-error-traces.log": ("fail", "Socket", None),
    "vendor-net-plugin-roce-bond-devices.log": ("pass", "RoCE", True),
    "pytorch-one-line-exception-ib-last-error.log": ("fail", "IB", None),
    # fatal errors the WARN rules missed
    "connect-retries-exhausted-no-route-to-host.log": ("fail", "unknown", None),
    "socket-finalize-accept-wrong-type.log": ("fail", "IB", None),
    # false FAILs on healthy runs / judged on the last state
    "ofi-efa-healthy-run-torn-down.log": ("pass", "OFI", True),
    "collnet-sharp-setup-given-up-ib-run-goes-on.log": ("pass", "IB", True),
    # a CUDA error only PyTorch's watchdog shows (no NCCL line around it)
    "pytorch-watchdog-cuda-illegal-memory-access.log": ("fail", "unknown", None),
}


def _report(name: str) -> Report:
    return diagnose(parse_paths([str(LOGS / name)]))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_class_verdict_and_transport(name: str) -> None:
    verdict, transport, gdr = CLASSES[name]
    report = _report(name)
    assert report.verdict.value == verdict, report.summary
    assert report.data["inter_node"]["transport"] == transport, report.summary
    assert report.data["inter_node"]["gdr"] is gdr, report.summary


def test_single_node_is_not_reported_as_unknown() -> None:
    codes = {f.code for f in _report("single-node-cuda-visible-devices-ib-nics.log").findings}
    assert "ND106" not in codes
    comms = _report("nccl-2.3-single-node-cuda-visible-devices-p2p-ipc.log").data["communicators"]
    assert [c["inter_node"]["transport"] for c in comms] == ["none"]


def test_ranks_alone_say_the_network_was_never_used() -> None:
    report = _report("every-rank-alone-nranks-1-on-ib-nodes.log")
    nd106 = next(f for f in report.findings if f.code == "ND106")
    assert "single rank" in nd106.message
    assert {c["inter_node"]["transport"] for c in report.data["communicators"]} == {"none"}


def test_healthy_teardown_and_collnet_give_no_error() -> None:
    for name in ("ofi-efa-healthy-run-torn-down.log", "collnet-sharp-setup-given-up-ib-run-goes-on.log"):
        data = _report(name).data
        assert data["errors"] == [], name
        assert data["error_return_codes"] == {}, name  # traces before Init COMPLETE were handled by NCCL


def test_node_without_ib_is_named_first_and_the_communicator_is_mixed() -> None:
    report = _report("one-node-without-ib-mixed-communicator.log")
    assert report.verdict.value == "fail"
    nd102 = next(f for f in report.findings if f.code == "ND102")
    assert nd102.where.host == "gpu-01234"  # the node whose own lines say NET/IB : No device found
    assert "gpu-01234 has no IB device" in nd102.message
    assert "ring neighbours gpu-[01233,01235] are affected" in nd102.message
    assert "is mixed: IB on gpu-[01233,01235-01236]; Socket on gpu-[01233-01235]" in nd102.message
    assert "NET/IB : No device found" in nd102.evidence[0]
    assert [c["inter_node"]["transport"] for c in report.data["communicators"]] == ["mixed"]


@pytest.mark.parametrize(("text", "family"), [
    ("transport/net_ib.cc:1295 -> 6", "IB"),
    ("transport/net_ib/p2p.cc:590 -> 6", "IB"),  # 2.27+ split net_ib.cc into net_ib/
    ("NET/IB : Got async event : port error", "IB"),
    ("NET/IB : mlx5_0:1 Got non-fatal async event: IBV_EVENT_PORT_ERR(10)", "IB"),
    (r"...\nLast error:\nNET/IB : Got completion from peer 10.0.0.2<1> with error 12", "IB"),
    ("transport/net_socket.cc:474 -> 6", "Socket"),
    ("socketFinalizeAccept: wrong type 3 != 4", "Socket"),
    ("NET/Socket : no interface found", None),  # no socket transport came up
    ("NET/IB : No device found.", None),
])
def test_transport_hints(text: str, family: str | None) -> None:
    assert transport_hint(text) == family


def test_fatal_and_teardown_rules() -> None:
    assert fatal_beyond_rules("socketPollConnect: connect to 10.0.0.1<5> returned No route to host, retrying "
                              "(34/34) after sleep for 3400 msec")
    assert not fatal_beyond_rules("socketPollConnect: connect to 10.0.0.1<5> returned No route to host, "
                                  "retrying (3/34) after sleep for 300 msec")
    assert teardown("[Proxy Service 3] Failed to execute operation Close from rank 3, retcode 3")
    assert not teardown("[Proxy Service 3] Failed to execute operation Connect from rank 3, retcode 3")


def test_nccl_2_3_receive_side_net_lines_are_not_nic_loopback() -> None:
    data = _report("nccl-2.3-two-nodes-socket-receive-side-ring-lines.log").data
    assert data["intra_node"]["transports"] == ["P2P/IPC"]  # not "NET/Socket (same node)"
    assert [c["inter_node"]["transport"] for c in data["communicators"]] == ["Socket"]


def test_pytorch_watchdog_cuda_error_is_fatal() -> None:
    """PyTorch's watchdog rethrows c10's ``CUDA error: ...`` with no NCCL line around it (the parser hands
    ProcessGroupNCCL lines without an NCCL prefix to ``torch_exception``)."""
    p = ParserState()
    line = (LOGS / "pytorch-watchdog-cuda-illegal-memory-access.log").read_text().splitlines()[0]
    assert torch_exception(p, line)
    (group,) = p.result.errors.values()
    assert group.category == "cuda" and group.ranks == {1}
    assert group.text == "CUDA error: an illegal memory access was encountered"
    assert not torch_exception(ParserState(), "[rank1]:[I ProcessGroupNCCL.cpp:1000] [PG 0 Rank 1] NCCL_DEBUG: INFO")


def test_an_illegal_memory_access_is_not_told_to_free_memory() -> None:
    """"illegal memory access" names memory but is no allocation failure: its own fix, not the OOM one."""
    (cuda,) = [f for f in _report("pytorch-watchdog-cuda-illegal-memory-access.log").findings if f.code == "ND112"]
    assert "CUDA_LAUNCH_BLOCKING=1" in (cuda.fix or "") and "ran out of memory" not in (cuda.fix or "")
    oom = diagnose(parse_paths([str(LOGS.parent / "nccl-logs" / "062-cuda-oom-in-p2p-setup-socket-closed.log")]))
    assert any("ran out of memory" in (f.fix or "") for f in oom.findings if f.code == "ND112")


def test_traces_before_a_finished_run_are_recovered_but_not_before_an_abort() -> None:
    """NCCL returned an error inside a call and went on: the process later completed an init or destroyed its
    communicator normally (``- Destroy COMPLETE``, init.cc 2.12+); before ``- Abort COMPLETE`` it still counts."""
    head = ["n1:11:11 [0] NCCL INFO comm 0x55aa00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1234 "
            "- Init COMPLETE",
            "n1:11:12 [0] NCCL INFO graph/xml.cc:660 -> 2"]
    for end, codes in (("Destroy", {}), ("Abort", {"ncclSystemError": 1})):
        last = f"n1:11:11 [0] NCCL INFO comm 0x55aa00 rank 0 nranks 2 cudaDev 0 busId 18000 - {end} COMPLETE"
        data = diagnose(parse_lines([*head, last])).data
        assert data["error_return_codes"] == codes, end


ALL_LOGS = sorted((LOGS.parent / "nccl-logs").glob("*.log")) + sorted(p for p in LOGS.iterdir() if p.suffix == ".log")


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.name[:40])
def test_the_table_and_the_json_give_one_answer_about_single_node(path: Path) -> None:
    """A communicator without a network hop reads ``none`` exactly when the job does: the table said ``none``
    beside a JSON ``unknown`` and its ND106 WARN (a one-host excerpt of a multi-node job), and ``unknown``
    beside a job-wide ``none`` (a single-node NVLS run)."""
    report = diagnose(parse_paths([str(path)]))
    job = report.data["inter_node"]["transport"]
    for c in report.data["communicators"]:
        if c["inter_node"]["transport"] in ("none", "unknown") and job in ("none", "unknown"):
            complete = c["nnodes"] == 1 or (c["hosts_seen"] == 1 and c["ranks_seen"] >= (c["nranks"] or 0) > 0)
            assert c["inter_node"]["transport"] == job or complete, (c["id"], c["inter_node"], job)
