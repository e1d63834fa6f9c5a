"""One small fixture per log format family (fixtures/logs/, written for this project)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.diagnosis.transports import net_family
from nccl_doctor.logs.parse.api import parse_lines, parse_paths
from nccl_doctor.logs.parse.model import ParseResult
from nccl_doctor.logs.parse.parser import INFO_WRAP_MIN, feed, feed_all, finish
from nccl_doctor.logs.parse.patterns import field_number
from nccl_doctor.logs.parse.reader import WRAP_MIN
from nccl_doctor.logs.parse.state import ParserState

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "logs"


def run(name: str):
    result = parse_paths([str(LOGS / name)])
    return result, diagnose(result)


def codes(report) -> set[str]:
    return {f.code for f in report.findings}


def test_nccl_2_4_ring_lines_ib_without_gdr():
    result, report = run("nccl-2.4-ring-ib.log")
    assert report.data["inter_node"] == {"transport": "IB", "gdr": False, "evidence": "channel lines", "network": "IB"}
    assert report.data["intra_node"]["transports"] == ["P2P/IPC"]
    assert report.data["nccl_versions"] == ["2.4.8"]
    assert report.data["hosts"] == ["alpha", "beta"]
    (comm,) = report.data["communicators"]
    assert comm["nranks"] == 4 and comm["ranks_seen"] == 4 and comm["init_complete"] == 4
    assert report.verdict.value == "warn" and "ND104" in codes(report)
    # the 2.4 "NET/Socket : Using [0]ib0" line is socket init, not the data path
    assert result.socket_ifaces == {"alpha": ["ib0:10.0.0.1"]}


def test_nccl_2_21_merged_roce_nics_pxn_and_comm_ids():
    result, report = run("nccl-2.21-roce-merged-pxn.log")
    assert report.data["inter_node"]["transport"] == "RoCE" and report.data["inter_node"]["gdr"] is True
    assert result.ib_devices["gamma"] == ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE", "mlx5_2:1/RoCE"]
    (comm,) = report.data["communicators"]
    assert comm["comm_id"] == "0xabc123" and comm["nnodes"] == 2 and comm["local_ranks"] == 2
    assert comm["processes_seen"] == 4 and comm["init_complete"] == 4
    assert report.data["settings"]["NCCL_IB_GID_INDEX"] == {"3": 1}
    assert report.data["settings"]["NCCL_SOCKET_IFNAME"] == {"eth0": 1}
    assert report.data["bootstrap_interfaces"][0]["value"] == ["eth0:192.168.1.10"]
    assert report.verdict.value == "pass"


def test_nccl_2_27_timestamps_plugin_and_new_completion_format():
    result, report = run("nccl-2.27-timestamps-plugin-warn.log")
    assert result.net_plugins["IBext_v8"] == 1
    assert report.data["inter_node"] == {"transport": "IB", "gdr": True, "evidence": "channel lines", "network": "IBext_v8"}
    assert report.data["nccl_versions"] == ["2.27.3"]
    (comm,) = report.data["communicators"]
    assert comm["comm_id"] == "0xfeed" and comm["nranks"] == 16  # "[Rank 0] ncclCommInitRankConfig" prefix
    err = next(f for f in report.findings if f.code == "ND109")
    assert "status 12" in err.message and err.where.host == "eps" and err.where.line == 13
    assert report.verdict.value == "fail"


def test_launcher_prefixes_ansi_crlf_and_spliced_lines():
    _, report = run("launchers-crlf-spliced.log")
    assert report.data["hosts"] == ["eta", "zeta"]
    assert report.data["ranks"] == {"count": 8, "ranges": "0-7"}
    assert report.data["intra_node"]["transports"] == ["P2P/IPC", "SHM/direct/direct"]
    assert report.data["inter_node"]["transport"] == "Socket"
    assert {"ND103", "ND105"} <= codes(report)
    assert report.verdict.value == "warn"


def test_two_communicators_each_reported_and_traceback_errors():
    _, report = run("traceback-hsdp-two-comms.log")
    comms = {c["comm_id"]: c for c in report.data["communicators"]}
    assert comms["0x1000"]["inter_node"] == {"transport": "IB", "gdr": True}
    assert comms["0x1000"]["intra_node"] == ["P2P/CUMEM"]
    assert comms["0x2000"]["inter_node"]["transport"] == "none"
    assert comms["0x2000"]["intra_node"] == ["SHM/direct/direct"]
    assert {"ND110", "ND115", "ND105"} <= codes(report)
    assert report.tables and [r[0] for r in report.tables[0].rows] == ["0x1000", "0x2000"]


def test_silent_ib_fallback_is_a_failure_when_ib_hca_is_set():
    report = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0",
        "n1:1:1 [0] NCCL INFO NET/IB : No device found.",
        "n1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        "n1:1:1 [0] NCCL INFO Using network Socket",
    ]))
    f = next(f for f in report.findings if f.code == "ND102")
    assert "NCCL_IB_HCA=mlx5_0 matches no ACTIVE port" in f.fix and "ibstat" in f.fix
    assert report.verdict.value == "fail"


def test_nic_loopback_between_gpus_of_one_node_is_intra_node():
    report = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x9 - Init START",
        "n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0",
    ]))
    assert report.data["inter_node"]["transport"] == "none"
    assert report.data["intra_node"]["transports"] == ["NET/IB (same node)"]
    assert "ND105" in codes(report)


def test_version_mismatch_between_processes():
    report = diagnose(parse_lines([
        "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "b:2:2 [0] NCCL INFO NCCL version 2.19.3+cuda12.2",
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
    ]))
    assert report.data["nccl_versions"] == ["2.19.3", "2.21.5"]
    assert "ND107" in codes(report)


def test_warnings_grouped_by_kind_with_count_and_first_occurrence():
    lines = [f"h{i}:{i}:{i} [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer "
             f"h{i + 1}<{4000 + i}>" for i in range(50)]
    report = diagnose(parse_lines(["", *lines], name="big.log"))
    (err,) = report.data["errors"]
    assert err["count"] == 50 and err["host_count"] == 50
    assert err["first"]["line"] == 2 and err["first"]["file"] == "big.log"


def test_no_socket_interface_found():
    report = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth9",
        "",
        "n1:1:1 [0] bootstrap.cc:1 NCCL WARN Bootstrap : no socket interface found",
    ]))
    f = next(f for f in report.findings if f.code == "ND113")
    assert "NCCL_SOCKET_IFNAME=eth9" in f.fix


def test_hex_field_values_never_raise():
    """The field regex admits 0x.. values; reading them must not raise (the parser never raises on content),
    and they are read as the numbers they are."""
    r = parse_lines(["h1:10:10 [0] NCCL INFO comm 0x55d1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
                     "commId 0x1a2b nNodes 0x2 localRanks 0x1 localRank 0 MNNVL 0 - Init COMPLETE"])
    assert r.has_nccl
    (comm,) = r.comms.values()
    assert (comm.key, comm.comm_id, comm.nranks, comm.nnodes, comm.local_ranks) == ("0x1a2b", "0x1a2b", 2, 2, 1)
    assert (comm.members, comm.complete, comm.rank_host) == (1, 1, {0: "h1"})
    assert field_number("0x10") == 16 and field_number("010") == 10  # hex, and decimal with leading zeros


def _ib_devices_line(host: str, layers: str) -> str:
    ports = " ".join(f"[{i}]mlx5_{i}:1/{layer}" for i, layer in enumerate(layers.split(",")))
    return f"{host}:1:1 [0] NCCL INFO NET/IB : Using {ports} ; OOB eth0:10.0.0.1<0>"


@pytest.mark.parametrize(("layers", "family"), [
    ({"RoCE": 2}, "RoCE"),  # RoCE only
    ({"IB": 2}, "IB"),
    ({"IB": 1, "RoCE": 1}, "IB"),  # mixed link layers are not all RoCE
    ({"RoCE": 1, "UNSPECIFIED": 1}, "IB"),
    ({}, "IB"),  # no device list: NCCL's IB transport
])
def test_net_family_calls_ib_roce_only_when_every_port_is_roce(layers, family):
    result = ParseResult(link_layers=Counter(layers))
    assert net_family("IB", result) == family
    assert net_family("IBext_v8", result) == family  # the IB plugins too
    assert (net_family("Socket", result), net_family("AWS Libfabric", result), net_family("foo", result)) == (
        "Socket", "OFI", "foo")


def test_mixed_ib_and_roce_hosts_are_reported_as_ib():
    report = diagnose(parse_lines([
        _ib_devices_line("a", "IB,IB"),
        _ib_devices_line("b", "RoCE,RoCE"),
        "a:1:1 [0] NCCL INFO Using network IB",
    ]))
    assert report.data["network"]["link_layers"] == {"IB": 2, "RoCE": 2}
    assert report.data["inter_node"]["transport"] == "IB"
    roce = diagnose(parse_lines([_ib_devices_line("b", "RoCE,RoCE"), "b:1:1 [0] NCCL INFO Using network IB"]))
    assert roce.data["inter_node"]["transport"] == "RoCE"


def test_info_lines_are_held_for_a_wrap_from_info_wrap_min_on():
    """An INFO line shorter than INFO_WRAP_MIN is complete: the next line is not glued to it; from that
    length on, a continuation line is (the hard wrap of a terminal). Other NCCL lines from WRAP_MIN on."""
    assert INFO_WRAP_MIN >= WRAP_MIN
    head = "n1:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to "
    for way in ("feed_all", "feed"):
        for length, joined in ((INFO_WRAP_MIN - 1, False), (INFO_WRAP_MIN, True)):
            value = "e" * (length - len(head))
            p = ParserState()
            lines = [head + value, "xtra"]
            if way == "feed_all":
                feed_all(p, lines)
            else:
                for line in lines:
                    feed(p, line)
            r = finish(p)
            want = value + "xtra" if joined else value
            assert r.settings["NCCL_SOCKET_IFNAME"] == {want: 1}, (way, length)
