"""The model's pure formulas: communication time per step, model states per GPU, the choice.

One optimizer step, no gradient accumulation, ``reshard_after_forward=True`` (parameters all-gathered in the
forward and again in the backward), gradients reduce-scattered once, and across replicas all-reduced once;
ring bus bandwidths as nccl-tests defines them; one NIC per GPU.
"""

from __future__ import annotations

import math

from nccl_doctor.errors import InputError
from nccl_doctor.plan.model import DTYPE_BYTES, Candidate, Figure, Plan, PlanInputs

GB = 1e9  # nccl-tests' GB/s and our GB per GPU alike
STATE_BYTES_PER_PARAM = 16  # fp32 parameters, gradients and Adam's two moments: 4 x 4 bytes
TIE = 0.05  # candidates within 5% of the fastest are a tie, won by the smallest shard
BROKEN_INTER_GBPS = 5.0  # below this between GPU nodes the fabric is broken, not slow


def shard_sizes(gpus_per_node: int, world: int) -> tuple[int, ...]:
    """S = G, 2G, 4G, ... up to W, each dividing W (so R = W / S is whole), and W itself (FSDP)."""
    sizes = []
    s = gpus_per_node
    while s < world:
        if world % s == 0:
            sizes.append(s)
        s *= 2
    return (*sizes, world)


def state_gb(params: float, shard_size: int) -> float:
    """Model states per GPU: 16 P / S bytes, in GB."""
    return STATE_BYTES_PER_PARAM * params / shard_size / GB


def _seconds(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * GB)


def comm_seconds(inputs: PlanInputs, shard_size: int) -> float:
    """t_comm(S) = 2 P b_p (S-1)/S / B_AG(S) + P b_r (S-1)/S / B_RS(S) + [R > 1] 2 (P b_r / S) (R-1)/R / B_AR."""
    p, s = inputs.params.value, shard_size
    r = inputs.world // s
    b_p, b_r = DTYPE_BYTES[inputs.param_dtype], DTYPE_BYTES[inputs.reduce_dtype]
    ag, rs = _shard_figures(inputs, s)
    t = _seconds(2 * p * b_p * (s - 1) / s, ag) + _seconds(p * b_r * (s - 1) / s, rs)
    if r > 1:
        t += _seconds(2 * (p * b_r / s) * (r - 1) / r, _needed(inputs.bandwidths.inter_all_reduce,
                                                               "an inter-node all-reduce", "--inter-gbps"))
    return t


def _shard_figures(inputs: PlanInputs, shard_size: int) -> tuple[float, float]:
    """B_AG(S), B_RS(S): inside one node when S = G, else the world (inter-node) figures."""
    bw = inputs.bandwidths
    if shard_size <= inputs.gpus:
        return (_needed(bw.intra_all_gather, "an intra-node all-gather", "--intra-gbps"),
                _needed(bw.intra_reduce_scatter, "an intra-node reduce-scatter", "--intra-gbps"))
    return (_needed(bw.world_all_gather, "a world (inter-node) all-gather", "--inter-gbps"),
            _needed(bw.world_reduce_scatter, "a world (inter-node) reduce-scatter", "--inter-gbps"))


def _needed(figure: Figure | None, what: str, flag: str) -> float:
    if figure is None:
        raise InputError(f"no bandwidth for {what}: give {flag} GBPS (or --from a bench that measured it)")
    return figure.value


def candidate(inputs: PlanInputs, shard_size: int) -> Candidate:
    state = state_gb(inputs.params.value, shard_size)
    comm = comm_seconds(inputs, shard_size)
    compute = inputs.step_compute_s
    mem = inputs.gpu_mem_gb
    return Candidate(shard_size=shard_size, replicas=inputs.world // shard_size, state_gb_per_gpu=state,
                     fits=None if mem is None else state <= inputs.headroom.value * mem.value, comm_s=comm,
                     compute_share=comm / compute.value if compute else None)


def recommend(candidates: tuple[Candidate, ...]) -> Candidate | None:
    """Among those that fit (or all, memory not sized), the fastest; among those within 5% of it, the smallest
    shard."""
    fitting = [c for c in candidates if c.fits is not False]
    if not fitting:
        return None
    fastest = min(c.comm_s for c in fitting)
    return min((c for c in fitting if c.comm_s <= fastest * (1 + TIE)), key=lambda c: c.shard_size)


def gpus_needed(inputs: PlanInputs) -> int | None:
    """The fewest GPUs (whole nodes) whose full shard holds the model states within the headroom (None: GPU
    memory not sized)."""
    if inputs.gpu_mem_gb is None:
        return None
    budget = inputs.headroom.value * inputs.gpu_mem_gb.value * GB
    gpus = math.ceil(STATE_BYTES_PER_PARAM * inputs.params.value / budget)
    return math.ceil(gpus / inputs.gpus) * inputs.gpus


def make_plan(inputs: PlanInputs) -> Plan:
    candidates = tuple(candidate(inputs, s) for s in shard_sizes(inputs.gpus, inputs.world))
    best = recommend(candidates)
    return Plan(candidates=candidates, recommended=best, gpus_needed=None if best else gpus_needed(inputs))


def broken_fabric(inputs: PlanInputs) -> str | None:
    """Why the network must be fixed before any mesh is worth choosing, or None: the run that measured the
    figures failed, or (more than one node) the inter-node figure is below ``BROKEN_INTER_GBPS``. That floor is
    a GPU fabric's: Gloo between CPU processes reads far below it on a healthy network, so a CPU run's own
    figure (``cpu_run``, not a flag) is never called broken."""
    if inputs.failed:
        return inputs.failed
    if int(inputs.nodes.value) < 2:
        return None
    bw = inputs.bandwidths
    inter = bw.inter_all_reduce or bw.world_all_gather or bw.world_reduce_scatter
    if inter is not None and inputs.cpu_run and not inter.source.startswith("--"):
        return None
    if inter is not None and inter.value < BROKEN_INTER_GBPS:
        return (f"the inter-node bandwidth is {inter.value:g} GB/s ({inter.source}), below "
                f"{BROKEN_INTER_GBPS:g} GB/s: a fabric between GPU nodes that slow is broken, not slow")
    return None
