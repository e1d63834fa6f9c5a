"""``probe --snapshot``: a tar.gz of exactly what the probe read, replayable with ``probe --root``.

Files are stored with the text the probe saw (sysfs files report a size of 4096, so their bytes are
not re-read), links as links (sysfs links are relative, so the tree works wherever it is extracted),
and directories the probe listed as directories.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from nccl_doctor.errors import DoctorError, InputError
from nccl_doctor.files import check_output, write_file
from nccl_doctor.node.fsreader import FsReader


def check_snapshot_target(path: Path, *, archive: Path | None = None, tree: Path | None = None,
                          read: Iterable[str] = ()) -> Path:
    """Refuse a ``--snapshot`` path that would destroy or pollute what the probe reads: the ``--root``
    archive itself, anything inside a ``--root`` directory tree, or (for ``--root /``) a file the probe
    read (``read``: canonical paths such as ``/etc/nccl.conf``); then whatever ``files.check_output``
    refuses for any output file. Returns what to write to."""
    target = path.resolve()
    if archive is not None and (target == archive.resolve() or (target.exists() and os.path.samefile(target, archive))):
        raise InputError(f"--snapshot {path}: refusing to overwrite the --root archive it reads")
    if tree is not None and tree.resolve() != Path("/") and tree.resolve() in target.parents:
        raise InputError(f"--snapshot {path}: refusing to write inside the --root tree {tree} it reads")
    if str(target) in set(read):
        raise InputError(f"--snapshot {path}: refusing to overwrite {target}, a file the probe reads")
    try:
        return check_output(path)
    except DoctorError as exc:
        raise InputError(f"--snapshot: {exc}") from None


def write_snapshot(fs: FsReader, path: Path, extra: Mapping[str, bytes] | None = None) -> int:
    """Write the recorded files/links/dirs of ``fs`` to ``path`` (gzip tar), and ``extra`` members (path ->
    bytes: the recorded environment) in place of any file read there; returns the entry count."""
    extra = dict(extra or {})
    now = time.time()
    entries: list[tuple[str, tarfile.TarInfo, bytes | None]] = []
    for d in sorted(fs.dirs):
        ti = tarfile.TarInfo(d.lstrip("/"))
        ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, now
        entries.append((d, ti, None))
    for at, target in sorted(fs.links.items()):
        if target.startswith("/"):  # absolute links are read under the root: keep them inside the archive
            target = os.path.relpath(target, os.path.dirname(at))
        ti = tarfile.TarInfo(at.lstrip("/"))
        ti.type, ti.linkname, ti.mode, ti.mtime = tarfile.SYMTYPE, target, 0o777, now
        entries.append((at, ti, None))
    files = {at: text.encode("utf-8") for at, text in fs.files.items()}
    for at, data in sorted({**files, **extra}.items()):
        ti = tarfile.TarInfo(at.lstrip("/"))
        ti.size, ti.mode, ti.mtime = len(data), 0o644, now
        entries.append((at, ti, data))
    buf = io.BytesIO()  # a probe reads kilobytes: build in memory, then one atomic write
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for _, ti, payload in entries:
            tar.addfile(ti, io.BytesIO(payload) if payload is not None else None)
    try:
        write_file(path, buf.getvalue(), private=True)
    except OSError as exc:
        raise DoctorError(f"cannot write snapshot {path}: {exc.strerror or exc}") from None
    return len(entries)
