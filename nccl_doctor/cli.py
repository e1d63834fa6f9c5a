"""The thin command line: parse arguments, call one command's ``run``, render, return the exit code.

Each command is a package whose ``command`` module has ``add_arguments(parser)``, ``inputs(args)`` and
``run(args) -> Outcome`` (``outcome.CommandModule``); only the CLI renders. Only the chosen command's
module is imported, so ``parse`` and ``probe`` start fast and never import torch.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

from nccl_doctor import __version__
from nccl_doctor.errors import DoctorError
from nccl_doctor.files import check_output, location, stream_target, write_file
from nccl_doctor.outcome import CommandModule, Listing, Outcome
from nccl_doctor.prom import prom_text
from nccl_doctor.render import make_console, render_json, render_junit, render_text
from nccl_doctor.report import Report, exit_code
from nccl_doctor.text import printable
from nccl_doctor.usage import epilog

COMMANDS = {
    "probe": ("nccl_doctor.node.command", "classify this node's interfaces and check NCCL/Gloo settings"),
    "parse": ("nccl_doctor.logs.command", "diagnose NCCL_DEBUG=INFO logs offline"),
    "bench": ("nccl_doctor.bench.command", "all-gather/reduce-scatter/all-reduce bandwidth within and across nodes"),
    "preflight": ("nccl_doctor.preflight.command", "probe + bench + log check on every node: the sbatch gate"),
    "plan": ("nccl_doctor.plan.command", "the FSDP/HSDP mesh to train with, from measured bandwidth"),
    "explain": ("nccl_doctor.explain", "what a finding code (ND102) means, why it matters and the usual fix"),
}


def _add_output_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=("text", "json"), default="text", help="stdout format (default: text)")
    g.add_argument("--json-out", metavar="FILE", type=Path, help="also write the JSON report to FILE")
    g.add_argument("--junit-out", metavar="FILE", type=Path, help="also write a JUnit XML report to FILE")
    g.add_argument("--prom-out", metavar="FILE", type=Path,
                   help="also write Prometheus metrics to FILE (node_exporter textfile collector: name it *.prom)")
    g.add_argument("--strict", action="store_true", help="exit 1 on warnings too")


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nccl-doctor",
        description="Find and explain multi-node NCCL/Gloo problems before and after a training job.",
        epilog="Exit codes: 0 pass or warn, 1 fail (or warn with --strict), 2 usage error, unreadable input or "
               "the check could not run, 130 interrupted. Every finding names a code: `nccl-doctor explain "
               "ND102` says what it means and the usual fix; `nccl-doctor explain` lists them all.",
    )
    parser.add_argument("--version", action="version", version=f"nccl-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if a in COMMANDS), None)
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=epilog(name),
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # the examples keep their lines
        if name == chosen:
            command_module(name).add_arguments(p)
            _add_output_options(p)
            if name in DRAINABLE:
                _add_drain_option(p)
    return parser


# Commands whose FAIL blames nodes: --drain-on-fail drains them in Slurm (``drain.drain_on_fail``). The
# module is loaded only then, like a command's module: it would add to every parse.
DRAINABLE = frozenset({"probe", "preflight"})
DRAIN_PACKAGE = "nccl_doctor.drain"
DrainOnFail = Callable[[Report, Mapping[str, str]], None]


def drain_on_fail(report: Report, env: Mapping[str, str]) -> None:
    cast(DrainOnFail, importlib.import_module(DRAIN_PACKAGE).drain_on_fail)(report, env)


def _add_drain_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drain-on-fail", action="store_true",
                   help="on FAIL, under Slurm as root or SlurmUser: drain the failing node(s) with scontrol, "
                        "the code in the reason (never the healthy ones); the report says what it did")


def command_module(name: str) -> CommandModule:
    return cast(CommandModule, importlib.import_module(COMMANDS[name][0]))


def check_outputs(args: argparse.Namespace, inputs: tuple[Path, ...]) -> None:
    outs = [p for p in (args.json_out, args.junit_out, getattr(args, "prom_out", None)) if p is not None]
    files = [location(t) for t in (check_output(p, inputs=inputs) for p in outs) if not stream_target(t)]
    if len(set(files)) < len(files):  # (both to /dev/null is fine)
        raise DoctorError("two of --json-out, --junit-out and --prom-out name the same file")


# Their reports hold the node's NIC inventory, addresses and NCCL settings: written 0600.
PRIVATE_REPORTS = frozenset({"probe", "preflight"})


def write_output(path: Path, text: str, *, inputs: tuple[Path, ...] = (), private: bool = False) -> None:
    """Write atomically (a reader never sees half a report; a symlink at ``path`` is replaced, never
    followed), with the umask-based mode or 0600 when ``private``; a FIFO, terminal, /dev/null or our
    own /dev/stdout is written in place."""
    target = check_output(path, inputs=inputs)
    try:
        write_file(target, text, private=private)
    except OSError as exc:
        raise DoctorError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_stdout(write: Callable[[], object]) -> None:
    """Stdout first, so the output is never lost to a file error; a reader that left (``| head``) is no error:
    the verdict still decides the exit code."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def emit(report: Report, args: argparse.Namespace, inputs: tuple[Path, ...]) -> int:
    """Render to stdout first (the report is never lost), then the files. The exit code is the
    verdict's; a file that cannot be written raises ``DoctorError``."""
    _write_stdout(lambda: sys.stdout.write(render_json(report)) if args.format == "json"
                  else render_text(report, make_console(sys.stdout)))
    private = args.command in PRIVATE_REPORTS
    if args.json_out:
        write_output(args.json_out, render_json(report), inputs=inputs, private=private)
    if args.junit_out:
        write_output(args.junit_out, render_junit(report, strict=args.strict), inputs=inputs, private=private)
    if getattr(args, "prom_out", None):  # states and counts only, for the collector's user: not private
        write_output(args.prom_out, prom_text(report, host=socket.gethostname()), inputs=inputs)
    return exit_code(report, strict=args.strict)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    module = command_module(args.command)
    try:
        inputs = module.inputs(args)
        check_outputs(args, inputs)
        return finish(module.run(args), args, inputs)
    except DoctorError as exc:
        return _error(args, exc)
    except KeyboardInterrupt:
        print(f"nccl-doctor {args.command}: interrupted", file=sys.stderr)
        return 130


def finish(outcome: Outcome, args: argparse.Namespace, inputs: tuple[Path, ...]) -> int:
    """Render the outcome's report (if any), then let the command close with the code it came to."""
    if outcome.listing is not None:
        return emit_listing(outcome.listing, args, inputs)
    if outcome.report is None:
        return outcome.exit_code
    if getattr(args, "drain_on_fail", False):  # before rendering: the report says what it did
        drain_on_fail(outcome.report, os.environ)
    try:
        code = emit(outcome.report, args, inputs)
    except DoctorError as exc:
        code = _error(args, exc)
    return outcome.after_render(code) if outcome.after_render else code


def emit_listing(listing: Listing, args: argparse.Namespace, inputs: tuple[Path, ...]) -> int:
    """A listing to stdout (text, or its JSON document), and its document to ``--json-out``; 0."""
    document = json.dumps(listing.document, indent=2) + "\n"
    _write_stdout(lambda: sys.stdout.write(document if args.format == "json" else listing.text))
    if args.json_out:
        write_output(args.json_out, document, inputs=inputs)
    return 0


def _error(args: argparse.Namespace, exc: DoctorError) -> int:
    print(f"nccl-doctor {args.command}: error: {printable(str(exc))}", file=sys.stderr)  # it may quote input
    return exc.exit_code
