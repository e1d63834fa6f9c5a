"""``nccl-doctor parse``: read NCCL_DEBUG=INFO logs, diagnose them, hand the report to the CLI."""

from __future__ import annotations

import argparse
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.logs.diagnose import diagnose
from nccl_doctor.logs.parser import no_nccl_message, parse_paths
from nccl_doctor.logs.reader import STDIN
from nccl_doctor.outcome import Outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="log files, .gz files, directories (every file inside) or - for stdin")


def inputs(args: argparse.Namespace) -> tuple[Path, ...]:
    return tuple(Path(p) for p in args.paths if p != STDIN)


def run(args: argparse.Namespace) -> Outcome:
    result = parse_paths(args.paths)
    if not result.has_nccl:
        raise InputError(no_nccl_message(result))
    return Outcome.of(diagnose(result))
