"""``preflight --fsdp-smoke``: train a tiny transformer with FSDP2 on the HSDP mesh, then round-trip
it through torch.distributed.checkpoint.

Bandwidth numbers say the links work; this says the *training stack* works on them: ``fully_shard``
on the 2-D ("dp", "fsdp") mesh, bf16 ``MixedPrecisionPolicy``, AdamW, and a DCP save/load whose
reloaded state must equal what was saved. DCP needs one directory every rank can see (a shared file
system on a real cluster); when some node cannot see it, that is reported instead of hanging.

Runs inside an initialised process group; torch is imported only when called.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADS = 4  # attention heads of the tiny model
MLP_RATIO = 4
BATCH, SEQ_LEN = 2, 16  # tokens per step: a batch of short sequences
LR = 1e-2  # AdamW on one fixed batch: the loss falls ~30% a step (4.95 -> 3.24 -> 2.12 on CPU), far above bf16 noise


@dataclass
class SmokeResult:
    """What this rank saw. ``problems`` empty means this rank passed."""

    rank: int
    losses: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _model(dim: int, layers: int, vocab: int) -> Any:
    import torch
    from torch import nn
    from torch.nn import functional

    class Block(nn.Module):  # type: ignore[misc]  # torch is untyped (Any) by config
        """Pre-norm attention + MLP: the shapes and ops of a real transformer layer, tiny."""

        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.up, self.down = nn.Linear(dim, MLP_RATIO * dim), nn.Linear(MLP_RATIO * dim, dim)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, dim // HEADS).permute(2, 0, 3, 1, 4)
            att = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, dim))
            return x + self.down(functional.gelu(self.up(self.norm2(x))))

    class Tiny(nn.Module):  # type: ignore[misc]  # torch is untyped (Any) by config
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

        def forward(self, tokens: Any) -> Any:
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    torch.manual_seed(0)  # same init everywhere, as a real job loading one checkpoint would have
    return Tiny()


def _local_state(state: dict[str, Any]) -> dict[str, Any]:
    """A detached copy of every tensor (DTensors by their local shard) for an exact comparison."""
    import torch
    from torch.distributed.tensor import DTensor

    out: dict[str, Any] = {}

    def walk(prefix: str, obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(obj, DTensor):
            out[prefix] = obj.to_local().detach().clone()
        elif isinstance(obj, torch.Tensor):
            out[prefix] = obj.detach().clone()
        else:
            out[prefix] = obj

    walk("", state)
    return out


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    import torch

    diffs = sorted(set(before) ^ set(after))
    for key in sorted(set(before) & set(after)):
        a, b = before[key], after[key]
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        if not same:
            diffs.append(key)
    return diffs


def replica_mismatches(state: dict[str, Any], mesh: Any) -> list[str]:
    """Entries of ``state`` whose local shard differs between the replicas along "dp". HSDP all-reduces the
    gradients across them, so after any step they must hold the same bits; DCP then writes each replicated
    shard once, and a replica that diverged would reload another's values. Exact: the shards themselves are
    gathered (the smoke's model is tiny), no checksum."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    if "dp" not in (mesh.mesh_dim_names or ()) or mesh["dp"].size() < 2:
        return []
    group, n = mesh["dp"].get_group(), mesh["dp"].size()
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    out = []
    for name, value in state.items():  # the same names in the same order on every rank
        local = value.to_local() if isinstance(value, DTensor) else value
        if not isinstance(local, torch.Tensor):
            continue
        flat = local.detach().reshape(-1).contiguous()
        gathered = torch.empty(n * flat.numel(), dtype=flat.dtype, device=flat.device)
        gather(gathered, flat, group=group)
        if not all(torch.equal(chunk, flat) for chunk in gathered.chunk(n)):
            out.append(name)
    return out


def mesh_device(mesh: Any) -> Any:
    """The device this rank's shards live on: ``cuda:<current>`` on an NCCL mesh, the CPU on Gloo's."""
    import torch

    kind = mesh.device_type
    return torch.device("cpu") if kind == "cpu" else torch.device(kind, getattr(torch, kind).current_device())


def smoke_batch(vocab: int, *, dp_index: int, device: Any) -> Any:
    """The one batch every step trains on, made *on the rank's device*: FSDP2's root pre-forward moves the
    forward's inputs to CUDA, but the loss target (``tokens[:, 1:]``) never goes through it. Drawn from a
    seeded CPU generator (one per "dp" replica: each its own data), so CPU and CUDA runs see the same tokens."""
    import torch

    gen = torch.Generator().manual_seed(1 + dp_index)
    return torch.randint(0, vocab, (BATCH, SEQ_LEN), generator=gen).to(device)


def train(model: Any, optim: Any, tokens: Any, *, steps: int, vocab: int) -> list[Any]:
    """``steps`` next-token steps on the same batch; the losses, as detached tensors (no host sync here)."""
    import torch

    losses = []
    for _ in range(steps):
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        optim.step()
        optim.zero_grad()
        losses.append(loss.detach())
    return losses


def loss_problems(losses: list[float]) -> list[str]:
    """A smoke test that trains must learn: on one fixed batch, AdamW at ``LR`` lowers the loss at every
    step (on a healthy stack by far more than bf16 noise), so a loss that is not finite or does not fall
    means the gradients did not reach the parameters (a reduce-scatter or an optimizer step gone wrong)."""
    if not all(math.isfinite(x) for x in losses):
        return [f"non-finite loss after FSDP2 steps: {losses}"]
    if len(losses) > 1 and not losses[-1] < losses[0]:
        return [f"the loss did not fall over {len(losses)} FSDP2 steps on one fixed batch "
                f"({losses[0]:.3f} -> {losses[-1]:.3f}): the gradients did not train the model"]
    return []


DCP_PREFIX = ".nccl-doctor-dcp-"
RUN_ID_ENV = "NCCL_DOCTOR_PREFLIGHT_RUN"  # preflight's run id (``protocol.RUN_ENV``): the job's, on every node
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_RUN_CHARS = 40


def job_prefix(run_id: str | None) -> str:
    """The checkpoint directory's name prefix: per job (``.nccl-doctor-dcp-slurm-4242-``), so a directory a
    killed run left behind says whose it was; rank 0's mkdtemp adds the unique tail."""
    run = _UNSAFE.sub("-", run_id or "").strip("-.")[:MAX_RUN_CHARS]
    return f"{DCP_PREFIX}{run}-" if run else DCP_PREFIX


def not_shared_problem(path: str, base: str | None, blind: list[int]) -> str:
    """What to say when some ranks cannot see the checkpoint directory: the directory that must be shared
    (``base``: ``--fsdp-smoke-dir``, else the current directory of node 0's preflight on 2+ nodes), the
    ranks that do not see it, and the fix."""
    where = (f"{base} (--fsdp-smoke-dir, or by default the current directory preflight ran in on node 0)"
             if base else "the system temp directory of node 0 (one node: it need not be shared)")
    ranks = ", ".join(str(r) for r in blind[:8]) + (f" and {len(blind) - 8} more" if len(blind) > 8 else "")
    return (f"checkpoint directory {path} is not visible on every node (not to rank(s) {ranks}): DCP needs it "
            f"on a file system every node mounts at the same path; it is made under {where}, which must be "
            "shared: pass --fsdp-smoke-dir DIR on a shared file system (a container's working directory "
            "often is not)")


def shared_dir(base: str | None, *, group: Any = None, record: str | None = None,
               run_id: str | None = None) -> tuple[str, list[int]]:
    """Rank 0 makes a fresh per-job directory under ``base`` (``job_prefix``; it writes its path to
    ``record``, so the launcher removes it even when the ranks are killed); every rank checks it can see it.

    Returns (path, the ranks of ``group`` that do not see it). The path travels as JSON in a tensor, never a
    pickle; one that cannot be read is a path no rank sees."""
    import torch.distributed as dist

    from nccl_doctor.bench import worker as bw

    mine = tempfile.mkdtemp(prefix=job_prefix(run_id), dir=base) if dist.get_rank() == 0 else ""
    if record and mine:
        Path(record).write_text(mine)
    sent = bw.all_gather_json(mine, group=group)[0]  # rank 0's
    path = mine or (sent if isinstance(sent, str) else "")
    seen = bw.all_gather_flags(bool(path) and os.path.isdir(path), group=group)
    if not path:
        why = getattr(sent, "why", f"not a path: {str(sent)[:80]!r}")
        return f"(rank 0 sent a malformed checkpoint path: {why})", list(range(len(seen)))
    return path, [r for r, ok in enumerate(seen) if not ok]


def run_smoke(mesh: Any, *, steps: int = 3, dim: int = 64, layers: int = 2, vocab: int = 128,
              checkpoint_base: str | None = None, record: str | None = None) -> SmokeResult:
    """Train ``steps`` steps of FSDP2/HSDP with bf16 params on one fixed batch (the loss must fall), then DCP
    save, clobber, load, compare. The batch is made on the mesh's device (see ``smoke_batch``)."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    t0 = time.monotonic()
    result = SmokeResult(rank=dist.get_rank())
    model = _model(dim, layers, vocab)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:  # bottom-up, as the FSDP2 docs say
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optim = torch.optim.AdamW(model.parameters(), lr=LR)
    tokens = smoke_batch(vocab, dp_index=mesh.get_coordinate()[0], device=mesh_device(mesh))
    result.losses = [float(loss) for loss in train(model, optim, tokens, steps=steps, vocab=vocab)]
    result.problems += loss_problems(result.losses)

    path, blind = shared_dir(checkpoint_base, record=record, run_id=os.environ.get(RUN_ID_ENV))
    try:
        if blind:
            result.problems.append(not_shared_problem(path, checkpoint_base, blind))
            return result
        model_sd, optim_sd = get_state_dict(model, optim)
        diverged = replica_mismatches(model_sd, mesh)
        if diverged:
            result.problems.append(f"the replicas along \"dp\" hold different values after {steps} steps in "
                                   f"{len(diverged)} tensors ({', '.join(diverged[:4])}): HSDP's all-reduce of "
                                   "the gradients did not give every replica the same result")
        saved = _local_state({"model": model_sd, "optim": optim_sd})
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
        with torch.no_grad():  # clobber, so a load that silently does nothing cannot pass
            for p in model.parameters():
                p.zero_()
        model_sd, optim_sd = get_state_dict(model, optim)
        dcp.load({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
        set_state_dict(model, optim, model_state_dict=model_sd, optim_state_dict=optim_sd)
        model_sd, optim_sd = get_state_dict(model, optim)
        diffs = _differences(saved, _local_state({"model": model_sd, "optim": optim_sd}))
        if diffs:
            result.problems.append(f"DCP reload differs from the saved state in {len(diffs)} tensors: "
                                   + ", ".join(diffs[:4]))
    finally:
        try:
            dist.barrier()  # nobody still reads it
        finally:  # (a failed barrier must not leave a checkpoint on the user's file system)
            if dist.get_rank() == 0:
                shutil.rmtree(path, ignore_errors=True)
        result.seconds = time.monotonic() - t0
    return result
