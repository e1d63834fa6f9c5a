"""``nccl-doctor probe``: read this node (or a snapshot of one), check it, hand the report to the CLI."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from nccl_doctor.node.archive import read_snapshot
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.probe import probe_node
from nccl_doctor.node.snapshot import check_snapshot_target, write_snapshot
from nccl_doctor.node.view import probe_report
from nccl_doctor.outcome import Outcome

LIVE_ROOT = Path("/")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default="/", metavar="DIR",
                        help="read sysfs/procfs/etc under DIR (a snapshot, extracted or .tar.gz) instead of /")
    parser.add_argument("--snapshot", metavar="FILE.tar.gz", type=Path,
                        help="also save exactly the files the probe read, for `probe --root FILE.tar.gz` elsewhere")


def inputs(args: argparse.Namespace) -> tuple[Path, ...]:
    """A snapshot or tree given with ``--root`` (never the live ``/``, which holds everything)."""
    given = Path(args.root)
    if given.is_file() or (given.is_dir() and given.resolve() != LIVE_ROOT):
        return (given,)
    return ()


def run(args: argparse.Namespace) -> Outcome:
    given = Path(args.root)
    archive = given if given.is_file() else None
    if args.snapshot:  # before any work: never overwrite the input
        check_snapshot_target(args.snapshot, archive=archive, tree=given if archive is None else None)
    fs = read_snapshot(archive) if archive is not None else FsReader(given)  # a snapshot: in memory only
    node = probe_node(given, os.environ, fs=fs)
    node.root = str(args.root)
    report = probe_report(node)
    if args.snapshot:
        live = archive is None and given.resolve() == LIVE_ROOT  # read paths are host paths only then
        check_snapshot_target(args.snapshot, read=[*fs.files, *fs.links] if live else ())
        n = write_snapshot(fs, args.snapshot)
        report.notes.append(f"Snapshot: {args.snapshot} ({n} entries); replay with "
                            f"`nccl-doctor probe --root {args.snapshot}`")
    return Outcome.of(report)
