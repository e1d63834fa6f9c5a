"""What ranks tell each other, as JSON in uint8 tensors: the object collectives' job without pickle.

``dist.all_gather_object`` and ``broadcast_object_list`` unpickle whatever each peer sends, so one rank (or
whoever joined the job's unauthenticated store as one) could run code in every other. Here each rank sends
UTF-8 JSON: the lengths are gathered first (each capped at ``MAX_BYTES``), then the bytes, padded to the
longest; every rank parses every entry itself. An entry that is not JSON, or not the shape the caller
expects, is ``Malformed`` naming the rank that sent it (the caller makes it a finding), never a traceback.

Imported only in worker processes (it imports torch at the top).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from nccl_doctor.bench.expected import Expected

MAX_BYTES = 1 << 20  # one rank's entry: a node's probe summary is a few KiB


@dataclass(frozen=True)
class Malformed:
    """What a rank sent that could not be read."""

    rank: int  # the sender's global rank
    why: str


class PeerDataError(RuntimeError):
    """A rank sent what cannot be read: the stage fails naming it (a RuntimeError, as a broken collective)."""


def all_gather_json(value: Any, *, group: Any = None, limit: int = MAX_BYTES) -> list[Any]:
    """Every rank's ``value`` (JSON-serialisable), in group rank order; ``Malformed`` for an entry that
    does not parse. Every rank of ``group`` calls it."""
    data = json.dumps(value, separators=(",", ":")).encode()
    if len(data) > limit:
        raise ValueError(f"all_gather_json: this rank's entry is {len(data)} bytes, over the {limit}-byte limit")
    device = _device(group)
    n = dist.get_world_size(group)
    mine = torch.tensor([len(data)], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(mine) for _ in range(n)]
    dist.all_gather(lengths, mine, group=group)
    claimed = [int(t.item()) for t in lengths]
    width = max(1, min(max(claimed), limit))  # a rank announcing more than the limit gets only the limit
    buf = torch.zeros(width, dtype=torch.uint8, device=device)
    buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    outs = [torch.zeros_like(buf) for _ in range(n)]
    dist.all_gather(outs, buf, group=group)
    return [_parse(_global_rank(group, i), claimed[i], outs[i], limit) for i in range(n)]


def _parse(rank: int, length: int, t: Any, limit: int) -> Any:
    if not 0 < length <= limit:
        return Malformed(rank, f"announced {length} bytes (0 < length <= {limit})")
    raw = bytes(t[:length].cpu().tolist())
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Malformed(rank, f"not JSON: {exc}")


def _device(group: Any) -> Any:
    """NCCL moves only CUDA tensors; Gloo takes CPU ones."""
    if str(dist.get_backend(group)) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _global_rank(group: Any, group_rank: int) -> int:
    return group_rank if group is None else int(dist.get_global_rank(group, group_rank))


def all_gather_flags(flag: bool, *, group: Any = None) -> list[bool]:
    """Every rank's yes/no, as an int tensor (nothing to parse)."""
    device = _device(group)
    mine = torch.tensor([int(flag)], dtype=torch.int64, device=device)
    outs = [torch.zeros_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(outs, mine, group=group)
    return [int(t.item()) == 1 for t in outs]


# --- shapes --------------------------------------------------------------------------------------
def expect(entry: Any, rank: int, what: str, fields: Mapping[str, tuple[type, ...]]) -> dict[str, Any]:
    """``entry`` as a dict with those fields of those types; raises ``PeerDataError`` naming the rank."""
    if isinstance(entry, Malformed):
        raise PeerDataError(f"rank {entry.rank} sent malformed {what} ({entry.why})")
    if not isinstance(entry, dict):
        raise PeerDataError(f"rank {rank} sent malformed {what} (not an object)")
    for name, types in fields.items():
        value = entry.get(name)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise PeerDataError(f"rank {rank} sent malformed {what} ({name!r} is {type(value).__name__})")
    return entry


NUMBER = (int, float)
OPTIONAL_NUMBER = (int, float, type(None))
OPTIONAL_STR = (str, type(None))
_EXPECTED_FIELDS: dict[str, tuple[type, ...]] = {
    "inter_gbps": OPTIONAL_NUMBER, "per_rank_gbps": OPTIONAL_NUMBER, "inter_basis": (str,), "ifaces": (list,),
    "iface": OPTIONAL_STR, "intra_gbps": OPTIONAL_NUMBER, "intra_basis": OPTIONAL_STR,
    "intra_allreduce_gbps": OPTIONAL_NUMBER}


def expected_to_json(exp: Expected | None) -> dict[str, Any] | None:
    return asdict(exp) if exp is not None else None


def expected_from_json(entry: Any, rank: int) -> Expected | None:
    """A node's yardstick as its local rank 0 sent it (``expected_to_json``)."""
    if entry is None:
        return None
    d = expect(entry, rank, "yardstick", _EXPECTED_FIELDS)
    if not all(isinstance(i, str) for i in d["ifaces"]):
        raise PeerDataError(f"rank {rank} sent malformed yardstick (interface names)")
    return Expected(inter_gbps=d["inter_gbps"], per_rank_gbps=d["per_rank_gbps"], inter_basis=d["inter_basis"],
                    ifaces=tuple(d["ifaces"]), iface=d["iface"], intra_gbps=d["intra_gbps"],
                    intra_basis=d["intra_basis"], intra_allreduce_gbps=d["intra_allreduce_gbps"])
