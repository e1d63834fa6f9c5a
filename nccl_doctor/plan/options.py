"""``plan``'s options, as the CLI hands them to ``plan.command`` (built from the parsed command line).

The parser checks each figure as it reads it (``plan.command``'s argument types); the same bounds hold here
for options built in code, so a plan never divides by a zero bandwidth or a negative GPU count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.outputs import OutputOptions
from nccl_doctor.plan.model import DTYPE_BYTES

POSITIVE = ("nodes", "gpus_per_node", "intra_gbps", "inter_gbps", "gpu_mem_gb", "headroom", "step_compute_s")
# (field, flag) in the order the command line gives them back
FIGURES = (("nodes", "--nodes"), ("gpus_per_node", "--gpus-per-node"), ("from_file", "--from"),
           ("intra_gbps", "--intra-gbps"), ("inter_gbps", "--inter-gbps"), ("gpu_mem_gb", "--gpu-mem-gb"),
           ("headroom", "--headroom"), ("step_compute_s", "--step-compute-s"))


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """The model and the figures ``nccl-doctor plan`` recommends a mesh from (a flag overrides ``--from``)."""

    params: str
    """``--params``: model parameters as given (7e9, 7B, 70B, 1.3T, 350M); ``plan.parse_params`` reads it."""
    nodes: int | None = None
    """``--nodes``: nodes (None: from ``--from``)."""
    gpus_per_node: int | None = None
    """``--gpus-per-node``: GPUs per node (None: from ``--from``)."""
    from_file: Path | None = None
    """``--from``: a bench or preflight JSON report to take nodes, GPUs and bus bandwidths from."""
    intra_gbps: float | None = None
    """``--intra-gbps``: intra-node all-gather and reduce-scatter bus bandwidth, GB/s."""
    inter_gbps: float | None = None
    """``--inter-gbps``: every other figure (world all-gather/reduce-scatter, inter-node all-reduce), GB/s."""
    param_dtype: str = "bf16"
    """``--param-dtype``: what the all-gathers send (MixedPrecisionPolicy param_dtype)."""
    reduce_dtype: str = "fp32"
    """``--reduce-dtype``: what the gradient reductions send (MixedPrecisionPolicy reduce_dtype)."""
    gpu_mem_gb: float | None = None
    """``--gpu-mem-gb``: memory of one GPU, GB (None: the default GPU's)."""
    headroom: float | None = None
    """``--headroom``: share of GPU memory the model states may take, in (0, 1] (None: the default)."""
    step_compute_s: float | None = None
    """``--step-compute-s``: compute time of one step, seconds, to report communication's share of it."""
    output: OutputOptions = field(default_factory=OutputOptions)
    """``--format``, the report files, ``--strict``."""

    LAUNCH_ONLY = frozenset[str]()  # plan launches nothing: argv() gives every option

    def __post_init__(self) -> None:
        for name in POSITIVE:
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(f"--{name.replace('_', '-')}: expected a number > 0, got {value!r}")
        if self.headroom is not None and self.headroom > 1:
            raise InputError(f"--headroom: expected a fraction in (0, 1], got {self.headroom!r}")
        for flag, dtype in (("--param-dtype", self.param_dtype), ("--reduce-dtype", self.reduce_dtype)):
            if dtype not in DTYPE_BYTES:
                raise InputError(f"{flag}: expected one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")

    def argv(self) -> list[str]:
        """The command line that gives these options back."""
        out = ["plan", "--params", self.params, "--param-dtype", self.param_dtype, "--reduce-dtype", self.reduce_dtype]
        for name, flag in FIGURES:
            if (value := getattr(self, name)) is not None:
                out += [flag, str(value)]
        return out + self.output.argv()
