"""The plan's typed values: what it was given (each figure with where it came from) and what it computed."""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}  # --param-dtype / --reduce-dtype
TORCH_DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


@dataclass(frozen=True, kw_only=True)
class Figure:
    """A number with where it came from (a flag, or a file and the result in it): JSON ``inputs``."""

    value: float
    source: str

    def as_dict(self) -> dict[str, float | str]:
        return {"value": self.value, "source": self.source}


@dataclass(frozen=True, kw_only=True)
class Bandwidths:
    """Bus bandwidths in GB/s (1e9 bytes/s, nccl-tests' definition); None where nothing gave one."""

    intra_all_gather: Figure | None = None
    intra_reduce_scatter: Figure | None = None
    world_all_gather: Figure | None = None
    world_reduce_scatter: Figure | None = None
    inter_all_reduce: Figure | None = None


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What a bench or preflight JSON tells the plan."""

    nodes: Figure | None
    gpus_per_node: Figure | None
    bandwidths: Bandwidths
    failed: str | None  # why the run that measured them failed (its verdict), None when it did not
    cpu_run: str | None = None  # the run measured CPUs (Gloo), not GPUs: what says so; None for a GPU run


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """Everything the model needs, every figure sourced."""

    params: Figure
    nodes: Figure
    gpus_per_node: Figure
    param_dtype: str
    reduce_dtype: str
    gpu_mem_gb: Figure | None  # None: not sized (a CPU run's figures and no --gpu-mem-gb: no GPU to size)
    headroom: Figure
    step_compute_s: Figure | None
    bandwidths: Bandwidths
    failed: str | None = None
    cpu_run: str | None = None  # the figures are a CPU run's (``Measured.cpu_run``)

    @property
    def world(self) -> int:
        return int(self.nodes.value) * int(self.gpus_per_node.value)

    @property
    def gpus(self) -> int:
        return int(self.gpus_per_node.value)


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One mesh: ``replicas`` x ``shard_size`` GPUs (S = W is FSDP, R = W / S replicas of HSDP)."""

    shard_size: int
    replicas: int
    state_gb_per_gpu: float
    fits: bool | None  # None: GPU memory not sized (``PlanInputs.gpu_mem_gb``), so never claimed to fit
    comm_s: float
    compute_share: float | None = None  # comm_s / --step-compute-s

    @property
    def mesh(self) -> tuple[int, int]:
        return (self.replicas, self.shard_size)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Every candidate, the recommended one (None when none fits) and, then, the GPUs it would take."""

    candidates: tuple[Candidate, ...]
    recommended: Candidate | None
    gpus_needed: int | None = None
