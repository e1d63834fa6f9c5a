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


# the kinds of communicator a preflight run makes, in the table's order: the world, each node's ranks (HSDP's
# fsdp dim), one rank per node (its dp dim), and 2-rank ones (torch makes one per rank pair that calls
# send/recv outside a batch: the node-pair pass's rails, 4,096 per round at 1,024 x 8)
WORLD, INTRA, INTER, NODE_PAIR, GPU_PAIR = "world", "intra-node", "inter-node", "node pair", "GPU pair"
KINDS = (WORLD, INTRA, INTER, NODE_PAIR, GPU_PAIR)
PAIR_RANKS = 2


def comm_kind(nranks: object, nnodes: object, world: int) -> str:
    """Which kind of communicator a (ranks, nodes) shape is in a job whose world has ``world`` ranks; a shape
    of none of them (or without NCCL's nNodes, before 2.20) is named by its rank count."""
    if nranks == world:
        return WORLD
    if nranks == PAIR_RANKS and nnodes in (1, 2):
        return GPU_PAIR if nnodes == 1 else NODE_PAIR
    if nnodes == 1:
        return INTRA
    if nnodes is not None and nnodes == nranks:
        return INTER
    return f"{nranks or '?'} ranks"


def nccl_log_table(logs: list[LogSummary]) -> Table | None:
    """What NCCL really used, per kind of communicator (``comm_kind``): one row per distinct content with the
    nodes that have it as a hostlist and how many communicators each node's row stands for, so the 2-rank
    communicators of a large run are a row or two, not thousands; a kind whose transports differ (one rail
    on sockets) keeps a row per variant."""
    world = max((int(c["nranks"]) for lg in logs for c in lg.communicators or [] if isinstance(c.get("nranks"), int)),
                default=0)
    counted: dict[tuple[str, tuple[str, ...]], int] = {}
    for lg in logs:
        for c in lg.communicators or []:
            inter = c.get("inter_node") or {}
            cells = (comm_kind(c.get("nranks"), c.get("nnodes"), world), str(c.get("nranks") or "-"),
                     str(c.get("nnodes") or "-"), ", ".join(c.get("intra_node") or []) or "-",
                     inter.get("transport") or "-", GDR_TEXT.get(inter.get("gdr"), "-"))
            counted[(lg.host, cells)] = counted.get((lg.host, cells), 0) + 1
    if not counted:
        return None
    rows = [(host, (f"{cells[0]} x {n}" if n > 1 else cells[0], *cells[1:])) for (host, cells), n in counted.items()]
    grouped = group_rows(rows)
    order = {k: i for i, k in enumerate(KINDS)}
    return Table(title="Transports NCCL used (from its NCCL_DEBUG=INFO logs, per kind of communicator)",
                 columns=("host", "communicator", "ranks", "nodes", "intra-node", "inter-node", "GDR"),
                 rows=tuple(sorted(grouped, key=lambda row: order.get(row[1].split(" x ")[0], len(KINDS)))))
