"""The NCCL log step: each node's captured logs, parsed where they were written, and why they were not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nccl_doctor.preflight.nccllogs import nccl_log_findings, nccl_log_summary, nccl_log_table
from nccl_doctor.preflight.protocol import LogSummary
from nccl_doctor.report import Severity

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures/nccl-logs"


def test_nccl_log_step_reports_the_transport_nccl_used(tmp_path):
    """The GPU path's log step, fed a real captured log (per-rank files as NCCL_DEBUG_FILE writes them):
    the transport per communicator and the parser's findings reach the preflight report."""
    shutil.copy(FIXTURES / "041-h20-ib-gdrdma-cumem-2node.log", tmp_path / "node01.1234.log")
    summary = nccl_log_summary(tmp_path, "nccl", host="node01").as_dict()
    assert summary["skipped"] is None and summary["files"] == 1
    assert summary["inter_node"] == {"transport": "IB", "gdr": True, "evidence": "channel lines", "network": "IB"}
    assert "ND101" in {f["code"] for f in summary["findings"]}
    json.dumps(summary)  # crosses the rendezvous store as JSON
    table = nccl_log_table([nccl_log_summary(tmp_path, "nccl", host="node01")])
    assert table is not None and table.rows[0][5:] == ("IB", "yes")

    shutil.copy(FIXTURES / "052-socket-two-ifaces-selected-lines.log", tmp_path / "node01.1235.log")
    mixed = nccl_log_summary(tmp_path, "nccl", host="node01").as_dict()
    assert mixed["files"] == 2 and "Socket" in {c["inter_node"]["transport"] for c in mixed["communicators"]}


def test_nccl_log_step_says_why_it_was_skipped(tmp_path):
    gloo = nccl_log_summary(tmp_path, "gloo", host="n1")
    assert gloo.skipped is not None and "Gloo on CPU" in gloo.skipped and gloo.findings == []
    nccl = nccl_log_summary(tmp_path, "nccl", host="n1")
    assert nccl.skipped is not None and "NCCL wrote no log on n1" in nccl.skipped
    assert nccl_log_table([gloo, nccl]) is None


def test_nccl_log_step_survives_a_parser_failure_and_only_gloo_passes(tmp_path):
    """A parser failure is this step's own WARN, never a lost node or a missing verdict; only "Gloo ran,
    so there is no NCCL log" is a PASS."""
    (tmp_path / "n1.1234.log").mkdir()  # a *.log the parser cannot read
    broken = nccl_log_summary(tmp_path, "nccl", host="n1")
    assert broken.host == "n1" and broken.skipped is not None and broken.skipped.startswith("log parser failed: ")
    json.dumps(broken.as_dict())
    gloo = nccl_log_summary(tmp_path / "none", "gloo", host="n2")
    sev = {f.message.split(": ", 1)[1][:18]: f.severity for f in nccl_log_findings([broken, gloo])}
    assert sev == {"log parser failed:": Severity.WARN, "the ranks ran Gloo": Severity.PASS}
    # each names its node(s), so JUnit files it under the node's testsuite, not "preflight.all"
    gloo3 = nccl_log_summary(tmp_path / "none", "gloo", host="n3")
    where = {f.message[:40]: f.where.host for f in nccl_log_findings([broken, gloo, gloo3])}
    assert sorted(where.values()) == ["n1", "n[2-3]"]


def test_transports_table_is_one_row_per_kind_of_communicator_not_per_rail():
    """At 1,024 x 8 the node-pair pass makes 4,096 two-rank communicators a round: the table had a row for each
    (one per distinct id). Here 4 nodes x 8 ranks, each node in 16 pair communicators, two of n3's on sockets:
    the rows are the world, the intra- and inter-node groups and the pairs, with the socket rail kept apart."""
    ib = {"transport": "IB", "gdr": True}

    def comms(host: str) -> list[dict]:
        out = [{"id": "0xa1", "nranks": 32, "nnodes": 4, "intra_node": ["P2P/CUMEM"], "inter_node": ib},
               {"id": f"0xb{host}", "nranks": 8, "nnodes": 1, "intra_node": ["P2P/CUMEM"], "inter_node": None},
               {"id": "0xc1", "nranks": 4, "nnodes": 4, "intra_node": [], "inter_node": ib}]
        for k in range(16):
            sock = host == "n3" and k < 2
            out.append({"id": f"0x{host}{k:02x}", "nranks": 2, "nnodes": 2, "intra_node": [],
                        "inter_node": {"transport": "Socket", "gdr": None} if sock else ib})
        return out

    logs = [LogSummary(host=h, files=1, communicators=comms(h)) for h in ("n1", "n2", "n3", "n4")]
    table = nccl_log_table(logs)
    assert table is not None and table.rows == (
        ("n[1-4]", "world", "32", "4", "P2P/CUMEM", "IB", "yes"),
        ("n[1-4]", "intra-node", "8", "1", "P2P/CUMEM", "-", "-"),
        ("n[1-4]", "inter-node", "4", "4", "-", "IB", "yes"),
        ("n[1-2,4]", "node pair x 16", "2", "2", "-", "IB", "yes"),
        ("n3", "node pair x 2", "2", "2", "-", "Socket", "-"),
        ("n3", "node pair x 14", "2", "2", "-", "IB", "yes"))
