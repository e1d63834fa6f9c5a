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
from pathlib import Path

from .errors import DoctorError, InputError
from .sysfs import FsReader


def write_snapshot(fs: FsReader, path: Path) -> int:
    """Write the recorded files/links/dirs of ``fs`` to ``path`` (gzip tar); returns the entry count."""
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
    for at, text in sorted(fs.files.items()):
        data = text.encode("utf-8")
        ti = tarfile.TarInfo(at.lstrip("/"))
        ti.size, ti.mode, ti.mtime = len(data), 0o644, now
        entries.append((at, ti, data))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            for _, ti, data in entries:
                tar.addfile(ti, io.BytesIO(data) if data is not None else None)
        os.replace(tmp, path)
    except OSError as exc:
        raise DoctorError(f"cannot write snapshot {path}: {exc.strerror or exc}") from None
    return len(entries)


def extract_snapshot(archive: Path, dest: Path) -> None:
    """Extract a snapshot safely (no absolute paths, no links out of ``dest``)."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(dest, **kw)
    except (tarfile.TarError, OSError) as exc:
        raise InputError(f"--root {archive}: not a readable snapshot archive ({exc})") from None
