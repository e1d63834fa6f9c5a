"""Node 0's judgement, without processes: the summary and exit code, which node a failure points at, and a
rank stuck inside a collective (every rank recorded the stage; none came back)."""

from __future__ import annotations

import time

from nccl_doctor.preflight.head import Head
from nccl_doctor.preflight.launcher import Launcher
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import RankError
from nccl_doctor.preflight.verdict import RankState, stage_limit, stuck_stage
from nccl_doctor.report import Finding, Report, Severity, Where

TWO_NODES = NodePlan(nnodes=2, node_rank=0, hosts=("n1", "n2"), head="n1", port=1, nproc=2, slurm=True, host="n1")


def test_a_run_that_measured_nothing_cannot_pass():
    """Same rule as bench: the ranks ran but measured nothing -> ND001 WARN from the worker, exit 2."""
    plan = NodePlan(nnodes=1, node_rank=0, hosts=("vm",), head="127.0.0.1", port=1, nproc=1, slurm=False, host="vm")
    launcher = Launcher(PreflightOptions(timeout=10), plan, {})
    assert launcher.state.log_dir is None  # made only when the run starts
    launcher.state.measured_nothing = True
    out = launcher.decide(Report(command="preflight"), "done")
    assert out.code == 2 and "nothing was measured" in out.summary
    launcher.state.measured_nothing = False
    out = launcher.decide(Report(command="preflight"), "done")
    assert out.code == 0 and out.summary.startswith("1 node x 1 rank: this node checks out")


def test_failed_ranks_point_at_the_node_whose_own_probe_explains_it():
    """Rank 0 on healthy n1 is the first to report a failed Gloo connect; n2's own probe said its Gloo
    interface cannot reach other nodes: the summary must name n2, not n1."""
    head = Head(Launcher(PreflightOptions(timeout=10, cpu=True), TWO_NODES, {}))  # Gloo
    report = Report(command="preflight")
    report.add(Finding(code="ND216", severity=Severity.WARN, where=Where(host="n2", iface="docker0"),
                       message="GLOO_SOCKET_IFNAME=docker0: docker0 is a virtual (bridge) interface, not this "
                               "node's uplink", fix="export GLOO_SOCKET_IFNAME=eth1"))
    states = [RankState() for _ in range(4)]
    errors = {0: RankError(stage="init", error="RuntimeError: Gloo connectFullMesh failed with Connection refused")}
    out = head.fail(report, states, errors, lost=[], local_dead=[])
    assert out.summary == "stopped in stage init; look at n2"
    assert out.report is not None
    [f] = [f for f in out.report.findings if f.code == "ND406"]
    assert f.where.host == "n2" and "ND216 on n2" in f.message and "rank 0 (n1)" in f.message
    assert f.fix is not None and "export GLOO_SOCKET_IFNAME=eth1" in f.fix
    # nothing explains it: the first rank to fail is named, as before
    out = head.fail(Report(command="preflight"), states, errors, lost=[], local_dead=[])
    assert out.summary == "stopped in stage init; look at n1"
    # an error that is not about connecting is not explained by an interface: the failing rank is named
    oom = {0: RankError(stage="bench", error="RuntimeError: DefaultCPUAllocator: can't allocate memory")}
    report = Report(command="preflight")
    report.add(Finding(code="ND216", severity=Severity.WARN, where=Where(host="n2", iface="docker0"),
                       message="GLOO_SOCKET_IFNAME=docker0 ...", fix="export GLOO_SOCKET_IFNAME=eth1"))
    out = head.fail(report, states, oom, lost=[], local_dead=[])
    assert out.summary == "stopped in stage bench; look at n1"


def _in(stage: str, seq: int, since: float) -> RankState:
    return RankState(seq=seq, stage=stage, since=since)


def test_a_rank_stuck_inside_a_collective_is_caught_by_its_stage_deadline():
    """Every rank recorded the stage, then one never came back from the collective (its own timeout did not
    fire): no rank is behind by its stage, so node 0's stage deadline is what ends the run."""
    now = time.monotonic()
    stage = "bench all_gather world 4 MiB"
    limit = stage_limit(stage, 5.0)
    assert limit == 3 * 5.0 + 10 and stage_limit("init", 5.0) == 5.0 + 10 and stage_limit("fsdp-smoke", 5.0) == 15
    waiting = [_in(stage, 4, now - limit + 1), _in(stage, 4, now - limit - 1), _in(stage, 4, now)]
    assert stuck_stage(waiting, now, 5.0) == stage
    assert stuck_stage(waiting[:1] + waiting[2:], now, 5.0) is None
    assert stuck_stage([_in("done", 9, now - 1e6)], now, 5.0) is None  # a finished rank is never stuck

    head = Head(Launcher(PreflightOptions(timeout=10, cpu=True), TWO_NODES, {}))
    states = [_in(stage, 4, now - limit - 1) for _ in range(4)]
    out = head.fail(Report(command="preflight"), states, {}, lost=[], local_dead=[], timeout=stage)
    assert out.code == 1 and out.report is not None
    [f] = out.report.findings
    assert f.code == "ND406" and f.message == (f"stage {stage} passed its deadline; ranks that had not arrived: "
                                               "none (all waiting in it)")
    assert f.where.host is None  # nobody is behind: no host to blame by its stage
    assert out.report.data["stage"] == stage and {r["stage"] for r in out.report.data["ranks"]} == {stage}


def test_the_total_deadline_names_the_rank_that_had_not_arrived():
    """Rank 3 (n2) never entered the collective the others are waiting in: it is named with its stage."""
    now = time.monotonic()
    head = Head(Launcher(PreflightOptions(timeout=25, cpu=True), TWO_NODES, {}))
    states = [_in("bench reduce_scatter world 1 MiB", 5, now) for _ in range(3)]
    states.append(_in("bench all_gather world 4 MiB", 4, now))
    out = head.fail(Report(command="preflight"), states, {}, lost=[], local_dead=[], timeout="total")
    assert out.report is not None
    [f] = out.report.findings
    assert f.message == ("stage total passed its deadline (25 s total); ranks that had not arrived: "
                         "rank 3 (n2: bench all_gather world 4 MiB)")
    assert f.where.host == "n2" and out.summary == "stopped in stage bench reduce_scatter world 1 MiB; look at n2"


def test_a_lost_node_is_named_with_the_ranks_behind():
    now = time.monotonic()
    launcher = Launcher(PreflightOptions(timeout=25, cpu=True), TWO_NODES, {})
    states = [_in("bench x", 3, now), _in("bench x", 3, now), _in("groups", 2, now), _in("groups", 2, now)]
    out = Head(launcher).fail(Report(command="preflight"), states, {}, lost=[1], local_dead=[])
    assert out.report is not None
    [f] = out.report.findings
    assert f.code == "ND407" and f.where.host == "n2" and launcher.state.absent == {1}
    assert f.message.startswith("node n2 stopped responding during stage bench x (no heartbeat for 6 s")
    assert "ranks behind: ranks 2-3 (n2: groups)" in f.message
