"""Node 0 merges findings by code, severity, template and parameters, never by editing English: a merged
templated finding is rendered again with the nodes' hostlist; free text merges only word for word."""

from nccl_doctor.bench import Backend
from nccl_doctor.codes import Code
from nccl_doctor.node import check, probe_node
from nccl_doctor.preflight.groups import group_findings
from nccl_doctor.preflight.probe import run_findings
from nccl_doctor.preflight.protocol import NodePost
from nccl_doctor.report import Finding, Severity, Where, finding, hosts_text, templated
from tests.unit.preflight.test_probe import cloud_vm  # noqa: F401  (the fixture)

NODES = [f"gpu{i:04d}" for i in range(1, 301)]


def _loopback(host: str, resolved: str = "-> 127.0.1.1 (/etc/hosts)") -> Finding:
    return templated(Code.GLOO_BINDS_LOOPBACK, Severity.WARN, "hostname", fix="export GLOO_SOCKET_IFNAME=ens5",
                     host=host, iface="lo", resolved=resolved, why="")


def test_three_hundred_nodes_with_one_template_are_one_finding_naming_the_hostlist():
    [f] = group_findings((h, _loopback(h)) for h in NODES)
    assert f.where.host == "gpu[0001-0300]"
    assert f.message.startswith("Gloo will bind loopback (hostname 'gpu[0001-0300]' -> 127.0.1.1 (/etc/hosts))")
    assert f.template == "hostname" and f.fix == "export GLOO_SOCKET_IFNAME=ens5"


def test_other_parameters_are_another_problem():
    items = [(h, _loopback(h)) for h in NODES[:2]] + [(NODES[2], _loopback(NODES[2], "-> 127.0.0.1 (/etc/hosts)"))]
    assert [f.where.host for f in group_findings(items)] == ["gpu[0001-0002]", "gpu0003"]


def test_params_survive_the_trip_through_the_store_and_still_merge():
    posts = [NodePost.from_json(NodePost(host=h, node=i, findings=[_loopback(h)]).to_json())
             for i, h in enumerate(NODES[:4])]
    [f] = group_findings((p.host, f) for p in posts for f in p.findings)
    assert "'gpu[0001-0004]'" in f.message


def test_free_text_merges_only_word_for_word():
    """A non-log finding of free text naming its node is its node's problem alone: its text is never edited."""
    named = [(h, finding(Code.RDMA_PORT_NOT_ACTIVE, Severity.WARN, f"port down on {h}", host=h)) for h in NODES[:3]]
    assert len(group_findings(named)) == 3
    same = [(h, finding(Code.RDMA_PORT_NOT_ACTIVE, Severity.WARN, "mlx5_3 port 1 is down", host=h)) for h in NODES]
    [f] = group_findings(same)
    assert (f.where.host, f.message) == ("gpu[0001-0300]", "mlx5_3 port 1 is down")


def test_a_rank_the_template_does_not_name_is_a_per_node_detail():
    items = [(h, templated(Code.GLOO_BINDS_LOOPBACK, Severity.WARN, host=h, rank=i, rule="r", why=""))
             for i, h in enumerate(NODES[:3])]
    [f] = group_findings(items)
    assert f.where.rank is None and f.where.host == "gpu[0001-0003]"


def test_the_probes_loopback_finding_is_a_template_preflight_restates(cloud_vm):  # noqa: F811
    """The probe's ND215 names the host in its template; preflight's restatement keeps the template, so
    two nodes' FAILs merge into one naming both."""
    node = probe_node(cloud_vm, {})
    [f] = [f for f in run_findings(check(node), node, 2, Backend.GLOO) if f.code == Code.GLOO_BINDS_LOOPBACK]
    assert f.template == "hostname" and f.severity is Severity.FAIL and "spans 2 nodes" in f.message
    other = f.rerendered(where=Where(host="other", iface=f.where.iface))
    [merged] = group_findings([(node.host, f), ("other", other)])
    assert merged.message == f.message.replace(repr(node.host), repr(hosts_text([node.host, "other"])))
