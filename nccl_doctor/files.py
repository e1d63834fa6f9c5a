"""Writing output files so that a reader never sees half of one, and nothing but a file is replaced."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from nccl_doctor.errors import DoctorError

_NULL_DEVICE = (1, 3)
_TERMINAL_MAJORS = frozenset({4, 5, *range(136, 144)})  # ttyN/ttySN, /dev/tty and console, pseudo-terminals


def stream_target(path: Path) -> bool:
    """True for an existing FIFO or pipe, terminal or /dev/null (``--json-out /dev/null``, ``/dev/stdout``,
    ``>(jq .)``): such a target is written in place. Renaming a file over it would replace the device node,
    for the whole machine when run as root."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if stat.S_ISFIFO(st.st_mode):
        return True
    if stat.S_ISCHR(st.st_mode):
        dev = (os.major(st.st_rdev), os.minor(st.st_rdev))
        return dev == _NULL_DEVICE or dev[0] in _TERMINAL_MAJORS
    return False


def not_writable_reason(path: Path) -> str | None:
    """Why an existing path that is neither a regular file, a directory nor a stream target must never be
    written (a disk, /dev/mem, a socket); None for anything else."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stream_target(path):
        return None
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"it is {kind}, not a file (only files, FIFOs, terminals and /dev/null are written)"


def check_creatable(directory: Path) -> None:
    """Create and remove a temp file in ``directory``: the only sure test that a file can be made there
    (``os.access`` says yes for root on read-only mounts and in /proc). Raises ``OSError``."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nccl-doctor-check.", suffix=".tmp")
    os.close(fd)
    os.unlink(tmp)


def check_output(path: Path, *, inputs: tuple[Path, ...] = ()) -> Path:
    """Refuse an output path up front, before minutes of work: it must be a new or regular file in a
    directory where a file can be made, and neither one of the inputs nor inside an input directory; or
    an existing FIFO, terminal or /dev/null, returned as given and written in place (``files.write_file``)."""
    if str(path) == "-":
        raise DoctorError("'-' is not a file name here; use --format json for stdout")
    if stream_target(path):
        return path
    why = not_writable_reason(path)
    if why:
        raise DoctorError(f"refusing to write {path}: {why}")
    target = path.resolve()
    for i in inputs:
        src = i.resolve()
        if target == src or (src.is_dir() and src in target.parents):
            raise DoctorError(f"refusing to write {path}: it is (inside) the input {i}")
    if target.is_dir():
        raise DoctorError(f"cannot write {path}: it is a directory")
    if not target.parent.is_dir():
        raise DoctorError(f"cannot write {path}: directory {target.parent} does not exist")
    if target.exists() and not os.access(target, os.W_OK):
        raise DoctorError(f"cannot write {path}: permission denied")
    try:
        check_creatable(target.parent)
    except OSError as exc:
        raise DoctorError(f"cannot write {path}: {exc.strerror or exc}") from None
    return target


def write_file(path: Path, data: str | bytes) -> None:
    """``data`` to ``path``: in place for a stream target, else with ``atomic_write``."""
    if stream_target(path):
        with open(path, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    else:
        atomic_write(path, data)


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
