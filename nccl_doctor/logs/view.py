"""What ``parse`` shows besides its findings: the communicator table, the summary line, the notes and
the report's JSON data (``report_data``, the one function that builds it; keys as docs/parse.md documents)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from nccl_doctor.logs.diagnosis.transports import (
    NVLS,
    InterNode,
    Transport,
    comm_on_one_node,
    gdr_from,
    net_family,
    split_net,
)
from nccl_doctor.logs.diagnosis.where import all_ranks, ranges
from nccl_doctor.logs.parse.commlines import UNIDENTIFIED
from nccl_doctor.logs.parse.model import Comm, Group, ParseResult
from nccl_doctor.logs.parse.patterns import RETCODES
from nccl_doctor.payload import FieldsJson, JsonObject
from nccl_doctor.report import Report, Table, plural

MAX_TABLE_ROWS = 40  # communicators shown one per row; more are grouped by what they have in common
MAX_ROWS_SHOWN = 200  # rows of the communicator table
MAX_HOSTS_LISTED = 50  # hosts listed per group (and per GDR state); ``host_count`` has them all
MAX_HOSTS_PER_VALUE = 20  # hosts listed per distinct NIC/interface list
MAX_VALUES_LISTED = 4096  # distinct NIC/interface lists listed (a 4,096-node job: one each); the rest share one entry
MAX_SKIPPED_NAMED = 5  # skipped files a note names


@dataclass(frozen=True, kw_only=True)
class ParsePayload(FieldsJson):
    """``parse``'s JSON keys, in their order (``docs/parse.md``); the sub-documents stay JSON objects."""

    inter_node: JsonObject  # transport, gdr, evidence: what preflight reports per node
    intra_node: JsonObject  # {"transports": [...]}
    nccl_versions: Sequence[str]
    hosts: Sequence[str]
    processes: int
    ranks: JsonObject
    communicators: Sequence[CommSummary]
    network: JsonObject
    bootstrap_interfaces: Sequence[JsonObject]
    bootstrap_net_devices: Sequence[JsonObject]
    settings: JsonObject
    warnings: Sequence[JsonObject]
    errors: Sequence[JsonObject]
    watchdog: Sequence[JsonObject]
    error_return_codes: Mapping[str, int]
    inputs: Sequence[Mapping[str, object]]  # each input file or stream and what was read of it
    skipped_inputs: Sequence[str]
    lines: int
    nccl_lines: int



class InterNodeSummary(TypedDict):
    transport: str
    gdr: bool | None


class CommSummary(TypedDict):
    """One entry of the report's ``communicators`` list."""

    id: str
    comm_id: str | None
    nranks: int | None
    nnodes: int | None
    local_ranks: int | None
    hosts_seen: int
    ranks_seen: int
    processes_seen: int
    init_complete: int
    intra_node: list[str]
    inter_node: InterNodeSummary
    collnet: list[str]


def show(report: Report, r: ParseResult, inter: InterNode, intra: list[str]) -> None:
    """Fill the report's table, summary line, notes and JSON data."""
    comms = [comm_summary(c, r, job_on_one_node=inter.transport == Transport.NONE) for c in r.comms.values()]
    comms.sort(key=lambda c: (-(c["nranks"] or 0), c["id"]))
    ranks = all_ranks(r)
    if comms:
        report.tables.append(comm_table(comms))
    report.summary = summary_line(r, inter, intra, len(comms), len(ranks))
    if r.skipped:
        report.notes.append(skipped_note(r.skipped))
    report.payload = report_data(r, inter, intra, comms, ranks)


def summary_line(r: ParseResult, inter: InterNode, intra: list[str], n_comms: int, n_ranks: int) -> str:
    gdr = {True: "+GDRDMA", False: " without GDR", None: ""}[inter.gdr]
    parts = [f"inter-node {inter.transport}{gdr}"]
    if intra:
        parts.append(f"intra-node {', '.join(intra)}")
    parts.append(f"{plural(len(r.hosts), 'host')}, {plural(n_ranks, 'rank')} seen, "
                 f"{plural(n_comms, 'communicator')}")
    if r.versions:
        parts.append("NCCL " + ", ".join(sorted(r.versions)))
    return "; ".join(parts)


def skipped_note(skipped: list[str]) -> str:
    """The note on directory entries left out (``name: reason`` each)."""
    why = sorted({s.rsplit(": ", 1)[1] for s in skipped})
    names = ", ".join(s.rsplit(": ", 1)[0] for s in skipped[:MAX_SKIPPED_NAMED])
    more = f" and {len(skipped) - MAX_SKIPPED_NAMED} more" if len(skipped) > MAX_SKIPPED_NAMED else ""
    return (f"skipped {plural(len(skipped), 'file')} of the directory walk, evidently not "
            f"logs ({', '.join(why)}): {names}{more}; name a file explicitly to parse it anyway")


def report_data(r: ParseResult, inter: InterNode, intra: list[str], comms: list[CommSummary],
                ranks: set[int]) -> ParsePayload:
    """The report's JSON keys (beside the common ones: verdict, summary, findings)."""
    return ParsePayload(
        inter_node={"transport": inter.transport, "gdr": inter.gdr, "evidence": inter.evidence,
                    "network": inter.network},
        intra_node={"transports": intra},
        nccl_versions=sorted(r.versions),
        hosts=sorted(r.hosts),
        processes=len(r.procs),
        ranks={"count": len(ranks), "ranges": ranges(ranks)},
        communicators=comms,
        network={
            "selected": dict(r.networks),
            "net_plugins": dict(r.net_plugins),
            "ib_devices": by_value(r.ib_devices),
            "link_layers": dict(r.link_layers),
            "ib_no_device_hosts": sorted(r.ib_no_device),
            "socket_interfaces": by_value(r.socket_ifaces),
            "ofi_providers": dict(r.ofi_providers),
            "gdr_hca": {k: sorted(v)[:MAX_HOSTS_LISTED] for k, v in r.gdr_hca.items()},
            "nvls_available": r.nvls_available,
        },
        bootstrap_interfaces=by_value(r.bootstrap_ifaces),
        bootstrap_net_devices=by_value({h: [d] for h, d in r.bootstrap_net.items()}),
        settings={k: dict(v) for k, v in sorted(r.settings.items())},
        warnings=[group_dict(g) for g in sorted(r.warnings.values(), key=lambda g: -g.count)],
        errors=[group_dict(g) for g in r.errors.values()],
        watchdog=[group_dict(g) | {"op": k[0], "seq": k[1]} for k, g in r.watchdog.items()],
        error_return_codes={RETCODES.get(c, str(c)): n for c, n in r.retcodes.items()},
        inputs=r.sources,
        skipped_inputs=r.skipped,
        lines=r.lines,
        nccl_lines=r.nccl_lines,
    )




def comm_summary(comm: Comm, r: ParseResult, *, job_on_one_node: bool = False) -> CommSummary:
    """One communicator as the report's ``communicators`` list shows it. Its inter-node ``none`` is the
    job's answer's: what is complete places it on one node, or the whole job is (``inter_node``); an
    incomplete one is ``unknown``, as the JSON's job-wide transport then is, never ``none`` beside it."""
    inter, gdr, loop = split_net(comm)
    fam: Counter[str] = Counter()
    for name, n in inter.items():
        fam[net_family(name, r)] += n
    transport: str
    # (the "unidentified" bag holds channel lines of several communicators: never one mixed communicator)
    if fam and Transport.SOCKET in fam and len(fam) > 1 and comm.key != UNIDENTIFIED:
        transport = Transport.MIXED  # RDMA hops on some nodes, Socket on others (the finding lists the hosts)
    elif fam:
        transport = fam.most_common(1)[0][0]
    elif comm_on_one_node(comm) or (job_on_one_node and not comm.net and not comm.collnet):
        transport = Transport.NONE
    else:
        transport = Transport.UNKNOWN
    intra = sorted(comm.intra) + ([NVLS] if comm.nvls else []) + [f"NET/{n} (same node)" for n in sorted(loop)]
    g = gdr_from(gdr)
    if g is None and comm.ring_gdr:
        g = 0 not in comm.ring_gdr
    return {
        "id": comm.key,
        "comm_id": comm.comm_id,
        "nranks": comm.nranks,
        "nnodes": comm.nnodes,
        "local_ranks": comm.local_ranks,
        "hosts_seen": len(comm.hosts),
        "ranks_seen": len(comm.rank_host),
        "processes_seen": comm.members,
        "init_complete": comm.complete,
        "intra_node": intra,
        "inter_node": {"transport": transport, "gdr": None if transport in (Transport.NONE, Transport.SOCKET) else g},
        "collnet": sorted({n for n, _ in comm.collnet}),
    }


def comm_table(comms: list[CommSummary]) -> Table:
    """The communicator table of the text view; past MAX_TABLE_ROWS communicators, alike ones share a row."""
    groups: dict[tuple[object, ...], list[CommSummary]] = {}
    for c in comms:
        key = (c["nranks"], c["nnodes"] or c["hosts_seen"], c["local_ranks"], tuple(c["intra_node"]),
               c["inter_node"]["transport"], c["inter_node"]["gdr"])
        groups.setdefault(key if len(comms) > MAX_TABLE_ROWS else (c["id"], *key), []).append(c)
    rows = []
    for members in sorted(groups.values(), key=lambda m: -(m[0]["nranks"] or m[0]["ranks_seen"])):
        c = members[0]
        name = c["id"] if len(members) == 1 else f"{len(members)} comms ({c['id']}, ...)"
        ranks = str(c["nranks"]) if c["nranks"] else f"{c['ranks_seen']} seen"
        nodes = str(c["nnodes"]) if c["nnodes"] else f"{c['hosts_seen']} seen"
        gdr = {True: "yes", False: "no", None: "-"}[c["inter_node"]["gdr"]]
        rows.append((name, ranks, nodes, str(c["local_ranks"] or "-"), ", ".join(c["intra_node"]) or "-",
                     c["inter_node"]["transport"], gdr))
    return Table(title="Communicators", columns=("communicator", "ranks", "nodes", "local ranks",
                                                 "intra-node", "inter-node", "GDR"), rows=tuple(rows[:MAX_ROWS_SHOWN]))


def group_dict(g: Group) -> dict[str, Any]:
    """A warning/error/watchdog group as JSON."""
    return {"category": g.category, "kind": g.kind, "text": g.text or g.kind, "count": g.count,
         "first": {"file": g.first.file, "line": g.first.line, "text": g.first.text} if g.first else None,
         "hosts": sorted(g.hosts)[:MAX_HOSTS_LISTED], "host_count": len(g.hosts),
         "ranks": ranges(g.ranks), "detail": dict(g.detail)}


def by_value(per_host: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Hosts grouped by identical values: 4,096 identical NIC lists make one entry. Past MAX_VALUES_LISTED
    distinct lists (every host its own address), the rest make one last entry that says how many they are."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for host, values in per_host.items():
        groups.setdefault(tuple(values), []).append(host)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    out = [{"value": list(v), "host_count": len(h), "hosts": sorted(h)[:MAX_HOSTS_PER_VALUE]}
           for v, h in ordered[:MAX_VALUES_LISTED]]
    rest = ordered[MAX_VALUES_LISTED:]
    if rest:
        hosts = sorted(h for _, hs in rest for h in hs)
        out.append({"value": [f"({len(rest)} more lists)"], "host_count": len(hosts),
                    "hosts": hosts[:MAX_HOSTS_PER_VALUE]})
    return out
