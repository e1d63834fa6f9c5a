"""The intra-node GPU-pair pass (``bench.gpupairs``, ``bench.nvlinks``; ND315): which pairs are measured, which
GPU a slow pair names, and NVML's NVLink state, from literal figures and a fake NVML module. The measuring
half (``gpupass.py``) runs on Gloo in tests/process/test_bench_rails.py; on NCCL only a GPU run shows it
(docs/benchmarks.md)."""

from dataclasses import replace

import pytest

from nccl_doctor.bench import judge
from nccl_doctor.bench.gpupairs import gpu_pairs_stage, judge_gpu_pairs, plan_gpu_pairs
from nccl_doctor.bench.model import BenchResult, GpuPairResult, NvLinkState
from nccl_doctor.bench.nvlinks import read_nvlinks, sysfs_address
from nccl_doctor.bench.view import build_report
from tests.unit.bench.test_rails import LOCAL, ib_node

NVLINK = 360.0  # a healthy H100 pair here (the yardstick is 370)


def all_pairs(n):
    return sorted(p for r in plan_gpu_pairs(n) for p in r)


def test_small_nodes_measure_every_pair_and_large_ones_their_ring_neighbours():
    assert plan_gpu_pairs(1) == [] and plan_gpu_pairs(2) == [[(0, 1)]]
    assert all_pairs(3) == [(0, 1), (0, 2), (1, 2)] and len(plan_gpu_pairs(3)) == 3
    assert plan_gpu_pairs(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    assert plan_gpu_pairs(8) == [[(0, 1), (2, 3), (4, 5), (6, 7)], [(1, 2), (3, 4), (5, 6), (0, 7)]]
    assert all_pairs(5) == [(0, 1), (0, 4), (1, 2), (2, 3), (3, 4)] and len(plan_gpu_pairs(5)) == 3  # past 4: the ring
    seven = plan_gpu_pairs(7)
    assert len(seven) == 3 and sorted(p for r in seven for p in r) == [(0, 1), (0, 6), (1, 2), (2, 3), (3, 4),
                                                                        (4, 5), (5, 6)]
    for rounds in (plan_gpu_pairs(n) for n in range(2, 17)):  # disjoint pairs in every round
        assert all(len({g for p in r for g in p}) == 2 * len(r) for r in rounds)
    assert gpu_pairs_stage(2, [(1, 2), (3, 4)]) == "gpu-pairs round 2: 1<->2 3<->4"


def pair(node: int, a: int, b: int, gbps: float, round_no: int = 1) -> GpuPairResult:
    base = node * LOCAL
    return GpuPairResult(node=node, local=(a, b), ranks=(base + a, base + b), size_bytes=64 << 20, iters=5,
                         time_us=1.0, busbw_gbps=gbps, wrong=0, round=round_no)


def ring(node: int, slow_gpu: int | None = None, slow_gbps: float = 30.0) -> list[GpuPairResult]:
    return [pair(node, a, b, slow_gbps if slow_gpu in (a, b) else NVLINK, i + 1)
            for i, r in enumerate(plan_gpu_pairs(LOCAL)) for a, b in r]


def result(pairs, nvlinks=(), nodes=2) -> BenchResult:
    return BenchResult(backend="nccl", device="cuda:0", world_size=nodes * LOCAL, local_world_size=LOCAL,
                       nodes=[ib_node(i) for i in range(nodes)], gpu_pairs=list(pairs), nvlinks=list(nvlinks))


def test_a_gpu_with_a_dead_nvlink_is_named_on_its_node_and_fails():
    """GPU 5 of n2 falls back to PCIe (30 GB/s, 8% of the others): both its ring pairs are slow, and only they;
    the node's intra group would only say "the group is slow"."""
    r = result(ring(0) + ring(1, slow_gpu=5))
    (f,) = [f for f in judge_gpu_pairs(r) if f.severity.value != "pass"]
    assert f.code == "ND315" and f.severity.value == "fail" and f.where.host == "n2" and f.where.rank == 13
    assert f.message == ("2 GPU pairs of 8 on n2 slow (GPUs 4<->5 30.0 GB/s; the node's best pair 360.0 GB/s, median "
                         "360.0, yardstick 370.0 GB/s; 64 MiB ping-pong): GPU 5 (local rank 5) is in every slow pair: "
                         "its NVLink, not its peers'")
    assert "nvidia-smi nvlink -s" in f.fix and "drain n2" in f.fix
    assert not [x for x in judge(r) if x.code == "ND300"]  # a FAIL: not "fit for training"


def test_half_speed_warns_one_slow_pair_names_its_path_and_healthy_passes():
    half = result(ring(0, slow_gpu=2, slow_gbps=150.0), nodes=1)
    (w,) = judge_gpu_pairs(half)
    assert w.severity.value == "warn" and "GPU 2 (local rank 2) is in every slow pair" in w.message
    one = result([*ring(0)[:-1], pair(0, 0, 7, 20.0, 2)], nodes=1)
    (f,) = judge_gpu_pairs(one)
    assert f.severity.value == "fail" and f.message.endswith("the path between GPUs 0 and 7")
    (ok,) = judge_gpu_pairs(result(ring(0) + ring(1)))
    assert ok.severity.value == "pass" and ok.message.startswith("16 GPU pairs on n[1-2]: slowest 360.0 GB/s")
    assert judge_gpu_pairs(result([])) == []


def test_every_pair_below_a_quarter_of_the_yardstick_fails_with_no_pair_to_compare():
    """Every NVLink of a node down alike: no pair stands out, but 40 of 370 GB/s is below a quarter."""
    (f,) = judge_gpu_pairs(result([replace(p, busbw_gbps=40.0) for p in ring(0)], nodes=1))
    assert f.severity.value == "fail" and "8 GPU pairs of 8 on n1 slow" in f.message


def test_nvml_names_a_gpu_with_fewer_nvlinks_up():
    """One NVLink of 18 down costs ~6%: invisible in the figures, named from NVML (FAIL with none up)."""
    states = [NvLinkState(node=0, gpu=f"0000:{0x18 + k:02x}:00.0", up=17 if k == 3 else 18, links=18) for k in range(8)]
    r = result(ring(0), nvlinks=states, nodes=1)
    (w,) = judge_gpu_pairs(r)
    assert w.severity.value == "warn" and w.where.host == "n1"
    assert "1 GPU on n1 with fewer NVLinks up than the others' 18 (NVML): 0000:1b:00.0 17 of 18" in w.message
    dead = [replace(s, up=0) if s.gpu.endswith("1b:00.0") else s for s in states]
    assert [f.severity.value for f in judge_gpu_pairs(replace(r, nvlinks=dead))] == ["fail"]
    doc = build_report(r, judge_gpu_pairs(r)).data["gpu_pairs"]
    assert len(doc["pairs"]) == 8 and doc["nvlinks"][3] == {"host": "n1", "gpu": "0000:1b:00.0", "up": 17, "links": 18}


class FakeNvml:
    """NVML's calls as pynvml makes them: devices by index, a PCI info record, a link state or an error."""

    NVML_NVLINK_MAX_LINKS = 18

    class NotSupportedError(Exception):
        pass

    def __init__(self, links: dict[str, list[int]], fail_init: bool = False):
        self.links, self.fail_init, self.shut = links, fail_init, False

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return len(self.links)

    def nvmlDeviceGetHandleByIndex(self, i):
        return list(self.links)[i]

    def nvmlDeviceGetPciInfo(self, handle):
        return type("PciInfo", (), {"busId": handle.encode()})()

    def nvmlDeviceGetNvLinkState(self, handle, link):
        states = self.links[handle]
        if link >= len(states):
            raise self.NotSupportedError("NVML_ERROR_NOT_SUPPORTED")
        return states[link]


def test_nvlink_state_is_read_through_nvml_and_pcie_cards_are_left_out():
    nvml = FakeNvml({"00000000:1B:00.0": [1] * 17 + [0], "00000000:43:00.0": [1] * 18, "00000000:C1:00.0": []})
    states, why = read_nvlinks(nvml)
    assert why is None and nvml.shut
    assert states == [("0000:1b:00.0", 17, 18), ("0000:43:00.0", 18, 18)]
    assert read_nvlinks(FakeNvml({}, fail_init=True)) == ([], "NVML did not start (NVML_ERROR_DRIVER_NOT_LOADED)")
    assert sysfs_address("0000:1B:00.0") == "0000:1b:00.0"


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_the_report_says_why_the_pass_did_not_run(backend):
    r = replace(result([], nodes=1), backend=backend)
    assert build_report(r, []).data["gpu_pairs"]["skipped"]


@pytest.mark.torch
def test_a_peers_nvlink_states_of_the_wrong_types_are_left_out_not_converted():
    """What a hostile or broken rank sends as its node's NVLink states: only ``[gpu, up, links]`` with a string
    and two counts is read; ``int("abc")`` on a peer's value ended every rank with a traceback."""
    from nccl_doctor.bench.gpupass import _nvlink_entry

    assert _nvlink_entry(["0000:00:06.0", 18, 18])
    for bad in (["g", "abc", 18], ["g", True, 18], [1, 2, 3], ["g", -1, 18], ["g", 18], "g,18,18", ["g", 1.5, 18]):
        assert not _nvlink_entry(bad), bad
