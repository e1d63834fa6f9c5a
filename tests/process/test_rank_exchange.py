"""What ranks tell each other (``bench.exchange``), attacked by a hostile rank on a real 2-rank Gloo world.

Rank 1 speaks the object collectives' wire format (its length, then its bytes padded to the longest: what
``all_gather_object`` sends) with a pickle whose unpickling runs ``touch MARKER``. Rank 0 reads it the way
nccl-doctor does now: JSON only, so the payload is ``Malformed`` naming rank 1, topology data from it fails
the stage naming rank 1, and a smoke result from it is rank 1's problem; never a traceback, and the marker
never appears. The control: rank 0 reading the same bytes with ``dist.all_gather_object`` (what bench and
preflight used to call) runs the payload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nccl_doctor.cluster.net import free_port

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[2]

RANKS = textwrap.dedent("""
    import json, os, pickle, sys
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from nccl_doctor.leave import leave_now
    from tests.helpers.rdzv_attack import Touch

    mode, marker = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    if rank == 1:  # hostile: the object collectives' wire format, a pickle (or JSON of the wrong shape) inside
        data = json.dumps({"rank": 5, "host": 7}).encode() if mode == "shape" else pickle.dumps(Touch(marker))
        mine = torch.tensor([len(data)], dtype=torch.int64)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(sizes, mine)
        width = int(max(s.item() for s in sizes))
        buf = torch.zeros(width, dtype=torch.uint8)
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        dist.all_gather([torch.zeros(width, dtype=torch.uint8) for _ in range(2)], buf)
        print(json.dumps({"rank": 1}))
    else:
        from nccl_doctor.bench import worker as bw
        from nccl_doctor.preflight.worker import smoke_entry
        out = {"rank": 0}
        if mode == "object":  # the control: what bench and preflight used to call
            got = [None, None]
            try:
                dist.all_gather_object(got, {"rank": 0})
            except Exception as exc:
                out["error"] = type(exc).__name__
        elif mode == "json":
            got = bw.all_gather_json({"rank": 0})
            out["malformed"] = [g.rank for g in got if isinstance(g, bw.Malformed)]
        elif mode == "topology":
            try:
                bw.gather_nodes(os.environ, "gloo")
            except RuntimeError as exc:  # the stage guard turns it into a FAIL naming the stage
                out["error"] = str(exc)
        elif mode == "shape":
            got = bw.all_gather_json({"rank": 0})
            out["entry"] = smoke_entry(1, got[1])
        print(json.dumps(out))
    dist.barrier()
    leave_now(0)  # as the product's ranks end (leave.py): Gloo's teardown can abort a passing process
""")


def _two_ranks(mode: str, marker: Path) -> list[dict]:
    port = free_port()
    env = dict(os.environ, PYTHONWARNINGS="ignore", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", RANKS, mode, str(marker)], cwd=ROOT,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=90)
            assert p.returncode == 0 and "Traceback" not in err, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
    return results


def test_a_pickle_from_a_hostile_rank_is_malformed_json_and_never_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    r0, _ = _two_ranks("json", marker)
    assert r0["malformed"] == [1] and not marker.exists()


def test_topology_data_from_a_hostile_rank_fails_naming_it(tmp_path):
    marker = tmp_path / "payload-ran"
    r0, _ = _two_ranks("topology", marker)
    assert r0["error"].startswith("rank 1 sent malformed topology data (not JSON") and not marker.exists()


def test_a_smoke_result_of_the_wrong_shape_is_that_ranks_problem(tmp_path):
    r0, _ = _two_ranks("shape", tmp_path / "payload-ran")
    entry = r0["entry"]
    assert entry["rank"] == 1 and entry["host"] == "unknown", entry
    assert entry["problems"] == ["rank 1 sent a malformed smoke-test result ('host' missing or of the wrong type)"]


def test_the_same_bytes_run_code_through_all_gather_object(tmp_path):
    """The control: the hostile rank is real; ``all_gather_object`` unpickles its payload."""
    marker = tmp_path / "payload-ran"
    _two_ranks("object", marker)
    assert marker.exists()
