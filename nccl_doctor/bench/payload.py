"""``bench``'s payloads, one per shape of its JSON (``docs/bench.md``): a measured run, and the four ways a run
stops before it measures (the probe refused to launch, the launch failed or hit its deadline, a stage failed,
CUDA cannot serve the ranks). Each writes its keys in the order the report has always had; the rows
(results, nodes, pairs) and the localisation stay JSON objects, built by ``view.py`` from the models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nccl_doctor.payload import FieldsJson, JsonObject

LOCALISATION = "localisation"  # preflight reports it beside the bench document, not inside it


@dataclass(frozen=True, kw_only=True)
class BenchPayload(FieldsJson):
    """A measured run: what was run where, every measurement, each node's figure and the pair pass."""

    backend: str
    device: str  # "cuda" or "cpu", without the index
    world_size: int
    nnodes: int
    local_world_size: int
    elapsed_s: float
    results: Sequence[JsonObject]
    nodes: Sequence[JsonObject]
    pairs: Sequence[JsonObject]
    localisation: JsonObject  # the slow node's localisation, or {"skipped": why}
    skipped_groups: Sequence[str]
    gpu_pairs: JsonObject = field(default_factory=dict)  # the intra-node GPU-pair pass, or {"skipped": why}

    @property
    def bench_figures(self) -> JsonObject:
        return self.to_json()

    def without_localisation(self) -> JsonObject:
        """The document preflight keeps under ``bench`` (its localisation is a key of its own)."""
        return {k: v for k, v in self.to_json().items() if k != LOCALISATION}


@dataclass(frozen=True, kw_only=True)
class BenchBlocked(FieldsJson):
    """The probe found the backend's interface settings cannot work: nothing launched."""

    stage: str
    backend: str
    results: Sequence[JsonObject] = field(default_factory=list)
    nodes: Sequence[JsonObject] = field(default_factory=list)
    localisation: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BenchLaunchFailed(FieldsJson):
    """The workers failed, or the run hit its deadline, in ``stage``."""

    stage: str
    timed_out: bool
    returncode: int | None
    elapsed_s: float
    results: Sequence[JsonObject] = field(default_factory=list)
    nodes: Sequence[JsonObject] = field(default_factory=list)
    localisation: JsonObject = field(default_factory=dict)
    worker_log: str | None = None


@dataclass(frozen=True, kw_only=True)
class BenchStageFailed(FieldsJson):
    """A stage failed on a rank; the ranks that never reached it."""

    stage: str
    missing_ranks: Sequence[int]
    missing_hosts: Sequence[str]
    never_left_ranks: Sequence[int] = field(default_factory=list)  # entered the stage and never left it
    never_left_hosts: Sequence[str] = field(default_factory=list)
    results: Sequence[JsonObject] = field(default_factory=list)
    nodes: Sequence[JsonObject] = field(default_factory=list)
    worker_log: str | None = None
    localisation: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BenchCudaUnusable(FieldsJson):
    """GPUs were expected and CUDA cannot serve this node's ranks (ND313): nothing ran."""

    stage: str
    backend: str
    cuda_error: str | None
    results: Sequence[JsonObject] = field(default_factory=list)
    nodes: Sequence[JsonObject] = field(default_factory=list)
    localisation: JsonObject = field(default_factory=dict)
    worker_log: str | None = None

