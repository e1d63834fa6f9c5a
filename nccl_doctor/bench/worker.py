"""The rank side of ``bench``: groups, the size sweep, timing, verification and the node-pair pass
(planned and measured by ``localize.py``, shared with ``preflight``).

Imported only inside worker processes (it imports torch at the top). ``run_bench`` works inside any
already initialised default process group, so ``preflight`` can call it from its own workers.
Every rank ends with the same ``BenchResult``: each figure is reduced over the world (max time,
summed wrong elements), so judging gives one verdict everywhere.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from nccl_doctor.bench.busbw import GB, auto_iters, busbw_gbps, format_size, round_size
from nccl_doctor.bench.expected import Expected
from nccl_doctor.errors import InputError
from nccl_doctor.cluster import StageFile, gloo_iface_to
from nccl_doctor.report import plural
from nccl_doctor.bench.pairs import (Localisation, PairResult, floor_gbps, localise, pair_expected_gbps, plan_line,
                       predict_rounds, time_loop)

_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
STALL_ENV = "NCCL_DOCTOR_TEST_STALL"  # "RANK:STAGE-PREFIX": that rank hangs there (hang-diagnosis tests)


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    ops: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_reduce")
    groups: tuple[str, ...] = ("world", "intra", "inter")
    sizes: tuple[int, ...]
    iters: int | None = None  # None: auto_iters per size within budget_bytes
    warmup: int = 1
    budget_bytes: int = 64 << 20
    pairs: bool = True
    pair_size: int = 16 << 20
    timeout_s: float = 60.0


@dataclass(frozen=True, kw_only=True)
class Measurement:
    op: str
    group: str
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


@dataclass(kw_only=True)
class BenchResult:
    backend: str
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

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    def node_figure(self, index: int) -> float | None:
        """A node's inter-node figure: its best pair. A slow node is slow with every partner; a good
        node paired with a slow one is retested against a known-good node (``localize.py``)."""
        mine = [p.busbw_gbps for p in self.pairs if index in (p.a, p.b)]
        return max(mine) if mine else None


class BenchFailure(RuntimeError):
    """A collective failed or timed out; names the stage and the ranks that never got there."""

    def __init__(self, stage: str, missing: list[int], hosts: list[str], error: str):
        self.stage, self.missing, self.hosts, self.error = stage, missing, hosts, error
        who = ", ".join(f"rank {r} ({h})" for r, h in zip(missing, hosts)) or "none recorded"
        super().__init__(f"stage {stage} failed: {error.splitlines()[0] if error else '?'}; "
                         f"ranks that did not reach it: {who}")


Progress = Callable[[int, int, str, "Measurement | PairResult | None"], None]


# --- stages ---------------------------------------------------------------------------------------
class Stages:
    """Each rank marks the stage it enters in its stage file and as a key in the rendezvous store,
    so on a timeout we can name who never arrived (the store outlives a dead rank)."""

    def __init__(self, rank: int, host: str, env: Mapping[str, str] = os.environ):
        self.rank = rank
        self.file = StageFile(rank, host, env)
        self.current = "init"
        rank_text, _, prefix = env.get(STALL_ENV, "").partition(":")
        self.stall = prefix if rank_text == str(rank) and prefix else None
        try:
            self.store = dist.distributed_c10d._get_default_store()
        except Exception:  # noqa: BLE001 - private API; without it we only lose "who is missing"
            self.store = None

    def enter(self, stage: str) -> None:
        self.current = stage
        if self.stall and stage.startswith(self.stall):
            time.sleep(3600)  # test seam: a rank that hangs before this stage
        self.file.set(stage)
        if self.store is not None:
            try:
                self.store.set(f"ncd/{stage}/{self.rank}", "1")
            except Exception:  # noqa: BLE001
                self.store = None

    def missing(self, ranks: list[int]) -> list[int]:
        if self.store is None:
            return []
        try:
            return [r for r in ranks if not self.store.check([f"ncd/{self.current}/{r}"])]
        except Exception:  # noqa: BLE001
            return []


# --- setup ----------------------------------------------------------------------------------------
def init_from_env(*, timeout_s: float, env: Mapping[str, str] = os.environ, force_cpu: bool = False,
                  store=None, rank: int | None = None, world_size: int | None = None) -> str:
    """init_process_group with a timeout, always: NCCL on CUDA, Gloo otherwise. Returns the device.
    ``store``/``rank``/``world_size``: an existing store (preflight's) instead of MASTER_ADDR's env://."""
    local_rank = int(env.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and not force_cpu
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        kw = {} if store is None else {"store": store, "rank": rank, "world_size": world_size}
        dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timedelta(seconds=timeout_s), **kw)
    return f"cuda:{local_rank}" if use_cuda else "cpu"


NOMINAL_KINDS = ("veth", "bridge", "tun")  # sysfs speed is a made-up number (veth: 10000), not a line rate


def local_expected(env: Mapping[str, str], backend: str, root: str = "/") -> tuple[Expected | None, bool, str | None]:
    """This node's yardstick from the probe (~30 ms): the links the backend will use, and their rates,
    whether those rates are only nominal (every link a veth/bridge/tun: a figure may exceed them), and
    why there is no yardstick when the node cannot be read (the figures are still measured).
    Gloo without GLOO_SOCKET_IFNAME binds what routes to MASTER_ADDR (the launcher sets it so).
    A bug here is raised, not turned into a silent "no yardstick"."""
    from nccl_doctor.bench.expected import expected_bandwidth
    from nccl_doctor.node import probe_node

    route_iface = None
    if backend == "gloo" and not env.get("GLOO_SOCKET_IFNAME") and env.get("MASTER_ADDR"):
        route_iface = gloo_iface_to(env["MASTER_ADDR"], int(env.get("MASTER_PORT", "29500")))
    try:
        node = probe_node(root, env)
    except (InputError, OSError) as exc:
        return None, False, f"no yardstick: the probe could not read this node ({exc})"
    exp = expected_bandwidth(node, backend, route_iface=route_iface)
    links = [node.facts.iface(n) for n in exp.ifaces]
    nominal = bool(links) and all(i is not None and i.virtual_kind in NOMINAL_KINDS for i in links)
    return exp, nominal, None


def gather_nodes(env: Mapping[str, str], backend: str) -> list[NodeInfo]:
    """One all_gather_object of (node, hostname, expected bandwidth) from every rank; only each node's
    local rank 0 probes (the others send None): one probe and one DNS lookup per node."""
    host = socket.gethostname()
    node = int(env.get("GROUP_RANK", "-1"))
    mine = local_expected(env, backend) if int(env.get("LOCAL_RANK", "0")) == 0 else None
    per_rank: list = [None] * dist.get_world_size()
    dist.all_gather_object(per_rank, (node, host, mine))
    keys: list = []
    for node_id, h, _ in per_rank:  # torchrun's GROUP_RANK when present, else the hostname
        key = node_id if node_id >= 0 else h
        if key not in keys:
            keys.append(key)
    nodes = []
    for i, key in enumerate(keys):
        ranks = tuple(r for r, (n, h, _) in enumerate(per_rank) if (n if n >= 0 else h) == key)
        h0 = per_rank[ranks[0]][1]
        exp, nominal, why = next((per_rank[r][2] for r in ranks if per_rank[r][2] is not None),
                                 (None, False, "no yardstick: no rank of this node probed it (no LOCAL_RANK 0)"))
        nodes.append(NodeInfo(index=i, host=h0, ranks=ranks, iface=exp.iface if exp else None,
                              link_gbps=exp.inter_gbps if exp and exp.inter_gbps else None, expected=exp,
                              nominal_link=nominal, no_expected=why))
    return nodes


def build_groups(nodes: list[NodeInfo], device: str, wanted: tuple[str, ...]) -> tuple[dict, list[str]]:
    """``world``, plus ``intra``/``inter`` as the "fsdp"/"dp" dims of the HSDP mesh
    ``init_device_mesh(dev, (nodes, local), mesh_dim_names=("dp", "fsdp"))``, when they differ from world."""
    groups: dict[str, object] = {}
    skipped: list[str] = []
    world = sum(len(n.ranks) for n in nodes)
    if "world" in wanted and world == 1:
        skipped.append("world: 1 rank, no link to measure")
    elif "world" in wanted:
        groups["world"] = dist.group.WORLD
    local = len(nodes[0].ranks)
    want_sub = [g for g in ("intra", "inter") if g in wanted]
    if not want_sub:
        return groups, skipped
    from nccl_doctor.bench.command import MISFIT_SKIP, mesh_misfit

    misfit = mesh_misfit(nodes) if len(nodes) > 1 else None
    if misfit is not None:  # before the 1-rank test: node 0 may be the odd one
        skipped += [f"{g}: {MISFIT_SKIP} ({misfit[0]})" for g in want_sub]
        return groups, skipped
    if len(nodes) == 1 or local == 1:
        skipped += [_why_not(g, len(nodes), local) for g in want_sub]
        return groups, skipped
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.split(":")[0], (len(nodes), local), mesh_dim_names=("dp", "fsdp"))
    if "intra" in want_sub:
        groups["intra"] = mesh["fsdp"].get_group()
    if "inter" in want_sub:
        groups["inter"] = mesh["dp"].get_group()
    return groups, skipped


def _why_not(group: str, nnodes: int, local: int) -> str:
    """Why ``group`` is not measured on ``nnodes`` x ``local`` ranks (one of the two is 1)."""
    shape = f"{plural(nnodes, 'node')} x {plural(local, 'rank')} per node"
    if group == "inter":
        return (f"inter: needs 2+ nodes ({shape})" if nnodes == 1 else
                f"inter: the same group as world with 1 rank per node ({shape})")
    return (f"intra: needs 2+ ranks per node ({shape})" if local == 1 else
            f"intra: the same group as world on one node ({shape})")


# --- measuring -------------------------------------------------------------------------------------
def _buffers(op: str, size: int, n: int, grank: int, device: str):
    total = size // 4
    chunk = total // n
    if op == "all_gather":
        inp = torch.full((chunk,), float(grank + 1), device=device)
        out = torch.empty(total, device=device)
        return (lambda g: _all_gather(out, inp, group=g)), inp, out, chunk
    if op == "reduce_scatter":
        inp = torch.full((total,), float(grank + 1), device=device)
        out = torch.empty(chunk, device=device)
        return (lambda g: _reduce_scatter(out, inp, group=g)), inp, out, chunk
    if op == "all_reduce":
        buf = torch.zeros(total, device=device)  # zeros while timing: repeated sums stay finite
        return (lambda g: dist.all_reduce(buf, group=g)), buf, buf, total
    raise ValueError(f"unknown op {op!r}")


def _count_wrong(op: str, fn, inp, out, n: int, grank: int, group) -> int:
    """One checked run with known inputs, like nccl-tests' validation pass."""
    expected_sum = n * (n + 1) / 2
    if op == "all_gather":
        fn(group)
        want = torch.arange(1, n + 1, dtype=out.dtype, device=out.device).repeat_interleave(out.numel() // n)
        return int((out != want).sum())
    if op == "reduce_scatter":
        fn(group)
        return int((out != expected_sum).sum())
    inp.fill_(float(grank + 1))
    fn(group)
    return int((out != expected_sum).sum())


def _world_reduce(device: str, seconds: float, wrong: int) -> tuple[float, int]:
    """Max time and total wrong elements over every rank (all concurrent groups included)."""
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    w = torch.tensor([wrong], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.all_reduce(w)
    return float(t.item()), int(w.item())


def measure(op: str, group_name: str, group, size: int, cfg: BenchConfig, device: str) -> Measurement:
    """One (op, group, size) point; every rank of the world calls it (each in its own sub-group)."""
    n = dist.get_world_size(group)
    grank = dist.get_rank(group)
    size = round_size(size, n)
    iters = cfg.iters or auto_iters(size, budget_bytes=cfg.budget_bytes)
    fn, inp, out, count = _buffers(op, size, n, grank, device)
    for _ in range(cfg.warmup):
        fn(group)
    seconds = time_loop(fn, group, iters, device)
    wrong = _count_wrong(op, fn, inp, out, n, grank, group)
    seconds, wrong = _world_reduce(device, seconds, wrong)
    return Measurement(op=op, group=group_name, group_size=n, size_bytes=size, count=count, iters=iters,
                       time_us=seconds * 1e6, algbw_gbps=size / seconds / GB if seconds else 0.0,
                       busbw_gbps=busbw_gbps(op, size, seconds, n), wrong=wrong)


def measure_nodes(result: BenchResult, cfg: BenchConfig, stages: Stages, *, progress: Progress | None = None,
                  done: int = 0, total: int = 0, say: Callable[[str], None] | None = None) -> Localisation:
    """The node-pair pass (``localize.py``): each node's first rank ping-pongs ``pair_size`` bytes with a
    partner's, disjoint pairs at once, suspects then against known-good nodes. Fills ``result.pairs``;
    each round is a stage ("node-pairs round 2: n1<->n3"), so a hang names it and who never arrived."""
    nodes = result.nodes
    size = round_size(cfg.pair_size, 2)
    iters = cfg.iters or auto_iters(size, budget_bytes=cfg.budget_bytes, lo=3)
    known = [y for y in map(pair_expected_gbps, nodes) if y]
    text, result.pairs_predicted_s = plan_line(len(nodes), size, max(cfg.warmup, 1) + iters,
                                               min(known) if known else None)
    if say:
        say(text)
    host_of = {r: n.host for n in nodes for r in n.ranks}
    world = list(range(dist.get_world_size()))

    def on_round(i, pairs):
        stages.enter(f"node-pairs round {i}: " + " ".join(f"{nodes[a].host}<->{nodes[b].host}" for a, b in pairs))

    def on_measured(i, results):
        if progress:
            progress(done + i, max(total, done + i), f"node pairs round {i}", None)

    loc = _guard(stages, world, host_of, lambda: localise(
        [n.ranks[0] for n in nodes], size_bytes=size, iters=iters, warmup=cfg.warmup, timeout_s=cfg.timeout_s,
        floor_gbps=floor_gbps(nodes, result.backend), device=result.device, on_round=on_round,
        on_measured=on_measured))
    result.pairs, result.pairs_seconds = loc.results, loc.seconds
    return loc


def run_bench(cfg: BenchConfig, *, env: Mapping[str, str] = os.environ, progress: Progress | None = None,
              stages: Stages | None = None) -> BenchResult:
    """The whole sweep inside an already initialised default process group. Raises ``BenchFailure``
    naming the stage and the ranks that never reached it when a collective fails or times out."""
    t0 = time.monotonic()
    rank = dist.get_rank()
    backend = str(dist.get_backend())
    device = f"cuda:{torch.cuda.current_device()}" if backend == "nccl" else "cpu"
    stages = stages or Stages(rank, socket.gethostname(), env)
    stages.enter("topology")
    nodes = _guard(stages, list(range(dist.get_world_size())), {}, lambda: gather_nodes(env, backend))
    host_of = {r: n.host for n in nodes for r in n.ranks}
    world = list(range(dist.get_world_size()))
    stages.enter("groups")
    groups, skipped = _guard(stages, world, host_of, lambda: build_groups(nodes, device, cfg.groups))
    result = BenchResult(backend=backend, device=device, world_size=len(world),
                         local_world_size=len(nodes[0].ranks), nodes=nodes, skipped=skipped)
    rounds = predict_rounds(len(nodes))[0] if cfg.pairs else 0
    total = len(groups) * len(cfg.ops) * len(cfg.sizes) + rounds
    done = 0
    for gname, group in groups.items():
        for op in cfg.ops:
            for size in cfg.sizes:
                stages.enter(f"{op} {gname} {format_size(size)}")
                m = _guard(stages, world, host_of, lambda: measure(op, gname, group, size, cfg, device))
                result.results.append(m)
                done += 1
                if progress:
                    progress(done, total, f"{op} {gname} {format_size(m.size_bytes)}", m)
    if rounds:
        say = (lambda text: print(f"nccl-doctor bench: {text}", file=sys.stderr, flush=True)) if progress else None
        measure_nodes(result, cfg, stages, progress=progress, done=done, total=total, say=say)
    stages.enter("done")
    result.elapsed_s = time.monotonic() - t0
    return result


def _guard(stages: Stages, ranks: list[int], host_of: dict[int, str], fn):
    try:
        return fn()
    except (RuntimeError, dist.DistError) as exc:  # gloo timeouts, closed pairs, NCCL errors
        missing = [r for r in stages.missing(ranks) if r != stages.rank]
        hosts = [host_of.get(r, "?") for r in missing]
        raise BenchFailure(stages.current, missing, hosts, str(exc)) from exc


def share_code(code: int, device: str) -> int:
    """Rank 0's exit code, on every rank."""
    t = torch.tensor([code], dtype=torch.int64, device=device)
    dist.broadcast(t, src=0)
    return int(t.item())
