"""``probe``'s payload: the node's facts and what NCCL and Gloo make of them, keys as ``docs/probe.md``
documents them. The sub-documents (an interface, the NCCL choice, the settings) stay JSON objects: they are
read only by people and dashboards, from the JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nccl_doctor.payload import FieldsJson, Json, JsonObject


@dataclass(frozen=True, kw_only=True)
class ProbePayload(FieldsJson):
    """One node's probe; its fields in the JSON's order."""

    host: str
    root: str  # the file system read: "/" live, else a snapshot's path (drain then drains nothing)
    interfaces: Sequence[JsonObject]
    rdma_devices: Sequence[JsonObject]
    gpus: Sequence[JsonObject]
    gdr: JsonObject
    default_route: Sequence[str]
    default_route6: Sequence[str]
    unattributed_addresses: Json
    nccl: JsonObject  # bootstrap and socket interfaces, IB devices, ``transport``
    gloo_iface: str | None
    gloo: JsonObject
    settings: JsonObject  # NCCL_*/GLOO_* name -> {value, source}
    conf_files: Json
    exports: Sequence[str]  # the recommended exports, one shell line each

