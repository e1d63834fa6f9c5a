"""The model's formulas on hand-computed cases, and the choice among candidates (the 5% tie rule)."""

import pytest

from nccl_doctor.plan.costs import broken_fabric, candidate, make_plan, recommend, shard_sizes, state_gb
from nccl_doctor.plan.model import Bandwidths, Candidate, Figure, PlanInputs


def fig(value, source="test"):
    return Figure(value=value, source=source)


def plan_inputs(*, params, nodes, gpus, intra, inter, mem=10.0, headroom=0.5, compute=None, failed=None):
    bw = Bandwidths(intra_all_gather=fig(intra), intra_reduce_scatter=fig(intra), world_all_gather=fig(inter),
                    world_reduce_scatter=fig(inter), inter_all_reduce=fig(inter))
    return PlanInputs(params=fig(params), nodes=fig(nodes), gpus_per_node=fig(gpus), param_dtype="bf16",
                      reduce_dtype="fp32", gpu_mem_gb=fig(mem), headroom=fig(headroom),
                      step_compute_s=fig(compute) if compute else None, bandwidths=bw, failed=failed)


def test_shard_sizes_double_from_one_node_to_the_world_and_divide_it():
    assert shard_sizes(8, 128) == (8, 16, 32, 64, 128)
    assert shard_sizes(8, 8) == (8,)
    assert shard_sizes(8, 24) == (8, 24)  # 16 does not divide 24: no whole number of replicas


def test_hsdp_within_a_node_beats_full_shard_over_a_slow_fabric():
    """P = 1e9, 2 nodes x 4 GPUs, bf16 params, fp32 reduce, 100 GB/s intra, 10 GB/s inter.
    S=4, R=2: AG 2*1e9*2*(3/4)/100e9 = 0.03, RS 1e9*4*(3/4)/100e9 = 0.03, AR 2*(4e9/4)*(1/2)/10e9 = 0.1 -> 0.16 s.
    S=8, R=1: AG 2*1e9*2*(7/8)/10e9 = 0.35, RS 1e9*4*(7/8)/10e9 = 0.35 -> 0.70 s."""
    inputs = plan_inputs(params=1e9, nodes=2, gpus=4, intra=100, inter=10)
    hsdp, fsdp = candidate(inputs, 4), candidate(inputs, 8)
    assert hsdp.comm_s == pytest.approx(0.16)
    assert fsdp.comm_s == pytest.approx(0.70)
    assert (hsdp.state_gb_per_gpu, fsdp.state_gb_per_gpu) == (pytest.approx(4.0), pytest.approx(2.0))
    assert hsdp.fits and fsdp.fits  # <= 0.5 x 10 GB
    plan = make_plan(inputs)
    assert plan.recommended == hsdp and plan.recommended.mesh == (2, 4)


def test_a_model_that_fits_only_when_sharded_across_nodes():
    """P = 1e9 on 4 nodes x 2 GPUs, 5 GB allowed: S=2 holds 8 GB (no), S=4 4 GB, S=8 2 GB.
    S=4, R=2 (world figures, 10 GB/s): AG 0.3 + RS 0.3 + AR 2*(1e9)*(1/2)/10e9 = 0.1 -> 0.7 s;
    S=8: AG 2*1e9*2*(7/8)/10e9 = 0.35 + RS 0.35 -> 0.7 s: a tie, won by the smaller shard."""
    plan = make_plan(plan_inputs(params=1e9, nodes=4, gpus=2, intra=100, inter=10))
    by_size = {c.shard_size: c for c in plan.candidates}
    assert not by_size[2].fits and by_size[4].fits and by_size[8].fits
    assert by_size[4].comm_s == pytest.approx(0.7) and by_size[8].comm_s == pytest.approx(0.7)
    assert plan.recommended is by_size[4]


def test_a_model_that_fits_nowhere_says_how_many_gpus_it_would_take():
    """1T parameters = 16e12 bytes of states; 0.6 x 80 GB = 48 GB a GPU: 333.3 -> 334 GPUs -> 42 nodes of 8."""
    plan = make_plan(plan_inputs(params=1e12, nodes=2, gpus=8, intra=300, inter=40, mem=80, headroom=0.6))
    assert plan.recommended is None
    assert not any(c.fits for c in plan.candidates)
    assert plan.gpus_needed == 336


def test_state_is_16_bytes_a_parameter_over_the_shard():
    assert state_gb(70e9, 128) == pytest.approx(16 * 70e9 / 128 / 1e9)


def _c(shard, comm, fits=True):
    return Candidate(shard_size=shard, replicas=64 // shard, state_gb_per_gpu=1.0, fits=fits, comm_s=comm)


def test_tie_rule_takes_the_smallest_shard_within_five_percent():
    assert recommend((_c(16, 1.0), _c(32, 0.94), _c(64, 0.90))).shard_size == 32  # 0.94 <= 0.945
    assert recommend((_c(16, 1.0), _c(32, 0.95), _c(64, 0.90))).shard_size == 64  # 0.95 > 0.945
    assert recommend((_c(16, 0.5, fits=False), _c(32, 0.95), _c(64, 0.90))).shard_size == 64  # unfit never wins
    assert recommend((_c(16, 0.5, fits=False),)) is None


def test_compute_share_is_comm_over_compute():
    inputs = plan_inputs(params=1e9, nodes=2, gpus=4, intra=100, inter=10, compute=0.32)
    assert candidate(inputs, 4).compute_share == pytest.approx(0.5)


def test_a_fabric_below_5_gbps_between_nodes_is_broken():
    assert "below 5 GB/s" in broken_fabric(plan_inputs(params=1e9, nodes=2, gpus=8, intra=300, inter=4.9))
    assert broken_fabric(plan_inputs(params=1e9, nodes=2, gpus=8, intra=300, inter=5)) is None
    assert broken_fabric(plan_inputs(params=1e9, nodes=1, gpus=8, intra=0.1, inter=0.1)) is None  # no fabric used
    assert broken_fabric(plan_inputs(params=1e9, nodes=2, gpus=8, intra=300, inter=50, failed="it failed")) \
        == "it failed"
