"""Writing output files so that a reader never sees half of one, nothing but a file is replaced, and no
symlink planted where a report will go is ever written through.

Where the output path is a symlink, the link itself is replaced by the new file (the temp file is made
beside the link with ``O_EXCL`` and renamed over the link's own path), so a link in a shared directory
(``/tmp/report.json -> /etc/shadow``) can neither redirect the report nor destroy its target. The only
paths written in place are streams: this process's own descriptors by name (``/dev/stdout``,
``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``: the shell's ``>(jq .)`` too), and a FIFO, terminal or
``/dev/null`` that is either the path itself (opened with ``O_NOFOLLOW``) or reached only through links
owned by root or by us (``trusted_links``).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from nccl_doctor.errors import DoctorError

_NULL_DEVICE = (1, 3)
_TERMINAL_MAJORS = frozenset({4, 5, *range(136, 144)})  # ttyN/ttySN, /dev/tty and console, pseudo-terminals
_STD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
_FD_NAME = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
MAX_LINK_HOPS = 40  # the kernel's own limit on links in one lookup
PRIVATE_MODE = 0o600  # snapshots and reports that hold the node's NIC inventory and settings
SYSTEM_DIRS = (("dev",), ("proc",), ("sys",))  # their links (/dev/stdin, /dev/core) are never replaced
_STREAM_OPEN_FLAGS = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC  # never O_CREAT: a stream already exists


def own_descriptor(path: Path) -> int | None:
    """The descriptor ``path`` names when it is one of this process's own by name (``/dev/stdout`` is 1,
    ``/dev/fd/63`` is 63) and that descriptor is open; None otherwise. Written to directly, wherever it
    leads: renaming a file over ``/dev/stdout`` would replace the machine's link."""
    text = str(path)
    m = _FD_NAME.match(text)
    fd = _STD_NAMES.get(text, int(m.group(1)) if m else None)
    if fd is None:
        return None
    try:
        os.fstat(fd)
    except OSError:
        return None
    return fd


def _is_stream_mode(st: os.stat_result) -> bool:
    if stat.S_ISFIFO(st.st_mode):
        return True
    if stat.S_ISCHR(st.st_mode):
        dev = (os.major(st.st_rdev), os.minor(st.st_rdev))
        return dev == _NULL_DEVICE or dev[0] in _TERMINAL_MAJORS
    return False


def trusted_links(path: Path) -> bool:
    """True when every symlink from ``path`` to what it finally names is owned by root or by us: only
    then is a link to a FIFO or terminal followed (one that someone else planted is replaced instead)."""
    cur = str(path)
    for _ in range(MAX_LINK_HOPS):
        try:
            st = os.lstat(cur)
        except OSError:  # gone, or a /proc magic link's "pipe:[123]": no further link to own
            return True
        if not stat.S_ISLNK(st.st_mode):
            return True
        if st.st_uid not in (0, os.geteuid()):
            return False
        cur = os.path.join(os.path.dirname(cur), os.readlink(cur))
    return False


def stream_target(path: Path) -> bool:
    """True for what is written in place: our own descriptors by name, and an existing FIFO or pipe,
    terminal or /dev/null (``--json-out /dev/null``, ``>(jq .)``) that is the path itself or is reached
    through trusted links only. Renaming a file over such a target would replace the device node, for
    the whole machine when run as root."""
    if own_descriptor(path) is not None:
        return True
    try:
        lst = os.lstat(path)
        st = os.stat(path) if stat.S_ISLNK(lst.st_mode) else lst
    except OSError:
        return False
    if not _is_stream_mode(st):
        return False
    return not stat.S_ISLNK(lst.st_mode) or trusted_links(path)


def not_writable_reason(path: Path) -> str | None:
    """Why an existing path that is neither a regular file, a directory nor a stream target must never be
    written (a disk, /dev/mem, a socket, or a link to one); None for anything else."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or _is_stream_mode(os.stat(path)):
        return None
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"it is {kind}, not a file (only files, FIFOs, terminals and /dev/null are written)"


def check_creatable(directory: Path) -> None:
    """Create and remove a temp file in ``directory``: the only sure test that a file can be made there
    (``os.access`` says yes for root on read-only mounts and in /proc). Raises ``OSError``."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nccl-doctor-check.", suffix=".tmp")
    os.close(fd)
    os.unlink(tmp)


def location(path: Path) -> Path:
    """Where a file written to ``path`` lands: its directory resolved, its own name kept (a link there
    is replaced, not followed). For comparisons only: writes use ``path`` as given, so the kernel's
    ``fs.protected_symlinks`` still guards the links in its directories."""
    return Path(os.path.realpath(path.parent)) / path.name


def check_output(path: Path, *, inputs: tuple[Path, ...] = ()) -> Path:
    """Refuse an output path up front, before minutes of work: it must be a new file, a regular file or
    a symlink (replaced) in a directory where a file can be made, and neither one of the inputs nor
    inside an input directory; or a stream target, written in place. Returns ``path`` unchanged."""
    if str(path) == "-":
        raise DoctorError("'-' is not a file name here; use --format json for stdout")
    if stream_target(path):
        return path
    why = not_writable_reason(path)
    if why:
        raise DoctorError(f"refusing to write {path}: {why}")
    here = location(path)
    for i in inputs:
        src = i.resolve()
        if here in (src, location(i)) or (src.is_dir() and src in here.parents):
            raise DoctorError(f"refusing to write {path}: it is (inside) the input {i}")
    try:
        own = os.lstat(path)
    except OSError:
        own = None
    if own is not None and stat.S_ISDIR(own.st_mode):
        raise DoctorError(f"cannot write {path}: it is a directory")
    if own is not None and stat.S_ISLNK(own.st_mode) and here.parent.parts[1:2] in SYSTEM_DIRS:
        raise DoctorError(f"refusing to write {path}: a symlink in {here.parent} is the system's, never replaced "
                          "(name the file it points to)")
    if not os.path.isdir(path.parent):
        raise DoctorError(f"cannot write {path}: directory {here.parent} does not exist")
    if own is not None and stat.S_ISREG(own.st_mode) and not os.access(path, os.W_OK):
        raise DoctorError(f"cannot write {path}: permission denied")
    if own is not None and _sticky_other(path, own):
        what = "a symlink" if stat.S_ISLNK(own.st_mode) else "a file"
        raise DoctorError(f"refusing to write {path}: {what} of uid {own.st_uid} in a sticky directory "
                          "(it cannot be replaced, and a link there is never followed)")
    try:
        check_creatable(path.parent)
    except OSError as exc:
        raise DoctorError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def _sticky_other(path: Path, own: os.stat_result) -> bool:
    """True when ``path`` belongs to someone else in a sticky directory (``/tmp``) not ours, and we are
    not root: the rename that replaces it would fail (EPERM) after all the work."""
    euid = os.geteuid()
    if euid in (0, own.st_uid):
        return False
    try:
        parent = os.stat(path.parent)
    except OSError:
        return False
    return bool(parent.st_mode & stat.S_ISVTX) and parent.st_uid != euid


def write_file(path: Path, data: str | bytes, *, private: bool = False) -> None:
    """``data`` to ``path``: in place for a stream target, else with ``atomic_write`` (0600 when
    ``private``)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd = own_descriptor(path)
    if fd is not None:
        _write_all(fd, raw)
    elif stream_target(path):
        _write_stream(path, raw)
    else:
        atomic_write(path, raw, private=private)


def _write_stream(path: Path, raw: bytes) -> None:
    """Open the FIFO/terminal/null in place (``O_NOFOLLOW`` unless the path is a trusted link) and make
    sure it still is one once open: a file swapped in meanwhile is left untouched."""
    follow = stat.S_ISLNK(os.lstat(path).st_mode)
    fd = os.open(path, _STREAM_OPEN_FLAGS | (0 if follow else os.O_NOFOLLOW))
    try:
        if not _is_stream_mode(os.fstat(fd)):
            raise OSError(f"{path} changed while being opened: no longer a FIFO, terminal or /dev/null")
        _write_all(fd, raw)
    finally:
        os.close(fd)


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        view = view[os.write(fd, view):]


def atomic_write(path: Path, data: str | bytes, *, private: bool = False) -> None:
    """Write ``data`` (str as UTF-8) to a temp file beside ``path`` (``mkstemp``: ``O_EXCL``, so never
    through a link) and rename it over ``path`` itself: a crash or a full disk leaves the old file (or
    none), never a torn one, and never the temp file; a symlink at ``path`` is replaced, its target left
    alone. The mode is 0600 when ``private``, else follows the umask like a plain ``open`` would
    (mkstemp's 0600 would hide a report from a dashboard user). Raises ``OSError``; callers turn it into
    their one-line error."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), PRIVATE_MODE if private else 0o666 & ~umask)  # the file we made, not its name
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
