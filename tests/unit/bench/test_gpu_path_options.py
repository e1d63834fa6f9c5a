"""bench's options on the GPU path: ``--warmup 0`` is refused where the ranks will run NCCL (its first timed
iteration would hold the connection setup), and ``--cpu`` on GPU nodes is measured without NVLink's yardstick."""

import json
import os

import pytest

from nccl_doctor.bench import command as bench
from nccl_doctor.bench.device import CudaUnusable
from nccl_doctor.bench.expected import expected_bandwidth
from nccl_doctor.bench.figures import group_expected
from nccl_doctor.bench.model import BenchResult, Group, Measurement, NodeInfo
from nccl_doctor.bench.options import BenchOptions
from nccl_doctor.bench.view import build_report
from nccl_doctor.cli import finish, parse_options
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, StageFile, read_stages
from nccl_doctor.errors import InputError
from nccl_doctor.node import probe_node
from nccl_doctor.outputs import OutputOptions
from tests.helpers import sysfs_builder as b


def args(*argv):
    _, options = parse_options(["bench", *argv])
    return options


def test_warmup_0_on_nccl_is_refused_in_one_line(monkeypatch):
    monkeypatch.delenv("MASTER_PORT", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(InputError, match=r"^--warmup 0 on NCCL would time the connection setup.*--warmup 1"):
        bench.check_environment(args("--warmup", "0"), os.environ)
    bench.check_environment(args("--warmup", "0", "--cpu"), os.environ)  # Gloo: allowed
    bench.check_environment(args("--warmup", "1"), os.environ)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: Gloo
    bench.check_environment(args("--warmup", "0"), os.environ)


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    return probe_node(b.build(b.SPECS["dgx_h100"](), tmp_path_factory.mktemp("dgx")), {})


def test_gloo_on_gpu_nodes_has_no_intra_node_yardstick(dgx):
    nccl, gloo = expected_bandwidth(dgx, "nccl"), expected_bandwidth(dgx, "gloo")
    assert nccl.intra_gbps == pytest.approx(370.0)
    assert gloo.intra_gbps is None and "Gloo" in (gloo.intra_basis or "") and "NVLink" in (gloo.intra_basis or "")


def test_cpu_run_on_one_gpu_node_is_not_judged_against_nvlink(dgx):
    """--cpu on a DGX: world on one node is an intra-node group; Gloo's 1 GB/s is not "0.3% of expected"."""
    node = NodeInfo(index=0, host="dgx1", ranks=(0, 1), iface="bond0", link_gbps=6.25,
                    expected=expected_bandwidth(dgx, "gloo"))
    result = BenchResult(backend="gloo", device="cpu", world_size=2, local_world_size=2, nodes=[node],
                         results=[bench_meas()])
    assert group_expected(result, Group.WORLD) is None
    report = build_report(result, [])
    (row,) = report.data["results"]
    assert row["expected_gbps"] is None and row["pct_of_expected"] is None
    assert any("intra-node" in n and "Gloo" in n for n in report.notes), report.notes
    assert not any("NVLink 4" in n for n in report.notes)


def bench_meas():
    return Measurement(op="all_gather", group="world", group_size=2, size_bytes=64 << 20, count=1 << 23, iters=5,
                       time_us=64000.0, algbw_gbps=1.05, busbw_gbps=0.52, wrong=0)


def test_cuda_failure_is_reported_by_each_nodes_first_rank_and_recorded_for_the_launcher(tmp_path, capsys):
    """Node 2's local rank 0 (global rank 8) renders ND313: on that node no global rank 0 would say anything."""
    env = {"RANK": "8", "LOCAL_RANK": "0", STAGE_DIR_ENV: str(tmp_path)}
    exc = CudaUnusable("8 GPU(s) expected (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7) but CUDA 12.8 cannot be used: "
                       "RuntimeError: ... Error 802: system not yet initialized", "run `nvidia-smi`",
                       cuda_error="RuntimeError: ... Error 802: system not yet initialized")
    report = bench.cuda_report(exc, "gpu9", env, ["a note"])
    assert report.data["stage"] == "init" and report.data["backend"] == "nccl"
    assert report.data["cuda_error"].endswith("Error 802: system not yet initialized")
    a = BenchOptions(output=OutputOptions(format="json"))
    outcome = bench._finish(a, 8, StageFile(8, "gpu9", env), report, shared=False, render=True, error=exc.reason)
    assert outcome.report is report and finish(outcome, "bench", a.output, ()) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["code"] == "ND313" and report.notes == ["a note"]
    (rec,) = read_stages(tmp_path)
    assert (rec.rank, rec.stage, rec.code) == (8, "failed", 1) and "Error 802" in (rec.error or "")
