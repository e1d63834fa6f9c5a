"""What a ``bench`` run measured, as plain data: no torch, so judging and the report are typed and testable.

The worker (``worker.py``, torch) fills a ``BenchResult``; ``judge.py`` and ``view.py`` read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import MIB, OPS, Op, format_size
from nccl_doctor.bench.expected import Expected
from nccl_doctor.enums import StrEnum

DEFAULT_TIMEOUT_S = 600.0  # the whole run
DEFAULT_COLLECTIVE_TIMEOUT_S = 120.0  # init_process_group and each collective


class Group(StrEnum):
    """The process groups a run measures: every rank, the ranks of one node, one rank per node."""

    WORLD = "world"
    INTRA = "intra"
    INTER = "inter"


GROUPS = tuple(Group)


def measure_stage(op: str, group: str, size_bytes: int) -> str:
    """The stage of one measurement: ``reduce_scatter world 64 KiB`` (the named stages: ``cluster.stages.Stage``)."""
    return f"{op} {group} {format_size(size_bytes)}"


def pairs_stage(round_no: int, pairs: list[tuple[str, str]]) -> str:
    """The stage of one round of the node-pair pass: ``node-pairs round 2: n1<->n3 n2<->n4``."""
    return f"node-pairs round {round_no}: " + " ".join(f"{a}<->{b}" for a, b in pairs)


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    ops: tuple[Op, ...] = OPS
    groups: tuple[Group, ...] = GROUPS
    sizes: tuple[int, ...]
    iters: int | None = None  # None: auto_iters per size within budget_bytes
    warmup: int = 1
    budget_bytes: int = 64 * MIB
    pairs: bool = True
    pair_size: int = 16 * MIB
    timeout_s: float = 60.0


@dataclass(frozen=True, kw_only=True)
class Measurement:
    op: Op
    group: Group
    group_size: int
    size_bytes: int
    count: int  # elements per rank passed to the collective (nccl-tests' "count" for AG/RS)
    iters: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    dtype: str = "float32"
    in_place: bool = False
    rank_time_us: tuple[float, ...] = ()  # every rank's own time per call, world rank order (``time_us``: the max)

    @property
    def time_us_mean(self) -> float | None:
        """The mean over ranks: nccl-tests' default figure (``-a 1``), where ``time_us`` is the slowest rank's."""
        return sum(self.rank_time_us) / len(self.rank_time_us) if self.rank_time_us else None


@dataclass(frozen=True, kw_only=True)
class RailResult:
    """One rail of a node pair: local rank ``rail`` of node a ping-pongs local rank ``rail`` of node b, all
    rails of all pairs at once, so each GPU's own NIC carries its flow (``pairs.plan_rails``)."""

    rail: int  # the local rank on both nodes
    ranks: tuple[int, int]  # world ranks: node a's, node b's
    time_us: float  # per round trip
    busbw_gbps: float
    wrong: int
    nics: tuple[str | None, str | None] = (None, None)  # the NIC nearest each end's GPU (probe), None unknown
    iters: int = 0  # timed exchanges: the planned count, fewer on a rail too slow for it (``pairs.rail_iters``)


@dataclass(frozen=True, kw_only=True)
class PairResult:
    """One node pair's ping-pong, every rail at once: ``busbw_gbps`` is bytes over the link per second, one way
    at a time (``busbw.pair_gbps``): the slowest rail's, or the rails' sum when they share the link."""

    a: int  # node indices
    b: int
    size_bytes: int
    iters: int
    time_us: float  # per round trip
    busbw_gbps: float
    wrong: int
    round: int = 1
    rails: tuple[RailResult, ...] = ()  # every rail measured at once
    # the rails share the nodes' links (one socket link for all): ``busbw_gbps`` is their sum, what the
    # link moved; else (a NIC per rail) it is the slowest rail's. ``time_us``: the slowest rail's
    rails_shared: bool = False

    @property
    def link(self) -> tuple[int, int]:
        return (min(self.a, self.b), max(self.a, self.b))


@dataclass(frozen=True, kw_only=True)
class GpuPairResult:
    """Two GPUs of one node ping-ponging (``gpupairs.py``): ``busbw_gbps`` is bytes over their path per second,
    one way at a time (``busbw.pair_gbps``), as a node pair's."""

    node: int  # node index
    local: tuple[int, int]  # local ranks (the GPUs they drive)
    ranks: tuple[int, int]  # world ranks
    size_bytes: int
    iters: int
    time_us: float  # per round trip
    busbw_gbps: float
    wrong: int
    round: int = 1


@dataclass(frozen=True, kw_only=True)
class NvLinkState:
    """One GPU's NVLinks as NVML reports them (``nvlinks.py``): ``up`` of the ``links`` it has."""

    node: int
    gpu: str  # PCI address, sysfs form (0000:1b:00.0)
    up: int
    links: int


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    index: int
    host: str
    ranks: tuple[int, ...]
    iface: str | None
    link_gbps: float | None  # inter-node links in use, together, GB/s per direction (expected.inter_gbps)
    expected: Expected | None = None  # the probe's yardstick for this node (its local rank 0's view)
    nominal_link: bool = False  # the links' sysfs speed is nominal (veth): a floor still, not a ceiling
    no_expected: str | None = None  # why there is no yardstick (the probe could not read this node)


@dataclass(frozen=True)
class RankCpus:
    """The CPUs one rank may run on (``os.sched_getaffinity``): how many, and which where the list was short
    enough to send (``cpus.MAX_LIST_CHARS``; None: only the count came)."""

    count: int
    cpus: frozenset[int] | None = None


@dataclass(kw_only=True)
class BenchResult:
    backend: Backend
    device: str
    world_size: int
    local_world_size: int
    nodes: list[NodeInfo]
    results: list[Measurement] = field(default_factory=list)
    pairs: list[PairResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # groups not measured, and why
    elapsed_s: float = 0.0
    pairs_seconds: float = 0.0  # the node-pair pass
    pairs_predicted_s: tuple[float, float] | None = None  # its prediction: healthy, one bad node
    rank_cpus: list[RankCpus | None] = field(default_factory=list)  # by world rank; None: not known (``cpus``)
    gpu_pairs: list[GpuPairResult] = field(default_factory=list)  # the intra-node GPU-pair pass (NCCL)
    nvlinks: list[NvLinkState] = field(default_factory=list)  # NVML's NVLink state per GPU, where read
    nvlinks_unread: str | None = None  # why NVML was not read (no nvidia-ml-py, CPU ranks, ...)

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    @property
    def pair_rails(self) -> int:
        """Rails the pair pass ran at once per node pair (1 for results without rails)."""
        return max((len(p.rails) for p in self.pairs), default=1) or 1

    @property
    def yardstick_rails(self) -> int:
        """The rails one pair figure stands for: all of them on a NIC each, one (the whole link) when they
        share the links and the figure is their sum."""
        return 1 if any(p.rails_shared for p in self.pairs) else self.pair_rails

    def node_figure(self, index: int) -> float | None:
        """A node's inter-node figure: its best pair. A slow node is slow with every partner; a good
        node paired with a slow one is retested against a known-good node (``pairs.py``)."""
        mine = [p.busbw_gbps for p in self.pairs if index in (p.a, p.b)]
        return max(mine) if mine else None


class BenchFailure(RuntimeError):  # noqa: N818 - a stage that failed, reported as a finding
    """A collective failed or timed out; names the stage and the ranks that never got there."""

    def __init__(self, stage: str, missing: list[int], hosts: list[str], error: str, *,
                 never_left: list[int] | None = None, never_left_hosts: list[str] | None = None):
        self.stage, self.missing, self.hosts, self.error = stage, missing, hosts, error
        self.never_left, self.never_left_hosts = never_left or [], never_left_hosts or []  # entered, never left
        who = ", ".join(f"rank {r} ({h})" for r, h in zip(missing, hosts, strict=False)) or "none recorded"
        super().__init__(f"stage {stage} failed: {error.splitlines()[0] if error else '?'}; "
                         f"ranks that did not reach it: {who}")


# progress(done, total, label, the measurement or None for a pair round)
Progress = Callable[[int, int, str, "Measurement | PairResult | None"], None]
