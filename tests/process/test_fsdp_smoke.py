"""``--fsdp-smoke`` on its own: FSDP2 on a real 2x2 ("dp", "fsdp") gloo mesh in 4 processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from nccl_doctor.cluster.net import free_port

pytestmark = pytest.mark.torch

WORKER = textwrap.dedent("""
    import json, os, sys
    from datetime import timedelta
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from nccl_doctor.leave import leave_now
    from nccl_doctor.preflight.fsdp_smoke import run_smoke
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "fsdp"))
    r = run_smoke(mesh, checkpoint_base=sys.argv[1])
    print(json.dumps({"rank": r.rank, "losses": r.losses, "problems": r.problems}))
    dist.barrier()
    leave_now(0)  # as the product's ranks end (leave.py): Gloo's teardown can abort a passing process
""")


def _run_ranks(worker: str, world: int, env: dict, *argv: str, local: int, timeout: float) -> list:
    """``world`` ranks of ``worker`` (a ``python -c`` script) on one Gloo world; each one's last stdout line as
    JSON, in rank order. A rank that fails fails the test with its stderr."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-c", worker, *argv],
                              env=dict(env, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank % local),
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(world)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
    return results


@pytest.mark.timeout(120)
def test_fsdp2_hsdp_smoke_trains_and_round_trips_dcp(tmp_path, venv_env):
    results = _run_ranks(WORKER, 4, venv_env, str(tmp_path), local=2, timeout=100)
    assert [r["problems"] for r in results] == [[], [], [], []]
    for r in results:  # one fixed batch per replica: the loss falls at every step
        losses = r["losses"]
        assert len(losses) == 3 and all(x > 0 for x in losses)
        assert losses[0] > losses[1] > losses[2], losses
    # replicas along "dp" trained on different data but hold the same (all-reduced) parameters:
    # their losses at step 1 (same init) differ only through the data
    assert results[0]["losses"][0] == results[1]["losses"][0]  # same fsdp group, same batch
    assert list(tmp_path.iterdir()) == [], "the checkpoint directory must be removed afterwards"


MISMATCH_WORKER = textwrap.dedent("""
    import json
    from datetime import timedelta
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from nccl_doctor.leave import leave_now
    from nccl_doctor.preflight.fsdp_smoke import replica_mismatches
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (2, 1), mesh_dim_names=("dp", "fsdp"))
    rank = dist.get_rank()
    state = {"same": torch.arange(6.0), "planted": torch.full((4,), float(rank)), "step": 3}
    print(json.dumps(replica_mismatches(state, mesh)), flush=True)
    dist.barrier()
    leave_now(0)
""")


@pytest.mark.timeout(90)
def test_replicas_that_diverged_are_named_on_every_rank(venv_env):
    """A tensor that differs between the two "dp" replicas is named (exactly: the shards are compared, not
    checksums); equal tensors and plain values are not."""
    outs = _run_ranks(MISMATCH_WORKER, 2, venv_env, local=2, timeout=60)
    assert outs == [["planted"], ["planted"]]
