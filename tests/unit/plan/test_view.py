"""The reason in one sentence: it names why this mesh won (the only fit, the least communication, the tie rule)."""

from nccl_doctor.plan.model import Candidate, Plan
from nccl_doctor.plan.view import count_text, reason


def _c(shard, comm, fits=True):
    return Candidate(shard_size=shard, replicas=64 // shard, state_gb_per_gpu=1.0, fits=fits, comm_s=comm)


def test_the_only_fit():
    best = _c(64, 2.0)
    assert reason(Plan(candidates=(_c(32, 1.0, fits=False), best), recommended=best), best).startswith(
        "it is the only mesh whose model states fit")


def test_the_least_communication_names_the_next():
    best = _c(16, 0.5)
    assert reason(Plan(candidates=(best, _c(64, 0.9)), recommended=best), best) == (
        "it communicates least per step of the 2 meshes that fit (next: (1, 64) FSDP, 900.0 ms)")


def test_a_tie_won_by_the_smaller_shard_names_the_fastest():
    best = _c(16, 0.94)
    text = reason(Plan(candidates=(best, _c(32, 1.2), _c(64, 0.9)), recommended=best), best)
    assert text == "it is within 5% of the fastest mesh that fits ((1, 64) FSDP, 900.0 ms) and shards over fewer GPUs"


def test_parameter_counts_read_as_people_write_them():
    assert [count_text(n) for n in (70e9, 1.3e12, 350e6, 999)] == ["70B", "1.3T", "350M", "999"]
