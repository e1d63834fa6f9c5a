"""GPUDirect RDMA off on the send side only is NCCL's design, not a missing GDR (issue 15, point 7).

``ncclTopoCheckGdr`` (NCCL src/graph/paths.cc, v2.22.3-1 .. v2.30.4-1) is called with read=1 for a send (the
NIC reads GPU memory) and read=0 for a receive. With NCCL_NET_GDR_READ unset (-2) it returns "no GDR" for the
send side of a GPU with compute capability < 8.0 that has no NVLink to another GPU ("Disable GDR Reads
pre-Ampere when we have other PCI flows"), and with NCCL_NET_GDR_READ=0 everywhere, without an INFO line;
the receive side keeps GDR and prints ``GPU Direct RDMA Enabled ... read 0``. The channel lines then show
``[receive] via NET/IB/0/GDRDMA`` beside ``[send] via NET/IB/0`` (src/transport/net.cc sendSetup/recvSetup).
"""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "logs"


def _codes(report) -> dict[str, str]:
    return {f.code: f.severity.value for f in report.findings}


def test_send_side_gdr_off_on_pre_ampere_pcie_gpus_is_not_nd104():
    report = diagnose(parse_paths([str(LOGS / "nccl-2.22-gdr-read-off-pre-ampere-pcie.log")]))
    assert "ND104" not in _codes(report)
    (ok,) = [f for f in report.findings if f.code == "ND101"]
    assert ok.severity.value == "pass"
    assert "receives" in ok.message and "NCCL_NET_GDR_READ" in ok.message and "pre-Ampere" in ok.message
    assert report.verdict.value == "pass"


def test_gdr_missing_on_receives_too_is_still_nd104():
    report = diagnose(parse_paths([str(LOGS / "gdr-off-one-host.log")]))
    assert _codes(report).get("ND104") == "warn"


def _two_nodes(*channel_lines: str, env: tuple[str, ...] = ()) -> list[str]:
    head = []
    for host, pid, rank in (("alpha", 1, 0), ("beta", 2, 1)):
        head += [f"{host}:{pid}:{pid} [0] NCCL INFO {e}" for e in env]
        head.append(f"{host}:{pid}:{pid} [0] NCCL INFO ncclCommInitRank comm 0x{pid} rank {rank} nranks 2 cudaDev 0 "
                    "nvmlDev 0 busId 3b000 commId 0x77 - Init START")
        head.append(f"{host}:{pid}:{pid} [0] NCCL INFO comm 0x{pid} rank {rank} nRanks 2 nNodes 2 localRanks 1 "
                    "localRank 0 MNNVL 0")
    return head + list(channel_lines)


def test_a_send_without_gdr_on_a_host_whose_receives_have_none_either_is_nd104():
    lines = _two_nodes("alpha:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
                       "alpha:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0",
                       "beta:2:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0",
                       "beta:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA")
    assert _codes(diagnose(parse_lines(lines))).get("ND104") == "warn"


def test_gdr_reads_turned_off_by_the_user_are_said_as_such():
    lines = _two_nodes("alpha:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
                       "alpha:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
                       "beta:2:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0",
                       "beta:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA",
                       env=("NCCL_NET_GDR_READ set by environment to 0.",))
    report = diagnose(parse_lines(lines))
    assert "ND104" not in _codes(report)
    (ok,) = [f for f in report.findings if f.code == "ND101"]
    assert "NCCL_NET_GDR_READ=0" in ok.message


def test_gdr_on_the_receive_side_alone_counts_in_the_summary_table_and_json():
    """NCCL 2.4-2.6 rings (src/transport/net.cc: ``Ring %02d : %d -> %d [receive] via NET/%s/%d%s`` with
    ``/GDRDMA`` when the receive uses it; the send side without it unless NCCL_NET_GDR_READ): the PASS said
    "with GPUDirect RDMA on receives" while the summary, the table and the JSON said GDR no."""
    lines = [
        "nodeA:1001:1001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
        "NCCL version 2.4.8+cuda10.1",
        "nodeB:2001:2001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.2<0>",
        "nodeA:1001:1030 [0] NCCL INFO Ring 00 : 1 -> 0 [receive] via NET/IB/0/GDRDMA",
        "nodeA:1001:1030 [0] NCCL INFO Ring 00 : 0 -> 1 [send] via NET/IB/0",
        "nodeB:2001:2030 [0] NCCL INFO Ring 00 : 0 -> 1 [receive] via NET/IB/0/GDRDMA",
        "nodeB:2001:2030 [0] NCCL INFO Ring 00 : 1 -> 0 [send] via NET/IB/0",
        "nodeA:1001:1030 [0] NCCL INFO comm 0x7f1c5c001f00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 - Init COMPLETE",
        "nodeB:2001:2030 [0] NCCL INFO comm 0x7f3a08001f00 rank 1 nranks 2 cudaDev 0 nvmlDev 0 - Init COMPLETE",
    ]
    report = diagnose(parse_lines(lines, name="ring.log"))
    assert report.verdict.value == "pass" and "ND104" not in _codes(report)
    assert report.data["inter_node"] == {**report.data["inter_node"], "transport": "IB", "gdr": True}
    assert [c["inter_node"]["gdr"] for c in report.data["communicators"]] == [True]
    assert "IB+GDRDMA" in report.summary
