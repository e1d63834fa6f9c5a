"""Which backend and device a rank uses: NCCL on its own GPU, or Gloo on the CPU, and never Gloo by accident.

``torch.cuda.is_available()`` returns False with only a warning when CUDA cannot start (the fabric manager of
an NVSwitch node is down: error 802; a driver older than torch's CUDA; a CPU-only torch wheel), so ranks sized
by the GPUs would silently run Gloo. ``choose`` is a pure function over a small facade of ``torch.cuda``
(``CudaApi``): without ``--cpu``, a rank that should have a GPU and cannot use one raises ``CudaUnusable``
with CUDA's own error and the fix. Torch-free: the worker hands in ``torch.cuda``; tests hand in fakes, and
``NCCL_DOCTOR_TEST_CUDA`` makes a real rank see one (``cuda_from_test_env``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nccl_doctor.bench.backend import Backend
from nccl_doctor.cluster.slurm import visible_gpus
from nccl_doctor.cudavisible import visible_devices

# test seam: "unavailable" (cuInit fails), "802" (the fabric manager is down), or a number N (CUDA works and
# shows N GPUs: fewer than the local ranks makes the ranks fail; enough makes them really try CUDA)
TEST_CUDA_ENV = "NCCL_DOCTOR_TEST_CUDA"
# what torch raises (c10/cuda/CUDAFunctions.cpp device_count_impl, torch/cuda/__init__.py _lazy_init)
NO_DRIVER_INIT = "CUDA driver initialization failed, you might not have a CUDA gpu."
ERROR_802 = ("Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
             "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized")
NOT_COMPILED = "Torch not compiled with CUDA enabled"
FIX_CUDA = ("run `nvidia-smi` on this node: it must list every GPU without an error; on NVSwitch nodes (HGX/DGX) "
            "error 802 \"system not yet initialized\" means nvidia-fabricmanager is not running (`systemctl status "
            "nvidia-fabricmanager`; its version must match the driver's); a driver older than this torch's CUDA "
            "needs a driver update or a torch build for it; or pass --cpu to test the network with Gloo only")
FIX_CPU_BUILD = ("install a CUDA build of torch (pip install torch --index-url https://download.pytorch.org/whl/"
                 "cu<version>, matching the driver's CUDA in `nvidia-smi`), or pass --cpu to test the network with "
                 "Gloo only")
MIG_ONE_DEVICE = "CUDA shows each process one MIG device, the first listed"


class CudaApi(Protocol):
    """What ``choose`` reads from ``torch.cuda`` (and ``torch.version.cuda``)."""

    @property
    def version(self) -> str | None: ...  # torch.version.cuda: None in a CPU-only wheel

    def is_available(self) -> bool: ...

    def device_count(self) -> int: ...

    def init(self) -> None: ...  # raises CUDA's own reason when it cannot start


@dataclass(frozen=True, kw_only=True)
class Choice:
    backend: Backend
    device: str  # "cuda:<device_index>" or "cpu"
    device_index: int | None = None  # the CUDA ordinal for ``torch.cuda.set_device``; None on CPU

    @property
    def use_cuda(self) -> bool:
        return self.backend is Backend.NCCL


class CudaUnusable(RuntimeError):  # noqa: N818 - a node's state, reported as a finding
    """This rank should run NCCL on a GPU and cannot: ``reason`` (CUDA's own words) and ``fix``."""

    def __init__(self, reason: str, fix: str, *, cuda_error: str | None = None):
        self.reason, self.fix, self.cuda_error = reason, fix, cuda_error
        super().__init__(f"{reason}. Fix: {fix}")


@dataclass(frozen=True)
class GpusExpected:
    count: int
    source: str  # "CUDA_VISIBLE_DEVICES=0,1", "/dev/nvidia*", "SLURM_GPUS_ON_NODE=4", or "" when none
    mig: bool = False  # CUDA_VISIBLE_DEVICES lists MIG devices: CUDA shows each process one (``cudavisible``)


def gpus_expected(env: Mapping[str, str], dev_root: Path = Path("/dev")) -> GpusExpected:
    """The GPUs this node's ranks are meant to use, as the launcher sizes them (``cluster.default_nproc``)."""
    n = visible_gpus(env, dev_root)
    if n:
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        visible = visible_devices(cvd)
        if visible is not None and visible.mig:
            return GpusExpected(n, f"CUDA_VISIBLE_DEVICES={cvd}: {MIG_ONE_DEVICE}", mig=True)
        return GpusExpected(n, f"CUDA_VISIBLE_DEVICES={cvd}" if cvd is not None else f"{n} x {dev_root}/nvidia*")
    slurm = env.get("SLURM_GPUS_ON_NODE", "").strip()
    if slurm.isdigit() and int(slurm) > 0:
        return GpusExpected(int(slurm), f"SLURM_GPUS_ON_NODE={slurm}")
    return GpusExpected(0, "")


def expects_nccl(env: Mapping[str, str], *, force_cpu: bool, dev_root: Path = Path("/dev")) -> bool:
    """The ranks will run NCCL (or fail): GPUs are expected and ``--cpu`` was not given."""
    return not force_cpu and gpus_expected(env, dev_root).count > 0


def device_index(count: int, *, local_rank: int, local_world_size: int | None) -> int | None:
    """The CUDA ordinal this rank uses, or None when CUDA's ``count`` devices cannot give it one of its own.

    ``cuda:<local_rank>`` when the process sees a GPU for every local rank. ``cuda:0`` when it sees exactly
    one device and nothing says other ranks see the same one: a launcher that binds each process to its own
    GPU (``srun --gpus-per-task=1``, a MIG device per task) gives LOCAL_RANK 3 one device, ordinal 0, and no
    LOCAL_WORLD_SIZE. Where LOCAL_WORLD_SIZE says several ranks were started together (torchrun, our own
    launchers: they pass every rank the same CUDA_VISIBLE_DEVICES), one device means they would share it."""
    ranks = max(local_rank + 1, local_world_size or 0)
    if count >= ranks:
        return local_rank
    if count == 1 and (local_world_size or 1) == 1:
        return 0
    return None


def choose(cuda: CudaApi, *, local_rank: int, local_world_size: int | None, expected: GpusExpected,
           force_cpu: bool) -> Choice:
    """NCCL on this rank's GPU (``device_index``) when CUDA works and has one for every local rank; Gloo on
    CPU with ``--cpu`` or where no GPU is expected. Raises ``CudaUnusable`` where GPUs are expected and CUDA
    cannot serve them (unavailable, or fewer GPUs than local ranks): never a silent Gloo."""
    if force_cpu:
        return Choice(backend=Backend.GLOO, device="cpu")
    if cuda.is_available():
        count = cuda.device_count()
        ranks = max(local_rank + 1, local_world_size or 0)
        index = device_index(count, local_rank=local_rank, local_world_size=local_world_size)
        if index is not None:
            return Choice(backend=Backend.NCCL, device=f"cuda:{index}", device_index=index)
        if expected.mig:
            raise CudaUnusable(
                f"this node starts {ranks} rank(s) on MIG devices but {MIG_ONE_DEVICE}: every rank would run on "
                f"the first one ({expected.source})",
                "start one rank per node (--nproc-per-node 1), or give each process its own MIG device "
                "(CUDA_VISIBLE_DEVICES=MIG-<uuid> per task: `srun --gpus-per-task=1`); `nvidia-smi -L` lists them")
        raise CudaUnusable(
            f"this node starts {ranks} rank(s) but CUDA shows only {count} GPU(s): LOCAL_RANK {local_rank}"
            + (" has no GPU of its own" if count <= local_rank else " would share a GPU with another rank")
            + (f" ({expected.source})" if expected.source else ""),
            f"start at most {count} rank(s) per node (--nproc-per-node {count}) or make every GPU visible "
            "(CUDA_VISIBLE_DEVICES, the job's --gpus-per-node); `nvidia-smi -L` lists what the node has")
    if not expected.count:
        return Choice(backend=Backend.GLOO, device="cpu")
    where = f"{expected.count} GPU(s) expected ({expected.source})"
    if cuda.version is None:
        raise CudaUnusable(f"{where} but this torch is a CPU-only build (torch.version.cuda is None: "
                           f"{NOT_COMPILED})", FIX_CPU_BUILD, cuda_error=NOT_COMPILED)
    try:
        cuda.init()
        error = f"torch.cuda.is_available() is False and device_count() is {cuda.device_count()}"
    except Exception as exc:  # torch raises RuntimeError (CUDA's reason) or AssertionError (a broken build)
        error = f"{type(exc).__name__}: {exc}"
    raise CudaUnusable(f"{where} but CUDA {cuda.version} cannot be used: {error}", FIX_CUDA, cuda_error=error)


# --- the test seam ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FakeCuda:
    """A ``CudaApi`` that answers from fixed facts (unit tests, and ``NCCL_DOCTOR_TEST_CUDA`` in real ranks)."""

    count: int = 0
    error: str | None = NO_DRIVER_INIT  # what init() raises when count is 0
    version: str | None = "12.8"

    def is_available(self) -> bool:
        return self.count > 0 and self.version is not None

    def device_count(self) -> int:
        return self.count if self.version is not None else 0

    def init(self) -> None:
        if self.version is None:
            raise AssertionError(NOT_COMPILED)
        if not self.count:
            raise RuntimeError(self.error or "No CUDA GPUs are available")


def cuda_from_test_env(env: Mapping[str, str] = os.environ) -> FakeCuda | None:
    """The fake ``NCCL_DOCTOR_TEST_CUDA`` asks for: "unavailable", "802", "cpu-build" or a GPU count; None
    when unset (the real ``torch.cuda``)."""
    value = env.get(TEST_CUDA_ENV, "").strip()
    if not value:
        return None
    if value == "unavailable":
        return FakeCuda()
    if value == "802":
        return FakeCuda(error=ERROR_802)
    if value == "cpu-build":
        return FakeCuda(version=None)
    if value.isdigit():
        return FakeCuda(count=int(value), error="No CUDA GPUs are available")
    raise ValueError(f"{TEST_CUDA_ENV}={value!r}: expected unavailable, 802, cpu-build or a number of GPUs")
