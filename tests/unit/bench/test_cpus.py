"""CPU starvation is named, not read as a bad fabric (``bench.cpus``, issue 21 point 8): each node's CPUs per
rank against what its backend needs, 2 for NCCL (the rank's thread and NCCL's proxy thread), 1 for Gloo."""

import pytest

from nccl_doctor.bench.backend import Backend
from nccl_doctor.bench.cpus import (
    GLOO_MIN_CPUS,
    NCCL_MIN_CPUS,
    cpulist,
    gather_cpus,
    judge_cpus,
    node_cpus,
    own_entry,
    parse_cpulist,
    rank_cpus,
)
from nccl_doctor.bench.model import BenchResult, NodeInfo, RankCpus


def result(backend, per_node_cpus, ranks_per_node):
    """Nodes n1.. with ``ranks_per_node`` ranks each, every rank of node i on the CPUs ``per_node_cpus[i]``."""
    nodes, cpus = [], []
    for i, mine in enumerate(per_node_cpus):
        ranks = tuple(range(i * ranks_per_node, (i + 1) * ranks_per_node))
        nodes.append(NodeInfo(index=i, host=f"n{i + 1}", ranks=ranks, iface=None, link_gbps=None))
        cpus += [RankCpus(len(mine), frozenset(mine))] * ranks_per_node
    return BenchResult(backend=backend, device="cpu", world_size=len(cpus), local_world_size=ranks_per_node,
                       nodes=nodes, rank_cpus=cpus)


def test_cpulist_is_the_kernels_form_both_ways():
    assert cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert parse_cpulist("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert parse_cpulist("3-1") is None and parse_cpulist("x") is None


def test_what_a_rank_sends_and_what_is_read_back():
    assert own_entry(range(96)) == {"count": 96, "list": "0-95"}
    assert own_entry(range(0, 2048, 2))["list"] is None  # scattered: only the count travels
    assert rank_cpus({"count": 2, "list": "0-1"}) == RankCpus(2, frozenset({0, 1}))
    assert rank_cpus({"count": 1024, "list": None}) == RankCpus(1024)
    assert rank_cpus({"count": 0, "list": ""}) is None and rank_cpus("junk") is None
    assert rank_cpus({"count": True}) is None


def test_gather_goes_through_the_exchange_it_is_given():
    sent = []
    got = gather_cpus(lambda mine: sent.append(mine) or [mine, {"count": 4, "list": "4-7"}], cpus={0})
    assert sent == [{"count": 1, "list": "0"}] and got == [RankCpus(1, frozenset({0})), RankCpus(4, frozenset(range(4, 8)))]


def test_ranks_sharing_one_cpu_and_ranks_pinned_one_each():
    shared = [RankCpus(1, frozenset({0}))] * 8
    assert node_cpus(shared) == (1, "0", 0.125)
    pinned = [RankCpus(1, frozenset({k})) for k in range(8)]
    assert node_cpus(pinned) == (8, "0-7", 1.0)
    assert node_cpus([RankCpus(16)] * 8) == (16, None, 2.0)


def test_slurm_default_of_one_cpu_per_task_warns_on_nccl():
    """8 GPUs, one task per node, no --cpus-per-task: every rank on one CPU."""
    (f,) = judge_cpus(result(Backend.NCCL, [{0}, set(range(64))], 8))
    assert (f.code, f.severity.value, f.where.host) == ("ND314", "warn", "n1")
    assert "8 NCCL rank(s) may run on 1 CPU(s) (CPU 0): 0.12 per rank, below the 2" in f.message
    assert "--cpus-per-task=16" in f.fix and "--exclusive" in f.fix and "DefCpuPerGPU" in f.fix


@pytest.mark.parametrize(("backend", "cpus", "ranks", "warns"), [
    (Backend.NCCL, 16, 8, False),  # 2 per rank: the rank and its proxy thread
    (Backend.NCCL, 8, 8, True),  # 1 per rank: the proxy thread waits for the rank's
    (Backend.GLOO, 2, 2, False),  # this box: 2 ranks on 2 CPUs, a fair (CPU-bound by nature) Gloo run
    (Backend.GLOO, 2, 4, True),  # 4 ranks time-slice 2 CPUs
    (Backend.GLOO, 1, 4, True),  # `taskset -c 0 nccl-doctor bench --cpu --nproc-per-node 4`
])
def test_thresholds_per_backend(backend, cpus, ranks, warns):
    assert NCCL_MIN_CPUS == 2 and GLOO_MIN_CPUS == 1
    assert bool(judge_cpus(result(backend, [set(range(cpus))], ranks))) is warns


def test_unknown_cpus_are_no_finding():
    r = result(Backend.NCCL, [{0}], 8)
    r.rank_cpus = [None, *r.rank_cpus[1:]]  # one rank's entry unreadable
    assert judge_cpus(r) == []
    r.rank_cpus = []  # an older worker, or a result built without them
    assert judge_cpus(r) == []


def test_a_peers_cpulist_is_bounded_before_a_set_is_built_from_it():
    """The attack: a rank sends a cpulist naming billions of CPUs, or a megabyte of them; every rank would
    build that set. Each is an unknown CPU list instead (no finding from it, no set)."""
    from nccl_doctor.bench.cpus import MAX_LIST_CHARS, rank_cpus

    assert parse_cpulist("0-65536") is None  # without the bound: a set of 65,537 CPUs
    assert parse_cpulist("0-4294967295") is None
    assert parse_cpulist(",".join(["1"] * MAX_LIST_CHARS)) is None  # longer than any rank sends
    assert parse_cpulist("0,65535") == frozenset({0, 65535})
    hostile = rank_cpus({"count": 4294967296, "list": "0-4294967295"})
    assert hostile is not None and hostile.cpus is None
