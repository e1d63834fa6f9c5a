"""``parse``'s options, as the CLI hands them to ``logs.command`` (built from the parsed command line)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nccl_doctor.errors import InputError
from nccl_doctor.outputs import OutputOptions


@dataclass(frozen=True, kw_only=True)
class ParseOptions:
    """What ``nccl-doctor parse`` reads and how."""

    paths: tuple[str, ...]
    """The log files, ``.gz`` files, directories (every file inside) or ``-`` for stdin; at least one."""
    explain_unknown: bool = False
    """``--explain-unknown``: list the NCCL lines no format of NCCL's source matches, instead of a report."""
    jobs: int | None = None
    """``--jobs``: processes that parse a large log's byte ranges (None: the usable cores, where it pays)."""
    output: OutputOptions = field(default_factory=OutputOptions)
    """``--format``, the report files, ``--strict``."""

    LAUNCH_ONLY = frozenset[str]()  # parse launches nothing: argv() gives every option

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(self.paths))  # the parser gives a list
        if not self.paths:
            raise InputError("parse: give at least one PATH")
        if self.jobs is not None and self.jobs < 1:
            raise InputError(f"--jobs: expected a number of processes >= 1, got {self.jobs!r}")

    def argv(self) -> list[str]:
        """The command line that gives these options back."""
        out = ["parse", *self.paths]
        if self.explain_unknown:
            out.append("--explain-unknown")
        if self.jobs is not None:
            out += ["--jobs", str(self.jobs)]
        return out + self.output.argv()
