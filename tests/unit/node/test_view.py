"""The probe report: JSON keys, the summary line, and ND200/summary/JSON agreeing on the transport."""

import json

import pytest

from nccl_doctor.node import probe_node
from nccl_doctor.node.view import probe_report
from tests.helpers.probing import ENV

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_report_json_keys(roots):
    rep = probe_report(probe_node(roots["dgx_h100"], {}))
    d = rep.payload.to_json()
    assert {"interfaces", "nccl", "gloo_iface", "host", "exports", "rdma_devices", "gpus"} <= set(d)
    i = next(x for x in d["interfaces"] if x["name"] == "ib0")
    assert {"name", "kind", "operstate", "speed_mbps", "addresses", "rdma"} <= set(i)
    assert i["kind"] == "infiniband" and i["speed_mbps"] == 400000 and i["addresses"] == ["10.1.0.11/24"]
    assert d["nccl"]["socket_ifaces"][0] == "ib0" and len(d["nccl"]["ib_devices"]) == 8
    assert d["gloo_iface"] == "bond0"
    json.dumps(d)


@pytest.mark.parametrize("env, why", [
    ({"NCCL_SOCKET_IFNAME": "eth9"}, "ND202"),
    ({"NCCL_SOCKET_IFNAME": "docker"}, "ND203"),  # docker0 has no carrier
])
def test_no_interface_summary_says_cannot_bootstrap(dgx, env, why):
    node = probe_node(dgx, env)
    report = probe_report(node)
    # one problem, one failing finding: no "PASS ... TCP sockets over nothing" line, no second FAIL
    assert "ND200" not in {f.code for f in report.findings}
    assert [f.code for f in report.findings if f.severity.value == "fail"].count(why) == 1
    assert report.summary.endswith(f"NCCL cannot bootstrap: no interface selected (see {why})")


def test_healthy_summary_unchanged(dgx):
    report = probe_report(probe_node(dgx, {}))
    nd200 = next(f for f in report.findings if f.code == "ND200")
    assert nd200.severity.value == "pass" and nd200.message.startswith("NCCL bootstrap: ib0 (")
    assert report.summary.endswith("NCCL bootstrap ib0, transport IB")


def test_efa_transport_agrees(p5):
    rep = probe_report(probe_node(p5, ENV))
    nd200 = next(f for f in rep.findings if f.code == "ND200")
    assert "aws-ofi-nccl" in nd200.message and "aws-ofi-nccl" in rep.summary
    assert "aws-ofi-nccl" in rep.payload.nccl["transport"]
