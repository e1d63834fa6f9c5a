"""Which measurement a run's headline quotes: the busbw at the largest bandwidth-bound size.

The best figure of every size could be one the run's own table marks latency-bound (a 1 MiB call that came
out a little faster than 64 MiB): a headline must never call that the bandwidth. The table's predicate
(``busbw.latency_bound``) decides here too, so the two cannot disagree. When every size is latency-bound the
largest one is quoted, and ``HeadLine.latency_bound`` says so, for the text to say it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nccl_doctor.bench.busbw import format_size, latency_bound
from nccl_doctor.bench.model import Measurement

LATENCY_BOUND_TEXT = "latency-bound: not the links' bandwidth"


@dataclass(frozen=True)
class HeadLine:
    """The quoted measurement, and whether it is latency-bound (then every size measured is)."""

    measurement: Measurement
    latency_bound: bool

    @property
    def where(self) -> str:
        """``at 64 MiB``, or ``at 4 MiB, latency-bound: not the links' bandwidth``."""
        at = f"at {format_size(self.measurement.size_bytes)}"
        return f"{at}, {LATENCY_BOUND_TEXT}" if self.latency_bound else at


def headline(measurements: Iterable[Measurement]) -> HeadLine:
    """The best busbw at the largest size that is not latency-bound; every size latency-bound: at the largest
    size. There must be a measurement (a run that measured nothing has no headline: ValueError)."""
    ms = list(measurements)
    if not ms:
        raise ValueError("no measurement to quote")
    bound = [m for m in ms if not latency_bound(m.size_bytes)]
    pool = bound or ms
    largest = max(m.size_bytes for m in pool)
    best = max((m for m in pool if m.size_bytes == largest), key=lambda m: m.busbw_gbps)
    return HeadLine(measurement=best, latency_bound=not bound)
