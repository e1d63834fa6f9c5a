"""``nccl-doctor bench``: all-gather / reduce-scatter / all-reduce bandwidth within and across nodes.

Outside a launcher this process only plans and watches: it starts itself on every local rank
through torch's elastic launcher (``launch.py``) and returns the verdict the ranks agreed on, or a
FAIL naming the stage that hung. Inside a launcher (RANK/WORLD_SIZE set) it is a rank: it measures
(``bench_worker.py``), rank 0 judges and renders, and every rank exits with rank 0's code.
torch is imported only on the worker path.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path

from nccl_doctor.bench.busbw import OPS, format_size, parse_size, parse_sizes
from nccl_doctor.node import majority_first
from nccl_doctor.errors import InputError
from nccl_doctor.outcome import Outcome
from nccl_doctor.cluster import (LOG_ENV, SlurmInfo, StageFile, check_rdzv_port, check_seconds, in_worker, launch_notes,
                     parse_endpoint, plan_launch, port_from_env, rdzv_port_origin, self_launch, slurm_launch_config)
from nccl_doctor.bench.pairs import Localisation, floor_gbps, pair_expected_gbps
from nccl_doctor.report import Finding, Report, Severity, Table, Where, exit_code, hosts_text, plural

GROUPS = ("world", "intra", "inter")
DEFAULT_OPS = "all_gather,reduce_scatter,all_reduce"
DEFAULT_GROUPS = "world,intra,inter"  # intra and inter only where they differ from world
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_COLLECTIVE_TIMEOUT_S = 120.0
# below these a deadline only measures how fast torch starts: the whole run includes torchrun's and each
# rank's start-up (3-5 s on an idle 2-core box, more on a loaded GPU node); init_process_group waits for
# every rank of every node to arrive, which the ranks' own imports can spread by seconds
MIN_TIMEOUT_S = 10.0
MIN_COLLECTIVE_TIMEOUT_S = 5.0
_WHOLE_RUN = "the whole run, start-up of torchrun and of every rank included"
MIN_SECONDS = {"timeout": (MIN_TIMEOUT_S, _WHOLE_RUN), "deadline": (MIN_TIMEOUT_S, _WHOLE_RUN),
               "collective_timeout": (MIN_COLLECTIVE_TIMEOUT_S, "init_process_group waits for every rank to start")}
OP_ALIASES = {"ag": "all_gather", "rs": "reduce_scatter", "ar": "all_reduce",
              "all-gather": "all_gather", "reduce-scatter": "reduce_scatter", "all-reduce": "all_reduce"}
DEFAULT_SIZES = {"cuda": "1M:1G:4", "cpu": "64K:64M:4"}
ITER_BUDGET = {"cuda": 8 << 30, "cpu": 64 << 20}
PAIR_SIZE = {"cuda": 256 << 20, "cpu": 16 << 20}

# judging thresholds (why: README "bench" section; slow nodes and links: localize.py)
ABOVE_LINK = 1.10  # busbw above 110% of the line rate cannot be a per-link figure
MIN_ITERS = 5
BIG_ENOUGH = {"nccl": 256 << 20, "gloo": 16 << 20}
MISFIT_SKIP = "does not fit the HSDP mesh"  # in a skipped group's reason (bench_worker.build_groups)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("launch (ignored inside torchrun/srun workers that already have RANK)")
    g.add_argument("--nproc-per-node", type=int, metavar="N",
                   help="ranks on this node (default: visible GPUs, else SLURM_GPUS_ON_NODE, else 2 CPU ranks; 2 with --cpu)")
    g.add_argument("--nnodes", type=int, metavar="N", help="nodes (default: SLURM_NNODES under Slurm, else 1)")
    g.add_argument("--rdzv-endpoint", metavar="HOST:PORT",
                   help="rendezvous host:port, the same on every node (default under Slurm: first host of the "
                        "node list, port MASTER_PORT, else 29500 + job id %% 1000; on one node: MASTER_PORT, else "
                        "a free port)")
    g.add_argument("--rdzv-id", metavar="ID",
                   help="rendezvous id (default under Slurm: slurm-<job id>.<step id>, else nccl-doctor)")
    t = p.add_argument_group("deadlines (the same options as preflight)")
    t.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="wall-clock limit of the whole run: past it every rank is killed and the report names "
                        f"the stage that hung (default: {DEFAULT_TIMEOUT_S:.0f})")
    t.add_argument("--collective-timeout", type=float, default=DEFAULT_COLLECTIVE_TIMEOUT_S, metavar="SECONDS",
                   help="limit for init_process_group and for each collective (default: "
                        f"{DEFAULT_COLLECTIVE_TIMEOUT_S:.0f})")
    t.add_argument("--deadline", type=float, metavar="SECONDS", help=argparse.SUPPRESS)  # old name of --timeout
    m = p.add_argument_group("measurement")
    m.add_argument("--ops", metavar="LIST",
                   help=f"comma list of all_gather, reduce_scatter, all_reduce (or ag, rs, ar) (default: {DEFAULT_OPS})")
    m.add_argument("--groups", metavar="LIST",
                   help="comma list of world, intra (the ranks of one node), inter (one rank per node) (default: "
                        f"{DEFAULT_GROUPS}, intra and inter only where they differ from world; a group named here "
                        "that cannot run warns with ND001)")
    m.add_argument("--sizes", help="comma list (64K,1M) or MIN:MAX[:FACTOR] of full-buffer sizes "
                                   "(default 1M:1G:4 on GPU, 64K:64M:4 on CPU)")
    m.add_argument("--iters", type=int, metavar="N", help="timed iterations per size (default: by size, 5-50)")
    m.add_argument("--warmup", type=int, default=1, metavar="N", help="untimed iterations per size (default: 1)")
    m.add_argument("--pair-size", metavar="SIZE", help="node-pair test size (default 256M on GPU, 16M on CPU)")
    m.add_argument("--no-pairs", action="store_true", help="skip the per-node pair pass")
    m.add_argument("--cpu", action="store_true", help="use Gloo on CPU even when GPUs are visible")


# --- argument checks (both sides) -------------------------------------------------------------------
def parse_ops(text: str) -> tuple[str, ...]:
    ops = []
    for raw in (t.strip().lower() for t in text.split(",") if t.strip()):
        op = OP_ALIASES.get(raw, raw)
        if op not in OPS:
            raise InputError(f"--ops: unknown op {raw!r}; choose from {', '.join(OPS)} (or ag, rs, ar)")
        if op not in ops:
            ops.append(op)
    if not ops:
        raise InputError("--ops: empty")
    return tuple(ops)


def parse_groups(text: str) -> tuple[str, ...]:
    groups = tuple(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
    bad = [g for g in groups if g not in GROUPS]
    if bad or not groups:
        raise InputError(f"--groups: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(GROUPS)}")
    return groups


def check_args(args: argparse.Namespace) -> None:
    """Fail fast, before anything is launched, naming the option and the value at fault."""
    for flag, value in (("--ops", args.ops), ("--groups", args.groups), ("--sizes", args.sizes),
                        ("--pair-size", args.pair_size)):
        if value is not None and not value.strip():  # (else `args.ops or DEFAULT_OPS` runs the defaults)
            raise InputError(f"{flag}: empty")
    parse_ops(args.ops or DEFAULT_OPS)
    parse_groups(args.groups or DEFAULT_GROUPS)
    for flag, text, parse in (("--sizes", args.sizes, parse_sizes), ("--pair-size", args.pair_size, parse_size)):
        try:
            if text is not None:
                parse(text)
        except ValueError as exc:
            raise InputError(f"{flag} {text!r}: {exc}") from None
    for name in ("iters", "nproc_per_node", "nnodes"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if args.warmup < 0:
        raise InputError(f"--warmup must be >= 0, got {args.warmup}")
    for name in ("timeout", "collective_timeout", "deadline"):
        v = getattr(args, name, None)
        if v is not None:
            low, why = MIN_SECONDS[name]
            check_seconds(v, f"--{name.replace('_', '-')}", minimum=low, why=why)
    if getattr(args, "deadline", None) is not None:  # the old name wins: it is what the user typed
        args.timeout = args.deadline
    if args.rdzv_endpoint is not None:
        parse_endpoint(args.rdzv_endpoint)  # syntax and port here; plan_launch resolves the host
    if not in_worker(os.environ):  # the launcher reads MASTER_PORT (its rendezvous port); the ranks get torchrun's
        port_from_env(os.environ)


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The workers' command line: the measurement and output options, never the launch ones."""
    out = ["bench", "--warmup", str(args.warmup), "--timeout", str(args.timeout),
           "--collective-timeout", str(args.collective_timeout), "--format", args.format]
    for flag, value in (("--ops", args.ops), ("--groups", args.groups), ("--sizes", args.sizes),
                        ("--iters", args.iters), ("--pair-size", args.pair_size)):
        if value is not None:
            out += [flag, str(value)]
    for flag, path in (("--json-out", args.json_out), ("--junit-out", args.junit_out)):
        if path is not None:
            out += [flag, str(Path(path).resolve())]
    out += [f for f, on in (("--no-pairs", args.no_pairs), ("--cpu", args.cpu), ("--strict", args.strict)) if on]
    return out


# --- entry -----------------------------------------------------------------------------------------
def inputs(args: argparse.Namespace) -> tuple[Path, ...]:
    return ()


def run(args: argparse.Namespace) -> Outcome:
    check_args(args)
    if in_worker(os.environ):
        return run_worker(args, os.environ)
    blocked = launch_blockers(args, os.environ)
    if blocked is not None:
        return Outcome.of(blocked)
    cfg = plan_launch(nnodes=args.nnodes, nproc_per_node=args.nproc_per_node, rdzv_endpoint=args.rdzv_endpoint,
                      rdzv_id=args.rdzv_id, join_timeout_s=args.timeout + 60,  # our deadline fires first
                      deadline_s=args.timeout, env=os.environ, cpu=args.cpu)
    check_rdzv_port(cfg, rdzv_port_origin(args.rdzv_endpoint, os.environ, cfg.nnodes))
    outcome = self_launch(worker_argv(args), cfg)
    code = outcome.final_code()
    if code is not None:
        return Outcome.exit(code)
    report = Report(command="bench")
    code, name = ("ND309", "the run hit its deadline") if outcome.timed_out else ("ND311", "the workers failed")
    stage = outcome.stuck_stage()
    report.add(Finding(
        code=code, severity=Severity.FAIL, message=outcome.describe(), where=Where(host=outcome.host),
        fix=_stage_fix(stage), evidence=tuple(f"rank {s.rank} on {s.host}: {s.stage}" for s in outcome.stages)))
    report.summary = f"{name} in stage {stage}"
    report.notes.extend(cfg.notes)
    report.data = {"stage": stage, "timed_out": outcome.timed_out, "returncode": outcome.returncode,
                   "elapsed_s": round(outcome.elapsed_s, 2), "results": [], "nodes": [],
                   "localisation": {"skipped": f"the run stopped in stage {stage}"}, "worker_log": outcome.log_path}
    if outcome.log_path:
        report.notes.append(f"torchrun's and the workers' stderr on {outcome.host}: {outcome.log_path}")
    return Outcome.of(report)


# probe findings that make a launch pointless, by the backend the ranks will use
BLOCKERS = {"gloo": {"ND216"}, "nccl": {"ND202", "ND222", "ND224"}}


def launch_blockers(args: argparse.Namespace, env: Mapping[str, str], root: Path = Path("/")) -> Report | None:
    """Probe this node first (~30 ms): an interface variable that matches nothing would only surface
    minutes later as an init timeout on every rank. Returns the report to show instead of launching."""
    from nccl_doctor.cluster import visible_gpus
    from nccl_doctor.node import check, probe_node

    backend = "nccl" if visible_gpus(env) and not args.cpu else "gloo"
    findings = [f for f in check(probe_node(root, env)) if f.code in BLOCKERS[backend]
                and f.severity is Severity.FAIL]
    if not findings:
        return None
    report = Report(command="bench", findings=findings)
    report.summary = f"not launched: this node's {backend.upper()} interface settings cannot work"
    report.data = {"stage": "probe", "backend": backend, "results": [], "nodes": [],
                   "localisation": {"skipped": "not launched: the probe failed"}}
    return report


def _stage_fix(stage: str) -> str:
    if stage == "start-up":
        return (f"rerun with a longer --timeout (default {DEFAULT_TIMEOUT_S:.0f}): start-up alone (torchrun, "
                "importing torch on every rank) took longer than the deadline")
    if stage == "rendezvous":
        return ("start nccl-doctor on every node (srun --ntasks-per-node=1 nccl-doctor bench), with the same "
                "--rdzv-endpoint, and check that the rendezvous host's port is reachable from every node")
    if stage in ("init", "topology", "groups"):
        return ("check that every node reaches the others on the interface in GLOO_SOCKET_IFNAME / "
                "NCCL_SOCKET_IFNAME (nccl-doctor probe), and that firewalls allow the ephemeral ports")
    return ("rerun with NCCL_DEBUG=INFO and read the stuck ranks' hosts first (nccl-doctor parse); "
            "drain a host that hangs again")


def run_worker(args: argparse.Namespace, env: Mapping[str, str]) -> Outcome:
    """One rank. Rank 0 renders the report; every rank returns the shared exit code (0 under our
    launcher, which reads the code from the stage files). 2 when nothing at all was measured."""
    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw

    rank = int(env["RANK"])
    host = socket.gethostname()
    stage_file = StageFile(rank, host, env)
    stage_file.set("init")
    try:
        device = bw.init_from_env(timeout_s=args.collective_timeout, env=env, force_cpu=args.cpu)
    except (RuntimeError, ValueError) as exc:
        return _finish(args, rank, stage_file, _failure_report(
            bw.BenchFailure("init", [], [], str(exc)), host, env), shared=False)
    kind = "cuda" if device.startswith("cuda") else "cpu"
    cfg = bw.BenchConfig(
        ops=parse_ops(args.ops or DEFAULT_OPS), groups=parse_groups(args.groups or DEFAULT_GROUPS),
        sizes=tuple(parse_sizes(args.sizes or DEFAULT_SIZES[kind])), iters=args.iters, warmup=args.warmup,
        budget_bytes=ITER_BUDGET[kind], pairs=not args.no_pairs,
        pair_size=parse_size(args.pair_size) if args.pair_size else PAIR_SIZE[kind],
        timeout_s=args.collective_timeout)
    progress = ProgressPrinter(sys.stderr) if rank == 0 else None
    try:
        result = bw.run_bench(cfg, env=env, progress=progress, stages=bw.Stages(rank, host, env))
    except bw.BenchFailure as failure:
        return _finish(args, rank, stage_file, _failure_report(failure, host, env), shared=False)
    finally:
        if progress:
            progress.close()
    findings = judge(result, slurm=slurm_launch_config(env)) + coverage(result, asked=args.groups is not None)
    report = build_report(result, findings, notes=launch_notes(env))
    if measured_nothing(result):  # the verdict line must not read as a warning one can ship with
        report.could_not_run = "nothing was measured"
        report.summary += "; could not run (exit 2)"
    code = bw.share_code(exit_code(report, strict=args.strict), device)
    dist.destroy_process_group()
    return _finish(args, rank, stage_file, report, code=code)


def _finish(args: argparse.Namespace, rank: int, stage_file: StageFile, report: Report, *,
            code: int | None = None, shared: bool = True) -> Outcome:
    """Rank 0's report goes to the CLI; every rank ends with its exit code. Under our launcher the code goes
    to the stage file, and it is rank 0's *final* code: if rendering or writing fails, the recorded code
    says so (2), never the 0 of a verdict that nobody received."""
    verdict = exit_code(report, strict=args.strict) if code is None else code

    def close(rendered: int) -> int:
        final = max(verdict, rendered)
        if not stage_file.managed:
            return final
        stage_file.set("done" if shared else "failed", code=final)
        # A shared verdict: exit 0, the launcher returns the recorded code and torchrun stays quiet.
        # A failure: exit non-zero so torchrun stops the ranks still waiting on the broken collective.
        return 0 if shared else max(final, 1)

    if rank == 0:
        return Outcome.of(report, after_render=close)
    return Outcome.exit(close(verdict))


_OUT_OF_MEMORY = ("can't allocate memory", "Cannot allocate memory", "out of memory", "OutOfMemoryError",
                  "bad_alloc")


def _failure_report(failure, host: str, env: Mapping[str, str]) -> Report:
    """ND310 for a stage that failed or hung; a buffer that does not fit in memory is the sizes asked
    for, not the cluster: then the run could not run (exit 2) and the fix is smaller ``--sizes``."""
    report = Report(command="bench", summary=f"stage {failure.stage} failed")
    where = Where(host=host, rank=int(env.get("RANK", 0)))
    evidence = tuple(line for line in failure.error.splitlines()[:3] if line.strip())
    if any(word in failure.error for word in _OUT_OF_MEMORY):
        report.could_not_run = f"the buffers of stage {failure.stage} do not fit in memory"
        report.summary += " (out of memory; could not run, exit 2)"
        report.add(Finding(code="ND310", severity=Severity.FAIL, where=where, evidence=evidence,
                           message=f"stage {failure.stage}: the buffers do not fit in memory on rank "
                                   f"{env.get('RANK')} ({host})",
                           fix="rerun with smaller --sizes: each rank holds an input and an output buffer of up to "
                               "the largest size (on GPU, `nvidia-smi` shows what else holds memory)"))
    else:
        who = ", ".join(f"rank {r} ({h})" for r, h in zip(failure.missing, failure.hosts))
        msg = f"stage {failure.stage} failed on rank {env.get('RANK')} ({host})"
        msg += f"; ranks that never reached it: {who}" if who else "; every rank reached it (a peer failed inside it)"
        report.add(Finding(code="ND310", severity=Severity.FAIL, message=msg, where=where, evidence=evidence,
                           fix=_stage_fix(failure.stage.split()[0] if failure.stage else "")))
    report.data = {"stage": failure.stage, "missing_ranks": failure.missing, "missing_hosts": failure.hosts,
                   "results": [], "nodes": [], "worker_log": env.get(LOG_ENV),
                   "localisation": {"skipped": f"the run stopped in stage {failure.stage}"}}
    report.notes.extend(launch_notes(env))
    if env.get(LOG_ENV):
        report.notes.append(f"torchrun's and the workers' stderr on {host}: {env[LOG_ENV]}")
    return report


# --- progress --------------------------------------------------------------------------------------
class ProgressPrinter:
    """A rich progress bar on a terminal; in a job log, one line per finished op and group."""

    def __init__(self, stream):
        self.stream = stream
        self.bar = None
        if hasattr(stream, "isatty") and stream.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(file=stream), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("bench", total=None)

    def __call__(self, done: int, total: int, label: str, item) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, description=label)
            return
        busbw = getattr(item, "busbw_gbps", 0.0)
        print(f"nccl-doctor bench: [{done}/{total}] {label}: busbw {busbw:.3f} GB/s" if item is not None
              else f"nccl-doctor bench: [{done}/{total}] {label} done", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


# --- judging ---------------------------------------------------------------------------------------
def judge(result, *, slurm: SlurmInfo | None = None, short_sweep: bool = False) -> list[Finding]:
    """Findings from one ``BenchResult``: wrong data, slow nodes or links, and figures not to trust.
    ``short_sweep``: the sweep is short on purpose (preflight), so its size and iteration counts are not
    warned about."""
    out: list[Finding] = []
    out += _judge_wrong(result)
    out += _judge_nodes(result)
    out += _judge_trust(result, slurm, short_sweep)
    if not any(f.severity is Severity.FAIL for f in out) and result.results:
        best = max(result.results, key=lambda m: m.busbw_gbps)
        msg = (f"{len(result.results)} measurements verified, 0 wrong elements; peak busbw {best.busbw_gbps:.3f} "
               f"GB/s ({best.op} {best.group} {format_size(best.size_bytes)})")
        if result.pairs:
            loc = node_localisation(result)
            msg += (f"; no slow node or link: {len(loc.links)} node pair(s) in {len(loc.rounds)} round(s), "
                    f"slowest {min(loc.links.values()):.3f} GB/s, fastest {loc.best:.3f} GB/s")
        out.append(Finding(code="ND300", severity=Severity.PASS, message=msg))
    return out


def measured_nothing(result) -> bool:
    """No collective and no node pair was measured: the run cannot pass (exit 2, could not run)."""
    return not result.results and not result.pairs


def mesh_misfit(nodes) -> tuple[str, list[str]] | None:
    """Why HSDP's 2-D mesh ``init_device_mesh(dev, (nodes, ranks per node))`` does not fit these nodes,
    and the odd nodes; None when it fits. Odd: the nodes outside the most common rank count (on a tie,
    the ones with fewer ranks: a missing GPU or a short CUDA_VISIBLE_DEVICES is the usual cause)."""
    counts: dict[int, list[str]] = {}
    for n in nodes:
        counts.setdefault(len(n.ranks), []).append(n.host)
    if len(counts) > 1:
        ordered = majority_first(counts)
        odd = [h for _, hs in ordered[1:] for h in hs]
        parts = [f"{hosts_text(hs)} {'runs' if len(hs) == 1 else 'run'} {plural(k, 'rank')}"
                 for k, hs in ordered[1:] + ordered[:1]]
        return "the nodes run different rank counts: " + ", ".join(parts), odd
    local = len(nodes[0].ranks) if nodes else 0
    odd_nodes = [n for n in nodes if tuple(n.ranks) != tuple(range(n.index * local, (n.index + 1) * local))]
    if odd_nodes:
        first = odd_nodes[0]
        return (f"the ranks are not numbered node by node ({first.host} holds ranks "
                f"{', '.join(map(str, first.ranks))})", [n.host for n in odd_nodes])
    return None


def _misfit_finding(result) -> Finding | None:
    """ND001 (WARN) naming the nodes whose rank count (or rank order) keeps intra/inter, HSDP's fsdp and
    dp dims, from being measured: the same shape would stop an HSDP job."""
    misfit = mesh_misfit(result.nodes) if result.nnodes > 1 else None
    if misfit is None:
        return None
    why, odd = misfit
    odd_text = hosts_text(odd)
    counts = why.startswith("the nodes run different rank counts")
    return Finding(
        code="ND001", severity=Severity.WARN, where=Where(host=odd_text),
        message=f"{why}: the HSDP mesh (nodes x ranks per node) needs "
                + ("the same rank count on every node" if counts else "node-major rank order")
                + ", so the intra and inter groups (its fsdp and dp dims) were not measured",
        fix=(f"start the same number of ranks on every node: the same --nproc-per-node everywhere (default: one "
             f"per visible GPU), and the same visible GPUs (CUDA_VISIBLE_DEVICES, `nvidia-smi -L` on {odd_text})")
        if counts else "number the ranks node by node (torchrun and srun do; check your launcher's RANK order)")


def coverage(result, *, asked: bool) -> list[Finding]:
    """ND001 (WARN) for what was not measured: every skipped group when the user named the groups
    (``asked``), and always when nothing at all was measured. Nodes whose rank count (or order) does not
    fit the HSDP mesh are always named (one ND001 instead of one per group), whatever the groups asked for."""
    misfit = _misfit_finding(result)
    out = [misfit] if misfit is not None else []
    why = "; ".join(result.skipped) or "no group to measure"
    if measured_nothing(result):
        one_rank = result.nnodes * result.local_world_size == 1
        return out + [Finding(code="ND001", severity=Severity.WARN,
                              message=f"nothing was measured on {plural(result.nnodes, 'node')} x "
                                      f"{plural(result.local_world_size, 'rank')}: {why}",
                              fix="run 2+ ranks: --nproc-per-node 2 on one node, or 2+ nodes" if one_rank else
                                  "intra needs 2+ ranks per node and inter 2+ nodes; on one node use --groups world "
                                  "(the default), across nodes leave out --no-pairs or add world")]
    skipped = [s for s in result.skipped if misfit is None or MISFIT_SKIP not in s]
    if asked and skipped:
        out += [Finding(code="ND001", severity=Severity.WARN, message=f"group not measured: {s}",
                        fix="intra needs 2+ ranks per node and inter 2+ nodes, with the same rank count on "
                            "every node") for s in skipped]
    return out


def _judge_wrong(result) -> list[Finding]:
    out = []
    for m in result.results:
        if m.wrong:
            out.append(Finding(code="ND301", severity=Severity.FAIL,
                               message=f"{m.op} on {m.group} ({m.group_size} ranks) at {format_size(m.size_bytes)} "
                                       f"returned {m.wrong} wrong elements",
                               fix="a rank computes or moves corrupt data: rerun with NCCL_DEBUG=WARN, check "
                                   "dmesg for Xid/ECC errors, and drain the host if it repeats"))
    for p in result.pairs:
        if p.wrong:
            a, b = result.nodes[p.a].host, result.nodes[p.b].host
            out.append(Finding(code="ND301", severity=Severity.FAIL, where=Where(host=a),
                               message=f"node pair {a} <-> {b} returned {p.wrong} wrong elements",
                               fix=f"check the link between {a} and {b} and both hosts' dmesg"))
    return out


def node_rows(result) -> list[dict]:
    """Each node with its inter-node figure (best pair), what its links should deliver (the probe), its
    peers' median, and whether the pair pass names it (``slow``).

    ``expected_gbps`` is the yardstick for the figure: one rank pair, so one NIC on an NCCL/IB node;
    ``link_gbps`` is all the inter-node links the backend uses on that node, together."""
    figs = {n.index: result.node_figure(n.index) for n in result.nodes}
    bad = set(node_localisation(result).bad()) if result.pairs else set()
    rows = []
    for n in result.nodes:
        fig = figs[n.index]
        peers = [v for k, v in figs.items() if k != n.index and v is not None]
        link = n.link_gbps
        exp = getattr(n, "expected", None)
        want = pair_expected_gbps(n)
        rows.append({
            "host": n.host, "index": n.index, "ranks": list(n.ranks), "iface": n.iface,
            "link_gbps": round(link, 4) if link else None,
            "expected_gbps": round(want, 4) if want else None,
            "expected_basis": (exp.inter_basis if exp is not None else
                               getattr(n, "no_expected", None) or ("sysfs link speed" if link else None)),
            "intra_expected_gbps": exp.intra_gbps if exp is not None else None,
            "intra_expected_basis": exp.intra_basis if exp is not None else None,
            "inter_node_busbw_gbps": round(fig, 4) if fig is not None else None,
            "pct_of_expected": round(100 * fig / want, 1) if fig is not None and want else None,
            "pct_of_link": round(100 * fig / link, 1) if fig is not None and link else None,
            "peer_median_gbps": round(statistics.median(peers), 4) if len(peers) >= 2 else None,
            "pairs": [result.nodes[p.b if p.a == n.index else p.a].host
                      for p in result.pairs if n.index in (p.a, p.b)],
            "slow": n.index in bad,
        })
    return rows


def node_localisation(result) -> Localisation:
    """The pair pass's verdicts, rebuilt from ``result.pairs`` with the floor the run planned with."""
    return Localisation.of(result.nnodes, result.pairs, floor_gbps(result.nodes, result.backend))


def group_expected(result, group: str) -> float | None:
    """What a group's busbw should reach, from the slowest node: world across nodes and inter run over
    the inter-node links (inter: one group per local rank at once, sharing them); world on one node and
    intra over NVLink/PCIe (GPUs only; CPU ranks have no link to compare with)."""
    links = [n.link_gbps for n in result.nodes]
    intra = [getattr(n, "expected", None) and n.expected.intra_gbps for n in result.nodes]
    if group == "intra" or (group == "world" and result.nnodes == 1):
        return min(intra) if intra and all(intra) else None
    if not links or not all(links):
        return None
    share = result.local_world_size if group == "inter" else 1
    return min(links) / share


def _judge_nodes(result) -> list[Finding]:
    """Slow nodes (ND302) and links no node can be blamed for (ND303), by ``localize.py``'s one rule: a
    link is slow below a quarter of the best link or below the floor (5% of the line rate on Gloo, 25% on
    NCCL); a node is named when every link it has is slow and a partner is proven good elsewhere."""
    if not result.pairs:
        return []
    loc = node_localisation(result)
    rows = {r["index"]: r for r in node_rows(result)}
    host = [n.host for n in result.nodes]
    best = max(loc.links, key=loc.links.get)
    best_txt = f"{host[best[0]]}<->{host[best[1]]} moves {loc.best:.3f} GB/s"
    out: list[Finding] = []
    bad = loc.bad()
    for b in bad:
        r = rows[b]
        mine = sorted((k for k in loc.links if b in k), key=loc.links.get)
        txt = ", ".join(f"{host[k[0] if k[1] == b else k[1]]} {loc.links[k]:.3f} GB/s" for k in mine)
        med = f", its peers' median {r['peer_median_gbps']:.3f} GB/s" if r["peer_median_gbps"] else ""
        iface = r["iface"] or "<iface>"
        out.append(Finding(
            code="ND302", severity=Severity.FAIL, where=Where(host=host[b], iface=r["iface"]),
            message=f"{host[b]} is the slow node: inter-node bandwidth {r['inter_node_busbw_gbps']:.3f} GB/s, slow "
                    f"with every partner ({txt}) while {best_txt}{med}",
            fix=f"drain {host[b]} (e.g. `scontrol update nodename={host[b]} state=drain reason=slow-link`) and "
                f"check its link: `ethtool {iface}`, `tc qdisc show dev {iface}`, cable and switch port"))
    links = [k for k in loc.slow_links() if not set(k) & set(bad)]
    good = loc.good()
    if len(links) > 1 and not good:  # nothing to compare with: one finding, not one per pair
        out.append(Finding(
            code="ND303", severity=Severity.FAIL, where=Where(host=host[links[0][0]]),
            message=f"every node pair is slow ({len(links)} pairs, the best {loc.best:.3f} GB/s, under the "
                    f"{loc.floor_gbps:.3f} GB/s floor): no node is proven good, so it cannot tell which end is slow; "
                    "the transport or the fabric, not one node",
            fix="check that traffic takes the fast interface (nccl-doctor probe) and that NCCL uses the IB/RoCE "
                "transport, not sockets (nccl-doctor parse on an NCCL_DEBUG=INFO log)",
            evidence=tuple(f"{host[a]}<->{host[b]} {loc.links[(a, b)]:.3f} GB/s" for a, b in links[:8])))
        return out
    for a, b in links:
        bw = loc.links[(a, b)]
        want = [rows[i]["expected_gbps"] for i in (a, b) if rows[i]["expected_gbps"]]
        how = (f"{100 * bw / min(want):.1f}% of the {min(want):.2f} GB/s line rate" if bw < loc.floor_gbps and want
               else f"{100 * bw / loc.best:.0f}% of the best pair ({best_txt})")
        if result.nnodes == 2:
            why = "with two nodes it cannot tell which end is slow"
        elif a in good and b in good:
            why = "both ends reach other nodes at full speed: the path between them, not either node"
        else:
            why = "neither end was tested against a node proven good, so it cannot tell which end is slow"
        out.append(Finding(
            code="ND303", severity=Severity.FAIL, where=Where(host=host[a], iface=rows[a]["iface"]),
            message=f"the link between {host[a]} and {host[b]} moves {bw:.3f} GB/s, {how}; {why}",
            fix=f"rerun with a third node (the pair pass then names the slow node), or check both ends: "
                f"`ethtool {rows[a]['iface'] or '<iface>'}`, `tc qdisc show` on {host[a]} and {host[b]}, "
                "switch port counters"))
    return out


def _judge_trust(result, slurm: SlurmInfo | None, short_sweep: bool = False) -> list[Finding]:
    out: list[Finding] = []
    if result.results and not short_sweep:
        biggest = max(m.size_bytes for m in result.results)
        need = BIG_ENOUGH.get(result.backend, BIG_ENOUGH["nccl"])
        if biggest < need:
            out.append(Finding(code="ND306", severity=Severity.WARN,
                               message=f"largest size {format_size(biggest)} is below {format_size(need)}: small "
                                       "messages are latency-bound, so these figures understate the bandwidth",
                               fix=f"rerun with --sizes up to at least {format_size(need)}"))
        few = min(m.iters for m in result.results)
        if few < MIN_ITERS:
            out.append(Finding(code="ND307", severity=Severity.WARN,
                               message=f"only {few} timed iteration(s) per size: one slow iteration dominates",
                               fix=f"rerun with --iters {MIN_ITERS} or more (or leave --iters unset)"))
    nominal = {n.index for n in result.nodes if getattr(n, "nominal_link", False)}
    for r in node_rows(result):
        fig, link = r["inter_node_busbw_gbps"], r["link_gbps"]
        if fig is not None and link and fig > ABOVE_LINK * link and r["index"] not in nominal:
            out.append(Finding(code="ND305", severity=Severity.WARN, where=Where(host=r["host"], iface=r["iface"]),
                               message=f"inter-node figure {fig:.3f} GB/s is above the {link:.2f} GB/s line rate of "
                                       f"{r['iface']}: traffic took another path, so it is not this link's figure",
                               fix="set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface to test"))
    if slurm is not None:
        local = result.local_world_size
        if slurm.nnodes != result.nnodes or (slurm.gpus_on_node and slurm.gpus_on_node != local):
            want = plural(slurm.nnodes, "node") + (
                f" x {plural(slurm.gpus_on_node, 'GPU')}" if slurm.gpus_on_node else "")
            out.append(Finding(code="ND308", severity=Severity.WARN,
                               message=f"the bench ran {plural(result.nnodes, 'node')} x "
                                       f"{plural(local, 'rank')}, but Slurm "
                                       f"allocated {want}: figures are not for the whole allocation",
                               fix="run `srun --ntasks-per-node=1 nccl-doctor bench` inside the allocation, "
                                   "without --nnodes/--nproc-per-node"))
    return out


# --- the report ------------------------------------------------------------------------------------
def result_rows(result) -> list[dict]:
    want = {g: group_expected(result, g) for g in {m.group for m in result.results}}
    return [{"op": m.op, "group": m.group, "group_size": m.group_size, "size_bytes": m.size_bytes,
             "count": m.count, "dtype": m.dtype, "iters": m.iters, "time_us": round(m.time_us, 2),
             "algbw_gbps": round(m.algbw_gbps, 4), "busbw_gbps": round(m.busbw_gbps, 4), "wrong": m.wrong,
             "in_place": m.in_place, "expected_gbps": round(want[m.group], 4) if want[m.group] else None,
             "pct_of_expected": _pct(m.busbw_gbps, want[m.group])} for m in result.results]


def _pct(value: float | None, want: float | None) -> float | None:
    return round(100 * value / want, 1) if value is not None and want else None


def build_report(result, findings: list[Finding], *, notes: list[str] = ()) -> Report:
    report = Report(command="bench", findings=list(findings), notes=list(notes))
    by_table: dict[tuple[str, str], list] = {}
    for m in result.results:
        by_table.setdefault((m.op, m.group), []).append(m)
    for (op, group), ms in by_table.items():
        redop = "sum" if op != "all_gather" else "none"
        want = group_expected(result, group)
        report.tables.append(Table(
            title=f"{op} on {group} ({ms[0].group_size} ranks, {result.backend}, out-of-place)",
            columns=("size (B)", "count", "type", "redop", "iters", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                     "% of expected", "#wrong"),
            rows=tuple((str(m.size_bytes), str(m.count), "float", redop, str(m.iters), f"{m.time_us:.1f}",
                        f"{m.algbw_gbps:.3f}", f"{m.busbw_gbps:.3f}", _f(_pct(m.busbw_gbps, want), "{:.1f}"),
                        str(m.wrong)) for m in ms),
            caption=f"expected busbw {want:.3f} GB/s (see the notes for how)" if want else None))
    nodes = node_rows(result)
    loc = node_localisation(result) if result.pairs else None
    if loc is not None:
        p0 = result.pairs[0]
        report.tables.append(Table(
            title=f"inter-node figure per node (best of its node pairs: ping-pong of {format_size(p0.size_bytes)}, "
                  "GB/s one way)",
            columns=("host", "iface", "expected (GB/s)", "busbw (GB/s)", "% of expected", "peers' median",
                     "pairs with", "slow"),
            rows=tuple((r["host"], r["iface"] or "-", _f(r["expected_gbps"]), _f(r["inter_node_busbw_gbps"]),
                        _f(r["pct_of_expected"], "{:.1f}"), _f(r["peer_median_gbps"]), ", ".join(r["pairs"]),
                        "yes" if r["slow"] else "") for r in nodes)))
        host = [n.host for n in result.nodes]
        report.tables.append(Table(
            title=f"node pairs ({p0.iters} timed ping-pongs each; rounds of disjoint pairs, then suspects against "
                  "known-good nodes)",
            columns=("round", "pair", "busbw (GB/s)", "slow"),
            rows=tuple((str(p.round), f"{host[p.a]}<->{host[p.b]}", f"{p.busbw_gbps:.3f}",
                        "yes" if loc.slow(p.link) else "") for p in result.pairs)))
    report.notes += expected_notes(result, nodes)
    report.notes += [f"skipped group {s}" for s in result.skipped]
    report.data = {
        "backend": result.backend, "device": result.device.split(":")[0], "world_size": result.world_size,
        "nnodes": result.nnodes, "local_world_size": result.local_world_size,
        "elapsed_s": round(result.elapsed_s, 2), "results": result_rows(result), "nodes": nodes,
        "pairs": [{"a": result.nodes[p.a].host, "b": result.nodes[p.b].host, "round": p.round,
                   "size_bytes": p.size_bytes, "iters": p.iters, "time_us": round(p.time_us, 2),
                   "busbw_gbps": round(p.busbw_gbps, 4), "wrong": p.wrong, "slow": loc.slow(p.link)}
                  for p in result.pairs] if loc else [],
        "localisation": localisation_data(result, loc) if loc else {"skipped": localisation_skipped(result)},
        "skipped_groups": list(result.skipped),
    }
    peak = {}
    for m in result.results:
        peak[(m.op, m.group)] = max(peak.get((m.op, m.group), 0.0), m.busbw_gbps)
    report.summary = ("; ".join(f"{op} {g} {v:.3f} GB/s" for (op, g), v in peak.items()) + " peak busbw" if peak
                      else "nothing measured" + (f": {'; '.join(result.skipped)}" if result.skipped else ""))
    if result.pairs and not peak:
        report.summary = f"node pairs only: {len(result.pairs)} pair(s) measured; " + report.summary
    return report


def localisation_skipped(result) -> str:
    """Why there is no node-pair pass: ``localisation`` is then ``{"skipped": <this>}``."""
    if result.nnodes < 2:
        return "one node: no inter-node link to test"
    return "the node-pair pass was not run (--no-pairs)"


def localisation_data(result, loc: Localisation) -> dict:
    """The pair pass in brief (``preflight`` reports it as its ``localisation``)."""
    host = [n.host for n in result.nodes]
    return {"rounds": [[[host[a], host[b]] for a, b in r] for r in loc.rounds],
            "bad_nodes": [host[b] for b in loc.bad()],
            "slow_links": [[host[a], host[b]] for a, b in loc.slow_links()],
            "floor_gbps": round(loc.floor_gbps, 4),
            "predicted_s": [round(p, 2) for p in result.pairs_predicted_s] if result.pairs_predicted_s else None,
            "seconds": round(result.pairs_seconds, 2)}


def expected_notes(result, nodes: list[dict]) -> list[str]:
    """Where each yardstick comes from, once per distinct basis; intra-node figures are estimates."""
    out = []
    for key, what in (("expected_basis", "inter-node expected"), ("intra_expected_basis", "intra-node expected")):
        seen: dict[str, list[str]] = {}
        for r in nodes:
            if r[key]:
                seen.setdefault(r[key], []).append(r["host"])
        for basis, hosts in seen.items():
            out.append(f"{what} on {_hosts(hosts)}: {basis}")
    nominal = [n.host for n in result.nodes if getattr(n, "nominal_link", False)]
    if nominal:
        out.append(f"inter-node expected on {_hosts(nominal)} is a virtual interface's nominal sysfs speed (veth): "
                   "a figure above it is not flagged (ND305), and the slow-link floor still applies")
    if result.nnodes > 1 and any(g.group == "inter" for g in result.results):
        out.append(f"inter group expected: the node's inter-node links shared by the {result.local_world_size} "
                   "inter groups that run at once")
    return out


def _hosts(hosts: list[str]) -> str:
    """A few hosts in prose (notes name the nodes sharing a yardstick: a handful, in node order)."""
    return ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")


def _f(v, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)
