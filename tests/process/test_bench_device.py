"""bench's ranks on the GPU path, driven on this CPU box: CUDA that cannot start fails the run with CUDA's own
error through a real launch (never a silent Gloo run), the guard turns PyTorch's blocking-wait error into a
``BenchFailure`` naming the missing ranks, and the buffers really are in place where the report says so."""

import json
import os
import subprocess
import sys

import pytest

from nccl_doctor.bench.device import TEST_CUDA_ENV

# serial: a failing rank waits at most 5 s for rank 0 to record its code (bench worker); on a loaded box rank 0
# can miss it and the report is lost (seen once under -n 2: empty stdout, exit 1)
pytestmark = [pytest.mark.torch, pytest.mark.serial]


def env(**kw):
    e = dict(os.environ, PYTHONWARNINGS="ignore")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "GLOO_SOCKET_IFNAME", "MASTER_PORT",
                TEST_CUDA_ENV):
        e.pop(var, None)
    e.update(kw)
    return e


def bench(tmp_path, *argv, **kw):
    """A bench launch that fails keeps its launch log in TMPDIR: the test's own directory, never /tmp."""
    kw.setdefault("TMPDIR", str(tmp_path))
    return subprocess.run([sys.executable, "-m", "nccl_doctor", "bench", "--sizes", "64K", "--iters", "2",
                           "--no-pairs", "--format", "json", *argv], capture_output=True, text=True, check=False,
                          timeout=180, env=env(**kw))


def test_gpus_visible_but_torch_is_a_cpu_build_fails_instead_of_running_gloo(tmp_path):
    """This box's torch is a CPU-only wheel: with two GPUs visible the ranks must not fall back to Gloo."""
    proc = bench(tmp_path, "--json-out", str(tmp_path / "r.json"), CUDA_VISIBLE_DEVICES="0,1")
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "init" and doc["backend"] == "nccl" and doc["results"] == []
    (f,) = doc["findings"]
    assert f["code"] == "ND313" and f["severity"] == "fail"
    assert "CPU-only build" in f["message"] and "CUDA_VISIBLE_DEVICES=0,1" in f["message"]
    assert "download.pytorch.org" in f["fix"] and "NCCL_SOCKET_IFNAME" not in f["fix"]
    assert json.loads((tmp_path / "r.json").read_text())["findings"][0]["code"] == "ND313"


def test_error_802_reaches_the_report_and_the_exit_code(tmp_path):
    proc = bench(tmp_path, CUDA_VISIBLE_DEVICES="0,1", **{TEST_CUDA_ENV: "802"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    (f,) = json.loads(proc.stdout)["findings"]
    assert f["code"] == "ND313" and "Error 802: system not yet initialized" in f["message"]
    assert "nvidia-fabricmanager" in f["fix"]
    assert json.loads(proc.stdout)["cuda_error"].endswith("Error 802: system not yet initialized")


def test_more_local_ranks_than_gpus_is_named_not_blamed_on_the_network(tmp_path):
    proc = bench(tmp_path, "--nproc-per-node", "2", CUDA_VISIBLE_DEVICES="0,1", **{TEST_CUDA_ENV: "1"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    (f,) = json.loads(proc.stdout)["findings"]
    assert f["code"] == "ND313" and "only 1 GPU(s)" in f["message"] and "--nproc-per-node 1" in f["fix"]
    assert "SOCKET_IFNAME" not in f["fix"]


GUARD = r"""
import sys
from datetime import timedelta
import torch.distributed as dist
from nccl_doctor.bench import worker as bw
from nccl_doctor.bench.model import BenchFailure

store = dist.HashStore()
dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=timedelta(seconds=5))
stages = bw.Stages(0, "here", {})
stages.enter("all_gather world 1 GiB")  # rank 0 arrived; rank 1 ("n2") never did
bw.Stages(2, "n3", {}).enter("all_gather world 1 GiB")  # rank 2 did (its mark in the same store)


def blocked_wait():  # what Work.wait() raises under TORCH_NCCL_BLOCKING_WAIT=1 when the collective times out
    dist.all_reduce(__import__("torch").zeros(1))
    raise dist.DistBackendError("[Rank 0] Work WorkNCCL(SeqNum=7, OpType=ALLGATHER) timed out in blocking wait "
                                "after 120000 milliseconds")


try:
    bw._guard(stages, [0, 1, 2], {1: "n2", 2: "n3"}, blocked_wait)
except BenchFailure as f:
    print(f.stage, f.missing, f.hosts, f.error.split(" after")[0], sep="|")
    sys.exit(0)
sys.exit(3)
"""


def test_the_guard_turns_a_blocking_wait_timeout_into_a_failure_naming_the_missing_ranks():
    proc = subprocess.run([sys.executable, "-c", GUARD], capture_output=True, text=True, check=False, timeout=120,
                          env=env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == ("all_gather world 1 GiB|[1]|['n2']|[Rank 0] Work WorkNCCL(SeqNum=7, "
                                   "OpType=ALLGATHER) timed out in blocking wait")


PLACES = r"""
from nccl_doctor.bench import worker as bw
from nccl_doctor.bench.busbw import Op
for op in Op:
    fn, inp, out, count = bw._buffers(op, 1 << 16, 2, 0, "cpu")
    print(op, inp.data_ptr() == out.data_ptr())
"""


def test_the_reports_in_place_label_matches_the_buffers():
    """nccl-tests' meaning: all-reduce is in place when send == recv (ours), AG/RS out of place (own buffers)."""
    from nccl_doctor.bench.view import in_place

    proc = subprocess.run([sys.executable, "-c", PLACES], capture_output=True, text=True, check=False, timeout=120,
                          env=env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(line.split() for line in proc.stdout.splitlines())
    assert got == {op: str(in_place(op)) for op in got} and got["all_reduce"] == "True"
