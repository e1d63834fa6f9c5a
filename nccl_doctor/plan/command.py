"""``nccl-doctor plan``: from measured bandwidth to the FSDP/HSDP mesh to train with.

Figures come from the command line or a bench/preflight JSON (``--from``); a flag given overrides the file.
Nothing here imports torch: the plan answers in well under a second.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.outcome import Outcome
from nccl_doctor.plan.costs import broken_fabric, make_plan
from nccl_doctor.plan.inputs import measured, parse_params
from nccl_doctor.plan.model import DTYPE_BYTES, Bandwidths, Figure, Measured, PlanInputs
from nccl_doctor.plan.oneline import DEFAULT_GPU_MEM_GB, DEFAULT_HEADROOM
from nccl_doctor.plan.options import PlanOptions
from nccl_doctor.plan.view import broken_report, inputs_dict, plan_report

MAX_WORLD = 1 << 20  # GPUs in one job: far past any cluster, short of a loop that never ends
OPTIONS = PlanOptions


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
        return value
    return parse


def _fraction(text: str) -> float:
    value = _positive(float)(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, metavar="N",
                   help="model parameters: 7e9, 7B, 70B, 1.3T, 350M")
    p.add_argument("--nodes", type=_positive(int), metavar="N", help="nodes (default: from --from)")
    p.add_argument("--gpus-per-node", type=_positive(int), metavar="G", help="GPUs per node (default: from --from)")
    p.add_argument("--from", dest="from_file", type=Path, metavar="FILE",
                   help="a `bench` or `preflight` --format json report: nodes, GPUs per node and the bus bandwidths "
                        "at the largest size measured (flags given here override it)")
    p.add_argument("--intra-gbps", type=_positive(float), metavar="GBPS",
                   help="intra-node all-gather and reduce-scatter bus bandwidth, GB/s")
    p.add_argument("--inter-gbps", type=_positive(float), metavar="GBPS",
                   help="every other figure (world all-gather/reduce-scatter, inter-node all-reduce), GB/s")
    p.add_argument("--param-dtype", choices=tuple(DTYPE_BYTES), default="bf16",
                   help="MixedPrecisionPolicy param_dtype: what the all-gathers send (default: bf16)")
    p.add_argument("--reduce-dtype", choices=tuple(DTYPE_BYTES), default="fp32",
                   help="MixedPrecisionPolicy reduce_dtype: what the gradient reductions send (default: fp32)")
    p.add_argument("--gpu-mem-gb", type=_positive(float), metavar="GB",
                   help=f"memory of one GPU, GB (default: {DEFAULT_GPU_MEM_GB:g}; none for a --from run on CPU: "
                        "no GPU was measured, so memory is not sized)")
    p.add_argument("--headroom", type=_fraction, metavar="F",
                   help=f"share of GPU memory the model states may take; activations need the rest "
                        f"(default: {DEFAULT_HEADROOM:g})")
    p.add_argument("--step-compute-s", type=_positive(float), metavar="T",
                   help="compute time of one step, seconds: report communication's share of it")


def inputs(options: PlanOptions) -> tuple[Path, ...]:
    return (options.from_file,) if options.from_file is not None else ()


def run(options: PlanOptions) -> Outcome:
    params = Figure(value=parse_params(options.params), source="--params")
    if missing := missing_flags(options):
        raise InputError(f"{_and(missing)}: give {'them' if len(missing) > 1 else 'it'}, or --from a bench or "
                         f"preflight JSON report (this cluster's own figures)")
    found = measured(options.from_file) if options.from_file is not None else None
    if found is not None and found.failed:
        return Outcome.of(broken_report(found.failed, {"params": params.as_dict()}))
    plan_inputs = build_inputs(options, params, found)
    if why := broken_fabric(plan_inputs):
        return Outcome.of(broken_report(why, inputs_dict(plan_inputs)))
    return Outcome.of(plan_report(make_plan(plan_inputs), plan_inputs))


def missing_flags(options: PlanOptions) -> list[str]:
    """What a plan without ``--from`` still lacks, every flag at once: a newcomer's ``plan --params 70B``
    learns it in one go, not in four runs of one error each. There is no default to fall back on: a made-up
    bandwidth would be a plan for some other cluster. One node needs no inter-node figure."""
    if options.from_file is not None:
        return []  # what the file lacks is said figure by figure, with the file named
    given = {"--nodes": options.nodes, "--gpus-per-node": options.gpus_per_node, "--intra-gbps": options.intra_gbps,
             "--inter-gbps": options.inter_gbps if options.nodes != 1 else 0}
    return [flag for flag, value in given.items() if value is None]


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _flag(value: float | None, flag: str, fallback: Figure | None) -> Figure | None:
    """The command line's figure if given, else the file's."""
    return Figure(value=value, source=flag) if value is not None else fallback


def _or_default(value: float | None, flag: str, default: float) -> Figure:
    return Figure(value=value, source=flag) if value is not None else Figure(value=default, source="default")


def _required(figure: Figure | None, flag: str) -> Figure:
    if figure is None:
        raise InputError(f"{flag}: give it, or --from a bench or preflight JSON report that has it")
    return figure


def _bandwidths(options: PlanOptions, found: Measured | None) -> Bandwidths:
    bw = found.bandwidths if found else Bandwidths()
    intra, inter = options.intra_gbps, options.inter_gbps
    return Bandwidths(
        intra_all_gather=_flag(intra, "--intra-gbps", bw.intra_all_gather),
        intra_reduce_scatter=_flag(intra, "--intra-gbps", bw.intra_reduce_scatter),
        world_all_gather=_flag(inter, "--inter-gbps", bw.world_all_gather),
        world_reduce_scatter=_flag(inter, "--inter-gbps", bw.world_reduce_scatter),
        inter_all_reduce=_flag(inter, "--inter-gbps", bw.inter_all_reduce),
    )


def build_inputs(options: PlanOptions, params: Figure, found: Measured | None) -> PlanInputs:
    nodes = _required(_flag(options.nodes, "--nodes", found.nodes if found else None), "--nodes")
    gpus = _required(_flag(options.gpus_per_node, "--gpus-per-node", found.gpus_per_node if found else None),
                     "--gpus-per-node")
    if nodes.value * gpus.value > MAX_WORLD:
        raise InputError(f"--nodes x --gpus-per-node: {nodes.value * gpus.value:g} GPUs, more than {MAX_WORLD}")
    return PlanInputs(
        params=params, nodes=nodes, gpus_per_node=gpus, param_dtype=options.param_dtype,
        reduce_dtype=options.reduce_dtype,
        gpu_mem_gb=_gpu_memory(options, found),
        headroom=_or_default(options.headroom, "--headroom", DEFAULT_HEADROOM),
        step_compute_s=_flag(options.step_compute_s, "--step-compute-s", None),
        bandwidths=_bandwidths(options, found), cpu_run=found.cpu_run if found else None,
    )


def _gpu_memory(options: PlanOptions, found: Measured | None) -> Figure | None:
    """``--gpu-mem-gb``, else the default GPU's -- but never for a CPU run's figures: no GPU was there, and an
    80 GB default would claim that a model fits GPUs nobody measured (None: not sized)."""
    if options.gpu_mem_gb is None and found is not None and found.cpu_run:
        return None
    return _or_default(options.gpu_mem_gb, "--gpu-mem-gb", DEFAULT_GPU_MEM_GB)
