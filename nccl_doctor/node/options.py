"""``probe``'s options, as the CLI hands them to ``node.command`` (built from the parsed command line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.node.snapenv import EnvSource
from nccl_doctor.outputs import OutputOptions


@dataclass(frozen=True, kw_only=True)
class ProbeOptions:
    """What ``nccl-doctor probe`` reads, what it saves, and which variables it applies."""

    root: str = "/"
    """``--root``: the tree (or ``.tar.gz`` snapshot) to read sysfs/procfs/etc under; ``/`` is this node."""
    snapshot: Path | None = None
    """``--snapshot``: also save the files the probe read and its NCCL_/GLOO_/TORCH_ variables there."""
    env: EnvSource = EnvSource.SNAPSHOT
    """``--env``: with a snapshot root, replay the variables recorded in it or apply this shell's."""
    output: OutputOptions = field(default_factory=OutputOptions)
    """``--format``, the report files, ``--strict``, ``--drain-on-fail``."""

    LAUNCH_ONLY = frozenset[str]()  # probe launches nothing: argv() gives every option

    def __post_init__(self) -> None:
        choices = tuple(e.value for e in EnvSource)
        if self.env not in choices:
            raise InputError(f"--env: expected one of {', '.join(choices)}, got {self.env!r}")  # as the parser says it
        object.__setattr__(self, "env", EnvSource(self.env))  # the parser gives its value as text

    def argv(self) -> list[str]:
        """The command line that gives these options back (a rerun, a report of how it was called)."""
        out = ["probe", "--root", self.root, "--env", str(self.env)]
        if self.snapshot is not None:
            out += ["--snapshot", str(self.snapshot)]
        return out + self.output.argv()
