"""``bench``'s report: every shape of its JSON (``payload.py``) is built here, from the models.

A measured run (``build_report``), a launch the probe blocked (``blocked_report``), a launch that failed or
hit its deadline (``launch_failed_report``) and a rank whose stage failed (``failure_report``); plus the
progress lines rank 0 prints while measuring.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import Op, format_size, latency_bound
from nccl_doctor.bench.figures import GBPS_DIGITS, NodeFigures, node_figures, node_localisation, op_expected, pct
from nccl_doctor.bench.gpupairs import pair_severity
from nccl_doctor.bench.headline import headline
from nccl_doctor.bench.model import (
    DEFAULT_TIMEOUT_S,
    BenchFailure,
    BenchResult,
    Group,
    Measurement,
    PairResult,
)
from nccl_doctor.bench.pairs import Localisation, pair_expected_gbps
from nccl_doctor.bench.payload import BenchBlocked, BenchLaunchFailed, BenchPayload, BenchStageFailed
from nccl_doctor.cluster.stages import Stage, StageRecord
from nccl_doctor.cluster.torchrun import LOG_ENV, LaunchOutcome
from nccl_doctor.codes import Code
from nccl_doctor.report import Finding, Report, Severity, Table, finding

COMMAND = "bench"
TIME_DIGITS = 2  # microseconds and seconds in the JSON
MAX_NOTE_HOSTS = 3  # hosts named in a note before "and N more"
MAX_EVIDENCE_LINES = 3  # of a failed stage's error
LATENCY_MARK = "latency"  # the "bound" cell of a latency-bound size (``busbw.latency_bound``)
_OUT_OF_MEMORY = ("can't allocate memory", "Cannot allocate memory", "out of memory", "OutOfMemoryError",
                  "bad_alloc")


# The ops whose run passes one buffer as input and output (worker._buffers: all-reduce sums its buffer in
# place); nccl-tests' meaning (src/common.cu): in place is send == recv for all-reduce, send == recv + rank *
# count for all-gather. All-gather and reduce-scatter here use an input and an output of their own.
IN_PLACE_OPS = frozenset({Op.ALL_REDUCE})
ROWS_ALL = 32  # nodes or pairs a table shows all of; past it the slow ones and the slowest others (``shown``)
SLOW_ROWS = 64
SLOWEST_OTHERS = 5
T = TypeVar("T")


def in_place(op: str) -> bool:
    """Whether bench runs ``op`` in place (nccl-tests' in-place column) rather than out of place."""
    return op in IN_PLACE_OPS


def format_or_dash(value: float | None, fmt: str = "{:.3f}") -> str:
    """A table cell: the figure formatted, or "-" when there is none."""
    return "-" if value is None else fmt.format(value)


# --- a measured run ---------------------------------------------------------------------------------
def build_report(result: BenchResult, findings: Iterable[Finding], *, notes: Iterable[str] = ()) -> Report:
    report = Report(command=COMMAND, findings=list(findings), notes=list(notes))
    report.tables += _result_tables(result)
    nodes = node_figures(result)
    loc = node_localisation(result) if result.pairs else None
    if loc is not None:
        report.tables += _pair_tables(result, nodes, loc)
    report.notes += expected_notes(result, nodes)
    report.notes += [f"skipped group {s}" for s in result.skipped]
    report.payload = BenchPayload(
        backend=result.backend, device=result.device.split(":")[0], world_size=result.world_size,
        nnodes=result.nnodes, local_world_size=result.local_world_size,
        elapsed_s=round(result.elapsed_s, TIME_DIGITS), results=result_rows(result),
        nodes=[n.as_dict() for n in nodes],
        pairs=pair_rows(result, loc) if loc else [],
        localisation=localisation_data(result, loc) if loc else {"skipped": localisation_skipped(result)},
        skipped_groups=list(result.skipped),
        gpu_pairs=gpu_pair_data(result),
    )
    if result.gpu_pairs:
        report.tables.append(_gpu_pair_table(result))
    report.summary = _summary(result)
    return report


def _summary(result: BenchResult) -> str:
    summary = _headlines(result) or "nothing measured" + (f": {'; '.join(result.skipped)}" if result.skipped else "")
    if result.pairs and not result.results:
        summary = f"node pairs only: {len(result.pairs)} pair(s) measured; " + summary
    return summary


def _headlines(result: BenchResult) -> str:
    """Each (op, group)'s busbw at its largest bandwidth-bound size (``headline``), where they were measured
    said once when it is the same for all: ``all_gather world 0.979 GB/s; ... busbw at 64 MiB``; else each
    item's own: ``busbw: all_gather world 0.979 GB/s at 64 MiB; ...``."""
    by_table: dict[tuple[str, str], list[Measurement]] = {}
    for m in result.results:
        by_table.setdefault((m.op, m.group), []).append(m)
    heads = [headline(ms) for ms in by_table.values()]
    if not heads:
        return ""
    same = len({h.where for h in heads}) == 1
    items = "; ".join(f"{h.measurement.op} {h.measurement.group} {h.measurement.busbw_gbps:.3f} GB/s"
                      + ("" if same else f" {h.where}") for h in heads)
    return f"{items} busbw {heads[0].where}" if same else f"busbw: {items}"


def _result_tables(result: BenchResult) -> list[Table]:
    """One table per (op, group), nccl-tests' columns."""
    by_table: dict[tuple[str, str], list[Measurement]] = {}
    for m in result.results:
        by_table.setdefault((m.op, m.group), []).append(m)
    tables = []
    for (op, group), ms in by_table.items():
        redop = "sum" if op != Op.ALL_GATHER else "none"
        want = op_expected(result, group, op)  # all-reduce with NVLS on its own yardstick
        tables.append(Table(
            title=f"{op} on {group} ({ms[0].group_size} ranks, {result.backend}, "
                  f"{'in-place' if in_place(op) else 'out-of-place'})",
            columns=("size (B)", "count", "type", "redop", "iters", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                     "% of expected", "#wrong", "bound"),
            rows=tuple((str(m.size_bytes), str(m.count), "float", redop, str(m.iters), f"{m.time_us:.1f}",
                        f"{m.algbw_gbps:.3f}", f"{m.busbw_gbps:.3f}",
                        format_or_dash(pct(m.busbw_gbps, want), "{:.1f}"), str(m.wrong),
                        LATENCY_MARK if latency_bound(m.size_bytes) else "") for m in ms),
            caption=f"expected busbw {want:.3f} GB/s (see the notes for how)" if want else None))
    return tables


def shown(items: Sequence[T], slow: Callable[[T], bool], figure: Callable[[T], float], *, most_slow: int = SLOW_ROWS,
          others: int = SLOWEST_OTHERS) -> list[T]:
    """The items a table shows, in their order: all of them up to ``ROWS_ALL``; past it the slow ones (at
    most ``most_slow``) and the ``others`` slowest others, so 1,024 nodes stay a screen. Every item is still
    in the JSON's data (``nodes``, ``pairs``)."""
    if len(items) <= ROWS_ALL:
        return list(items)
    bad = [i for i, item in enumerate(items) if slow(item)][:most_slow]
    rest = sorted((i for i, item in enumerate(items) if not slow(item)), key=lambda i: figure(items[i]))
    return [items[i] for i in sorted({*bad, *rest[:others]})]


def _left_out(kept: int, total: int, what: str) -> str | None:
    if kept == total:
        return None
    return (f"{kept} of {total} {what} shown (the slow ones, then the slowest others); every one is in the JSON "
            "report (--json-out)")


def _pair_tables(result: BenchResult, nodes: list[NodeFigures], loc: Localisation) -> list[Table]:
    """Each node's inter-node figure, and every node pair measured (on a large cluster, the slow ones and the
    slowest others: ``shown``)."""
    p0 = result.pairs[0]
    host = [n.host for n in result.nodes]
    node_list = shown(nodes, lambda r: r.slow, lambda r: r.inter_node_busbw_gbps or 0.0)
    per_node = Table(
        title=f"inter-node figure per node (best of its node pairs: ping-pong of {format_size(p0.size_bytes)}, "
              "GB/s one way)",
        columns=("host", "iface", "expected (GB/s)", "busbw (GB/s)", "% of expected", "peers' median",
                 "pairs with", "slow"),
        rows=tuple((r.host, r.iface or "-", format_or_dash(r.expected_gbps),
                    format_or_dash(r.inter_node_busbw_gbps), format_or_dash(r.pct_of_expected, "{:.1f}"),
                    format_or_dash(r.peer_median_gbps), ", ".join(r.pairs), "yes" if r.slow else "")
                   for r in node_list),
        caption=_left_out(len(node_list), len(nodes), "nodes"))
    rails, slow = result.pair_rails, set(loc.slow_links())  # once each: a pass over the pairs / links
    pair_list = shown(result.pairs, lambda p: p.link in slow, lambda p: p.busbw_gbps)
    per_pair = Table(
        title=f"node pairs ({p0.iters} timed ping-pongs each; rounds of disjoint pairs, then suspects against "
              "known-good nodes" + (f"; {rails} rails at once, the figure is the slowest's)" if rails > 1 else ")"),
        columns=("round", "pair", "busbw (GB/s)", "slowest rail", "slow"),
        rows=tuple((str(p.round), f"{host[p.a]}<->{host[p.b]}", f"{p.busbw_gbps:.3f}",
                    str(min(p.rails, key=lambda r: r.busbw_gbps).rail) if p.rails else "-",
                    "yes" if p.link in slow else "") for p in pair_list),
        caption=_left_out(len(pair_list), len(result.pairs), "pairs"))
    if rails < 2:
        return [per_node, per_pair]
    rail_pairs = shown(result.pairs, lambda p: p.link in slow, lambda p: p.busbw_gbps,
                       most_slow=max(1, SLOW_ROWS // rails), others=1)  # a row per rail: fewer pairs
    per_rail = Table(
        title="rails (local rank i of one node with local rank i of the other, every rail at once; GB/s one way)",
        columns=("round", "pair", "rail", "ranks", "NICs", "busbw (GB/s)", "% of expected"),
        rows=tuple((str(p.round), f"{host[p.a]}<->{host[p.b]}", str(r.rail), f"{r.ranks[0]}<->{r.ranks[1]}",
                    " <-> ".join(n or "?" for n in r.nics) if any(r.nics) else "-", f"{r.busbw_gbps:.3f}",
                    format_or_dash(pct(r.busbw_gbps, _rail_want(result, p, rails)), "{:.1f}"))
                   for p in rail_pairs for r in p.rails),
        caption=_left_out(len(rail_pairs), len(result.pairs), "pairs' rails"))
    return [per_node, per_pair, per_rail]


def _rail_want(result: BenchResult, p: PairResult, rails: int) -> float | None:
    """One rail's yardstick on this pair, ``rails`` (``result.pair_rails``) at once: the lower of both ends'
    (``pairs.pair_expected_gbps``)."""
    known = [y for x in (p.a, p.b) if (y := pair_expected_gbps(result.nodes[x], rails))]
    return min(known) if known else None


def result_rows(result: BenchResult) -> list[dict[str, Any]]:
    want = {(g, op): op_expected(result, g, op) for g, op in {(m.group, m.op) for m in result.results}}
    return [{"op": m.op, "group": m.group, "group_size": m.group_size, "size_bytes": m.size_bytes,
             "count": m.count, "dtype": m.dtype, "iters": m.iters, "time_us": round(m.time_us, TIME_DIGITS),
             "algbw_gbps": round(m.algbw_gbps, GBPS_DIGITS), "busbw_gbps": round(m.busbw_gbps, GBPS_DIGITS),
             "wrong": m.wrong, "in_place": m.in_place or in_place(m.op),
             "expected_gbps": round(w, GBPS_DIGITS) if (w := want[(m.group, m.op)]) else None,
             "pct_of_expected": pct(m.busbw_gbps, w),
             "time_us_mean": round(t, TIME_DIGITS) if (t := m.time_us_mean) is not None else None,
             "rank_time_us": [round(x, TIME_DIGITS) for x in m.rank_time_us],
             "latency_bound": latency_bound(m.size_bytes)} for m in result.results]


def node_rows(result: BenchResult) -> list[dict[str, Any]]:
    """The ``nodes`` rows of the JSON (``figures.node_figures``)."""
    return [n.as_dict() for n in node_figures(result)]


def pair_rows(result: BenchResult, loc: Localisation) -> list[dict[str, Any]]:
    rails, slow = result.pair_rails, set(loc.slow_links())  # once each: per pair, pairs x pairs at scale
    return [{"a": result.nodes[p.a].host, "b": result.nodes[p.b].host, "round": p.round,
             "size_bytes": p.size_bytes, "iters": p.iters, "time_us": round(p.time_us, TIME_DIGITS),
             "busbw_gbps": round(p.busbw_gbps, GBPS_DIGITS), "wrong": p.wrong, "slow": p.link in slow,
             "rails": [{"rail": r.rail, "ranks": list(r.ranks), "nics": list(r.nics),
                        "iters": r.iters, "time_us": round(r.time_us, TIME_DIGITS),
                        "busbw_gbps": round(r.busbw_gbps, GBPS_DIGITS),
                        "wrong": r.wrong, "pct_of_expected": pct(r.busbw_gbps, _rail_want(result, p, rails))}
                       for r in p.rails]}
            for p in result.pairs]


def gpu_pair_data(result: BenchResult) -> dict[str, Any]:
    """The GPU-pair pass (``gpupairs.py``): every pair's figure and NVML's NVLink state, or why it did not run."""
    if not result.gpu_pairs:
        why = ("NCCL only (the ranks ran Gloo)" if result.backend != Backend.NCCL
               else "needs 2+ ranks on every node, the same count everywhere")
        return {"skipped": why}
    host = [n.host for n in result.nodes]
    return {"pairs": [{"host": host[p.node], "round": p.round, "local": list(p.local), "ranks": list(p.ranks),
                       "size_bytes": p.size_bytes, "iters": p.iters, "time_us": round(p.time_us, TIME_DIGITS),
                       "busbw_gbps": round(p.busbw_gbps, GBPS_DIGITS), "wrong": p.wrong} for p in result.gpu_pairs],
            "nvlinks": [{"host": host[s.node], "gpu": s.gpu, "up": s.up, "links": s.links} for s in result.nvlinks],
            "nvlinks_unread": result.nvlinks_unread}


def _gpu_pair_table(result: BenchResult) -> Table:
    """Each node's GPU pairs (the slowest first past ``ROWS_ALL``: a 1,024-node run has 8,192 pairs)."""
    best: dict[int, float] = {}
    for p in result.gpu_pairs:
        best[p.node] = max(best.get(p.node, 0.0), p.busbw_gbps)
    pairs = shown(sorted(result.gpu_pairs, key=lambda p: (p.node, p.round, p.local)),
                  lambda p: pair_severity(p.busbw_gbps, best[p.node], None) is not None, lambda p: p.busbw_gbps)
    p0 = result.gpu_pairs[0]
    return Table(
        title=f"GPU pairs inside each node ({p0.iters} timed ping-pongs of {format_size(p0.size_bytes)}, GB/s one way)",
        columns=("host", "round", "GPUs (local ranks)", "ranks", "busbw (GB/s)", "#wrong"),
        rows=tuple((result.nodes[p.node].host, str(p.round), f"{p.local[0]}<->{p.local[1]}",
                    f"{p.ranks[0]}<->{p.ranks[1]}", f"{p.busbw_gbps:.3f}", str(p.wrong)) for p in pairs),
        caption=_left_out(len(pairs), len(result.gpu_pairs), "GPU pairs"))


def localisation_skipped(result: BenchResult) -> str:
    """Why there is no node-pair pass: ``localisation`` is then ``{"skipped": <this>}``."""
    if result.nnodes < 2:
        return "one node: no inter-node link to test"
    return "the node-pair pass was not run (--no-pairs)"


def localisation_data(result: BenchResult, loc: Localisation) -> dict[str, Any]:
    """The pair pass in brief (``preflight`` reports it as its ``localisation``)."""
    host = [n.host for n in result.nodes]
    return {"rounds": [[[host[a], host[b]] for a, b in r] for r in loc.rounds],
            "bad_nodes": [host[b] for b in loc.bad()],
            "slow_links": [[host[a], host[b]] for a, b in loc.slow_links()],
            "floor_gbps": round(loc.floor_gbps, GBPS_DIGITS),
            "predicted_s": ([round(p, TIME_DIGITS) for p in result.pairs_predicted_s] if result.pairs_predicted_s
                            else None),
            "seconds": round(result.pairs_seconds, TIME_DIGITS)}


def expected_notes(result: BenchResult, nodes: Sequence[NodeFigures]) -> list[str]:
    """Where each yardstick comes from, once per distinct basis; intra-node figures are estimates."""
    out = []
    for what, key in (("inter-node expected", "expected_basis"), ("intra-node expected", "intra_expected_basis")):
        seen: dict[str, list[str]] = {}
        for r in nodes:
            basis = getattr(r, key)
            if basis:
                seen.setdefault(basis, []).append(r.host)
        out += [f"{what} on {_hosts(hosts)}: {basis}" for basis, hosts in seen.items()]
    nominal = [n.host for n in result.nodes if n.nominal_link]
    if nominal:
        out.append(f"inter-node yardstick on {_hosts(nominal)} unknown: a virtual interface (veth, bridge...) has a "
                   "nominal sysfs speed, not a line rate, so the figures are judged against each other and the "
                   "slow-link floor only (no % of expected, no ND305 above-line-rate check)")
    small = sorted({m.size_bytes for m in result.results if latency_bound(m.size_bytes)})
    if small:
        out.append(f"sizes up to {format_size(small[-1])} are latency-bound ({LATENCY_MARK} in the bound column): "
                   "PyTorch's per-call overhead weighs on them, and time (us) is the slowest rank's where nccl-tests "
                   "averages over ranks (time_us_mean in the JSON), so their busbw reads below nccl-tests'; judge "
                   "the links by the large sizes")
    if result.pairs and result.pair_rails > 1:
        out.append(f"node pairs: {result.pair_rails} rails per pair at once (local rank i with local rank i); a "
                   "pair's figure is its slowest rail's, expected per rail: one NIC, or the rails' share of links "
                   "they share")
    if result.nnodes > 1 and any(g.group == Group.INTER for g in result.results):
        out.append(f"inter group expected: the node's inter-node links shared by the {result.local_world_size} "
                   "inter groups that run at once")
    return out


def _hosts(hosts: list[str]) -> str:
    """A few hosts in prose (notes name the nodes sharing a yardstick: a handful, in node order)."""
    more = len(hosts) - MAX_NOTE_HOSTS
    return ", ".join(hosts[:MAX_NOTE_HOSTS]) + (f" and {more} more" if more > 0 else "")


# --- a run that stopped before measuring -------------------------------------------------------------
def _stopped(why: str) -> dict[str, Any]:
    """``localisation`` of a run that measured nothing: never null."""
    return {"skipped": why}


def blocked_report(findings: list[Finding], backend: Backend) -> Report:
    """This node's probe found that the backend's interface settings cannot work: nothing launched."""
    report = Report(command=COMMAND, findings=findings)
    report.summary = f"not launched: this node's {backend.upper()} interface settings cannot work"
    report.payload = BenchBlocked(stage=Stage.PROBE, backend=backend,
                                  localisation=_stopped("not launched: the probe failed"))
    return report


def launch_failed_report(outcome: LaunchOutcome, notes: Iterable[str]) -> Report:
    """ND309 (the deadline) or ND311 (the workers failed), naming the stage the run stopped in."""
    report = Report(command=COMMAND)
    code, name = ((Code.DEADLINE_EXPIRED, "the run hit its deadline") if outcome.timed_out
                  else (Code.LAUNCH_FAILED, "the workers failed"))
    stage = outcome.stuck_stage()
    report.add(finding(code, Severity.FAIL, outcome.describe(), stage_fix(stage), host=outcome.host,
                       evidence=[f"rank {s.rank} on {s.host}: {s.stage}" for s in outcome.stages]))
    report.summary = f"{name} in stage {stage}"
    report.notes.extend(notes)
    report.payload = BenchLaunchFailed(stage=stage, timed_out=outcome.timed_out, returncode=outcome.returncode,
                                       elapsed_s=round(outcome.elapsed_s, TIME_DIGITS),
                                       localisation=_stopped(f"the run stopped in stage {stage}"),
                                       worker_log=outcome.log_path)
    if outcome.log_path:
        report.notes.append(f"torchrun's and the workers' stderr on {outcome.host}: {outcome.log_path}")
    return report


def _laggards(failure: BenchFailure) -> str:
    """Who held the stage up: the ranks that never reached it, else those that entered and never left."""
    def who(ranks: list[int], hosts: list[str]) -> str:
        return ", ".join(f"rank {r} ({h})" for r, h in zip(ranks, hosts, strict=False))

    if failure.missing:
        return f"ranks that never reached it: {who(failure.missing, failure.hosts)}"
    if failure.never_left:
        stuck = who(failure.never_left, failure.never_left_hosts)
        return f"every rank reached it; ranks that entered it and never left: {stuck}"
    return "every rank reached it (a peer failed inside it)"


def overdue_report(record: StageRecord, outcome: LaunchOutcome, notes: Iterable[str]) -> Report:
    """ND310 from the launcher, for a stage a rank's watchdog ended (``bench/watchdog.py``): the rank recorded
    the stage and who held it up (``StageRecord.overdue``) and exited; the report is that rank's view, with the
    other local ranks' stages as evidence."""
    late = record.overdue
    if late is None:
        raise ValueError(f"rank {record.rank}'s stage record holds no overdue stage")
    failure = BenchFailure(record.stage, list(late.missing), list(late.missing_hosts), record.error or "",
                           never_left=list(late.never_left), never_left_hosts=list(late.never_left_hosts))
    env = {"RANK": str(record.rank), **({LOG_ENV: outcome.log_path} if outcome.log_path else {})}
    return failure_report(failure, record.host, env, notes, how=f"outlived --collective-timeout ({late.timeout_s:g} s)",
                          extra_evidence=[f"rank {s.rank} on {s.host}: {s.stage}" for s in outcome.stages])


def failure_report(failure: BenchFailure, host: str, env: Mapping[str, str], notes: Iterable[str], *,
                   how: str = "failed", extra_evidence: Iterable[str] = ()) -> Report:
    """ND310 for a stage that failed or hung (``how``); a buffer that does not fit in memory is the sizes asked
    for, not the cluster: then the run could not run (exit 2) and the fix is smaller ``--sizes``."""
    report = Report(command=COMMAND, summary=f"stage {failure.stage} {how}")
    rank = int(env.get("RANK", 0))
    evidence = [line for line in failure.error.splitlines()[:MAX_EVIDENCE_LINES] if line.strip()]
    if any(word in failure.error for word in _OUT_OF_MEMORY):
        report.could_not_run = f"the buffers of stage {failure.stage} do not fit in memory"
        report.summary += " (out of memory; could not run, exit 2)"
        report.add(finding(Code.COLLECTIVE_FAILED, Severity.FAIL,
                           f"stage {failure.stage}: the buffers do not fit in memory on rank {env.get('RANK')} "
                           f"({host})",
                           "rerun with smaller --sizes: each rank holds an input and an output buffer of up to the "
                           "largest size (on GPU, `nvidia-smi` shows what else holds memory)",
                           evidence=evidence, host=host, rank=rank))
    else:
        msg = f"stage {failure.stage} {how} on rank {env.get('RANK')} ({host}); {_laggards(failure)}"
        report.add(finding(Code.COLLECTIVE_FAILED, Severity.FAIL, msg,
                           stage_fix(failure.stage.split()[0] if failure.stage else ""),
                           evidence=[*evidence, *extra_evidence], host=host, rank=rank))
    report.payload = BenchStageFailed(stage=failure.stage, missing_ranks=failure.missing, missing_hosts=failure.hosts,
                                      never_left_ranks=failure.never_left, never_left_hosts=failure.never_left_hosts,
                                      worker_log=env.get(LOG_ENV),
                                      localisation=_stopped(f"the run stopped in stage {failure.stage}"))
    report.notes.extend(notes)
    if env.get(LOG_ENV):
        report.notes.append(f"torchrun's and the workers' stderr on {host}: {env[LOG_ENV]}")
    return report


def stage_fix(stage: str) -> str:
    """What to do about a run that stopped in ``stage`` (its first word for a measurement)."""
    if stage == Stage.START_UP:
        return (f"rerun with a longer --timeout (default {DEFAULT_TIMEOUT_S:.0f}): start-up alone (torchrun, "
                "importing torch on every rank) took longer than the deadline")
    if stage == Stage.RENDEZVOUS:
        return ("start nccl-doctor on every node (srun --ntasks-per-node=1 nccl-doctor bench), with the same "
                "--rdzv-endpoint, and check that the rendezvous host's port is reachable from every node")
    if stage in (Stage.INIT, Stage.TOPOLOGY, Stage.GROUPS):
        return ("read the other nodes' reports first: a rank that failed at start-up there (ND313, CUDA unusable) "
                "leaves these waiting; otherwise check that every node reaches the others on the interface in "
                "GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (nccl-doctor probe), and that firewalls allow the "
                "ephemeral ports")
    return ("rerun with NCCL_DEBUG=INFO and read the stuck ranks' hosts first (nccl-doctor parse); "
            "drain a host that hangs again")


# --- progress ----------------------------------------------------------------------------------------
class ProgressPrinter:
    """A rich progress bar on a terminal; in a job log, one line per finished op and group."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.bar: Any = None
        if hasattr(stream, "isatty") and stream.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(file=stream), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(COMMAND, total=None)

    def __call__(self, done: int, total: int, label: str, item: Measurement | PairResult | None) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, description=label)
            return
        busbw = getattr(item, "busbw_gbps", 0.0)
        print(f"nccl-doctor bench: [{done}/{total}] {label}: busbw {busbw:.3f} GB/s" if item is not None
              else f"nccl-doctor bench: [{done}/{total}] {label} done", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
