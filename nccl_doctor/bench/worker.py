"""The rank side of ``bench``: groups, the size sweep, timing, verification and the node-pair pass
(planned by ``pairs.py``, measured here, shared with ``preflight``).

Imported only inside worker processes (it imports torch at the top). ``run_bench`` works inside any
already initialised default process group, so ``preflight`` can call it from its own workers.
Every rank ends with the same ``BenchResult``: each figure is reduced over the world (every rank's time,
the figure from the slowest; summed wrong elements), so judging gives one verdict everywhere.
"""

from __future__ import annotations

import inspect
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch.distributed.rendezvous import rendezvous

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.busbw import FLOAT32_BYTES, GB, Op, auto_iters, busbw_gbps, pair_gbps, round_size
from nccl_doctor.bench.checkvalues import gather_expected, gather_value, reduce_expected, reduce_value
from nccl_doctor.bench.cpus import gather_cpus
from nccl_doctor.bench.device import CudaApi, choose, cuda_from_test_env, gpus_expected
from nccl_doctor.bench.exchange import (
    OPTIONAL_STR,
    Malformed,
    PeerDataError,
    all_gather_flags,
    all_gather_json,
    expect,
    expected_from_json,
    expected_to_json,
)
from nccl_doctor.bench.expected import Expected, local_expected
from nccl_doctor.bench.gpupass import measure_gpu_pairs
from nccl_doctor.bench.groups import plan_groups, why_not
from nccl_doctor.bench.model import (
    BenchConfig,
    BenchFailure,
    BenchResult,
    Group,
    Measurement,
    NodeInfo,
    PairResult,
    Progress,
    RailResult,
    measure_stage,
    pairs_stage,
)
from nccl_doctor.bench.pairs import (
    PAIR_LOOP_BUDGET_S,
    SLOW_RATIO,
    Localisation,
    closing_deadline_s,
    first_round,
    floor_gbps,
    next_round,
    pair_expected_gbps,
    pair_figure,
    pair_loop_budget_s,
    plan_line,
    plan_rails,
    predict_rounds,
    rail_iters,
    rails_share_links,
    slow_ratio,
)
from nccl_doctor.bench.rails import gpu_nics, rank_gpu_address, rank_nics
from nccl_doctor.bench.rankstages import Stages
from nccl_doctor.bench.timing import Collective, time_loop
from nccl_doctor.bench.watchdog import torch_timeout_s
from nccl_doctor.cluster.stages import Stage
from nccl_doctor.errors import InputError
from nccl_doctor.node import probe_node

__all__ = [  # what preflight and the bench command use; the models are re-exported from model.py
    "BenchConfig", "BenchFailure", "BenchResult", "Malformed", "Measurement", "NodeInfo", "PairResult", "Stages",
    "all_gather_flags", "all_gather_json", "build_groups", "init_from_env", "local_expected", "localise", "measure",
    "measure_nodes", "run_bench", "share_code", "why_not",
]

_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
SLOW_RANK_ENV = "NCCL_DOCTOR_TEST_SLOW_RANK"  # "RANK:SECONDS": that rank's pair exchanges each sleep SECONDS
PAIR_MIN_ITERS = 3
US = 1e6  # microseconds in a second
PAIR_RANKS = 2  # a node pair: each node's first rank

T = TypeVar("T")




# --- setup ----------------------------------------------------------------------------------------
PG_STORE_PREFIX = "default_pg"  # the prefix init_process_group puts on an env:// store it makes itself


def init_from_env(*, timeout_s: float, env: Mapping[str, str] = os.environ, force_cpu: bool = False,
                  store: Any = None, rank: int | None = None, world_size: int | None = None,
                  stages: Stages | None = None) -> str:
    """init_process_group: NCCL on this rank's GPU, Gloo on CPU with ``force_cpu`` or where no GPU is expected
    (``device.choose``). Returns the device. Raises ``device.CudaUnusable`` (CUDA's own error and the fix) where
    GPUs are expected and CUDA cannot serve this rank: never a silent Gloo.
    ``store``/``rank``/``world_size``: an existing store (preflight's) instead of MASTER_ADDR's env://.

    On NCCL the world communicator is created here, eagerly (``device_id``: sub-groups then split from it),
    so a failure or a peer missing at creation is charged to the ``init`` stage, not to the first collective.
    ``stages`` bounds it: the init stage is watched (``timeout_s``) and marked in the store, which we make
    ourselves for env:// so the marks can name a rank that never arrived. PyTorch's own timeout is longer
    (``watchdog.torch_timeout_s``): with ``stages``, ours fires first."""
    local_rank = int(env.get("LOCAL_RANK", "0"))
    local_world = env.get("LOCAL_WORLD_SIZE")
    cuda: CudaApi = cuda_from_test_env(env) or _TorchCuda()
    choice = choose(cuda, local_rank=local_rank, local_world_size=int(local_world) if local_world else None,
                    expected=gpus_expected(env), force_cpu=force_cpu)
    if choice.use_cuda:
        torch.cuda.set_device(choice.device_index)
    if dist.is_initialized():
        return choice.device
    timeout = timedelta(seconds=torch_timeout_s(timeout_s) if stages is not None else timeout_s)
    if stages is not None:
        stages.enter(Stage.INIT)
    if store is None and stages is not None:  # env://, as init_process_group would, but ours to mark
        raw, rank, world_size = next(rendezvous("env://", timeout=timeout))
        raw.set_timeout(timeout)
        store = dist.PrefixStore(PG_STORE_PREFIX, raw)
    if stages is not None:
        stages.attach(store)
    kw = {} if store is None else {"store": store, "rank": rank, "world_size": world_size}
    dist.init_process_group(str(choice.backend), timeout=timeout, **kw,
                            **eager_init(choice.use_cuda, choice.device))
    if stages is not None:
        stages.world_size = dist.get_world_size()
        stages.leave()
    return choice.device


def eager_init(use_cuda: bool, device: str, init: Callable[..., Any] | None = None) -> dict[str, Any]:
    """``init_process_group``'s ``device_id`` on NCCL, where this torch takes it (2.3 and later: the
    communicator is created at init, and sub-groups use ``ncclCommSplit``); nothing on Gloo, whose groups have
    no lazy creation to avoid (and whose ``device_id`` must be an accelerator)."""
    params = inspect.signature(init or dist.init_process_group).parameters
    return {"device_id": torch.device(device)} if use_cuda and "device_id" in params else {}


class _TorchCuda:
    """``device.CudaApi`` over the real ``torch.cuda``."""

    @property
    def version(self) -> str | None:
        cuda: str | None = torch.version.cuda
        return cuda

    def is_available(self) -> bool:
        return bool(torch.cuda.is_available())

    def device_count(self) -> int:
        return int(torch.cuda.device_count())

    def init(self) -> None:
        torch.cuda.init()


def gather_nodes(env: Mapping[str, str], backend: Backend) -> list[NodeInfo]:
    """(node, hostname, expected bandwidth) from every rank, as JSON (``exchange``); only each node's
    local rank 0 probes (the others send None): one probe and one DNS lookup per node."""
    host = socket.gethostname()
    node = int(env.get("GROUP_RANK", "-1"))
    mine = None
    if int(env.get("LOCAL_RANK", "0")) == 0:
        exp, nominal, why = local_expected(env, backend)
        mine = {"expected": expected_to_json(exp), "nominal": nominal, "why": why}
    got = all_gather_json({"node": node, "host": host, "probe": mine})
    per_rank = [_node_entry(r, e) for r, e in enumerate(got)]

    def key_of(node_id: int, h: str) -> int | str:  # torchrun's GROUP_RANK when present, else the hostname
        return node_id if node_id >= 0 else h

    keys = list(dict.fromkeys(key_of(n, h) for n, h, _ in per_rank))
    nodes = []
    for i, key in enumerate(keys):
        ranks = tuple(r for r, (n, h, _) in enumerate(per_rank) if key_of(n, h) == key)
        probed = [p for r in ranks if (p := per_rank[r][2]) is not None]
        exp, nominal, why = probed[0] if probed else (
            None, False, "no yardstick: no rank of this node probed it (no LOCAL_RANK 0)")
        nodes.append(NodeInfo(index=i, host=per_rank[ranks[0]][1], ranks=ranks, iface=exp.iface if exp else None,
                              link_gbps=exp.inter_gbps if exp and exp.inter_gbps else None, expected=exp,
                              nominal_link=nominal, no_expected=why))
    return nodes


def _node_entry(rank: int, entry: Any) -> tuple[int, str, tuple[Expected | None, bool, str | None] | None]:
    """One rank's ``gather_nodes`` entry, checked: (node, host, (yardstick, nominal, why) or None)."""
    d = expect(entry, rank, "topology data", {"node": (int,), "host": (str,), "probe": (dict, type(None))})
    if d["probe"] is None:
        return d["node"], d["host"], None
    p = expect(d["probe"], rank, "probe summary", {"nominal": (bool,), "why": OPTIONAL_STR})
    return d["node"], d["host"], (expected_from_json(p.get("expected"), rank), p["nominal"], p["why"])


def build_groups(nodes: list[NodeInfo], device: str, wanted: tuple[str, ...]) -> tuple[dict[Group, Any], list[str]]:
    """``world``, plus ``intra``/``inter`` as the "fsdp"/"dp" dims of the HSDP mesh
    ``init_device_mesh(dev, (nodes, local), mesh_dim_names=("dp", "fsdp"))``, when they differ from world
    (``groups.plan_groups``)."""
    plan = plan_groups(nodes, wanted)
    groups: dict[Group, Any] = {Group.WORLD: dist.group.WORLD} if plan.world else {}
    if plan.mesh:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.split(":", maxsplit=1)[0], (len(nodes), len(nodes[0].ranks)),
                                mesh_dim_names=("dp", "fsdp"))
        dims = {Group.INTRA: "fsdp", Group.INTER: "dp"}
        groups.update({g: mesh[dims[g]].get_group() for g in plan.mesh})
    return groups, plan.skipped


# --- measuring -------------------------------------------------------------------------------------
def _buffers(op: str, size: int, n: int, grank: int, device: str) -> tuple[Collective, Any, Any, int]:
    total = size // FLOAT32_BYTES
    chunk = total // n
    if op == Op.ALL_GATHER:
        inp = torch.full((chunk,), gather_value(grank), device=device)
        out = torch.empty(total, device=device)
        return (lambda g, async_op=False: _all_gather(out, inp, group=g, async_op=async_op)), inp, out, chunk
    if op == Op.REDUCE_SCATTER:
        inp = torch.full((total,), reduce_value(grank), device=device)
        out = torch.empty(chunk, device=device)
        return (lambda g, async_op=False: _reduce_scatter(out, inp, group=g, async_op=async_op)), inp, out, chunk
    if op == Op.ALL_REDUCE:
        buf = torch.zeros(total, device=device)  # zeros while timing: repeated sums stay finite
        return (lambda g, async_op=False: dist.all_reduce(buf, group=g, async_op=async_op)), buf, buf, total
    raise ValueError(f"unknown op {op!r}")


def _count_wrong(op: str, fn: Collective, inp: Any, out: Any, *, n: int, grank: int, group: Any) -> int:
    """One checked run with known inputs, like nccl-tests' validation pass; the values keep every partial sum
    exact in float32 at any world size and in any reduction order (``checkvalues``)."""
    if op == Op.ALL_GATHER:
        fn(group)
        want = torch.tensor(gather_expected(n), dtype=out.dtype, device=out.device).repeat_interleave(out.numel() // n)
        return int((out != want).sum())
    if op == Op.REDUCE_SCATTER:
        fn(group)
        return int((out != reduce_expected(n)).sum())
    inp.fill_(reduce_value(grank))
    fn(group)
    return int((out != reduce_expected(n)).sum())


def _world_reduce(device: str, seconds: float, wrong: int) -> tuple[list[float], int]:
    """Every rank's time (world rank order: the slowest rank can be named, and the mean over ranks is
    nccl-tests' figure) and the total wrong elements (all concurrent groups included)."""
    t = torch.zeros(dist.get_world_size(), dtype=torch.float64, device=device)
    t[dist.get_rank()] = seconds
    w = torch.tensor([wrong], dtype=torch.int64, device=device)
    dist.all_reduce(t)  # each rank fills its own slot: the sum is the gather
    dist.all_reduce(w)
    return [float(x) for x in t.tolist()], int(w.item())


def measure(op: Op, group_name: Group, group: Any, size: int, *, cfg: BenchConfig, device: str,
            inside: Callable[[], None] | None = None) -> Measurement:
    """One (op, group, size) point; every rank of the world calls it (each in its own sub-group).
    ``inside`` runs between the warm-up and the timed loop (``Stages.inside``)."""
    n = dist.get_world_size(group)
    grank = dist.get_rank(group)
    size = round_size(size, n)
    iters = cfg.iters or auto_iters(size, budget_bytes=cfg.budget_bytes)
    fn, inp, out, count = _buffers(op, size, n, grank, device)
    for _ in range(cfg.warmup):
        fn(group)
    if inside is not None:
        inside()
    seconds = time_loop(fn, group, iters, device)
    wrong = _count_wrong(op, fn, inp, out, n=n, grank=grank, group=group)
    times, wrong = _world_reduce(device, seconds, wrong)
    seconds = max(times)
    return Measurement(op=op, group=group_name, group_size=n, size_bytes=size, count=count, iters=iters,
                       time_us=seconds * US, algbw_gbps=size / seconds / GB if seconds else 0.0,
                       busbw_gbps=busbw_gbps(op, size, seconds, n), wrong=wrong,
                       rank_time_us=tuple(t * US for t in times))


# --- the node-pair pass ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PingPong:
    """One rail's exchange with its partner rank on the world group (point-to-point: only the two ranks
    that talk connect). ``run(group, async_op)`` is one exchange (a ``Collective``; ``group`` is None, the
    world), ``check()`` one checked exchange (the wrong elements received), ``handshake()`` a one-element
    exchange that lines the two ends up before timing."""

    run: Collective
    check: Callable[[], int]
    handshake: Callable[[], None]


def ping_pong(size: int, ends: tuple[int, int], rank: int, device: str, *,
              isend: Callable[..., Any] = dist.isend, irecv: Callable[..., Any] = dist.irecv) -> PingPong:
    """``size`` bytes one way, then back, one direction at a time, between world ranks ``ends``.
    Synchronously (each leg waited for: Gloo, whose host-driven transport would send every queued leg at once,
    both ways), or with ``async_op`` queued without a wait (CUDA: the pair's legs run in order on one NCCL
    stream, so a queue of exchanges is still a ping-pong, and the timed loop waits once, on the stream;
    ``timing``). ``isend``/``irecv``: torch.distributed's, or a test's."""
    first = rank == ends[0]
    other = ends[1] if first else ends[0]
    send = torch.full((size // FLOAT32_BYTES,), gather_value(rank), device=device)
    recv = torch.empty(size // FLOAT32_BYTES, device=device)
    token = torch.zeros(1, device=device)
    slow_text, _, delay = os.environ.get(SLOW_RANK_ENV, "").partition(":")
    slow_s = float(delay) if slow_text == str(rank) and delay else 0.0

    def exchange(out: Any, into: Any, async_op: bool = False) -> Any:
        legs = ((isend, out), (irecv, into)) if first else ((irecv, into), (isend, out))
        work = None
        for leg, tensor in legs:
            work = leg(tensor, other)
            if not async_op:
                work.wait()
        return work  # the second leg's: on one stream, it completes after the first

    def run(group: Any = None, async_op: bool = False) -> Any:
        if slow_s:
            time.sleep(slow_s)  # test seam: a slow rail (one rank's NIC) on a machine without one
        return exchange(send, recv, async_op)

    def check() -> int:
        recv.zero_()
        run(None)
        return int((recv != gather_value(other)).sum())

    return PingPong(run=run, check=check, handshake=lambda: exchange(token, token))


def measure_round(pairs: list[tuple[int, int]], node_ranks: Sequence[Sequence[int]], *, round_no: int,
                  size_bytes: int, iters: int, warmup: int, device: str = "cpu",
                  nics: Sequence[str | None] = (), shared: bool = False, budget_s: float = PAIR_LOOP_BUDGET_S,
                  timeout_s: float | None = None) -> list[PairResult]:
    """All rails of all pairs of a round at once (``pairs.plan_rails``): local rank i of node a ping-pongs
    local rank i of node b, point-to-point on the world group: no group is created (a ``new_group`` per
    rail is a store barrier over every rank, thousands per round on a large cluster). One checked exchange
    first (it also warms the connection), then ``warmup - 1`` more (the fastest of them is the rail's pace); a world
    all-reduce of the paces lines the rails up and gives every rank each rail's count (``pairs.rail_iters``:
    ``iters``, or fewer where they would not fit ``budget_s``), then each rail's two ranks shake hands and
    time their exchanges. The closing all-reduce waits ``pairs.closing_deadline_s`` at most (``timeout_s``: the
    collective timeout, its cap). Every rank, in a rail or not (the odd node out), makes the same three world
    all-reduces, so none waits on a rank that never calls.
    Every rank returns every pair's result, each with its rails; ``shared``: the rails share the link, so a
    pair's figure is their sum (``pairs.pair_figure``)."""
    rank = dist.get_rank()
    rails = plan_rails(pairs, node_ranks)
    paces = torch.zeros(len(rails), dtype=torch.float64, device=device)
    times = torch.zeros(len(rails), dtype=torch.float64, device=device)
    wrong = torch.zeros(len(rails), dtype=torch.int64, device=device)
    mine = [(k, ping_pong(size_bytes, r.ranks, rank, device)) for k, r in enumerate(rails) if rank in r.ranks]
    for k, pp in mine:
        t0 = time.perf_counter()
        wrong[k] = pp.check()  # reading the count waits for the exchange: the host clock times it
        pace = time.perf_counter() - t0  # with the connection's setup: errs towards fewer exchanges
        for _ in range(warmup - 1):
            t0 = time.perf_counter()
            pp.run(None)  # the world group
            if device.startswith("cuda"):
                torch.cuda.synchronize()  # without blocking wait, Work.wait() returns before the exchange ends
            pace = min(pace, time.perf_counter() - t0)
        paces[k] = pace
    dist.all_reduce(paces, op=dist.ReduceOp.MAX)  # every rail starts timing together: they share the fabric
    pace_s = [float(x) for x in paces.tolist()]
    counts = [rail_iters(iters, p, budget_s) for p in pace_s]
    for k, pp in mine:
        times[k] = time_loop(pp.run, None, counts[k], device, barrier=pp.handshake)
    _closing_max(times, closing_deadline_s([n * p for n, p in zip(counts, pace_s, strict=True)], timeout_s))
    dist.all_reduce(wrong)
    secs, bad = [float(x) for x in times.tolist()], [int(x) for x in wrong.tolist()]
    nic = list(nics) or [None] * dist.get_world_size()
    out = []
    for k, (a, b) in enumerate(pairs):
        mine_k = [RailResult(rail=r.rail, ranks=r.ranks, time_us=secs[j] * US,
                             busbw_gbps=pair_gbps(size_bytes, secs[j]), wrong=bad[j],
                             nics=(nic[r.ranks[0]], nic[r.ranks[1]]), iters=counts[j])
                  for j, r in enumerate(rails) if r.pair == k]
        out.append(PairResult(a=a, b=b, size_bytes=size_bytes, iters=min(r.iters for r in mine_k),
                              time_us=max(r.time_us for r in mine_k),
                              busbw_gbps=pair_figure(mine_k, shared), wrong=sum(r.wrong for r in mine_k),
                              round=round_no, rails=tuple(mine_k), rails_shared=shared))
    return out


def _closing_max(times: Any, deadline_s: float) -> None:
    """The round's closing all-reduce (the slowest time of each rail, to every rank), waited for
    ``deadline_s`` at most: a rail stuck inside its loop fails this round then, naming it, not the timeout."""
    try:
        dist.all_reduce(times, op=dist.ReduceOp.MAX, async_op=True).wait(timeout=timedelta(seconds=deadline_s))
    except RuntimeError as exc:
        raise RuntimeError(f"the rails' closing all-reduce passed its deadline ({deadline_s:.0f} s after this "
                           f"rank's rails finished): a rail stopped inside its timed exchanges ({exc})") from exc


def localise(node_ranks: Sequence[Sequence[int]], *, size_bytes: int, iters: int, warmup: int = 1,
             floor_gbps: float = 0.0, device: str = "cpu", nics: Sequence[str | None] = (), shared: bool = False,
             ratio: float = SLOW_RATIO, on_round: Callable[[int, list[tuple[int, int]]], None] | None = None,
             on_measured: Callable[[int, list[PairResult]], None] | None = None,
             budget_s: float = PAIR_LOOP_BUDGET_S, timeout_s: float | None = None) -> Localisation:
    """Rounds until every node is resolved (or nothing new can be tested); the same result on every rank.
    ``node_ranks``: each node's world ranks in local-rank order (rail i is each node's i-th). ``nics``: each
    world rank's NIC where known. ``on_round(i, pairs)`` runs before round i (stage marks),
    ``on_measured(i, results)`` after it. The exchanges time out with the world group (its init timeout);
    ``budget_s`` bounds each rail's timed loop and ``timeout_s`` caps the rounds' closing deadline
    (``measure_round``)."""
    t0 = time.monotonic()
    loc = Localisation(nnodes=len(node_ranks), floor_gbps=floor_gbps, slow_ratio=ratio)
    pairs = first_round(len(node_ranks))
    while pairs:
        i = len(loc.rounds) + 1
        if on_round:
            on_round(i, pairs)
        results = measure_round(pairs, node_ranks, round_no=i, size_bytes=size_bytes, iters=iters, warmup=warmup,
                                device=device, nics=nics, shared=shared, budget_s=budget_s, timeout_s=timeout_s)
        loc.add(results)
        if on_measured:
            on_measured(i, results)
        pairs = next_round(loc)
    loc.seconds = time.monotonic() - t0
    return loc


def measure_nodes(result: BenchResult, cfg: BenchConfig, stages: Stages, *, progress: Progress | None = None,
                  done: int = 0, total: int = 0, say: Callable[[str], None] | None = None) -> Localisation:
    """The node-pair pass (``pairs.py``): every local rank of a node ping-pongs ``pair_size`` bytes with the
    same local rank of a partner node (rail by rail, all at once), disjoint pairs at once, suspects then
    against known-good nodes. Fills ``result.pairs``; each round is a stage ("node-pairs round 2:
    n1<->n3"), so a hang names it and who never arrived."""
    nodes = result.nodes
    size = round_size(cfg.pair_size, PAIR_RANKS)
    iters = cfg.iters or auto_iters(size, budget_bytes=cfg.budget_bytes, lo=PAIR_MIN_ITERS)
    rails = min(len(n.ranks) for n in nodes)
    known = [y for n in nodes if (y := pair_expected_gbps(n, rails))]
    text, result.pairs_predicted_s = plan_line(len(nodes), size, max(cfg.warmup, 1) + iters,
                                               min(known) if known else None)
    if say:
        say(text)
    host_of = {r: n.host for n in nodes for r in n.ranks}
    world = list(range(dist.get_world_size()))

    def on_round(i: int, pairs: list[tuple[int, int]]) -> None:
        stages.enter(pairs_stage(i, [(nodes[a].host, nodes[b].host) for a, b in pairs]))

    def on_measured(i: int, results: list[PairResult]) -> None:
        if progress:
            progress(done + i, max(total, done + i), f"node pairs round {i}", None)

    nics = _guard(stages, world, host_of, lambda: _rank_nics(result.device))
    shared = rails_share_links(nodes, rails)
    loc = _guard(stages, world, host_of, lambda: localise(
        [n.ranks for n in nodes], size_bytes=size, iters=iters, warmup=cfg.warmup,
        floor_gbps=floor_gbps(nodes, result.backend, 1 if shared else rails), device=result.device, nics=nics,
        shared=shared, ratio=slow_ratio(result.backend), on_round=on_round, on_measured=on_measured,
        budget_s=pair_loop_budget_s(cfg.timeout_s), timeout_s=cfg.timeout_s))
    result.pairs, result.pairs_seconds = loc.results, loc.seconds
    return loc


def _rank_nics(device: str) -> list[str | None]:
    """Each world rank's NIC (the probe's nearest to its GPU; ``rails.rank_nics``), gathered as JSON.
    Only GPU ranks have one; each node's local rank 0 probes once."""
    addr, nic_map = None, None
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        addr = rank_gpu_address(props, os.environ)
        if int(os.environ.get("LOCAL_RANK", "0")) == 0:
            try:
                nic_map = gpu_nics(probe_node("/", os.environ))
            except (InputError, OSError):
                nic_map = None  # no NIC names: the rails are still measured and named by local rank
    node = os.environ.get("GROUP_RANK") or socket.gethostname()
    got = all_gather_json({"node": node, "addr": addr, "nics": nic_map})
    return rank_nics([_nic_entry(r, e) for r, e in enumerate(got)])


def _nic_entry(rank: int, entry: Any) -> tuple[str, str | None, dict[str, str] | None]:
    """One rank's ``_rank_nics`` entry, checked: (node, GPU PCI address, GPU -> NIC map)."""
    d = expect(entry, rank, "NIC data", {"node": (str,), "addr": OPTIONAL_STR, "nics": (dict, type(None))})
    nics = d["nics"]
    if nics is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in nics.items()):
        raise PeerDataError(f"rank {rank} sent malformed NIC data (the GPU -> NIC map)")
    return d["node"], d["addr"], nics


# --- the whole run ---------------------------------------------------------------------------------
def run_bench(cfg: BenchConfig, *, env: Mapping[str, str] = os.environ, progress: Progress | None = None,
              stages: Stages | None = None) -> BenchResult:
    """The whole sweep inside an already initialised default process group. Raises ``BenchFailure``
    naming the stage and the ranks that never reached it when a collective fails or times out."""
    t0 = time.monotonic()
    backend = Backend(str(dist.get_backend()))  # the group init_from_env made: one backend, NCCL or Gloo
    device = f"cuda:{torch.cuda.current_device()}" if backend is Backend.NCCL else "cpu"
    stages = stages or Stages(dist.get_rank(), socket.gethostname(), env)
    world = list(range(dist.get_world_size()))
    stages.enter(Stage.TOPOLOGY)
    stages.world_size = len(world)
    nodes = _guard(stages, world, {}, lambda: gather_nodes(env, backend))
    cpus = _guard(stages, world, {}, lambda: gather_cpus(all_gather_json))
    host_of = {r: n.host for n in nodes for r in n.ranks}
    stages.hosts.update(host_of)
    stages.enter(Stage.GROUPS)
    groups, skipped = _guard(stages, world, host_of, lambda: build_groups(nodes, device, cfg.groups))
    result = BenchResult(backend=backend, device=device, world_size=len(world),
                         local_world_size=len(nodes[0].ranks), nodes=nodes, skipped=skipped, rank_cpus=cpus)
    rounds = predict_rounds(len(nodes))[0] if cfg.pairs else 0  # when healthy
    total = len(groups) * len(cfg.ops) * len(cfg.sizes) + rounds
    done = 0
    for gname, group in groups.items():
        for op in cfg.ops:
            for size in cfg.sizes:
                stages.enter(measure_stage(op, gname, size))
                m = _guard(stages, world, host_of, lambda: measure(op, gname, group, size, cfg=cfg, device=device,  # noqa: B023
                                                                   inside=stages.inside))
                result.results.append(m)
                done += 1
                if progress:
                    progress(done, total, measure_stage(op, gname, m.size_bytes), m)
    measure_gpu_pairs(result, cfg, stages, env=env, guard=lambda fn: _guard(stages, world, host_of, fn))
    if rounds:
        say = (lambda text: print(f"nccl-doctor bench: {text}", file=sys.stderr, flush=True)) if progress else None
        measure_nodes(result, cfg, stages, progress=progress, done=done, total=total, say=say)
    stages.enter(Stage.DONE)
    result.elapsed_s = time.monotonic() - t0
    return result


def _guard(stages: Stages, ranks: list[int], host_of: dict[int, str], fn: Callable[[], T]) -> T:
    """``fn`` inside the current stage, watched (``Stages.rearm``) and left when it returns; an error (Gloo's
    timeouts and closed pairs, NCCL's errors) becomes a ``BenchFailure`` naming the ranks that never reached
    the stage and those that entered it and never left. A hang is the watchdog's (``Stages``): no blocking
    wait, PyTorch's own timeout is later than ours (``watchdog.torch_timeout_s``)."""
    stages.hosts.update(host_of)
    stages.rearm()
    try:
        out = fn()
    except (RuntimeError, dist.DistError, dist.DistBackendError) as exc:
        stages.disarm()  # the failure is the report: the watchdog must not fire for this stage later
        stuck = stages.overdue(0.0, ranks)
        raise BenchFailure(stages.current, list(stuck.missing), list(stuck.missing_hosts), str(exc),
                           never_left=list(stuck.never_left), never_left_hosts=list(stuck.never_left_hosts)) from exc
    stages.leave()
    return out


def share_code(code: int, device: str, stages: Stages | None = None) -> int:
    """Rank 0's exit code, on every rank; with ``stages``, in the watched stage ``verdict``."""
    if stages is not None:
        stages.enter(Stage.VERDICT)
    t = torch.tensor([code], dtype=torch.int64, device=device)
    dist.broadcast(t, src=0)
    if stages is not None:
        stages.enter(Stage.DONE)
    return int(t.item())
