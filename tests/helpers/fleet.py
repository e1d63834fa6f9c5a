"""A preflight run's report at fleet scale, built the way node 0 builds it: 1,024 nodes (``gpu0001``..) cloned
from real probes of sysfs trees (``sysfs_builder``) and real parsed NCCL logs (``fixtures/nccl-logs``), with a
few faulty nodes, through the same functions ``preflight/head.py`` calls. Run as a script it prints the
figures (lines per problem, the longest line, JSON bytes at 512 and 1,024 nodes)::

    PYTHONPATH=. .venv/bin/python -m tests.helpers.fleet
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import hostlist

from nccl_doctor.bench import Backend
from nccl_doctor.node import check, compare, node_facts, probe_node
from nccl_doctor.preflight.nccllogs import nccl_log_findings, nccl_log_summary, nccl_log_table
from nccl_doctor.preflight.payload import preflight_payload
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import LogSummary, NodePost
from nccl_doctor.preflight.verdict import (
    RankState,
    add_probe_findings,
    lost_during_run,
    missing_nodes,
    nodes_agree,
    rank_picture,
    summary,
    timed_out,
)
from nccl_doctor.render import LOG_WIDTH, make_console, render_json, render_text
from nccl_doctor.report import Report
from tests.helpers import sysfs_builder as b

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/nccl-logs"
NPROC = 8
TEMPLATE_HOST = "dgx01"  # sysfs_builder's dgx_h100 hostname, replaced by each clone's
LOG_HOST = "node01"  # the hostname inside the NCCL log fixtures
VERSIONS = {"version.torch": "2.5.1", "version.cuda": "12.4", "version.nccl": "2.21.5"}
OLD_NCCL = "2.20.3"

# the faulty nodes (all below 512, so the 512- and 1,024-node reports hold the same problems)
GDR_OFF = ("gpu0100", "gpu0200", "gpu0300")  # ND214 WARN: no nvidia_peermem (the same problem on 3 nodes)
OLD = ("gpu0400", "gpu0401")  # ND401: another NCCL
PORT_DOWN = ("gpu0450",)  # ND209 (its probe) and ND403 (compare): one IB port down
MISSING = tuple(f"gpu{i:04d}" for i in range(60, 65))  # ND408: never arrived
LOST = ("gpu0070",)  # ND407: lost during the run; its ranks never left init
STUCK = ("gpu0080",)  # its ranks sit in the stage before the others' (ND406's "had not arrived")
SOCKET = ("gpu0090", "gpu0091")  # their NCCL logs: TCP sockets instead of IB (ND103 ...)
FAULTY = {*GDR_OFF, *OLD, *PORT_DOWN, *MISSING, *LOST, *STUCK, *SOCKET}
AHEAD = "bench all_gather world 64 MiB"


def hosts(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]


def _no_peermem() -> dict:
    spec = b.dgx_h100()
    spec["modules"] = [m for m in spec["modules"] if m != "nvidia_peermem"]
    return spec


def _port_down() -> dict:
    spec = b.dgx_h100()
    spec["rdma"][3]["ports"] = {1: {"state": "1: DOWN", "phys": "3: Disabled", "rate": "10 Gb/sec (4X SDR)",
                                    "ll": "InfiniBand"}}
    for n in spec["net"]:
        if n["name"] == "ib3":
            n["state"] = "down"
    return spec


@cache
def _template(kind: str) -> str:
    """One real probe of a sysfs tree, as the NodePost JSON a node sends (host: ``TEMPLATE_HOST``)."""
    spec = {"healthy": b.dgx_h100, "gdr_off": _no_peermem, "port_down": _port_down}[kind]()
    root = b.build(spec, Path(tempfile.mkdtemp(prefix="fleet-")))
    try:
        node = probe_node(root, {"HOME": "/root"})
        facts = node_facts(node, {}, versions=VERSIONS, host=TEMPLATE_HOST)
        facts.update({"ranks.per_node": str(NPROC), "ranks.source": "--nproc-per-node"})
        return NodePost(host=TEMPLATE_HOST, node=0, facts=facts, findings=check(node)).to_json()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def node_post(host: str, index: int) -> NodePost:
    """Node ``index``'s post: the template's, every mention of the template's host replaced by ``host``."""
    kind = "gdr_off" if host in GDR_OFF else "port_down" if host in PORT_DOWN else "healthy"
    post = NodePost.from_json(_template(kind).replace(TEMPLATE_HOST, host))
    facts = dict(post.facts, **({"version.nccl": OLD_NCCL} if host in OLD else {}))
    return NodePost(host=host, node=index, facts=facts, findings=post.findings, fatal=post.fatal)


@cache
def _log_template(fixture: str) -> str:
    d = Path(tempfile.mkdtemp(prefix="fleet-logs-"))
    try:
        shutil.copy(FIXTURES / fixture, d / f"{LOG_HOST}.1234.log")
        return nccl_log_summary(d, "nccl", host=LOG_HOST).to_json().replace(str(d), "/tmp/nccl-doctor-XXXX")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def log_summary(host: str, n: int) -> LogSummary:
    """Node ``host``'s parsed NCCL logs (a real fixture's parse, with its private dir and host), and the
    communicators a run of ``n`` nodes has: the world, the node's intra-node group, the inter-node group."""
    socket = host in SOCKET
    fixture = "051-socket-veth-linklocal-connect-timeout.log" if socket else "041-h20-ib-gdrdma-cumem-2node.log"
    text = _log_template(fixture).replace(LOG_HOST, host).replace("XXXX", f"{hash(host) & 0xffffff:06x}")
    lg = LogSummary.from_json(text)
    inter = {"transport": "Socket", "gdr": None} if socket else {"transport": "IB", "gdr": True}
    comms = [{"id": "world", "nranks": n * NPROC, "nnodes": n, "intra_node": ["P2P/CUMEM"], "inter_node": inter},
             {"id": "intra", "nranks": NPROC, "nnodes": 1, "intra_node": ["P2P/CUMEM"], "inter_node": None},
             {"id": "inter", "nranks": n, "nnodes": n, "intra_node": [], "inter_node": inter}]
    return LogSummary(host=lg.host, files=lg.files, inter_node=lg.inter_node, intra_node=lg.intra_node,
                      communicators=comms, findings=lg.findings)


def fleet_plan(n: int) -> NodePlan:
    names = tuple(hosts(n))
    return NodePlan(nnodes=n, node_rank=0, hosts=names, head=names[0], port=29400, nproc=NPROC, slurm=True,
                    host=names[0])


def rank_states(plan: NodePlan) -> list[RankState]:
    """Every rank in ``AHEAD`` but the lost node's (still in init) and the stuck node's (one stage behind)."""
    now = time.monotonic()
    states = []
    for r in range(plan.world_size):
        host = plan.host_of(r)
        seq, stage = (1, "init") if host in LOST else (4, "groups") if host in STUCK else (5, AHEAD)
        states.append(RankState(seq=seq, stage=stage, since=now))
    return states


def fleet_report(n: int) -> Report:
    """Every path of node 0's report at once (a real run stops at the first): the probe findings and the
    comparison of the nodes that arrived, the missing nodes, a node lost during the run, the deadline with
    ranks behind, and every node's NCCL logs; the data keys as ``head.py`` writes them."""
    plan = fleet_plan(n)
    posts = [node_post(h, i) for i, h in enumerate(plan.hosts) if h not in MISSING]
    report = Report(command="preflight")
    preflight_payload(report).set_plan(n, NPROC, plan.hosts)
    add_probe_findings(report, posts)
    diffs = compare([p.facts for p in posts])
    report.extend(diffs or [nodes_agree(n)])
    preflight_payload(report).node_facts = [p.facts for p in posts]
    report.add(missing_nodes(plan, list(MISSING), 120.0))
    states = rank_states(plan)
    pic = rank_picture(plan, states, {})
    report.add(lost_during_run(plan, [plan.hosts.index(h) for h in LOST], pic))
    report.add(timed_out(plan, report, Backend.NCCL, pic, timeout=AHEAD, timeout_s=600.0))
    preflight_payload(report).ranks = [{"rank": r, "host": plan.host_of(r), "stage": st.stage}
                                       for r, st in enumerate(states)]
    logs = [log_summary(h, n) for h in plan.hosts if h not in MISSING]
    report.extend(nccl_log_findings(logs))
    preflight_payload(report).nccl_logs = [lg.as_dict() for lg in logs]
    table = nccl_log_table(logs)
    if table:
        report.tables.append(table)
    report.summary = summary(report, plan, AHEAD, measured_nothing=False)
    return report


def text_of(report: Report) -> str:
    out = io.StringIO()
    render_text(report, make_console(out, width=LOG_WIDTH))
    return out.getvalue()


# --- what the text and the JSON show -----------------------------------------------------------------
FINDING_HEAD = re.compile(r"^\[(FAIL|WARN|PASS)\] (ND\d{3}) ")
HOSTLIST = re.compile(r"gpu(?:\[[0-9,\-]+\]|\d{4})")


@dataclass(frozen=True)
class Figures:
    nodes: int
    findings: int
    text_lines: int
    finding_lines: int
    most_lines_per_finding: int
    longest_line: int
    table_rows: int
    json_bytes: int
    findings_json_bytes: int


def finding_blocks(text: str) -> list[list[str]]:
    """The text view's findings, each its head line and the lines under it (evidence, fix)."""
    blocks: list[list[str]] = []
    started = False
    for line in text.splitlines():
        if line == "Findings":
            started = True
        elif started and FINDING_HEAD.match(line):
            blocks.append([line])
        elif started and blocks and line.startswith("    "):
            blocks[-1].append(line)
    return blocks


def named_hosts(text: str) -> set[str]:
    """Every ``gpuNNNN`` a text names, hostlists expanded."""
    return {h for m in HOSTLIST.findall(text) for h in hostlist.expand_hostlist(m)}


def figures(n: int) -> Figures:
    report = fleet_report(n)
    text = text_of(report)
    blocks = finding_blocks(text)
    doc = render_json(report)
    table = report.tables[0] if report.tables else None
    return Figures(nodes=n, findings=len(report.findings), text_lines=len(text.splitlines()),
                   finding_lines=sum(map(len, blocks)), most_lines_per_finding=max(map(len, blocks)),
                   longest_line=max(map(len, text.splitlines())), table_rows=len(table.rows) if table else 0,
                   json_bytes=len(doc), findings_json_bytes=len(json.dumps(json.loads(doc)["findings"])))


if __name__ == "__main__":
    for size in (512, 1024):
        print(figures(size))
