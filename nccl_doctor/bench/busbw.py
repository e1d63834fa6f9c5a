"""nccl-tests' bandwidth arithmetic, so our figures compare one to one with theirs.

``size`` is always the full buffer as nccl-tests prints it: the all-gather output, the reduce-scatter
input, the all-reduce buffer. algbw = size / time and busbw = algbw x factor, in GB/s with GB = 1e9
bytes (nccl-facts.md section C). Sizes on the command line use binary units, like nccl-tests.
"""

from __future__ import annotations

import re

OPS = ("all_gather", "reduce_scatter", "all_reduce")
GB = 1e9
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgb]?)(?:i?b)?\s*$", re.IGNORECASE)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor: AG and RS (n-1)/n, AR 2(n-1)/n, p2p ``sendrecv`` 1."""
    if n < 1:
        raise ValueError(f"group size must be >= 1, got {n}")
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op == "sendrecv":
        return 1.0
    raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    return size_bytes / time_s / GB if time_s > 0 else 0.0


def busbw_gbps(op: str, size_bytes: int, time_s: float, n: int) -> float:
    return algbw_gbps(size_bytes, time_s) * bus_factor(op, n)


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


def round_size(size_bytes: int, n: int, elem: int = 4) -> int:
    """The largest buffer <= size that splits into ``n`` equal chunks of whole elements (>= 1 each)."""
    per = max(1, size_bytes // (n * elem))
    return per * n * elem


def format_size(size_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    if size_bytes >= 1 << 20:
        return f"{size_bytes / (1 << 20):.1f} MiB"
    if size_bytes >= 1 << 10:
        return f"{size_bytes / (1 << 10):.1f} KiB"
    return f"{size_bytes} B"


def link_gbps(speed_mbit: float) -> float:
    """A link's line rate in Mb/s (sysfs ``speed``) as GB/s per direction."""
    return speed_mbit * 1e6 / 8 / GB


def auto_iters(size_bytes: int, *, budget_bytes: int, lo: int = 5, hi: int = 50) -> int:
    """Enough iterations for a stable mean at small sizes without spending minutes at large ones."""
    return max(lo, min(hi, budget_bytes // max(1, size_bytes)))
