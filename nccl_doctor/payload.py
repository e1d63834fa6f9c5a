"""A command's own part of the JSON report, typed: each command's payload (``ProbePayload``, ``ParsePayload``,
``BenchPayload``, ``PlanPayload``, ``PreflightPayload``) is a frozen dataclass that says what it holds and
writes its keys with ``to_json``, in the order the report has always had them.

The envelope (``ENVELOPE``: schema version, tool, command, verdict, summary, could-not-run, findings) belongs to
the report, never to a payload: ``render.report_dict`` refuses a payload that writes one of its keys, so a
payload's ``"verdict": "pass"`` can never stand beside a FAIL finding.

A reader that needs one fact of a payload (``prom`` the node's interfaces, ``drain`` the node a probe is
about) asks for a facet (``NodeSubject``, ``BenchFigures``) by ``isinstance``, so it needs no command's
package (``prom`` sits below them all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, Protocol, TypeAlias, runtime_checkable

Json: TypeAlias = "str | int | float | bool | Sequence[Json] | Mapping[str, Json] | None"
JsonObject: TypeAlias = "Mapping[str, Json]"
# the report's own keys (``drain``: what --drain-on-fail did, written after the payload)
ENVELOPE = ("schema_version", "tool", "tool_version", "command", "verdict", "summary", "could_not_run", "drain",
            "findings")


class Payload(Protocol):
    """A command's JSON keys: what it measured, parsed or planned."""

    def to_json(self) -> JsonObject:
        """The payload's keys, in their documented order; none of them an ``ENVELOPE`` key."""
        ...


class FieldsJson:
    """The ``to_json`` of a dataclass payload whose fields are its JSON keys, in their declared order: a mixin
    with no fields of its own, so each payload's fields (and the JSON's key order) stay as it declares them."""

    def to_json(self) -> JsonObject:
        record: Any = self  # a dataclass: fields() reads what it declares
        return {f.name: getattr(self, f.name) for f in fields(record)}


@runtime_checkable
class NodeSubject(Payload, Protocol):
    """A payload about one node (``probe``): its findings are about it unless they name another host."""

    @property
    def host(self) -> str: ...

    @property
    def root(self) -> str:
        """The file system it read (``/``, or another node's snapshot)."""
        ...

    @property
    def interfaces(self) -> Sequence[JsonObject]: ...

    @property
    def rdma_devices(self) -> Sequence[JsonObject]: ...


@runtime_checkable
class BenchFigures(Payload, Protocol):
    """A payload holding a bandwidth measurement (``bench``, and ``preflight``'s bench)."""

    @property
    def bench_figures(self) -> JsonObject | None:
        """The bench document: its ``results`` and per-node figures; None when nothing was measured."""
        ...


def envelope_clash(doc: JsonObject) -> list[str]:
    """The envelope keys a payload's JSON would overwrite (none allowed)."""
    return [k for k in ENVELOPE if k in doc]
