"""``nccl-doctor preflight``: the sbatch gate. Probe, compare, bench, localise, one verdict, never hang.

One *launcher* per node (``srun --ntasks-per-node=1 nccl-doctor preflight``, or plain
``nccl-doctor preflight`` on one machine) does, in order:

1. probe this node (``probe.py``), locally, before anything starts: a wrong ``NCCL_SOCKET_IFNAME``
   fails here, in seconds, with its fix;
2. rendezvous (``store.py``): node 0 hosts a TCPStore; each node posts its probe and facts, then
   heart-beats (``heartbeat.py``). Node 0 waits (``--rendezvous-timeout``) and names the hosts of the
   Slurm node list that never arrived;
3. node 0 (``head.py``) compares the nodes and says go or stop;
4. each launcher starts its ranks directly (``python -m nccl_doctor preflight --worker``, ``worker.py``),
   whose process group rides on the same store. Ranks run ``bench`` on the HSDP mesh with NCCL logs
   captured into a private directory (``nccllogs.py``), then the node-pair pass (as in ``bench``), then
   ``--fsdp-smoke`` (``fsdp_smoke.py``);
5. node 0 watches every rank's stage, every node's heartbeat, its deadlines; on a failure it names
   the stage and the hosts/ranks that had not arrived (or stopped heart-beating) (``verdict.py``), kills
   its ranks and tells the other nodes the verdict through the store. Every node (``follower.py``) exits
   with that code. Every key and message they exchange is in ``protocol.py``.

torchrun is not used: its rendezvous cannot say *which* hosts did not arrive, and one store gives
heartbeats, stages and the verdict to every node for free. torch is imported only in functions.

The store answers anyone who reaches node 0's port, so it listens only on the job's address where it can
(``store.bind_address``), and with ``NCCL_DOCTOR_SECRET`` (srun passes it to every task, each launcher to
its ranks) every value carries an HMAC of its run, key and value (``auth.py``); without one node 0 says so
in a WARN (ND412). Every value read is capped and parsed field by field: a bad one is a FAIL naming its key
(ND411). At start each process raises its open-file limit to the hard one (``limits.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nccl_doctor.outcome import Outcome
from nccl_doctor.plan import parse_params, plan_line, run_failed
from nccl_doctor.preflight.auth import secret_from_env
from nccl_doctor.preflight.follower import Follower
from nccl_doctor.preflight.head import Head
from nccl_doctor.preflight.launcher import PREFIX, WORKER_ENV, Launcher
from nccl_doctor.preflight.limits import raise_open_files
from nccl_doctor.preflight.options import (
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_RENDEZVOUS_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    PreflightOptions,
)
from nccl_doctor.preflight.payload import preflight_payload
from nccl_doctor.preflight.plan import node_plan
from nccl_doctor.preflight.protocol import NodePost, node_key
from nccl_doctor.preflight.store import exit_now, store_call_abandoned
from nccl_doctor.preflight.verdict import NodeVerdict
from nccl_doctor.preflight.worker import run_worker
from nccl_doctor.report import Report

OPTIONS = PreflightOptions
EXIT_INPUT = 2  # the exit code of an input error: it wins over what the rendering came to
EXIT_INTERRUPTED = 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to run")
    g.add_argument("--nproc-per-node", type=int, metavar="N",
                   help="ranks per node (default: visible GPUs, else SLURM_GPUS_ON_NODE, else 2 CPU ranks; "
                        "2 with --cpu)")
    g.add_argument("--fsdp-smoke", action="store_true",
                   help="also train a tiny model with FSDP2 on the HSDP mesh and round-trip it through DCP")
    g.add_argument("--fsdp-smoke-dir", metavar="DIR",
                   help="with --fsdp-smoke (an error without it): an existing, writable directory for the DCP "
                        "checkpoint; on 2+ nodes one every node sees (default: the current working directory "
                        "on 2+ nodes, the system temp directory on one node)")
    g.add_argument("--cpu", action="store_true", help="use Gloo on CPU even when GPUs are visible")
    g.add_argument("--plan-params", metavar="N",
                   help="also say which FSDP/HSDP mesh `nccl-doctor plan` would recommend for a model of N "
                        "parameters (7B, 70B, 1.3T) from this run's bandwidth")
    d = p.add_argument_group("deadlines (the same options as bench): a run never outlives --timeout")
    d.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"wall-clock limit of the whole run, every stage included (default: {DEFAULT_TIMEOUT_S:.0f})")
    d.add_argument("--collective-timeout", type=float, default=DEFAULT_COLLECTIVE_TIMEOUT_S, metavar="SECONDS",
                   help="limit for init_process_group and for each collective (default: "
                        f"{DEFAULT_COLLECTIVE_TIMEOUT_S:.0f})")
    d.add_argument("--rendezvous-timeout", type=float, default=DEFAULT_RENDEZVOUS_TIMEOUT_S, metavar="SECONDS",
                   help=f"for every node to arrive (default: {DEFAULT_RENDEZVOUS_TIMEOUT_S:.0f})")
    n = p.add_argument_group("rendezvous (default: the launcher's variables; a flag wins over them)")
    n.add_argument("--nnodes", type=int, metavar="N",
                   help="nodes in the run, one preflight on each (default: SLURM_NNODES under srun, PET_NNODES in "
                        "a PyTorchJob, OMPI_COMM_WORLD_SIZE under mpirun, else 1)")
    n.add_argument("--node-rank", type=int, metavar="R",
                   help="this node's rank, 0 to N-1; node 0 hosts the rendezvous (default: SLURM_NODEID, "
                        "PET_NODE_RANK, OMPI_COMM_WORLD_RANK or PMIX_RANK)")
    n.add_argument("--master-addr", metavar="HOST[:PORT]",
                   help="node 0's address (and port), the same on every node (default: the first host of the "
                        "Slurm node list, else MASTER_ADDR and MASTER_PORT)")
    n.add_argument("--port", type=int, metavar="PORT",
                   help="rendezvous port on node 0, 1-65535 (default: MASTER_PORT, else 29500 + (job id + step id) "
                        "%% 1000 under Slurm on 2+ nodes, 29500 on 2+ nodes of another launcher, else a free port; a "
                        "MASTER_PORT that is not a port is an error)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def inputs(options: PreflightOptions) -> tuple[Path, ...]:
    return ()


def run(options: PreflightOptions) -> Outcome:
    secret_from_env(os.environ)  # a short NCCL_DOCTOR_SECRET: one line, exit 2, before anything starts
    files = raise_open_files()  # the store's connections (node 0), the ranks' Gloo/NCCL sockets (everyone)
    if options.worker or os.environ.get(WORKER_ENV):
        return Outcome.exit(run_worker(options, os.environ))
    user_log_level = os.environ.get("TORCH_CPP_LOG_LEVEL")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10d's socket warnings would bury the report
    plan = node_plan(options, os.environ)
    if plan.overrides:  # a flag replaced what the launcher said: one line, before anything starts
        print(f"{PREFIX} ({plan.host}): {plan.overrides}", file=sys.stderr, flush=True)
    launcher = Launcher(options, plan, os.environ)  # the ranks get ERROR (or the user's level)
    launcher.state.files = files
    if user_log_level is None:  # this process reports its own store failures: no C++ stack dumps from c10d
        os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    try:
        verdict = launch(launcher)
    except KeyboardInterrupt:  # (cli says "interrupted"); a store call given up on would abort a normal exit
        if store_call_abandoned():
            print(f"{PREFIX}: interrupted", file=sys.stderr)
            exit_now(EXIT_INTERRUPTED)
        raise
    if verdict.report is None:  # another node holds the full report; say the verdict in one line
        print(f"{PREFIX} ({plan.host}): {verdict.verdict.upper()}: {verdict.summary}", flush=True)
        return Outcome.exit(exit_now(verdict.code))
    if options.plan_params is not None:
        add_plan_line(verdict.report, parse_params(options.plan_params, "--plan-params"))

    def close(rendered: int) -> int:
        # only now: a follower that exits first may get the whole step killed (srun --kill-on-bad-exit)
        launcher.publish(verdict)
        return exit_now(verdict.code if verdict.code == EXIT_INPUT else rendered)

    return Outcome.of(verdict.report, after_render=close)


def add_plan_line(report: Report, params: float) -> None:
    """``--plan-params``: what ``plan`` would recommend from this run's own figures, as a note and a JSON key."""
    payload, origin = preflight_payload(report), "this report"
    line = plan_line(params, payload.bench_figures, failed=run_failed(report.command, report.verdict.value, origin),
                     origin=origin)
    report.notes.append(line)
    payload.plan = line


def launch(launcher: Launcher) -> NodeVerdict:
    """This node's whole run: probe, rendezvous, then node 0's steps or a follower's."""
    with launcher.running():
        mine = launcher.probe()
        if mine.fatal and launcher.state.plan.nnodes == 1:  # nobody to rendezvous with: stop here, no rank started
            return Head(launcher).probe_stop([mine])
        t = time.monotonic()
        if launcher.state.plan.is_head:
            head = Head(launcher)
            refused = head.open_store(mine)
            return refused or post_and_run(launcher, mine, lambda: head.run(mine, t))
        follower = Follower(launcher)
        refused = follower.join_store(mine)
        return refused or post_and_run(launcher, mine, lambda: follower.run(mine))


def post_and_run(launcher: Launcher, mine: NodePost, steps: Callable[[], NodeVerdict]) -> NodeVerdict:
    """On a store that is this run's: post this node's probe, start its heartbeat, then take its steps."""
    launcher.state.live.set(node_key(launcher.state.plan.node_rank), mine.to_json())
    launcher.start_heartbeat()
    return steps()
