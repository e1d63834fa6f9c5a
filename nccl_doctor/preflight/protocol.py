"""What the launchers and the ranks of one preflight run say to each other through node 0's TCPStore.

Every key and every message shape lives here. Messages are JSON objects (or, for a rank's stage, one
``<seq>|<name>`` string); each dataclass writes its keys in the order the report shows them, so a message
that lands in the JSON report (a node's NCCL log summary) reads exactly as before.

Keys, in the order a run writes them:

- ``nccl-doctor/run``: node 0 stamps its run's identity first; a follower reads it before writing anything
- ``node/<i>``: node ``i``'s probe and facts; ``rendezvous/closed``: node 0 stopped waiting (who was missing)
- ``hb/<i>``: node ``i``'s heartbeat counter; ``go``: node 0 says start the ranks
- ``stages/<i>``: what node ``i``'s ranks are doing (its launcher relays their stage files, so node 0 reads
  one value per node); ``error/<rank>`` and the ``errors`` counter: why a rank failed
- ``result``: rank 0's findings, tables and data; ``logs/wanted``, then ``logs/<i>``: each node's NCCL logs
- ``verdict``: node 0's decision, and ``acks``: how many followers read it
- ``pg/...``: the ranks' process group, under its own prefix

With ``NCCL_DOCTOR_SECRET`` every value we ``set`` is authenticated (``auth.py``). The counters written with
``add`` (``errors``, ``acks``) cannot be: they are hints that no verdict rests on (``errors`` only makes
node 0 read the authenticated ``error/<rank>`` keys; ``acks`` only ends node 0's wait for its followers
sooner). Heartbeats are authenticated values, not counters. Every value read is capped (``value_cap``) and
parsed field by field (``checked.py``): a bad one is a ``RejectedValueError`` naming its key, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nccl_doctor.cluster.stages import Stage
from nccl_doctor.codes import Code
from nccl_doctor.files import atomic_write
from nccl_doctor.preflight import checked as c
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
STAGE_RECORD_ENV = "NCCL_DOCTOR_STAGE_RECORD"  # a rank writes its stage mark to <this env's value>.<rank>
STAGE_RECORD = "stage"
RUN_ENV = "NCCL_DOCTOR_PREFLIGHT_RUN"  # the run id, for the ranks' MACs (the secret reaches them in the env as-is)


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


def stages_key(node: int) -> str:
    return f"stages/{node}"


def error_key(rank: int) -> str:
    return f"error/{rank}"


# --- limits: a value bigger than its key's cap is rejected before it is parsed ---------------------------
KIB, MIB = 1 << 10, 1 << 20
VALUE_CAPS = {"node": 2 * MIB, "result": 32 * MIB, "logs": 8 * MIB, "error": 256 * KIB}  # by the key's first part
SMALL_CAP = 64 * KIB  # every other key: stamps, marks, heartbeats, the verdict
ERROR_TEXT_CAP = 64 * KIB  # a rank's error text is cut to this before it is written


def value_cap(key: str) -> int:
    """The most bytes the value of ``key`` may hold (a probe post 2 MiB, rank 0's result 32 MiB, ...)."""
    if key == LOGS_WANTED_KEY:
        return SMALL_CAP
    return VALUE_CAPS.get(key.split("/", 1)[0], SMALL_CAP)


def key_owner(key: str) -> tuple[int | None, int | None]:
    """Who writes ``key``: (node, rank); (0, None) for node 0's own keys, (None, 0) for ``result``."""
    kind, _, index = key.partition("/")
    if key == RESULT_KEY:
        return None, 0
    if index.isdigit() and kind in ("node", "hb", "logs", "stages"):
        return int(index), None
    if index.isdigit() and kind == "error":
        return None, int(index)
    return 0, None


# --- stages ------------------------------------------------------------------------------------------
BENCH_PREFIX = "bench "  # a rank's bench stages, as the store shows them (stage names: ``cluster.stages.Stage``)
TOTAL = "total"  # the whole run's deadline (and its timing), where a stage would be named


@dataclass(frozen=True)
class StageMark:
    """A rank's stage, ``<seq>|<name>`` (its stage file): a sequence number makes "who is behind" a comparison."""

    seq: int
    name: str

    def encode(self) -> str:
        return f"{self.seq}|{self.name}"

    @classmethod
    def decode(cls, text: str) -> StageMark:
        seq, sep, name = text.partition("|")
        if not sep or not seq.lstrip("-").isdigit() or len(seq) > MAX_SEQ_DIGITS:
            raise ValueError(f"a stage mark is <number>|<stage>, not {text[:40]!r}")
        return cls(int(seq), name)


MAX_SEQ_DIGITS = 12
NOT_STARTED_MARK = StageMark(-1, Stage.NOT_STARTED)  # a rank that has written no stage yet


def record_stage(prefix: str, rank: int, mark: StageMark) -> None:
    """A rank's stage, in its launcher's private directory (written whole: the launcher never reads half)."""
    atomic_write(Path(f"{prefix}.{rank}"), mark.encode())


class StageMarks:
    """A rank's ``StageSink`` under preflight: ``<seq>|<name>`` as the rank moves on, in a file its launcher
    relays to node 0 with its other ranks' (``stages/<node>``: one value per node, not one store write per
    rank); node 0 compares the numbers. ``current`` is the stage a failure is reported in."""

    def __init__(self, rank: int, record_prefix: str | None):
        self.rank, self.prefix, self.seq, self.current = rank, record_prefix, 0, str(Stage.INIT)

    def record(self, stage: str) -> None:
        self.seq += 1
        self.current = stage
        if self.prefix:
            record_stage(self.prefix, self.rank, StageMark(self.seq, stage))


def recorded_stage(prefix: Path, rank: int) -> StageMark:
    """What a local rank last recorded (``NOT_STARTED_MARK`` before it wrote one)."""
    try:
        return StageMark.decode(Path(f"{prefix}.{rank}").read_text())
    except (OSError, ValueError):
        return NOT_STARTED_MARK


@dataclass(frozen=True)
class NodeStages:
    """``stages/<i>``: node ``i``'s ranks' stage marks, by local rank, as its launcher relays them."""

    marks: tuple[StageMark, ...]

    @classmethod
    def not_started(cls, nproc: int) -> NodeStages:
        return cls((NOT_STARTED_MARK,) * nproc)

    def to_json(self) -> str:
        return json.dumps({"marks": [[m.seq, m.name] for m in self.marks]})

    @classmethod
    def from_json(cls, text: str | bytes) -> NodeStages:
        marks = c.array(c.load_object(text), "marks")
        if not all(isinstance(m, list) and len(m) == 2 and isinstance(m[0], int) and not isinstance(m[0], bool)
                   and isinstance(m[1], str) for m in marks):
            raise ValueError("'marks' must be a list of [number, stage]")
        return cls(tuple(StageMark(m[0], m[1]) for m in marks))


def heartbeat_count(text: str) -> int:
    """``hb/<i>``: a node's heartbeat count, an authenticated value (a counter could not carry a MAC)."""
    if not text.isdigit() or len(text) > MAX_SEQ_DIGITS:
        raise ValueError(f"a heartbeat is a count, not {text[:40]!r}")
    return int(text)


# --- messages ----------------------------------------------------------------------------------------
_load = c.load_object


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
        return cls(run=c.text(d, "run"), step=c.text(d, "step", ""), host=c.text(d, "host", ""))


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
        return cls(missing=c.ints(d, "missing"), host=c.text(d, "host", ""))


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
                           "findings": [f.to_wire() for f in self.findings], "fatal": self.fatal})

    @classmethod
    def from_json(cls, text: str | bytes) -> NodePost:
        d = _load(text)
        return cls(host=c.text(d, "host"), node=c.integer(d, "node"), facts=c.text_map(d, "facts"),
                   findings=c.findings(d, "findings"), fatal=c.boolean(d, "fatal"))


@dataclass(frozen=True, kw_only=True)
class RankError:
    """``error/<rank>``: the stage a rank was in when it failed, and the error's text; for an error that knows
    its own cause (bench's ``CudaUnusable``) also its finding code and fix."""

    stage: str
    error: str
    fix: str = ""
    code: Code | None = None

    def first_line(self) -> str:
        return self.error.splitlines()[0] if self.error else "?"

    def to_json(self) -> str:
        extra = {k: v for k, v in (("fix", self.fix), ("code", self.code)) if v}
        return json.dumps({"stage": self.stage, "error": self.error, **extra})

    @classmethod
    def from_json(cls, text: str | bytes) -> RankError:
        d = _load(text)
        return cls(stage=c.text(d, "stage", ""), error=c.text(d, "error", ""), fix=c.text(d, "fix", ""),
                   code=c.optional_member(d, "code", Code))


RESULT_OBJECTS = ("bench", "localisation", "fsdp_smoke")


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
        return json.dumps({"findings": [f.to_wire() for f in self.findings],
                           "tables": [t.as_dict() for t in self.tables], "notes": self.notes, "data": self.data,
                           "timings_s": self.timings_s, "measured": self.measured})

    @classmethod
    def from_json(cls, text: str | bytes) -> RankResult:
        d = _load(text)
        data = c.obj(d, "data")
        for name in RESULT_OBJECTS:  # what node 0 and the renderers read inside ``data``
            c.obj(data, name, optional=True)
        c.optional_text(data, "backend")
        return cls(findings=c.findings(d, "findings"), tables=c.tables(d, "tables"),
                   notes=c.texts(d, "notes", optional=True), data=data, timings_s=c.number_map(d, "timings_s"),
                   measured=c.boolean(d, "measured", True))


@dataclass(frozen=True, kw_only=True)
class VerdictMessage:
    """``verdict``: node 0's decision, which every node exits with."""

    code: int
    verdict: Severity
    summary: str

    def to_json(self) -> str:
        return json.dumps({"code": self.code, "verdict": self.verdict, "summary": self.summary})

    @classmethod
    def from_json(cls, text: str | bytes) -> VerdictMessage:
        d = _load(text)
        return cls(code=c.integer(d, "code"), verdict=c.member(d, "verdict", Severity), summary=c.text(d, "summary"))


@dataclass(frozen=True, kw_only=True)
class LogSummary:
    """``logs/<i>``: one node's captured NCCL logs, parsed; or why there is nothing to parse. Also the
    report's ``nccl_logs`` entries, so ``as_dict`` keeps each variant's keys as they always were (its findings
    in the report's form); ``to_json`` sends the findings' templates and parameters too (``Finding.to_wire``)."""

    host: str
    skipped: str | None = None
    files: int | None = None  # None: no log file was there to parse
    inter_node: Any = None
    intra_node: Any = None
    communicators: list[dict[str, Any]] | None = None  # None: nothing parsed
    findings: list[Finding] = field(default_factory=list)
    sent: bool = True  # False: node 0 never received it (the node sent none)

    @classmethod
    def not_sent(cls, host: str) -> LogSummary:
        return cls(host=host, skipped="the node sent no NCCL log summary", sent=False)  # one line for all such nodes

    def as_dict(self, *, wire: bool = False) -> dict[str, Any]:
        findings = [f.to_wire() if wire else f.as_dict() for f in self.findings]
        if not self.sent:
            return {"host": self.host, "findings": findings, "skipped": self.skipped}
        out: dict[str, Any] = {"host": self.host, "skipped": self.skipped}
        if self.files is not None:
            out["files"] = self.files
        if self.communicators is not None:
            out.update(inter_node=self.inter_node, intra_node=self.intra_node, communicators=self.communicators)
        out["findings"] = findings
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(wire=True))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogSummary:
        comms = None if d.get("communicators") is None else c.array(d, "communicators")
        for comm in comms or []:  # the NCCL table reads these
            if not isinstance(comm, dict):
                raise ValueError("'communicators' must be a list of objects")
            c.optional_text(c.obj(comm, "inter_node", optional=True), "transport")
            c.texts(comm, "intra_node", optional=True)
        return cls(host=c.text(d, "host"), skipped=c.optional_text(d, "skipped"), files=c.optional_integer(d, "files"),
                   inter_node=d.get("inter_node"), intra_node=d.get("intra_node"), communicators=comms,
                   findings=c.findings(d, "findings", optional=True))

    @classmethod
    def from_json(cls, text: str | bytes) -> LogSummary:
        return cls.from_dict(_load(text))
