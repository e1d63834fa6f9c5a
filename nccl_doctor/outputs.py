"""Every report output a command can write, in one table, and the output options every command shares.

A format is one ``OutputFormat`` member plus its entry in ``to_output`` (its flag, help, renderer and whether a
private command's file is written 0600); ``to_output`` matches exhaustively (``assert_never``: mypy fails on a
member without an entry) and a test pins the table. The CLI adds the flags, checks the paths, renders and
writes from this table alone, and a self-launching command forwards the files to its ranks from it
(``OutputOptions.argv``), so a new format cannot be lost between a launcher and its ranks.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from nccl_doctor.enums import StrEnum
from nccl_doctor.errors import InputError
from nccl_doctor.never import assert_never
from nccl_doctor.prom import prom_text
from nccl_doctor.render import render_json, render_junit
from nccl_doctor.report import Report

Format = Literal["text", "json"]
FORMATS: tuple[Format, ...] = ("text", "json")  # --format: what stdout shows


class OutputFormat(StrEnum):
    """A report file a command can write besides stdout (``--<name>-out FILE``)."""

    JSON = "json"
    JUNIT = "junit"
    PROM = "prom"


Renderer = Callable[[Report, "OutputOptions"], str]


@dataclass(frozen=True, kw_only=True)
class Output:
    """One format's row of the table."""

    name: OutputFormat
    """The member it is the row of."""
    help: str
    """Its flag's ``--help`` line."""
    render: Renderer
    """The report as the file's text."""
    private: bool
    """Written 0600 when the command's report is private (probe's and preflight's hold the node's NIC
    inventory, addresses and NCCL settings); else with the umask-based mode."""
    keeps_link: bool = False
    """A launcher forwards its path made absolute, its own name kept (a link there is replaced when written),
    instead of resolved."""

    @property
    def flag(self) -> str:
        return f"--{self.name.value}-out"

    @property
    def dest(self) -> str:
        """The flag's ``argparse`` destination."""
        return f"{self.name.value}_out"


def _json(report: Report, options: OutputOptions) -> str:
    return render_json(report)


def _junit(report: Report, options: OutputOptions) -> str:
    return render_junit(report, strict=options.strict)


def _prom(report: Report, options: OutputOptions) -> str:
    return prom_text(report, host=socket.gethostname())


def to_output(kind: OutputFormat) -> Output:  # noqa: RET503 - ruff cannot see that our assert_never never returns
    """The row of ``kind``: every member has one (mypy checks it, and so does a test)."""
    if kind is OutputFormat.JSON:
        return Output(name=kind, help="also write the JSON report to FILE", render=_json, private=True)
    if kind is OutputFormat.JUNIT:
        return Output(name=kind, help="also write a JUnit XML report to FILE", render=_junit, private=True)
    if kind is OutputFormat.PROM:  # states and counts only, for node_exporter's collector user: not private
        return Output(name=kind, help="also write Prometheus metrics to FILE (node_exporter textfile collector: "
                                      "name it *.prom)", render=_prom, private=False, keeps_link=True)
    assert_never(kind)


OUTPUTS: tuple[Output, ...] = tuple(to_output(kind) for kind in OutputFormat)
LISTING_FILES = frozenset({OutputFormat.JSON})  # what a listing (explain, parse --explain-unknown) can write


def refuse_report_files(options: OutputOptions, message: str) -> None:
    """A listing has no findings: a report-only file (``--junit-out``, ``--prom-out``) is refused, never silently
    left unwritten. ``message`` names the flag as ``{flag}``."""
    for out, _ in options.written():
        if out.name not in LISTING_FILES:
            raise InputError(message.format(flag=out.flag))


@dataclass(frozen=True, kw_only=True)
class OutputOptions:
    """What every command shares: what stdout shows, the report files, and what decides the exit code."""

    format: Format = "text"
    """``--format``: stdout as text for people or as the JSON report."""
    files: Mapping[OutputFormat, Path] = field(default_factory=dict)
    """``--json-out``, ``--junit-out``, ``--prom-out``: the files to write besides stdout, by format."""
    strict: bool = False
    """``--strict``: warnings fail too (exit 1)."""
    drain_on_fail: bool = False
    """``--drain-on-fail`` (probe and preflight only): drain the failing nodes in Slurm."""

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {self.format!r}")
        object.__setattr__(self, "files", MappingProxyType({OutputFormat(k): Path(p) for k, p in self.files.items()}))

    def file(self, kind: OutputFormat) -> Path | None:
        return self.files.get(kind)

    def written(self) -> list[tuple[Output, Path]]:
        """The files asked for, in the table's order."""
        return [(out, path) for out in OUTPUTS if (path := self.files.get(out.name)) is not None]

    def argv(self) -> list[str]:
        """The flags that give these options back (to a rank: paths made absolute, as its table row says)."""
        out = ["--format", self.format]
        for entry, path in self.written():
            out += [entry.flag, str(path.absolute() if entry.keeps_link else path.resolve())]
        return out + [flag for flag, on in (("--strict", self.strict), ("--drain-on-fail", self.drain_on_fail)) if on]
