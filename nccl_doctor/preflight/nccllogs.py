"""Each node's captured NCCL_DEBUG=INFO logs, parsed where they were written: the transport NCCL really
used per communicator, the parser's findings, and the report's table of them."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.bench import Backend
from nccl_doctor.codes import Code
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_paths
from nccl_doctor.logs.view import ParsePayload
from nccl_doctor.preflight.groups import group_findings, group_rows
from nccl_doctor.preflight.protocol import LogSummary
from nccl_doctor.report import Finding, Severity, Table, finding, hosts_text

NCCL_NEVER_RAN = "the ranks ran Gloo on CPU (no GPU or --cpu), so NCCL never ran and wrote no log"
GDR_TEXT: dict[object, str] = {True: "yes", False: "no"}  # anything else (unknown): "-"
COMMUNICATOR_KEYS = ("id", "nranks", "nnodes", "intra_node", "inter_node")


def nccl_log_summary(log_dir: Path, backend: Backend, *, host: str) -> LogSummary:
    """Parse one node's captured NCCL_DEBUG=INFO logs, or say why there is nothing to parse."""
    files = sorted(log_dir.glob("*.log"))
    if not files:
        why = (NCCL_NEVER_RAN if backend == Backend.GLOO
               else f"NCCL wrote no log on {host} (NCCL_DEBUG_FILE not honoured?)")
        return LogSummary(host=host, skipped=why)
    try:
        rep = diagnose(parse_paths(files))
    except Exception as exc:
        return LogSummary(host=host, skipped=f"log parser failed: {exc!r}", files=len(files))
    parsed = rep.payload
    if not isinstance(parsed, ParsePayload):  # diagnose always sets it: a parser that did not is a failure
        return LogSummary(host=host, skipped="log parser failed: it returned no parse payload", files=len(files))
    comms = [{k: c.get(k) for k in COMMUNICATOR_KEYS} for c in parsed.communicators]
    return LogSummary(host=host, files=len(files), inter_node=parsed.inter_node,
                      intra_node=parsed.intra_node, communicators=comms,
                      findings=list(rep.findings))


def nccl_log_findings(logs: list[LogSummary]) -> list[Finding]:
    """ND001 once per distinct reason a node's logs were not parsed: PASS when Gloo ran on CPU (there is
    no NCCL to check), WARN otherwise (a check that could not run); then the nodes' parser findings, one per
    distinct finding with the nodes that have it (``groups.py``)."""
    hosts: dict[str, list[str]] = {}
    for lg in logs:
        if lg.skipped:
            hosts.setdefault(lg.skipped, []).append(lg.host)
    out = [finding(Code.CHECK_SKIPPED, Severity.PASS if why == NCCL_NEVER_RAN else Severity.WARN,
                   f"NCCL log check skipped: {why}", host=hosts_text(hosts[why]))
           for why in sorted(hosts)]
    return out + group_findings((lg.host, f) for lg in logs for f in lg.findings)


def nccl_log_table(logs: list[LogSummary]) -> Table | None:
    """What NCCL really used, per communicator (world, the HSDP intra- and inter-node groups): one row per
    distinct content with the nodes that have it as a hostlist, each communicator's rows together."""
    rows = []
    for lg in logs:
        for c in lg.communicators or []:
            inter = c.get("inter_node") or {}
            gdr = GDR_TEXT.get(inter.get("gdr"), "-")
            rows.append((lg.host, (str(c.get("id")), str(c.get("nranks") or "-"), str(c.get("nnodes") or "-"),
                                   ", ".join(c.get("intra_node") or []) or "-", inter.get("transport") or "-", gdr)))
    if not rows:
        return None
    grouped = group_rows(rows)
    comms = list(dict.fromkeys(row[1] for row in grouped))  # a communicator's variants stay together
    return Table(title="Transports NCCL used (from its NCCL_DEBUG=INFO logs)",
                 columns=("host", "communicator", "ranks", "nodes", "intra-node", "inter-node", "GDR"),
                 rows=tuple(sorted(grouped, key=lambda row: comms.index(row[1]))))
