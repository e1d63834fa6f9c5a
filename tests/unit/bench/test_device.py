"""The device/backend choice (``bench.device``): NCCL on the rank's GPU, Gloo only with --cpu or where no GPU is
expected, and CUDA that cannot start is a failure with CUDA's own error and the fix, never a silent Gloo."""

import pytest

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.device import (
    ERROR_802,
    TEST_CUDA_ENV,
    CudaUnusable,
    FakeCuda,
    GpusExpected,
    choose,
    cuda_from_test_env,
    expects_nccl,
    gpus_expected,
)

EIGHT = GpusExpected(8, "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")
NONE = GpusExpected(0, "")


def pick(cuda, *, local_rank=0, local_world_size=8, expected=EIGHT, force_cpu=False):
    return choose(cuda, local_rank=local_rank, local_world_size=local_world_size, expected=expected,
                  force_cpu=force_cpu)


def test_working_cuda_gives_nccl_on_the_local_rank_gpu():
    got = pick(FakeCuda(count=8), local_rank=3)
    assert got.backend is Backend.NCCL and got.device == "cuda:3" and got.use_cuda


def test_cpu_flag_gives_gloo_even_with_gpus():
    got = pick(FakeCuda(count=8), force_cpu=True)
    assert got.backend is Backend.GLOO and got.device == "cpu"


def test_no_gpu_expected_and_none_there_is_gloo():
    assert pick(FakeCuda(), expected=NONE).backend is Backend.GLOO
    assert pick(FakeCuda(version=None), expected=NONE).backend is Backend.GLOO  # CPU wheel on a CPU box


def test_unavailable_cuda_with_gpus_expected_fails_with_cudas_error():
    with pytest.raises(CudaUnusable) as info:
        pick(FakeCuda())
    exc = info.value
    assert "CUDA driver initialization failed" in exc.reason and "8 GPU(s) expected" in exc.reason
    assert "nvidia-smi" in exc.fix and "--cpu" in exc.fix
    assert "NCCL_SOCKET_IFNAME" not in str(exc)


def test_error_802_names_the_fabric_manager():
    with pytest.raises(CudaUnusable) as info:
        pick(FakeCuda(error=ERROR_802))
    assert "Error 802: system not yet initialized" in info.value.reason
    assert info.value.cuda_error is not None and "802" in info.value.cuda_error
    assert "nvidia-fabricmanager" in info.value.fix


def test_cpu_only_torch_build_says_so():
    with pytest.raises(CudaUnusable) as info:
        pick(FakeCuda(version=None), expected=GpusExpected(4, "SLURM_GPUS_ON_NODE=4"))
    assert "CPU-only build" in info.value.reason and "SLURM_GPUS_ON_NODE=4" in info.value.reason
    assert "download.pytorch.org" in info.value.fix


@pytest.mark.parametrize("local_rank", [4, 7])
def test_local_rank_beyond_the_visible_gpus_fails_with_the_gpu_count(local_rank):
    with pytest.raises(CudaUnusable) as info:
        pick(FakeCuda(count=4), local_rank=local_rank)
    msg = str(info.value)
    assert f"LOCAL_RANK {local_rank} has no GPU of its own" in msg and "only 4 GPU(s)" in msg
    assert "--nproc-per-node 4" in msg and "NCCL_SOCKET_IFNAME" not in msg


def test_every_local_rank_fails_when_the_node_has_too_few_gpus():
    """Rank 0 too: it renders the report, and must not wait in init for ranks that already failed."""
    with pytest.raises(CudaUnusable, match="would share a GPU"):
        pick(FakeCuda(count=4), local_rank=0, local_world_size=8)


def test_without_local_world_size_only_the_rank_itself_counts():
    assert pick(FakeCuda(count=1), local_rank=0, local_world_size=None).device == "cuda:0"
    with pytest.raises(CudaUnusable):
        pick(FakeCuda(count=1), local_rank=1, local_world_size=None)


def test_gpus_expected_from_the_environment(tmp_path):
    assert gpus_expected({"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path) == GpusExpected(2, "CUDA_VISIBLE_DEVICES=0,1")
    assert gpus_expected({"CUDA_VISIBLE_DEVICES": ""}, tmp_path).count == 0
    assert gpus_expected({"SLURM_GPUS_ON_NODE": "4"}, tmp_path) == GpusExpected(4, "SLURM_GPUS_ON_NODE=4")
    (tmp_path / "nvidia0").touch()
    (tmp_path / "nvidiactl").touch()
    assert gpus_expected({}, tmp_path).count == 1
    assert expects_nccl({}, force_cpu=False, dev_root=tmp_path)
    assert not expects_nccl({}, force_cpu=True, dev_root=tmp_path)


def test_the_test_seam():
    assert cuda_from_test_env({}) is None
    assert not cuda_from_test_env({TEST_CUDA_ENV: "unavailable"}).is_available()
    with pytest.raises(RuntimeError, match="802"):
        cuda_from_test_env({TEST_CUDA_ENV: "802"}).init()
    assert cuda_from_test_env({TEST_CUDA_ENV: "cpu-build"}).version is None
    assert cuda_from_test_env({TEST_CUDA_ENV: "2"}).device_count() == 2
    with pytest.raises(ValueError, match=TEST_CUDA_ENV):
        cuda_from_test_env({TEST_CUDA_ENV: "maybe"})
