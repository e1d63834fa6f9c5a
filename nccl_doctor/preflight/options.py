"""``preflight``'s options, as the CLI hands them to ``preflight.command``: checked as they are built, on the
launcher and again on each rank, which gets its own from ``PreflightOptions.argv`` (so none is lost on the way).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nccl_doctor.cluster.validate import check_port, check_seconds
from nccl_doctor.errors import InputError
from nccl_doctor.outputs import OutputOptions
from nccl_doctor.plan import parse_params

DEFAULT_TIMEOUT_S = 180.0
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0  # NCCL init on thousands of ranks takes 10-30 s
DEFAULT_RENDEZVOUS_TIMEOUT_S = 60.0


def check_smoke_dir(path: str) -> None:
    """DCP writes its checkpoint there: a missing or read-only directory would fail only in the last
    stage, after every rank started, and read as a broken node."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"--fsdp-smoke-dir {path!r}: no such directory")
    if not p.is_dir():
        raise InputError(f"--fsdp-smoke-dir {path!r}: not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise InputError(f"--fsdp-smoke-dir {path!r}: not writable here")


@dataclass(frozen=True, kw_only=True)
class PreflightOptions:
    """What ``nccl-doctor preflight`` runs, its deadlines, and where this node stands in the rendezvous."""

    nproc_per_node: int | None = None
    """``--nproc-per-node``: ranks per node (None: visible GPUs, else SLURM_GPUS_ON_NODE, else 2 CPU ranks)."""
    fsdp_smoke: bool = False
    """``--fsdp-smoke``: also train a tiny model with FSDP2 on the HSDP mesh and round-trip it through DCP."""
    fsdp_smoke_dir: str | None = None
    """``--fsdp-smoke-dir``: an existing, writable directory for the smoke test's DCP checkpoint (with
    ``fsdp_smoke`` only; None: the working directory on 2+ nodes, the system temp directory on one)."""
    cpu: bool = False
    """``--cpu``: Gloo on CPU even when GPUs are visible."""
    plan_params: str | None = None
    """``--plan-params``: also say which mesh ``plan`` recommends for a model of this many parameters."""
    timeout: float = DEFAULT_TIMEOUT_S
    """``--timeout``: seconds the whole run may take, every stage included."""
    collective_timeout: float = DEFAULT_COLLECTIVE_TIMEOUT_S
    """``--collective-timeout``: seconds for init_process_group and for each collective."""
    rendezvous_timeout: float = DEFAULT_RENDEZVOUS_TIMEOUT_S
    """``--rendezvous-timeout``: seconds for every node to arrive."""
    nnodes: int | None = None
    """``--nnodes``: nodes in the run (None: the launcher's variables, else 1)."""
    node_rank: int | None = None
    """``--node-rank``: this node's rank, 0 to N-1 (None: the launcher's variables)."""
    master_addr: str | None = None
    """``--master-addr``: node 0's HOST[:PORT], the same on every node (None: Slurm's first host, MASTER_ADDR)."""
    port: int | None = None
    """``--port``: the rendezvous port on node 0 (None: MASTER_PORT, else one derived from the job)."""
    worker: bool = False
    """``--worker`` (hidden): this process is one of a launcher's ranks; ``argv`` always sets it."""
    output: OutputOptions = field(default_factory=OutputOptions)
    """``--format``, the report files, ``--strict``, ``--drain-on-fail`` (the launcher's: its ranks render nothing)."""

    # the launcher's own: it plans the node, meets the others and reports; its ranks get the layout in their env
    LAUNCH_ONLY = frozenset({"nproc_per_node", "plan_params", "rendezvous_timeout", "nnodes", "node_rank",
                             "master_addr", "port", "output"})

    def __post_init__(self) -> None:
        """Every option, before anything is created or started: one line naming the option, exit 2."""
        for name in ("timeout", "rendezvous_timeout", "collective_timeout"):
            check_seconds(getattr(self, name), f"--{name.replace('_', '-')}")
        if self.nproc_per_node is not None and self.nproc_per_node < 1:
            raise InputError(f"--nproc-per-node must be >= 1 (got {self.nproc_per_node})")
        if self.port is not None:
            check_port(self.port, "--port")
        if self.plan_params is not None:
            parse_params(self.plan_params, "--plan-params")
        if self.fsdp_smoke_dir is not None:
            if not self.fsdp_smoke:
                raise InputError("--fsdp-smoke-dir is only used by --fsdp-smoke: add --fsdp-smoke (or drop the "
                                 "directory)")
            check_smoke_dir(self.fsdp_smoke_dir)

    def argv(self) -> list[str]:
        """A rank's command line (after ``python -m nccl_doctor``): what the ranks run, never the launch options."""
        out = ["preflight", "--worker", "--timeout", str(self.timeout), "--collective-timeout",
               str(self.collective_timeout)]
        if self.fsdp_smoke:
            out.append("--fsdp-smoke")
        if self.fsdp_smoke_dir:
            out += ["--fsdp-smoke-dir", self.fsdp_smoke_dir]
        if self.cpu:
            out.append("--cpu")
        return out
