"""What a command hands back to the CLI, and the shape every command module has.

Commands never render: they return an ``Outcome`` and the CLI alone prints it and writes the files.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from nccl_doctor.report import Report
from nccl_doctor.text import printable, printable_data

AfterRender = Callable[[int], int]
OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Output that is not a verdict (``parse --explain-unknown``): ``text`` for people, ``document`` for
    tools (``--format json``, ``--json-out``). No findings, so no JUnit; the exit code is 0."""

    text: str
    document: dict[str, Any]

    def __post_init__(self) -> None:  # it quotes log lines: no control character reaches the terminal
        object.__setattr__(self, "text", printable(self.text))
        object.__setattr__(self, "document", printable_data(self.document))


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """A report to render, a listing to print, or (neither) a process that renders nothing and exits with
    ``exit_code``.

    ``after_render`` is told the exit code the rendering came to (2 when a file could not be written, the
    CLI having said why) and returns the process's final code: a bench rank records it for its launcher, a
    preflight node publishes its verdict to the others only once its report is out.
    """

    report: Report | None = None
    listing: Listing | None = None
    exit_code: int = 0
    after_render: AfterRender | None = None

    @classmethod
    def of(cls, report: Report, *, after_render: AfterRender | None = None) -> Outcome:
        return cls(report=report, after_render=after_render)

    @classmethod
    def of_listing(cls, listing: Listing) -> Outcome:
        return cls(listing=listing)

    @classmethod
    def exit(cls, code: int) -> Outcome:
        return cls(exit_code=code)


class CommandModule(Protocol[OptionsT]):
    """A command's module: ``nccl_doctor.<package>.command``. The CLI parses with ``add_arguments``, builds
    ``OPTIONS`` (a frozen dataclass, checked as it is built) from what it parsed, and hands that to
    ``inputs`` and ``run``: what argparse parsed stops at the CLI."""

    OPTIONS: type[OptionsT]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def inputs(self, options: OptionsT) -> tuple[Path, ...]:
        """The files the user gave to read: an output over (or inside) one is refused before any work."""
        ...

    def run(self, options: OptionsT) -> Outcome: ...
