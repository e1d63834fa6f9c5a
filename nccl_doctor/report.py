"""The one report model every command produces.

A check yields ``Finding``s; a ``Report`` holds them with the command's typed payload (``payload.py``)
and the tables its text view shows. Renderers (``render.py``) only read a ``Report``; the exit code is
a pure function of it.

Every text a ``Where``, ``Finding`` or ``Table`` is given is made ``printable`` (``text.py``) as it is
built: text from logs, sysfs or peers reaches no output with a control character or escape sequence,
however the object was made (``finding``, the constructor, ``from_dict`` of a peer's JSON).

A finding may be made from parameters (``templated``): its message and fix are its code's templates
(``codes/text.py``) rendered with its ``Where`` fields and its own ``params``. Common parameter names:
``figure`` (a measured value), ``expected``, ``value`` (a setting's value), ``name`` (a variable's name),
``count``, ``peer`` (another host), ``hosts``; the ``Where`` fields (``host``, ``rank``, ``comm``, ``iface``,
``device``, ``file``, ``line``) are not repeated as parameters, a template reads them as they are. The
rendered ``message`` and ``fix`` are stored all the same: renderers read them, not the template.

Wire format and report format differ by two keys: ``to_wire`` (what nodes send each other) adds
``template`` and ``params`` to ``as_dict``, so node 0 can merge and re-render; the user's JSON report
(``render.report_dict``) keeps ``as_dict``, its keys as they always were.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import hostlist

from nccl_doctor.codes import CODES, Code
from nccl_doctor.codes.text import DEFAULT_VARIANT
from nccl_doctor.enums import StrEnum
from nccl_doctor.payload import JsonObject, Payload
from nccl_doctor.text import printable, printable_or_none

SCHEMA_VERSION = "1.0"


class Severity(StrEnum):
    """Ordered: a report's verdict is its worst finding."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.PASS: 0, Severity.WARN: 1, Severity.FAIL: 2}


def _printable_cell(value: Any) -> Any:
    """A string made ``printable``; anything else (a number in a table cell) as it is."""
    return printable(value) if isinstance(value, str) else value


@dataclass(frozen=True, kw_only=True)
class Where:
    """What a finding is about; every field optional, JSON keeps only the ones set."""

    host: str | None = None
    rank: int | None = None
    comm: str | None = None
    iface: str | None = None
    device: str | None = None
    file: str | None = None
    line: int | None = None

    def __post_init__(self) -> None:
        for name in _WHERE_TEXTS:
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, printable(value))

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Where:
        """The inverse of ``as_dict``; keys this version does not know are dropped."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None})

    def __str__(self) -> str:
        parts = []
        if self.host:
            parts.append(f"host {self.host}")
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.comm:
            parts.append(f"comm {self.comm}")
        if self.iface:
            parts.append(f"iface {self.iface}")
        if self.device:
            parts.append(f"device {self.device}")
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        return ", ".join(parts)


_WHERE_TEXTS = ("host", "comm", "iface", "device", "file")  # the fields of a ``Where`` that hold input text
WHERE_FIELDS = tuple(f.name for f in fields(Where))  # templates read them; no param repeats one

ParamValue = str | int | float | None
Params = tuple[tuple[str, ParamValue], ...]  # a finding's parameters, sorted by name: hashable, comparable


def _printable_param(value: ParamValue) -> ParamValue:
    return printable(value) if isinstance(value, str) else value


def _params(values: Mapping[str, ParamValue]) -> Params:
    """Checked and sorted: a name a ``Where`` field has is refused (one value, one place)."""
    clash = sorted(set(values) & set(WHERE_FIELDS))
    if clash:
        raise ValueError(f"finding parameter {clash[0]!r} is a Where field: pass it as where, not as a parameter")
    return tuple(sorted((printable(str(k)), _printable_param(v)) for k, v in values.items()))


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One result of one check: a stable code (see ``codes.py``), what is wrong, where, and the fix."""

    code: Code
    severity: Severity
    message: str
    fix: str | None = None
    where: Where = field(default_factory=Where)
    evidence: tuple[str, ...] = ()
    template: str | None = None  # the code's message variant it was rendered from (``templated``); None: free text
    params: Params = ()  # the values it was rendered with, beside its ``where``

    def __post_init__(self) -> None:
        code: object = self.code  # typed Code, but an unknown code from a peer's JSON is plain text
        if not isinstance(code, Code):
            object.__setattr__(self, "code", printable(str(code)))
        object.__setattr__(self, "message", printable(self.message))
        object.__setattr__(self, "fix", printable_or_none(self.fix))
        object.__setattr__(self, "evidence", tuple(_printable_cell(e) for e in self.evidence))
        object.__setattr__(self, "template", printable_or_none(self.template))
        object.__setattr__(self, "params", _params(dict(self.params)))

    def param(self, name: str) -> ParamValue:
        """One parameter's value (None when it has none)."""
        return dict(self.params).get(name)

    def template_names(self) -> frozenset[str]:
        """The values its templates read (``where`` fields and parameters); empty for free text."""
        known = CODES.get(self.code)
        return known.text.names(self.template) if known and self.template is not None else frozenset()

    def rerendered(self, *, severity: Severity | None = None, where: Where | None = None,
                   **params: ParamValue) -> Finding:
        """This finding with another severity, ``where`` or parameter values: a templated one renders its
        message (and a templated fix) again (node 0 names a hostlist for a problem many nodes share);
        free text, or a template this version cannot render (a peer's), keeps its text."""
        where = self.where if where is None else where
        values = _params({**dict(self.params), **params})
        message, fix = self.message, self.fix
        known = CODES.get(self.code)
        if known and self.template is not None:
            try:
                message, new_fix = known.text.render(self.template, _values(where, values))
            except (KeyError, ValueError, IndexError):  # a peer's template or values this version lacks
                pass
            else:
                fix = new_fix if new_fix is not None else fix
        return Finding(code=self.code, severity=self.severity if severity is None else severity, message=message,
                       fix=fix, where=where, evidence=self.evidence, template=self.template, params=values)

    def as_dict(self) -> dict[str, Any]:
        known = CODES.get(self.code)
        return {
            "code": str(self.code),
            "name": known.slug if known else None,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
            "where": self.where.as_dict(),
            "evidence": list(self.evidence),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """The inverse of ``as_dict`` (its derived ``name`` is ignored): findings travel between
        nodes as JSON."""
        return cls(code=CODES.get(d["code"], d["code"]), severity=Severity(d["severity"]), message=d["message"],
                   fix=d.get("fix"), where=Where.from_dict(d.get("where") or {}),
                   evidence=tuple(d.get("evidence") or ()), template=d.get("template"),
                   params=tuple((d.get("params") or {}).items()))

    def to_wire(self) -> dict[str, Any]:
        """``as_dict`` with the template and parameters: what nodes send each other (``from_dict`` reads
        both forms). The user's JSON report keeps ``as_dict``."""
        doc = self.as_dict()
        if self.template is not None:
            doc["template"] = self.template
            doc["params"] = dict(self.params)
        return doc


def _values(where: Where, params: Params) -> dict[str, ParamValue]:
    """What a template reads: the ``where`` fields (None when unset) and the parameters."""
    return {**{name: getattr(where, name) for name in WHERE_FIELDS}, **dict(params)}


def finding(code: Code, severity: Severity, message: str, fix: str | None = None, *,
            evidence: Iterable[str] = (), host: str | None = None, rank: int | None = None,
            comm: str | None = None, iface: str | None = None, device: str | None = None,
            file: str | None = None, line: int | None = None) -> Finding:
    """The one way checks make a ``Finding``: where it is, flat, as keywords."""
    where = Where(host=host, rank=rank, comm=comm, iface=iface, device=device, file=file, line=line)
    return Finding(code=code, severity=severity, message=message, fix=fix, where=where, evidence=tuple(evidence))


def templated(code: Code, severity: Severity, variant: str = DEFAULT_VARIANT, *, fix: str | None = None,
              evidence: Iterable[str] = (), host: str | None = None, rank: int | None = None,
              comm: str | None = None, iface: str | None = None, device: str | None = None,
              file: str | None = None, line: int | None = None, **params: ParamValue) -> Finding:
    """A finding whose message (and fix, where ``variant`` has a fix template; else ``fix``) is ``code``'s
    template ``variant`` rendered with where it is and ``params``. A missing template or value is a KeyError
    here, where the check is written, never in a renderer."""
    where = Where(host=host, rank=rank, comm=comm, iface=iface, device=device, file=file, line=line)
    checked = _params(params)
    message, fixed = code.text.render(variant, _values(where, checked))
    return Finding(code=code, severity=severity, message=message, fix=fixed if fixed is not None else fix,
                   where=where, evidence=tuple(evidence), template=variant, params=checked)


@dataclass(frozen=True, kw_only=True)
class Table:
    """A plain table for the text view; the renderer turns it into a rich Table."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "title", printable(self.title))
        object.__setattr__(self, "columns", tuple(_printable_cell(c) for c in self.columns))
        object.__setattr__(self, "rows", tuple(tuple(_printable_cell(c) for c in row) for row in self.rows))
        object.__setattr__(self, "caption", printable_or_none(self.caption))

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows],
                "caption": self.caption}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Table:
        """The inverse of ``as_dict``: tables travel between nodes as JSON."""
        return cls(title=d["title"], columns=tuple(d["columns"]), rows=tuple(tuple(r) for r in d["rows"]),
                   caption=d.get("caption"))


@dataclass(kw_only=True)
class Report:
    """What a command found. ``payload`` holds the command's JSON keys (``payload.py``: written at the top level,
    after the envelope); ``drain`` what ``--drain-on-fail`` did, written after them."""

    command: str
    findings: list[Finding] = field(default_factory=list)
    payload: Payload | None = None
    drain: Sequence[Mapping[str, object]] | None = None  # ``--drain-on-fail``'s actions (``drain.py``); None: not asked
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: str = ""
    could_not_run: str = ""  # why the check could not run (nothing measured...): exit 2 whatever the findings

    @property
    def data(self) -> JsonObject:
        """The command's JSON keys, as the report writes them after its envelope (read-only; a command sets
        ``payload``): the Python API's way to read what ``parse`` found, say."""
        return MappingProxyType(self.payload.to_json() if self.payload is not None else {})  # writes fail loudly

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def extend(self, findings: Iterable[Finding]) -> None:
        self.findings.extend(findings)

    @property
    def verdict(self) -> Severity:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=Severity.PASS)

    def sorted_findings(self) -> list[Finding]:
        """Worst first, then by code; stable for identical codes."""
        return sorted(self.findings, key=lambda f: (-f.severity.rank, f.code))


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    """``1 node``, ``2 nodes`` (``plural_word`` for irregular ones)."""
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"


def hosts_text(hosts: Iterable[str]) -> str:
    """Hosts in Slurm's compact form (``n[001-003,007]``): 1,024 nodes stay one readable line, and
    ``scontrol``/``srun -w`` accept it as is. Empty names are dropped; ``""`` for none."""
    names = sorted({h for h in hosts if h})
    if not names:
        return ""
    try:
        return str(hostlist.collect_hostlist(names))  # python-hostlist is untyped
    except hostlist.BadHostlist:  # a name with a comma or bracket: no compact form exists
        return ",".join(names)


def host_names(text: str) -> list[str]:
    """The hosts a ``Where.host`` names: one, or a compact list (``n[1-3]``, as ``hosts_text`` writes it)
    expanded; text that is no hostlist (or would expand past ``hostlist.MAX_SIZE`` names) stays as it is."""
    try:
        return [str(h) for h in hostlist.expand_hostlist(text)]
    except hostlist.BadHostlist:
        return [text]


def exit_code(report: Report, *, strict: bool = False) -> int:
    """0 pass or warn, 1 fail (or warn under ``--strict``), 2 when the check could not run (input errors
    are 2 too, raised before any report exists)."""
    if report.could_not_run:
        return 2
    verdict = report.verdict
    if verdict is Severity.FAIL or (strict and verdict is Severity.WARN):
        return 1
    return 0
