"""ND5xx: ``plan``, the FSDP/HSDP mesh measured bandwidth recommends."""

from __future__ import annotations

from nccl_doctor.codes.text import CodeText

TEXTS: dict[str, CodeText] = {
    "ND500": CodeText(
        "plan-recommendation",
        "The mesh (replicas, shard size) to train with, and its communication time per step.",
        (
            "Full sharding (FSDP) spends the least memory but sends every all-gather and reduce-scatter over the "
            "slowest links; sharding within a node and replicating across (HSDP) keeps them on NVLink and adds one "
            "all-reduce across nodes. The plan computes both from the cluster's own measured bandwidth."
        ),
        (
            "Use the mesh shown: init_device_mesh(\"cuda\", (R, S), mesh_dim_names=(\"dp\", \"fsdp\")) and "
            "fully_shard(..., mesh=mesh, mp_policy=MixedPrecisionPolicy(...)), as the plan prints it."
        ),
    ),
    "ND501": CodeText(
        "fabric-too-slow-for-a-mesh",
        "The inter-node figure says the fabric is broken (or the run that measured it failed): no mesh is planned.",
        (
            "Below a few GB/s between GPU nodes, or when the bench or preflight that measured the figures failed, "
            "the network is broken rather than slow: any mesh's communication time computed from it would be "
            "wrong, and training on it would crawl or hang."
        ),
        (
            "Fix the network first: run `nccl-doctor preflight` on the nodes and follow its findings (socket "
            "fallback, down RDMA ports, wrong interface), then plan again with the new figures."
        ),
    ),
    "ND502": CodeText(
        "nothing-fits",
        "The model states do not fit in GPU memory on any mesh of these GPUs.",
        (
            "Parameters, gradients and Adam's two moments in fp32 take 16 bytes a parameter; even sharded over "
            "every GPU they exceed the headroom of GPU memory, so the step would run out of memory."
        ),
        (
            "Use the number of GPUs the plan names, more GPU memory, or less state per parameter (CPU offload, a "
            "smaller optimizer state); then plan again."
        ),
    ),
    "ND503": CodeText(
        "comm-exceeds-compute",
        "The recommended mesh's communication per step takes longer than the step's compute.",
        (
            "FSDP overlaps communication with compute; when communication alone takes longer than --step-compute-s, "
            "the GPUs wait on the network for part of every step whatever the overlap."
        ),
        (
            "Raise the compute per step (a larger batch per GPU), lower the bytes sent (bf16 reduce-dtype), or move "
            "to a faster fabric."
        ),
    ),
    "ND504": CodeText(
        "cpu-figures",
        "The plan's figures were measured on CPU (Gloo), not on GPUs.",
        (
            "A bench or preflight that ran Gloo on CPU measured TCP between processes, not NCCL between GPUs: the "
            "communication times are that run's, and with no GPU measured there is no GPU memory to size, so the "
            "plan says of no mesh that it fits (unless --gpu-mem-gb gives the memory)."
        ),
        (
            "Plan from a bench or preflight JSON of the GPU nodes, or give --intra-gbps, --inter-gbps and "
            "--gpu-mem-gb for the GPUs you will train on."
        ),
    ),
}
