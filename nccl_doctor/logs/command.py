"""``nccl-doctor parse``: read NCCL_DEBUG=INFO logs, diagnose them, hand the report to the CLI."""

from __future__ import annotations

import argparse
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.logs.catalog.explain import explain_unknown, unknowns_listing
from nccl_doctor.logs.catalog.formats import load
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.options import ParseOptions
from nccl_doctor.logs.parse.api import no_nccl_message, parse_paths
from nccl_doctor.logs.parse.parallel import default_jobs, parse_paths_parallel
from nccl_doctor.logs.parse.reader import STDIN
from nccl_doctor.outcome import Outcome
from nccl_doctor.outputs import refuse_report_files

OPTIONS = ParseOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="log files, .gz files, directories (every file inside) or - for stdin")
    parser.add_argument("--explain-unknown", action="store_true",
                        help="instead of a report, list the NCCL lines that match no format of NCCL's own "
                             "source (grouped and counted), to send to the maintainers")
    parser.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                        help="processes that parse a large log's byte ranges (default: the usable cores, for "
                             "inputs large enough that it pays; 1: one process); the report is the same")


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number of processes >= 1, got {text!r}")
    return n


def inputs(options: ParseOptions) -> tuple[Path, ...]:
    return tuple(Path(p) for p in options.paths if p != STDIN)


def run(options: ParseOptions) -> Outcome:
    if options.explain_unknown:
        return _explain_unknown(options)
    jobs = options.jobs if options.jobs is not None else default_jobs()
    result = parse_paths(options.paths) if jobs == 1 else parse_paths_parallel(options.paths, jobs=jobs)[0]
    if not result.has_nccl:
        raise InputError(no_nccl_message(result))
    return Outcome.of(diagnose(result))


def _explain_unknown(options: ParseOptions) -> Outcome:
    """``parse --explain-unknown``: a listing, exit 0 (2 when the input has no NCCL line; a listing has no
    findings, so ``--junit-out`` and ``--prom-out`` are refused)."""
    refuse_report_files(options.output, "{flag}: --explain-unknown lists lines, it has no findings to write")
    catalog = load()
    found = explain_unknown(options.paths, catalog)
    if found.nccl_lines == 0:
        raise InputError(f"{' '.join(options.paths)}: no NCCL INFO/WARN lines")
    return Outcome.of_listing(unknowns_listing(found, catalog))
