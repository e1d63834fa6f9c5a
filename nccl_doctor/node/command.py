"""``nccl-doctor probe``: read this node (or a snapshot of one), check it, hand the report to the CLI."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from nccl_doctor.node.archive import read_snapshot
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.options import ProbeOptions
from nccl_doctor.node.probe import probe_node
from nccl_doctor.node.snapenv import ENV_MEMBER, EnvSource, encode, recorded, replayed
from nccl_doctor.node.snapshot import check_snapshot_target, write_snapshot
from nccl_doctor.node.view import probe_report
from nccl_doctor.outcome import Outcome

LIVE_ROOT = Path("/")
OPTIONS = ProbeOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default="/", metavar="DIR",
                        help="read sysfs/procfs/etc under DIR (a snapshot, extracted or .tar.gz) instead of /")
    parser.add_argument("--snapshot", metavar="FILE.tar.gz", type=Path,
                        help="also save exactly the files the probe read and its NCCL_/GLOO_/TORCH_ variables, "
                             "for `probe --root FILE.tar.gz` elsewhere")
    parser.add_argument("--env", choices=[e.value for e in EnvSource], default=EnvSource.SNAPSHOT.value,
                        help="with --root SNAPSHOT: replay the variables recorded in it (snapshot, the default) or "
                             "apply this shell's instead (live)")


def inputs(options: ProbeOptions) -> tuple[Path, ...]:
    """A snapshot or tree given with ``--root`` (never the live ``/``, which holds everything)."""
    given = Path(options.root)
    if given.is_file() or (given.is_dir() and given.resolve() != LIVE_ROOT):
        return (given,)
    return ()


def run(options: ProbeOptions) -> Outcome:
    given = Path(options.root)
    archive = given if given.is_file() else None
    if options.snapshot:  # before any work: never overwrite the input
        check_snapshot_target(options.snapshot, archive=archive, tree=given if archive is None else None)
    fs = read_snapshot(archive) if archive is not None else FsReader(given)  # a snapshot: in memory only
    live = archive is None and given.resolve() == LIVE_ROOT
    env: dict[str, str] = dict(os.environ)
    was = replayed(fs, options.root) if not live and options.env == EnvSource.SNAPSHOT else None
    if was is not None:
        fs.absent, env = was.absent, was.env
    node = probe_node(given, env, fs=fs)
    node.root = str(options.root)
    report = probe_report(node)
    if was is not None and recorded(env) != recorded(os.environ):  # said when it makes a difference
        report.notes.append(f"Environment: the {len(recorded(env))} NCCL/Gloo variable(s) recorded in "
                            f"{options.root}, not this shell's (--env live applies this shell's instead)")
    if options.snapshot:  # read paths are host paths only on the live root
        check_snapshot_target(options.snapshot, read=[*fs.files, *fs.links] if live else ())
        n = write_snapshot(fs, options.snapshot, {ENV_MEMBER: encode(env, fs)})
        report.notes.append(f"Snapshot: {options.snapshot} ({n} entries); replay with "
                            f"`nccl-doctor probe --root {options.snapshot}`")
    return Outcome.of(report)
