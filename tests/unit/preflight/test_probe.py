"""This node's probe as preflight posts it: what a multi-node run makes worse, and the rank counts node 0
compares."""

from __future__ import annotations

import pytest

from nccl_doctor.bench import Backend
from nccl_doctor.node import check, compare, probe_node
from nccl_doctor.preflight.probe import meets_on_loopback, multi_node_findings, rank_facts, run_findings
from nccl_doctor.preflight.protocol import NodePost
from nccl_doctor.preflight.verdict import add_probe_findings
from nccl_doctor.report import Report, Severity
from tests.helpers import sysfs_builder as b


def test_loopback_gloo_interface_fails_the_probe_on_two_nodes():
    env = {"GLOO_SOCKET_IFNAME": "lo", "PATH": "/bin"}
    node = probe_node("/", env)
    warn = [f for f in check(node) if f.code == "ND216"]
    assert [f.severity for f in warn] == [Severity.WARN]  # the probe on its own: a warning
    [f] = [f for f in multi_node_findings(check(node), node, 2) if f.code == "ND216"]
    assert f.severity is Severity.FAIL and "spans 2 nodes" in f.message and f.where.iface == "lo"


def test_uneven_ranks_per_node_fail_naming_the_odd_node_and_the_cause():
    base = {"version.torch": "2.13.0"}
    nodes = [dict(base, host=f"n{i}", **rank_facts(8, "8 visible GPUs")) for i in (1, 2, 4)]
    nodes.insert(2, dict(base, host="n3", **{"ranks.per_node": "7", "ranks.source": "7 visible GPUs"}))
    [f] = compare(nodes)
    assert f.code == "ND408" and f.severity is Severity.FAIL and f.where.host == "n3"
    assert f.message == ("ranks per node differ across nodes: 8 on n[1-2,4] (8 visible GPUs); 7 on n3 "
                         "(7 visible GPUs); no rank was started")
    assert f.fix is not None and "--nproc-per-node" in f.fix and "--gpus-per-node" in f.fix
    # equal counts from different causes agree
    same = [dict(base, host="a", **{"ranks.per_node": "2", "ranks.source": "--nproc-per-node 2"}),
            dict(base, host="b", **{"ranks.per_node": "2", "ranks.source": "2 visible GPUs"})]
    assert compare(same) == []


@pytest.fixture(scope="module")
def cloud_vm(tmp_path_factory):
    """The hostname on 127.0.1.1 (Debian): the probe alone WARNs that Gloo binds loopback (ND215)."""
    return b.build(b.cloud_vm(), tmp_path_factory.mktemp("cloud_vm"))


def _nd215(root, nnodes: int):
    node = probe_node(root, {})
    assert [f.severity for f in check(node) if f.code == "ND215"] == [Severity.WARN]  # probe cannot know the run
    return [f for f in run_findings(check(node), node, nnodes, Backend.GLOO) if f.code == "ND215"]


def test_gloo_on_loopback_passes_a_one_node_run_like_bench(cloud_vm):
    """One node: Gloo's connections stay on the node, so loopback works (bench, on one node, raises nothing)."""
    [f] = _nd215(cloud_vm, 1)
    assert f.severity is Severity.PASS and f.message.endswith("(this run is on one node, where Gloo on loopback works)")


def test_gloo_on_loopback_fails_a_multi_node_run(cloud_vm):
    [f] = _nd215(cloud_vm, 3)
    assert f.severity is Severity.FAIL and "this job spans 3 nodes" in f.message


def test_gloo_on_loopback_passes_nodes_that_meet_on_this_machines_loopback(cloud_vm):
    """"Nodes" that are processes of one machine (the head is localhost) reach each other on loopback."""
    node = probe_node(cloud_vm, {})
    [f] = [f for f in run_findings(check(node), node, 2, Backend.GLOO, one_host=True) if f.code == "ND215"]
    assert f.severity is Severity.PASS and "meet on this machine's loopback" in f.message


@pytest.mark.parametrize(("head", "local"), [("localhost", True), ("127.0.0.1", True), ("::1", True),
                                             ("[::1]", True), ("n1", False), ("198.18.0.1", False)])
def test_only_a_loopback_head_means_one_machine(head, local):
    assert meets_on_loopback(head) is local


def test_a_gloo_run_says_it_does_not_use_nccl(cloud_vm):
    """A CPU run that trips on an NCCL setting keeps the FAIL (the GPU job would fail) and says this run
    does not use NCCL; Gloo's own findings and a run on NCCL say nothing of the kind."""
    env = {"NCCL_SOCKET_IFNAME": "eht0", "GLOO_SOCKET_IFNAME": "nosuch", "NCCL_IB_DISABLE": "true"}
    node = probe_node(cloud_vm, env)
    gloo = {f.code: f for f in run_findings(check(node), node, 1, Backend.GLOO)}
    assert gloo["ND202"].severity is Severity.FAIL
    assert "this run uses Gloo on the CPU, not NCCL" in gloo["ND202"].message
    assert "this run uses Gloo" in gloo["ND217"].message  # NCCL_IB_DISABLE=true: an NCCL variable
    assert "not NCCL" not in gloo["ND216"].message  # Gloo's own: this run meets it
    nccl = {f.code: f for f in run_findings(check(node), node, 1, Backend.NCCL)}
    assert "not NCCL" not in nccl["ND202"].message


def test_one_node_report_says_gloo_on_loopback_is_fine_here(cloud_vm):
    """The report of a one-node run shows the PASS (which case applies), and no WARN for it."""
    node = probe_node(cloud_vm, {})
    post = NodePost(host="vm1", node=0, findings=run_findings(check(node), node, 1, Backend.GLOO))
    report = Report(command="preflight")
    add_probe_findings(report, [post])
    got = {f.code: f.severity for f in report.findings}
    assert got["ND215"] is Severity.PASS and report.verdict is Severity.PASS
