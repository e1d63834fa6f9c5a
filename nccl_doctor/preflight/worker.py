"""The rank side of ``preflight``: init, bench on the HSDP mesh, the node-pair pass, optional FSDP smoke.

Started by the launcher with RANK/WORLD_SIZE/... and MASTER_ADDR:MASTER_PORT pointing at the launcher's
TCPStore on node 0. Each rank records its current stage in a file its launcher relays to node 0 (so node 0
can name who had not arrived), writes a failure to ``error/<rank>``, and rank 0 writes the whole ``result``
(findings, tables, data) for node 0's launcher to report (``protocol.py``); every value sealed with
``NCCL_DOCTOR_SECRET`` when set (``auth.py``). Imported only in worker processes; torch only
inside functions.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from nccl_doctor.bench import (
    CudaUnusable,
    Group,
    Op,
    build_report,
    coverage,
    format_size,
    judge,
    measured_nothing,
)
from nccl_doctor.bench.payload import BenchPayload
from nccl_doctor.cluster.procs import die_with_parent
from nccl_doctor.cluster.stages import PrefixedSink, Stage, StageOverdue
from nccl_doctor.codes import Code
from nccl_doctor.leave import leave_now
from nccl_doctor.preflight import store as stores
from nccl_doctor.preflight.auth import Seal, secret_from_env
from nccl_doctor.preflight.fsdp_smoke import run_smoke
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.protocol import (
    BACKEND_RECORD_ENV,
    BENCH_PREFIX,
    ERROR_TEXT_CAP,
    ERRORS_KEY,
    PG_PREFIX,
    RESULT_KEY,
    RUN_ENV,
    STAGE_RECORD_ENV,
    RankError,
    RankResult,
    StageMarks,
    error_key,
    record_backend,
)
from nccl_doctor.preflight.store import Store
from nccl_doctor.report import Finding, Severity, finding, plural

PREFIX = "nccl-doctor preflight"
# the short sweep preflight runs (``bench`` runs the full one), by device kind
BENCH_SIZES = {"cpu": (1 << 20, 4 << 20), "cuda": (64 << 20, 256 << 20)}
BENCH_OPS = (Op.ALL_GATHER, Op.REDUCE_SCATTER)
BENCH_ITERS = 5
WARMUP = 1
PAIR_SIZE = {"cpu": 4 << 20, "cuda": 256 << 20}
PAIR_ITERS = 3
SHARED_FS_FIX = "a shared checkpoint directory: --fsdp-smoke-dir on a shared file system"
SMOKE_DEBUG_FIX = "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO on the named rank"


def run_worker(args: PreflightOptions, env: Mapping[str, str]) -> int:
    die_with_parent(env)  # never outlive the launcher (a SIGKILLed one cannot stop us)
    rank = int(env["RANK"])
    seal = Seal(secret_from_env(env), env.get(RUN_ENV, ""))  # what the launcher seals with, from its env
    store = stores.client(env["MASTER_ADDR"], int(env["MASTER_PORT"]), args.collective_timeout, seal)
    def errors() -> Store:  # the watchdog's own connection, made when it fires: the main thread's may be blocked
        return stores.client(env["MASTER_ADDR"], int(env["MASTER_PORT"]), args.collective_timeout, seal)

    stage = StageMarks(rank, env.get(STAGE_RECORD_ENV))
    try:
        stage.record(Stage.INIT)
        device = _init(args, env, store, overdue_hook(errors, rank, stage))
        if env.get(BACKEND_RECORD_ENV):
            record_backend(env[BACKEND_RECORD_ENV], rank, device)
        result = _work(args, env, stage, device, overdue_hook(errors, rank, stage))
        if rank == 0:
            store.set(RESULT_KEY, result.to_json())
        stage.record(Stage.DONE)
        code = 0
    except Exception as exc:  # a failed collective (Gloo's timeouts, NCCL's errors); a hang is the watchdog's
        post_error(store, rank, rank_error(stage.current, exc))
        code = 1
    leave_now(code)  # never wait on gloo/NCCL teardown of a broken group: the launcher has what it needs


def post_error(store: Store, rank: int, error: RankError) -> None:
    """``error/<rank>`` for node 0, and the counter it polls instead of every rank's key."""
    try:
        store.set(error_key(rank), error.to_json())
        store.add(ERRORS_KEY, 1)
    except Exception:
        pass


OverdueHook = Callable[[str, StageOverdue], None]


def overdue_hook(connect: Callable[[], Store], rank: int, marks: StageMarks) -> OverdueHook:
    """What this rank's watchdog (``bench.worker.Stages``) posts before it ends the rank: the stage that outlived
    --collective-timeout (as node 0 shows this rank's stages) and who held it up, as ``error/<rank>``, on a
    connection of its own (``connect``: the main thread's may be blocked in a get)."""

    def hook(stage: str, stuck: StageOverdue) -> None:
        post_error(connect(), rank, RankError(stage=marks.current, error=(
            f"stage outlived --collective-timeout ({stuck.timeout_s:g} s): {stuck.describe()}")[:ERROR_TEXT_CAP]))

    return hook


def rank_error(stage: str, exc: BaseException) -> RankError:
    """``error/<rank>``: the error's text; CUDA that cannot serve this rank (bench's ``CudaUnusable``) also
    brings its finding code (ND313) and its own fix, which node 0 reports instead of an interface fix."""
    if isinstance(exc, CudaUnusable):
        return RankError(stage=stage, error=f"{type(exc).__name__}: {exc.reason}", fix=exc.fix,
                         code=Code.CUDA_UNUSABLE)
    return RankError(stage=stage, error=f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_CAP])


def _init(args: PreflightOptions, env: Mapping[str, str], store: Store, hook: OverdueHook) -> str:
    """bench's init, on the launcher's store (under a prefix: its own keys stay apart), inside a watched stage:
    on NCCL the world communicator is made here (eagerly), and a peer missing at its creation ends the rank
    after --collective-timeout with ``error/<rank>`` naming who never arrived."""
    import torch.distributed as dist

    from nccl_doctor.bench.worker import Stages, init_from_env

    rank = int(env["RANK"])
    # closed on leaving (its thread stops): the bench's own stages watch what follows
    with Stages(rank, socket.gethostname(), env, timeout_s=args.collective_timeout, on_overdue=(hook,)) as stages:
        device: str = init_from_env(timeout_s=args.collective_timeout, env=env, force_cpu=args.cpu,
                                    store=dist.PrefixStore(PG_PREFIX, store.raw), rank=rank,
                                    world_size=int(env["WORLD_SIZE"]), stages=stages)
    return device


def _say(msg: str) -> None:
    print(f"{PREFIX} [rank 0] {msg}", file=sys.stderr, flush=True)


def _work(args: PreflightOptions, env: Mapping[str, str], stage: StageMarks, device: str,
          hook: OverdueHook) -> RankResult:
    """Everything after init; rank 0's return value is the result (the others' is discarded)."""
    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw

    rank = dist.get_rank()
    kind = device.split(":", maxsplit=1)[0]
    nnodes = int(env.get("NNODES", "1"))
    timings: dict[str, float] = {}

    t = time.monotonic()
    local = int(env.get("LOCAL_WORLD_SIZE", "1"))
    # world is the only distinct group on one node or with one rank per node
    groups = (Group.INTRA, Group.INTER) if nnodes > 1 and local > 1 else (Group.WORLD,)
    cfg = bw.BenchConfig(ops=BENCH_OPS, groups=groups, sizes=BENCH_SIZES[kind],
                         iters=BENCH_ITERS, warmup=WARMUP, pairs=False, timeout_s=args.collective_timeout)
    if rank == 0:
        _say(f"bench: {', '.join(cfg.ops)} on {', '.join(groups)} at {len(cfg.sizes)} sizes")
    host = socket.gethostname()  # the bench's stages go to this rank's marks too, as node 0 shows them
    with bw.Stages(rank, host, env, sinks=(PrefixedSink(stage, BENCH_PREFIX),), timeout_s=args.collective_timeout,
                   on_overdue=(hook,)) as sweep_stages:
        bench = bw.run_bench(cfg, env=env, stages=sweep_stages)
    timings["bench"] = round(time.monotonic() - t, 2)

    t = time.monotonic()
    if bench.nnodes > 1:  # the same node-pair pass as `bench` (pairs.py), judged by the same rule
        pair_cfg = replace(cfg, pair_size=PAIR_SIZE[kind], iters=PAIR_ITERS, warmup=WARMUP)
        with bw.Stages(rank, host, env, sinks=(stage,), timeout_s=args.collective_timeout,
                       on_overdue=(hook,)) as pair_stages:
            bw.measure_nodes(bench, pair_cfg, pair_stages, say=_say if rank == 0 else None)
    timings["localise"] = round(time.monotonic() - t, 2)
    findings = judge(bench, short_sweep=True) + coverage(bench, asked=False)
    bench_report = build_report(bench, findings)
    measured = bench_report.payload
    if not isinstance(measured, BenchPayload):  # build_report always makes one
        raise TypeError(f"bench's report holds {type(measured).__name__}, not a BenchPayload")

    smoke_data = None
    if args.fsdp_smoke:
        t = time.monotonic()
        stage.record(Stage.FSDP_SMOKE)
        f, smoke_data = _smoke(bench, device, env)
        findings += f
        timings["fsdp_smoke"] = round(time.monotonic() - t, 2)

    sweep = ", ".join(format_size(s) for s in cfg.sizes)
    return RankResult(
        findings=findings, tables=list(bench_report.tables),
        notes=[f"bench: a short sweep ({sweep}, {cfg.iters} iterations); run `nccl-doctor bench` for the full one",
               *bench_report.notes],
        data={"backend": bench.backend, "bench": measured.without_localisation(),
              "localisation": measured.localisation,
              "fsdp_smoke": smoke_data},
        timings_s=timings, measured=not measured_nothing(bench))


def _smoke(bench: Any, device: str, env: Mapping[str, str]) -> tuple[list[Finding], dict[str, Any]]:
    """Run the FSDP2 smoke test on the HSDP mesh; every rank's outcome, gathered, judged once."""
    from torch.distributed.device_mesh import init_device_mesh

    from nccl_doctor.bench import worker as bw

    mesh = init_device_mesh(device.split(":", maxsplit=1)[0], (bench.nnodes, bench.local_world_size),
                            mesh_dim_names=("dp", "fsdp"))
    r = run_smoke(mesh, checkpoint_base=env.get("NCCL_DOCTOR_FSDP_BASE") or None,
                  record=env.get("NCCL_DOCTOR_DCP_RECORD") or None)
    got = bw.all_gather_json({"rank": r.rank, "host": socket.gethostname(), "problems": r.problems,
                              "losses": r.losses, "seconds": round(r.seconds, 2)})  # JSON, never a pickle
    everyone = [smoke_entry(rank, e) for rank, e in enumerate(got)]
    shape = f"({bench.nnodes} dp x {bench.local_world_size} fsdp)"
    return [smoke_finding(everyone, shape)], {"ranks": everyone}


SMOKE_FIELDS: dict[str, tuple[type, ...]] = {"rank": (int,), "host": (str,), "problems": (list,),
                                             "losses": (list,), "seconds": (int, float)}


def smoke_entry(rank: int, entry: Any) -> dict[str, Any]:
    """One rank's smoke outcome as it sent it, checked; what cannot be read is that rank's problem (ND410 names
    it), never a traceback."""
    why = None
    if not isinstance(entry, dict):
        why = getattr(entry, "why", "not an object")
    else:
        bad = [k for k, types in SMOKE_FIELDS.items()
               if not isinstance(entry.get(k), types) or isinstance(entry.get(k), bool)]
        if bad:
            why = f"{bad[0]!r} missing or of the wrong type"
        elif not all(isinstance(p, str) for p in entry["problems"]) or \
                not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in entry["losses"]):
            why = "problems or losses of the wrong type"
        elif entry["rank"] != rank:
            why = f"it claims to be rank {entry['rank']}"
    if why is None:
        return dict(entry)
    return {"rank": rank, "host": "unknown", "problems": [f"rank {rank} sent a malformed smoke-test result ({why})"],
            "losses": [], "seconds": 0.0}


def smoke_finding(everyone: list[dict[str, Any]], shape: str) -> Finding:
    """ND410: PASS with the losses when every rank passed, else FAIL naming the first rank that did not."""
    bad = [e for e in everyone if e["problems"]]
    if bad:
        first = bad[0]
        return finding(Code.FSDP_SMOKE, Severity.FAIL,
                       f"FSDP2 smoke test on the {shape} mesh failed on {plural(len(bad), 'rank')}: "
                       f"{first['problems'][0]}",
                       SHARED_FS_FIX if "shared file system" in first["problems"][0] else SMOKE_DEBUG_FIX,
                       host=first["host"], rank=first["rank"],
                       evidence=[f"rank {e['rank']} ({e['host']}): {p}" for e in bad for p in e["problems"]])
    losses = everyone[0]["losses"]
    return finding(Code.FSDP_SMOKE, Severity.PASS,
                   f"FSDP2 fully_shard on the {shape} mesh: {len(losses)} bf16 steps on one fixed batch (loss "
                   f"{losses[0]:.3f} -> {losses[-1]:.3f}), DCP save/load round trip equal on "
                   f"all {len(everyone)} ranks")

