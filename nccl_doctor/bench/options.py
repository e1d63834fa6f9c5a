"""``bench``'s options, as the CLI hands them to ``bench.command``: checked as they are built, on the launcher
and again on each rank, which gets them from ``BenchOptions.argv`` (so no option is lost on the way).

What depends on the environment (``--warmup 0`` where the ranks will run NCCL, a ``MASTER_PORT`` that is not a
port) is checked by ``bench.command.check_environment``, with the environment it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nccl_doctor.bench.busbw import OPS, Op, parse_size, parse_sizes
from nccl_doctor.bench.model import DEFAULT_COLLECTIVE_TIMEOUT_S, DEFAULT_TIMEOUT_S, GROUPS, Group
from nccl_doctor.cluster.net import parse_endpoint
from nccl_doctor.cluster.validate import check_seconds
from nccl_doctor.errors import InputError
from nccl_doctor.outputs import OutputOptions

DEFAULT_OPS = "all_gather,reduce_scatter,all_reduce"
DEFAULT_GROUPS = "world,intra,inter"  # intra and inter only where they differ from world
# below these a deadline only measures how fast torch starts: the whole run includes torchrun's and each
# rank's start-up (3-5 s on an idle 2-core box, more on a loaded GPU node); init_process_group waits for
# every rank of every node to arrive, which the ranks' own imports can spread by seconds
MIN_TIMEOUT_S = 10.0
MIN_COLLECTIVE_TIMEOUT_S = 5.0
_WHOLE_RUN = "the whole run, start-up of torchrun and of every rank included"
MIN_SECONDS = {"timeout": (MIN_TIMEOUT_S, _WHOLE_RUN), "deadline": (MIN_TIMEOUT_S, _WHOLE_RUN),
               "collective_timeout": (MIN_COLLECTIVE_TIMEOUT_S, "init_process_group waits for every rank to start")}
OP_ALIASES = {"ag": Op.ALL_GATHER, "rs": Op.REDUCE_SCATTER, "ar": Op.ALL_REDUCE,
              "all-gather": Op.ALL_GATHER, "reduce-scatter": Op.REDUCE_SCATTER, "all-reduce": Op.ALL_REDUCE}


def parse_ops(text: str) -> tuple[Op, ...]:
    ops: list[Op] = []
    for raw in (t.strip().lower() for t in text.split(",") if t.strip()):
        name = OP_ALIASES.get(raw, raw)
        if name not in OPS:
            raise InputError(f"--ops: unknown op {raw!r}; choose from {', '.join(OPS)} (or ag, rs, ar)")
        op = Op(name)
        if op not in ops:
            ops.append(op)
    if not ops:
        raise InputError("--ops: empty")
    return tuple(ops)


def parse_groups(text: str) -> tuple[Group, ...]:
    names = tuple(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
    bad = [g for g in names if g not in GROUPS]
    if bad or not names:
        raise InputError(f"--groups: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(GROUPS)}")
    return tuple(Group(g) for g in names)


def _check_size(flag: str, text: str | None, parse: Callable[[str], object]) -> None:
    try:
        if text is not None:
            parse(text)
    except ValueError as exc:
        raise InputError(f"{flag} {text!r}: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """How ``nccl-doctor bench`` launches its ranks, how long it may take, and what it measures."""

    nproc_per_node: int | None = None
    """``--nproc-per-node``: ranks on this node (None: visible GPUs, else SLURM_GPUS_ON_NODE, else 2 CPU ranks)."""
    nnodes: int | None = None
    """``--nnodes``: nodes (None: SLURM_NNODES under Slurm, else 1)."""
    rdzv_endpoint: str | None = None
    """``--rdzv-endpoint``: the rendezvous HOST:PORT, the same on every node (None: from Slurm or a free port)."""
    rdzv_id: str | None = None
    """``--rdzv-id``: the rendezvous id (None: slurm-<job id>.<step id>, else nccl-doctor)."""
    timeout: float = DEFAULT_TIMEOUT_S
    """``--timeout``: seconds the whole run may take; past it every rank is killed and the stage named."""
    collective_timeout: float = DEFAULT_COLLECTIVE_TIMEOUT_S
    """``--collective-timeout``: seconds for init_process_group and for each collective."""
    deadline: float | None = None
    """``--deadline``: the old name of ``--timeout``; when given it wins (it is what the user typed) and is
    folded into ``timeout`` as the options are built, so this is always None after."""
    ops: str | None = None
    """``--ops``: comma list of collectives as typed (None: ``DEFAULT_OPS``); ``parse_ops`` reads it."""
    groups: str | None = None
    """``--groups``: comma list of world, intra, inter as typed (None: ``DEFAULT_GROUPS``)."""
    sizes: str | None = None
    """``--sizes``: comma list or MIN:MAX[:FACTOR] of full-buffer sizes (None: by device kind)."""
    iters: int | None = None
    """``--iters``: timed iterations per size (None: by size)."""
    warmup: int = 1
    """``--warmup``: untimed iterations per size."""
    pair_size: str | None = None
    """``--pair-size``: the node-pair test's size (None: by device kind)."""
    no_pairs: bool = False
    """``--no-pairs``: skip the per-node pair pass."""
    cpu: bool = False
    """``--cpu``: Gloo on CPU even when GPUs are visible."""
    output: OutputOptions = field(default_factory=OutputOptions)
    """``--format``, the report files, ``--strict`` (rank 0 writes them)."""

    # the launcher's own: the ranks get torchrun's layout, and ``deadline`` reaches them as ``timeout``
    LAUNCH_ONLY = frozenset({"nproc_per_node", "nnodes", "rdzv_endpoint", "rdzv_id", "deadline"})

    def __post_init__(self) -> None:
        """Fail fast, before anything is launched, naming the option and the value at fault."""
        for flag, value in (("--ops", self.ops), ("--groups", self.groups), ("--sizes", self.sizes),
                            ("--pair-size", self.pair_size)):
            if value is not None and not value.strip():  # (else `ops or DEFAULT_OPS` runs the defaults)
                raise InputError(f"{flag}: empty")
        parse_ops(self.ops or DEFAULT_OPS)
        parse_groups(self.groups or DEFAULT_GROUPS)
        _check_size("--sizes", self.sizes, parse_sizes)
        _check_size("--pair-size", self.pair_size, parse_size)
        for name in ("iters", "nproc_per_node", "nnodes"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InputError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
        if self.warmup < 0:
            raise InputError(f"--warmup must be >= 0, got {self.warmup}")
        for name in ("timeout", "collective_timeout", "deadline"):
            v = getattr(self, name)
            if v is not None:
                low, why = MIN_SECONDS[name]
                check_seconds(v, f"--{name.replace('_', '-')}", minimum=low, why=why)
        if self.deadline is not None:  # the old name wins: it is what the user typed
            object.__setattr__(self, "timeout", self.deadline)
            object.__setattr__(self, "deadline", None)
        if self.rdzv_endpoint is not None:
            parse_endpoint(self.rdzv_endpoint)  # syntax and port here; plan_launch resolves the host

    def argv(self) -> list[str]:
        """The ranks' command line: the measurement and output options, never the launch ones."""
        out = ["bench", "--warmup", str(self.warmup), "--timeout", str(self.timeout),
               "--collective-timeout", str(self.collective_timeout)]
        for flag, value in (("--ops", self.ops), ("--groups", self.groups), ("--sizes", self.sizes),
                            ("--iters", self.iters), ("--pair-size", self.pair_size)):
            if value is not None:
                out += [flag, str(value)]
        out += [flag for flag, on in (("--no-pairs", self.no_pairs), ("--cpu", self.cpu)) if on]
        return out + self.output.argv()
