"""nccl-tests' bandwidth arithmetic, so our figures compare one to one with theirs.

``size`` is always the full buffer as nccl-tests prints it: the all-gather output, the reduce-scatter
input, the all-reduce buffer. algbw = size / time and busbw = algbw x factor, in GB/s with GB = 1e9
bytes (nccl-facts.md section C). Sizes on the command line use binary units, like nccl-tests.
"""

from __future__ import annotations

import re

from nccl_doctor.enums import StrEnum


class Op(StrEnum):
    """The collectives ``bench`` measures (nccl-tests' names)."""

    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_REDUCE = "all_reduce"


OPS = tuple(Op)
SENDRECV = "sendrecv"  # nccl-tests' point-to-point test: factor 1
GB = 1e9
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
BITS_PER_BYTE = 8
MBIT = 1e6  # bits in a megabit (sysfs speeds are Mb/s)
FLOAT32_BYTES = 4  # every buffer holds float32 elements
AUTO_ITERS = (5, 50)  # timed iterations per size without --iters: at least, at most
_UNITS = {"": 1, "b": 1, "k": KIB, "m": MIB, "g": GIB}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgb]?)(?:i?b)?\s*$", re.IGNORECASE)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor: AG and RS (n-1)/n, AR 2(n-1)/n, p2p ``sendrecv`` 1."""
    if n < 1:
        raise ValueError(f"group size must be >= 1, got {n}")
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        return (n - 1) / n
    if op == Op.ALL_REDUCE:
        return 2 * (n - 1) / n
    if op == SENDRECV:
        return 1.0
    raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    return size_bytes / time_s / GB if time_s > 0 else 0.0


def busbw_gbps(op: str, size_bytes: int, time_s: float, n: int) -> float:
    return algbw_gbps(size_bytes, time_s) * bus_factor(op, n)


def pair_gbps(size_bytes: int, round_trip_s: float) -> float:
    """A node pair's figure from one ping-pong round trip: ``size`` bytes went each way, one direction at a
    time, so the link carried ``2 x size`` bytes in ``round_trip_s``: GB/s over the link, one way at a time."""
    return 2 * size_bytes / round_trip_s / GB if round_trip_s > 0 else 0.0


# at and below this size a call is latency-bound: PyTorch's per-call host overhead (tens of us: dispatch,
# the ProcessGroup work object, stream sync) is a large share of the call, where nccl-tests launches its
# iterations back to back (or as one CUDA graph) and averages the time over ranks (``-a 1``, its default)
# where bench takes the slowest rank: busbw here reads below nccl-tests' and says little about the links
LATENCY_BOUND_BYTES = 4 * MIB


def latency_bound(size_bytes: int) -> bool:
    """A size whose busbw is latency-bound (``LATENCY_BOUND_BYTES``): flagged in the report, never judged."""
    return size_bytes <= LATENCY_BOUND_BYTES


def parse_size(text: str) -> int:
    """``64K``, ``1M``, ``1GiB``, ``4096`` -> bytes (binary units, as nccl-tests' -b/-e)."""
    m = _SIZE_RE.match(text)
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"{text.strip()!r} is not a size: expected a positive whole number with optional K/M/G "
                         "(e.g. 64K, 1M, 1G)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def parse_sizes(text: str) -> list[int]:
    """A comma list (``64K,1M,16M``) or a range ``MIN:MAX[:FACTOR]`` (``64K:64M:4``)."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError("expected MIN:MAX or MIN:MAX:FACTOR")
        factor = parts[2].strip() if len(parts) == 3 else "2"
        if not factor.isdigit() or int(factor) < 2:
            raise ValueError("the factor must be an integer >= 2")
        return size_sweep(parse_size(parts[0]), parse_size(parts[1]), int(factor))
    sizes = sorted({parse_size(p) for p in text.split(",") if p.strip()})
    if not sizes:
        raise ValueError("empty")
    return sizes


def size_sweep(lo: int, hi: int, factor: int = 4) -> list[int]:
    if lo > hi:
        raise ValueError(f"size range is empty: {format_size(lo)} > {format_size(hi)}")
    if factor < 2:
        raise ValueError("the factor must be an integer >= 2")
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes


def round_size(size_bytes: int, n: int, elem: int = FLOAT32_BYTES) -> int:
    """The largest buffer <= size that splits into ``n`` equal chunks of whole elements (>= 1 each)."""
    per = max(1, size_bytes // (n * elem))
    return per * n * elem


def format_size(size_bytes: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    if size_bytes >= MIB:
        return f"{size_bytes / MIB:.1f} MiB"
    if size_bytes >= KIB:
        return f"{size_bytes / KIB:.1f} KiB"
    return f"{size_bytes} B"


def link_gbps(speed_mbit: float) -> float:
    """A link's line rate in Mb/s (sysfs ``speed``) as GB/s per direction."""
    return speed_mbit * MBIT / BITS_PER_BYTE / GB


def auto_iters(size_bytes: int, *, budget_bytes: int, lo: int = AUTO_ITERS[0], hi: int = AUTO_ITERS[1]) -> int:
    """Enough iterations for a stable mean at small sizes without spending minutes at large ones."""
    return max(lo, min(hi, budget_bytes // max(1, size_bytes)))
