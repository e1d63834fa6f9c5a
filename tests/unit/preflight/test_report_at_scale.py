"""Node 0's report at 1,024 nodes (``tests/helpers/fleet.py``: real probes and parsed NCCL logs, cloned,
with a few faulty nodes): one finding and a few lines per distinct problem, naming exactly its nodes as
a hostlist; the text the same size at 512 nodes as at 1,024; the JSON linear in the nodes; and
``--drain-on-fail`` still reaching every node a merged FAIL names, and no other."""

from __future__ import annotations

import hostlist
import pytest

from nccl_doctor.codes import Code
from nccl_doctor.codes.parse import ON_HOST
from nccl_doctor.codes.text import DEFAULT_VARIANT
from nccl_doctor.drain import drain_on_fail
from nccl_doctor.node import compare
from nccl_doctor.preflight.groups import group_findings, rank_ranges
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.verdict import RankState, rank_picture
from nccl_doctor.render import EVIDENCE_SHOWN, render_json
from nccl_doctor.report import Report, Severity, finding, templated
from tests.helpers import fleet
from tests.helpers.fleet import FAULTY, GDR_OFF, LOST, MISSING, OLD, PORT_DOWN, SOCKET, STUCK
from tests.unit.test_drain import FAKE_SCONTROL, calls

pytestmark = pytest.mark.slow  # a 1,024-node report (the fast loop: -m 'not slow')

LINES_PER_PROBLEM = 3 + EVIDENCE_SHOWN  # head, evidence shown, "... more in the JSON", fix
LONGEST_LINE = 300  # characters: two or three rows of a terminal, whatever the node count
# each distinct problem (code, severity) -> the nodes it must name, and only those
PROBLEMS = {
    (Code.CONNECT_FAILED, Severity.FAIL): SOCKET,
    (Code.VERSION_MISMATCH, Severity.FAIL): OLD,
    (Code.NODE_MISSING, Severity.FAIL): MISSING,
    (Code.STAGE_FAILED, Severity.FAIL): LOST + STUCK,  # the deadline: the ranks that had not arrived
    (Code.NODE_LOST, Severity.FAIL): LOST,
    (Code.SOCKET_TRANSPORT, Severity.WARN): SOCKET,
    (Code.NCCL_WARNING, Severity.WARN): SOCKET,
    (Code.RDMA_PORT_NOT_ACTIVE, Severity.FAIL): PORT_DOWN,  # a compute port NCCL would use: a lost rail
    (Code.GDR_PREREQUISITES_MISSING, Severity.WARN): GDR_OFF,
}
NIC_KEYS = 2  # the down port differs in two NIC facts: its netdev (ib3) and its RDMA port (mlx5_3:1)


@pytest.fixture(scope="module")
def at_1024() -> tuple[Report, str]:
    report = fleet.fleet_report(1024)
    return report, fleet.text_of(report)


def _hosts(text: str | None) -> set[str]:
    return set(hostlist.expand_hostlist(text)) if text else set()


def test_each_distinct_problem_is_one_finding_naming_exactly_its_nodes(at_1024):
    report, _ = at_1024
    bad = [f for f in report.findings if f.severity is not Severity.PASS]
    got = {(f.code, f.severity): _hosts(f.where.host) for f in bad if f.code != Code.NIC_MISMATCH}
    assert got == {k: set(v) for k, v in PROBLEMS.items()}
    assert len(bad) == len(PROBLEMS) + NIC_KEYS
    assert [_hosts(f.where.host) for f in bad if f.code == Code.NIC_MISMATCH] == [set(PORT_DOWN)] * NIC_KEYS
    # 1,017 nodes' "IB with GPUDirect RDMA" is one PASS too
    [ok] = [f for f in report.findings if f.code == Code.INTER_NODE_TRANSPORT_OK]
    assert len(_hosts(ok.where.host)) == 1024 - len(MISSING) - len(SOCKET)


def test_the_text_is_a_few_short_lines_per_problem_whatever_the_node_count(at_1024):
    report, text = at_1024
    blocks = fleet.finding_blocks(text)
    assert len(blocks) == len(report.findings) == len(PROBLEMS) + NIC_KEYS + 2  # + ND101 and ND200 PASS
    assert max(map(len, blocks)) <= LINES_PER_PROBLEM
    assert max(map(len, text.splitlines())) <= LONGEST_LINE, max(text.splitlines(), key=len)
    table = report.tables[0]
    assert len(table.rows) == 5  # world, intra, inter; world and inter again for the two nodes on sockets
    assert {r[0] for r in table.rows if r[5] == "Socket"} == {"gpu[0090-0091]"}
    assert fleet.text_of(fleet.fleet_report(512)).count("\n") == text.count("\n")


def test_every_faulty_node_is_named_and_no_healthy_one_is_blamed(at_1024):
    report, text = at_1024
    blamed = set().union(*(_hosts(f.where.host) for f in report.findings if f.severity is not Severity.PASS))
    assert blamed == FAULTY
    assert fleet.named_hosts(text) >= FAULTY
    assert _hosts(report.summary.rpartition("look at ")[2]) == set(OLD + MISSING + LOST + STUCK + SOCKET + PORT_DOWN)


def test_the_json_grows_linearly_with_the_nodes():
    small, large = fleet.figures(512), fleet.figures(1024)
    assert 1.9 < large.json_bytes / small.json_bytes < 2.1
    assert large.findings_json_bytes < 1.05 * small.findings_json_bytes  # the findings: one per problem


def test_drain_on_fail_drains_every_node_a_merged_failure_names(at_1024, tmp_path):
    """The merged FAILs name hostlists: each of their nodes is drained by its plain name, and no other."""
    report, _ = at_1024
    report = Report(command="preflight", findings=list(report.findings))
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(FAKE_SCONTROL)
    scontrol.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SCONTROL_LOG": str(tmp_path / "calls"), "SLURM_JOB_ID": "7",
           "SLURMD_NODENAME": "gpu0001", "SLURM_JOB_NODELIST": "gpu[0001-1024]"}
    drain_on_fail(report, env)
    drained = {c[1].removeprefix("NodeName=") for c in calls(env)}
    assert drained == set(OLD + MISSING + LOST + STUCK + SOCKET + PORT_DOWN)  # a compute port down FAILs: drained
    assert [f.severity for f in report.findings if f.code == Code.SLURM_DRAIN] == [Severity.PASS] * len(drained)


# --- the pieces, at their own limits ------------------------------------------------------------------
def test_three_hundred_nodes_with_one_problem_are_one_finding_and_one_node_keeps_its_own():
    """The node's own name in a message (``on gpu0007``, its template's ``{host}``) is the only difference:
    merged, the message names the hostlist; a name inside the quoted text (gpu00010) is never rewritten,
    since merging reads parameters, not English."""
    nodes = [f"gpu{i:04d}" for i in range(1, 301)]
    items = [(h, templated(Code.NCCL_WARNING, Severity.WARN, DEFAULT_VARIANT + ON_HOST, fix="check the fabric",
                           host=h, file=f"/tmp/{h}.log", line=3, count=2, text="retrying (gpu00010)", went_on=""))
             for h in nodes]
    [f] = group_findings(items)
    assert f.where.host == "gpu[0001-0300]" and f.where.file is None and f.where.line is None
    assert f.message == "NCCL warning x2 on gpu[0001-0300]: retrying (gpu00010)" and f.fix == "check the fabric"
    # one node: its finding as it was; a finding with no host gets its node's
    [one] = group_findings(items[:1])
    assert one == items[0][1]
    [named] = group_findings([("gpu0009", finding(Code.NCCL_WARNING, Severity.WARN, "x"))])
    assert named.where.host == "gpu0009"
    # another message, another problem
    assert len(group_findings([*items, ("gpu0301", finding(Code.NCCL_WARNING, Severity.WARN, "other"))])) == 2


def test_a_thousand_distinct_values_name_four_and_count_the_rest():
    nodes = [{"host": f"gpu{i:04d}", "env.NCCL_IB_HCA": f"mlx5_{i}"} for i in range(1, 1025)]
    [f] = compare(nodes)
    assert f.message == ("setting NCCL_IB_HCA differs across nodes: mlx5_1 on gpu0001; mlx5_10 on gpu0010; "
                         "mlx5_100 on gpu0100; mlx5_1000 on gpu1000; and 1020 more values on "
                         "gpu[0002-0009,0011-0099,0101-0999,1001-1024]")
    assert f.evidence[0] == "gpu0010: NCCL_IB_HCA=mlx5_10"  # the odd values' nodes first, the majority's last


def test_eight_thousand_ranks_behind_stay_one_short_line():
    """300 nodes' ranks behind (2,400 of 8,192): the first nodes' ranks as ranges, the rest one count."""
    names = tuple(f"gpu{i:04d}" for i in range(1, 1025))
    plan = NodePlan(nnodes=1024, node_rank=0, hosts=names, head=names[0], port=1, nproc=8, slurm=True, host=names[0])
    behind = range(100 * 8, 400 * 8)  # gpu0101..gpu0400, a rack that lost its switch
    states = [RankState(seq=1, stage="init") if r in behind else RankState(seq=5, stage="bench x")
              for r in range(plan.world_size)]
    pic = rank_picture(plan, states, {})
    assert pic.behind == list(behind)
    assert pic.behind_text == ("ranks 800-807 (gpu0101: init), ranks 808-815 (gpu0102: init), ranks 816-823 "
                               "(gpu0103: init), ranks 824-831 (gpu0104: init), and 2368 more ranks on "
                               "gpu[0105-0400] (init)")
    assert rank_ranges([3]) == "rank 3" and rank_ranges([5, 1, 2, 3]) == "ranks 1-3, 5"


def test_the_reports_json_keys_are_unchanged(at_1024):
    report, _ = at_1024
    doc = render_json(report)
    for key in ('"node_facts"', '"ranks"', '"nccl_logs"', '"findings"', '"where"', '"evidence"'):
        assert key in doc
