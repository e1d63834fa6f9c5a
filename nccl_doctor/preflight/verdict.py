"""Judging a run: which stage stopped it, which ranks had not arrived, which nodes were lost, what explains
a failure, and the summary and exit code every node leaves with. Pure: no store, no process."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from nccl_doctor.bench import Backend
from nccl_doctor.cluster.stages import Stage
from nccl_doctor.codes import Code
from nccl_doctor.preflight.auth import SECRET_ENV, SECRET_FIX, RejectedValueError
from nccl_doctor.preflight.groups import group_findings, rank_ranges
from nccl_doctor.preflight.heartbeat import HEARTBEAT_LOST_S
from nccl_doctor.preflight.limits import FilesLimit, files_needed, too_few
from nccl_doctor.preflight.payload import preflight_payload
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import BENCH_PREFIX, TOTAL, NodePost, RankError, key_owner
from nccl_doctor.report import Finding, Report, Severity, exit_code, finding, host_names, hosts_text, plural

STAGE_FIX: dict[str, str] = {
    Stage.RENDEZVOUS: "start preflight on every node (`srun --ntasks-per-node=1 nccl-doctor preflight`) and check "
                      "that every node reaches the first node's port (firewall, hostname resolution)",
    Stage.INIT: "check that every node reaches the others on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME "
                "(`nccl-doctor probe` on each) and that firewalls allow the ephemeral ports",
}
# probe findings that explain ranks failing to connect between nodes, by the backend whose interface they are about
EXPLAINS_RANK_FAILURES = {
    Backend.GLOO: {Code.GLOO_BINDS_LOOPBACK, Code.GLOO_IFNAME_INVALID},
    Backend.NCCL: {Code.NCCL_ON_MANAGEMENT, Code.SOCKET_IFNAME_MATCHES_NOTHING, Code.SOCKET_IFNAME_DOWN,
                   Code.SOCKET_IFNAME_IGNORED, Code.NCCL_ON_VIRTUAL, Code.NCCL_FINDS_NO_INTERFACE},
}
# what a rank's error says when it is about connecting (not memory, CUDA or a bug)
CONNECT_WORDS = ("connect", "Connection", "timed out", "Timeout", "timeout", "refused", "unreachable", "socket")
DEFAULT_FIX = ("read the named hosts first: `nccl-doctor probe` there, dmesg, and the NCCL log; drain a host "
               "that fails again (`scontrol update nodename=HOST state=drain reason=preflight`)")
INIT_GRACE_S = 10.0  # on top of --collective-timeout, before node 0 calls a rank stuck
BENCH_COLLECTIVES = 3  # a bench stage may run this many collective timeouts (warm-up, timed, check)
DRAIN_FIX = "dmesg, `scontrol show node`, and drain it before the job"
BEHIND_SHOWN = 4  # (node, stage) groups of ranks named one by one; the rest as one count and hostlist


@dataclass
class RankState:
    """What node 0 last saw of one rank: its stage, that stage's sequence number, since when."""

    seq: int = -1
    stage: str = Stage.NOT_STARTED
    since: float = field(default_factory=time.monotonic)


@dataclass
class NodeVerdict:
    """How one node's launcher ends: the exit code, the verdict word, one line, and the report (None on a
    follower that has node 0's verdict: node 0 holds the report)."""

    code: int
    verdict: Severity
    summary: str
    report: Report | None = None


def fix_for(stage: str) -> str:
    return STAGE_FIX.get(stage.split(maxsplit=1)[0] if stage else stage, DEFAULT_FIX)


def expand_hosts(hostlists: Iterable[str]) -> list[str]:
    """Host names from ``Where.host`` values, each one host or a compact list (``n[1-3]``)."""
    return [name for text in hostlists for name in host_names(text)]


def nodes_word(n: int) -> str:
    return "node" if n == 1 else "nodes"


# --- ranks ------------------------------------------------------------------------------------------
def stage_limit(stage: str, collective_timeout: float) -> float:
    """How long a rank may sit in ``stage`` (its own collective timeout should have fired first)."""
    if stage in (Stage.NOT_STARTED, Stage.INIT):
        return collective_timeout + INIT_GRACE_S
    return collective_timeout * (BENCH_COLLECTIVES if stage.startswith(BENCH_PREFIX.strip()) else 1) + INIT_GRACE_S


def stuck_stage(states: list[RankState], now: float, collective_timeout: float) -> str | None:
    """The stage some rank has sat in past its limit (each stage's limit worked out once: 8,192 ranks sit in
    a handful of stages)."""
    limits: dict[str, float] = {}
    for st in states:
        if st.stage == Stage.DONE:
            continue
        limit = limits.get(st.stage)
        if limit is None:
            limit = limits[st.stage] = stage_limit(st.stage, collective_timeout)
        if now - st.since > limit:
            return st.stage
    return None


@dataclass(frozen=True)
class RankPicture:
    """Where the ranks stand when the run fails: the stage that failed and who was behind it."""

    stage: str
    behind: list[int]
    behind_text: str
    evidence: tuple[str, ...]


def rank_picture(plan: NodePlan, states: list[RankState], errors: dict[int, RankError]) -> RankPicture:
    ahead = max(st.seq for st in states)
    stage = (next((e.stage for e in errors.values()), None) or
             next((st.stage for st in states if st.seq == ahead), Stage.INIT))
    behind = [r for r, st in enumerate(states) if st.seq < ahead or st.seq < 0]
    behind_text = ranks_behind(plan, states, behind)
    evidence = tuple(f"rank {r} ({plan.host_of(r)}): {e.error.splitlines()[0] if e.error else '?'}"
                     for r, e in sorted(errors.items()))
    return RankPicture(stage, behind, behind_text, evidence)


def ranks_behind(plan: NodePlan, states: list[RankState], behind: list[int]) -> str:
    """``ranks 8-15 (n2: init), rank 17 (n3: groups)``: the ranks behind by node and stage, the first
    ``BEHIND_SHOWN`` groups named, the others one count with their hostlist and stages (8,192 ranks stay a line)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r in behind:
        groups.setdefault((plan.host_of(r), states[r].stage), []).append(r)
    items = list(groups.items())
    named = ", ".join(f"{rank_ranges(ranks)} ({host}: {stage})" for (host, stage), ranks in items[:BEHIND_SHOWN])
    rest = items[BEHIND_SHOWN:]
    if not rest:
        return named
    stages = sorted({stage for (_, stage), _ in rest})
    return (f"{named}, and {plural(sum(len(ranks) for _, ranks in rest), 'more rank')} on "
            f"{hosts_text(host for (host, _), _ in rest)} ({', '.join(stages)})")


def lost_during_run(plan: NodePlan, lost: list[int], pic: RankPicture) -> Finding:
    hosts = hosts_text(plan.hosts[i] for i in lost)
    return finding(Code.NODE_LOST, Severity.FAIL,
                   f"{nodes_word(len(lost))} {hosts} stopped responding during stage {pic.stage} (no heartbeat "
                   f"for {HEARTBEAT_LOST_S:.0f} s; their ranks never finished)"
                   + (f"; ranks behind: {pic.behind_text}" if pic.behind_text else ""),
                   f"check {hosts} (crashed, rebooted, OOM-killed or cut off): {DRAIN_FIX}", host=hosts,
                   evidence=pic.evidence)


def lost_after_run(plan: NodePlan, lost: Iterable[int]) -> Finding:
    hosts = hosts_text(plan.hosts[i] for i in sorted(lost))
    return finding(Code.NODE_LOST, Severity.FAIL,
                   f"{nodes_word(len(set(lost)))} {hosts} stopped responding after the measurements (no heartbeat "
                   f"for {HEARTBEAT_LOST_S:.0f} s): its nccl-doctor launcher died or was stopped",
                   f"check {hosts}: {DRAIN_FIX}", host=hosts)


@dataclass(frozen=True)
class Explanation:
    """A probe finding that explains ranks failing to connect: text to add, its hosts, its fix."""

    text: str = ""
    hosts: str = ""
    fix: str | None = None


def explained_by(report: Report, nnodes: int, backend: Backend, error: str = "timed out") -> Explanation:
    """When ranks fail to connect across nodes, the first rank to report is often a healthy node's (the
    one that waited for the broken peer). A node's own probe finding about the interface this backend
    uses (or that setting differing between nodes) names the node to look at. Empty on one node, for
    errors that are not about connecting (memory, CUDA), or when no finding explains it."""
    var = "GLOO_SOCKET_IFNAME" if backend == Backend.GLOO else "NCCL_SOCKET_IFNAME"
    if nnodes < 2 or not about_connecting(error):
        return Explanation()
    why = [f for f in report.findings if f.severity is not Severity.PASS and f.where.host and (
           f.code in EXPLAINS_RANK_FAILURES[backend] or (f.code == Code.SETTING_MISMATCH and var in f.message))]
    if not why:
        return Explanation()
    hosts = hosts_text(expand_hosts(f.where.host for f in why if f.where.host))
    return Explanation(f"; what explains it: {why[0].code} on {why[0].where.host}: {why[0].message}", hosts,
                       f"look at {hosts} first: {why[0].fix or DEFAULT_FIX}")


def timed_out(plan: NodePlan, report: Report, backend: Backend, pic: RankPicture, *, timeout: str,
              timeout_s: float) -> Finding:
    ex = explained_by(report, plan.nnodes, backend)
    return finding(Code.STAGE_FAILED, Severity.FAIL,
                   f"stage {timeout} passed its deadline"
                   + (f" ({timeout_s:.0f} s total)" if timeout == TOTAL else "")
                   + f"; ranks that had not arrived: {pic.behind_text or 'none (all waiting in it)'}" + ex.text,
                   ex.fix or fix_for(timeout),
                   host=ex.hosts or hosts_text(plan.host_of(r) for r in pic.behind) or None)


def about_connecting(error: str) -> bool:
    """Whether a rank's error is about reaching other ranks (not memory, CUDA or a bug)."""
    return any(w in error for w in CONNECT_WORDS)


def rank_failed(plan: NodePlan, report: Report, backend: Backend, pic: RankPicture, *,
                errors: dict[int, RankError], local_dead: list[int]) -> Finding:
    cuda = sorted(r for r, e in errors.items() if e.code == Code.CUDA_UNUSABLE)
    if cuda:  # the ranks that could not start CUDA explain the others, left waiting for them in init
        return cuda_unusable(plan, pic, errors, cuda)
    first = min(errors) if errors else None
    where = plan.host_of(first) if first is not None else plan.host
    why = (errors[first].error.splitlines()[0] if first is not None and errors[first].error
           else f"local {'rank' if len(local_dead) == 1 else 'ranks'} {local_dead} exited")
    ex = explained_by(report, plan.nnodes, backend, why)
    fix = ex.fix or (fix_for(pic.stage) if about_connecting(why) else DEFAULT_FIX)
    return finding(Code.STAGE_FAILED, Severity.FAIL,
                   f"stage {pic.stage} failed on rank {first} ({where}): {why}"
                   + (f"; ranks that had not arrived: {pic.behind_text}" if pic.behind_text else "") + ex.text,
                   fix, host=ex.hosts or where, rank=first, evidence=pic.evidence)


def cuda_unusable(plan: NodePlan, pic: RankPicture, errors: dict[int, RankError], ranks: list[int]) -> Finding:
    """ND313: GPUs were expected on these ranks' nodes and CUDA could not serve them (bench's ``device.choose``):
    CUDA's own error and its fix, on the nodes it happened on."""
    first = ranks[0]
    error = errors[first]
    reason = error.first_line().removeprefix("CudaUnusable: ")
    hosts = hosts_text(plan.host_of(r) for r in ranks)
    more = f" (and {plural(len(ranks) - 1, 'more rank')} on {hosts})" if len(ranks) > 1 else ""
    return finding(Code.CUDA_UNUSABLE, Severity.FAIL,
                   f"stage {pic.stage}: rank {first} ({plan.host_of(first)}) cannot use CUDA{more}: {reason}",
                   error.fix or DEFAULT_FIX, host=hosts, rank=first, evidence=pic.evidence)


# --- nodes ------------------------------------------------------------------------------------------
def missing_nodes(plan: NodePlan, missing: list[str], rendezvous_timeout: float) -> Finding:
    return finding(Code.NODE_MISSING, Severity.FAIL,
                   f"stage rendezvous: {len(missing)} of {plan.nnodes} nodes did not arrive "
                   f"within {rendezvous_timeout:.0f} s: {hosts_text(missing)}",
                   STAGE_FIX[Stage.RENDEZVOUS], host=hosts_text(missing))


def nodes_agree(nnodes: int) -> Finding:
    return finding(Code.VERSION_MISMATCH, Severity.PASS,
                   f"versions, NCCL/Gloo settings, NICs and net plugin agree on all {nnodes} nodes")


def add_probe_findings(report: Report, nodes: list[NodePost]) -> None:
    """Each node's WARN/FAIL probe findings, one per distinct problem with the nodes that have it
    (``groups.py``), and one node's summary line (ND200); a one-node run also says that its Gloo on
    loopback is fine here (ND215 PASS, a WARN in ``probe``, which cannot know the run)."""
    report.extend(group_findings((n.host, f) for n in nodes for f in n.findings if f.severity is not Severity.PASS
                                 or f.code == Code.GLOO_BINDS_LOOPBACK))
    summaries = [f for n in nodes for f in n.findings if f.code == Code.PROBE_SUMMARY]
    report.extend(summaries[:1])


# --- the store and the node's limits ----------------------------------------------------------------
def rejected_value(plan: NodePlan, exc: RejectedValueError, stage: str, authenticated: bool) -> Finding:
    """ND411: a store value forged, malformed or too big, named by its key and the node or rank it
    belongs to; nothing in it was used."""
    node, rank = key_owner(exc.key)
    if rank is not None and 0 <= rank < plan.world_size:
        host, whose = plan.host_of(rank), f"rank {rank}'s"
    else:
        node = node if node is not None and 0 <= node < plan.nnodes else 0
        host, whose = plan.hosts[node], f"node {node}'s"
    ss = f"`ss -tnp 'sport = :{plan.port}'` on {plan.head_host} shows who is connected"
    fix = (f"someone other than this job's nodes wrote to node 0's port {plan.port}: {ss}; keep the port to the "
           f"job's nodes (firewall), and check that every node of the job has the same {SECRET_ENV}"
           if authenticated else
           f"a node running another nccl-doctor version, or someone writing to node 0's port {plan.port}: {ss}; "
           f"{SECRET_FIX}, so that forged values are told apart")
    return finding(Code.STORE_VALUE_REJECTED, Severity.FAIL,
                   f"stage {stage}: the rendezvous store's {exc.key!r} ({whose} value, {host}) was rejected: "
                   f"{exc.why}; nothing in it was used", fix, host=host, rank=rank)


def unauthenticated(plan: NodePlan) -> Finding:
    """ND412: no secret, so anyone who reaches node 0's port can read the nodes' posts and forge values."""
    return finding(Code.STORE_UNAUTHENTICATED, Severity.WARN,
                   f"the rendezvous store on {plan.head_host}:{plan.port} is unauthenticated ({SECRET_ENV} is not "
                   "set): anyone who reaches the port can read every node's versions, settings and NICs, and write "
                   "a forged rank result or verdict", SECRET_FIX, host=plan.head_host)


def files_limit(plan: NodePlan, limit: FilesLimit | None) -> Finding | None:
    """ND413 when node 0's open-file limit, raised to the hard limit, is below what the run needs."""
    if limit is None or not too_few(limit, plan.nnodes, plan.nproc):
        return None
    need = files_needed(plan.nnodes, plan.nproc)
    return finding(Code.OPEN_FILES_LIMIT, Severity.WARN,
                   f"node 0's open-file limit is {limit.soft} (hard limit {limit.hard}, raised from {limit.before}), "
                   f"below the about {need} its store needs for {plural(plan.nnodes, 'node')} x "
                   f"{plural(plan.nproc, 'rank')}: past it the store stops accepting and ranks time out in init",
                   f"raise the hard limit to at least {need} on {plan.head_host}: `ulimit -Hn` in the prolog or "
                   "/etc/security/limits.conf, LimitNOFILE= for slurmd (Slurm's PropagateResourceLimits passes "
                   "the submitting shell's)", host=plan.head_host)


def plan_keys(report: Report, plan: NodePlan) -> None:
    """The run's shape in the report: its nodes, ranks per node and hosts."""
    preflight_payload(report).set_plan(plan.nnodes, plan.nproc, plan.hosts)


def alone(plan: NodePlan, mine: NodePost, stage: str, why: str, timings: dict[str, float], *,
          fix: str | None = None, code: Code | None = None, host: str | None = None) -> NodeVerdict:
    """This node cannot reach the others: a report of what it knows itself, naming node 0 (or ``host``)."""
    report = Report(command="preflight")
    report.extend(mine.bad_findings())
    report.add(finding(code or (Code.NODE_LOST if stage != Stage.RENDEZVOUS else Code.NODE_MISSING), Severity.FAIL,
                       f"stage {stage}: {why}", fix or STAGE_FIX.get(stage, DEFAULT_FIX),
                       host=host or (plan.head_host if plan.nnodes > 1 else plan.host)))
    report.summary = f"stopped in stage {stage}: {why}"
    payload = preflight_payload(report)
    payload.stage, payload.nodes, payload.timings_s = stage, [mine.host], timings
    payload.localisation = {"skipped": f"this node stopped in stage {stage}"}
    return NodeVerdict(code=1, verdict=Severity.FAIL, summary=report.summary, report=report)


# --- the decision -----------------------------------------------------------------------------------
def decide(report: Report, plan: NodePlan, stage: str, timings: dict[str, float], *, measured_nothing: bool,
           strict: bool) -> NodeVerdict:
    """The report's last keys, its summary, and the exit code every node leaves with."""
    payload = preflight_payload(report)
    payload.timings_s = dict(timings)
    if not payload.has("stage"):
        payload.stage = stage
    if not payload.has("localisation"):
        payload.localisation = {"skipped": f"the run stopped in stage {stage}"}
    if not report.summary:
        report.summary = summary(report, plan, stage, measured_nothing=measured_nothing)
    if measured_nothing:  # could not run: a gate must not pass on no measurement
        report.could_not_run = "nothing was measured"
    code = exit_code(report, strict=strict)
    return NodeVerdict(code=code, verdict=report.verdict, summary=report.summary, report=report)


def summary(report: Report, plan: NodePlan, stage: str, *, measured_nothing: bool) -> str:
    shape = f"{plural(plan.nnodes, 'node')} x {plural(plan.nproc, 'rank')}"
    if report.verdict is Severity.FAIL:
        fails = expand_hosts(f.where.host for f in report.findings
                             if f.severity is Severity.FAIL and f.where.host)
        return f"stopped in stage {stage}" + (f"; look at {hosts_text(fails)}" if fails else "")
    if measured_nothing:
        return f"{shape}: nothing was measured ({Code.CHECK_SKIPPED}); not a go"
    if plan.nnodes == 1:
        return f"{shape}: this node checks out; inter-node links not tested (run under Slurm on 2+ nodes)"
    return f"{shape} fit for multi-node training"
