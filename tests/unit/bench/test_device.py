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
    with pytest.raises(CudaUnusable, match="LOCAL_RANK 2 has no GPU of its own"):
        pick(FakeCuda(count=2), local_rank=2, local_world_size=None)


@pytest.mark.parametrize("local_rank", [1, 3, 7])
def test_one_device_per_process_is_cuda_0_whatever_the_local_rank(local_rank):
    """Issue 21 point 12: under per-task GPU binding (``srun --gpus-per-task=1``, a MIG device per task) CUDA
    shows each process one device, ordinal 0; LOCAL_RANK 3 used to ask for cuda:3 and fail (a false ND313)."""
    got = pick(FakeCuda(count=1), local_rank=local_rank, local_world_size=None)
    assert (got.backend, got.device, got.device_index) == (Backend.NCCL, "cuda:0", 0)


def test_the_choice_carries_the_ordinal_set_device_uses():
    assert pick(FakeCuda(count=8), local_rank=5).device_index == 5
    assert pick(FakeCuda(count=1), local_rank=0, local_world_size=1).device_index == 0
    assert pick(FakeCuda(count=8), force_cpu=True).device_index is None


def test_ranks_started_together_on_one_device_still_fail():
    """torchrun and our launchers give every rank the same CUDA_VISIBLE_DEVICES: with LOCAL_WORLD_SIZE 4 and one
    device the four would share it."""
    with pytest.raises(CudaUnusable, match="LOCAL_RANK 3 has no GPU of its own"):
        pick(FakeCuda(count=1), local_rank=3, local_world_size=4,
             expected=GpusExpected(1, "CUDA_VISIBLE_DEVICES=0"))


MIG_LIST = "MIG-4f2a1c3e-5b6d-5e7f-8a9b-0c1d2e3f4a5b,MIG-7d8e9f0a-1b2c-5d3e-4f5a-6b7c8d9e0f1a"


def test_a_list_of_mig_devices_is_one_device_to_cuda(tmp_path):
    expected = gpus_expected({"CUDA_VISIBLE_DEVICES": MIG_LIST}, tmp_path)
    assert expected.count == 1 and expected.mig and "one MIG device" in expected.source
    assert pick(FakeCuda(count=1), local_rank=0, local_world_size=1, expected=expected).device == "cuda:0"


def test_ranks_sharing_a_mig_list_are_told_cuda_shows_one():
    expected = GpusExpected(1, f"CUDA_VISIBLE_DEVICES={MIG_LIST}: CUDA shows each process one MIG device", mig=True)
    with pytest.raises(CudaUnusable) as info:
        pick(FakeCuda(count=1), local_rank=1, local_world_size=2, expected=expected)
    assert "on MIG devices" in info.value.reason and "--nproc-per-node 1" in info.value.fix
    assert "--gpus-per-task=1" in info.value.fix


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
