"""File descriptors at scale: node 0's store holds connections from every node and every rank, and a
store past its open-file limit silently stops accepting (seen: 27 clients under ``ulimit -n 128``). Each
launcher raises its soft ``RLIMIT_NOFILE`` to the hard limit at start; node 0 says so when even the hard
limit is below what the run needs. Torch-free."""

from __future__ import annotations

import resource
from dataclasses import dataclass

# connections each node opens to node 0's store: the launcher's own and its heartbeat's, and one per rank
# (its process group rides on the same client). Measured (`ss state established sport = :PORT` every
# 50 ms) on one node with 4 ranks: a peak of 6 = 2 + 4; so 1,000 nodes x 8 ranks need about 10,000.
LAUNCHER_CONNECTIONS = 1  # its main thread and heartbeat share one (heartbeat.py)
RANK_CONNECTIONS = 1
SPARE_FILES = 256  # node 0's own files, pipes, its ranks' logs, Python and torch


@dataclass(frozen=True)
class FilesLimit:
    """``RLIMIT_NOFILE`` before and after preflight raised it (``hard``: RLIM_INFINITY as -1)."""

    before: int
    soft: int
    hard: int


def raise_open_files() -> FilesLimit:
    """Soft ``RLIMIT_NOFILE`` up to the hard limit (what an unprivileged process may do)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return FilesLimit(before=soft, soft=soft, hard=hard)
    return FilesLimit(before=soft, soft=hard, hard=hard)


def files_needed(nnodes: int, nproc: int) -> int:
    """Descriptors node 0 needs: one per store connection of every node and rank, and some to spare."""
    return nnodes * (LAUNCHER_CONNECTIONS + nproc * RANK_CONNECTIONS) + SPARE_FILES


def too_few(limit: FilesLimit, nnodes: int, nproc: int) -> bool:
    return limit.soft != resource.RLIM_INFINITY and limit.soft < files_needed(nnodes, nproc)
