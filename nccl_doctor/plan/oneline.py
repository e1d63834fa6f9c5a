"""What ``plan`` would recommend, in one line: preflight's ``--plan-params`` note, from its own figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nccl_doctor.errors import InputError
from nccl_doctor.plan.costs import broken_fabric, make_plan
from nccl_doctor.plan.inputs import from_bench
from nccl_doctor.plan.model import Figure, PlanInputs
from nccl_doctor.plan.view import count_text, mesh_text, seconds

DEFAULT_GPU_MEM_GB = 80.0
DEFAULT_HEADROOM = 0.6
CPU_HEAD = "Gloo/CPU figures, GPU memory not sized"  # a CPU run's head: no GPU memory claimed


def plan_line(params: float, bench: Mapping[str, Any] | None, *, failed: str | None, origin: str) -> str:
    """``plan (70B, 80 GB GPUs, headroom 0.6): use (4, 32) HSDP, 12.35 s of communication per step`` -- or why
    it recommends nothing (the network first, nothing fits, a figure this run did not measure). ``bench``: the
    run's bench document (None: it measured nothing); ``failed``: why its figures cannot be trusted."""
    head = f"plan ({count_text(params)} parameters, {DEFAULT_GPU_MEM_GB:g} GB GPUs, headroom {DEFAULT_HEADROOM:g})"
    try:
        found = from_bench(bench, failed=failed, origin=origin)
        if found.cpu_run:  # no GPU to size: never an 80 GB GPU nobody measured
            head = f"plan ({count_text(params)} parameters, {CPU_HEAD})"
        if found.failed:
            return f"{head}: fix the network first ({found.failed})"
        if found.nodes is None or found.gpus_per_node is None:
            return f"{head}: this run did not say its nodes and GPUs per node"
        memory = None if found.cpu_run else Figure(value=DEFAULT_GPU_MEM_GB, source="default")
        inputs = PlanInputs(params=Figure(value=params, source="--plan-params"), nodes=found.nodes,
                            gpus_per_node=found.gpus_per_node, param_dtype="bf16", reduce_dtype="fp32",
                            gpu_mem_gb=memory,
                            headroom=Figure(value=DEFAULT_HEADROOM, source="default"), step_compute_s=None,
                            bandwidths=found.bandwidths, cpu_run=found.cpu_run)
        if why := broken_fabric(inputs):
            return f"{head}: fix the network first ({why})"
        plan = make_plan(inputs)
    except InputError as exc:  # a figure this run did not measure
        return f"{head}: {exc}"
    if plan.recommended is None:
        return f"{head}: nothing fits; it would take {plan.gpus_needed} GPUs"
    best = plan.recommended
    return (f"{head}: use {mesh_text(best)}, {seconds(best.comm_s)} of communication per step "
            f"(`nccl-doctor plan --from` this report for the table and the code)")
