"""``preflight``'s payload: node 0 learns its keys stage by stage (the plan, the nodes' facts, the ranks'
result or where they stopped, the NCCL logs, the timings), and the JSON has always written them in the
order they were learnt, which differs by how far the run got (``docs/preflight.md``). So the payload is
typed, field by field, and keeps that order: a field is written once it is set, in the order first set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nccl_doctor.payload import Json, JsonObject
from nccl_doctor.report import Report

RESULT_KEYS = ("backend", "bench", "localisation", "fsdp_smoke")  # what rank 0's result sets, in its order


class PreflightPayload:
    """Every key a preflight report may have; reading one not set is an AttributeError (``has`` says)."""

    nnodes: int
    nproc_per_node: int
    hosts: Sequence[str]
    nodes: Sequence[str]  # a node alone (it lost the others): itself
    node_facts: Sequence[Mapping[str, str]]
    stage: str  # the stage the run stopped in, or ``done``
    backend: str | None
    ranks: Sequence[JsonObject]  # each rank's host and stage, when the ranks stopped short
    bench: JsonObject  # the short bench's document, its localisation apart
    localisation: JsonObject
    fsdp_smoke: Json
    nccl_logs: Sequence[JsonObject]
    timings_s: Mapping[str, float]
    plan: str  # ``--plan-params``: what plan would recommend from this run's figures

    def __init__(self) -> None:
        object.__setattr__(self, "_order", [])

    def __setattr__(self, name: str, value: object) -> None:
        if name not in _KEYS:
            raise AttributeError(f"a preflight report has no key {name!r}")
        order: list[str] = self.__dict__["_order"]
        if name not in order:
            order.append(name)
        object.__setattr__(self, name, value)

    def has(self, name: str) -> bool:
        return name in self.__dict__["_order"]

    def set_plan(self, nnodes: int, nproc_per_node: int, hosts: Sequence[str]) -> None:
        """The run's shape (set again once the nodes have named themselves: the keys keep their place)."""
        self.nnodes, self.nproc_per_node, self.hosts = nnodes, nproc_per_node, list(hosts)

    def set_result(self, data: Mapping[str, Any]) -> None:
        """Rank 0's result (``RankResult.data``, checked by ``protocol``): the keys it has, in their order."""
        for name in RESULT_KEYS:
            if name in data:
                setattr(self, name, data[name])

    @property
    def bench_figures(self) -> JsonObject | None:
        return self.bench if self.has("bench") else None

    def to_json(self) -> JsonObject:
        return {k: getattr(self, k) for k in self.__dict__["_order"]}


_KEYS = frozenset(PreflightPayload.__annotations__)


def preflight_payload(report: Report) -> PreflightPayload:
    """The report's preflight payload, made on first use (node 0 adds its keys as it learns them)."""
    if report.payload is None:
        report.payload = PreflightPayload()
    if not isinstance(report.payload, PreflightPayload):
        raise TypeError(f"a preflight report holds {type(report.payload).__name__}")
    return report.payload
