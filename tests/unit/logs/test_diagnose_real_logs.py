"""The 26 real, anonymized logs in fixtures/nccl-logs give their labelled verdict and transports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_paths

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "nccl-logs"
LABELS = json.loads((LOGS / "labels.json").read_text())


def _transport(data: dict) -> str:
    """The label spelling: IB+GDRDMA means transport IB with gdr true."""
    inter = data["inter_node"]
    return inter["transport"] + ("+GDRDMA" if inter["gdr"] else "")


@pytest.fixture(scope="module")
def reports():
    return {lab["file"]: diagnose(parse_paths([str(LOGS / lab["file"])])) for lab in LABELS}


def test_every_log_is_labelled():
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(lab["file"] for lab in LABELS)
    assert len(LABELS) == 26


@pytest.mark.parametrize("lab", LABELS, ids=[lab["file"][:3] for lab in LABELS])
def test_verdict_and_inter_node_transport(lab, reports):
    report = reports[lab["file"]]
    assert report.verdict.value in [lab["verdict"], *lab.get("alt_verdicts", [])], report.summary
    got = _transport(report.data)
    assert got in [lab["inter_node_transport"], *lab.get("alt_transports", [])], report.summary


@pytest.mark.parametrize("lab", LABELS, ids=[lab["file"][:3] for lab in LABELS])
def test_intra_node_transports_and_hosts(lab, reports):
    data = reports[lab["file"]].data
    assert data["intra_node"]["transports"] == sorted(lab["intra_node_transports"])
    assert len(data["hosts"]) == (lab["hosts_seen"] or 0)


@pytest.mark.parametrize("lab", [lab for lab in LABELS if lab["ranks_seen"] and lab["file"][:3] != "059"],
                         ids=lambda lab: lab["file"][:3])
def test_ranks_seen(lab, reports):
    # 059 names its only rank in a WARN ("Connect from rank 1"), which is not a rank the log's
    # own process holds; the parser does not count ranks mentioned in error prose.
    assert reports[lab["file"]].data["ranks"]["count"] == lab["ranks_seen"]


def test_versions_where_printed(reports):
    for lab in LABELS:
        want = lab["nccl_version"].split("+")[0] if lab["nccl_version"] else None
        got = reports[lab["file"]].data["nccl_versions"]
        assert got == ([want] if want else []), lab["file"]


def test_key_findings(reports):
    codes = {f: {x.code for x in r.findings} for f, r in reports.items()}
    assert "ND109" in codes["057-ibext-completion-status-12-vendor-129.log"]
    msg = next(x.message for x in reports["057-ibext-completion-status-12-vendor-129.log"].findings
               if x.code == "ND109")
    assert "status 12 = transport retry counter exceeded" in msg
    assert "ND102" in codes["049-ib-hca-set-no-device-socket-quoted-oneline.log"]
    assert "ND102" in codes["050-nccl2.3-ib0-sideband-internal-socket.log"]
    assert "ND103" in codes["052-socket-two-ifaces-selected-lines.log"]
    assert "ND104" in codes["044-roce-gpu-direct-rdma-disabled.log"]
    assert "ND105" in codes["056-ray-vllm-literal-esc-ansi-shm.log"]
    assert "ND111" in codes["045-roce-1gpu-nodes-ibv-create-cq-failed.log"]
    assert "ND112" in codes["062-cuda-oom-in-p2p-setup-socket-closed.log"]
    assert "ND114" in codes["063-watchdog-reduce-scatter-timeout.log"]
    assert "ND116" in codes["048-ofi-plugin-tcp-provider-not-efa.log"]
    wd = next(x for x in reports["064-watchdog-broadcast-timeout-hard-wrapped.log"].findings if x.code == "ND114")
    assert "BROADCAST" in wd.message and "SeqNum 4" in wd.message and "1800 s" in wd.message
    assert "ranks 1-6" in wd.message  # the hard-wrapped lines were joined
    for report in reports.values():
        for f in report.findings:
            if f.severity.value != "pass":
                assert f.fix, (f.code, f.message)
