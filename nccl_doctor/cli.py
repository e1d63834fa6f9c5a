"""The thin command line: parse arguments, build the command's options, call its ``run``, render, return the
exit code.

Each command is a package whose ``command`` module has ``add_arguments(parser)``, ``OPTIONS`` (its frozen
options dataclass), ``inputs(options)`` and ``run(options) -> Outcome`` (``outcome.CommandModule``). The parsed
``argparse.Namespace`` stops here: ``command_options`` turns it into ``OPTIONS``, which checks itself as it is
built. Only the CLI renders, from the output table (``outputs.OUTPUTS``). Only the chosen command's module is
imported, so ``parse`` and ``probe`` start fast and never import torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn, cast

from nccl_doctor import __version__
from nccl_doctor.arguments import Parser
from nccl_doctor.errors import DoctorError
from nccl_doctor.files import check_output, location, stream_target, write_file
from nccl_doctor.leave import leave
from nccl_doctor.outcome import CommandModule, Listing, Outcome
from nccl_doctor.outputs import FORMATS, LISTING_FILES, OUTPUTS, Output, OutputFormat, OutputOptions, to_output
from nccl_doctor.render import make_console, render_text
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


# Commands that answer with a listing, never findings: their help shows only the options that do something.
# The others are still accepted, so that ``explain --prom-out`` is refused with why (``refuse_report_files``)
# and a script giving ``--strict`` to every command keeps working.
LISTING_COMMANDS = frozenset({"explain"})


def _add_output_options(p: argparse.ArgumentParser, *, listing: bool) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=FORMATS, default="text", help="stdout format (default: text)")
    for out in OUTPUTS:
        shown = not listing or out.name in LISTING_FILES
        g.add_argument(out.flag, metavar="FILE", type=Path, help=out.help if shown else argparse.SUPPRESS)
    g.add_argument("--strict", action="store_true", help=argparse.SUPPRESS if listing else "exit 1 on warnings too")


def build_parser(argv: list[str]) -> Parser:
    parser = Parser(
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
            _add_output_options(p, listing=name in LISTING_COMMANDS)
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


def command_module(name: str) -> CommandModule[Any]:
    return cast("CommandModule[Any]", importlib.import_module(COMMANDS[name][0]))


def output_options(namespace: argparse.Namespace) -> OutputOptions:
    files = {out.name: path for out in OUTPUTS if (path := getattr(namespace, out.dest, None)) is not None}
    return OutputOptions(format=namespace.format, files=files, strict=namespace.strict,
                         drain_on_fail=getattr(namespace, "drain_on_fail", False))


def command_options(module: CommandModule[Any], namespace: argparse.Namespace) -> Any:
    """The command's ``OPTIONS`` from what argparse parsed: each field is the option of its name (``output``
    the shared ones); building it checks it (``InputError``, naming the option)."""
    names = {f.name for f in dataclasses.fields(module.OPTIONS)} - {"output"}
    return module.OPTIONS(output=output_options(namespace), **{n: getattr(namespace, n) for n in names})


def parse_options(argv: list[str]) -> tuple[str, Any]:
    """The command named in ``argv`` and its options, as ``main`` builds them (the round-trip tests' parser)."""
    namespace = build_parser(argv).parse_args(argv)
    return namespace.command, command_options(command_module(namespace.command), namespace)


def check_outputs(output: OutputOptions, inputs: tuple[Path, ...]) -> None:
    paths = [path for _, path in output.written()]
    files = [location(t) for t in (check_output(p, inputs=inputs) for p in paths) if not stream_target(t)]
    if len(set(files)) < len(files):  # (both to /dev/null is fine)
        flags = [out.flag for out in OUTPUTS]
        raise DoctorError(f"two of {', '.join(flags[:-1])} and {flags[-1]} name the same file")


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


def emit(report: Report, command: str, output: OutputOptions, inputs: tuple[Path, ...]) -> int:
    """Render to stdout first (the report is never lost), then each file the table names. The exit code is
    the verdict's; a file that cannot be written raises ``DoctorError``."""
    texts: dict[OutputFormat, str] = {}

    def text(out: Output) -> str:  # each format rendered once: --format json and --json-out share the text
        if out.name not in texts:
            texts[out.name] = out.render(report, output)
        return texts[out.name]

    _write_stdout(lambda: sys.stdout.write(text(to_output(OutputFormat.JSON)))
                  if output.format == "json" else render_text(report, make_console(sys.stdout)))
    for out, path in output.written():
        write_output(path, text(out), inputs=inputs, private=out.private and command in PRIVATE_REPORTS)
    return exit_code(report, strict=output.strict)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    namespace = parser.parse_args(argv)
    command: str = namespace.command
    module = command_module(command)
    try:
        options = command_options(module, namespace)
        output: OutputOptions = options.output
        inputs = module.inputs(options)
        check_outputs(output, inputs)
        return finish(module.run(options), command, output, inputs)
    except DoctorError as exc:
        return _error(command, exc)
    except KeyboardInterrupt:
        print(f"nccl-doctor {command}: interrupted", file=sys.stderr)
        return 130


def console_main() -> NoReturn:
    """``nccl-doctor`` and ``python -m nccl_doctor``: ``main``, then the exit a rank process needs (leave.py)."""
    leave(main())


def finish(outcome: Outcome, command: str, output: OutputOptions, inputs: tuple[Path, ...]) -> int:
    """Render the outcome's report (if any), then let the command close with the code it came to."""
    if outcome.listing is not None:
        return emit_listing(outcome.listing, output, inputs)
    if outcome.report is None:
        return outcome.exit_code
    if output.drain_on_fail:  # before rendering: the report says what it did
        drain_on_fail(outcome.report, os.environ)
    try:
        code = emit(outcome.report, command, output, inputs)
    except DoctorError as exc:
        code = _error(command, exc)
    return outcome.after_render(code) if outcome.after_render else code


def emit_listing(listing: Listing, output: OutputOptions, inputs: tuple[Path, ...]) -> int:
    """A listing to stdout (text, or its JSON document), and its document to ``--json-out``; 0."""
    document = json.dumps(listing.document, indent=2) + "\n"
    _write_stdout(lambda: sys.stdout.write(document if output.format == "json" else listing.text))
    if (path := output.file(OutputFormat.JSON)) is not None:
        write_output(path, document, inputs=inputs)
    return 0


def _error(command: str, exc: DoctorError) -> int:
    print(f"nccl-doctor {command}: error: {printable(str(exc))}", file=sys.stderr)  # it may quote input
    return exc.exit_code
