"""A payload that is its own JSON, for the tests of what reads a payload (render, prom, the golden reports)."""

from __future__ import annotations

from dataclasses import dataclass

from nccl_doctor.payload import JsonObject


@dataclass(frozen=True)
class Doc:
    """A payload that is its JSON, for tests of what reads a payload (render, prom)."""

    doc: JsonObject
    bench_figures: JsonObject | None = None  # the BenchFigures facet

    def to_json(self) -> JsonObject:
        return self.doc
