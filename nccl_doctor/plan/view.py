"""The plan as a report: the candidates' table, the reason in one sentence, the code to use the mesh, the JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nccl_doctor.codes import Code
from nccl_doctor.payload import Json, JsonObject
from nccl_doctor.plan.costs import TIE
from nccl_doctor.plan.model import TORCH_DTYPES, Candidate, Plan, PlanInputs
from nccl_doctor.report import Finding, Report, Severity, Table, finding

MARK = " *"  # the recommended row
NOT_SIZED = "not sized"  # the fits cell when GPU memory is unknown (a CPU run's figures, no --gpu-mem-gb)


def kind(c: Candidate) -> str:
    return "FSDP" if c.replicas == 1 else "HSDP"


def mesh_text(c: Candidate) -> str:
    return f"({c.replicas}, {c.shard_size}) {kind(c)}"


def count_text(n: float) -> str:
    """70000000000.0 -> 70B: parameters as people write them."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.4g}{suffix}"
    return f"{n:.0f}"


def seconds(t: float) -> str:
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def candidate_dict(c: Candidate) -> dict[str, Any]:
    d: dict[str, Any] = {"shard_size": c.shard_size, "replicas": c.replicas, "mesh": list(c.mesh),
                         "state_gb_per_gpu": round(c.state_gb_per_gpu, 3), "fits": c.fits, "comm_s": round(c.comm_s, 6)}
    if c.compute_share is not None:
        d["compute_share"] = round(c.compute_share, 4)
    return d


def inputs_dict(inputs: PlanInputs) -> dict[str, Any]:
    """Every figure with where it came from; the bandwidths only where one was given."""
    d: dict[str, Any] = {"params": inputs.params.as_dict(), "nodes": inputs.nodes.as_dict(),
                         "gpus_per_node": inputs.gpus_per_node.as_dict(),
                         "param_dtype": {"value": inputs.param_dtype, "source": "--param-dtype"},
                         "reduce_dtype": {"value": inputs.reduce_dtype, "source": "--reduce-dtype"},
                         "gpu_mem_gb": _memory_dict(inputs), "headroom": inputs.headroom.as_dict()}
    if inputs.step_compute_s is not None:
        d["step_compute_s"] = inputs.step_compute_s.as_dict()
    for name, figure in vars(inputs.bandwidths).items():
        if figure is not None:
            d[f"{name}_gbps"] = figure.as_dict()
    return d


def _memory_dict(inputs: PlanInputs) -> dict[str, Any]:
    if inputs.gpu_mem_gb is not None:
        return inputs.gpu_mem_gb.as_dict()
    return {"value": None, "source": f"{NOT_SIZED}: {inputs.cpu_run}"}


def fits_text(c: Candidate) -> str:
    return NOT_SIZED if c.fits is None else "yes" if c.fits else "no"


def _fits_caption(inputs: PlanInputs) -> str:
    if inputs.gpu_mem_gb is None:
        return f"fits: {NOT_SIZED} (give --gpu-mem-gb)"
    return f"fits: 16 P / S bytes <= {inputs.headroom.value * inputs.gpu_mem_gb.value:.1f} GB"


def table(plan: Plan, inputs: PlanInputs) -> Table:
    compute = inputs.step_compute_s is not None
    columns = ("mesh (R, S)", "model states / GPU", "fits", "comm / step") + (("share of compute",) if compute else ())
    rows = []
    for c in plan.candidates:
        row = (mesh_text(c) + (MARK if c is plan.recommended else ""), f"{c.state_gb_per_gpu:.1f} GB",
               fits_text(c), seconds(c.comm_s))
        rows.append(row + ((f"{c.compute_share:.0%}",) if c.compute_share is not None else ()))
    return Table(title=f"Meshes for {count_text(inputs.params.value)} parameters on {inputs.nodes.value:g} x "
                       f"{inputs.gpus} GPUs", columns=columns, rows=tuple(rows),
                 caption=_fits_caption(inputs) + ("; * recommended" if plan.recommended else ""))


def reason(plan: Plan, best: Candidate) -> str:
    """Why this mesh, in one sentence (memory not sized: no claim that it fits)."""
    fitting = [c for c in plan.candidates if c.fits is not False]
    sized = best.fits is not None
    fastest = min(fitting, key=lambda c: c.comm_s)
    if len(fitting) == 1:
        return (f"it is the only mesh whose model states fit ({best.state_gb_per_gpu:.1f} GB per GPU)" if sized
                else f"it is the only mesh ({best.state_gb_per_gpu:.1f} GB of model states per GPU, GPU memory "
                     f"{NOT_SIZED})")
    tied = [c for c in fitting if c is not best and c.comm_s <= fastest.comm_s * (1 + TIE)]
    if fastest is not best:
        return (f"it is within {TIE:.0%} of the fastest mesh{' that fits' if sized else ''} ({mesh_text(fastest)}, "
                f"{seconds(fastest.comm_s)}) and shards over fewer GPUs")
    least = (f"it communicates least per step of the {len(fitting)} meshes "
             + ("that fit" if sized else f"(GPU memory {NOT_SIZED})"))
    if tied:
        return f"{least}, and shards over fewer GPUs than the {len(tied)} within {TIE:.0%} of it"
    others = min((c for c in fitting if c is not best), key=lambda c: c.comm_s)
    return f"{least} (next: {mesh_text(others)}, {seconds(others.comm_s)})"


def snippet(best: Candidate, inputs: PlanInputs) -> str:
    """The code to use the mesh (FSDP2)."""
    return "\n".join((
        "import torch",
        "from torch.distributed.device_mesh import init_device_mesh",
        "from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard",
        f'mesh = init_device_mesh("cuda", ({best.replicas}, {best.shard_size}), mesh_dim_names=("dp", "fsdp"))',
        f"mp = MixedPrecisionPolicy(param_dtype={TORCH_DTYPES[inputs.param_dtype]}, "
        f"reduce_dtype={TORCH_DTYPES[inputs.reduce_dtype]})",
        "for block in model.layers:",
        "    fully_shard(block, mesh=mesh, mp_policy=mp)",
        "fully_shard(model, mesh=mesh, mp_policy=mp)",
    ))


def _findings(plan: Plan, inputs: PlanInputs) -> list[Finding]:
    best = plan.recommended
    if best is None:  # (only with GPU memory sized: unsized, every mesh is a candidate)
        full = plan.candidates[-1]
        memory = f"{inputs.gpu_mem_gb.value:g} GB" if inputs.gpu_mem_gb else NOT_SIZED
        return [finding(Code.NOTHING_FITS, Severity.FAIL,
                        f"nothing fits: {full.state_gb_per_gpu:.1f} GB of model states per GPU even fully sharded over "
                        f"{full.shard_size} GPUs, above {inputs.headroom.value:g} x {memory}; "
                        f"it would take {plan.gpus_needed} GPUs ({(plan.gpus_needed or 0) // inputs.gpus} nodes of "
                        f"{inputs.gpus})")]
    found = [finding(Code.PLAN_RECOMMENDATION, Severity.PASS,
                     f"use {mesh_text(best)}: {seconds(best.comm_s)} of communication per step, because "
                     f"{reason(plan, best)}")]
    if inputs.cpu_run:
        found.append(cpu_finding(inputs))
    compute = inputs.step_compute_s
    if compute is not None and best.comm_s > compute.value:
        found.append(finding(Code.COMM_EXCEEDS_COMPUTE, Severity.WARN,
                             f"{mesh_text(best)} communicates {seconds(best.comm_s)} per step, "
                             f"{best.comm_s / compute.value:.1f} x the step's compute ({seconds(compute.value)})"))
    return found


def cpu_finding(inputs: PlanInputs) -> Finding:
    """ND504: the figures are a CPU run's: what the communication times are, and what was not sized."""
    memory = ("GPU memory is not sized: no GPU was measured, so no mesh is said to fit" if inputs.gpu_mem_gb is None
              else f"GPU memory is sized from {inputs.gpu_mem_gb.source} alone")
    return finding(Code.CPU_FIGURES, Severity.WARN,
                   f"{inputs.cpu_run}: the communication times are Gloo's between CPU processes, not what NCCL "
                   f"between GPUs would take; {memory}",
                   "plan from a bench or preflight JSON of the GPU nodes, or give --intra-gbps, --inter-gbps and "
                   "--gpu-mem-gb for them")


@dataclass(frozen=True, kw_only=True)
class PlanPayload:
    """``plan``'s JSON keys, in their order (``docs/plan.md``): every input with its source, every candidate
    mesh, the recommended one (None: nothing fits) and, then, how many GPUs it would take."""

    inputs: JsonObject
    candidates: Sequence[JsonObject]
    recommended: JsonObject | None
    gpus_needed: int | None = None  # written only when nothing fits
    nothing_fits: bool = False

    def to_json(self) -> JsonObject:
        doc: dict[str, Json] = {"inputs": self.inputs, "candidates": self.candidates, "recommended": self.recommended}
        if self.nothing_fits:
            doc["gpus_needed"] = self.gpus_needed
        return doc


def plan_report(plan: Plan, inputs: PlanInputs) -> Report:
    best = plan.recommended
    report = Report(command="plan", findings=_findings(plan, inputs), tables=[table(plan, inputs)])
    report.payload = PlanPayload(
        inputs=inputs_dict(inputs), candidates=[candidate_dict(c) for c in plan.candidates],
        recommended=None if best is None else
        {"shard_size": best.shard_size, "mesh": list(best.mesh), "comm_s": round(best.comm_s, 6)},
        gpus_needed=plan.gpus_needed, nothing_fits=best is None)
    if best is None:
        report.summary = f"nothing fits; it would take {plan.gpus_needed} GPUs"
    else:
        report.summary = f"{mesh_text(best)}, {seconds(best.comm_s)} of communication per step" + (
            " (Gloo/CPU figures)" if inputs.cpu_run else "")
        report.notes.append("To use it (FSDP2):\n" + snippet(best, inputs))
    return report


def broken_report(why: str, inputs: dict[str, Any]) -> Report:
    """No mesh: the network comes first (``inputs``: what is known of them, sourced)."""
    report = Report(command="plan", summary="fix the network first")
    report.add(finding(Code.FABRIC_TOO_SLOW_FOR_A_MESH, Severity.FAIL,
                       f"fix the network first: {why}; no mesh's communication time would mean anything",
                       "run `nccl-doctor preflight` on these nodes, fix what it finds, then plan again"))
    report.payload = PlanPayload(inputs=inputs, candidates=[], recommended=None)
    return report
