"""The smoke test must learn: on one fixed batch the loss falls, else it is a problem (issue 15, point 1)."""

from __future__ import annotations

from nccl_doctor.preflight.fsdp_smoke import loss_problems


def test_a_falling_loss_passes():
    assert loss_problems([4.95, 3.24, 2.12]) == []


def test_a_loss_that_does_not_fall_is_a_problem():
    (why,) = loss_problems([4.951, 5.0, 5.143])  # what the smoke printed on a new random batch each step
    assert "did not fall" in why and "4.951 -> 5.143" in why


def test_a_non_finite_loss_is_a_problem():
    (why,) = loss_problems([4.9, float("nan"), 3.0])
    assert "non-finite" in why
