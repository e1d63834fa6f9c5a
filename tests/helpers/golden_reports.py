"""Hand-built reports for the golden renderer tests (``tests/unit/test_golden.py``): a probe-shaped one, a
bench run built by bench's own view from fixed figures, node 0's preflight report of a small fleet
(``fleet.py``: real probes and parsed logs), and a preflight that stopped; each rendered as text (fixed width,
no colour), JSON and JUnit (plain and ``--strict``)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

from nccl_doctor.bench import build_report, judge
from nccl_doctor.bench.busbw import link_gbps
from nccl_doctor.bench.model import BenchResult, Measurement, NodeInfo, PairResult
from nccl_doctor.bench.pairs import Localisation, first_round, next_round
from nccl_doctor.codes import Code
from nccl_doctor.node import compare
from nccl_doctor.preflight.nccllogs import nccl_log_findings, nccl_log_table
from nccl_doctor.preflight.payload import preflight_payload
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import NodePost
from nccl_doctor.preflight.verdict import (
    RankState,
    add_probe_findings,
    decide,
    lost_during_run,
    missing_nodes,
    nodes_agree,
    rank_picture,
)
from nccl_doctor.render import make_console, render_json, render_junit, render_text
from nccl_doctor.report import Finding, Report, Severity, Table, Where
from tests.helpers.payloads import Doc

WIDTH = 160
LOG_DIR = re.compile(r"/tmp/nccl-doctor-[0-9a-f]{6}")  # fleet.py names each node's log dir by hash(host)


def probe_shaped() -> Report:
    """test_render's report: markup in a message, a table, a command's own data."""
    r = Report(command="probe", summary="2 nodes")
    for i, sev in enumerate((Severity.FAIL, Severity.WARN, Severity.PASS)):
        r.add(Finding(code=Code.CHECK_SKIPPED, severity=sev, message=f"message {i} [bold]not markup[/bold]",
                      fix="export NCCL_SOCKET_IFNAME=ib0", where=Where(host=f"node{i}", iface="ib0"),
                      evidence=(f"job.log:{i + 1}: a quoted [red]line[/red]",)))
    r.tables.append(Table(title="Interfaces", columns=("name", "kind"), rows=(("ib0", "infiniband"),),
                          caption="one row"))
    r.payload = Doc({"interfaces": [{"name": "ib0"}]})
    r.notes.append("a note under the findings")
    return r


def _node(i: int, host: str, ranks: range, mbit: int = 10000) -> NodeInfo:
    return NodeInfo(index=i, host=host, ranks=tuple(ranks), iface="eth1", link_gbps=link_gbps(mbit))


def _meas(op: str, group: str, size: int, t_us: float, n: int) -> Measurement:
    algbw = size / (t_us / 1e6) / 1e9
    factor = {"all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_reduce": 2 * (n - 1) / n}[op]
    return Measurement(op=op, group=group, group_size=n, size_bytes=size, count=size // 4 // n, iters=10,
                       time_us=t_us, algbw_gbps=algbw, busbw_gbps=algbw * factor, wrong=0)


def _pairs(nnodes: int, slow: int) -> list[PairResult]:
    """The pairs a run measures (the real planning loop), node ``slow``'s link at a 45th of the others."""
    loc = Localisation(nnodes=nnodes)
    pairs, out = first_round(nnodes), []
    while pairs:
        got = [PairResult(a=a, b=b, size_bytes=16 << 20, iters=5, time_us=1.0,
                          busbw_gbps=0.02 if slow in (a, b) else 0.9, wrong=0, round=len(loc.rounds) + 1)
               for a, b in pairs]
        loc.add(got)
        out += got
        pairs = next_round(loc)
    return out


def bench_shaped() -> Report:
    """4 nodes x 2 ranks on Gloo: every op in world/intra/inter groups at two sizes, one slow node's link."""
    nodes = [_node(i, f"n{i + 1}", range(2 * i, 2 * i + 2)) for i in range(4)]
    results = [_meas(op, group, size, t_us * (2 if group == "inter" else 1), n)
               for op in ("all_gather", "reduce_scatter", "all_reduce")
               for group, n in (("world", 8), ("intra", 2), ("inter", 4))
               for size, t_us in ((1 << 20, 900.0), (64 << 20, 60000.0))]
    result = BenchResult(backend="gloo", device="cpu", world_size=8, local_world_size=2, nodes=nodes,
                         results=results, pairs=_pairs(4, slow=3))
    return build_report(result, judge(result), notes=["a note from the launch"])


def preflight_fleet() -> Report:
    """Node 0's report of 6 nodes as ``head.py`` assembles it, from ``fleet.py``'s real probes and parsed
    NCCL logs: one node's NCCL is older, every rank finished."""
    from tests.helpers import fleet

    plan = NodePlan(nnodes=6, node_rank=0, hosts=tuple(fleet.hosts(6)), head="gpu0001", port=29400,
                    nproc=fleet.NPROC, slurm=True, host="gpu0001")
    posts = [fleet.node_post(h, i) for i, h in enumerate(plan.hosts)]
    posts[4] = NodePost(host=posts[4].host, node=4, facts=dict(posts[4].facts, **{"version.nccl": fleet.OLD_NCCL}),
                        findings=posts[4].findings, fatal=posts[4].fatal)
    report = Report(command="preflight")
    preflight_payload(report).set_plan(plan.nnodes, plan.nproc, plan.hosts)
    add_probe_findings(report, posts)
    report.extend(compare([p.facts for p in posts]) or [nodes_agree(plan.nnodes)])
    preflight_payload(report).node_facts = [p.facts for p in posts]
    logs = [fleet.log_summary(h, plan.nnodes) for h in plan.hosts]
    report.extend(nccl_log_findings(logs))
    preflight_payload(report).nccl_logs = [lg.as_dict() for lg in logs]
    table = nccl_log_table(logs)
    if table:
        report.tables.append(table)
    return decide(report, plan, "done", {"rendezvous": 1.5, "bench": 30.25}, measured_nothing=False,
                  strict=False).report


def preflight_stopped() -> Report:
    """A 4-node run: one node never arrived, one was lost in init, then ``decide`` (the exit every node takes)."""
    hosts = ("gpu1", "gpu2", "gpu3", "gpu4")
    plan = NodePlan(nnodes=4, node_rank=0, hosts=hosts, head="gpu1", port=29400, nproc=2, slurm=True, host="gpu1")
    report = Report(command="preflight")
    preflight_payload(report).set_plan(4, 2, hosts)
    report.add(missing_nodes(plan, ["gpu4"], 120.0))
    states = [RankState(seq=1, stage="init", since=0.0) if plan.host_of(r) == "gpu3"
              else RankState(seq=5, stage="bench all_gather world 64 MiB", since=0.0) for r in range(8)]
    report.add(lost_during_run(plan, [2], rank_picture(plan, states, {})))
    report.add(nodes_agree(3))
    return decide(report, plan, "rendezvous", {"rendezvous": 120.0, "probe": 0.5}, measured_nothing=True,
                  strict=False).report


REPORTS: dict[str, Callable[[], Report]] = {
    "probe-shaped": probe_shaped,
    "bench-4x2": bench_shaped,
    "preflight-fleet-6": preflight_fleet,
    "preflight-stopped": preflight_stopped,
}


def _text(report: Report) -> str:
    out = io.StringIO()
    render_text(report, make_console(out, width=WIDTH))
    return out.getvalue()


FORMATS: dict[str, Callable[[Report], str]] = {
    "text": lambda r: LOG_DIR.sub("/tmp/nccl-doctor-XXXXXX", _text(r)),
    "json": lambda r: LOG_DIR.sub("/tmp/nccl-doctor-XXXXXX", render_json(r)),
    "junit": lambda r: LOG_DIR.sub("/tmp/nccl-doctor-XXXXXX", render_junit(r)),
    "junit-strict": lambda r: LOG_DIR.sub("/tmp/nccl-doctor-XXXXXX", render_junit(r, strict=True)),
}
