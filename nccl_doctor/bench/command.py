"""``nccl-doctor bench``: all-gather / reduce-scatter / all-reduce bandwidth within and across nodes.

Outside a launcher this process only plans and watches: it starts itself on every local rank
through torch's elastic launcher (``cluster.self_launch``) and returns the verdict the ranks agreed on,
or a FAIL naming the stage that hung. Inside a launcher (RANK/WORLD_SIZE set) it is a rank: it measures
(``worker.py``), rank 0 judges (``judge.py``) and reports (``view.py``), and every rank exits with rank
0's code. torch is imported only on the worker path.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import GIB, MIB, parse_size, parse_sizes
from nccl_doctor.bench.device import CudaUnusable, expects_nccl
from nccl_doctor.bench.judge import coverage, judge, measured_nothing
from nccl_doctor.bench.model import (
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    BenchFailure,
)
from nccl_doctor.bench.options import DEFAULT_GROUPS, DEFAULT_OPS, BenchOptions, parse_groups, parse_ops
from nccl_doctor.bench.payload import BenchCudaUnusable
from nccl_doctor.bench.view import (
    ProgressPrinter,
    blocked_report,
    build_report,
    failure_report,
    launch_failed_report,
    overdue_report,
)
from nccl_doctor.cluster.net import check_rdzv_port, rdzv_port_origin
from nccl_doctor.cluster.procs import die_with_parent
from nccl_doctor.cluster.rankenv import RANK_SETTINGS, overridden
from nccl_doctor.cluster.slurm import in_worker, port_from_env, slurm_launch_config
from nccl_doctor.cluster.stages import Stage, StageFile
from nccl_doctor.cluster.torchrun import LOG_ENV, launch_notes, plan_launch, self_launch
from nccl_doctor.codes import Code
from nccl_doctor.errors import InputError
from nccl_doctor.leave import joined_process_group
from nccl_doctor.node import check, probe_node
from nccl_doctor.outcome import Outcome
from nccl_doctor.report import Report, Severity, exit_code, finding

JOIN_GRACE_S = 60  # torchrun's own join timeout is longer than our deadline: ours fires first
RANK0_REPORT_WAIT_S = 5.0  # a failing rank waits this long at most for rank 0 to print the report
DEFAULT_SIZES = {"cuda": "1M:1G:4", "cpu": "64K:64M:4"}
ITER_BUDGET = {"cuda": 8 * GIB, "cpu": 64 * MIB}
PAIR_SIZE = {"cuda": 256 * MIB, "cpu": 16 * MIB}
OPTIONS = BenchOptions
# probe findings that make a launch pointless, by the backend the ranks will use
BLOCKERS = {Backend.GLOO: {Code.GLOO_IFNAME_INVALID},
            Backend.NCCL: {Code.SOCKET_IFNAME_MATCHES_NOTHING, Code.NCCL_NET_UNAVAILABLE,
                           Code.NCCL_FINDS_NO_INTERFACE}}


# --- arguments --------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("launch (ignored inside torchrun/srun workers that already have RANK)")
    g.add_argument("--nproc-per-node", type=int, metavar="N",
                   help="ranks on this node (default: visible GPUs, else SLURM_GPUS_ON_NODE, else 2 CPU ranks; "
                        "2 with --cpu)")
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
                   help="comma list of all_gather, reduce_scatter, all_reduce (or ag, rs, ar) "
                        f"(default: {DEFAULT_OPS})")
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


# --- argument checks (both sides; the options check themselves as they are built) --------------------
def check_environment(options: BenchOptions, env: Mapping[str, str]) -> None:
    """What the options mean in this environment, before anything is launched: one line naming the option."""
    if options.warmup < 1 and expects_nccl(env, force_cpu=options.cpu):
        raise InputError("--warmup 0 on NCCL would time the connection setup (CUDA kernel loading, NCCL's first use "
                         "of an algorithm) as the first iteration: use --warmup 1 or more (or --cpu for Gloo)")
    if not in_worker(env):  # the launcher reads MASTER_PORT (its rendezvous port); the ranks get torchrun's
        port_from_env(env)


# --- entry -----------------------------------------------------------------------------------------
def inputs(options: BenchOptions) -> tuple[Path, ...]:
    return ()


def run(options: BenchOptions) -> Outcome:
    check_environment(options, os.environ)
    if in_worker(os.environ):
        return run_worker(options, os.environ)
    blocked = launch_blockers(options, os.environ)
    if blocked is not None:
        return Outcome.of(blocked)
    cfg = plan_launch(nnodes=options.nnodes, nproc_per_node=options.nproc_per_node,
                      rdzv_endpoint=options.rdzv_endpoint, rdzv_id=options.rdzv_id,
                      join_timeout_s=options.timeout + JOIN_GRACE_S, deadline_s=options.timeout, env=os.environ,
                      cpu=options.cpu)
    check_rdzv_port(cfg, rdzv_port_origin(options.rdzv_endpoint, os.environ, cfg.nnodes))
    outcome = self_launch(options.argv(), cfg)
    overdue = outcome.overdue()
    if overdue is not None:  # a rank's watchdog ended the run: it recorded the stage and who held it up
        return Outcome.of(overdue_report(overdue, outcome, [*cfg.notes, *overridden(os.environ)]))
    code = outcome.final_code()
    if code is not None:
        return Outcome.exit(code)
    return Outcome.of(launch_failed_report(outcome, cfg.notes))


def launch_blockers(options: BenchOptions, env: Mapping[str, str], root: Path = Path("/")) -> Report | None:
    """Probe this node first (~30 ms): an interface variable that matches nothing would only surface
    minutes later as an init timeout on every rank. Returns the report to show instead of launching."""
    backend = Backend.NCCL if expects_nccl(env, force_cpu=options.cpu) else Backend.GLOO
    findings = [f for f in check(probe_node(root, env)) if f.code in BLOCKERS[backend]
                and f.severity is Severity.FAIL]
    return blocked_report(findings, backend) if findings else None


def run_worker(options: BenchOptions, env: Mapping[str, str]) -> Outcome:
    """One rank. Rank 0 renders the report; every rank returns the shared exit code (0 under our
    launcher, which reads the code from the stage files). 2 when nothing at all was measured."""
    die_with_parent(env)  # under our launcher: never outlive its torchrun (a SIGKILLed launcher's too)
    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw

    rank = int(env["RANK"])
    host = socket.gethostname()
    stage_file = StageFile(rank, host, env)
    stage_file.record(Stage.INIT)
    joined_process_group()  # from here the process ends with os._exit, never Gloo's teardown (leave.py)
    notes = launch_notes(env)
    if env is os.environ and not stage_file.managed:  # someone else's launcher: our launcher sets these itself
        notes += overridden(env)
        os.environ.update(RANK_SETTINGS)  # read by PyTorch and NCCL at init, below
    stages = bw.Stages(rank, host, env, timeout_s=options.collective_timeout)  # init included (watchdog.py)
    try:
        device = bw.init_from_env(timeout_s=options.collective_timeout, env=env, force_cpu=options.cpu, stages=stages)
    except CudaUnusable as exc:  # each node's first rank reports it: the other nodes' ranks only wait in init
        return _finish(options, rank, stage_file, cuda_report(exc, host, env, notes), shared=False,
                       render=rank == 0 or env.get("LOCAL_RANK", "0") == "0", error=exc.reason)
    except (RuntimeError, ValueError) as exc:  # NCCL's init errors too: the world communicator is made in init
        stuck = stages.overdue(0.0)
        failed = failure_report(BenchFailure(Stage.INIT, list(stuck.missing), list(stuck.missing_hosts), str(exc)),
                                host, env, notes)
        return _finish(options, rank, stage_file, failed, shared=False)
    kind = "cuda" if device.startswith("cuda") else "cpu"
    cfg = bw.BenchConfig(
        ops=parse_ops(options.ops or DEFAULT_OPS), groups=parse_groups(options.groups or DEFAULT_GROUPS),
        sizes=tuple(parse_sizes(options.sizes or DEFAULT_SIZES[kind])), iters=options.iters, warmup=options.warmup,
        budget_bytes=ITER_BUDGET[kind], pairs=not options.no_pairs,
        pair_size=parse_size(options.pair_size) if options.pair_size else PAIR_SIZE[kind],
        timeout_s=options.collective_timeout)
    progress = ProgressPrinter(sys.stderr) if rank == 0 else None
    try:
        result = bw.run_bench(cfg, env=env, progress=progress, stages=stages)
    except BenchFailure as failure:
        return _finish(options, rank, stage_file, failure_report(failure, host, env, notes), shared=False)
    finally:
        if progress:
            progress.close()
    findings = judge(result, slurm=slurm_launch_config(env)) + coverage(result, asked=options.groups is not None)
    report = build_report(result, findings, notes=notes)
    if measured_nothing(result):  # the verdict line must not read as a warning one can ship with
        report.could_not_run = "nothing was measured"
        report.summary += "; could not run (exit 2)"
    code = bw.share_code(exit_code(report, strict=options.output.strict), device, stages)
    dist.destroy_process_group()
    return _finish(options, rank, stage_file, report, code=code)


def _finish(options: BenchOptions, rank: int, stage_file: StageFile, report: Report, *,
            code: int | None = None, shared: bool = True, render: bool | None = None,
            error: str | None = None) -> Outcome:
    """Rank 0's report goes to the CLI (``render``: another rank's too); every rank ends with its exit code.
    Under our launcher the code goes to the stage file (with ``error``), and it is rank 0's *final* code: if
    rendering or writing fails, the recorded code says so (2), never the 0 of a verdict that nobody received."""
    verdict = exit_code(report, strict=options.output.strict) if code is None else code

    def close(rendered: int) -> int:
        final = max(verdict, rendered)
        if not stage_file.managed:
            return final
        # the report is out of our buffer before its code is recorded: once the launcher has the code it may
        # stop this rank (torchrun stops every rank when one fails) and must not find the report lost with it
        sys.stdout.flush()
        stage_file.record(Stage.DONE if shared else Stage.FAILED, code=final, error=error)
        # A shared verdict: exit 0, the launcher returns the recorded code and torchrun stays quiet.
        # A failure: exit non-zero so torchrun stops the ranks still waiting on the broken collective.
        return 0 if shared else max(final, 1)

    if rank == 0 if render is None else render:
        return Outcome.of(report, after_render=close)
    if not shared:  # our non-zero exit makes torchrun stop every rank: rank 0 prints its report first
        stage_file.wait_for_rank0(RANK0_REPORT_WAIT_S)
    return Outcome.exit(close(verdict))


def cuda_report(exc: CudaUnusable, host: str, env: Mapping[str, str], notes: list[str]) -> Report:
    """ND313: GPUs are expected and CUDA cannot serve this node's ranks; nothing ran (``device.choose``)."""
    rank = int(env.get("RANK", "0"))
    report = Report(command="bench", notes=list(notes),
                    summary=f"not run: CUDA cannot serve the ranks on {host} (ND313)")
    report.add(finding(Code.CUDA_UNUSABLE, Severity.FAIL, f"LOCAL_RANK {env.get('LOCAL_RANK', '0')}: {exc.reason}",
                       exc.fix, host=host, rank=rank))
    report.payload = BenchCudaUnusable(stage=Stage.INIT, backend=Backend.NCCL, cuda_error=exc.cuda_error,
                                       localisation={"skipped": "not run: CUDA cannot serve the ranks"},
                                       worker_log=env.get(LOG_ENV))
    return report
