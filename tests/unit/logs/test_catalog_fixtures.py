"""Fixtures written from catalogued formats (fixtures/logs/SOURCES.md): a WARN only the catalog classes fatal,
the 2.24+ bootstrap over a network device, and 2.3-2.4's ncclCommInitAll (one process, every GPU)."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.logs import diagnose, parse_lines, parse_paths
from nccl_doctor.logs.parse.parallel import parse_paths_parallel, parse_range
from nccl_doctor.report import Report, Severity

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "logs"
LOCAL_RANKS = LOGS / "catalog-fatal-warn-local-ranks-init-fails.log"
BOOT_NET = LOGS / "nccl-2.24-bootstrap-over-net-device-ib.log"
INIT_ALL = LOGS / "nccl-2.4-comm-init-all-one-process-four-gpus.log"


def _report(path: Path) -> Report:
    return diagnose(parse_paths([str(path)]))


def test_a_warn_only_the_catalog_knows_is_fatal_and_named():
    """``Failed to determine local ranks`` (init.cc 2.12+, then ``ret = ncclInternalError``) matches none of
    the parser's own WARN rules: the catalog's class makes it the FAIL, quoted, on both hosts."""
    report = _report(LOCAL_RANKS)
    fails = [f for f in report.findings if f.severity == Severity.FAIL]
    assert [f.code for f in fails] == ["ND115"]
    assert "Failed to determine local ranks" in fails[0].message and "trn-b[07-08]" in fails[0].message
    assert report.data["warnings"] == []


def test_the_same_warn_is_a_warning_when_the_process_went_on():
    lines = LOCAL_RANKS.read_text().splitlines()
    done = [ln.replace("- Init START", "- Init COMPLETE") for ln in lines if "Init START" in ln]
    cut = [ln for ln in lines if " -> 3" not in ln]  # (the traces say an error was returned: counted apart)
    report = diagnose(parse_lines(cut + done))
    assert report.data["errors"] == [] and report.verdict.value != "fail", report.summary
    assert sum(g["count"] for g in report.data["warnings"]) == 2


def test_a_pending_fatal_warn_merges_exactly_over_ranges(tmp_path):
    """``--jobs``: the WARN held by its process until the end is judged the same in a byte range."""
    big = tmp_path / "big.log"
    body = LOCAL_RANKS.read_text()
    big.write_text("".join(body.replace("trn-b0", f"n{i:02d}x").replace("0x2f4e6a8c0b1d3e5f", f"0x{i:016x}")
                           for i in range(40)))  # 40 jobs: hosts and commIds of their own
    seq = diagnose(parse_paths([str(big)])).data
    par, merged = parse_paths_parallel([str(big)], jobs=2, min_bytes=0, range_bytes=4096,
                                       runner=lambda tasks: (parse_range(t) for t in tasks))
    assert merged > 10  # (ranges that begin mid-job are read in sequence)
    assert diagnose(par).data == seq
    assert sum(g["count"] for g in seq["errors"]) == 80 and seq["warnings"] == []


def test_bootstrap_over_a_network_device_is_read_per_host():
    data = _report(BOOT_NET).data
    assert data["bootstrap_net_devices"] == [{"value": ["mlx5_0:1"], "host_count": 2, "hosts": ["gpu-a01", "gpu-a02"]}]
    assert sorted(v["value"][0] for v in data["bootstrap_interfaces"]) == ["ib0:10.8.0.1", "ib0:10.8.0.2"]


def test_bootstrap_over_a_network_device_is_a_sign_of_rdma_when_sockets_carry_the_job():
    lines = [ln.replace("via NET/IB/0/GDRDMA", "via NET/Socket/0").replace("via NET/IB/1/GDRDMA", "via NET/Socket/1")
             for ln in BOOT_NET.read_text().splitlines() if "NET/IB : Using" not in ln and "Using network" not in ln]
    report = diagnose(parse_lines(lines))
    nd102 = next(f for f in report.findings if f.code == "ND102")
    assert "bootstrap runs over network device mlx5_0" in nd102.message


def test_comm_init_all_is_one_complete_single_node_communicator():
    report = _report(INIT_ALL)
    (comm,) = report.data["communicators"]
    assert (comm["id"], comm["nranks"], comm["nnodes"], comm["local_ranks"], comm["ranks_seen"]) == \
        ("nranks=4#0", 4, 1, 4, 4)
    assert report.verdict.value == "pass" and report.data["inter_node"]["transport"] == "none"
    assert report.data["intra_node"]["transports"] == ["P2P/direct pointer"]
