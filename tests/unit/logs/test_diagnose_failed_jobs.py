"""``parse`` on logs of failed multi-node jobs: each test is a problem a user would have been misled by
(fixtures/logs/, written from the formats in reference/nccl-facts.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "fixtures" / "logs"


def diag(name: str):
    return diagnose(parse_paths([str(LOGS / name)]))


def finding(report, code: str):
    return next(f for f in report.findings if f.code == code)


def codes(report) -> set[str]:
    return {f.code for f in report.findings}


def test_one_communicator_on_sockets_is_not_hidden_by_the_others_on_ib():
    """A split communicator over NET/Socket beside the world communicator over IB+GDRDMA: the socket
    connections neither vanish under the majority nor count as 'IB without GPUDirect RDMA'."""
    report = diag("one-comm-on-socket-beside-ib.log")
    assert report.data["inter_node"]["transport"] == "IB" and report.data["inter_node"]["gdr"] is True
    comms = {c["comm_id"]: c for c in report.data["communicators"]}
    assert comms["0x1111"]["inter_node"] == {"transport": "IB", "gdr": True}
    assert comms["0x2222"]["inter_node"]["transport"] == "Socket"
    assert "ND104" not in codes(report)
    f = finding(report, "ND102")
    assert f.severity.value == "fail" and "communicator 0x2222 on g[1-2]" in f.message and "uses IB" in f.message
    assert f.where.comm == "0x2222" and f.where.host == "g1" and f.where.line == 21
    assert "via NET/Socket/0" in f.evidence[0]
    assert "NCCL_NET" in f.fix
    assert report.verdict.value == "fail"


def test_socket_connections_never_count_as_rdma_without_gdr():
    report = diagnose(parse_lines([
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 3 cudaDev 0 nvmlDev 0 busId 1 commId 0x10 - Init START",
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[1] -> 1[1] [send] via NET/IB/0/GDRDMA",
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[1] -> 2[1] [send] via NET/Socket/0",
        "b:2:2 [0] NCCL INFO comm 0x2 rank 1 nranks 3 cudaDev 0 nvmlDev 0 busId 1 commId 0x10 - Init START",
        "c:3:3 [0] NCCL INFO comm 0x3 rank 2 nranks 3 cudaDev 0 nvmlDev 0 busId 1 commId 0x10 - Init START",
    ]))
    (comm,) = report.data["communicators"]
    assert comm["inter_node"]["gdr"] is True and report.data["inter_node"]["gdr"] is True
    assert "ND104" not in codes(report)
    assert "ND102" in codes(report)  # the socket connection beside IB


def test_gdr_missing_on_one_host_names_that_host():
    report = diag("gdr-off-one-host.log")
    f = finding(report, "ND104")
    assert f.where.host == "b1"
    assert "on b1" in f.message and "a1" in f.message  # which host lacks it, which one has it
    assert f.evidence[0].endswith("via NET/IB/0") and "b1:" in f.evidence[0]


def test_a_line_cut_at_the_end_of_a_rank_file_shows_no_transport():
    """Per-rank NCCL_DEBUG_FILE logs of a killed job: a file ending mid-line ('…via NET/IB/0/GD',
    '…via P2P/CUMEM/re') must not read as IB without GDR or as a transport named 'P2P/CUMEM/re'."""
    report = diag("truncated-rank-files")
    assert report.data["inter_node"] == {"transport": "IB", "gdr": True, "evidence": "channel lines", "network": "IB"}
    assert report.data["intra_node"]["transports"] == []
    assert "ND104" not in codes(report)
    assert report.data["ranks"]["ranges"] == "0-2"  # the cut lines still name their ranks

    cut = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0x10 - Init START",
        "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[1] -> 1[2] via P2P/CUMEM/read",
        "n1:1:1 [0] NCCL INFO Channel 00/0 : 1[2] -> 0[1] [receive] via NET/I",
        "n1:1:1 [0] NCCL INFO Channel 01/0 : 1[2] -> 0[1] [receive] via NET/IB/1(",
        "n1:1:1 [0] NCCL INFO Channel 02/0 : 0[1] -> 1[2] via SHM/dir",
    ]))
    assert cut.data["intra_node"]["transports"] == ["P2P/CUMEM/read"]
    # complete tokens that are prefixes of longer ones stay what they are
    whole = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO Channel 00 : 0[1] -> 1[2] via P2P/CUMEM",
        "n1:1:1 [0] NCCL INFO Channel 01 : 1[2] -> 0[1] via SHM/direct",
    ]))
    assert whole.data["intra_node"]["transports"] == ["P2P/CUMEM", "SHM/direct"]


def test_aws_ofi_nccl_that_failed_to_start_is_named_with_the_efa_fix():
    report = diag("ofi-init-failed-socket-fallback.log")
    f = finding(report, "ND103")
    assert "aws-ofi-nccl" in f.message and "no RDMA device in evidence" not in f.message
    assert "fi_info -p efa" in f.fix and "use nodes with InfiniBand" not in f.fix
    assert any("NET/OFI" in e for e in f.evidence)


def test_ib_disable_names_the_variable_not_the_hardware():
    report = diag("ib-disabled-socket-fallback.log")
    f = finding(report, "ND103")
    assert "NCCL_IB_DISABLE=1" in f.message and "no RDMA device in evidence" not in f.message
    assert "export NCCL_IB_DISABLE=0" in f.fix
    # "set by environment to 0." is the echo of NCCL_IB_DISABLE=0 (or of =true, which strtoll reads as 0)
    zero = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.",
        "n1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        "n1:1:1 [0] NCCL INFO Using network Socket",
    ]))
    assert "NCCL_IB_DISABLE" not in finding(zero, "ND103").message


def _unreadable(path: Path) -> bool:
    """Make ``path`` a file that passes ``is_file`` but cannot be opened, also for root (a write-only
    sysctl ignores CAP_DAC_OVERRIDE); False where neither way works."""
    if os.geteuid() != 0:
        path.write_text("x\n")
        path.chmod(0)
        return True
    for target in ("/proc/sys/vm/drop_caches", "/proc/sys/vm/compact_memory"):
        try:
            open(target, "rb").close()
        except PermissionError:  # noqa: PERF203 - each target is tried in turn
            path.symlink_to(target)
            return True
        except OSError:
            continue
    return False


def test_unreadable_file_of_a_directory_walk_is_a_finding_not_an_abort(tmp_path, capsys):
    good = ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"
    (tmp_path / "node01.101.log").write_bytes(good.read_bytes())
    bad = tmp_path / "node02.202.log"
    if not _unreadable(bad):
        pytest.skip("no way to make an unreadable file here")
    rc = main(["parse", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc != 2 and not err, err
    assert "ND117" in out and "node02.202.log" in out and "Permission denied" in out
    # the file named explicitly is still a one-line input error
    rc = main(["parse", str(bad)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Permission denied" in err and len(err.strip().splitlines()) == 1


def test_gdr_fix_fits_nccl_2_4():
    """NCCL 2.4/2.5 read NCCL_NET_GDR_LEVEL as an integer: 'PHB' would read as 0 and turn GDR off."""
    f = finding(diag("nccl-2.4-ring-ib.log"), "ND104")
    assert "NCCL_NET_GDR_LEVEL=PHB" not in f.fix and "NCCL_NET_GDR_LEVEL=3" in f.fix
    new = finding(diag("gdr-off-one-host.log"), "ND104")  # 2.19: names work
    assert "NCCL_NET_GDR_LEVEL=PHB" in new.fix


def test_one_rank_is_singular():
    report = diagnose(parse_lines([
        "r1:3:3 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0x10 - Init START",
        "",
        "r1:3:4 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4567> with "
        "status=12 opcode=0 len=0 vendor err 129 (Send)",
    ]))
    f = finding(report, "ND109")
    assert "(rank 0)" in f.message and "ranks 0" not in f.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any directory")
def test_unlistable_directory_says_so(tmp_path, capsys):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "n1.1.log").write_text("n1:1:1 [0] NCCL INFO Using network IB\n")
    d.chmod(0)
    try:
        rc = main(["parse", str(d)])
    finally:
        d.chmod(0o755)
    err = capsys.readouterr().err
    assert rc == 2 and "cannot read directory" in err and "holds no log files" not in err


def test_connect_fix_when_socket_ifname_is_already_set():
    """NCCL_SOCKET_IFNAME=eth is a prefix: it selected eth0 and eth1. 'pin it with NCCL_SOCKET_IFNAME' is no
    advice to someone who did; naming what it matched and the exact-match form is."""
    f = finding(diag("ifname-prefix-connect-failed.log"), "ND110")
    assert "NCCL_SOCKET_IFNAME=eth" in f.fix and "eth0, eth1" in f.fix and "NCCL_SOCKET_IFNAME==" in f.fix
    assert f.where.host == "w1" and f.where.line == 9
