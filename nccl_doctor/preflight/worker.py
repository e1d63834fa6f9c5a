"""The rank side of ``preflight``: init, bench on the HSDP mesh, the node-pair pass, optional FSDP smoke.

Started by ``preflight.Launcher`` with RANK/WORLD_SIZE/... and MASTER_ADDR:MASTER_PORT pointing at the
launcher's TCPStore on node 0. Each rank writes its current stage to ``stage/<rank>`` there (so node 0
can name who had not arrived), a failure to ``error/<rank>``, and rank 0 writes the whole ``result``
(findings, tables, data) for node 0's launcher to report. Imported only in worker processes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Mapping

from nccl_doctor.bench import format_size
from nccl_doctor.report import Finding, Severity, Where, plural

PREFIX = "nccl-doctor preflight"


class StageKeys:
    """``stage/<rank>`` = ``<seq>|<name>``: a sequence number makes "who is behind" a comparison."""

    def __init__(self, store, rank: int):
        self.store, self.rank, self.seq, self.current = store, rank, 0, "init"

    def __call__(self, name: str) -> None:
        self.seq += 1
        self.current = name
        self.store.set(f"stage/{self.rank}", f"{self.seq}|{name}")


def run_worker(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from datetime import timedelta

    import torch.distributed as dist

    rank = int(env["RANK"])
    store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=args.collective_timeout))
    stage = StageKeys(store, rank)
    try:
        stage("init")
        device = _init(args, env, store)
        result = _work(args, env, stage, device)
        if rank == 0:
            store.set("result", json.dumps(result))
        stage("done")
        code = 0
    except Exception as exc:  # noqa: BLE001 - every failure is reported with its stage, never raised
        try:
            store.set(f"error/{rank}", json.dumps({"stage": stage.current, "error": f"{type(exc).__name__}: {exc}"}))
            store.add("errors", 1)  # node 0 polls this one counter, not every rank's key
        except Exception:  # noqa: BLE001 - the store is gone with node 0: the launchers see it
            pass
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # never wait on gloo/NCCL teardown of a broken group: the launcher has what it needs


def _init(args, env: Mapping[str, str], store) -> str:
    """bench's init, on the launcher's store (under a prefix: its own keys stay apart)."""
    import torch.distributed as dist

    from nccl_doctor.bench.worker import init_from_env

    return init_from_env(timeout_s=args.collective_timeout, env=env, force_cpu=args.cpu,
                         store=dist.PrefixStore("pg", store), rank=int(env["RANK"]),
                         world_size=int(env["WORLD_SIZE"]))


def _say(msg: str) -> None:
    print(f"{PREFIX} [rank 0] {msg}", file=sys.stderr, flush=True)


def _work(args, env: Mapping[str, str], stage: StageKeys, device: str) -> dict:
    """Everything after init; rank 0's return value is the result (the others' is discarded)."""
    from dataclasses import replace

    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw
    from nccl_doctor.bench import build_report, coverage, judge, measured_nothing
    from nccl_doctor.preflight.command import BENCH_SIZES, PAIR_ITERS, PAIR_SIZE

    rank = dist.get_rank()
    kind = device.split(":")[0]
    nnodes = int(env.get("NNODES", "1"))
    timings: dict[str, float] = {}

    class Stages(bw.Stages):
        """The bench's stage marks, mirrored into the launcher's store (``prefix`` + name)."""

        prefix = ""

        def enter(self, name: str) -> None:
            super().enter(name)
            stage(f"{self.prefix}{name}")

    class BenchStages(Stages):
        prefix = "bench "

    t = time.monotonic()
    local = int(env.get("LOCAL_WORLD_SIZE", "1"))
    groups = ("intra", "inter") if nnodes > 1 and local > 1 else ("world",)  # world: the only distinct group
    cfg = bw.BenchConfig(ops=("all_gather", "reduce_scatter"), groups=groups, sizes=BENCH_SIZES[kind],
                         iters=5, warmup=1, pairs=False, timeout_s=args.collective_timeout)
    if rank == 0:
        _say(f"bench: {', '.join(cfg.ops)} on {', '.join(groups)} at {len(cfg.sizes)} sizes")
    bench = bw.run_bench(cfg, env=env, stages=BenchStages(rank, socket.gethostname(), env))
    timings["bench"] = round(time.monotonic() - t, 2)

    t = time.monotonic()
    if bench.nnodes > 1:  # the same node-pair pass as `bench` (localize.py), judged by the same rule
        pair_cfg = replace(cfg, pair_size=PAIR_SIZE[kind], iters=PAIR_ITERS, warmup=1)
        bw.measure_nodes(bench, pair_cfg, Stages(rank, socket.gethostname(), env), say=_say if rank == 0 else None)
    timings["localise"] = round(time.monotonic() - t, 2)
    findings = judge(bench, short_sweep=True) + coverage(bench, asked=False)
    bench_report = build_report(bench, findings)
    localisation = bench_report.data.pop("localisation")  # {"skipped": why} when there was no pair pass

    smoke_data = None
    if args.fsdp_smoke:
        t = time.monotonic()
        stage("fsdp-smoke")
        f, smoke_data = _smoke(bench, device, env)
        findings += f
        timings["fsdp_smoke"] = round(time.monotonic() - t, 2)

    return {
        "findings": [f.as_dict() for f in findings],
        "tables": [t.as_dict() for t in bench_report.tables],
        "notes": [f"bench: a short sweep ({', '.join(format_size(s) for s in cfg.sizes)}, {cfg.iters} iterations); run "
                  "`nccl-doctor bench` for the full one"] + list(bench_report.notes),
        "data": {"backend": bench.backend, "bench": bench_report.data, "localisation": localisation,
                 "fsdp_smoke": smoke_data},
        "timings_s": timings,
        "measured": not measured_nothing(bench),
    }


def _smoke(bench, device: str, env: Mapping[str, str]):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from nccl_doctor.preflight.fsdp_smoke import run_smoke

    mesh = init_device_mesh(device.split(":")[0], (bench.nnodes, bench.local_world_size),
                            mesh_dim_names=("dp", "fsdp"))
    r = run_smoke(mesh, checkpoint_base=env.get("NCCL_DOCTOR_FSDP_BASE") or None,
                  record=env.get("NCCL_DOCTOR_DCP_RECORD") or None)
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, {"rank": r.rank, "host": socket.gethostname(), "problems": r.problems,
                                      "losses": r.losses, "seconds": round(r.seconds, 2)})
    bad = [e for e in everyone if e["problems"]]
    shape = f"({bench.nnodes} dp x {bench.local_world_size} fsdp)"
    if bad:
        first = bad[0]
        findings = [Finding(code="ND410", severity=Severity.FAIL, where=Where(host=first["host"], rank=first["rank"]),
                            message=f"FSDP2 smoke test on the {shape} mesh failed on {plural(len(bad), 'rank')}: "
                                    f"{first['problems'][0]}",
                            fix="a shared checkpoint directory: --fsdp-smoke-dir on a shared file system"
                                if "shared file system" in first["problems"][0] else
                                "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO on the named rank",
                            evidence=tuple(f"rank {e['rank']} ({e['host']}): {p}" for e in bad for p in e["problems"]))]
    else:
        losses = everyone[0]["losses"]
        findings = [Finding(code="ND410", severity=Severity.PASS,
                            message=f"FSDP2 fully_shard on the {shape} mesh: {len(losses)} bf16 steps (loss "
                                    f"{losses[0]:.3f} -> {losses[-1]:.3f}), DCP save/load round trip equal on "
                                    f"all {len(everyone)} ranks")]
    return findings, {"ranks": everyone}
