"""What the launchers and the ranks of one preflight run say to each other through node 0's TCPStore.

Every key and every message shape lives here. Messages are JSON objects (or, for a rank's stage, one
``<seq>|<name>`` string); each dataclass writes its keys in the order the report shows them, so a message
that lands in the JSON report (a node's NCCL log summary) reads exactly as before.

Keys, in the order a run writes them:

- ``nccl-doctor/run``: node 0 stamps its run's identity first; a follower reads it before writing anything
- ``node/<i>``: node ``i``'s probe and facts; ``rendezvous/closed``: node 0 stopped waiting (who was missing)
- ``hb/<i>``: node ``i``'s heartbeat counter; ``go``: node 0 says start the ranks
- ``stage/<rank>``, ``error/<rank>`` and the ``errors`` counter: what each rank is doing, or why it failed
- ``result``: rank 0's findings, tables and data; ``logs/wanted``, then ``logs/<i>``: each node's NCCL logs
- ``verdict``: node 0's decision, and ``acks``: how many followers read it
- ``pg/...``: the ranks' process group, under its own prefix
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nccl_doctor.enums import StrEnum
from nccl_doctor.report import Finding, Severity, Table

# --- keys --------------------------------------------------------------------------------------------
RUN_KEY = "nccl-doctor/run"  # node 0 writes its run's identity first: followers check it before writing anything
CLOSED_KEY = "rendezvous/closed"  # node 0 stopped waiting; the value lists the nodes it gave up on
GO_KEY = "go"
RESULT_KEY = "result"
ERRORS_KEY = "errors"  # a counter: node 0 polls it instead of every rank's error key
LOGS_WANTED_KEY = "logs/wanted"
VERDICT_KEY = "verdict"
ACKS_KEY = "acks"
PG_PREFIX = "pg"  # the ranks' process group keys, apart from ours
# not in the store: each rank writes the backend it really runs to <this env's value>.<rank> on its own node
# (the launcher's private log dir), so a node reports what ran, not what its /dev/nvidia* suggested
BACKEND_RECORD_ENV = "NCCL_DOCTOR_BACKEND_RECORD"
BACKEND_RECORD = "backend"


def record_backend(prefix: str, rank: int, device: str) -> None:
    """A rank's record of its backend: NCCL on a CUDA device, Gloo on the CPU."""
    Path(f"{prefix}.{rank}").write_text("nccl" if device.startswith("cuda") else "gloo")


def recorded_backends(log_dir: Path) -> set[str]:
    """The backends this node's ranks recorded (empty: none got as far as init)."""
    return {text for path in log_dir.glob(f"{BACKEND_RECORD}.*") if (text := _read(path))}


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def node_key(node: int) -> str:
    return f"node/{node}"


def heartbeat_key(node: int) -> str:
    return f"hb/{node}"


def logs_key(node: int) -> str:
    return f"logs/{node}"


def stage_key(rank: int) -> str:
    return f"stage/{rank}"


def error_key(rank: int) -> str:
    return f"error/{rank}"


# --- stages ------------------------------------------------------------------------------------------
class Stage(StrEnum):
    """Where a run stopped (the report's ``stage``) and what a rank is doing; a rank's bench stages are
    open-ended (``bench all_gather intra 64 MiB``) and travel as plain strings with ``BENCH_PREFIX``."""

    PROBE = "probe"
    RENDEZVOUS = "rendezvous"
    CONSISTENCY = "consistency"
    RUN = "run"
    VERDICT = "verdict"
    NCCL_LOGS = "nccl-logs"
    NOT_STARTED = "not started"
    INIT = "init"
    FSDP_SMOKE = "fsdp-smoke"
    DONE = "done"


BENCH_PREFIX = "bench "  # a rank's bench stages, as the store shows them
TOTAL = "total"  # the whole run's deadline (and its timing), where a stage would be named


@dataclass(frozen=True)
class StageMark:
    """``stage/<rank>`` = ``<seq>|<name>``: a sequence number makes "who is behind" a comparison."""

    seq: int
    name: str

    def encode(self) -> str:
        return f"{self.seq}|{self.name}"

    @classmethod
    def decode(cls, text: str) -> StageMark:
        seq, _, name = text.partition("|")
        return cls(int(seq), name)


# --- messages ----------------------------------------------------------------------------------------
def _load(text: str | bytes) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True, kw_only=True)
class RunStamp:
    """``nccl-doctor/run``: which run owns this store (Slurm: ``job.step``)."""

    run: str
    step: str
    host: str

    def to_json(self) -> str:
        return json.dumps({"run": self.run, "step": self.step, "host": self.host})

    @classmethod
    def from_json(cls, text: str | bytes) -> RunStamp:
        d = _load(text)
        return cls(run=str(d.get("run")), step=str(d.get("step") or ""), host=str(d.get("host") or ""))


@dataclass(frozen=True, kw_only=True)
class Closed:
    """``rendezvous/closed``: node 0 stopped waiting without the ``missing`` nodes."""

    missing: list[int]
    host: str

    def to_json(self) -> str:
        return json.dumps({"missing": self.missing, "host": self.host})

    @classmethod
    def from_json(cls, text: str | bytes) -> Closed:
        d = _load(text)
        return cls(missing=[int(i) for i in d.get("missing", [])], host=str(d.get("host") or ""))


@dataclass(frozen=True, kw_only=True)
class NodePost:
    """``node/<i>``: one node's probe, as node 0 compares and reports it."""

    host: str
    node: int
    facts: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    fatal: bool = False

    def bad_findings(self) -> list[Finding]:
        """Its WARN and FAIL findings (a PASS line per node would only bury them)."""
        return [f for f in self.findings if f.severity is not Severity.PASS]

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "node": self.node, "facts": self.facts,
                           "findings": [f.as_dict() for f in self.findings], "fatal": self.fatal})

    @classmethod
    def from_json(cls, text: str | bytes) -> NodePost:
        d = _load(text)
        return cls(host=d["host"], node=int(d["node"]), facts=dict(d["facts"]),
                   findings=[Finding.from_dict(f) for f in d["findings"]], fatal=bool(d["fatal"]))


@dataclass(frozen=True, kw_only=True)
class RankError:
    """``error/<rank>``: the stage a rank was in when it failed, and the error's text; for an error that knows
    its own cause (bench's ``CudaUnusable``) also its finding code and fix."""

    stage: str
    error: str
    fix: str = ""
    code: str = ""

    def first_line(self) -> str:
        return self.error.splitlines()[0] if self.error else "?"

    def to_json(self) -> str:
        extra = {k: v for k, v in (("fix", self.fix), ("code", self.code)) if v}
        return json.dumps({"stage": self.stage, "error": self.error, **extra})

    @classmethod
    def from_json(cls, text: str | bytes) -> RankError:
        d = _load(text)
        return cls(stage=str(d.get("stage") or ""), error=str(d.get("error") or ""), fix=str(d.get("fix") or ""),
                   code=str(d.get("code") or ""))


@dataclass(frozen=True, kw_only=True)
class RankResult:
    """``result``: what rank 0 measured and judged, for node 0's launcher to report."""

    findings: list[Finding]
    tables: list[Table]
    notes: list[str]
    data: dict[str, Any]
    timings_s: dict[str, float]
    measured: bool = True

    def to_json(self) -> str:
        return json.dumps({"findings": [f.as_dict() for f in self.findings],
                           "tables": [t.as_dict() for t in self.tables], "notes": self.notes, "data": self.data,
                           "timings_s": self.timings_s, "measured": self.measured})

    @classmethod
    def from_json(cls, text: str | bytes) -> RankResult:
        d = _load(text)
        return cls(findings=[Finding.from_dict(f) for f in d["findings"]],
                   tables=[Table.from_dict(t) for t in d["tables"]], notes=list(d.get("notes", [])),
                   data=dict(d["data"]), timings_s=dict(d.get("timings_s", {})), measured=d.get("measured", True))


@dataclass(frozen=True, kw_only=True)
class VerdictMessage:
    """``verdict``: node 0's decision, which every node exits with."""

    code: int
    verdict: str
    summary: str

    def to_json(self) -> str:
        return json.dumps({"code": self.code, "verdict": self.verdict, "summary": self.summary})

    @classmethod
    def from_json(cls, text: str | bytes) -> VerdictMessage:
        d = _load(text)
        return cls(code=int(d["code"]), verdict=str(d["verdict"]), summary=str(d["summary"]))


@dataclass(frozen=True, kw_only=True)
class LogSummary:
    """``logs/<i>``: one node's captured NCCL logs, parsed; or why there is nothing to parse. Also the
    report's ``nccl_logs`` entries, so ``as_dict`` keeps each variant's keys as they always were."""

    host: str
    skipped: str | None = None
    files: int | None = None  # None: no log file was there to parse
    inter_node: Any = None
    intra_node: Any = None
    communicators: list[dict[str, Any]] | None = None  # None: nothing parsed
    findings: list[dict[str, Any]] = field(default_factory=list)
    sent: bool = True  # False: node 0 never received it (the node sent none)

    @classmethod
    def not_sent(cls, host: str) -> LogSummary:
        return cls(host=host, skipped=f"{host} sent no NCCL log summary", sent=False)

    def as_dict(self) -> dict[str, Any]:
        if not self.sent:
            return {"host": self.host, "findings": self.findings, "skipped": self.skipped}
        out: dict[str, Any] = {"host": self.host, "skipped": self.skipped}
        if self.files is not None:
            out["files"] = self.files
        if self.communicators is not None:
            out.update(inter_node=self.inter_node, intra_node=self.intra_node, communicators=self.communicators)
        out["findings"] = self.findings
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogSummary:
        comms = d.get("communicators")
        return cls(host=d["host"], skipped=d.get("skipped"), files=d.get("files"), inter_node=d.get("inter_node"),
                   intra_node=d.get("intra_node"), communicators=None if comms is None else list(comms),
                   findings=list(d.get("findings", [])))

    @classmethod
    def from_json(cls, text: str | bytes) -> LogSummary:
        return cls.from_dict(_load(text))
