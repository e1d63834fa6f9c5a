"""Writing output files so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` (str as UTF-8) to a temp file beside ``path`` and rename it over ``path``: a crash
    or a full disk leaves the old file (or none), never a torn one, and never the temp file. The mode
    follows the umask like a plain ``open`` would (mkstemp's 0600 would hide a report from a dashboard
    user). Raises ``OSError``; callers turn it into their one-line error."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
